//! Deterministic grounding: does the cited code exist where the finding says it does?
//!
//! Runs before any model sees a finding. A finding whose file is not in the pack, whose lines are
//! out of range, or whose quoted evidence does not occur near the cited lines (whitespace
//! ignored) is HALLUCINATED without a model call; a finding with no location is UNVERIFIABLE.
//!
//! The rules, in order:
//! - no file: UNVERIFIABLE ("no location given");
//! - a file the pack does not hold (after [`ContextPack::resolve`]'s normalisation): HALLUCINATED;
//! - lines given: a reversed range is swapped (models do that); line 0 or a line past the end of
//!   the file is HALLUCINATED;
//! - evidence is required: a quote with fewer than [`MIN_EVIDENCE_CHARS`] non-whitespace
//!   characters — none at all, "x", "}" — is UNVERIFIABLE, unless it is a whole line of the file
//!   of at least [`MIN_WHOLE_LINE_CHARS`] ("pass", "break;"): a location alone proves nothing;
//! - lines given: the evidence must occur within the cited lines, or within [`EVIDENCE_WINDOW`]
//!   lines of them — then the lines are corrected to where the quote is, and the finding carries
//!   a note saying so;
//! - further away: a quote of at least [`MIN_EVIDENCE_CHARS`] that occurs exactly once in the
//!   file is re-anchored there (a true quote cited at the wrong lines), with a note saying so;
//!   one that occurs nowhere, or more than once (it cannot be placed), is HALLUCINATED;
//! - no lines: the evidence must occur somewhere in the file, and the lines where it does are
//!   filled in (with a note).
//!
//! Evidence is compared with all whitespace removed, after undoing what models do to quotes:
//! surrounding backticks or quotes, code fences, "12 | " / "12: " line-number prefixes (the text
//! is accepted with or without them stripped, since "200: ok" may be real YAML), and "..." / "…"
//! elisions — each elided fragment of at least [`MIN_FRAGMENT_CHARS`] non-whitespace characters
//! must be present, in any order.

use crate::pack::{ContextPack, PackFile};
use crate::review::finding::{RawFinding, Verdict};
use std::fmt::Write as _;

/// Lines of slack around the cited range when searching for the evidence: models miscount by a
/// line or two, rarely more; a quote further away is about other code.
pub const EVIDENCE_WINDOW: u32 = 3;

/// Lines of context around the (corrected) range in the excerpt the verifier sees.
pub const EXCERPT_CONTEXT: u32 = 5;

/// Fewest non-whitespace characters a quote needs to say where it is: "x" or "}" occurs
/// everywhere.
pub const MIN_EVIDENCE_CHARS: usize = 8;

/// A shorter quote still counts when it is a whole line of the file at least this long.
pub const MIN_WHOLE_LINE_CHARS: usize = 4;

/// Elided evidence fragments shorter than this (whitespace excluded) are not checked: "}" or
/// "//" between two "..." says nothing about where the code is.
pub const MIN_FRAGMENT_CHARS: usize = 4;

/// The grounded excerpt shows at most this many lines.
pub const MAX_EXCERPT_LINES: u32 = 80;

/// Outcome of grounding one finding.
#[derive(Debug, Clone, PartialEq)]
pub enum Grounding {
    /// Location and evidence check out; `excerpt` is the cited code (numbered lines, with the
    /// window around it) for the LLM verifier. `corrected` holds the lines where the quote
    /// really is when they differ from the cited ones (or none were cited), and `note` says so
    /// for the report.
    Grounded {
        excerpt: String,
        corrected: Option<(u32, u32)>,
        note: Option<String>,
    },
    /// Decided without a model: HALLUCINATED or UNVERIFIABLE, with the reason.
    Decided { verdict: Verdict, reason: String },
}

pub fn ground(finding: &RawFinding, pack: &ContextPack) -> Grounding {
    let Some(path) = finding.file.as_deref().filter(|f| !f.trim().is_empty()) else {
        return decided(Verdict::Unverifiable, "no location given".to_string());
    };
    let Ok(file) = pack.resolve(path) else {
        return decided(
            Verdict::Hallucinated,
            format!("file {path} is not in the reviewed snapshot"),
        );
    };
    let candidates = [
        fragments(&finding.evidence, true),
        fragments(&finding.evidence, false),
    ];
    let cited = match (finding.line_start, finding.line_end) {
        (Some(s), Some(e)) => Some((s.min(e), s.max(e))),
        (Some(s), None) | (None, Some(s)) => Some((s, s)),
        (None, None) => None,
    };
    if let Some((start, end)) = cited {
        if start == 0 || end > file.line_count {
            return decided(
                Verdict::Hallucinated,
                format!(
                    "lines {start}-{end} out of range (file has {} lines)",
                    file.line_count
                ),
            );
        }
    }
    let longest = candidates
        .iter()
        .map(|c| c.iter().map(|p| p.chars().count()).sum::<usize>())
        .max()
        .unwrap_or(0);
    if longest == 0 {
        return decided(
            Verdict::Unverifiable,
            match cited {
                Some(_) => "no evidence quoted: the finding must quote the code it is about",
                None => "no lines and no evidence",
            }
            .to_string(),
        );
    }
    if longest < MIN_EVIDENCE_CHARS && !is_whole_line(file, &candidates) {
        return decided(
            Verdict::Unverifiable,
            format!(
                "quoted evidence too short to check ({longest} characters; at least \
                 {MIN_EVIDENCE_CHARS}, or a whole line, are needed)"
            ),
        );
    }
    let find = |from: u32, to: u32| {
        let window = Squashed::new(&file.content, from, to);
        candidates
            .iter()
            .filter(|c| !c.is_empty())
            .find_map(|c| window.find_all(c))
    };
    let Some((start, end)) = cited else {
        return match find(1, file.line_count) {
            Some((a, b)) => grounded(
                pack,
                file,
                (a, b),
                Some(format!(
                    "lines {} added: the quoted evidence is there",
                    span(a, b)
                )),
            ),
            None => decided(
                Verdict::Hallucinated,
                format!("quoted evidence not found in {}", file.path),
            ),
        };
    };
    if find(start, end).is_some() {
        return grounded(pack, file, (start, end), None);
    }
    let from = start.saturating_sub(EVIDENCE_WINDOW).max(1);
    let to = end.saturating_add(EVIDENCE_WINDOW).min(file.line_count);
    if let Some((a, b)) = find(from, to) {
        return grounded(
            pack,
            file,
            (a, b),
            Some(format!(
                "lines corrected from {} to {}: the quoted evidence is there",
                span(start, end),
                span(a, b)
            )),
        );
    }
    let not_near = format!("quoted evidence not found near lines {start}-{end}");
    // Nothing within the window, so every occurrence in the file is elsewhere.
    let whole = Squashed::new(&file.content, 1, file.line_count);
    match elsewhere(&whole, &candidates) {
        Some(Elsewhere {
            count: 1,
            lines: (a, b),
            chars,
        }) if chars >= MIN_EVIDENCE_CHARS => grounded(
            pack,
            file,
            (a, b),
            Some(format!(
                "re-anchored: the quoted evidence is at {}, not at the cited {}",
                lines_of(a, b),
                lines_of(start, end)
            )),
        ),
        Some(Elsewhere { count, chars, .. }) if count > 1 && chars >= MIN_EVIDENCE_CHARS => {
            decided(
                Verdict::Hallucinated,
                format!(
                    "{not_near}; it occurs {count} times elsewhere in {}, so it cannot be placed",
                    file.path
                ),
            )
        }
        _ => decided(Verdict::Hallucinated, not_near),
    }
}

/// A quote's occurrences in the rest of the file.
struct Elsewhere {
    /// How often it occurs: for an elided quote, how often its most frequent piece does.
    count: usize,
    /// Where it is (its first occurrence).
    lines: (u32, u32),
    /// Its non-whitespace characters: too short a quote places nothing.
    chars: usize,
}

/// The first candidate found anywhere in `whole` decides, as in the window search.
fn elsewhere(whole: &Squashed, candidates: &[Vec<String>]) -> Option<Elsewhere> {
    candidates.iter().filter(|c| !c.is_empty()).find_map(|c| {
        let lines = whole.find_all(c)?;
        Some(Elsewhere {
            count: c.iter().map(|p| whole.count(p)).max().unwrap_or(0),
            lines,
            chars: c.iter().map(|p| p.chars().count()).sum(),
        })
    })
}

/// "line 7" or "lines 7-8".
fn lines_of(a: u32, b: u32) -> String {
    if a == b {
        format!("line {a}")
    } else {
        format!("lines {a}-{b}")
    }
}

fn span(a: u32, b: u32) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

/// Grounded at `lines`; `note` set means the lines differ from the cited ones.
fn grounded(
    pack: &ContextPack,
    file: &PackFile,
    lines: (u32, u32),
    note: Option<String>,
) -> Grounding {
    let from = lines.0.saturating_sub(EXCERPT_CONTEXT).max(1);
    let to = lines.1.saturating_add(EXCERPT_CONTEXT).min(file.line_count);
    Grounding::Grounded {
        excerpt: excerpt(pack, file, from, to),
        corrected: note.is_some().then_some(lines),
        note,
    }
}

/// A short quote that is one whole line of the file ("pass", "break;") still says where it is.
fn is_whole_line(file: &PackFile, candidates: &[Vec<String>]) -> bool {
    candidates.iter().any(|c| match c.as_slice() {
        [piece] if piece.chars().count() >= MIN_WHOLE_LINE_CHARS => file.content.lines().any(|l| {
            let squashed: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            &squashed == piece
        }),
        _ => false,
    })
}

fn decided(verdict: Verdict, reason: String) -> Grounding {
    Grounding::Decided { verdict, reason }
}

/// Numbered lines `from..=to`, at most [`MAX_EXCERPT_LINES`] of them.
fn excerpt(pack: &ContextPack, file: &PackFile, from: u32, to: u32) -> String {
    let last = to.min(from.saturating_add(MAX_EXCERPT_LINES - 1));
    let mut text = pack.read_lines(&file.path, from, last).unwrap_or_default();
    if last < to {
        let _ = writeln!(text, "      … ({} more lines)", to - last);
    }
    text
}

/// The non-whitespace pieces a quote must contain. Empty when the quote holds nothing checkable.
fn fragments(evidence: &str, strip_line_numbers: bool) -> Vec<String> {
    const QUOTES: &[char] = &['`', '"', '\'', '“', '”', '‘', '’'];
    // Fence lines and elisions both break the quote into separately checked pieces.
    let mut pieces: Vec<String> = vec![String::new()];
    for line in evidence.lines() {
        let trimmed = line.trim_start();
        if is_fence(trimmed) {
            pieces.push(String::new());
            continue;
        }
        let line = if strip_line_numbers {
            let unquoted = trimmed.trim_start_matches(QUOTES);
            let code = strip_line_number(unquoted);
            if code.len() < unquoted.len() {
                code
            } else {
                line
            }
        } else {
            line
        };
        let mut parts = line.split("...").flat_map(|p| p.split('…'));
        if let (Some(first), Some(current)) = (parts.next(), pieces.last_mut()) {
            current.extend(first.chars().filter(|c| !c.is_whitespace()));
        }
        for part in parts {
            pieces.push(part.chars().filter(|c| !c.is_whitespace()).collect());
        }
    }
    // Cutting characters off the ends keeps a piece a substring of what the model copied, so
    // wrapping quotes can go without ever rejecting a faithful quote.
    for piece in &mut pieces {
        let inner = piece.trim_matches(QUOTES);
        if inner.len() < piece.len() {
            *piece = inner.to_string();
        }
    }
    pieces.retain(|p| !p.is_empty());
    if pieces.len() > 1 {
        pieces.retain(|p| p.chars().count() >= MIN_FRAGMENT_CHARS);
    }
    pieces
}

/// "```", "```rust", "~~~": a fence line, as opposed to code wrapped in backticks on one line.
fn is_fence(trimmed: &str) -> bool {
    let rest = if let Some(r) = trimmed.strip_prefix("```") {
        r.trim_start_matches('`')
    } else if let Some(r) = trimmed.strip_prefix("~~~") {
        r.trim_start_matches('~')
    } else {
        return false;
    };
    rest.trim()
        .chars()
        .all(|c| c.is_alphanumeric() || "+-#._".contains(c))
}

/// "  12 | code", "12: code", "L12: code", "12→code" -> "code"; anything else unchanged.
fn strip_line_number(line: &str) -> &str {
    let t = line.trim_start();
    let t = t.strip_prefix(['L', 'l']).unwrap_or(t);
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 7 {
        return line;
    }
    let rest = t[digits..].trim_start_matches([' ', '\t']);
    match rest.strip_prefix(['|', ':', '→']) {
        Some(code) => code.strip_prefix(' ').unwrap_or(code),
        None => line,
    }
}

/// Lines `from..=to` of a file with all whitespace removed, remembering where each line starts
/// so a hit can be mapped back to its line.
struct Squashed {
    text: String,
    first_line: u32,
    /// Byte offset in `text` where each line (from `first_line` on) begins.
    starts: Vec<usize>,
}

impl Squashed {
    fn new(content: &str, from: u32, to: u32) -> Squashed {
        let mut text = String::new();
        let mut starts = Vec::new();
        let skip = from.saturating_sub(1) as usize;
        let take = (to.saturating_add(1).saturating_sub(from.max(1))) as usize;
        for line in content.lines().skip(skip).take(take) {
            starts.push(text.len());
            text.extend(line.chars().filter(|c| !c.is_whitespace()));
        }
        Squashed {
            text,
            first_line: from.max(1),
            starts,
        }
    }

    /// When every piece occurs: the line where the first piece first occurs, and the line
    /// where the last-ending piece ends.
    fn find_all(&self, pieces: &[String]) -> Option<(u32, u32)> {
        let mut first = None;
        let mut last_end = 0;
        for piece in pieces {
            let at = self.text.find(piece.as_str())?;
            first.get_or_insert(at);
            last_end = last_end.max(at + piece.len().saturating_sub(1));
        }
        let at = first?;
        let line_of = |pos: usize| {
            let idx = self.starts.partition_point(|&s| s <= pos).saturating_sub(1);
            self.first_line
                .saturating_add(u32::try_from(idx).unwrap_or(u32::MAX))
        };
        let (a, b) = (line_of(at), line_of(last_end));
        Some((a, b.max(a)))
    }

    /// How many times `piece` occurs, overlapping occurrences included.
    fn count(&self, piece: &str) -> usize {
        let Some(step) = piece.chars().next().map(char::len_utf8) else {
            return 0;
        };
        let mut n = 0;
        let mut from = 0;
        while let Some(at) = self.text[from..].find(piece) {
            n += 1;
            from += at + step;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::finding::Severity;
    use std::path::PathBuf;

    /// 30 lines: line n is "let v{n} = compute({n});", with a distinctive call at 20.
    fn pack() -> ContextPack {
        let mut src = String::new();
        for n in 1..=30 {
            if n == 20 {
                src.push_str(
                    "    if  token.is_expired()  {  return   Err(AuthError::Expired);  }\n",
                );
            } else {
                src.push_str(&format!("let v{n} = compute({n});\n"));
            }
        }
        ContextPack::from_files(
            PathBuf::from("/repo"),
            None,
            vec![
                ("src/auth.rs".to_string(), src),
                ("src/empty.rs".to_string(), String::new()),
            ],
        )
    }

    fn finding(
        file: Option<&str>,
        start: Option<u32>,
        end: Option<u32>,
        evidence: &str,
    ) -> RawFinding {
        RawFinding {
            title: "t".to_string(),
            severity: Severity::P2,
            confidence: 0.8,
            category: "bug".to_string(),
            file: file.map(str::to_string),
            line_start: start,
            line_end: end,
            symbol: None,
            evidence: evidence.to_string(),
            why_it_matters: String::new(),
            suggested_fix: String::new(),
            routing: Default::default(),
        }
    }

    fn verdict(g: &Grounding) -> Option<Verdict> {
        match g {
            Grounding::Grounded { .. } => None,
            Grounding::Decided { verdict, .. } => Some(*verdict),
        }
    }

    fn reason(g: &Grounding) -> &str {
        match g {
            Grounding::Grounded { .. } => "",
            Grounding::Decided { reason, .. } => reason,
        }
    }

    fn excerpt_of(g: &Grounding) -> &str {
        match g {
            Grounding::Grounded { excerpt, .. } => excerpt,
            Grounding::Decided { reason, .. } => panic!("expected grounded, got decided: {reason}"),
        }
    }

    #[test]
    fn no_file_is_unverifiable() {
        let g = ground(&finding(None, Some(3), None, "x"), &pack());
        assert_eq!(verdict(&g), Some(Verdict::Unverifiable));
        assert_eq!(reason(&g), "no location given");
        let g = ground(&finding(Some("  "), Some(3), None, "x"), &pack());
        assert_eq!(verdict(&g), Some(Verdict::Unverifiable));
    }

    #[test]
    fn file_outside_pack_is_hallucinated() {
        let g = ground(&finding(Some("src/nope.rs"), Some(1), None, ""), &pack());
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
        assert_eq!(
            reason(&g),
            "file src/nope.rs is not in the reviewed snapshot"
        );
        let g = ground(&finding(Some("../src/auth.rs"), Some(1), None, ""), &pack());
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
    }

    #[test]
    fn file_path_is_normalised() {
        let g = ground(
            &finding(Some("./src//auth.rs"), Some(20), None, "token.is_expired()"),
            &pack(),
        );
        assert!(excerpt_of(&g).contains("   20 | "));
    }

    #[test]
    fn out_of_range_lines_are_hallucinated() {
        let p = pack();
        let g = ground(&finding(Some("src/auth.rs"), Some(0), Some(2), ""), &p);
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
        assert_eq!(reason(&g), "lines 0-2 out of range (file has 30 lines)");
        let g = ground(&finding(Some("src/auth.rs"), Some(29), Some(31), ""), &p);
        assert_eq!(reason(&g), "lines 29-31 out of range (file has 30 lines)");
        let g = ground(&finding(Some("src/auth.rs"), Some(40), None, ""), &p);
        assert_eq!(reason(&g), "lines 40-40 out of range (file has 30 lines)");
        let g = ground(&finding(Some("src/empty.rs"), Some(1), None, ""), &p);
        assert_eq!(reason(&g), "lines 1-1 out of range (file has 0 lines)");
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(30),
                Some(30),
                "let v30 = compute(30);",
            ),
            &p,
        );
        assert_eq!(verdict(&g), None);
    }

    #[test]
    fn reversed_range_is_swapped() {
        let g = ground(
            &finding(Some("src/auth.rs"), Some(21), Some(19), "is_expired"),
            &pack(),
        );
        let ex = excerpt_of(&g);
        assert!(ex.starts_with("   14 | "), "{ex}");
        assert!(ex.ends_with("let v26 = compute(26);\n"), "{ex}");
    }

    #[test]
    fn empty_or_one_character_evidence_is_rejected() {
        let g = ground(
            &finding(Some("src/auth.rs"), Some(10), Some(12), "  "),
            &pack(),
        );
        assert_eq!(verdict(&g), Some(Verdict::Unverifiable));
        assert!(
            reason(&g).starts_with("no evidence quoted"),
            "{}",
            reason(&g)
        );
        for short in ["v", "}", "`1`", "(10)"] {
            let g = ground(
                &finding(Some("src/auth.rs"), Some(10), Some(10), short),
                &pack(),
            );
            assert_eq!(verdict(&g), Some(Verdict::Unverifiable), "{short}");
            assert!(reason(&g).contains("too short"), "{}", reason(&g));
        }
        // A short quote that is a whole line says where it is.
        let p = ContextPack::from_files(
            PathBuf::from("/r"),
            None,
            vec![("a.py".to_string(), "def f():\n    pass\n".to_string())],
        );
        let g = ground(&finding(Some("a.py"), Some(2), None, "pass"), &p);
        assert_eq!(verdict(&g), None, "{}", reason(&g));
    }

    #[test]
    fn a_quote_two_lines_off_gets_corrected_lines_and_a_note() {
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(18),
                Some(18),
                "token.is_expired()",
            ),
            &pack(),
        );
        match g {
            Grounding::Grounded {
                corrected, note, ..
            } => {
                assert_eq!(corrected, Some((20, 20)));
                assert_eq!(
                    note.as_deref(),
                    Some("lines corrected from 18 to 20: the quoted evidence is there")
                );
            }
            other => panic!("expected grounded, got {other:?}"),
        }
        // Inside the cited range: nothing to correct.
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(19),
                Some(21),
                "token.is_expired()",
            ),
            &pack(),
        );
        assert!(matches!(
            g,
            Grounding::Grounded {
                corrected: None,
                note: None,
                ..
            }
        ));
        // A multi-line quote spans the lines it covers.
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(5),
                Some(5),
                "let v7 = compute(7);\nlet v8 = compute(8);",
            ),
            &pack(),
        );
        assert!(
            matches!(
                g,
                Grounding::Grounded {
                    corrected: Some((7, 8)),
                    ..
                }
            ),
            "{g:?}"
        );
    }

    #[test]
    fn exact_evidence_near_lines_is_grounded() {
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(20),
                None,
                "if  token.is_expired()  {  return   Err(AuthError::Expired);  }",
            ),
            &pack(),
        );
        assert!(excerpt_of(&g).contains("AuthError::Expired"));
    }

    #[test]
    fn evidence_with_whitespace_differences_is_grounded() {
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(18),
                Some(18),
                "if token.is_expired() {\n  return Err(AuthError::Expired);\n}",
            ),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
    }

    #[test]
    fn evidence_within_window_but_outside_range_is_grounded() {
        let g = ground(
            &finding(Some("src/auth.rs"), Some(17), None, "is_expired()"),
            &pack(),
        );
        assert_eq!(verdict(&g), None);
        // Five lines off is beyond the window: not a miscount but a quote placed elsewhere, which
        // (occurring once in the file) is re-anchored rather than corrected.
        let g = ground(
            &finding(Some("src/auth.rs"), Some(15), None, "is_expired()"),
            &pack(),
        );
        assert_eq!(corrected_and_note(&g).0, Some((20, 20)));
        assert!(
            corrected_and_note(&g).1.starts_with("re-anchored: "),
            "{g:?}"
        );
    }

    #[test]
    fn evidence_with_line_number_prefixes_is_grounded() {
        let quote = "   19 | let v19 = compute(19);\n   20 |     if token.is_expired() {";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(19), Some(20), quote),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
        let quote = "19: let v19 = compute(19);\n20: if token.is_expired()";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(19), Some(20), quote),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
    }

    #[test]
    fn evidence_with_elisions_fences_and_quotes_is_grounded() {
        let quote = "`if token.is_expired() { ... Err(AuthError::Expired); }`";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(20), None, quote),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
        let quote = "```rust\nlet v21 = compute(21);\n…\nlet v23 = compute(23);\n```";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(21), Some(23), quote),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
        let quote = "```let v22 = compute(22);```";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(22), None, quote),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
        // Far from line 3, but once in the file: re-anchored to where it is.
        let g = ground(&finding(Some("src/auth.rs"), Some(3), None, quote), &pack());
        assert_eq!(corrected_and_note(&g).0, Some((22, 22)), "{g:?}");
        let quote = "\"let v22 = compute(22);\"";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(22), None, quote),
            &pack(),
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
    }

    #[test]
    fn elided_fragment_that_is_absent_is_hallucinated() {
        let quote = "if token.is_expired() { ... panic!(\"expired\") }";
        let g = ground(
            &finding(Some("src/auth.rs"), Some(20), None, quote),
            &pack(),
        );
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
    }

    fn corrected_and_note(g: &Grounding) -> (Option<(u32, u32)>, &str) {
        match g {
            Grounding::Grounded {
                corrected, note, ..
            } => (*corrected, note.as_deref().unwrap_or("")),
            Grounding::Decided { reason, .. } => panic!("expected grounded, got decided: {reason}"),
        }
    }

    /// 30 lines: "let v{n} = compute({n});", with `retry(conn)?;` at lines 5 and 12 and
    /// `def f():` / `pass` at 8-9.
    fn pack_with_repeats() -> ContextPack {
        let src: String = (1..=30)
            .map(|n| match n {
                5 | 12 => "    retry(conn)?;\n".to_string(),
                8 => "def f():\n".to_string(),
                9 => "    pass\n".to_string(),
                n => format!("let v{n} = compute({n});\n"),
            })
            .collect();
        ContextPack::from_files(PathBuf::from("/r"), None, vec![("a.rs".to_string(), src)])
    }

    #[test]
    fn a_true_quote_at_the_wrong_lines_is_re_anchored_where_it_occurs_once() {
        let g = ground(
            &finding(Some("src/auth.rs"), Some(3), Some(4), "token.is_expired()"),
            &pack(),
        );
        assert_eq!(
            corrected_and_note(&g),
            (
                Some((20, 20)),
                "re-anchored: the quoted evidence is at line 20, not at the cited lines 3-4"
            )
        );
        // The excerpt is built around the real lines, as for any grounded finding.
        let ex = excerpt_of(&g);
        assert!(ex.starts_with("   15 | "), "{ex}");
        assert!(ex.ends_with("let v25 = compute(25);\n"), "{ex}");
        // Whitespace differences and line-number prefixes are undone as for any match.
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(28),
                None,
                "20 |   if token.is_expired() {",
            ),
            &pack(),
        );
        assert_eq!(corrected_and_note(&g).0, Some((20, 20)), "{g:?}");
    }

    #[test]
    fn a_multi_line_quote_at_the_wrong_lines_is_re_anchored_over_its_span() {
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                Some(25),
                Some(26),
                "let v7 = compute(7);\nlet v8 = compute(8);\nlet v9 = compute(9);",
            ),
            &pack(),
        );
        assert_eq!(
            corrected_and_note(&g),
            (
                Some((7, 9)),
                "re-anchored: the quoted evidence is at lines 7-9, not at the cited lines 25-26"
            )
        );
        let ex = excerpt_of(&g);
        assert!(ex.starts_with("    2 | "), "{ex}");
        assert!(ex.ends_with("let v14 = compute(14);\n"), "{ex}");
    }

    #[test]
    fn a_quote_occurring_twice_elsewhere_cannot_be_placed() {
        let p = pack_with_repeats();
        let g = ground(&finding(Some("a.rs"), Some(25), None, "retry(conn)?;"), &p);
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
        assert_eq!(
            reason(&g),
            "quoted evidence not found near lines 25-25; it occurs 2 times elsewhere in a.rs, \
             so it cannot be placed"
        );
        // An elided quote with a piece that occurs twice cannot be placed either.
        let g = ground(
            &finding(
                Some("a.rs"),
                Some(25),
                None,
                "retry(conn)?;\n...\nlet v6 = compute(6);",
            ),
            &p,
        );
        assert!(reason(&g).contains("occurs 2 times elsewhere"), "{g:?}");
        // Within the window of one of them it is grounded there, as before.
        let g = ground(&finding(Some("a.rs"), Some(14), None, "retry(conn)?;"), &p);
        assert_eq!(corrected_and_note(&g).0, Some((12, 12)), "{g:?}");
    }

    #[test]
    fn a_quote_occurring_nowhere_is_hallucinated() {
        let g = ground(
            &finding(Some("src/auth.rs"), Some(3), Some(4), "fn refresh_token()"),
            &pack(),
        );
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
        assert_eq!(reason(&g), "quoted evidence not found near lines 3-4");
    }

    #[test]
    fn a_short_whole_line_quote_is_not_re_anchored() {
        // "pass" is grounded as a whole line near its cited line, but places nothing far away.
        let p = pack_with_repeats();
        let g = ground(&finding(Some("a.rs"), Some(10), None, "pass"), &p);
        assert_eq!(corrected_and_note(&g).0, Some((9, 9)), "{g:?}");
        let g = ground(&finding(Some("a.rs"), Some(25), None, "pass"), &p);
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
        assert_eq!(reason(&g), "quoted evidence not found near lines 25-25");
    }

    #[test]
    fn invented_evidence_is_hallucinated() {
        let g = ground(
            &finding(Some("src/auth.rs"), Some(20), None, "unsafe { ptr.read() }"),
            &pack(),
        );
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
    }

    #[test]
    fn no_lines_evidence_found_is_grounded_around_first_hit() {
        let g = ground(
            &finding(
                Some("src/auth.rs"),
                None,
                None,
                "return Err(AuthError::Expired)",
            ),
            &pack(),
        );
        let ex = excerpt_of(&g);
        assert!(ex.starts_with("   15 | "), "{ex}");
        assert!(ex.contains("   20 | "));
        assert!(ex.ends_with("let v25 = compute(25);\n"), "{ex}");
    }

    #[test]
    fn no_lines_evidence_absent_is_hallucinated() {
        let g = ground(
            &finding(Some("src/auth.rs"), None, None, "fn refresh_token()"),
            &pack(),
        );
        assert_eq!(verdict(&g), Some(Verdict::Hallucinated));
        assert_eq!(reason(&g), "quoted evidence not found in src/auth.rs");
    }

    #[test]
    fn no_lines_and_no_evidence_is_unverifiable() {
        let g = ground(&finding(Some("src/auth.rs"), None, None, " ``` "), &pack());
        assert_eq!(verdict(&g), Some(Verdict::Unverifiable));
        assert_eq!(reason(&g), "no lines and no evidence");
        let g = ground(&finding(Some("src/auth.rs"), None, None, "..."), &pack());
        assert_eq!(verdict(&g), Some(Verdict::Unverifiable));
    }

    #[test]
    fn excerpt_is_capped() {
        let src: String = (1..=300).map(|n| format!("line {n}\n")).collect();
        let p =
            ContextPack::from_files(PathBuf::from("/r"), None, vec![("a.txt".to_string(), src)]);
        let g = ground(
            &finding(Some("a.txt"), Some(10), Some(250), "line 10\nline 11"),
            &p,
        );
        let ex = excerpt_of(&g);
        assert_eq!(ex.lines().count(), MAX_EXCERPT_LINES as usize + 1);
        assert!(ex.starts_with("    5 | line 5\n"));
        assert!(ex.ends_with("… (171 more lines)\n"), "{ex}");
    }

    #[test]
    fn line_number_prefix_stripping() {
        assert_eq!(strip_line_number("   12 | foo()"), "foo()");
        assert_eq!(strip_line_number("12: foo()"), "foo()");
        assert_eq!(strip_line_number("L7: x"), "x");
        assert_eq!(strip_line_number("let a = 1;"), "let a = 1;");
        assert_eq!(strip_line_number("123abc"), "123abc");
    }

    #[test]
    fn yaml_keys_that_look_like_line_numbers_still_match() {
        let p = ContextPack::from_files(
            PathBuf::from("/r"),
            None,
            vec![(
                "codes.yaml".to_string(),
                "codes:\n  200: ok\n  404: missing\n".to_string(),
            )],
        );
        let g = ground(
            &finding(
                Some("codes.yaml"),
                Some(2),
                Some(3),
                "200: ok\n404: missing",
            ),
            &p,
        );
        assert_eq!(verdict(&g), None, "{}", reason(&g));
    }
}
