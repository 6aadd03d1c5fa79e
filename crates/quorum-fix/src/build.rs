//! One build run on this machine: the pure build loop's commands carried out in order — the
//! base's tests and judgment, then per increment a fresh builder, the tests and the judge, and
//! keeping or undoing the change. Every event is journalled before the loop steps on it, so a
//! killed run resumes without redoing a kept increment.

use crate::builder::{self, IncrementBrief};
use crate::conformance_judge::{judge_tree, verdicts_of, JudgeSetup};
use crate::journal::{Journal, StoredChange};
use crate::oracles;
use crate::sandbox::TestCommand;
use crate::worktree::{FileChange, Worktree};
use crate::{FixError, ModelRoute};
use quorum_core::fixing::build_loop::{
    BuildCommand, BuildEvent, BuildFailure, BuildLoop, BuildStop, FileDigest,
};
use quorum_core::fixing::build_report::IterationEntry;
use quorum_core::fixing::edit::EditBounds;
use quorum_core::fixing::fix_loop::{EditOutcome, TestRun, UNNAMED_FAILURE};
use quorum_core::fixing::fix_report::FixUsage;
use quorum_core::judging::conformance::{Criterion, Judgment};
use quorum_core::pack::ContextPack;
use quorum_runtime::agent::{CallStats, LoopLimits};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

/// The build journal's file name in the run's output directory.
pub const BUILD_JOURNAL_FILE: &str = "build-journal.jsonl";

/// A build run's journal records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum BuildFact {
    /// The run's identity and inputs, first in every build journal.
    Started {
        build_id: String,
        target: String,
        spec: String,
        /// A digest of the spec's text and of the snapshot the worktree was made from.
        spec_digest: String,
        base: String,
        criteria: Vec<Criterion>,
        backstop: u32,
    },
    /// An event, recorded before the loop steps on it, with what the report and a resume
    /// need: an increment's changes, the judge's grounded verdicts, the builder's words.
    Event {
        event: BuildEvent,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<StoredChange>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        judgments: Vec<Judgment>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        summary: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<String>,
        #[serde(default)]
        usage: StepUsage,
        /// The criterion the increment worked toward.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    Finished,
}

/// Model use of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StepUsage {
    pub llm_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl StepUsage {
    fn of(stats: &CallStats) -> StepUsage {
        StepUsage {
            llm_calls: stats.llm_calls,
            tokens_in: stats.tokens_in,
            tokens_out: stats.tokens_out,
        }
    }
}

/// Everything a build run needs.
pub struct BuildJob {
    pub pack: ContextPack,
    pub criteria: Vec<Criterion>,
    /// The run's own directory: the worktree and the tests' HOME are made inside it.
    pub work_dir: PathBuf,
    pub builder: ModelRoute,
    pub loop_limits: LoopLimits,
    pub judge: JudgeSetup,
    pub tests: Option<TestCommand>,
    pub bounds: EditBounds,
    pub backstop: u32,
    /// Characters of file content one builder prompt may hold.
    pub material_chars: usize,
}

/// A kept increment, in order.
#[derive(Debug, Clone)]
pub struct KeptIncrement {
    pub iteration: u32,
    pub newly_met: Vec<String>,
    pub summary: String,
    pub changes: Vec<FileChange>,
}

/// What a build run did.
pub struct BuildRun {
    pub stop: BuildStop,
    pub iterations: Vec<IterationEntry>,
    pub kept: Vec<KeptIncrement>,
    /// The judge's verdicts on the final tree (the base with every kept increment).
    pub judgments: Vec<Judgment>,
    pub met_at: BTreeMap<String, u32>,
    pub met_on_base: usize,
    pub last_progress: u32,
    pub baseline: Option<TestRun>,
    pub usage: FixUsage,
}

/// The facts of the increment in flight, until the loop keeps or resets it.
#[derive(Default)]
struct Pending {
    entry: Option<IterationEntry>,
    changes: Vec<FileChange>,
    judgments: Vec<Judgment>,
}

fn journal_err(journal: &Journal, e: std::io::Error) -> FixError {
    FixError::Journal {
        path: journal.path().display().to_string(),
        reason: e.to_string(),
    }
}

/// The worktree as a snapshot the judge can read and ground quotes in.
fn pack_of(job: &BuildJob, worktree: &Worktree) -> ContextPack {
    ContextPack::from_files(
        job.pack.root.clone(),
        job.pack.head_sha.clone(),
        worktree
            .files()
            .iter()
            .map(|(p, t)| (p.clone(), t.clone()))
            .collect(),
    )
}

/// Carry a build run out, recording every event in `journal` before acting on it. `replay`
/// holds the records of an interrupted run of the same job (empty for a new run): kept
/// increments come back from their recorded changes, and the loop goes on from the increment
/// that was in flight. `progress` gets one line per step worth telling the user.
pub async fn run_build(
    job: BuildJob,
    journal: &mut Journal,
    replay: Vec<BuildFact>,
    mut progress: impl FnMut(String),
) -> Result<BuildRun, FixError> {
    let started = Instant::now();
    let wt_dir = job.work_dir.join("worktree");
    let home = job.work_dir.join("home");
    let setup = |dir: &PathBuf, e: std::io::Error| FixError::Worktree {
        dir: dir.display().to_string(),
        reason: e.to_string(),
    };
    std::fs::create_dir_all(&home).map_err(|e| setup(&home, e))?;
    let mut worktree = Worktree::materialize(&job.pack, wt_dir.clone(), job.bounds)
        .map_err(|e| setup(&wt_dir, e))?;
    let ids: Vec<String> = job.criteria.iter().map(|c| c.id.clone()).collect();
    let mut machine = BuildLoop::new(ids, job.backstop);
    let mut usage = StepUsage::default();
    let mut entries: Vec<IterationEntry> = Vec::new();
    let mut kept: Vec<KeptIncrement> = Vec::new();
    // The judge's verdicts on the tree as kept (the base, then each kept increment).
    let mut standing: Vec<Judgment> = Vec::new();
    let mut baseline: Option<TestRun> = None;
    let mut pending = Pending::default();
    let mut queue: VecDeque<BuildCommand> = VecDeque::new();
    let mut stop: Option<BuildStop> = None;
    // The last undone increment's diff, shown to the next builder with why it was undone.
    let mut last_undone = String::new();

    // Settle one command of the loop on the worktree and the ledger; `live`: the changes are
    // in the worktree's attempt (a live run), else they come from the journal.
    macro_rules! settle {
        ($command:expr, $live:expr) => {
            match $command {
                BuildCommand::Build { .. } => queue.push_back($command),
                BuildCommand::Keep {
                    iteration,
                    newly_met,
                } => {
                    let changes = if $live {
                        worktree.keep()
                    } else {
                        worktree
                            .apply_recorded(&pending.changes)
                            .map_err(|e| setup(&wt_dir, e))?;
                        std::mem::take(&mut pending.changes)
                    };
                    standing = std::mem::take(&mut pending.judgments);
                    let mut entry = pending.entry.take().unwrap_or_else(|| blank(iteration));
                    entry.kept = true;
                    entry.newly_met = newly_met.clone();
                    if $live {
                        progress(format!(
                            "increment {iteration}: kept — meets {} ({} of {} met)",
                            newly_met.join(", "),
                            machine.met().len(),
                            machine.criteria().len()
                        ));
                    }
                    kept.push(KeptIncrement {
                        iteration,
                        newly_met,
                        summary: entry.summary.clone(),
                        changes,
                    });
                    entries.push(entry);
                }
                BuildCommand::Reset {
                    iteration,
                    failure,
                    reason,
                } => {
                    if $live {
                        worktree.rollback().map_err(|e| setup(&wt_dir, e))?;
                        progress(format!(
                            "increment {iteration}: undone ({}: {})",
                            failure.kind,
                            reason.lines().next().unwrap_or("")
                        ));
                    }
                    last_undone = crate::patch::unified(&std::mem::take(&mut pending.changes));
                    pending.judgments.clear();
                    let mut entry = pending.entry.take().unwrap_or_else(|| blank(iteration));
                    entry.failure = Some(failure);
                    entry.reason = reason;
                    entries.push(entry);
                }
                BuildCommand::Finish { stop: s } => stop = Some(s),
            }
        };
    }

    // Replay: the recorded events through the loop, settling what it decided.
    let mut replayed = 0usize;
    let mut baseline_recorded = false;
    for fact in replay {
        let BuildFact::Event {
            event,
            changes,
            judgments,
            summary,
            tool_calls,
            usage: step,
            focus,
        } = fact
        else {
            continue;
        };
        replayed += 1;
        usage.llm_calls += step.llm_calls;
        usage.tokens_in += step.tokens_in;
        usage.tokens_out += step.tokens_out;
        match &event {
            BuildEvent::Baseline { tests, .. } => {
                baseline_recorded = true;
                baseline = tests.clone();
                standing = judgments;
            }
            BuildEvent::Increment {
                iteration,
                tests,
                verdicts,
                ..
            } => {
                queue.clear();
                pending = Pending {
                    entry: Some(IterationEntry {
                        focus,
                        ..entry_of(
                            *iteration,
                            &changes,
                            tests,
                            verdicts.as_ref(),
                            summary,
                            tool_calls,
                            step,
                        )
                    }),
                    changes: changes.iter().map(FileChange::from).collect(),
                    judgments,
                };
            }
            // Never journaled: derived from an increment's stored changes.
            BuildEvent::Contents { .. } => {}
        }
        if let BuildEvent::Increment { iteration, .. } = &event {
            machine.step(contents_of(*iteration, &pending.changes));
        }
        for command in machine.step(event) {
            settle!(command, false);
        }
    }
    if replayed > 0 {
        progress(format!(
            "resumed: {} increment(s) kept before the interruption are re-applied, not redone",
            kept.len()
        ));
    }

    if !baseline_recorded {
        let tests = match &job.tests {
            Some(tests) => {
                progress(format!("running the tests on the base: {}", tests.command));
                let run = oracles::run_tests(tests, worktree.root(), &home)
                    .await
                    .map_err(|e| FixError::TestCommand(e.to_string()))?;
                progress(if run.passed {
                    "the base passes its tests".into()
                } else {
                    format!(
                        "the base already fails {} (not blamed on any increment)",
                        run.failing.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                });
                Some(run)
            }
            None => None,
        };
        progress(format!(
            "judging the base against {} criteria",
            job.criteria.len()
        ));
        let judged = judge_tree(&job.judge, &job.criteria, pack_of(&job, &worktree)).await;
        let verdicts = judged.verdicts();
        if verdicts.unjudged.len() == job.criteria.len() && !job.criteria.is_empty() {
            let why = judged
                .judgments
                .first()
                .map(|j| j.reason.clone())
                .unwrap_or_default();
            return Err(FixError::Judge(why));
        }
        progress(format!(
            "the base meets {} of {} criteria",
            verdicts.met.len(),
            job.criteria.len()
        ));
        let step = StepUsage::of(&judged.stats);
        usage.llm_calls += step.llm_calls;
        usage.tokens_in += step.tokens_in;
        usage.tokens_out += step.tokens_out;
        let event = BuildEvent::Baseline {
            tests: tests.clone(),
            verdicts,
        };
        journal
            .append_record(&BuildFact::Event {
                event: event.clone(),
                changes: Vec::new(),
                judgments: judged.judgments.clone(),
                summary: String::new(),
                tool_calls: Vec::new(),
                usage: step,
                focus: None,
            })
            .map_err(|e| journal_err(journal, e))?;
        baseline = tests;
        standing = judged.judgments;
        for command in machine.step(event) {
            settle!(command, true);
        }
    }
    let base_failing = baseline.as_ref().map(|t| t.failing.clone());
    let met_on_base = machine.met_at().values().filter(|i| **i == 0).count();

    while let Some(command) = queue.pop_front() {
        let BuildCommand::Build {
            iteration,
            open,
            feedback,
        } = command
        else {
            continue;
        };
        let by_id: BTreeMap<&str, &Criterion> =
            job.criteria.iter().map(|c| (c.id.as_str(), c)).collect();
        let reasons = verdicts_of(&standing).reasons;
        let undone_in_a_row = entries.iter().rev().take_while(|e| !e.kept).count();
        let focus = focus_of(&open, undone_in_a_row);
        // Why the last increment was undone is told to a builder at the same criterion only:
        // a small model shown another criterion's undone change copies it.
        let same_focus = entries
            .last()
            .is_some_and(|e| !e.kept && e.focus.as_ref() == focus);
        let brief = IncrementBrief {
            spec_path: &job.judge.spec.path,
            open: focus
                .and_then(|id| by_id.get(id.as_str()).copied())
                .into_iter()
                .collect(),
            met: job
                .criteria
                .iter()
                .filter(|c| machine.met().contains(&c.id))
                .collect(),
            reasons: &reasons,
            feedback: same_focus.then_some(feedback.as_deref()).flatten(),
            undone_diff: Some(last_undone.as_str())
                .filter(|d| same_focus && feedback.is_some() && !d.trim().is_empty()),
            material_chars: job.material_chars,
        };
        progress(format!(
            "increment {iteration}: building toward {} ({} open)",
            focus.map(String::as_str).unwrap_or("-"),
            open.len()
        ));
        let mut stats = CallStats::default();
        let outcome = builder::increment(
            &job.builder.client,
            &job.builder.spec,
            job.loop_limits,
            &brief,
            &mut worktree,
            &mut stats,
        )
        .await;
        let changes = worktree.changes();
        // The spec is the contract, not part of the work: an increment may not change it.
        let edit = match job.judge.spec.pack_path.as_deref() {
            Some(spec) if changes.iter().any(|c| c.path == spec) => EditOutcome::Failed {
                reason: format!("the increment changed the spec {spec} itself; change the project, not its contract"),
            },
            _ => crate::judge::edit_outcome(&changes, &outcome),
        };
        // The checks, cheapest first; the first that fails decides.
        let mut tests = None;
        let mut judged = None;
        if matches!(edit, EditOutcome::Applied { .. }) {
            if let Some(command) = &job.tests {
                let run = match oracles::run_tests(command, worktree.root(), &home).await {
                    Ok(run) => run,
                    Err(e) => TestRun {
                        passed: false,
                        failing: [UNNAMED_FAILURE.to_string()].into(),
                        summary: format!("the test command could not be started: {e}"),
                    },
                };
                tests = Some(run);
            }
            let broke = tests.as_ref().is_some_and(|t| {
                !t.passed
                    && base_failing
                        .as_ref()
                        .is_none_or(|b| !t.failing.is_subset(b))
            });
            if !broke {
                let j = judge_tree(&job.judge, &job.criteria, pack_of(&job, &worktree)).await;
                stats.llm_calls += j.stats.llm_calls;
                stats.tokens_in += j.stats.tokens_in;
                stats.tokens_out += j.stats.tokens_out;
                judged = Some(j);
            }
        }
        let step = StepUsage::of(&stats);
        usage.llm_calls += step.llm_calls;
        usage.tokens_in += step.tokens_in;
        usage.tokens_out += step.tokens_out;
        let verdicts = judged.as_ref().map(|j| j.verdicts());
        let judgments = judged.map(|j| j.judgments).unwrap_or_default();
        let event = BuildEvent::Increment {
            iteration,
            edit,
            tests: tests.clone(),
            verdicts: verdicts.clone(),
        };
        let summary = if outcome.summary.is_empty() {
            outcome.failure.clone().unwrap_or_default()
        } else {
            outcome.summary.clone()
        };
        journal
            .append_record(&BuildFact::Event {
                event: event.clone(),
                changes: changes.iter().map(StoredChange::from).collect(),
                judgments: judgments.clone(),
                summary: summary.clone(),
                tool_calls: outcome.calls.clone(),
                usage: step,
                focus: focus.cloned(),
            })
            .map_err(|e| journal_err(journal, e))?;
        pending = Pending {
            entry: Some(IterationEntry {
                focus: focus.cloned(),
                ..entry_of(
                    iteration,
                    &changes.iter().map(StoredChange::from).collect::<Vec<_>>(),
                    &tests,
                    verdicts.as_ref(),
                    summary,
                    outcome.calls,
                    step,
                )
            }),
            changes,
            judgments,
        };
        machine.step(contents_of(iteration, &pending.changes));
        for command in machine.step(event) {
            settle!(command, true);
        }
    }
    journal
        .append_record(&BuildFact::Finished)
        .map_err(|e| journal_err(journal, e))?;
    Ok(BuildRun {
        stop: stop.unwrap_or(BuildStop::Backstop),
        iterations: entries,
        kept,
        judgments: standing,
        met_at: machine.met_at().clone(),
        met_on_base,
        last_progress: machine.last_progress(),
        baseline,
        usage: FixUsage {
            attempts: machine.iterations(),
            llm_calls: usage.llm_calls,
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
            wall_ms: started.elapsed().as_millis() as u64,
        },
    })
}

/// The one open criterion an increment works toward: the first, and after each increment
/// undone in a row the next one round, so a criterion the builder cannot meet does not hold
/// the others up. A small model asked for several criteria at once tries the hardest and
/// fails it again and again.
pub fn focus_of(open: &[String], undone_in_a_row: usize) -> Option<&String> {
    (!open.is_empty()).then(|| &open[undone_in_a_row % open.len()])
}

fn blank(iteration: u32) -> IterationEntry {
    IterationEntry {
        iteration,
        kept: false,
        newly_met: Vec::new(),
        failure: None::<BuildFailure>,
        reason: String::new(),
        files: Vec::new(),
        tests_passed: None,
        judged_met: None,
        summary: String::new(),
        tool_calls: Vec::new(),
        commit: None,
        tokens_in: 0,
        tokens_out: 0,
        focus: None,
    }
}

fn entry_of(
    iteration: u32,
    changes: &[StoredChange],
    tests: &Option<TestRun>,
    verdicts: Option<&quorum_core::fixing::build_loop::Verdicts>,
    summary: String,
    tool_calls: Vec<String>,
    step: StepUsage,
) -> IterationEntry {
    IterationEntry {
        files: changes.iter().map(|c| c.path.clone()).collect(),
        tests_passed: tests.as_ref().map(|t| t.passed),
        judged_met: verdicts.map(|v| v.met.len()),
        summary,
        tool_calls,
        tokens_in: step.tokens_in,
        tokens_out: step.tokens_out,
        ..blank(iteration)
    }
}

/// What an increment changed, as the build loop sees it: each file's digests before and after
/// (derived from the changes stored with its event, so a replay gives the same).
fn contents_of(iteration: u32, changes: &[FileChange]) -> BuildEvent {
    BuildEvent::Contents {
        iteration,
        files: changes
            .iter()
            .map(|c| FileDigest::of(&c.path, c.before.as_deref(), &c.after))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_focus_moves_round_the_open_criteria_while_increments_are_undone() {
        let open: Vec<String> = ["C1", "C3", "C4"].iter().map(|s| s.to_string()).collect();
        let focus: Vec<&str> = (0..4)
            .map(|n| focus_of(&open, n).unwrap().as_str())
            .collect();
        assert_eq!(focus, ["C1", "C3", "C4", "C1"]);
        assert_eq!(focus_of(&[], 2), None);
    }
}
