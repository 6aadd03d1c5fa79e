//! One fix run on this machine: the pure fix loop's commands carried out in order — the base's
//! tests, each attempt's agent and oracles, keeping or undoing its change.

use crate::agent;
use crate::journal::{Fact, Journal, StoredChange};
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

/// The state of a run as its commands are carried out (live or replayed).
struct Ledger {
    entries: BTreeMap<String, FixEntry>,
    kept: Vec<KeptFix>,
    last_oracles: BTreeMap<String, Oracles>,
    /// The last attempt's tool calls and final answer, by finding, for the report.
    last_agent: BTreeMap<String, (Vec<String>, String)>,
    stop: StopReason,
}

impl Ledger {
    fn new(targets: &[FixTarget]) -> Ledger {
        Ledger {
            entries: targets
                .iter()
                .map(|t| {
                    (
                        t.finding.id.clone(),
                        FixEntry {
                            finding_id: t.finding.id.clone(),
                            title: t.finding.title.clone(),
                            file: t.finding.file.clone().unwrap_or_default(),
                            status: FixStatus::Unfixed,
                            cycle: None,
                            unfixed_because: None,
                            commit: None,
                            files: Vec::new(),
                            attempts: Vec::new(),
                        },
                    )
                })
                .collect(),
            kept: Vec::new(),
            last_oracles: BTreeMap::new(),
            last_agent: BTreeMap::new(),
            stop: StopReason::Settled,
        }
    }

    fn entry(&mut self, finding: &str) -> &mut FixEntry {
        self.entries
            .entry(finding.to_string())
            .or_insert_with(|| FixEntry {
                finding_id: finding.to_string(),
                title: String::new(),
                file: String::new(),
                status: FixStatus::Unfixed,
                cycle: None,
                unfixed_because: None,
                commit: None,
                files: Vec::new(),
                attempts: Vec::new(),
            })
    }

    fn kept(&mut self, finding: String, attempt: u32, changes: Vec<FileChange>) -> String {
        let oracles = self.last_oracles.remove(&finding).unwrap_or(Oracles {
            edit: EditOutcome::NoChange,
            tests: None,
            analyzer: None,
            verifier: None,
        });
        let (tool_calls, fixer_said) = self.last_agent.remove(&finding).unwrap_or_default();
        let entry = self.entry(&finding);
        entry.status = FixStatus::Kept;
        entry.files = changes.iter().map(|c| c.path.clone()).collect();
        entry.attempts.push(AttemptEntry {
            attempt,
            oracles,
            kept: true,
            failure: None,
            reason: String::new(),
            tool_calls,
            fixer_said,
        });
        let line = format!("{finding}: kept ({})", entry.files.join(", "));
        let (title, oracles) = (entry.title.clone(), entry.passed_oracles());
        self.kept.push(KeptFix {
            finding_id: finding,
            title,
            changes,
            oracles,
        });
        line
    }

    fn discarded(
        &mut self,
        finding: &str,
        attempt: u32,
        class: quorum_core::fixing::fix_loop::FailureClass,
        reason: String,
    ) -> String {
        let oracles = self.last_oracles.remove(finding).unwrap_or(Oracles {
            edit: EditOutcome::NoChange,
            tests: None,
            analyzer: None,
            verifier: None,
        });
        let line = format!("{finding}: attempt {attempt} discarded ({})", class.kind);
        let (tool_calls, fixer_said) = self.last_agent.remove(finding).unwrap_or_default();
        self.entry(finding).attempts.push(AttemptEntry {
            attempt,
            oracles,
            kept: false,
            failure: Some(class),
            reason,
            tool_calls,
            fixer_said,
        });
        line
    }

    fn given_up(&mut self, finding: &str, why: Unfixed) -> String {
        self.entry(finding).unfixed_because = Some(why);
        format!(
            "{finding}: left unfixed ({})",
            match why {
                Unfixed::CircularFix => "circular fix: the same failure three times",
                Unfixed::Oscillating => "oscillating",
                Unfixed::Backstop => "the attempt backstop was reached",
            }
        )
    }
}

fn journal_err(journal: &Journal, e: std::io::Error) -> FixError {
    FixError::Journal {
        path: journal.path().display().to_string(),
        reason: e.to_string(),
    }
}

/// Carry a fix run out, recording every fact in `journal` before acting on it. `replay` holds
/// the facts of an interrupted run of the same job (empty for a new run): its kept fixes are
/// re-applied, not redone, and the loop goes on from the attempt that was in flight.
/// `progress` gets one line per step worth telling the user.
pub async fn run(
    job: FixJob,
    journal: &mut Journal,
    replay: Vec<Fact>,
    mut progress: impl FnMut(String),
) -> Result<FixRun, FixError> {
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
    let mut ledger = Ledger::new(&job.targets);
    let mut machine = FixLoop::new(
        job.targets.iter().map(|t| t.finding.id.clone()).collect(),
        FixLimits::for_findings(job.targets.len()),
    );
    let mut stats = CallStats::default();

    // Replay: the recorded events through the loop; its commands settle the ledger, kept fixes
    // come back from their recorded changes, and the last attempt asked for (if its result was
    // never recorded) is the one to ask again.
    let mut baseline_recorded = false;
    let mut pending: Option<Command> = None;
    let mut last_changes: BTreeMap<String, Vec<FileChange>> = BTreeMap::new();
    let replayed = replay
        .iter()
        .filter(|f| matches!(f, Fact::Event { .. }))
        .count();
    for fact in replay {
        let Fact::Event { event, changes } = fact else {
            continue;
        };
        match &event {
            Event::Baseline { .. } => baseline_recorded = true,
            Event::Judged {
                finding, oracles, ..
            } => {
                ledger.last_oracles.insert(finding.clone(), oracles.clone());
                last_changes.insert(
                    finding.clone(),
                    changes.iter().map(FileChange::from).collect(),
                );
            }
        }
        for command in machine.step(event) {
            match command {
                Command::Attempt { .. } => pending = Some(command),
                Command::Keep { finding, attempt } => {
                    pending = None;
                    let changes = last_changes.remove(&finding).unwrap_or_default();
                    worktree
                        .apply_recorded(&changes)
                        .map_err(|e| setup(&wt_dir, e))?;
                    ledger.kept(finding, attempt, changes);
                }
                Command::Discard {
                    finding,
                    attempt,
                    class,
                    reason,
                } => {
                    pending = None;
                    ledger.discarded(&finding, attempt, class, reason);
                }
                Command::GiveUp { finding, why } => {
                    ledger.given_up(&finding, why);
                }
                Command::Finish { stop } => {
                    pending = None;
                    ledger.stop = stop;
                }
            }
        }
    }
    if replayed > 0 {
        progress(format!(
            "resumed: {} fix(es) kept before the interruption are re-applied, not redone",
            ledger.kept.len()
        ));
    }

    let mut queue: VecDeque<Command> = VecDeque::new();
    match baseline_recorded {
        // The base's tests were recorded; a finished loop has nothing pending.
        true => queue.extend(pending),
        false => {
            let tests = match &job.tests {
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
            let event = Event::Baseline { tests };
            journal
                .append(&Fact::Event {
                    event: event.clone(),
                    changes: Vec::new(),
                })
                .map_err(|e| journal_err(journal, e))?;
            queue.extend(machine.step(event));
        }
    }
    let base_failing = machine.baseline().map(|t| t.failing.clone());
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
                let oracles = judge(
                    &job,
                    target,
                    &worktree,
                    &home,
                    &changes,
                    &outcome,
                    base_failing.as_ref(),
                    &mut stats,
                )
                .await;
                ledger.last_oracles.insert(finding.clone(), oracles.clone());
                ledger.last_agent.insert(
                    finding.clone(),
                    (outcome.calls.clone(), outcome.said.clone()),
                );
                let event = Event::Judged {
                    finding,
                    attempt,
                    oracles,
                };
                journal
                    .append(&Fact::Event {
                        event: event.clone(),
                        changes: changes.iter().map(StoredChange::from).collect(),
                    })
                    .map_err(|e| journal_err(journal, e))?;
                queue.extend(machine.step(event));
            }
            Command::Keep { finding, attempt } => {
                // The changes were recorded with the attempt's result.
                let changes = worktree.keep();
                progress(ledger.kept(finding, attempt, changes));
            }
            Command::Discard {
                finding,
                attempt,
                class,
                reason,
            } => {
                worktree.rollback().map_err(|e| setup(&wt_dir, e))?;
                progress(ledger.discarded(&finding, attempt, class, reason));
            }
            Command::GiveUp { finding, why } => progress(ledger.given_up(&finding, why)),
            Command::Finish { stop } => ledger.stop = stop,
        }
    }
    journal
        .append(&Fact::Finished)
        .map_err(|e| journal_err(journal, e))?;
    let order: Vec<String> = job.targets.iter().map(|t| t.finding.id.clone()).collect();
    Ok(FixRun {
        stop: ledger.stop,
        entries: order
            .iter()
            .filter_map(|id| ledger.entries.remove(id))
            .collect(),
        kept: ledger.kept,
        baseline: machine.baseline().cloned(),
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
