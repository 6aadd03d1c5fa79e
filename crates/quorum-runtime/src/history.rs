//! Keeping a specialist's tool-loop conversation inside the model's context window.
//!
//! The conversation is the system prompt (never cut), the fitted task prompt, and the turns the
//! loop adds: assistant tool calls and tool results. When it passes [`COMPACT_AT`] of the input
//! budget, the oldest tool results are replaced by a short visible note of what was read
//! ("[earlier result of file_read src/app.py lines 1-80 elided to fit the context window]"),
//! oldest first and the newest last; if the newest result alone still does not fit, it is cut
//! at a line boundary (keeping its delimiters) with a visible notice. Which result goes first
//! is deterministic, so the same conversation always compacts the same way.

use quorum_core::weaver::{estimate_tokens, truncate_excerpt};
use quorum_llm::ChatMessage;
use serde_json::Value;

/// Compaction starts when the conversation passes this share of the input budget: the rest is
/// slack for the estimate (four characters a token is rough) and the next turn's text.
pub const COMPACT_AT: f64 = 0.8;

/// Role, separators and template tokens each message costs beyond its text.
const MESSAGE_OVERHEAD_TOKENS: u32 = 4;

/// A newest result cut shorter than this is elided outright: a few lines say nothing.
const MIN_USEFUL_RESULT_CHARS: usize = 400;

/// One tool result in the conversation.
#[derive(Debug, Clone)]
struct ResultEntry {
    /// Index of its message.
    index: usize,
    /// What was read, for the elision note ("file_read src/app.py lines 1-80").
    what: String,
    /// Text around the result that survives elision (a text tool call's "Result of ..." lead
    /// and its "Continue" line).
    lead: String,
    tail: String,
    elided: bool,
}

/// The conversation of one tool loop.
#[derive(Debug, Clone)]
pub struct History {
    messages: Vec<ChatMessage>,
    results: Vec<ResultEntry>,
    elided: u32,
}

/// Estimated tokens of one message: its text and tool-call arguments, plus the overhead.
pub fn message_tokens(m: &ChatMessage) -> u32 {
    let calls: u32 = m
        .tool_calls
        .iter()
        .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments.to_string()))
        .sum();
    estimate_tokens(&m.content)
        .saturating_add(calls)
        .saturating_add(MESSAGE_OVERHEAD_TOKENS)
}

/// What a tool call read, in a few words: "file_read src/app.py lines 1-80".
pub fn describe_call(name: &str, args: &Value) -> String {
    let parsed;
    let args = match args {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
            &parsed
        }
        other => other,
    };
    let get = |k: &str| match args.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let mut out = name.to_string();
    if let Some(p) = get("pattern") {
        out.push_str(&format!(" {p:?}"));
    }
    if let Some(p) = get("path").filter(|p| !p.is_empty()) {
        out.push(' ');
        out.push_str(&p);
    }
    match (get("start"), get("end")) {
        (Some(a), Some(b)) => out.push_str(&format!(" lines {a}-{b}")),
        (Some(a), None) => out.push_str(&format!(" from line {a}")),
        (None, Some(b)) => out.push_str(&format!(" lines 1-{b}")),
        (None, None) => {}
    }
    // A model-written argument must not be able to stretch the note.
    out.chars().take(160).collect()
}

impl History {
    pub fn new(system: &str, user: &str) -> History {
        History {
            messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
            results: Vec::new(),
            elided: 0,
        }
    }

    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    pub fn into_messages(self) -> Vec<ChatMessage> {
        self.messages
    }

    /// Tool results replaced by a note so far.
    pub fn elided(&self) -> u32 {
        self.elided
    }

    pub fn push(&mut self, m: ChatMessage) {
        self.messages.push(m);
    }

    /// A tool result, with what it read (for its elision note). `lead` and `tail` are kept when
    /// the result is elided; `body` is what may be elided or cut.
    pub fn push_result(
        &mut self,
        make: impl FnOnce(String) -> ChatMessage,
        what: String,
        lead: &str,
        body: &str,
        tail: &str,
    ) {
        self.results.push(ResultEntry {
            index: self.messages.len(),
            what,
            lead: lead.to_string(),
            tail: tail.to_string(),
            elided: false,
        });
        self.messages.push(make(format!("{lead}{body}{tail}")));
    }

    /// Estimated tokens of the whole conversation.
    pub fn tokens(&self) -> u32 {
        self.messages.iter().map(message_tokens).sum()
    }

    /// Bring the conversation to at most `limit` tokens, eliding the oldest tool results first
    /// and cutting the newest last. Returns whether anything changed. When even that is not
    /// enough (the fitted prompt alone is over), it stops: the system prompt is never cut.
    pub fn fit(&mut self, limit: u32) -> bool {
        let mut changed = false;
        while self.tokens() > limit {
            let open: Vec<usize> = (0..self.results.len())
                .filter(|&i| !self.results[i].elided)
                .collect();
            match open.as_slice() {
                [] => break,
                [only] => {
                    let i = *only;
                    let excess = self.tokens() - limit;
                    if !self.cut(i, excess) {
                        self.elide(i);
                    }
                    changed = true;
                    // Cutting is the last step; whatever is left is the fitted prompt.
                    if self.tokens() > limit && !self.results[i].elided {
                        self.elide(i);
                    }
                    break;
                }
                [oldest, ..] => {
                    self.elide(*oldest);
                    changed = true;
                }
            }
        }
        changed
    }

    fn elide(&mut self, i: usize) {
        let e = &mut self.results[i];
        e.elided = true;
        let note = format!(
            "{}[earlier result of {} elided to fit the context window]{}",
            e.lead, e.what, e.tail
        );
        self.messages[e.index].content = note;
        self.elided += 1;
    }

    /// Cut result `i` by about `excess` tokens at a line boundary; false when too little would
    /// be left to be worth keeping.
    fn cut(&mut self, i: usize, excess: u32) -> bool {
        let e = &self.results[i];
        let content = &self.messages[e.index].content;
        let body = &content[e.lead.len()..content.len() - e.tail.len()];
        let chars = body.chars().count();
        // Room for the cut notice and the re-closed delimiter.
        let keep = chars.saturating_sub(excess as usize * 4 + 120);
        if keep < MIN_USEFUL_RESULT_CHARS {
            return false;
        }
        let cut = truncate_excerpt(body, keep).into_owned();
        let text = format!("{}{cut}{}", e.lead, e.tail);
        self.messages[e.index].content = text;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_core::weaver::delimit;
    use serde_json::json;

    fn file(n: usize) -> String {
        let body: String = (1..=n).map(|i| format!("{i:>5} | x = {i}\n")).collect();
        delimit("src/app.py", &body)
    }

    #[test]
    fn oldest_results_are_elided_first_with_a_visible_note() {
        let mut h = History::new("system", "task");
        for (i, start) in [1, 81, 161].iter().enumerate() {
            h.push(ChatMessage::assistant(""));
            let what = describe_call(
                "file_read",
                &json!({"path": "src/app.py", "start": start, "end": start + 79}),
            );
            let body = file(80);
            h.push_result(
                |c| ChatMessage::tool_result(format!("c{i}"), "file_read", c),
                what,
                "",
                &body,
                "",
            );
        }
        let before = h.tokens();
        let limit = before - 100;
        assert!(h.fit(limit));
        assert!(h.tokens() <= limit);
        assert_eq!(h.elided(), 1);
        let m = h.messages();
        assert_eq!(
            m[3].content,
            "[earlier result of file_read src/app.py lines 1-80 elided to fit the context window]"
        );
        // Newer results are intact, and the system prompt is never touched.
        assert_eq!(m[5].content, file(80));
        assert_eq!(m[0].content, "system");
    }

    #[test]
    fn the_newest_result_is_cut_at_a_line_keeping_its_delimiters() {
        let mut h = History::new("system", "task");
        let body = file(400);
        h.push_result(
            |c| ChatMessage::user(c),
            describe_call("file_read", &json!({"path": "src/app.py"})),
            "Result of file_read:\n",
            &body,
            "\nContinue.",
        );
        let limit = h.tokens() / 2;
        assert!(h.fit(limit));
        assert!(h.tokens() <= limit, "{} > {limit}", h.tokens());
        let c = &h.messages()[2].content;
        assert!(c.starts_with("Result of file_read:\n<<<BEGIN UNTRUSTED src/app.py>>>\n"));
        assert!(c.contains("[truncated: "), "{c}");
        assert!(
            c.ends_with("<<<END UNTRUSTED src/app.py>>>\n\nContinue."),
            "{c}"
        );
        assert_eq!(h.elided(), 0);
    }

    #[test]
    fn a_conversation_that_fits_is_left_alone() {
        let mut h = History::new("system", "task");
        h.push_result(
            |c| ChatMessage::user(c),
            "file_tree".into(),
            "",
            "a\nb\n",
            "",
        );
        let t = h.tokens();
        assert!(!h.fit(t));
        assert_eq!(h.messages()[2].content, "a\nb\n");
    }

    #[test]
    fn calls_are_described_briefly() {
        assert_eq!(
            describe_call("file_grep", &json!({"pattern": "exec(", "path": "src"})),
            "file_grep \"exec(\" src"
        );
        assert_eq!(
            describe_call(
                "file_read",
                &Value::String("{\"path\":\"a.py\",\"start\":5}".into())
            ),
            "file_read a.py from line 5"
        );
        assert_eq!(describe_call("file_tree", &json!({})), "file_tree");
    }
}
