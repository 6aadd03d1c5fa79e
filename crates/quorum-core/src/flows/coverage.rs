//! Deterministic coverage of a plan: a flow's fixed dimensions and its source directories.
//!
//! The planner is a model and may leave a dimension or a directory out. After planning, this
//! module checks the plan against the flow's rules and adds a task for each gap, with the reason
//! in the task's `origin`, so coverage is never dropped silently. It also measures, for the
//! report, which tasks and findings each dimension ended with.

use crate::catalog::Catalog;
use crate::flows::flow::{CoverageMode, Dimension, Flow};
use crate::flows::plan::{batch_files, dir_of, engine_task, Scope, MAX_ADDED_FILES};
use crate::pack::{ContextPack, FileKind};
use crate::review::finding::Finding;
use crate::task::{RejectedTask, Task};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One dimension's coverage in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DimensionCoverage {
    pub name: String,
    pub required: bool,
    /// Ids of the tasks that count for this dimension.
    pub tasks: Vec<String>,
    /// Findings reported by those tasks' personas.
    pub findings: usize,
}

/// One source directory and the tasks whose files include it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectoryCoverage {
    pub directory: String,
    pub tasks: Vec<String>,
}

/// A task the engine added to the plan, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddedTask {
    pub task: String,
    pub persona: String,
    pub reason: String,
}

/// The most paths `coverage.never_reviewed` lists; `never_reviewed_count` has them all.
pub const MAX_NEVER_REVIEWED: usize = 50;

/// The prefix of the origin of every task `--coverage full` added.
pub const FULL_ORIGIN_PREFIX: &str = "coverage: full";

/// `report.json` `coverage` (additive): present in every report. The dimension and directory
/// parts are filled for flows that declare those rules; the file counts for every flow.
///
/// A file counts as *reviewed* when it was in the files of a specialist task that completed.
/// That task's prompt carried the file's numbered lines unless the prompt budget had no room for
/// them (the specialist then had only its `file_read` tool); the exhaustive flow sizes its
/// batches so that every body fits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoverageReport {
    /// Which coverage mode ran: `sampled` (the planner's tasks) or `full` (every file in some
    /// task); the exhaustive flow is always `full`.
    #[serde(default)]
    pub mode: CoverageMode,
    #[serde(default)]
    pub dimensions: Vec<DimensionCoverage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<DirectoryCoverage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<AddedTask>,
    /// Files in the review (the context pack).
    #[serde(default)]
    pub files_total: usize,
    /// Of those, files some completed specialist task was given.
    #[serde(default)]
    pub files_reviewed: usize,
    /// Persona -> how many distinct files its completed tasks were given.
    #[serde(default)]
    pub by_persona: BTreeMap<String, usize>,
    /// Files no completed task was given, sorted, at most [`MAX_NEVER_REVIEWED`].
    #[serde(default)]
    pub never_reviewed: Vec<String>,
    /// How many files were never reviewed (the list above may be cut).
    #[serde(default)]
    pub never_reviewed_count: usize,
}

impl CoverageReport {
    /// Fill the file counts from the tasks that completed.
    pub fn count_files(&mut self, pack: &ContextPack, completed: &[&Task]) {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut by_persona: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for t in completed {
            for f in &t.files {
                // Only files of the pack count: a path the pack lacks was read by no one.
                if let Some(pf) = pack.files.get(f) {
                    seen.insert(pf.path.as_str());
                    by_persona
                        .entry(t.persona.as_str())
                        .or_default()
                        .insert(pf.path.as_str());
                }
            }
        }
        let never: Vec<String> = pack
            .files
            .keys()
            .filter(|p| !seen.contains(p.as_str()))
            .cloned()
            .collect();
        self.files_total = pack.files.len();
        self.files_reviewed = seen.len();
        self.by_persona = by_persona
            .into_iter()
            .map(|(p, files)| (p.to_string(), files.len()))
            .collect();
        self.never_reviewed_count = never.len();
        self.never_reviewed = never.into_iter().take(MAX_NEVER_REVIEWED).collect();
    }
}

/// The top-level component of a directory ("." stays ".").
fn top_of(dir: &str) -> &str {
    dir.split('/').next().unwrap_or(dir)
}

/// Directories holding at least one code file, sorted.
pub fn source_directories(pack: &ContextPack) -> BTreeSet<String> {
    pack.files
        .values()
        .filter(|f| f.kind == FileKind::Code)
        .map(|f| dir_of(&f.path).to_string())
        .collect()
}

/// Whether a task counts for a dimension: filed under it, or (when filed under none of the
/// flow's dimensions) run by one of its personas.
fn counts_for(flow: &Flow, task: &Task, d: &Dimension) -> bool {
    // The fresh-eyes lane covers no dimension: it is a second look, not a planned one.
    if task.origin.as_deref() == Some(FRESH_EYES_ORIGIN) {
        return false;
    }
    match task.dimension.as_deref() {
        Some(name) if flow.dimensions.iter().any(|x| x.name == name) => name == d.name,
        _ => d.personas.contains(&task.persona),
    }
}

fn dimension_origin(name: &str) -> String {
    format!("coverage: the plan had no task for the {name} dimension")
}

/// The planner's view of the dimensions: one line each, with the personas that cover it.
pub fn dimensions_prompt(flow: &Flow) -> String {
    let mut s = String::new();
    for d in &flow.dimensions {
        s.push_str(&format!(
            "- {}{}: {}\n",
            d.name,
            if d.required { " (required)" } else { "" },
            d.personas.join(", ")
        ));
    }
    s
}

fn next_id(tasks: &[Task], prefix: &str) -> String {
    let taken: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    (1..)
        .map(|n| format!("{prefix}{n}"))
        .find(|id| !taken.contains(id.as_str()))
        .unwrap_or_else(|| prefix.to_string())
}

fn kind_name(k: FileKind) -> &'static str {
    match k {
        FileKind::Code => "code",
        FileKind::Config => "config",
        FileKind::Doc => "doc",
        FileKind::Data => "data",
    }
}

/// Add a task for every required dimension without one and for every top-level group of source
/// directories no task's files reach. Returns what could not be added (a persona the catalog
/// lacks), so the caller reports it instead of losing it.
pub fn complete_plan(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Vec<RejectedTask> {
    let scope = Scope {
        catalog,
        pack,
        stage_tools,
    };
    let mut refused = Vec::new();
    for d in flow.dimensions.iter().filter(|d| d.required) {
        if tasks.iter().any(|t| counts_for(flow, t, d)) {
            continue;
        }
        let files: Vec<String> = pack
            .files
            .values()
            .filter(|f| d.kinds.is_empty() || d.kinds.iter().any(|k| k == kind_name(f.kind)))
            .map(|f| f.path.clone())
            .take(MAX_ADDED_FILES)
            .collect();
        let mandate = if d.mandate.trim().is_empty() {
            format!("Review the work for {} problems.", d.name)
        } else {
            d.mandate.trim().to_string()
        };
        let Some(persona) = d.personas.first() else {
            continue;
        };
        let id = next_id(tasks, "d");
        match engine_task(
            scope,
            id,
            persona,
            &files,
            &mandate,
            dimension_origin(&d.name),
        ) {
            Ok(mut t) => {
                t.dimension = Some(d.name.clone());
                tasks.push(t);
            }
            Err(r) => refused.push(r),
        }
    }
    if let Some(rule) = &flow.directory_coverage {
        let covered: BTreeSet<&str> = tasks
            .iter()
            .flat_map(|t| t.files.iter().map(|f| dir_of(f)))
            .collect();
        let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for dir in source_directories(pack) {
            if !covered.contains(dir.as_str()) {
                missing
                    .entry(top_of(&dir).to_string())
                    .or_default()
                    .push(dir);
            }
        }
        for (top, dirs) in missing {
            let files: Vec<String> = pack
                .files
                .values()
                .filter(|f| f.kind == FileKind::Code && dirs.iter().any(|d| d == dir_of(&f.path)))
                .map(|f| f.path.clone())
                .take(MAX_ADDED_FILES)
                .collect();
            let shown = if top == "." {
                "the root directory".to_string()
            } else {
                format!("{top}/")
            };
            let mandate = format!("{} Files: the source under {shown}.", rule.mandate.trim());
            let id = next_id(tasks, "s");
            let origin = format!(
                "coverage: no task covered the source in {}",
                dirs.join(", ")
            );
            match engine_task(scope, id, &rule.persona, &files, &mandate, origin) {
                Ok(t) => tasks.push(t),
                Err(r) => refused.push(r),
            }
        }
    }
    refused
}

/// `--coverage full`: after the flow's other rules, batch every file of the pack that no task
/// is given by directory (the flow's [`crate::flows::flow::FullCoverage`] bounds) into tasks for the
/// flow's full-coverage persona, so every included file is in some task. Does nothing in
/// sampled mode. Returns the refusals (a persona the catalog cannot give a task).
pub fn add_full_coverage(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Vec<RejectedTask> {
    if flow.coverage_mode() != CoverageMode::Full || flow.exhaustive.is_some() {
        return Vec::new();
    }
    let Some(rule) = flow.full_coverage_rule() else {
        // Flow validation and the flag's check refuse this before a review starts.
        return Vec::new();
    };
    let covered: BTreeSet<&str> = tasks
        .iter()
        .flat_map(|t| t.files.iter().map(String::as_str))
        .collect();
    let missing: Vec<String> = pack
        .files
        .keys()
        .filter(|p| !covered.contains(p.as_str()))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let scope = Scope {
        catalog,
        pack,
        stage_tools,
    };
    let (max_files, max_tokens) = flow.full_coverage_bounds(&rule);
    let batches = batch_files(pack, &missing, max_files, max_tokens);
    let mut refused = Vec::new();
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
            "{FULL_ORIGIN_PREFIX}: no planned task covered these files (batch {} of {})",
            i + 1,
            batches.len()
        );
        let id = next_id(tasks, "c");
        match engine_task(scope, id, &rule.persona, batch, &mandate, origin) {
            Ok(t) => tasks.push(t),
            Err(r) => {
                refused.push(r);
                // The same persona is refused for every batch: say so once.
                break;
            }
        }
    }
    refused
}

/// Shard every planned task over the flow's per-task budget (`max_task_files`, and
/// `max_task_tokens` of estimated body tokens) by module: its files, in path order, batched by
/// directory ([`crate::flows::plan::batch_files`]: a directory is split only when it alone is over a
/// bound), each batch a task of the same persona, mandate and tools — the first keeps the id,
/// the others are `id.2`, `id.3`, … with `origin` "shard k/n of id". Shards past `max_tasks`
/// are returned as rejected, with the files they would have read, so the report says what the
/// plan could not cover (`--coverage full` adds them back in batches).
pub fn shard_tasks(flow: &Flow, pack: &ContextPack, tasks: &mut Vec<Task>) -> Vec<RejectedTask> {
    let p = &flow.parameters;
    let max_files = p.max_task_files.max(1);
    let max_tokens = if p.max_task_tokens == 0 {
        u32::MAX
    } else {
        p.max_task_tokens
    };
    let tokens = |path: &str| {
        pack.files.get(path).map_or(0u64, |f| {
            u64::from(crate::weaver::estimate_tokens(&f.content))
        })
    };
    let mut out: Vec<Task> = Vec::with_capacity(tasks.len());
    let mut rejected = Vec::new();
    let mut room = p.max_tasks.saturating_sub(tasks.len());
    for t in tasks.drain(..) {
        let total: u64 = t.files.iter().map(|f| tokens(f)).sum();
        if t.files.len() <= max_files && total <= u64::from(max_tokens) {
            out.push(t);
            continue;
        }
        let mut files = t.files.clone();
        files.sort();
        let batches = batch_files(pack, &files, max_files, max_tokens);
        let n = batches.len();
        for (k, batch) in batches.into_iter().enumerate() {
            let mut shard = t.clone();
            if k > 0 {
                if room == 0 {
                    rejected.push(RejectedTask {
                        id: format!("{}.{}", t.id, k + 1),
                        persona: t.persona.clone(),
                        reason: format!(
                            "shard {} of {n} of {} is over the flow's max_tasks ({}); its {} files were not assigned",
                            k + 1,
                            t.id,
                            p.max_tasks,
                            batch.len()
                        ),
                    });
                    continue;
                }
                room -= 1;
                shard.id = format!("{}.{}", t.id, k + 1);
            }
            shard.files = batch;
            shard.origin = Some(format!("shard {}/{n} of {}", k + 1, t.id));
            out.push(shard);
        }
    }
    *tasks = out;
    rejected
}

/// The origin of the fresh-eyes task; findings only such tasks reported are `fresh_eyes`.
pub const FRESH_EYES_ORIGIN: &str = "fresh eyes: sees only the material, not the plan's mandates";

/// Add the flow's fresh-eyes task ([`crate::flows::flow::FreshEyes`]) to a plan: its persona on the
/// material (the lane's file kinds, up to [`MAX_ADDED_FILES`]) with the lane's own mandate.
/// Team tools are withheld, so nothing of the other tasks' mandates reaches it through the
/// blackboard. Returns the refusal when the persona cannot take it.
pub fn add_fresh_eyes(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Option<RejectedTask> {
    let lane = flow.fresh_eyes.as_ref()?;
    let files: Vec<String> = pack
        .files
        .values()
        .filter(|f| lane.kinds.is_empty() || lane.kinds.iter().any(|k| k == kind_name(f.kind)))
        .map(|f| f.path.clone())
        .take(MAX_ADDED_FILES)
        .collect();
    let tools: Vec<String> = stage_tools
        .iter()
        .filter(|t| !crate::catalog::TEAM_TOOLS.contains(&t.as_str()))
        .cloned()
        .collect();
    let scope = Scope {
        catalog,
        pack,
        stage_tools: &tools,
    };
    let id = next_id(tasks, "fresh");
    match engine_task(
        scope,
        id,
        &lane.persona,
        &files,
        lane.mandate.trim(),
        FRESH_EYES_ORIGIN.to_string(),
    ) {
        Ok(t) => {
            tasks.push(t);
            None
        }
        Err(r) => Some(r),
    }
}

/// Mark the findings (and residual concerns) that only fresh-eyes tasks reported: no report
/// from another task shares their anchor. `fresh` names the fresh-eyes tasks.
///
/// "The same finding" is what the flow's synthesis merged: the code anchor for the standard
/// synthesis; file, section and normalised title for document synthesis (whose anchors are
/// sections, not code lines).
pub fn mark_fresh_eyes(
    flow: &Flow,
    findings: &mut [Finding],
    judged: &[crate::review::judged::Judged],
    fresh: &BTreeSet<String>,
) {
    if fresh.is_empty() {
        return;
    }
    let document = flow.synthesis == crate::flows::flow::SynthesisMode::Document;
    let report_key = |j: &crate::review::judged::Judged| {
        if document {
            crate::judging::docreview::report_key(j)
        } else {
            crate::review::dedup::anchor(&j.reported.finding)
        }
    };
    let mut by_fresh = BTreeSet::new();
    let mut by_others = BTreeSet::new();
    // A report grounding or the verifiers refuted corroborates nothing.
    for j in judged
        .iter()
        .filter(|j| j.verdict != crate::review::finding::Verdict::Hallucinated)
    {
        let a = report_key(j);
        if fresh.contains(&j.reported.task_id) {
            by_fresh.insert(a);
        } else {
            by_others.insert(a);
        }
    }
    for f in findings {
        let k = if document {
            crate::judging::docreview::finding_key(f)
        } else {
            f.anchor.clone()
        };
        f.fresh_eyes = by_fresh.contains(&k) && !by_others.contains(&k);
    }
}

/// What the report says about coverage: the flow's dimensions and directories (empty when it
/// declares no such rule) and, for every flow, which files the tasks that completed were given.
pub fn report(
    flow: &Flow,
    pack: &ContextPack,
    tasks: &[Task],
    completed: &[&Task],
    findings: &[Finding],
) -> CoverageReport {
    let mut out = rules_report(flow, pack, tasks, findings);
    out.mode = flow.coverage_mode();
    out.count_files(pack, completed);
    out
}

fn rules_report(
    flow: &Flow,
    pack: &ContextPack,
    tasks: &[Task],
    findings: &[Finding],
) -> CoverageReport {
    let dimensions = flow
        .dimensions
        .iter()
        .map(|d| {
            let mine: Vec<&Task> = tasks.iter().filter(|t| counts_for(flow, t, d)).collect();
            let personas: BTreeSet<&str> = mine.iter().map(|t| t.persona.as_str()).collect();
            DimensionCoverage {
                name: d.name.clone(),
                required: d.required,
                tasks: mine.iter().map(|t| t.id.clone()).collect(),
                findings: findings
                    .iter()
                    .filter(|f| {
                        f.reporters
                            .iter()
                            .any(|r| personas.contains(r.persona.as_str()))
                    })
                    .count(),
            }
        })
        .collect();
    let directories = if flow.directory_coverage.is_some() {
        source_directories(pack)
            .into_iter()
            .map(|dir| DirectoryCoverage {
                tasks: tasks
                    .iter()
                    .filter(|t| t.files.iter().any(|f| dir_of(f) == dir))
                    .map(|t| t.id.clone())
                    .collect(),
                directory: dir,
            })
            .collect()
    } else {
        Vec::new()
    };
    let added = tasks
        .iter()
        .filter_map(|t| {
            let reason = t.origin.as_deref()?;
            reason.starts_with("coverage:").then(|| AddedTask {
                task: t.id.clone(),
                persona: t.persona.clone(),
                reason: reason.to_string(),
            })
        })
        .collect();
    CoverageReport {
        dimensions,
        directories,
        added,
        ..CoverageReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::PackFile;
    use std::path::Path;

    fn repo() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn pack(files: &[(&str, &str)]) -> ContextPack {
        let mut p = ContextPack {
            root: std::path::PathBuf::from("/nonexistent"),
            head_sha: None,
            files: BTreeMap::new(),
            skipped: Vec::new(),
        };
        for (path, text) in files {
            let f = PackFile::new(path.to_string(), std::sync::Arc::from(*text));
            p.files.insert(f.path.clone(), f);
        }
        p
    }

    fn flow() -> Flow {
        Flow::load(&repo().join("flows/comprehensive.yaml")).unwrap()
    }

    fn task(id: &str, persona: &str, files: &[&str]) -> Task {
        Task::new(id, persona, files, "m")
    }

    #[test]
    fn every_missing_dimension_and_directory_gets_a_task_with_a_reason() {
        let flow = flow();
        let catalog = Catalog::load(&repo().join("personas")).unwrap();
        flow.check_personas(&catalog).unwrap();
        let pack = pack(&[
            ("src/a.py", "x = 1\n"),
            ("src/deep/b.py", "y = 2\n"),
            ("lib/c.py", "z = 3\n"),
            ("README.md", "# readme\n"),
        ]);
        let first = &flow.dimensions[0];
        let mut tasks = vec![task("t1", &first.personas[0], &["src/a.py"])];
        let refused = complete_plan(&flow, &catalog, &pack, &["file_read".into()], &mut tasks);
        assert!(refused.is_empty(), "{refused:?}");
        for d in flow.dimensions.iter().filter(|d| d.required) {
            assert!(
                tasks.iter().any(|t| counts_for(&flow, t, d)),
                "dimension {} has no task",
                d.name
            );
        }
        // t1 already covers the first dimension: nothing was added for it.
        assert!(!tasks
            .iter()
            .any(|t| t.origin.as_deref() == Some(dimension_origin(&first.name).as_str())));
        // Dimension tasks read every file; the directory rule then finds all directories
        // covered, so it adds nothing more.
        let report = report(&flow, &pack, &tasks, &[], &[]);
        for d in &report.directories {
            assert!(!d.tasks.is_empty(), "{} uncovered", d.directory);
        }
        assert_eq!(report.dimensions.len(), flow.dimensions.len());
        assert!(report
            .added
            .iter()
            .all(|a| a.reason.starts_with("coverage:")));
    }

    #[test]
    fn uncovered_directories_are_grouped_by_top_level_directory() {
        let mut flow = flow();
        flow.dimensions.clear();
        let catalog = Catalog::load(&repo().join("personas")).unwrap();
        let pack = pack(&[
            ("src/a.py", "x = 1\n"),
            ("src/deep/b.py", "y = 2\n"),
            ("lib/c.py", "z = 3\n"),
            ("main.py", "print(1)\n"),
        ]);
        let mut tasks = vec![task("t1", "software_developer", &["src/a.py"])];
        complete_plan(&flow, &catalog, &pack, &["file_read".into()], &mut tasks);
        let added: Vec<(&str, &[String])> = tasks[1..]
            .iter()
            .map(|t| (t.origin.as_deref().unwrap_or(""), t.files.as_slice()))
            .collect();
        assert_eq!(added.len(), 3, "{added:?}");
        assert!(added[0].0.contains("source in ."), "{added:?}");
        assert_eq!(added[0].1, ["main.py"]);
        assert_eq!(added[1].1, ["lib/c.py"]);
        assert_eq!(added[2].1, ["src/deep/b.py"]);
        assert!(added[2].0.contains("src/deep"));
    }

    #[test]
    fn files_count_as_reviewed_only_through_completed_tasks() {
        let mut flow = flow();
        flow.dimensions.clear();
        flow.directory_coverage = None;
        let mut files: Vec<(String, String)> =
            vec![("a.py".into(), "x\n".into()), ("b.py".into(), "y\n".into())];
        for i in 0..(MAX_NEVER_REVIEWED + 5) {
            files.push((format!("z/f{i:03}.py"), "z\n".into()));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let pack = pack(&refs);
        let done = task("t1", "p_one", &["a.py", "not/in/pack.py"]);
        let also = task("t2", "p_two", &["a.py", "b.py"]);
        let failed = task("t3", "p_one", &["z/f000.py"]);
        let all = vec![done.clone(), also.clone(), failed];
        let c = report(&flow, &pack, &all, &[&done, &also], &[]);
        assert!(c.dimensions.is_empty() && c.directories.is_empty());
        assert_eq!(c.files_total, files.len());
        assert_eq!(c.files_reviewed, 2);
        assert_eq!(c.by_persona.get("p_one"), Some(&1));
        assert_eq!(c.by_persona.get("p_two"), Some(&2));
        // The failed task's file was never reviewed; the list is capped, the count is not.
        assert_eq!(c.never_reviewed_count, MAX_NEVER_REVIEWED + 5);
        assert_eq!(c.never_reviewed.len(), MAX_NEVER_REVIEWED);
        assert_eq!(c.never_reviewed[0], "z/f000.py");
    }

    #[test]
    fn a_task_over_the_per_task_budget_is_sharded_by_module_within_max_tasks() {
        let mut flow = Flow::load(&repo().join("flows/review.yaml")).unwrap();
        flow.parameters.max_task_files = 3;
        flow.parameters.max_task_tokens = 0;
        flow.parameters.max_tasks = 4;
        let names: Vec<String> = (0..4)
            .flat_map(|d| (0..3).map(move |f| format!("svc{d}/f{f}.py")))
            .collect();
        let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "x = 1\n")).collect();
        let twelve = pack(&files);
        let all: Vec<&str> = names.iter().map(String::as_str).collect();
        let small = task("t2", "software_developer", &["svc0/f0.py"]);
        let mut tasks = vec![task("t1", "security_sentinel", &all), small.clone()];
        let rejected = shard_tasks(&flow, &twelve, &mut tasks);
        // 12 files over 4 modules of 3: four shards wanted, but max_tasks 4 leaves room for
        // three of them beside t2.
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["t1", "t1.2", "t1.3", "t2"]);
        assert_eq!(
            tasks[0].files,
            ["svc0/f0.py", "svc0/f1.py", "svc0/f2.py"],
            "one module each"
        );
        assert_eq!(tasks[1].files[0], "svc1/f0.py");
        assert_eq!(tasks[1].origin.as_deref(), Some("shard 2/4 of t1"));
        assert!(tasks[..3]
            .iter()
            .all(|t| t.persona == "security_sentinel" && t.mandate == "m"));
        assert_eq!(tasks[3], small, "a task within budget is untouched");
        assert_eq!(rejected.len(), 1);
        assert_eq!(rejected[0].id, "t1.4");
        assert!(
            rejected[0].reason.contains("max_tasks (4)"),
            "{}",
            rejected[0].reason
        );
        // A token budget shards as well: three files of ~50 tokens each under a 120 budget.
        flow.parameters.max_task_files = 60;
        flow.parameters.max_task_tokens = 120;
        flow.parameters.max_tasks = 20;
        let body = "word ".repeat(40);
        let heavy = pack(&[("m/a.py", &body), ("m/b.py", &body), ("m/c.py", &body)]);
        let mut tasks = vec![task(
            "t1",
            "security_sentinel",
            &["m/a.py", "m/b.py", "m/c.py"],
        )];
        assert!(shard_tasks(&flow, &heavy, &mut tasks).is_empty());
        assert!(tasks.len() >= 2, "{tasks:?}");
        let mut covered: Vec<String> = tasks.iter().flat_map(|t| t.files.clone()).collect();
        covered.sort();
        assert_eq!(
            covered,
            ["m/a.py", "m/b.py", "m/c.py"],
            "every file in exactly one shard"
        );
    }

    #[test]
    fn full_coverage_batches_every_file_no_task_covers_and_sampled_adds_nothing() {
        let mut flow = Flow::load(&repo().join("flows/review.yaml")).unwrap();
        let catalog = Catalog::load(&repo().join("personas")).unwrap();
        flow.check_personas(&catalog).unwrap();
        let pack = pack(&[
            ("src/a.py", "x = 1\n"),
            ("src/b.py", "y = 2\n"),
            ("lib/c.py", "z = 3\n"),
            ("docs/guide.md", "# guide\n"),
        ]);
        let planned = vec![task("t1", "security_sentinel", &["src/a.py"])];
        let tools = vec!["file_read".to_string()];
        // Sampled (the flow's default): the plan stands as it is.
        assert_eq!(flow.coverage_mode(), CoverageMode::Sampled);
        let mut tasks = planned.clone();
        assert!(add_full_coverage(&flow, &catalog, &pack, &tools, &mut tasks).is_empty());
        assert_eq!(tasks, planned);
        // Full: the planner's task is kept and every other file is in exactly one added task.
        flow.set_coverage(CoverageMode::Full).unwrap();
        let mut tasks = planned.clone();
        let refused = add_full_coverage(&flow, &catalog, &pack, &tools, &mut tasks);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(tasks[0], planned[0]);
        let added: Vec<Task> = tasks[1..].to_vec();
        assert!(!added.is_empty());
        let mut files: Vec<&str> = added
            .iter()
            .flat_map(|t| t.files.iter().map(String::as_str))
            .collect();
        files.sort();
        assert_eq!(files, ["docs/guide.md", "lib/c.py", "src/b.py"]);
        let rule = flow.full_coverage_rule().unwrap();
        for t in &added {
            assert_eq!(
                t.persona, rule.persona,
                "the flow's persona, not the engine's"
            );
            assert!(t.origin.as_deref().unwrap().starts_with(FULL_ORIGIN_PREFIX));
            assert!(t.id.starts_with('c'));
        }
        // Applied twice (a re-plan of a recorded plan), nothing more is added.
        let before = tasks.len();
        assert!(add_full_coverage(&flow, &catalog, &pack, &tools, &mut tasks).is_empty());
        assert_eq!(tasks.len(), before);
        // The report states the mode and lists the added tasks.
        let all: Vec<&Task> = tasks.iter().collect();
        let r = report(&flow, &pack, &tasks, &all, &[]);
        assert_eq!(r.mode, CoverageMode::Full);
        assert_eq!((r.files_reviewed, r.files_total), (4, 4));
        assert_eq!(r.added.len(), added.len());
    }

    #[test]
    fn full_coverage_is_refused_for_a_flow_that_names_no_persona_for_it() {
        let mut flow = Flow::load(&repo().join("flows/quick.yaml")).unwrap();
        assert!(flow.full_coverage.is_none() && flow.directory_coverage.is_none());
        let e = flow.set_coverage(CoverageMode::Full).unwrap_err();
        assert!(e.contains("full_coverage"), "{e}");
        flow.set_coverage(CoverageMode::Sampled).unwrap();
        // A flow with only directory_coverage uses its persona.
        let mut flow = Flow::load(&repo().join("flows/comprehensive.yaml")).unwrap();
        flow.set_coverage(CoverageMode::Full).unwrap();
        assert_eq!(
            flow.full_coverage_rule().unwrap().persona,
            flow.directory_coverage.as_ref().unwrap().persona
        );
        // And a flow file asking for full coverage with no persona is invalid.
        let text = std::fs::read_to_string(repo().join("flows/quick.yaml"))
            .unwrap()
            .replacen("parameters:\n", "parameters:\n  coverage: full\n", 1);
        let e = Flow::parse(&text, Path::new("q.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("parameters.coverage"), "{e}");
        // A flow may make full its default; the exhaustive flow always is.
        let text = std::fs::read_to_string(repo().join("flows/review.yaml"))
            .unwrap()
            .replacen("parameters:\n", "parameters:\n  coverage: full\n", 1);
        let flow = Flow::parse(&text, Path::new("r.yaml")).unwrap();
        assert_eq!(flow.coverage_mode(), CoverageMode::Full);
        let flow = Flow::load(&repo().join("flows/exhaustive.yaml")).unwrap();
        assert_eq!(flow.coverage_mode(), CoverageMode::Full);
        assert_eq!(CoverageMode::parse(" FULL "), Some(CoverageMode::Full));
        assert!(CoverageMode::parse_for("most", "--coverage")
            .unwrap_err()
            .contains("--coverage must be full or sampled"));
    }
}
