//! One fix run: the pure fix loop's commands carried out in order — the base's tests, each
//! attempt's agent (several at once, each in its own worktree, here or on cluster nodes) and
//! oracles (one change at a time, on the tree it would be kept into), keeping or undoing its
//! change.

use crate::agent;
pub use crate::job::{FixJob, FixRun, KeptFix, ModelRoute};
use crate::journal::{Fact, Journal, StoredChange};
use crate::judge;
use crate::ledger::{AgentNote, Ledger};
use crate::merge::{self, Landed};
use crate::oracles;
use crate::pace::Pace;
use crate::placement::{Place, Placement};
use crate::remote::{PlacementError, ShippableTree};
use crate::worktree::{FileChange, Worktree};
use crate::FixError;
use quorum_core::fixing::fix_loop::{
    Command, EditOutcome, Event, FixLimits, FixLoop, Oracles, TestRun,
};
use quorum_core::fixing::fix_report::FixUsage;
use quorum_core::fixing::select::FixTarget;
use quorum_runtime::agent::CallStats;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

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
    /// The model that made the change (a node's own, or this run's fixer).
    fixer_model: String,
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
    /// The node's blind verifier on the change (it judges the change, not the tree).
    verifier: Option<quorum_core::fixing::fix_loop::VerifierCheck>,
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

type Running = tokio::task::JoinSet<Result<AgentDone, HandBack>>;

mod batch;
mod placing;

/// A run in progress: the main worktree (the base with exactly the kept fixes, plus at most
/// the change or batch being judged), the loop, and where attempts run.
struct Run<'j, P: FnMut(String)> {
    job: &'j FixJob,
    journal: &'j mut Journal,
    progress: P,
    worktree: Worktree,
    wt_dir: PathBuf,
    home: PathBuf,
    ledger: Ledger,
    machine: FixLoop,
    /// The tree the nodes' attempts start from: the snapshot with the fixes kept so far.
    tree: ShippableTree,
    queue: VecDeque<Command>,
    waiting: VecDeque<(String, u32, Option<String>)>,
    placement: Placement,
    /// Agent worktrees here, made on first use.
    slots: Vec<Option<Slot>>,
    stats: CallStats,
    base_failing: Option<std::collections::BTreeSet<String>>,
    /// Nodes that said they run no test commands, told once each.
    told_no_tests: BTreeSet<String>,
    /// How long attempts and test runs take, for holding a lone change for the next one.
    pace: Pace,
    /// Changes held back to be tested with the next ones to come back, until at most this.
    deferred: Vec<AgentDone>,
    defer_until: Option<Instant>,
}

/// Carry a fix run out, recording every fact in `journal` before acting on it. `replay` holds
/// the facts of an interrupted run of the same job (empty for a new run): its kept fixes are
/// re-applied, not redone, and the loop goes on from the attempts that were in flight.
/// `progress` gets one line per step worth telling the user.
///
/// Agents work at once — up to `job.parallel` here, each in its own worktree (a slot) holding
/// the fixes kept when it started, and as many as the cluster's nodes take. The tests run on
/// the main worktree, which holds exactly the kept fixes: a change is carried onto it by a
/// three-way merge ([`crate::merge`]), so every fix is judged on the tree it would be kept
/// into, and a change whose lines were changed meanwhile is a conflict. Changes that are ready
/// at once and touch disjoint files are tested together in one run, and kept together when it
/// passes (one at a time when it does not).
pub async fn run(
    job: FixJob,
    journal: &mut Journal,
    replay: Vec<Fact>,
    progress: impl FnMut(String),
) -> Result<FixRun, FixError> {
    let started = Instant::now();
    let wt_dir = job.work_dir.join("worktree");
    let home = job.work_dir.join("home");
    std::fs::create_dir_all(&home).map_err(|e| setup(&home, e))?;
    let worktree = Worktree::materialize(&job.pack, wt_dir.clone(), job.bounds)
        .map_err(|e| setup(&wt_dir, e))?;
    let nodes = job.remote.as_ref().map(|r| r.nodes()).unwrap_or_default();
    let placement = Placement::new(job.parallel as usize, nodes);
    // The loop asks for every open finding of a round at once; the places decide how many run
    // (the waiting ones start as places free). So the loop's decisions never depend on where
    // attempts run, and a resume with other places replays them exactly.
    let machine = FixLoop::new(
        job.targets.iter().map(|t| t.finding.id.clone()).collect(),
        FixLimits::for_findings(job.targets.len())
            .with_parallel(u32::try_from(job.targets.len().max(1)).unwrap_or(u32::MAX)),
    );
    let mut run = Run {
        ledger: Ledger::new(&job.targets),
        tree: ShippableTree::of_pack(&job.pack),
        slots: (0..placement.local_slots()).map(|_| None).collect(),
        job: &job,
        journal,
        progress,
        worktree,
        wt_dir,
        home,
        machine,
        queue: VecDeque::new(),
        waiting: VecDeque::new(),
        placement,
        stats: CallStats::default(),
        base_failing: None,
        told_no_tests: BTreeSet::new(),
        pace: Pace::default(),
        deferred: Vec::new(),
        defer_until: None,
    };
    let pending = run.replay(replay)?;
    run.start(pending).await?;
    let mut running: Running = tokio::task::JoinSet::new();
    loop {
        run.carry_out()?;
        run.join_new_nodes();
        run.place(&mut running, true)?;
        // A change held for the next one waits no longer than a test run here would take; a
        // node that joins while attempts wait for a place is given them at once.
        let waiting = !run.waiting.is_empty();
        let next = tokio::select! {
            next = async {
                match run.defer_until {
                    Some(until) => tokio::time::timeout_at(until.into(), running.join_next()).await,
                    None => Ok(running.join_next().await),
                }
            } => next,
            _ = joined(job.remote.as_deref()), if waiting => continue,
        };
        let Ok(next) = next else {
            run.defer_until = None;
            run.judge_ready(Vec::new()).await?;
            continue;
        };
        let Some(first) = next else {
            if !run.deferred.is_empty() {
                // Nothing else will come back: what was held is judged now.
                run.defer_until = None;
                run.judge_ready(Vec::new()).await?;
                continue;
            }
            if run.waiting.is_empty() {
                break;
            }
            // Attempts wait and nothing runs: every node that could take them paused itself.
            match run.placement.next_pause_end() {
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
        // Everything that finished by now, judged together; the places it freed work on.
        let mut ready = vec![first];
        while let Some(more) = running.try_join_next() {
            ready.push(more);
        }
        let mut done = Vec::new();
        for r in ready {
            let r = r.map_err(|e| FixError::Worktree {
                dir: job.work_dir.display().to_string(),
                reason: format!("a fix agent stopped: {e}"),
            })?;
            if let Some(d) = run.settle(r)? {
                done.push(d);
            }
        }
        run.place(&mut running, false)?;
        run.judge_ready(done).await?;
    }
    run.journal
        .append(&Fact::Finished)
        .map_err(|e| journal_err(run.journal, e))?;
    let order: Vec<String> = job.targets.iter().map(|t| t.finding.id.clone()).collect();
    let Run {
        mut ledger,
        machine,
        stats,
        ..
    } = run;
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

/// Resolves when a node joins the cluster the run places attempts on.
async fn joined(remote: Option<&dyn crate::remote::FixWorkers>) {
    match remote {
        Some(r) => r.joined().await,
        None => std::future::pending().await,
    }
}

fn setup(dir: &std::path::Path, e: std::io::Error) -> FixError {
    FixError::Worktree {
        dir: dir.display().to_string(),
        reason: e.to_string(),
    }
}

impl<P: FnMut(String)> Run<'_, P> {
    /// The recorded events through the loop: its commands settle the ledger, kept fixes come
    /// back from their recorded changes. Returns the attempts asked for whose results were
    /// never recorded (to ask again), and whether the base's tests were recorded.
    fn replay(&mut self, replay: Vec<Fact>) -> Result<Option<BTreeMap<String, Command>>, FixError> {
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
                    self.ledger
                        .last_oracles
                        .insert(finding.clone(), oracles.clone());
                    last_changes.insert(
                        finding.clone(),
                        changes.iter().map(FileChange::from).collect(),
                    );
                }
            }
            for command in self.machine.step(event) {
                match command {
                    Command::Attempt { ref finding, .. } => {
                        pending.insert(finding.clone(), command.clone());
                    }
                    Command::Keep { finding, attempt } => {
                        let changes = last_changes.remove(&finding).unwrap_or_default();
                        self.worktree
                            .apply_recorded(&changes)
                            .map_err(|e| setup(&self.wt_dir, e))?;
                        self.tree.apply(&changes);
                        self.ledger.kept(finding, attempt, changes);
                    }
                    Command::Discard {
                        finding,
                        attempt,
                        class,
                        reason,
                    } => {
                        self.ledger.discarded(&finding, attempt, class, reason);
                    }
                    Command::GiveUp { finding, why } => {
                        self.ledger.given_up(&finding, why);
                    }
                    Command::Finish { stop } => {
                        pending.clear();
                        self.ledger.stop = stop;
                    }
                }
            }
        }
        if replayed > 0 {
            (self.progress)(format!(
                "resumed: {} fix(es) kept before the interruption are re-applied, not redone",
                self.ledger.kept.len()
            ));
        }
        Ok(baseline_recorded.then_some(pending))
    }

    /// The base's tests (unless recorded), then the loop's first attempts; or, resumed, the
    /// attempts that were in flight.
    async fn start(&mut self, pending: Option<BTreeMap<String, Command>>) -> Result<(), FixError> {
        match pending {
            Some(pending) => self.queue.extend(pending.into_values()),
            None => {
                let tests = match &self.job.tests {
                    Some(tests) => {
                        (self.progress)(format!(
                            "running the tests on the base: {}",
                            tests.command
                        ));
                        let t0 = Instant::now();
                        let run = oracles::run_tests(tests, self.worktree.root(), &self.home)
                            .await
                            .map_err(|e| FixError::TestCommand(e.to_string()))?;
                        self.pace.tested(t0.elapsed().as_secs_f64());
                        if run.passed {
                            (self.progress)("the base passes its tests".into());
                        } else {
                            (self.progress)(format!(
                                "the base already fails {} (not blamed on any fix)",
                                run.failing.iter().cloned().collect::<Vec<_>>().join(", ")
                            ));
                        }
                        Some(run)
                    }
                    None => None,
                };
                let event = Event::Baseline { tests };
                self.journal
                    .append(&Fact::Event {
                        event: event.clone(),
                        changes: Vec::new(),
                    })
                    .map_err(|e| journal_err(self.journal, e))?;
                let commands = self.machine.step(event);
                self.queue.extend(commands);
            }
        }
        self.base_failing = self.machine.baseline().map(|t| t.failing.clone());
        Ok(())
    }

    /// The machine's commands, in order. Keep and discard act on the main worktree, which
    /// holds at most the one change being judged.
    fn carry_out(&mut self) -> Result<(), FixError> {
        while let Some(command) = self.queue.pop_front() {
            match command {
                Command::Attempt {
                    finding,
                    attempt,
                    feedback,
                } => self.waiting.push_back((finding, attempt, feedback)),
                Command::Keep { finding, attempt } => {
                    // The changes were recorded with the attempt's result.
                    let changes = self.worktree.keep();
                    self.tree.apply(&changes);
                    let line = self.ledger.kept(finding, attempt, changes);
                    (self.progress)(line);
                }
                Command::Discard {
                    finding,
                    attempt,
                    class,
                    reason,
                } => {
                    self.worktree
                        .rollback()
                        .map_err(|e| setup(&self.wt_dir, e))?;
                    let line = self.ledger.discarded(&finding, attempt, class, reason);
                    (self.progress)(line);
                }
                Command::GiveUp { finding, why } => {
                    let line = self.ledger.given_up(&finding, why);
                    (self.progress)(line);
                }
                Command::Finish { stop } => self.ledger.stop = stop,
            }
        }
        Ok(())
    }

    /// Record a judged attempt (journal first) and step the loop on it; the loop's commands.
    fn record(
        &mut self,
        done: &AgentDone,
        oracles: Oracles,
        recorded: &[FileChange],
        tested_on: Option<String>,
        tested_with: Vec<String>,
    ) -> Result<Vec<Command>, FixError> {
        self.ledger
            .last_oracles
            .insert(done.finding.clone(), oracles.clone());
        self.ledger.last_agent.insert(
            done.finding.clone(),
            AgentNote {
                calls: done.outcome.calls.clone(),
                said: done.outcome.said.clone(),
                node: done.remote.as_ref().map(|r| r.node.clone()),
                tested_on,
                tested_with,
            },
        );
        let event = Event::Judged {
            finding: done.finding.clone(),
            attempt: done.attempt,
            oracles,
        };
        self.journal
            .append(&Fact::Event {
                event: event.clone(),
                changes: recorded.iter().map(StoredChange::from).collect(),
            })
            .map_err(|e| journal_err(self.journal, e))?;
        Ok(self.machine.step(event))
    }

    fn target(&self, finding: &str) -> Option<FixTarget> {
        self.job
            .targets
            .iter()
            .find(|t| t.finding.id == finding)
            .cloned()
    }

    /// Judge one attempt on the main worktree as it is, alone, and carry out what the loop
    /// decides.
    async fn judge_one(&mut self, done: AgentDone) -> Result<(), FixError> {
        let Some(target) = self.target(&done.finding) else {
            return Ok(());
        };
        let usable = done.outcome.failure.is_none() && !done.changes.is_empty();
        let (applied, conflict) = if usable {
            match merge::onto(self.worktree.files(), &done.changes) {
                Landed::Clean(changes) => {
                    self.worktree
                        .apply_as_attempt(&changes)
                        .map_err(|e| setup(&self.wt_dir, e))?;
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
            Some(r) if r.based_on == self.ledger.kept.len() && r.tests.is_some() => {
                tested_on = Some(r.node.clone());
                r.tests.clone()
            }
            _ => None,
        };
        let oracles = match conflict {
            Some(files) => Oracles {
                edit: EditOutcome::Conflict { files },
                tests: None,
                analyzer: None,
                verifier: None,
            },
            None => {
                let mut stats = CallStats::default();
                let t0 = Instant::now();
                let tests_here = node_tests.is_none() && self.job.tests.is_some();
                let node_verifier = done.remote.as_ref().and_then(|r| r.verifier.clone());
                let o = judge::judge(
                    self.job,
                    &target,
                    self.worktree.root(),
                    &self.home,
                    &applied,
                    &done.outcome,
                    self.base_failing.as_ref(),
                    &done.fixer_model,
                    (node_tests, node_verifier),
                    &mut stats,
                )
                .await;
                if tests_here && o.tests.is_some() {
                    self.pace.tested(t0.elapsed().as_secs_f64());
                }
                self.add_stats(&stats);
                o
            }
        };
        let recorded = if usable { applied } else { Vec::new() };
        let commands = self.record(&done, oracles, &recorded, tested_on, Vec::new())?;
        self.queue.extend(commands);
        self.carry_out()
    }

    fn add_stats(&mut self, s: &CallStats) {
        self.stats.llm_calls += s.llm_calls;
        self.stats.tokens_in += s.tokens_in;
        self.stats.tokens_out += s.tokens_out;
    }
}
