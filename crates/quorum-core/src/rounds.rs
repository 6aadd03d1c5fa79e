//! The exhaustive flow's rounds (seed 001 §5.6: scout → map → reduce, then evaluate): every
//! included file batched by directory into specialist tasks, and the convergence rule that
//! decides, after each round, whether another one runs.
//!
//! A round is a set of ordinary specialist tasks, so the scheduler places them like any other
//! (across the cluster when there is one). Round 1 gives every file of the pack to the flow's
//! first lane persona; round k re-reads, with the next lane persona, the files of the tasks of
//! round k-1 that reported something new ("hot" files). After a round, its delta is the number
//! of findings whose anchor no earlier round reported; the review converges when the delta is
//! below the threshold, when a round found nothing new to re-read, or at `max_rounds`.

use crate::coverage::{engine_task, Scope};
use crate::pack::ContextPack;
use crate::task::{RejectedTask, Task};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The prefix of every round task's `origin`; the round number follows it.
pub const ORIGIN_PREFIX: &str = "exhaustive: round ";

/// The flow's `exhaustive` block: what rounds run and when they stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exhaustive {
    /// Lane personas, one per round in order (cycled when there are more rounds than lanes).
    pub personas: Vec<String>,
    /// Mandate of every round task; the batch's directories are appended.
    pub mandate: String,
    /// Most files in one task.
    #[serde(default = "default_files")]
    pub max_files_per_task: usize,
    /// Most estimated tokens of file content in one task, so every body fits the prompt (a
    /// single file over it gets a task of its own).
    #[serde(default = "default_tokens")]
    pub max_tokens_per_task: u32,
    /// Another round runs while a round's new findings are at least this many (seed: 2).
    #[serde(default = "default_threshold")]
    pub threshold: usize,
    /// The most rounds, the first included.
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
}

fn default_files() -> usize {
    40
}
fn default_tokens() -> u32 {
    6000
}
fn default_threshold() -> usize {
    2
}
fn default_rounds() -> u32 {
    3
}

/// One round's metrics: recorded as a store event when the round ends and shown in the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundMetrics {
    pub round: u32,
    pub persona: String,
    pub tasks: usize,
    /// Tasks of the round that completed.
    pub completed: usize,
    pub files: usize,
    /// Findings the round's tasks reported (before dedup).
    pub findings: usize,
    /// Of those, distinct anchors no earlier round reported: the delta.
    pub new_findings: usize,
    /// Distinct anchors reported by the rounds before this one.
    pub previous_total: usize,
    /// new_findings / previous_total (0 when there was nothing before).
    pub delta_ratio: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Whether another round follows, and why or why not.
    pub next: bool,
    pub decision: String,
}

/// The round a task belongs to, from its origin; `None` for a task no round made.
pub fn round_of(task: &Task) -> Option<u32> {
    task.origin
        .as_deref()?
        .strip_prefix(ORIGIN_PREFIX)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn dir_of(path: &str) -> &str {
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
    let tokens = |p: &str| -> u32 {
        pack.files
            .get(p)
            .map_or(0, |f| crate::weaver::estimate_tokens(&f.content))
    };
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

/// The tasks of round `round` over `files`, for the round's lane persona. Refusals (a persona
/// the catalog cannot give the task) are returned, never dropped.
pub fn round_tasks(
    rule: &Exhaustive,
    scope: Scope<'_>,
    round: u32,
    files: &[String],
) -> (Vec<Task>, Vec<RejectedTask>) {
    let Some(persona) = lane(rule, round) else {
        return (Vec::new(), Vec::new());
    };
    let mut tasks = Vec::new();
    let mut refused = Vec::new();
    let batches = batch_files(
        scope.pack,
        files,
        rule.max_files_per_task,
        rule.max_tokens_per_task,
    );
    for (i, batch) in batches.iter().enumerate() {
        let dirs: BTreeSet<&str> = batch.iter().map(|p| dir_of(p)).collect();
        let shown: Vec<&str> = dirs.into_iter().collect();
        let mandate = format!(
            "{} Files: {} file(s) under {}.",
            rule.mandate.trim(),
            batch.len(),
            shown.join(", ")
        );
        let origin = format!(
            "{ORIGIN_PREFIX}{round}, batch {} of {}",
            i + 1,
            batches.len()
        );
        let id = format!("r{round}b{}", i + 1);
        match engine_task(scope, id, persona, batch, &mandate, origin) {
            Ok(t) => tasks.push(t),
            Err(r) => refused.push(r),
        }
    }
    (tasks, refused)
}

/// The lane persona of a round (1-based), cycling through the flow's list.
pub fn lane(rule: &Exhaustive, round: u32) -> Option<&str> {
    if rule.personas.is_empty() || round == 0 {
        return None;
    }
    let i = (round as usize - 1) % rule.personas.len();
    Some(rule.personas[i].as_str())
}

/// What one task of a round ended with, as the evaluation needs it.
pub struct TaskOutcome<'a> {
    pub task: &'a Task,
    pub completed: bool,
    pub anchors: Vec<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

/// Evaluate round `round`: `earlier` are the anchors of every earlier round's findings.
/// Returns the metrics and the files the next round re-reads (empty when it converged).
pub fn evaluate(
    rule: &Exhaustive,
    round: u32,
    outcomes: &[TaskOutcome<'_>],
    earlier: &BTreeSet<String>,
) -> (RoundMetrics, Vec<String>) {
    let mut new: BTreeSet<&str> = BTreeSet::new();
    let mut hot: BTreeSet<String> = BTreeSet::new();
    let mut files: BTreeSet<&str> = BTreeSet::new();
    let mut m = RoundMetrics {
        round,
        persona: lane(rule, round).unwrap_or_default().to_string(),
        tasks: outcomes.len(),
        previous_total: earlier.len(),
        ..RoundMetrics::default()
    };
    for o in outcomes {
        files.extend(o.task.files.iter().map(String::as_str));
        m.completed += usize::from(o.completed);
        m.findings += o.anchors.len();
        m.tokens_in += o.tokens_in;
        m.tokens_out += o.tokens_out;
        let fresh: Vec<&str> = o
            .anchors
            .iter()
            .map(String::as_str)
            .filter(|a| !earlier.contains(*a))
            .collect();
        if !fresh.is_empty() {
            hot.extend(o.task.files.iter().cloned());
        }
        new.extend(fresh);
    }
    m.files = files.len();
    m.new_findings = new.len();
    m.delta_ratio = if m.previous_total == 0 {
        0.0
    } else {
        m.new_findings as f64 / m.previous_total as f64
    };
    let (next, decision) = if m.new_findings < rule.threshold {
        (
            false,
            format!(
                "converged: {} new finding(s), under the threshold of {}",
                m.new_findings, rule.threshold
            ),
        )
    } else if round >= rule.max_rounds {
        (
            false,
            format!("stopped at the flow's max_rounds ({})", rule.max_rounds),
        )
    } else {
        (
            true,
            format!(
                "{} new finding(s), at or over the threshold of {}: round {} re-reads {} file(s)",
                m.new_findings,
                rule.threshold,
                round + 1,
                hot.len()
            ),
        )
    };
    m.next = next;
    m.decision = decision;
    let hot = if next {
        hot.into_iter().collect()
    } else {
        Vec::new()
    };
    (m, hot)
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

    fn rule() -> Exhaustive {
        Exhaustive {
            personas: vec!["lane_a".into(), "lane_b".into()],
            mandate: "m".into(),
            max_files_per_task: 3,
            max_tokens_per_task: 1000,
            threshold: 2,
            max_rounds: 3,
        }
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

    fn task(id: &str, files: &[&str], round: u32) -> Task {
        Task {
            id: id.into(),
            persona: "lane_a".into(),
            files: files.iter().map(|s| s.to_string()).collect(),
            mandate: "m".into(),
            tools: vec![],
            verification: String::new(),
            model: None,
            dimension: None,
            origin: Some(format!("{ORIGIN_PREFIX}{round}, batch 1 of 1")),
        }
    }

    #[test]
    fn a_round_with_enough_new_findings_continues_on_its_hot_files_only() {
        let t1 = task("r1b1", &["a.py"], 1);
        let t2 = task("r1b2", &["b.py"], 1);
        assert_eq!(round_of(&t1), Some(1));
        let outcomes = [
            TaskOutcome {
                task: &t1,
                completed: true,
                anchors: vec!["x".into(), "y".into()],
                tokens_in: 5,
                tokens_out: 1,
            },
            TaskOutcome {
                task: &t2,
                completed: true,
                anchors: vec!["seen".into()],
                tokens_in: 5,
                tokens_out: 1,
            },
        ];
        let earlier: BTreeSet<String> = ["seen".to_string()].into();
        let (m, hot) = evaluate(&rule(), 1, &outcomes, &earlier);
        assert_eq!((m.findings, m.new_findings, m.previous_total), (3, 2, 1));
        assert!(m.next, "{}", m.decision);
        assert_eq!(hot, ["a.py"]);
        assert_eq!(m.delta_ratio, 2.0);
        // The same round with one new finding only: under the threshold, it converges.
        let (m, hot) = evaluate(&rule(), 1, &outcomes[..1], &["x".to_string()].into());
        assert!(!m.next && hot.is_empty(), "{}", m.decision);
        assert!(m.decision.starts_with("converged"));
        // At max_rounds it stops whatever the delta.
        let (m, _) = evaluate(&rule(), 3, &outcomes, &earlier);
        assert!(!m.next && m.decision.contains("max_rounds"));
        assert_eq!(lane(&rule(), 3), Some("lane_a"));
    }
}
