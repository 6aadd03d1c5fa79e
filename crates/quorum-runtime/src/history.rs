//! Keeping a specialist's tool-loop conversation inside the model's context window.
//!
//! The conversation is the system prompt (never cut), the fitted task prompt, and the turns the
//! loop adds: assistant tool calls and tool results. When it passes [`COMPACT_AT`] of the input
//! budget, the oldest tool results are replaced by a short visible note of what was read
//! ("[earlier result of file_read src/app.py lines 1-80 elided to fit the context window]");
//! when the notes and calls themselves pile up, the oldest whole turns are folded into one note
//! on the task prompt; if the newest result alone still does not fit, it is cut at a line
//! boundary (keeping its delimiters) with a visible notice. The order is deterministic, so the
//! same conversation always compacts the same way.

use quorum_core::weaver::{estimate_tokens, truncate_excerpt};
use quorum_llm::ChatMessage;
use serde_json::Value;

/// Compaction starts when the conversation passes this share of the input budget: the rest is
/// slack for the estimate (four characters a token is rough) and the next turn's text.
pub const COMPACT_AT: f64 = 0.8;

/// Role, separators and template tokens each message costs beyond its text.
const MESSAGE_OVERHEAD_TOKENS: u32 = 4;

/// What a tool call costs beyond its name and arguments: its id, type and wrapper (on the
/// OpenAI wire `{"id":..,"type":"function","function":{..}}`, in a chat template its tags).
const TOOL_CALL_OVERHEAD_TOKENS: u32 = 20;

/// A newest result cut shorter than this is elided outright: a few lines say nothing.
const MIN_USEFUL_RESULT_CHARS: usize = 400;

/// One tool result in the conversation.
#[derive(Debug, Clone)]
struct ResultEntry {
    message: ChatMessage,
    /// What was read, for the elision note ("file_read src/app.py lines 1-80").
    what: String,
    /// Text around the result that survives elision (a text tool call's "Result of ..." lead
    /// and its "Continue" line).
    lead: String,
    tail: String,
    elided: bool,
}

/// One turn of the loop: the assistant's message and the results it got back.
#[derive(Debug, Clone)]
struct Turn {
    assistant: ChatMessage,
    results: Vec<ResultEntry>,
}

/// Descriptions a folded-turns note lists before it only counts.
const MAX_FOLDED_LISTED: usize = 12;

/// The conversation of one tool loop.
#[derive(Debug, Clone)]
pub struct History {
    system: ChatMessage,
    user: ChatMessage,
    turns: Vec<Turn>,
    /// What the turns folded into the task prompt's note had read, oldest first.
    folded: Vec<String>,
    elided: u32,
}

/// Estimated tokens of one message: its text and tool-call arguments, plus the overhead.
pub fn message_tokens(m: &ChatMessage) -> u32 {
    let calls: u32 = m
        .tool_calls
        .iter()
        .map(|c| {
            estimate_tokens(&c.name)
                + estimate_tokens(&c.arguments.to_string())
                + TOOL_CALL_OVERHEAD_TOKENS
        })
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
            system: ChatMessage::system(system),
            user: ChatMessage::user(user),
            turns: Vec::new(),
            folded: Vec::new(),
            elided: 0,
        }
    }

    /// The conversation as it is sent: system, task prompt (with the note of folded turns),
    /// then every turn's assistant message and results.
    pub fn messages(&self) -> Vec<ChatMessage> {
        let mut out = vec![self.system.clone(), self.user.clone()];
        if let Some(note) = self.folded_note() {
            out[1].content.push_str(&note);
        }
        for t in &self.turns {
            out.push(t.assistant.clone());
            out.extend(t.results.iter().map(|r| r.message.clone()));
        }
        out
    }

    fn folded_note(&self) -> Option<String> {
        if self.folded.is_empty() {
            return None;
        }
        let listed = self.folded.len().min(MAX_FOLDED_LISTED);
        let mut note = format!(
            "\n\n[earlier tool calls elided to fit the context window: {}",
            self.folded[self.folded.len() - listed..].join("; ")
        );
        if self.folded.len() > listed {
            note.push_str(&format!(
                " (and {} before them)",
                self.folded.len() - listed
            ));
        }
        note.push(']');
        Some(note)
    }

    /// Tool results replaced by a note so far.
    pub fn elided(&self) -> u32 {
        self.elided
    }

    /// A new turn: the assistant's message (usually carrying tool calls).
    pub fn push(&mut self, m: ChatMessage) {
        self.turns.push(Turn {
            assistant: m,
            results: Vec::new(),
        });
    }

    /// A tool result of the current turn, with what it read (for its elision note). `lead` and
    /// `tail` are kept when the result is elided; `body` is what may be elided or cut.
    pub fn push_result(
        &mut self,
        make: impl FnOnce(String) -> ChatMessage,
        what: String,
        lead: &str,
        body: &str,
        tail: &str,
    ) {
        if self.turns.is_empty() {
            self.push(ChatMessage::assistant(""));
        }
        let entry = ResultEntry {
            message: make(format!("{lead}{body}{tail}")),
            what,
            lead: lead.to_string(),
            tail: tail.to_string(),
            elided: false,
        };
        if let Some(t) = self.turns.last_mut() {
            t.results.push(entry);
        }
    }

    /// Estimated tokens of the whole conversation.
    pub fn tokens(&self) -> u32 {
        self.messages().iter().map(message_tokens).sum()
    }

    /// Bring the conversation to at most `limit` tokens: elide tool results oldest first, then
    /// fold whole old turns into one note on the task prompt, then cut the newest result and
    /// finally elide it. Returns whether anything changed. The system and task prompts are
    /// never cut: when they alone are over, it stops.
    pub fn fit(&mut self, limit: u32) -> bool {
        let mut changed = false;
        while self.tokens() > limit {
            let newest = self
                .turns
                .iter()
                .enumerate()
                .rev()
                .find_map(|(t, turn)| turn.results.len().checked_sub(1).map(|r| (t, r)));
            let oldest_open = self.turns.iter().enumerate().find_map(|(t, turn)| {
                turn.results
                    .iter()
                    .position(|r| !r.elided)
                    .map(|r| (t, r))
                    .filter(|&at| Some(at) != newest)
            });
            if let Some((t, r)) = oldest_open {
                self.elide(t, r);
            } else if self.turns.len() > 1 {
                let turn = self.turns.remove(0);
                self.folded.extend(turn.results.into_iter().map(|r| r.what));
            } else if let Some((t, r)) = newest.filter(|&(t, r)| !self.turns[t].results[r].elided) {
                let excess = self.tokens() - limit;
                if !self.cut(t, r, excess) || self.tokens() > limit {
                    self.elide(t, r);
                }
                changed = true;
                break;
            } else {
                break;
            }
            changed = true;
        }
        changed
    }

    fn elide(&mut self, t: usize, r: usize) {
        let e = &mut self.turns[t].results[r];
        if e.elided {
            return;
        }
        e.elided = true;
        e.message.content = format!(
            "{}[earlier result of {} elided to fit the context window]{}",
            e.lead, e.what, e.tail
        );
        self.elided += 1;
    }

    /// Cut a result by about `excess` tokens at a line boundary; false when too little would
    /// be left to be worth keeping.
    fn cut(&mut self, t: usize, r: usize, excess: u32) -> bool {
        let e = &mut self.turns[t].results[r];
        let content = &e.message.content;
        let Some(body) = content
            .strip_prefix(e.lead.as_str())
            .and_then(|b| b.strip_suffix(e.tail.as_str()))
        else {
            return false;
        };
        let chars = body.chars().count();
        // Room for the cut notice and the re-closed delimiter.
        let keep = chars.saturating_sub(excess as usize * 4 + 120);
        if keep < MIN_USEFUL_RESULT_CHARS {
            return false;
        }
        let cut = truncate_excerpt(body, keep).into_owned();
        e.message.content = format!("{}{cut}{}", e.lead, e.tail);
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
            ChatMessage::user,
            describe_call("file_read", &json!({"path": "src/app.py"})),
            "Result of file_read:\n",
            &body,
            "\nContinue.",
        );
        let limit = h.tokens() / 2;
        assert!(h.fit(limit));
        assert!(h.tokens() <= limit, "{} > {limit}", h.tokens());
        let m = h.messages();
        let c = &m[3].content;
        assert!(c.starts_with("Result of file_read:\n<<<BEGIN UNTRUSTED src/app.py>>>\n"));
        assert!(c.contains("[truncated: "), "{c}");
        assert!(
            c.ends_with("<<<END UNTRUSTED src/app.py>>>\n\nContinue."),
            "{c}"
        );
        assert_eq!(h.elided(), 0);
    }

    #[test]
    fn old_turns_fold_into_one_note_when_notes_pile_up() {
        let mut h = History::new("system", "task");
        for turn in 0..10 {
            h.push(ChatMessage::assistant_with_tool_calls(
                "",
                vec![quorum_llm::ToolCall {
                    id: format!("c{turn}"),
                    name: "file_read".into(),
                    arguments: json!({"path": format!("src/f{turn}.py")}),
                }],
            ));
            h.push_result(
                |c| ChatMessage::tool_result(format!("c{turn}"), "file_read", c),
                format!("file_read src/f{turn}.py"),
                "",
                &file(30),
                "",
            );
        }
        let limit = 400;
        assert!(h.fit(limit));
        assert!(h.tokens() <= limit, "{}", h.tokens());
        let m = h.messages();
        assert_eq!(m[0].content, "system");
        assert!(m[1]
            .content
            .starts_with("task\n\n[earlier tool calls elided to fit"));
        assert!(
            m[1].content.contains("file_read src/f0.py"),
            "{}",
            m[1].content
        );
        // What is left is well formed: each tool result follows the call it answers.
        for (i, msg) in m.iter().enumerate() {
            if let Some(id) = &msg.tool_call_id {
                assert!(m[..i]
                    .iter()
                    .rev()
                    .find(|p| !p.tool_calls.is_empty())
                    .is_some_and(|p| p.tool_calls.iter().any(|c| &c.id == id)));
            }
        }
    }

    #[test]
    fn a_conversation_that_fits_is_left_alone() {
        let mut h = History::new("system", "task");
        h.push_result(ChatMessage::user, "file_tree".into(), "", "a\nb\n", "");
        let t = h.tokens();
        assert!(!h.fit(t));
        assert_eq!(h.messages()[3].content, "a\nb\n");
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
