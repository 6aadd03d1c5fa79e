//! The engine's part of a plan: tasks it adds itself — for a dimension, a directory, the
//! fresh-eyes lane, a team member, a selection or a round — built through the planner's own
//! validation, and the directory batches that keep such a task within its bounds.
//!
//! Every rule that adds a task (coverage, rounds, selection, the document team) goes through
//! [`engine_task`], so an added task's tools are the usual intersection and its origin says why
//! the engine added it.

use crate::catalog::Catalog;
use crate::pack::ContextPack;
use crate::schema;
use crate::task::{RejectedTask, Task};
use crate::weaver::estimate_tokens;
use serde_json::json;
use std::collections::BTreeMap;

/// The most files a task added by the engine is given: enough for a directory or a dimension's
/// sweep, few enough that the specialist's prompt budget is not spent on listing them.
pub const MAX_ADDED_FILES: usize = 30;

/// What an engine-added task is validated against: the catalog, the pack, the stage's tools.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub catalog: &'a Catalog,
    pub pack: &'a ContextPack,
    pub stage_tools: &'a [String],
}

/// Build one engine task through the same validation as the planner's (so its tools are the
/// usual intersection), stamped with its origin.
pub fn engine_task(
    scope: Scope<'_>,
    id: String,
    persona: &str,
    files: &[String],
    mandate: &str,
    origin: String,
) -> Result<Task, RejectedTask> {
    let Scope {
        catalog,
        pack,
        stage_tools,
    } = scope;
    let value = json!({"id": id, "persona": persona, "files": files, "mandate": mandate});
    let (mut tasks, mut rejected) =
        schema::validate_tasks(&[value], catalog, pack, stage_tools, usize::MAX);
    match tasks.pop() {
        Some(mut t) => {
            t.origin = Some(origin);
            Ok(t)
        }
        None => Err(rejected.pop().unwrap_or(RejectedTask {
            id,
            persona: persona.to_string(),
            reason: "the engine could not build the task".into(),
        })),
    }
}

/// The directory a file lives in ("." for the root).
pub(crate) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(d, _)| d)
}

/// Batch `files` (sorted, so a directory's files are adjacent) into runs of at most
/// `max_files` files and `max_tokens` estimated tokens, never splitting a directory unless it
/// alone is over a bound.
pub fn batch_files(
    pack: &ContextPack,
    files: &[String],
    max_files: usize,
    max_tokens: u32,
) -> Vec<Vec<String>> {
    let max_files = max_files.max(1);
    let mut by_dir: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for f in files {
        by_dir.entry(dir_of(f)).or_default().push(f);
    }
    let tokens = |p: &str| -> u32 { pack.files.get(p).map_or(0, |f| estimate_tokens(&f.content)) };
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut cur_tokens = 0u32;
    for (_, mut group) in by_dir {
        group.sort();
        let group_tokens: u32 = group.iter().map(|p| tokens(p)).sum();
        // A directory that fits a batch is never split across two.
        let fits_alone = group.len() <= max_files && group_tokens <= max_tokens;
        // One that must be split starts a batch too, so its parts are not spread further.
        if !cur.is_empty()
            && (!fits_alone
                || cur.len() + group.len() > max_files
                || cur_tokens.saturating_add(group_tokens) > max_tokens)
        {
            out.push(std::mem::take(&mut cur));
            cur_tokens = 0;
        }
        for p in group {
            let t = tokens(p);
            if !cur.is_empty()
                && (cur.len() >= max_files || cur_tokens.saturating_add(t) > max_tokens)
            {
                out.push(std::mem::take(&mut cur));
                cur_tokens = 0;
            }
            cur.push(p.clone());
            cur_tokens = cur_tokens.saturating_add(t);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::PackFile;

    fn pack(files: &[(&str, usize)]) -> ContextPack {
        let mut p = ContextPack {
            root: std::path::PathBuf::from("/nonexistent"),
            head_sha: None,
            files: BTreeMap::new(),
            skipped: Vec::new(),
        };
        for (path, len) in files {
            let text = "x".repeat(*len);
            let f = PackFile::new(path.to_string(), std::sync::Arc::from(text.as_str()));
            p.files.insert(f.path.clone(), f);
        }
        p
    }

    #[test]
    fn batches_keep_directories_together_and_respect_both_bounds() {
        let p = pack(&[
            ("a/1.py", 10),
            ("a/2.py", 10),
            ("b/1.py", 10),
            ("b/2.py", 10),
            ("c/1.py", 10),
            ("c/2.py", 10),
            ("c/3.py", 10),
            ("c/4.py", 10),
            ("d/big.py", 40_000),
        ]);
        let files: Vec<String> = p.files.keys().cloned().collect();
        let b = batch_files(&p, &files, 3, 1000);
        let flat: Vec<&String> = b.iter().flatten().collect();
        assert_eq!(flat.len(), files.len(), "every file in exactly one batch");
        assert!(b.iter().all(|x| x.len() <= 3));
        // a/ fits with room to spare, b/ would overflow it: b/ starts its own batch.
        assert_eq!(b[0], ["a/1.py", "a/2.py"]);
        assert_eq!(b[1], ["b/1.py", "b/2.py"]);
        // c/ is over the file bound alone: split, in order.
        assert_eq!(b[2], ["c/1.py", "c/2.py", "c/3.py"]);
        assert_eq!(b[3], ["c/4.py"]);
        // A file over the token bound gets a task of its own.
        assert_eq!(b[4], ["d/big.py"]);
    }
}
