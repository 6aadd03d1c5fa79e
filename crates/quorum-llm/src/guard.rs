//! A guard on a streamed answer: it stops a generation that has stopped saying anything — the
//! same line or phrase over and over, or no JSON long after a JSON answer was asked for — so a
//! small model's loop costs a few hundred tokens instead of the whole output bound.
//!
//! Pure and incremental: the backend feeds it each streamed piece of text and drops the
//! connection when it answers with a [`Cut`]. Memory is bounded by the window it keeps.

/// What the guard watches for, in bytes of output (about 4 a token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardLimits {
    /// The tail of the output that is checked for repetition.
    pub window: usize,
    /// The longest repeating unit looked for (a repeated finding object is a few hundred bytes).
    pub max_period: usize,
    /// A repetition is cut once the repeated run covers this many bytes…
    pub min_span: usize,
    /// …and its unit occurs at least this many times in a row.
    pub min_repeats: usize,
    /// With a JSON answer expected: this much output without a `{` or `[` is cut.
    pub json_start: usize,
    /// The tail is checked after every this many new bytes, not after every token.
    pub check_every: usize,
}

impl Default for GuardLimits {
    fn default() -> Self {
        GuardLimits {
            window: 8 * 1024,
            max_period: 1024,
            min_span: 800,
            min_repeats: 4,
            json_start: 2048,
            check_every: 64,
        }
    }
}

/// Why the guard stopped a generation: one line, for the error the model is shown on retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub reason: String,
}

/// Watches one generation's output as it streams.
#[derive(Debug, Clone)]
pub struct OutputGuard {
    limits: GuardLimits,
    /// Output past this many bytes is cut whatever it says: a server that does not honour the
    /// output bound cannot stream without end.
    max_bytes: Option<usize>,
    expect_json: bool,
    json_started: bool,
    tail: Vec<u8>,
    total: usize,
    since_check: usize,
}

impl OutputGuard {
    /// A guard for an answer that must be JSON (`expect_json`) or any text.
    pub fn new(expect_json: bool) -> OutputGuard {
        OutputGuard::with_limits(expect_json, GuardLimits::default())
    }

    /// The guard for a request: JSON expected when it carries a schema; output far past its
    /// token bound (16 bytes a token, four times a token's usual size) is cut.
    pub fn for_request(req: &crate::types::ChatRequest) -> OutputGuard {
        let mut guard = OutputGuard::new(req.json_schema.is_some());
        guard.max_bytes = Some((req.max_tokens.max(1) as usize).saturating_mul(16));
        guard
    }

    pub fn with_limits(expect_json: bool, limits: GuardLimits) -> OutputGuard {
        OutputGuard {
            limits,
            max_bytes: None,
            expect_json,
            json_started: false,
            tail: Vec::with_capacity(limits.window.min(64 * 1024)),
            total: 0,
            since_check: 0,
        }
    }

    /// Output seen so far, in bytes.
    pub fn seen(&self) -> usize {
        self.total
    }

    /// Takes the next piece of streamed text; `Some` means stop the generation now.
    pub fn push(&mut self, piece: &str) -> Option<Cut> {
        self.take(piece, true)
    }

    /// Takes the next piece of a streamed tool call's arguments: they count against the output
    /// and may loop too, but they are not the answer a JSON schema asked for.
    pub fn push_arguments(&mut self, piece: &str) -> Option<Cut> {
        self.take(piece, false)
    }

    fn take(&mut self, piece: &str, answer: bool) -> Option<Cut> {
        if piece.is_empty() {
            return None;
        }
        self.total += piece.len();
        self.since_check += piece.len();
        if let Some(max) = self.max_bytes.filter(|max| self.total > *max) {
            return Some(Cut {
                reason: format!(
                    "the answer ran past {} bytes, far beyond its output bound",
                    max
                ),
            });
        }
        if answer && self.expect_json && !self.json_started {
            self.json_started = piece.contains(['{', '[']);
            if !self.json_started && self.total >= self.limits.json_start {
                return Some(Cut {
                    reason: format!(
                        "no JSON after about {} tokens of output",
                        self.total.div_ceil(4)
                    ),
                });
            }
        }
        self.tail.extend_from_slice(piece.as_bytes());
        // Keep at most twice the window, so trimming is amortised rather than per piece.
        if self.tail.len() > 2 * self.limits.window {
            let excess = self.tail.len() - self.limits.window;
            self.tail.drain(..excess);
        }
        if self.since_check < self.limits.check_every {
            return None;
        }
        self.since_check = 0;
        self.repetition().map(|(period, repeats)| Cut {
            reason: self.describe(period, repeats),
        })
    }

    /// The shortest unit that the end of the output repeats often and long enough to cut, with
    /// how many times it occurs in a row.
    fn repetition(&self) -> Option<(usize, usize)> {
        let start = self.tail.len().saturating_sub(self.limits.window);
        let s = &self.tail[start..];
        let n = s.len();
        if n < self.limits.min_span {
            return None;
        }
        for period in 1..=self.limits.max_period.min(n / 2) {
            // How far back from the end every byte equals the one a period before it.
            let mut run = 0;
            while run + period < n && s[n - 1 - run] == s[n - 1 - run - period] {
                run += 1;
            }
            let span = run + period;
            let repeats = span / period;
            if span >= self.limits.min_span && repeats >= self.limits.min_repeats {
                return Some((period, repeats));
            }
        }
        None
    }

    fn describe(&self, period: usize, repeats: usize) -> String {
        let unit = &self.tail[self.tail.len() - period..];
        // The unit is the period ending at the last byte: rotate it to start a line.
        let unit: Vec<u8> = match unit.iter().position(|&b| b == b'\n') {
            Some(at) => unit[at + 1..].iter().chain(&unit[..=at]).copied().collect(),
            None => unit.to_vec(),
        };
        let text = String::from_utf8_lossy(&unit);
        let shown: String = text.trim().chars().take(60).collect();
        let shown = shown.replace('\n', "\\n");
        let what = if text.trim().is_empty() {
            "whitespace".to_string()
        } else if text.contains('\n') && text.trim().lines().count() == 1 {
            format!("the line `{shown}`")
        } else {
            format!("`{shown}`")
        };
        format!(
            "the answer repeated {what} {repeats} times in a row; cut after about {} tokens",
            self.total.div_ceil(4)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in token-sized pieces; the output bytes at which the guard cut, if it did.
    fn feed(guard: &mut OutputGuard, text: &str) -> Option<(usize, Cut)> {
        let mut at = 0;
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(4) {
            let piece: String = piece.iter().collect();
            at += piece.len();
            if let Some(cut) = guard.push(&piece) {
                return Some((at, cut));
            }
        }
        None
    }

    #[test]
    fn one_line_forever_is_cut_early() {
        let mut g = OutputGuard::new(true);
        let text = format!(
            "{{\"findings\": [\n{}",
            "The function does not validate its input.\n".repeat(500)
        );
        let (at, cut) = feed(&mut g, &text).expect("cut");
        assert!(at < 1200, "cut only after {at} bytes");
        assert!(
            cut.reason
                .contains("the line `The function does not validate its input.`"),
            "{}",
            cut.reason
        );
        assert!(cut.reason.contains("times in a row"), "{}", cut.reason);
    }

    #[test]
    fn a_short_phrase_without_newlines_is_cut() {
        let mut g = OutputGuard::new(false);
        let (_, cut) = feed(&mut g, &"the the ".repeat(1000)).expect("cut");
        assert!(
            cut.reason.contains("`the the`") || cut.reason.contains("`the`"),
            "{}",
            cut.reason
        );
    }

    #[test]
    fn a_repeated_finding_object_is_cut() {
        let finding = r#"{"title": "SQL built from user input", "file": "src/db.py", "line_start": 53, "evidence": "name LIKE '%{term}%'", "severity": "P1"},"#;
        let mut g = OutputGuard::new(true);
        let text = format!("{{\"findings\": [{}", finding.repeat(50));
        let (at, _) = feed(&mut g, &text).expect("cut");
        assert!(at < finding.len() * 8, "cut only after {at} bytes");
    }

    #[test]
    fn whitespace_forever_is_cut() {
        let mut g = OutputGuard::new(false);
        let (_, cut) = feed(&mut g, &"\n".repeat(5000)).expect("cut");
        assert!(cut.reason.contains("whitespace"), "{}", cut.reason);
    }

    #[test]
    fn prose_when_json_was_asked_for_is_cut_after_the_bound() {
        let prose: String = (0..80)
            .map(|i| format!("Point {i}: the handler at line {i} reads the body twice. "))
            .collect();
        let mut g = OutputGuard::new(true);
        let (at, cut) = feed(&mut g, &prose).expect("cut");
        assert!((2048..2060).contains(&at), "{at}");
        assert!(
            cut.reason.starts_with("no JSON after about 51"),
            "{}",
            cut.reason
        );
        // The same prose is fine when no JSON was asked for, and JSON after a short preamble too.
        assert_eq!(feed(&mut OutputGuard::new(false), &prose), None);
        let late = format!("{}{{\"findings\": []}}", &prose[..1000]);
        assert_eq!(feed(&mut OutputGuard::new(true), &late), None);
    }

    #[test]
    fn an_ordinary_findings_answer_is_never_cut() {
        // Pretty-printed JSON repeats short lines (`},`, `"severity": "P2",`) but never in a row.
        let findings: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    "    {{\n      \"title\": \"Unchecked index {i}\",\n      \"file\": \"src/m{i}.rs\",\n      \"line_start\": {},\n      \"severity\": \"P2\",\n      \"evidence\": \"let x = v[{i}];\"\n    }}",
                    i * 3 + 1
                )
            })
            .collect();
        let text = format!("{{\n  \"findings\": [\n{}\n  ]\n}}\n", findings.join(",\n"));
        let mut g = OutputGuard::new(true);
        assert_eq!(feed(&mut g, &text), None);
        // A separator line or a short run of a repeated character is not a loop.
        let mut g = OutputGuard::new(false);
        let md = format!(
            "# Report\n{}\n| a | b |\n|---|---|\n| 1 | 2 |\n",
            "=".repeat(120)
        );
        assert_eq!(feed(&mut g, &md), None);
    }

    #[test]
    fn output_far_past_the_bound_is_cut() {
        let req = crate::types::ChatRequest::new("m", Vec::new(), 10);
        let mut g = OutputGuard::for_request(&req);
        let varied: String = (0..60).map(|i| format!("w{i} ")).collect();
        let (at, cut) = feed(&mut g, &varied).expect("cut");
        assert!(at > 160 && at <= 164, "{at}");
        assert!(
            cut.reason.contains("beyond its output bound"),
            "{}",
            cut.reason
        );
    }

    #[test]
    fn memory_stays_bounded() {
        let limits = GuardLimits::default();
        let mut g = OutputGuard::new(false);
        for i in 0..20_000 {
            assert_eq!(g.push(&format!("token{i} ")), None);
        }
        assert!(g.tail.len() <= 2 * limits.window, "{}", g.tail.len());
        assert!(g.seen() > 100_000);
    }
}
