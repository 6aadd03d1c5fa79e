//! The read-only tools a specialist may call, executed against the review's ContextPack.
//!
//! Architecture invariant: tools never touch the filesystem. Every path goes through
//! [`ContextPack::resolve`], so a path outside the target, an excluded secret or a symlink
//! escape yields a tool error, never content. A task can only call the tools it was granted;
//! a call to any other name is answered with an error the model can read and the loop continues.

use quorum_core::pack::ContextPack;
use quorum_core::weaver::delimit;
use quorum_llm::ToolSpec;
use serde_json::{json, Value};

/// Most lines one file_read returns; longer ranges are cut with a note.
pub const MAX_READ_LINES: u32 = 400;
/// Most grep hits returned.
pub const MAX_GREP_HITS: usize = 50;
/// Entries file_tree shows.
pub const TREE_ENTRIES: usize = 200;
pub const TREE_DEPTH: usize = 6;

/// JSON-schema specs of the granted tools, in a stable order.
pub fn specs(granted: &[String]) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    for name in granted {
        let (description, parameters) = match name.as_str() {
            "file_tree" => (
                "List the files of the material under review as an indented tree.",
                json!({"type": "object", "properties": {}, "required": []}),
            ),
            "list_directory" => (
                "List the immediate entries of one directory of the material ('' for the root).",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            "file_read" => (
                "Read lines of one file, numbered. Omit start/end to read from the top.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "start": {"type": "integer", "description": "first line, 1-based"},
                    "end": {"type": "integer", "description": "last line, inclusive"}
                }, "required": ["path"]}),
            ),
            "file_grep" => (
                "Search the material with a regular expression; returns path:line: text hits.",
                json!({"type": "object", "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string", "description": "only files under this path prefix"}
                }, "required": ["pattern"]}),
            ),
            "team_bb_publish" => (
                "Share a short note with your review teammates (a lead, a shared concern).",
                json!({"type": "object", "properties": {
                    "topic": {"type": "string"},
                    "body": {"type": "string"}
                }, "required": ["topic", "body"]}),
            ),
            "team_bb_read" => (
                "Read the notes your teammates shared, optionally for one topic.",
                json!({"type": "object", "properties": {"topic": {"type": "string"}}, "required": []}),
            ),
            _ => continue,
        };
        out.push(ToolSpec {
            name: name.clone(),
            description: description.to_string(),
            parameters,
        });
    }
    out
}

/// Result of one tool call: the text returned to the model, and whether it was an error.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub content: String,
    pub is_error: bool,
}

impl ToolResult {
    pub fn ok(content: String) -> Self {
        ToolResult {
            content,
            is_error: false,
        }
    }
    pub fn err(content: impl Into<String>) -> Self {
        ToolResult {
            content: format!("error: {}", content.into()),
            is_error: true,
        }
    }
}

fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn arg_u32(args: &Value, key: &str) -> Option<u32> {
    match args.get(key) {
        Some(Value::Number(n)) => n.as_u64().map(|n| n.min(u32::MAX as u64) as u32),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The tools a tool loop offers and runs: a specialist's read-only tools over the pack
/// ([`PackTools`]), or a fix agent's worktree tools (quorum-fix).
pub trait Toolbox: Send {
    /// JSON-schema specs of the tools offered, in a stable order.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Run one call; an unknown tool or bad arguments is an error result the model can read.
    fn execute(&mut self, name: &str, args: &Value) -> ToolResult;
    /// What the loop's last turn asks for ("Answer now with the {answer} only").
    fn answer_name(&self) -> &str {
        "findings JSON"
    }
}

/// A specialist's granted tools over the review's pack (and team board).
pub struct PackTools<'a> {
    pub pack: &'a ContextPack,
    pub granted: &'a [String],
    pub board: Option<BoardAccess<'a>>,
}

impl Toolbox for PackTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        specs(self.granted)
    }
    fn execute(&mut self, name: &str, args: &Value) -> ToolResult {
        execute_with(self.pack, self.granted, self.board, name, args)
    }
}

/// The team board a task may use, and who it writes as.
#[derive(Clone, Copy)]
pub struct BoardAccess<'a> {
    pub board: &'a dyn crate::board::TeamBoard,
    pub flow_id: &'a str,
    pub author: &'a str,
}

/// Longest note a specialist may publish.
pub const MAX_NOTE_CHARS: usize = 2_000;

/// Execute `name(args)` for a task granted `granted`.
pub fn execute(pack: &ContextPack, granted: &[String], name: &str, args: &Value) -> ToolResult {
    execute_with(pack, granted, None, name, args)
}

/// Execute a tool, with the team board when the review has one.
pub fn execute_with(
    pack: &ContextPack,
    granted: &[String],
    board: Option<BoardAccess<'_>>,
    name: &str,
    args: &Value,
) -> ToolResult {
    if !granted.iter().any(|g| g == name) {
        return ToolResult::err(format!(
            "unknown tool {name:?}; available: {}",
            granted.join(", ")
        ));
    }
    // Models sometimes send arguments as a JSON string.
    let parsed;
    let args = match args {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
            &parsed
        }
        other => other,
    };
    match name {
        // What the pack tools return is content under review: delimited, never instructions.
        "file_tree" => ToolResult::ok(delimit("file tree", &pack.tree(TREE_ENTRIES, TREE_DEPTH))),
        "list_directory" => {
            let dir = arg_str(args, "path").unwrap_or("");
            match pack.list_directory(dir) {
                Ok(entries) if entries.is_empty() => ToolResult::ok("(empty directory)".into()),
                Ok(entries) => ToolResult::ok(delimit("directory listing", &entries.join("\n"))),
                Err(e) => ToolResult::err(e.to_string()),
            }
        }
        "file_read" => {
            let Some(path) = arg_str(args, "path") else {
                return ToolResult::err("file_read needs a \"path\" argument");
            };
            let file = match pack.resolve(path) {
                Ok(f) => f,
                Err(e) => return ToolResult::err(e.to_string()),
            };
            let start = arg_u32(args, "start").unwrap_or(1).max(1);
            let requested_end = arg_u32(args, "end").unwrap_or(file.line_count);
            let end = requested_end.min(start.saturating_add(MAX_READ_LINES - 1));
            match pack.read_lines(&file.path, start, end) {
                Ok(text) => {
                    let mut out = format!(
                        "{} (lines {start}-{} of {})\n",
                        file.path,
                        end.min(file.line_count),
                        file.line_count
                    );
                    out.push_str(&delimit(&file.path, &text));
                    if end < requested_end.min(file.line_count) {
                        out.push_str(&format!(
                            "[cut at {MAX_READ_LINES} lines; read from line {} for more]\n",
                            end + 1
                        ));
                    }
                    ToolResult::ok(out)
                }
                Err(e) => ToolResult::err(e.to_string()),
            }
        }
        "file_grep" => {
            let Some(pattern) = arg_str(args, "pattern") else {
                return ToolResult::err("file_grep needs a \"pattern\" argument");
            };
            let prefix = arg_str(args, "path").unwrap_or("");
            match pack.grep(pattern, prefix, MAX_GREP_HITS) {
                Ok(hits) if hits.is_empty() => ToolResult::ok("no matches".into()),
                Ok(hits) => {
                    let mut s = String::with_capacity(hits.len() * 64);
                    for h in &hits {
                        s.push_str(&format!("{}:{}: {}\n", h.path, h.line, h.text));
                    }
                    if hits.len() >= MAX_GREP_HITS {
                        s.push_str(&format!(
                            "[capped at {MAX_GREP_HITS} hits; narrow the pattern]\n"
                        ));
                    }
                    ToolResult::ok(delimit("grep results", &s))
                }
                Err(e) => ToolResult::err(e.to_string()),
            }
        }
        "team_bb_publish" => {
            let Some(b) = board else {
                return ToolResult::err("no team blackboard in this review");
            };
            let topic = arg_str(args, "topic").unwrap_or("general").trim();
            let Some(body) = arg_str(args, "body").filter(|b| !b.trim().is_empty()) else {
                return ToolResult::err("team_bb_publish needs a non-empty \"body\"");
            };
            let body = quorum_core::weaver::truncate_at_boundary(body, MAX_NOTE_CHARS);
            match b.board.publish(b.flow_id, b.author, topic, &body) {
                Ok(id) => ToolResult::ok(format!("published note {id}")),
                Err(e) => ToolResult::err(e),
            }
        }
        "team_bb_read" => {
            let Some(b) = board else {
                return ToolResult::err("no team blackboard in this review");
            };
            let notes = b.board.read(b.flow_id, arg_str(args, "topic"));
            if notes.is_empty() {
                return ToolResult::ok("no notes yet".into());
            }
            let mut s = String::new();
            for n in notes.iter().rev().take(50).rev() {
                s.push_str(&format!("[{}] {}: {}\n", n.topic, n.author, n.body));
            }
            // Teammates' notes are model output: data, not instructions.
            ToolResult::ok(quorum_core::weaver::delimit("team notes", &s))
        }
        other => ToolResult::err(format!("unknown tool {other:?}")),
    }
}

/// Recognise a tool call written as JSON text instead of a native call — small models do this:
/// `{"tool": "file_read", "arguments": {...}}`, `{"name": ..., "arguments"|"parameters": ...}`,
/// or `{"function": {"name": ..., "arguments": ...}}`, fenced or bare. Returns (name, args) only
/// when the object is unmistakably a call (has a name and no findings key).
pub fn text_tool_call(text: &str) -> Option<(String, Value)> {
    let (v, _) = quorum_core::parse::extract_object(text).ok()?;
    let obj = v.as_object()?;
    if obj.contains_key("findings") || obj.contains_key("tasks") || obj.contains_key("verdict") {
        return None;
    }
    let inner = obj
        .get("function")
        .and_then(Value::as_object)
        .unwrap_or(obj);
    let name = inner
        .get("tool")
        .or_else(|| inner.get("name"))
        .or_else(|| inner.get("tool_name"))
        .and_then(Value::as_str)?
        .trim()
        .to_string();
    let args = inner
        .get("arguments")
        .or_else(|| inner.get("parameters"))
        .or_else(|| inner.get("args"))
        .or_else(|| inner.get("input"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    // An object with only a "name" (e.g. a finding's symbol) is not a call: require arguments
    // or an explicit "tool" key.
    if !(inner.contains_key("tool")
        || inner.contains_key("arguments")
        || inner.contains_key("parameters")
        || inner.contains_key("args"))
    {
        return None;
    }
    Some((name, args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn pack() -> ContextPack {
        ContextPack::from_files(
            PathBuf::from("/t"),
            None,
            vec![
                ("src/a.py".into(), "import os\nx = 1\nprint(x)\n".into()),
                ("README.md".into(), "# hi\n".into()),
            ],
        )
    }

    fn all() -> Vec<String> {
        ["file_tree", "list_directory", "file_read", "file_grep"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn read_within_pack_and_refuse_outside() {
        let p = pack();
        let r = execute(
            &p,
            &all(),
            "file_read",
            &json!({"path": "src/a.py", "start": 2, "end": 3}),
        );
        assert!(
            !r.is_error && r.content.contains("x = 1") && !r.content.contains("import"),
            "{r:?}"
        );
        for bad in ["../etc/passwd", "/etc/passwd", "src/../../x", ".env"] {
            let r = execute(&p, &all(), "file_read", &json!({ "path": bad }));
            assert!(r.is_error, "{bad} -> {r:?}");
            assert!(!r.content.contains("root:"), "{r:?}");
        }
    }

    #[test]
    fn ungranted_and_unknown_tools_are_errors() {
        let p = pack();
        let only_read = vec!["file_read".to_string()];
        let r = execute(&p, &only_read, "file_grep", &json!({"pattern": "x"}));
        assert!(r.is_error && r.content.contains("unknown tool"));
        let r = execute(&p, &all(), "shell", &json!({"cmd": "rm -rf /"}));
        assert!(r.is_error);
    }

    #[test]
    fn grep_and_string_arguments() {
        let p = pack();
        let r = execute(
            &p,
            &all(),
            "file_grep",
            &Value::String("{\"pattern\":\"print\"}".into()),
        );
        assert!(r.content.contains("src/a.py:3:"), "{r:?}");
        let r = execute(&p, &all(), "file_grep", &json!({"pattern": "("}));
        assert!(r.is_error);
    }

    #[test]
    fn specs_follow_grants() {
        let s = specs(&["file_read".into(), "bogus".into()]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "file_read");
    }

    #[test]
    fn text_tool_calls_are_recognised() {
        let (n, a) = text_tool_call(
            "```json\n{\"tool\": \"file_read\", \"arguments\": {\"path\": \"a\"}}\n```",
        )
        .unwrap();
        assert_eq!((n.as_str(), a["path"].as_str()), ("file_read", Some("a")));
        let (n, _) = text_tool_call("{\"name\": \"file_tree\", \"arguments\": {}}").unwrap();
        assert_eq!(n, "file_tree");
        let (n, _) = text_tool_call(
            "{\"function\": {\"name\": \"file_grep\", \"parameters\": {\"pattern\": \"x\"}}}",
        )
        .unwrap();
        assert_eq!(n, "file_grep");
        assert!(text_tool_call("{\"findings\": []}").is_none());
        assert!(text_tool_call("{\"name\": \"parse_user\"}").is_none());
        assert!(text_tool_call("no json here").is_none());
    }
}
