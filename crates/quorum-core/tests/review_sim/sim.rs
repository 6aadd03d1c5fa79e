//! The simulated cluster and driver: nodes that run, pause, partition and die, a network that
//! delays, duplicates, drops and reorders, a conductor that dies between any two commands and
//! a disk that fills up — and the invariants checked at every step.

use crate::world::{stats, world};
use crate::Rng;
use quorum_core::judging::conformance::Spec;
use quorum_core::machine::schedule::{AttemptId, Place};
use quorum_core::machine::{
    AttemptOutcome, AttemptRecord, Command, Event, Fact, Job, MachineConfig, Phase, Replay, Review,
    ReviewMachine, Timer,
};
use quorum_core::report::{Report, ReviewStatus};
use quorum_core::scope::ReviewScope;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NodeState {
    Up,
    /// Frozen: holds its results and renewals until resumed.
    Paused,
    /// Cut off silently: it works on, but what it sends waits until the partition heals.
    Partitioned,
    Dead,
}

pub(crate) struct SimNode {
    pub(crate) state: NodeState,
    pub(crate) capacity: usize,
    /// Membership has told the conductor this node is lost (until it rejoins).
    pub(crate) told_lost: bool,
    /// Attempts running here: attempt -> (job, when it finishes).
    pub(crate) running: BTreeMap<AttemptId, (Job, u64)>,
    /// What it sent while paused or partitioned, delivered when it is heard again.
    pub(crate) held: Vec<Msg>,
}

/// Something on its way to the conductor.
#[derive(Debug, Clone)]
pub(crate) enum Msg {
    Event(Event),
    /// A timer set by one incarnation of the conductor: it dies with it.
    Timer(Timer, u32),
    /// A local worker's result: it dies with the incarnation that ran it.
    Local(AttemptId, AttemptOutcome, u32),
    /// A peer finished an attempt (delivered as `Event::Outcome` when it arrives).
    PeerDone(String, AttemptId),
    /// A peer's renewal tick for its running attempts.
    PeerRenew(String),
}

pub(crate) struct Delivery {
    pub(crate) at: u64,
    pub(crate) order: u64,
    pub(crate) msg: Msg,
}

/// What the simulation knows of an attempt the machine started.
#[derive(Debug, Clone)]
pub(crate) struct Started {
    pub(crate) task: String,
    pub(crate) number: u32,
    pub(crate) place: Place,
    pub(crate) epoch: u64,
}

pub(crate) struct Sim {
    pub(crate) seed: u64,
    pub(crate) rng: Rng,
    pub(crate) now: u64,
    pub(crate) review: Arc<Review>,
    pub(crate) machine: ReviewMachine,
    pub(crate) incarnation: u32,
    pub(crate) epoch: u64,
    pub(crate) nodes: BTreeMap<String, SimNode>,
    pub(crate) queue: Vec<Delivery>,
    /// What the driver feeds right after the step it is in (in order): the peers before a
    /// start, a local attempt's model before its outcome.
    pub(crate) immediate: std::collections::VecDeque<Event>,
    pub(crate) order: u64,
    /// The recorded facts, in order, and the attempt records: what a restart replays.
    pub(crate) log: Vec<(u64, Fact)>,
    pub(crate) records: Vec<AttemptRecord>,
    /// The run and attempt number of the last `AttemptStarted` fact: the Start after it.
    pub(crate) last_started: Option<(String, u32)>,
    /// Specialist tasks of the plan (and of later rounds).
    pub(crate) planned: BTreeSet<String>,
    pub(crate) started: BTreeMap<AttemptId, Started>,
    /// Attempts whose results must never count: stopped, charged, handed back, superseded.
    pub(crate) fenced: BTreeSet<AttemptId>,
    /// Attempts a later conductor adopted.
    pub(crate) adopted: u32,
    /// Specialist tasks and stages with a recorded success.
    pub(crate) completed: BTreeSet<String>,
    /// Conductor restarts still to inject, and the chance per command.
    pub(crate) crashes: u32,
    pub(crate) cancel_at: Option<u64>,
    /// Storage faults: writes start failing once the log holds this many facts (a full disk,
    /// a read-only remount), until the operator frees space and resumes.
    pub(crate) store_fails_at: Option<usize>,
    pub(crate) store_broken: bool,
    /// The machine was told a fact was not stored: it must start nothing after that.
    pub(crate) told_store_failed: bool,
    /// Reviews ended by a storage fault and resumed once the store took writes again.
    pub(crate) store_resumes: u32,
    pub(crate) report: Option<Report>,
    pub(crate) steps: u64,
    pub(crate) trace: Vec<String>,
    pub(crate) keep_trace: bool,
}

pub(crate) fn violation(seed: u64, what: String) -> ! {
    panic!(
        "review simulation seed {seed} violated an invariant: {what} (replay: QUORUM_SIM_SEED={seed})"
    )
}

/// The run id a job's attempt belongs to, as far as "completed" is concerned.
pub(crate) fn done_key(job: &Job) -> Option<String> {
    match job {
        Job::Specialist { task, .. } => Some(task.id.clone()),
        Job::Scout => Some("scout".into()),
        Job::Plan(_) => Some("planner".into()),
        Job::Synthesize { .. } => Some("synthesizer".into()),
        _ => None,
    }
}

impl Sim {
    pub(crate) fn new(seed: u64, keep_trace: bool) -> Sim {
        let w = world();
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x05EE_D0F4_EB1E);
        let flow_name = *rng.pick(&[
            "review",
            "review",
            "quick",
            "comprehensive",
            "exhaustive",
            "conformance",
            "finish-review",
        ]);
        let mut flow = w.flows[flow_name].clone();
        let p = &mut flow.parameters;
        p.task_attempts = 1 + rng.below(3) as u32;
        p.circular_fix_repeats = 2;
        p.verify_batch = 1 + rng.below(4) as usize;
        p.max_verifications = 2 + rng.below(12) as usize;
        if rng.chance(10) {
            p.max_tokens = 3_000 + rng.below(20_000);
        }
        if rng.chance(8) {
            p.max_wall_secs = 2 + rng.below(20);
        }
        if let Some(rule) = flow.exhaustive.as_mut() {
            if rng.chance(50) {
                rule.select = quorum_core::flows::flow::Select::Model;
            }
        }
        let mut scope = ReviewScope::default();
        if flow.uses_spec() {
            // Half the specs have a checklist the engine reads; the rest need the criteria stage.
            let text = if rng.chance(50) {
                "# Spec\n\n- [ ] handlers validate input\n- [ ] errors are logged\n".to_string()
            } else {
                "The service should be safe and pleasant.".to_string()
            };
            scope.spec = Some(Spec::from_text("SPEC.md", text).expect("a spec"));
        }
        if flow.uses_prior() {
            scope.prior = Some(Box::new(w.prior.clone()));
        }
        if rng.chance(30) {
            // Analyzer leads: candidates the verifier judges after the specialists' findings
            // (and, under a wall-time budget, only while time is left).
            scope.analyzers.leads = crate::world::leads(&mut rng, &w.pack);
        }
        let review = Arc::new(Review {
            flow_id: format!("sim-{seed}"),
            flow,
            catalog: w.catalog.clone(),
            pack: w.pack.clone(),
            verifier_model: None,
            node: "n0".into(),
            max_concurrent: Some(1 + rng.below(3) as usize),
            started_at: String::new(),
            scope,
        });
        let mut nodes = BTreeMap::new();
        for i in 0..1 + rng.below(3) {
            nodes.insert(
                format!("p{i}"),
                SimNode {
                    state: NodeState::Up,
                    capacity: 1 + rng.below(3) as usize,
                    told_lost: false,
                    running: BTreeMap::new(),
                    held: Vec::new(),
                },
            );
        }
        let crashes = if rng.chance(40) {
            1 + rng.below(2) as u32
        } else {
            0
        };
        let cancel_at = rng.chance(8).then(|| 200 + rng.below(20_000));
        let store_fails_at = rng.chance(12).then(|| 3 + rng.below(60) as usize);
        let machine = ReviewMachine::new(review.clone(), MachineConfig::default());
        let mut sim = Sim {
            seed,
            rng,
            now: 0,
            review,
            machine,
            incarnation: 0,
            epoch: 0,
            nodes,
            queue: Vec::new(),
            immediate: Default::default(),
            order: 0,
            log: Vec::new(),
            records: Vec::new(),
            last_started: None,
            planned: BTreeSet::new(),
            started: BTreeMap::new(),
            fenced: BTreeSet::new(),
            adopted: 0,
            completed: BTreeSet::new(),
            crashes,
            store_fails_at,
            store_broken: false,
            told_store_failed: false,
            store_resumes: 0,
            cancel_at,
            report: None,
            steps: 0,
            trace: Vec::new(),
            keep_trace,
        };
        sim.boot(false);
        sim
    }

    pub(crate) fn config(&mut self) -> MachineConfig {
        MachineConfig {
            epoch: self.epoch,
            seed: self.rng.next(),
            lease_ms: 400,
            remote: true,
            local_models: vec!["qwen2.5-sim".into()],
        }
    }

    /// Start (or restart) the conductor: a fresh machine at a new epoch; after a crash it
    /// replays what was recorded.
    pub(crate) fn boot(&mut self, resume: bool) {
        self.incarnation += 1;
        // As the runtime does: the epoch is where this incarnation's part of the log begins.
        let epoch = (self.log.len() as u64 + 1) & 0xFF_FFFF;
        if epoch == self.epoch {
            // The last incarnation stored nothing, so it started nothing (every start is a
            // fact first): its ids are free to be issued again.
            self.fenced.retain(|a| a >> 40 != epoch);
            self.started.retain(|a, _| a >> 40 != epoch);
        }
        self.epoch = epoch;
        // A new conductor process: it learns of a full disk from its own first failed write.
        self.told_store_failed = false;
        let config = self.config();
        self.machine = ReviewMachine::new(self.review.clone(), config);
        // Every attempt of an earlier incarnation is fenced by its epoch.
        let old: Vec<AttemptId> = self.started.keys().copied().collect();
        self.fenced.extend(old);
        self.immediate.clear();
        self.immediate.push_back(Event::Peers(self.offers()));
        let start = if resume {
            Event::Resume {
                replay: Box::new(Replay::from_events(&self.log)),
                attempts: self.records.clone(),
                claims: self.claims(),
            }
        } else {
            Event::Start
        };
        self.immediate.push_back(start);
    }

    pub(crate) fn deliver(&mut self, after: u64, msg: Msg) {
        // Same-time deliveries are reordered by a random tie-breaker.
        let order = (self.rng.below(1 << 20) << 20) | (self.order & 0xF_FFFF);
        self.order += 1;
        self.queue.push(Delivery {
            at: self.now + after,
            order,
            msg,
        });
    }

    /// Deliver after a random delay below `max` ms.
    pub(crate) fn deliver_in(&mut self, max: u64, msg: Msg) {
        let d = self.rng.below(max);
        self.deliver(d, msg);
    }

    pub(crate) fn pop(&mut self) -> Option<Delivery> {
        let i = self
            .queue
            .iter()
            .enumerate()
            .min_by_key(|(_, d)| (d.at, d.order))
            .map(|(i, _)| i)?;
        Some(self.queue.swap_remove(i))
    }

    pub(crate) fn run(&mut self) -> Report {
        const MAX_STEPS: u64 = 200_000;
        const MAX_TIME_MS: u64 = 6 * 3600 * 1000;
        while self.report.is_none() {
            if let Some(e) = self.immediate.pop_front() {
                self.steps += 1;
                self.feed(e);
                continue;
            }
            let Some(d) = self.pop() else {
                violation(
                    self.seed,
                    "the review stalled: nothing left to happen and no report".into(),
                )
            };
            self.now = self.now.max(d.at);
            self.steps += 1;
            if self.steps > MAX_STEPS || self.now > MAX_TIME_MS {
                violation(
                    self.seed,
                    format!(
                        "the review did not end within bounds ({} steps, {} ms, phase {:?})",
                        self.steps,
                        self.now,
                        self.machine.phase()
                    ),
                );
            }
            self.faults();
            let Some(event) = self.arrive(d.msg) else {
                continue;
            };
            self.feed(event);
        }
        self.report.take().expect("a report")
    }

    /// Feed one event to the machine and carry out its commands, as the driver does — except
    /// that the conductor may die between any two commands.
    pub(crate) fn feed(&mut self, event: Event) {
        let label = if self.keep_trace || std::env::var_os("QUORUM_SIM_TRACE").is_some() {
            format!("{} {:?}", self.now, event)
        } else {
            String::new()
        };
        let delivered = match &event {
            Event::Outcome { attempt, from, .. } => Some((*attempt, from.clone())),
            _ => None,
        };
        let now = self.now;
        let machine = &mut self.machine;
        let cmds = match std::panic::catch_unwind(AssertUnwindSafe(|| machine.step(now, event))) {
            Ok(c) => c,
            Err(e) => {
                let what = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                violation(self.seed, format!("the machine panicked: {what}"))
            }
        };
        if self.keep_trace {
            self.trace.push(format!("{label} -> {cmds:?}"));
        }
        if std::env::var_os("QUORUM_SIM_TRACE").is_some() {
            eprintln!(
                "[{}] inc {} {:?} <- {}",
                self.now,
                self.incarnation,
                self.machine.phase(),
                short(&label_of(&cmds))
            );
        }
        self.check_phases();
        let n = cmds.len();
        for (i, cmd) in cmds.into_iter().enumerate() {
            if self.crashes > 0 && i > 0 && self.rng.chance(2) {
                // kill -9 of the conductor between two commands: what was not done is lost.
                self.crashes -= 1;
                self.boot(true);
                return;
            }
            if self.told_store_failed && matches!(cmd, Command::Start { .. }) {
                violation(
                    self.seed,
                    "an attempt started after a fact could not be stored".into(),
                );
            }
            if matches!(cmd, Command::Record(_) | Command::RecordAttempt(_))
                && self.store_fails_at.is_some_and(|n| self.log.len() >= n)
            {
                self.store_broken = true;
            }
            if self.store_broken {
                match cmd {
                    // Not stored: the driver does nothing that depends on it and says so, once;
                    // after that it finishes what the machine asks without storing.
                    Command::Record(_) | Command::RecordAttempt(_) | Command::RecordReport(_) => {
                        if !self.told_store_failed {
                            self.told_store_failed = true;
                            self.immediate.push_front(Event::StoreFailed {
                                reason: "the data dir /sim/data is out of space".into(),
                            });
                            return;
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            self.execute(cmd, delivered.as_ref());
            if self.report.is_some() {
                if i + 1 != n {
                    violation(
                        self.seed,
                        "the machine commanded more after it finished".into(),
                    );
                }
                return;
            }
        }
    }

    pub(crate) fn check_phases(&self) {
        let phases = self.machine.phases_entered();
        for w in phases.windows(2) {
            if w[1] <= w[0] {
                violation(
                    self.seed,
                    format!("phases entered out of order: {phases:?}"),
                );
            }
        }
    }

    pub(crate) fn execute(&mut self, cmd: Command, delivered: Option<&(AttemptId, Place)>) {
        match cmd {
            Command::Record(fact) => self.recorded(fact, delivered),
            Command::RecordAttempt(r) => self.records.push(*r),
            Command::RecordReport(_) => {}
            Command::Start {
                attempt,
                place,
                job,
                ..
            } => self.start(attempt, place, *job),
            Command::Stop { attempt, place } => {
                self.fenced.insert(attempt);
                if let Place::Peer(node) = place {
                    if let Some(n) = self.nodes.get_mut(&node) {
                        if n.state != NodeState::Partitioned {
                            n.running.remove(&attempt);
                        }
                    }
                }
            }
            Command::After { ms, timer } => {
                let inc = self.incarnation;
                self.deliver(ms, Msg::Timer(timer, inc));
            }
            Command::ChooseRoundFiles { round, .. } => {
                let files: Vec<String> = world().pack.files.keys().take(4).cloned().collect();
                let answer = if self.rng.chance(70) {
                    Ok(files)
                } else {
                    Err("the selector answered prose".into())
                };
                let ev = Event::RoundFilesChosen {
                    round,
                    answer,
                    stats: stats(&mut self.rng),
                };
                let d = 50 + self.rng.below(500);
                self.deliver(d, Msg::Event(ev));
            }
            Command::Finish(report) => self.finished(*report),
            Command::Emit(_)
            | Command::Publish { .. }
            | Command::LearnModel { .. }
            | Command::Count(_)
            | Command::Log(..) => {}
        }
    }

    pub(crate) fn recorded(&mut self, fact: Fact, delivered: Option<&(AttemptId, Place)>) {
        let seed = self.seed;
        match &fact {
            Fact::AttemptStarted {
                task_id, attempt, ..
            } => self.last_started = Some((task_id.clone(), *attempt)),
            Fact::AttemptAdopted {
                task_id,
                attempt,
                node,
            } => {
                // Adopted: that attempt is this epoch's now, and its result may count.
                let epoch = self.epoch;
                let place = Place::Peer(node.clone());
                let adopted: Vec<AttemptId> = self
                    .started
                    .iter()
                    .filter(|(_, s)| &s.task == task_id && s.number == *attempt && s.place == place)
                    .map(|(a, _)| *a)
                    .collect();
                if adopted.len() != 1 {
                    violation(
                        seed,
                        format!(
                            "adopted attempt {attempt} of {task_id} on {node}: {adopted:?} match"
                        ),
                    );
                }
                for a in adopted {
                    self.fenced.remove(&a);
                    self.adopted += 1;
                    if let Some(s) = self.started.get_mut(&a) {
                        s.epoch = epoch;
                    }
                }
            }
            Fact::PlanCompleted { tasks, .. } => {
                self.planned.extend(tasks.iter().map(|t| t.id.clone()));
                self.complete("planner");
            }
            Fact::RoundCompleted { next, .. } => {
                self.planned.extend(next.iter().map(|t| t.id.clone()));
            }
            Fact::ScoutCompleted { .. } => self.complete("scout"),
            Fact::SynthesisCompleted { .. } => self.complete("synthesizer"),
            Fact::AttemptSucceeded { task_id, .. } => {
                // Counted: the delivering attempt must be live, from where it was placed, now.
                let Some((attempt, from)) = delivered else {
                    violation(seed, format!("{task_id} counted without a result"))
                };
                if self.fenced.contains(attempt) {
                    violation(
                        seed,
                        format!("a fenced attempt {attempt} of {task_id} was counted"),
                    );
                }
                match self.started.get(attempt) {
                    None => violation(seed, format!("attempt {attempt} was never started")),
                    Some(s) if &s.task != task_id => violation(
                        seed,
                        format!("attempt {attempt} of {} counted for {task_id}", s.task),
                    ),
                    Some(s) if &s.place != from => violation(
                        seed,
                        format!(
                            "attempt {attempt} of {task_id} counted from {from:?}, placed at {:?}",
                            s.place
                        ),
                    ),
                    Some(s) if s.epoch != self.epoch => violation(
                        seed,
                        format!(
                            "attempt {attempt} of epoch {} counted at epoch {}",
                            s.epoch, self.epoch
                        ),
                    ),
                    Some(_) => {}
                }
                if self.planned.contains(task_id) {
                    let id = task_id.clone();
                    self.complete(&id);
                }
            }
            Fact::AttemptFailed {
                task_id, attempt, ..
            } => {
                // Charged or handed back: that attempt's result never counts after this.
                let epoch = self.epoch;
                let gone: Vec<AttemptId> = self
                    .started
                    .iter()
                    .filter(|(_, s)| &s.task == task_id && s.number == *attempt && s.epoch == epoch)
                    .map(|(a, _)| *a)
                    .collect();
                self.fenced.extend(gone);
            }
            _ => {}
        }
        let seq = self.log.len() as u64 + 1;
        self.log.push((seq, fact));
    }

    /// A task's (or stage's) result is recorded: it must never run again, nor be counted again.
    pub(crate) fn complete(&mut self, key: &str) {
        if !self.completed.insert(key.to_string()) {
            violation(self.seed, format!("{key} was counted completed twice"));
        }
    }

    pub(crate) fn start(&mut self, attempt: AttemptId, place: Place, job: Job) {
        if let Some(key) = done_key(&job) {
            if self.completed.contains(&key) {
                violation(
                    self.seed,
                    format!("{key} was completed and started again (attempt {attempt})"),
                );
            }
        }
        let (task, number) = self.last_started.take().unwrap_or_default();
        self.started.insert(
            attempt,
            Started {
                task,
                number,
                place: place.clone(),
                epoch: self.epoch,
            },
        );
        match place {
            Place::Local => {
                if matches!(job, Job::Specialist { .. }) {
                    self.immediate.push_back(Event::ModelChosen {
                        attempt,
                        model: "qwen2.5-sim".into(),
                        replaced: None,
                    });
                }
                let outcome = self.outcome_of(&job);
                let inc = self.incarnation;
                let d = 20 + self.rng.below(1500);
                self.deliver(d, Msg::Local(attempt, outcome, inc));
            }
            Place::Peer(node) => {
                let state = self.nodes.get(&node).map(|n| n.state);
                match state {
                    None | Some(NodeState::Dead) => {
                        self.deliver(0, Msg::Event(Event::SendFailed { attempt }));
                    }
                    // A dropped start frame: the peer never hears of it; only the lease tells.
                    Some(_) if self.rng.chance(5) => {}
                    Some(NodeState::Paused) => {
                        // It takes the frame and works once it is resumed.
                        let d = self.now + 20 + self.rng.below(1500);
                        if let Some(n) = self.nodes.get_mut(&node) {
                            n.running.insert(attempt, (job, d));
                        }
                        self.deliver(d - self.now, Msg::PeerDone(node.clone(), attempt));
                    }
                    Some(_) => {
                        let d = 20 + self.rng.below(1500);
                        let first = self.nodes.get(&node).is_some_and(|n| n.running.is_empty());
                        if let Some(n) = self.nodes.get_mut(&node) {
                            n.running.insert(attempt, (job, self.now + d));
                        }
                        self.deliver(d, Msg::PeerDone(node.clone(), attempt));
                        if first {
                            self.deliver(100, Msg::PeerRenew(node));
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn finished(&mut self, report: Report) {
        let seed = self.seed;
        if self.told_store_failed {
            // The review stopped on a fact it could not store: failed, saying why. The operator
            // frees space and resumes; the resumed review goes on from what was stored.
            if report.status != ReviewStatus::Failed
                || !report.status_reason.contains("out of space")
            {
                violation(
                    seed,
                    format!(
                        "a storage fault ended the review {:?}: {}",
                        report.status, report.status_reason
                    ),
                );
            }
            self.told_store_failed = false;
            self.store_broken = false;
            self.store_fails_at = None;
            self.store_resumes += 1;
            self.boot(true);
            return;
        }
        if report.status != ReviewStatus::Completed && report.status_reason.trim().is_empty() {
            violation(
                seed,
                format!("the review ended {:?} without a reason", report.status),
            );
        }
        let ids: BTreeSet<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
        if ids.len() != report.findings.len() {
            violation(seed, "two findings share an id".into());
        }
        let anchors: BTreeSet<&str> = report.findings.iter().map(|f| f.anchor.as_str()).collect();
        if anchors.len() != report.findings.len() {
            violation(
                seed,
                "a finding was reported twice (two findings share an anchor)".into(),
            );
        }
        // Every reported finding came from one counted success of its task.
        let counted: usize = self
            .log
            .iter()
            .filter_map(|(_, f)| match f {
                Fact::AttemptSucceeded { findings, .. } => Some(findings.len()),
                _ => None,
            })
            .sum();
        // The analyzers' leads join them all at once, when verification starts (if it does).
        let leads = self.review.scope.analyzers.leads.len();
        if report.methodology.reported != counted && report.methodology.reported != counted + leads
        {
            violation(
                seed,
                format!(
                    "the report counts {} reported findings, the counted successes {counted} \
                     (and {leads} analyzer leads)",
                    report.methodology.reported
                ),
            );
        }
        if report.status == ReviewStatus::Completed
            && report
                .tasks
                .iter()
                .any(|t| t.status != "completed" && !is_stage_run(&t.id))
        {
            violation(
                seed,
                "a completed review has an unfinished specialist task".into(),
            );
        }
        if self.machine.phase() != Phase::Done {
            violation(seed, "the machine finished without entering Done".into());
        }
        self.report = Some(report);
    }
}

pub(crate) fn is_stage_run(id: &str) -> bool {
    [
        "scout",
        "planner",
        "synthesizer",
        "verifier",
        "criteria",
        "conformance",
        "adjudicator",
        "panel:",
    ]
    .iter()
    .any(|s| id.starts_with(s))
}

pub(crate) fn label_of(cmds: &[Command]) -> String {
    cmds.iter()
        .map(|c| match c {
            Command::Record(f) => format!("Record({})", short(&format!("{f:?}"))),
            Command::Start {
                attempt,
                key,
                place,
                job,
                ..
            } => {
                format!(
                    "Start({attempt} run {key} at {place:?} {})",
                    short(&format!("{job:?}"))
                )
            }
            other => short(&format!("{other:?}")),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) fn short(s: &str) -> String {
    s.chars().take(160).collect()
}
