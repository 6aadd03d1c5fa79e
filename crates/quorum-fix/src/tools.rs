//! A fix agent's tools: read a file of the worktree, replace one exact piece of text, create a
//! new file. Every path goes through the worktree's confinement (no `..`, no absolute path, no
//! VCS directory, no secrets file); a refused call is an error the model can read.

use crate::worktree::Worktree;
use quorum_core::fixing::edit::EditError;
use quorum_llm::ToolSpec;
use quorum_runtime::tools::{ToolResult, Toolbox};
use serde_json::{json, Value};

/// Most lines one read returns.
pub const MAX_READ_LINES: usize = 400;

pub const TOOL_NAMES: [&str; 3] = ["file_read", "edit_file", "write_file"];

pub struct FixTools<'a> {
    pub worktree: &'a mut Worktree,
    /// Every call, for the report: `name path → ok | error`.
    pub log: Vec<String>,
    /// Edits that were applied.
    pub applied: u32,
}

impl<'a> FixTools<'a> {
    pub fn new(worktree: &'a mut Worktree) -> Self {
        FixTools {
            worktree,
            log: Vec::new(),
            applied: 0,
        }
    }

    /// Apply edits a model put in its final answer instead of calling the tools (small models
    /// often do): `{"edits": [{"path", "old", "new"}]}`; an empty `old` for a path that does not
    /// exist creates it. Returns the refusals.
    pub fn apply_answer_edits(&mut self, answer: &Value) -> Vec<String> {
        let mut refused = Vec::new();
        let Some(edits) = answer.get("edits").and_then(Value::as_array) else {
            return refused;
        };
        for e in edits {
            // An empty `old` for a file that does not exist yet asks for a new file.
            let creates = arg(e, "old").is_none_or(|o| o.trim().is_empty())
                && arg(e, "path").is_some_and(|p| self.worktree.read(p).is_err());
            let r = if creates {
                let content = arg(e, "new").unwrap_or("");
                let args = json!({"path": arg(e, "path"), "content": content});
                self.execute("write_file", &args)
            } else {
                self.execute("edit_file", e)
            };
            if r.is_error {
                refused.push(r.content);
            }
        }
        refused
    }
}

/// `text` without the `   12  ` line-number prefix `file_read` and the prompt put on every
/// line; `None` unless every non-empty line has one.
fn unnumbered(text: &str) -> Option<String> {
    static PREFIX: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PREFIX.get_or_init(|| regex::Regex::new(r"^\s*\d+  ").expect("valid pattern"));
    let lines: Vec<&str> = text.split('\n').collect();
    if !lines
        .iter()
        .filter(|l| !l.is_empty())
        .all(|l| re.is_match(l))
        || text.trim().is_empty()
    {
        return None;
    }
    Some(
        lines
            .iter()
            .map(|l| re.replace(l, "").into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn arg<'v>(args: &'v Value, key: &str) -> Option<&'v str> {
    args.get(key).and_then(Value::as_str)
}

fn line_arg(args: &Value, key: &str) -> Option<usize> {
    match args.get(key) {
        Some(Value::Number(n)) => n.as_u64().map(|n| n as usize),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
}

impl Toolbox for FixTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "file_read".into(),
                description: "Read lines of one file of the worktree, numbered.".into(),
                parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "start": {"type": "integer", "description": "first line, 1-based"},
                    "end": {"type": "integer", "description": "last line, inclusive"}
                }, "required": ["path"]}),
            },
            ToolSpec {
                name: "edit_file".into(),
                description: "Replace one exact piece of a file's text (copied from file_read, without line numbers; it must occur exactly once) by new text.".into(),
                parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "old": {"type": "string"},
                    "new": {"type": "string"}
                }, "required": ["path", "old", "new"]}),
            },
            ToolSpec {
                name: "write_file".into(),
                description: "Create a new file (never overwrites an existing one).".into(),
                parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                }, "required": ["path", "content"]}),
            },
        ]
    }

    fn execute(&mut self, name: &str, args: &Value) -> ToolResult {
        let parsed;
        let args = match args {
            Value::String(s) => {
                parsed = serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
                &parsed
            }
            other => other,
        };
        let path = arg(args, "path").unwrap_or("");
        let result = match name {
            "file_read" => match self.worktree.read(path) {
                Ok(text) => {
                    let lines: Vec<&str> = text.lines().collect();
                    let start = line_arg(args, "start").unwrap_or(1).max(1);
                    let end = line_arg(args, "end")
                        .unwrap_or(lines.len())
                        .min(lines.len())
                        .min(start + MAX_READ_LINES - 1);
                    let body: String = (start..=end)
                        .filter_map(|n| lines.get(n - 1).map(|l| format!("{n:>5}  {l}\n")))
                        .collect();
                    // What the file says is data, never instructions.
                    Ok(quorum_core::weaver::delimit(
                        &format!("{path} lines {start}-{end}"),
                        &body,
                    ))
                }
                Err(e) => Err(e.to_string()),
            },
            "edit_file" => match (arg(args, "old"), arg(args, "new")) {
                // Small models often copy the old text into new unchanged: said so plainly,
                // rather than logged as an edit that then changed nothing.
                (Some(old), Some(new)) if old.trim_end() == new.trim_end() => Err(
                    "new is the same as old, so nothing would change: put the corrected lines in new"
                        .into(),
                ),
                (Some(old), Some(new)) => {
                    let mut r = self.worktree.edit(path, old, new);
                    // Small models copy the numbered lines they were shown, numbers included.
                    if matches!(r, Err(EditError::NotFound { .. })) {
                        if let (Some(old), Some(new)) =
                            (unnumbered(old), unnumbered(new).or(Some(new.to_string())))
                        {
                            r = self.worktree.edit(path, &old, &new);
                        }
                    }
                    r.map(|()| format!("edited {path}"))
                        .map_err(|e| e.to_string())
                }
                _ => Err("edit_file needs path, old and new".into()),
            },
            "write_file" => match arg(args, "content") {
                Some(content) => self
                    .worktree
                    .create(path, content)
                    .map(|()| format!("created {path}"))
                    .map_err(|e| e.to_string()),
                None => Err("write_file needs path and content".into()),
            },
            other => Err(format!(
                "unknown tool {other:?}; available: {}",
                TOOL_NAMES.join(", ")
            )),
        };
        if result.is_ok() && name != "file_read" {
            self.applied += 1;
        }
        self.log.push(match &result {
            Ok(_) => format!("{name} {path} → ok"),
            Err(e) => format!("{name} {path} → refused: {e}"),
        });
        match result {
            Ok(c) => ToolResult::ok(c),
            Err(e) => ToolResult::err(e),
        }
    }

    fn answer_name(&self) -> &str {
        "JSON object {\"edits\": [...], \"summary\": \"...\"}"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_core::fixing::edit::EditBounds;
    use quorum_core::pack::ContextPack;

    /// A worktree of one file `a.py` holding `text`, in `dir`.
    fn worktree(dir: &tempfile::TempDir, text: &str) -> Worktree {
        let pack = ContextPack::from_files("/t".into(), None, vec![("a.py".into(), text.into())]);
        Worktree::materialize(&pack, dir.path().join("wt"), EditBounds::default()).unwrap()
    }

    #[test]
    fn an_edit_copied_with_its_line_numbers_still_applies() {
        let dir = tempfile::tempdir().unwrap();
        let mut wt = worktree(&dir, "x = 1\ny = md5(v)\n");
        let mut tools = FixTools::new(&mut wt);
        let r = tools.execute(
            "edit_file",
            &json!({"path": "a.py", "old": "    2  y = md5(v)", "new": "    2  y = sha256(v)"}),
        );
        assert!(!r.is_error, "{}", r.content);
        assert_eq!(wt.read("a.py").unwrap(), "x = 1\ny = sha256(v)\n");
    }

    #[test]
    fn an_answer_edit_with_an_empty_old_text_creates_a_new_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut wt = worktree(&dir, "x = 1\n");
        let mut tools = FixTools::new(&mut wt);
        let refused = tools.apply_answer_edits(&json!({"edits": [
            {"path": "b.py", "old": "", "new": "y = 2\n"},
            {"path": "a.py", "old": "", "new": "overwritten\n"},
            {"path": "../c.py", "old": "", "new": "outside\n"}]}));
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert_eq!(wt.read("b.py").unwrap(), "y = 2\n");
        assert_eq!(wt.read("a.py").unwrap(), "x = 1\n");
        assert!(!dir.path().join("c.py").exists());
    }

    #[test]
    fn an_edit_whose_new_text_is_its_old_text_is_refused_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut wt = worktree(&dir, "x = 1\n");
        let mut tools = FixTools::new(&mut wt);
        let refused = tools.apply_answer_edits(
            &json!({"edits": [{"path": "a.py", "old": "x = 1", "new": "x = 1\n"}]}),
        );
        assert_eq!(refused.len(), 1);
        assert!(refused[0].contains("new is the same as old"), "{refused:?}");
        assert_eq!(tools.applied, 0);
        assert_eq!(tools.log, ["edit_file a.py → refused: new is the same as old, so nothing would change: put the corrected lines in new"]);
    }
}
