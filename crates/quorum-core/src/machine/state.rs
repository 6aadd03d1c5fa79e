//! The review machine's state: which phase the review is in, every run, what was found, and
//! what each judging phase has decided so far. The behaviour lives in the sibling rooms
//! (`step`, `attempts`, `phases`, `outcomes`, `verify`, `judging`, `panel`, `rounds`,
//! `resume`, `finish`), each an `impl ReviewMachine` over this one state.
//!
//! **Architecture invariant:** `Phase` exists only here and in the machine's rooms; no driver
//! decides what comes next.

use crate::flows::rounds::RoundMetrics;
use crate::flows::selection::SelectionRecord;
use crate::judging::adjudication::Adjudged;
use crate::judging::conformance::{Criterion, Judgment};
use crate::judging::panel::{Decision, JudgeScore};
use crate::machine::batches::{
    AdjudicationRound, ConformanceRound, PanelRound, PendingRound, VerifyRound,
};
use crate::machine::fact::Fact;
use crate::machine::job::{AttemptStats, Synthesis};
use crate::machine::limits::scheduler_params;
use crate::machine::progress::Progress;
use crate::machine::protocol::{Command, Level, PeerOffer};
use crate::machine::review::Review;
use crate::machine::run::TaskRun;
use crate::machine::schedule::{Scheduler, TaskKey};
use crate::memory::{Insight, Offered};
use crate::review::dedup::Gated;
use crate::review::finding::Reported;
use crate::review::judged::Judged;
use crate::review::ledger::LedgerEntry;
use crate::task::{Classification, RejectedTask};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Which part of the review is running. The order is scout → plan → specialists (or an
/// exhaustive flow's rounds) → verify → conformance → adjudicate → panel → synthesize → done;
/// a flow without a judging stage skips its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Scout,
    Plan,
    Specialists,
    Verify,
    /// Conformance flows, after verification: the spec's criteria, then the judge batches.
    Conformance,
    /// Finish reviews, after verification (and conformance): the prior findings' rulings.
    Adjudicate,
    /// Panel flows, last before the synthesizer: the judges, then the meta-judge.
    Panel,
    Synthesize,
    Done,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Scout => "scout",
            Phase::Plan => "plan",
            Phase::Specialists => "specialists",
            Phase::Verify => "verify",
            Phase::Conformance => "conformance",
            Phase::Adjudicate => "adjudicate",
            Phase::Panel => "panel",
            Phase::Synthesize => "synthesize",
            Phase::Done => "done",
        }
    }
}

/// How the driver runs this review's attempts.
#[derive(Debug, Clone, Default)]
pub struct MachineConfig {
    /// This conductor's epoch: attempt ids carry it, so an earlier incarnation's never match.
    pub epoch: u64,
    /// Drives the backoff jitter, so a simulation replays exactly.
    pub seed: u64,
    /// How long a remote attempt may go without a result or a renewal.
    pub lease_ms: u64,
    /// Peers may run this review's attempts (a remote executor is attached).
    pub remote: bool,
    /// The models this node would verify with, for verifier independence.
    pub local_models: Vec<String>,
}

/// What the plan is and where it came from.
#[derive(Debug, Default)]
pub(super) struct Planning {
    pub classification: Classification,
    pub classification_fallback: bool,
    pub rejected: Vec<RejectedTask>,
    /// Two-tier selection's decisions (recorded before the plan), for the report.
    pub selection: Option<SelectionRecord>,
    /// Exhaustive flows: the rounds evaluated so far, in order.
    pub rounds: Vec<RoundMetrics>,
    /// An exhaustive round whose file selector was asked and has not answered.
    pub selecting: Option<u32>,
    pub pending_round: Option<PendingRound>,
    /// Attempts recorded before a resume, by run id, so a panel's numbering continues.
    pub resumed_attempts: BTreeMap<String, u32>,
}

/// What the specialists found and what verification made of it.
#[derive(Debug, Default)]
pub(super) struct Findings {
    pub reported: Vec<Reported>,
    /// Findings the self-consistency vote dropped (too few passes found them): judged
    /// already, they join the verdicts when those are recorded.
    pub outvoted: Vec<Judged>,
    /// Verdicts a resumed review found recorded by batches that finished before the stop, by
    /// (task id, ordinal): verification takes them as they are instead of asking again.
    pub prior_verdicts: BTreeMap<(String, usize), Judged>,
    /// The verification round in flight, once the specialists are done.
    pub verify: Option<VerifyRound>,
    /// The verification ledger, built where the verdicts are gated.
    pub ledger: Vec<LedgerEntry>,
    pub gated: Option<Gated>,
    pub verifier_model: Option<String>,
    pub verifier_degraded: bool,
}

/// Why the review ends early, once it does.
#[derive(Debug, Default)]
pub(super) struct Ending {
    /// A stage that must succeed failed for good (planner, verifier): the review failed.
    pub failure: Option<String>,
    /// Why the flow budget stopped new work.
    pub budget_spent: Option<String>,
    /// Why the review was cancelled.
    pub cancelled: Option<String>,
}

/// A conformance flow's judging: the spec's criteria once read (and whether a model read them),
/// the grounded verdicts so far, the judge batches in flight, and why it could not run.
#[derive(Debug, Default)]
pub(super) struct Conformance {
    pub criteria: Option<Vec<Criterion>>,
    pub by_model: bool,
    pub judgments: BTreeMap<String, Judgment>,
    pub round: Option<ConformanceRound>,
    pub done: bool,
    pub failure: Option<String>,
}

/// A finish review's rulings by prior id and the adjudicator batches in flight.
#[derive(Debug, Default)]
pub(super) struct Adjudicating {
    pub adjudged: BTreeMap<String, Adjudged>,
    pub round: Option<AdjudicationRound>,
    pub done: bool,
}

/// A panel flow's judges: recorded scores, failures, the verdict, the runs in flight.
#[derive(Debug, Default)]
pub(super) struct Panel {
    pub scores: BTreeMap<String, JudgeScore>,
    pub failed: BTreeMap<String, String>,
    pub decision: Option<Decision>,
    pub round: Option<PanelRound>,
    pub done: bool,
}

/// Working memory within the review: the insights completed tasks left (from grounded findings
/// only), and what each task was offered (the first offer is recorded and kept).
#[derive(Debug, Default)]
pub(super) struct Memory {
    pub insights: Vec<Insight>,
    pub offered: BTreeMap<String, Vec<Offered>>,
}

/// The review machine: a pure state machine over one review. See [`crate::machine`].
#[derive(Debug)]
pub struct ReviewMachine {
    pub(super) review: Arc<Review>,
    pub(super) config: MachineConfig,
    /// Commands of the step being taken, in order.
    pub(super) out: Vec<Command>,
    /// The time of the step being taken (ms).
    pub(super) now: u64,
    pub(super) started_ms: Option<u64>,
    pub(super) phase: Phase,
    /// Every attempt decision.
    pub(super) sched: Scheduler,
    /// Every run: stage runs, specialist tasks, batches. The index is the run's key in the
    /// scheduler.
    pub(super) runs: Vec<TaskRun>,
    /// The peers as last offered, with their models.
    pub(super) peers: Vec<PeerOffer>,
    pub(super) plan: Planning,
    pub(super) found: Findings,
    pub(super) synthesis: Option<Synthesis>,
    pub(super) usage: AttemptStats,
    pub(super) ending: Ending,
    pub(super) conformance: Conformance,
    pub(super) adjudication: Adjudicating,
    pub(super) panel: Panel,
    pub(super) memory: Memory,
    /// Phases entered, in order (for the report's reader and the simulation's invariants).
    pub(super) entered: Vec<Phase>,
    /// While a stop fails what is unfinished, the review is not moved on from inside it.
    pub(super) halting: bool,
    /// The report as last handed over, until the driver confirms its facts were stored.
    pub(super) final_report: Option<crate::report::Report>,
}

impl ReviewMachine {
    pub fn new(review: Arc<Review>, config: MachineConfig) -> ReviewMachine {
        let sched = Scheduler::new(
            scheduler_params(&review, config.lease_ms),
            config.epoch,
            config.seed,
        );
        ReviewMachine {
            review,
            config,
            out: Vec::new(),
            now: 0,
            started_ms: None,
            phase: Phase::Scout,
            sched,
            runs: Vec::new(),
            peers: Vec::new(),
            plan: Planning::default(),
            found: Findings::default(),
            synthesis: None,
            usage: AttemptStats::default(),
            ending: Ending::default(),
            conformance: Conformance::default(),
            adjudication: Adjudicating::default(),
            panel: Panel::default(),
            memory: Memory::default(),
            entered: Vec::new(),
            halting: false,
            final_report: None,
        }
    }

    /// The review this machine conducts.
    pub fn review(&self) -> &Review {
        &self.review
    }

    /// The phase the review is in.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Phases entered so far, in order (a phase entered again after a resume is listed again).
    pub fn phases_entered(&self) -> &[Phase] {
        &self.entered
    }

    /// The review ended: every later event is ignored.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The scheduling core, for inspection (live attempts, task status).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// The runs so far.
    pub fn runs(&self) -> &[TaskRun] {
        &self.runs
    }

    pub(super) fn set_phase(&mut self, phase: Phase) {
        if self.entered.last() != Some(&phase) {
            self.entered.push(phase);
        }
        self.phase = phase;
    }

    pub(super) fn emit(&mut self, p: Progress) {
        self.out.push(Command::Emit(p));
    }

    pub(super) fn record(&mut self, fact: Fact) {
        self.out.push(Command::Record(fact));
    }

    /// Record a note for the reader as a fact (what the conductor saw and did).
    pub(super) fn note(&mut self, message: String) {
        self.record(Fact::Note { message });
    }

    pub(super) fn log(&mut self, level: Level, message: String) {
        self.out.push(Command::Log(level, message));
    }

    pub(super) fn add_run(&mut self, run: TaskRun) -> TaskKey {
        self.runs.push(run);
        self.runs.len() - 1
    }

    pub(super) fn emit_usage(&mut self) {
        let p = Progress::Usage {
            llm_calls: self.usage.llm_calls,
            tokens_in: self.usage.tokens_in,
            tokens_out: self.usage.tokens_out,
        };
        self.emit(p);
    }
}
