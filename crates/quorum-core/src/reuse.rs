//! Incremental reviews: what a completed attempt's result is keyed by, and when a later review
//! may take it instead of asking a model (content-addressed, as Bazel and Nix reuse work).
//!
//! A specialist task's result is keyed by everything that shapes its first request — the
//! stage, the rendered prompt (persona, mandate, the files it was given with their content,
//! the change's hunks, analyzer leads, the flow's additional rules), the model, the call's
//! sampling and the loop's bounds — and is valid only while every tool call it made returns
//! the same text on today's snapshot: the runtime replays each recorded call against the new
//! pack and compares digests, so a tool read of a changed file invalidates the task that read
//! it. Teammates' insights are left out of the key: they are hints whose order depends on
//! timing, and keying on them would make no two reviews alike.
//!
//! A verifier's vote is keyed by its exact prompt (the claim and the cited lines) and model.
//!
//! Nothing here reads a store or calls a model: the runtime looks keys up and records results;
//! this module says what a key is and why a lookup missed, in words a reader can act on.

use crate::review::finding::{RawFinding, Verdict};
use serde::{Deserialize, Serialize};

/// Bumped when the engine changes what a recorded result means (its parsing, its grounding
/// inputs), so results recorded by an older engine are never taken.
pub const KEY_VERSION: &str = "quorum-reuse-1";

/// One tool call an attempt made and the digest of what it returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRead {
    pub tool: String,
    pub args: serde_json::Value,
    /// blake3 of the full result text, hex.
    pub digest: String,
}

/// A file a task was given or read, and its content hash then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHash {
    pub path: String,
    pub hash: String,
}

/// A specialist task's recorded result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// The review that ran it.
    pub flow_id: String,
    pub task_id: String,
    pub persona: String,
    pub model: String,
    pub findings: Vec<RawFinding>,
    pub invalid: usize,
    pub iterations: u32,
    /// Every tool call it made, in order, with its result's digest.
    pub reads: Vec<ToolRead>,
    /// The files it was given and the files its reads named, with their hashes then.
    pub files: Vec<FileHash>,
    pub recorded_ms: u64,
}

/// What a task's last recorded result looked like, under its identity (persona, mandate,
/// files): what a miss is explained against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskTrace {
    pub key: String,
    pub flow_id: String,
    pub model: String,
    pub files: Vec<FileHash>,
}

/// A verifier's recorded vote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoteResult {
    pub flow_id: String,
    pub model: String,
    pub verdict: Option<Verdict>,
    pub reason: String,
}

/// Whether a planned task runs or takes a recorded result, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Reuse(Box<TaskResult>),
    Run { why: String },
}

fn digest(parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(KEY_VERSION.as_bytes());
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// The blake3 of a tool result's text, hex.
pub fn content_digest(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// A specialist task's key: the stage, its first request (system and user prompt), the model,
/// the call's parameters (sampling, output bound) and the loop's (iterations, tools, result
/// bounds), each as the caller renders it.
pub fn task_key(model: &str, system: &str, user: &str, call: &str, tools: &[String]) -> String {
    digest(&[
        "specialist",
        model,
        system,
        user,
        call,
        &tools.join("\u{1f}"),
    ])
}

/// A task's identity across reviews: its persona, mandate and assigned files. Two reviews'
/// tasks with one identity are "the same task", whose keys differ only by what changed.
pub fn task_identity(persona: &str, mandate: &str, files: &[String]) -> String {
    digest(&["identity", persona, mandate, &files.join("\u{1f}")])
}

/// A verifier vote's key: its exact prompt and model, and the call's parameters.
pub fn vote_key(model: &str, system: &str, user: &str, call: &str) -> String {
    digest(&["vote", model, system, user, call])
}

/// Decide whether `found` (the result recorded under this task's key, if any) may be taken:
/// every recorded tool call must return the same text today (`replay` runs one on today's
/// snapshot and returns its digest). A miss is explained against `trace`, the last result
/// recorded under the task's identity, with `hash_now` giving today's hash of a path.
pub fn decide(
    found: Option<TaskResult>,
    trace: Option<&TaskTrace>,
    model: &str,
    hash_now: impl Fn(&str) -> Option<String>,
    replay: impl Fn(&ToolRead) -> String,
) -> Decision {
    if let Some(found) = found {
        match found.reads.iter().find(|r| replay(r) != r.digest) {
            None => return Decision::Reuse(Box::new(found)),
            Some(read) => {
                return Decision::Run {
                    why: format!(
                        "a tool read returns something else now: {}",
                        describe_read(read)
                    ),
                }
            }
        }
    }
    let Some(trace) = trace else {
        return Decision::Run {
            why: "not run before (no earlier result for this persona, mandate and files)".into(),
        };
    };
    let changed = changed_files(&trace.files, hash_now);
    if !changed.is_empty() {
        return Decision::Run {
            why: format!("changed since {}: {}", trace.flow_id, list(&changed)),
        };
    }
    if trace.model != model {
        return Decision::Run {
            why: format!("the model changed ({} -> {model})", trace.model),
        };
    }
    Decision::Run {
        why: format!(
            "its prompt changed since {} (persona, flow parameters, analyzer leads, hunks or \
             the engine)",
            trace.flow_id
        ),
    }
}

/// The paths of `files` whose content is not what it was (or that are gone).
pub fn changed_files(files: &[FileHash], hash_now: impl Fn(&str) -> Option<String>) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| match hash_now(&f.path) {
            Some(h) if h == f.hash => None,
            Some(_) => Some(format!("{} (edited)", f.path)),
            None => Some(format!("{} (deleted)", f.path)),
        })
        .collect()
}

fn list(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

/// `file_read src/a.py`, `file_grep "pattern"`, or the tool's name.
pub fn describe_read(read: &ToolRead) -> String {
    let arg = |k: &str| {
        read.args
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    match (arg("path"), arg("pattern")) {
        (_, Some(p)) => format!("{} {p:?}", read.tool),
        (Some(path), None) => format!("{} {path}", read.tool),
        _ => read.tool.clone(),
    }
}

/// The paths a task's tool reads name (`path` arguments), for its trace.
pub fn read_paths(reads: &[ToolRead]) -> Vec<String> {
    let mut out: Vec<String> = reads
        .iter()
        .filter(|r| r.tool == "file_read")
        .filter_map(|r| r.args.get("path").and_then(|v| v.as_str()))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(reads: Vec<ToolRead>) -> TaskResult {
        TaskResult {
            flow_id: "f1".into(),
            task_id: "T1".into(),
            persona: "p".into(),
            model: "m".into(),
            findings: Vec::new(),
            invalid: 0,
            iterations: 1,
            reads,
            files: Vec::new(),
            recorded_ms: 0,
        }
    }

    fn read(path: &str, digest: &str) -> ToolRead {
        ToolRead {
            tool: "file_read".into(),
            args: serde_json::json!({ "path": path }),
            digest: digest.into(),
        }
    }

    #[test]
    fn keys_change_with_every_input() {
        let tools = vec!["file_read".to_string()];
        let k = task_key("m", "s", "u", "c", &tools);
        assert_eq!(k, task_key("m", "s", "u", "c", &tools));
        assert_ne!(k, task_key("m2", "s", "u", "c", &tools));
        assert_ne!(k, task_key("m", "s2", "u", "c", &tools));
        assert_ne!(k, task_key("m", "s", "u2", "c", &tools));
        assert_ne!(k, task_key("m", "s", "u", "c2", &tools));
        assert_ne!(k, task_key("m", "s", "u", "c", &[]));
        // Parts are length-prefixed: moving a boundary is another key.
        assert_ne!(
            task_key("m", "ab", "c", "", &[]),
            task_key("m", "a", "bc", "", &[])
        );
        assert_ne!(k, vote_key("m", "s", "u", "c"));
    }

    #[test]
    fn a_result_is_taken_only_while_its_reads_replay_the_same() {
        let found = result(vec![read("a.py", "d1")]);
        let same = decide(Some(found.clone()), None, "m", |_| None, |_| "d1".into());
        assert!(matches!(same, Decision::Reuse(_)));
        let Decision::Run { why } = decide(Some(found), None, "m", |_| None, |_| "d2".into())
        else {
            panic!("a changed read must run the task again");
        };
        assert!(why.contains("file_read a.py"), "{why}");
    }

    #[test]
    fn a_miss_names_the_changed_file_then_the_model_then_the_prompt() {
        let trace = TaskTrace {
            key: "k".into(),
            flow_id: "f1".into(),
            model: "m".into(),
            files: vec![
                FileHash {
                    path: "a.py".into(),
                    hash: "h1".into(),
                },
                FileHash {
                    path: "b.py".into(),
                    hash: "h2".into(),
                },
            ],
        };
        let why = |model: &str, now: &dyn Fn(&str) -> Option<String>| match decide(
            None,
            Some(&trace),
            model,
            now,
            |_| String::new(),
        ) {
            Decision::Run { why } => why,
            Decision::Reuse(_) => panic!("nothing recorded under the key"),
        };
        let edited = why("m", &|p| Some(if p == "a.py" { "x" } else { "h2" }.into()));
        assert_eq!(edited, "changed since f1: a.py (edited)");
        let deleted = why("m", &|p| (p == "a.py").then(|| "h1".to_string()));
        assert_eq!(deleted, "changed since f1: b.py (deleted)");
        let same = |p: &str| Some(if p == "a.py" { "h1" } else { "h2" }.to_string());
        assert_eq!(why("m2", &same), "the model changed (m -> m2)");
        assert!(why("m", &same).starts_with("its prompt changed since f1"));
        let Decision::Run { why } = decide(None, None, "m", |_| None, |_| String::new()) else {
            panic!()
        };
        assert!(why.starts_with("not run before"), "{why}");
    }
}
