//! One fix run on this machine: the pure fix loop's commands carried out in order — the base's
//! tests, each attempt's agent and oracles, keeping or undoing its change.

use crate::agent;
use crate::oracles;
use crate::patch;
use crate::sandbox::TestCommand;
use crate::worktree::{FileChange, Worktree};
use crate::FixError;
use quorum_core::fixing::edit::EditBounds;
use quorum_core::fixing::fix_loop::{
    Command, EditOutcome, Event, FixLimits, FixLoop, Oracles, StopReason, TestRun, Unfixed,
};
use quorum_core::fixing::fix_report::{AttemptEntry, FixEntry, FixStatus, FixUsage};
use quorum_core::fixing::select::FixTarget;
use quorum_core::pack::ContextPack;
use quorum_runtime::agent::{CallSpec, CallStats, LoopLimits};
use quorum_runtime::analyzers::AnalyzerSetup;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

/// A model and how to call it.
#[derive(Clone)]
pub struct ModelRoute {
    pub client: quorum_llm::LlmClient,
    pub spec: CallSpec,
}

/// Everything a run needs.
pub struct FixJob {
    pub targets: Vec<FixTarget>,
    pub pack: ContextPack,
    /// The run's own directory: the worktree and the tests' HOME are made inside it.
    pub work_dir: PathBuf,
    pub fixer: ModelRoute,
    pub loop_limits: LoopLimits,
    /// None: no blind verifier (`--no-verifier`).
    pub verifier: Option<ModelRoute>,
    pub tests: Option<TestCommand>,
    pub analyzers: Option<AnalyzerSetup>,
    pub bounds: EditBounds,
}

/// A kept fix, in the order it was kept.
#[derive(Debug, Clone)]
pub struct KeptFix {
    pub finding_id: String,
    pub title: String,
    pub changes: Vec<FileChange>,
    pub oracles: Vec<&'static str>,
}

/// What a run did.
pub struct FixRun {
    pub stop: StopReason,
    pub entries: Vec<FixEntry>,
    pub kept: Vec<KeptFix>,
    pub baseline: Option<TestRun>,
    pub usage: FixUsage,
}

/// Carry a fix run out. `progress` gets one line per step worth telling the user.
pub async fn run(job: FixJob, mut progress: impl FnMut(String)) -> Result<FixRun, FixError> {
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
    let by_id: BTreeMap<String, &FixTarget> = job
        .targets
        .iter()
        .map(|t| (t.finding.id.clone(), t))
        .collect();
    let mut entries: BTreeMap<String, FixEntry> = job
        .targets
        .iter()
        .map(|t| {
            (
                t.finding.id.clone(),
                FixEntry {
                    finding_id: t.finding.id.clone(),
                    title: t.finding.title.clone(),
                    file: t.finding.file.clone().unwrap_or_default(),
                    status: FixStatus::Unfixed,
                    unfixed_because: None,
                    commit: None,
                    files: Vec::new(),
                    attempts: Vec::new(),
                },
            )
        })
        .collect();
    let mut machine = FixLoop::new(
        job.targets.iter().map(|t| t.finding.id.clone()).collect(),
        FixLimits::for_findings(job.targets.len()),
    );
    let mut stats = CallStats::default();
    let baseline = match &job.tests {
        Some(tests) => {
            progress(format!("running the tests on the base: {}", tests.command));
            let run = oracles::run_tests(tests, worktree.root(), &home)
                .await
                .map_err(|e| FixError::TestCommand(e.to_string()))?;
            if run.passed {
                progress("the base passes its tests".into());
            } else {
                progress(format!(
                    "the base already fails {} (not blamed on any fix)",
                    run.failing.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            Some(run)
        }
        None => None,
    };
    let mut queue: VecDeque<Command> = machine
        .step(Event::Baseline {
            tests: baseline.clone(),
        })
        .into();
    let mut kept = Vec::new();
    let mut last_oracles: BTreeMap<String, Oracles> = BTreeMap::new();
    let mut stop = StopReason::Settled;
    while let Some(command) = queue.pop_front() {
        match command {
            Command::Attempt {
                finding,
                attempt,
                feedback,
            } => {
                let Some(target) = by_id.get(&finding).copied() else {
                    continue;
                };
                progress(format!(
                    "{finding}: attempt {attempt} — {}",
                    target.finding.title
                ));
                let outcome = agent::attempt(
                    &job.fixer.client,
                    &job.fixer.spec,
                    job.loop_limits,
                    target,
                    &mut worktree,
                    feedback.as_deref(),
                    &mut stats,
                )
                .await;
                let changes = worktree.changes();
                let base_failing = baseline.as_ref().map(|b| &b.failing);
                let oracles = judge(
                    &job,
                    target,
                    &worktree,
                    &home,
                    &changes,
                    &outcome,
                    base_failing,
                    &mut stats,
                )
                .await;
                last_oracles.insert(finding.clone(), oracles.clone());
                queue.extend(machine.step(Event::Judged {
                    finding,
                    attempt,
                    oracles,
                }));
            }
            Command::Keep { finding, attempt } => {
                let changes = worktree.keep();
                let entry = entries.get_mut(&finding).expect("a selected finding");
                entry.status = FixStatus::Kept;
                entry.files = changes.iter().map(|c| c.path.clone()).collect();
                entry.attempts.push(AttemptEntry {
                    attempt,
                    oracles: last_oracles.remove(&finding).expect("judged before kept"),
                    kept: true,
                    failure: None,
                    reason: String::new(),
                });
                progress(format!("{finding}: kept ({})", entry.files.join(", ")));
                kept.push(KeptFix {
                    finding_id: finding,
                    title: entry.title.clone(),
                    changes,
                    oracles: entry.passed_oracles(),
                });
            }
            Command::Discard {
                finding,
                attempt,
                class,
                reason,
            } => {
                worktree.rollback().map_err(|e| setup(&wt_dir, e))?;
                progress(format!(
                    "{finding}: attempt {attempt} discarded ({})",
                    class.kind
                ));
                let entry = entries.get_mut(&finding).expect("a selected finding");
                entry.attempts.push(AttemptEntry {
                    attempt,
                    oracles: last_oracles
                        .remove(&finding)
                        .expect("judged before discarded"),
                    kept: false,
                    failure: Some(class),
                    reason,
                });
            }
            Command::GiveUp { finding, why } => {
                let entry = entries.get_mut(&finding).expect("a selected finding");
                entry.unfixed_because = Some(why);
                progress(format!(
                    "{finding}: left unfixed ({})",
                    match why {
                        Unfixed::CircularFix => "circular fix: the same failure three times",
                        Unfixed::Oscillating => "oscillating",
                        Unfixed::Backstop => "the attempt backstop was reached",
                    }
                ));
            }
            Command::Finish { stop: s } => stop = s,
        }
    }
    let order: Vec<String> = job.targets.iter().map(|t| t.finding.id.clone()).collect();
    Ok(FixRun {
        stop,
        entries: order.iter().filter_map(|id| entries.remove(id)).collect(),
        kept,
        baseline,
        usage: FixUsage {
            attempts: machine.total_attempts(),
            llm_calls: stats.llm_calls,
            tokens_in: stats.tokens_in,
            tokens_out: stats.tokens_out,
            wall_ms: started.elapsed().as_millis() as u64,
        },
    })
}

/// Run the oracles that apply on an attempt's change, cheapest first; once one has failed the
/// rest are not run (the loop decides on the first failure, so they could change nothing).
#[allow(clippy::too_many_arguments)]
async fn judge(
    job: &FixJob,
    target: &FixTarget,
    worktree: &Worktree,
    home: &std::path::Path,
    changes: &[FileChange],
    outcome: &agent::AgentOutcome,
    base_failing: Option<&std::collections::BTreeSet<String>>,
    stats: &mut CallStats,
) -> Oracles {
    let edit = if let Some(reason) = &outcome.failure {
        EditOutcome::Failed {
            reason: reason.clone(),
        }
    } else if changes.is_empty() {
        EditOutcome::NoChange
    } else {
        EditOutcome::Applied {
            files: changes.iter().map(|c| c.path.clone()).collect(),
            lines: changes
                .iter()
                .map(|c| {
                    quorum_core::fixing::edit::changed_lines(
                        c.before.as_deref().unwrap_or(""),
                        &c.after,
                    )
                })
                .sum(),
        }
    };
    let mut oracles = Oracles {
        edit,
        tests: None,
        analyzer: None,
        verifier: None,
    };
    if changes.is_empty() || outcome.failure.is_some() {
        return oracles;
    }
    if let Some(tests) = &job.tests {
        oracles.tests = Some(
            match oracles::run_tests(tests, worktree.root(), home).await {
                Ok(run) => run,
                Err(e) => TestRun {
                    passed: false,
                    failing: [quorum_core::fixing::fix_loop::UNNAMED_FAILURE.to_string()].into(),
                    summary: format!("the test command could not be started: {e}"),
                },
            },
        );
    }
    let broke_tests = oracles
        .tests
        .as_ref()
        .is_some_and(|t| base_failing.is_none_or(|base| !t.failing.is_subset(base)));
    if broke_tests {
        return oracles;
    }
    if let Some(setup) = &job.analyzers {
        oracles.analyzer = oracles::analyzer_check(setup, target, changes).await;
    }
    if oracles
        .analyzer
        .as_ref()
        .is_some_and(|a| a.rule_still_fires || !a.new_hits.is_empty())
    {
        return oracles;
    }
    if let Some(verifier) = &job.verifier {
        let diff = patch::unified(changes);
        oracles.verifier = Some(
            match oracles::verify(
                &verifier.client,
                &verifier.spec,
                target,
                changes,
                &diff,
                stats,
            )
            .await
            {
                Ok(v) => v,
                // A verifier that cannot answer never keeps a fix.
                Err(e) => quorum_core::fixing::fix_loop::VerifierCheck {
                    still_holds: true,
                    reason: format!("the verifier could not judge the change: {e}"),
                },
            },
        );
    }
    oracles
}
