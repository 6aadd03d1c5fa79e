//! One fix run: the pure fix loop's commands carried out in order — the base's tests, each
//! attempt's agent (several at once, each in its own worktree, here or on cluster nodes) and
//! oracles (one change at a time, on the tree it would be kept into), keeping or undoing its
//! change.

use crate::agent;
use crate::journal::{Fact, Journal, StoredChange};
use crate::merge::{self, Landed};
use crate::oracles;
use crate::patch;
use crate::placement::{Place, Placement};
use crate::remote::{FixWorkers, PlacementError, ShippableTree, ShippedAttempt, ShippedTests};
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
use std::sync::Arc;
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
    /// Fix agents at work at once on this machine, each in its own worktree (0: only on the
    /// cluster's nodes, while one can take attempts).
    pub parallel: u32,
    /// The cluster's nodes that take fix attempts (None: this machine alone).
    pub remote: Option<Arc<dyn FixWorkers>>,
    /// The run's id, for the nodes' logs.
    pub run_id: String,
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
    /// The last attempt's agent, by finding, for the report.
    last_agent: BTreeMap<String, AgentNote>,
    stop: StopReason,
}

/// What the report says of an attempt's agent: its tool calls, the start of its final answer,
/// the node it ran on and the node whose tests judged it (None: this machine).
#[derive(Default)]
struct AgentNote {
    calls: Vec<String>,
    said: String,
    node: Option<String>,
    tested_on: Option<String>,
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
        let note = self.last_agent.remove(&finding).unwrap_or_default();
        let entry = self.entry(&finding);
        entry.status = FixStatus::Kept;
        entry.files = changes.iter().map(|c| c.path.clone()).collect();
        let on = note
            .node
            .as_deref()
            .map(|n| format!(", made on {n}"))
            .unwrap_or_default();
        entry.attempts.push(AttemptEntry {
            attempt,
            oracles,
            kept: true,
            failure: None,
            reason: String::new(),
            tool_calls: note.calls,
            fixer_said: note.said,
            node: note.node,
            tested_on: note.tested_on,
        });
        let line = format!("{finding}: kept ({}{on})", entry.files.join(", "));
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
        let note = self.last_agent.remove(finding).unwrap_or_default();
        self.entry(finding).attempts.push(AttemptEntry {
            attempt,
            oracles,
            kept: false,
            failure: Some(class),
            reason,
            tool_calls: note.calls,
            fixer_said: note.said,
            node: note.node,
            tested_on: note.tested_on,
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
                Unfixed::Conflicting => {
                    "conflicting: its change clashed with fixes kept meanwhile, and again once rebased"
                }
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

/// An agent's worktree: the base with the kept fixes up to `synced` applied.
struct Slot {
    worktree: Worktree,
    synced: usize,
}

/// What one agent attempt, run in a slot here or on a node, hands back.
struct AgentDone {
    place: Place,
    /// The local slot, to be used again (None for a node's attempt).
    slot: Option<Slot>,
    finding: String,
    attempt: u32,
    outcome: agent::AgentOutcome,
    changes: Vec<FileChange>,
    stats: CallStats,
    /// The slot could not be put back to its base.
    rollback: std::io::Result<()>,
    /// A node's attempt: what its tests said, on which tree.
    remote: Option<RemoteDone>,
}

/// What a node's attempt adds to its result.
struct RemoteDone {
    node: String,
    /// The tests on the node's changed tree (None: not asked, not allowed, or no usable change).
    tests: Option<TestRun>,
    tests_not_run: Option<String>,
    /// How many kept fixes the node's tree held: its tests judged the tree the change would be
    /// kept into only while that is still the number kept.
    based_on: usize,
}

/// An attempt a node could not carry out: placed again, at no cost to the finding.
struct HandBack {
    node: String,
    error: PlacementError,
    finding: String,
    attempt: u32,
    feedback: Option<String>,
}

/// Carry a fix run out, recording every fact in `journal` before acting on it. `replay` holds
/// the facts of an interrupted run of the same job (empty for a new run): its kept fixes are
/// re-applied, not redone, and the loop goes on from the attempts that were in flight.
/// `progress` gets one line per step worth telling the user.
///
/// Up to `job.parallel` agents work at once, each in its own worktree (a slot) holding the
/// fixes kept when it started. The oracles run one change at a time, in the order the agents
/// finish, on the main worktree that holds exactly the kept fixes: a change is carried onto it
/// by a three-way merge ([`crate::merge`]), so every fix is judged on the tree it would be
/// kept into, and a change whose lines were changed meanwhile is a conflict.
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
    let nodes = job.remote.as_ref().map(|r| r.nodes()).unwrap_or_default();
    let mut placement = Placement::new(job.parallel as usize, nodes);
    let parallel = u32::try_from(placement.capacity()).unwrap_or(u32::MAX);
    let mut machine = FixLoop::new(
        job.targets.iter().map(|t| t.finding.id.clone()).collect(),
        FixLimits::for_findings(job.targets.len()).with_parallel(parallel),
    );
    // The tree the nodes' attempts start from: the snapshot with the fixes kept so far.
    let mut tree = ShippableTree::of_pack(&job.pack);
    let mut stats = CallStats::default();

    // Replay: the recorded events through the loop; its commands settle the ledger, kept fixes
    // come back from their recorded changes, and the attempts asked for whose results were
    // never recorded are the ones to ask again.
    let mut baseline_recorded = false;
    let mut pending: BTreeMap<String, Command> = BTreeMap::new();
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
                pending.remove(finding);
                ledger.last_oracles.insert(finding.clone(), oracles.clone());
                last_changes.insert(
                    finding.clone(),
                    changes.iter().map(FileChange::from).collect(),
                );
            }
        }
        for command in machine.step(event) {
            match command {
                Command::Attempt { ref finding, .. } => {
                    pending.insert(finding.clone(), command.clone());
                }
                Command::Keep { finding, attempt } => {
                    let changes = last_changes.remove(&finding).unwrap_or_default();
                    worktree
                        .apply_recorded(&changes)
                        .map_err(|e| setup(&wt_dir, e))?;
                    tree.apply(&changes);
                    ledger.kept(finding, attempt, changes);
                }
                Command::Discard {
                    finding,
                    attempt,
                    class,
                    reason,
                } => {
                    ledger.discarded(&finding, attempt, class, reason);
                }
                Command::GiveUp { finding, why } => {
                    ledger.given_up(&finding, why);
                }
                Command::Finish { stop } => {
                    pending.clear();
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
        true => queue.extend(pending.into_values()),
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
    // Agent worktrees here, made on first use.
    let mut slots: Vec<Option<Slot>> = (0..placement.local_slots()).map(|_| None).collect();
    let mut waiting: VecDeque<(String, u32, Option<String>)> = VecDeque::new();
    let mut running: tokio::task::JoinSet<Result<AgentDone, HandBack>> =
        tokio::task::JoinSet::new();
    // Nodes that said they run no test commands, told once each.
    let mut told_no_tests: std::collections::BTreeSet<String> = Default::default();
    loop {
        // The machine's commands, in order. Keep and discard act on the main worktree, which
        // holds at most the one change being judged.
        while let Some(command) = queue.pop_front() {
            match command {
                Command::Attempt {
                    finding,
                    attempt,
                    feedback,
                } => waiting.push_back((finding, attempt, feedback)),
                Command::Keep { finding, attempt } => {
                    // The changes were recorded with the attempt's result.
                    let changes = worktree.keep();
                    tree.apply(&changes);
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
        // Start what waits where there is room: a node, else a slot here brought up to the
        // fixes kept so far.
        while !waiting.is_empty() {
            let Some(place) = placement.take(Instant::now()) else {
                break;
            };
            let (finding, attempt, feedback) = waiting.pop_front().expect("not empty");
            let Some(target) = by_id.get(&finding).map(|t| (*t).clone()) else {
                placement.release(&place);
                continue;
            };
            match place {
                Place::Node(node) => {
                    progress(format!(
                        "{finding}: attempt {attempt} on {node} — {}",
                        target.finding.title
                    ));
                    let Some(workers) = job.remote.clone() else {
                        placement.release(&Place::Node(node));
                        continue;
                    };
                    let shipped = ShippedAttempt {
                        run_id: job.run_id.clone(),
                        target,
                        attempt,
                        feedback: feedback.clone(),
                        bounds: job.bounds,
                        tree: tree.manifest(),
                        tests: job.tests.as_ref().map(|t| ShippedTests {
                            command: t.command.clone(),
                            timeout_secs: t.timeout.as_secs(),
                            max_output: t.max_output,
                        }),
                    };
                    let (contents, based_on) = (tree.contents(), ledger.kept.len());
                    running.spawn(async move {
                        match workers.run(&node, shipped, contents).await {
                            Ok(r) => Ok(AgentDone {
                                place: Place::Node(node.clone()),
                                slot: None,
                                finding,
                                attempt,
                                outcome: r.outcome,
                                changes: r.changes.iter().map(FileChange::from).collect(),
                                stats: r.stats,
                                rollback: Ok(()),
                                remote: Some(RemoteDone {
                                    node: r.node,
                                    tests: r.tests,
                                    tests_not_run: r.tests_not_run,
                                    based_on,
                                }),
                            }),
                            Err(error) => Err(HandBack {
                                node,
                                error,
                                finding,
                                attempt,
                                feedback,
                            }),
                        }
                    });
                }
                Place::Local(index) => {
                    let mut slot = match slots[index].take() {
                        Some(slot) => slot,
                        None => {
                            let dir = job.work_dir.join(format!("agent-{index}"));
                            let _ = std::fs::remove_dir_all(&dir);
                            Slot {
                                worktree: Worktree::materialize(&job.pack, dir.clone(), job.bounds)
                                    .map_err(|e| setup(&dir, e))?,
                                synced: 0,
                            }
                        }
                    };
                    for kept in &ledger.kept[slot.synced..] {
                        slot.worktree
                            .apply_recorded(&kept.changes)
                            .map_err(|e| setup(&wt_dir, e))?;
                    }
                    slot.synced = ledger.kept.len();
                    progress(format!(
                        "{finding}: attempt {attempt} — {}",
                        target.finding.title
                    ));
                    let fixer = job.fixer.clone();
                    let limits = job.loop_limits;
                    running.spawn(async move {
                        let mut stats = CallStats::default();
                        let outcome = agent::attempt(
                            &fixer.client,
                            &fixer.spec,
                            limits,
                            &target,
                            &mut slot.worktree,
                            feedback.as_deref(),
                            &mut stats,
                        )
                        .await;
                        let changes = slot.worktree.changes();
                        let rollback = slot.worktree.rollback();
                        Ok(AgentDone {
                            place: Place::Local(index),
                            slot: Some(slot),
                            finding,
                            attempt,
                            outcome,
                            changes,
                            stats,
                            rollback,
                            remote: None,
                        })
                    });
                }
            }
        }
        // The next agent to finish, judged on the main worktree.
        let Some(done) = running.join_next().await else {
            if waiting.is_empty() {
                break;
            }
            // Attempts wait and nothing runs: every node that could take them paused itself.
            match placement.next_pause_end() {
                Some(at) => {
                    tokio::time::sleep_until(at.into()).await;
                    continue;
                }
                None => {
                    return Err(FixError::Worktree {
                        dir: job.work_dir.display().to_string(),
                        reason: "no place is left to run the fix attempts".into(),
                    })
                }
            }
        };
        let done = done.map_err(|e| FixError::Worktree {
            dir: job.work_dir.display().to_string(),
            reason: format!("a fix agent stopped: {e}"),
        })?;
        let mut done = match done {
            Ok(done) => done,
            Err(back) => {
                let place = Place::Node(back.node.clone());
                placement.release(&place);
                let what = match &back.error {
                    PlacementError::Lost(why) => {
                        placement.lose(&back.node);
                        format!(
                            "{} is lost ({why}); it takes no more of this run",
                            back.node
                        )
                    }
                    PlacementError::Busy(why) => {
                        placement.pause(&back.node, Instant::now());
                        format!("{} is busy ({why})", back.node)
                    }
                };
                progress(format!(
                    "{}: attempt {} handed back: {what}; placed again",
                    back.finding, back.attempt
                ));
                waiting.push_front((back.finding, back.attempt, back.feedback));
                continue;
            }
        };
        placement.release(&done.place);
        if let Some(slot) = done.slot.take() {
            done.rollback
                .map_err(|e| setup(&slot.worktree.root().to_path_buf(), e))?;
            if let Place::Local(index) = done.place {
                slots[index] = Some(slot);
            }
        }
        stats.llm_calls += done.stats.llm_calls;
        stats.tokens_in += done.stats.tokens_in;
        stats.tokens_out += done.stats.tokens_out;
        let Some(target) = by_id.get(&done.finding).copied() else {
            continue;
        };
        let usable = done.outcome.failure.is_none() && !done.changes.is_empty();
        let (applied, conflict) = if usable {
            match merge::onto(worktree.files(), &done.changes) {
                Landed::Clean(changes) => {
                    worktree
                        .apply_as_attempt(&changes)
                        .map_err(|e| setup(&wt_dir, e))?;
                    (changes, None)
                }
                Landed::Conflict(files) => (Vec::new(), Some(files)),
            }
        } else {
            (done.changes.clone(), None)
        };
        // A node's tests stand only when its tree is the one the change would be kept into.
        let mut tested_on = None;
        let node_tests = match &done.remote {
            Some(r) if r.based_on == ledger.kept.len() && r.tests.is_some() => {
                tested_on = Some(r.node.clone());
                r.tests.clone()
            }
            Some(r) => {
                if let Some(why) = &r.tests_not_run {
                    if told_no_tests.insert(r.node.clone()) {
                        progress(format!("{why}; its attempts' tests run here"));
                    }
                }
                None
            }
            None => None,
        };
        let oracles = match conflict {
            Some(files) => Oracles {
                edit: EditOutcome::Conflict { files },
                tests: None,
                analyzer: None,
                verifier: None,
            },
            None => {
                judge(
                    &job,
                    target,
                    &worktree,
                    &home,
                    &applied,
                    &done.outcome,
                    base_failing.as_ref(),
                    node_tests,
                    &mut stats,
                )
                .await
            }
        };
        ledger
            .last_oracles
            .insert(done.finding.clone(), oracles.clone());
        ledger.last_agent.insert(
            done.finding.clone(),
            AgentNote {
                calls: done.outcome.calls.clone(),
                said: done.outcome.said.clone(),
                node: done.remote.as_ref().map(|r| r.node.clone()),
                tested_on,
            },
        );
        let event = Event::Judged {
            finding: done.finding,
            attempt: done.attempt,
            oracles,
        };
        let recorded = if usable { applied } else { Vec::new() };
        journal
            .append(&Fact::Event {
                event: event.clone(),
                changes: recorded.iter().map(StoredChange::from).collect(),
            })
            .map_err(|e| journal_err(journal, e))?;
        queue.extend(machine.step(event));
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
    node_tests: Option<TestRun>,
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
    if let Some(run) = node_tests {
        // The node ran them on exactly this tree.
        oracles.tests = Some(run);
    } else if let Some(tests) = &job.tests {
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
