//! The review machine's only ways in and out: [`Event`]s it is fed and [`Command`]s it returns.
//!
//! Events are what happened outside (an attempt's outcome, a timer, a node lost, a cancel, the
//! recorded facts of an earlier run); commands are what the driver must do, in order (record a
//! fact, start or stop an attempt, set a timer, emit progress, finish). A command that follows
//! a `Record` in the same step depends on that fact: a driver that cannot store it must not
//! carry out the rest, and tells the machine ([`Event::StoreFailed`]).

use crate::machine::fact::{AttemptRecord, Fact};
use crate::machine::job::{AttemptOutcome, AttemptStats, Job};
use crate::machine::progress::Progress;
use crate::machine::replay::Replay;
use crate::machine::schedule::{AttemptId, Place, TaskKey};
use crate::report::Report;

/// A peer that can take work now, as the cluster advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerOffer {
    pub node: String,
    /// Attempts of this review it takes at once (0: draining or full).
    pub capacity: usize,
    /// The models it serves (for verifier independence).
    pub models: Vec<String>,
}

/// A worker's word that it still runs (or holds the unsent result of) an attempt an earlier
/// conductor of this review started, and that its result now goes to this conductor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptClaim {
    pub node: String,
    pub attempt: AttemptId,
    pub task_id: String,
    /// The task's attempt number the earlier conductor gave it (its `AttemptStarted` fact).
    pub number: u32,
}

/// Timers the machine sets and is later fed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timer {
    /// A task's backoff is over.
    Retry { key: TaskKey },
    /// The flow's wall-clock budget ran out.
    WallBudget,
    /// Check leases (and, for the driver, refresh the view of peers first).
    LeaseTick,
}

/// What happened.
#[derive(Debug, Clone)]
pub enum Event {
    /// Begin a fresh review.
    Start,
    /// Continue from an earlier run's recorded facts (a restart, `quorum resume`, a takeover).
    Resume {
        replay: Box<Replay>,
        attempts: Vec<AttemptRecord>,
        /// Attempts live workers still run for this review: adopted where the replay shows the
        /// task in flight on that node, so they are not asked again.
        claims: Vec<AttemptClaim>,
    },
    /// The peers that can take work now; a peer no longer listed is not chosen again.
    Peers(Vec<PeerOffer>),
    /// Membership declared a peer lost: its attempts are fenced and placed again.
    NodeLost {
        node: String,
    },
    /// A peer joined (or came back).
    NodeJoined {
        node: String,
    },
    /// An attempt's outcome, as delivered by `from`.
    Outcome {
        attempt: AttemptId,
        from: Place,
        outcome: AttemptOutcome,
    },
    /// The model a local specialist attempt runs on, chosen by the driver's backends (and the
    /// planner's request it replaced, if any).
    ModelChosen {
        attempt: AttemptId,
        model: String,
        replaced: Option<String>,
    },
    /// The attempt never reached its peer.
    SendFailed {
        attempt: AttemptId,
    },
    /// The worker on `from` still works on `attempt`.
    Renew {
        attempt: AttemptId,
        from: String,
    },
    Timer(Timer),
    /// Stop the review now: every live attempt is stopped, no model call starts after this, and
    /// the review ends partial with `reason`.
    Cancel {
        reason: String,
    },
    /// The answer of an exhaustive round's file selector (`Command::ChooseRoundFiles`).
    RoundFilesChosen {
        round: u32,
        answer: Result<Vec<String>, String>,
        stats: AttemptStats,
    },
    /// A fact of this review could not be stored: nothing that depends on it was done.
    StoreFailed {
        reason: String,
    },
}

/// How loud a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// A counter the driver keeps for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metric {
    /// An attempt of a specialist task or verification batch was placed (on a peer or here).
    Placed { remote: bool },
    /// A result was not counted, or an attempt fenced: why (`lease_lapsed`, `node_lost`,
    /// `refused`, `wrong_node`, `late_result`).
    Fenced(&'static str),
}

/// A finding new in an exhaustive round, as the round's file selector sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundFinding {
    pub severity: String,
    pub title: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// What the driver must do, in the order given.
#[derive(Debug, Clone)]
pub enum Command {
    /// Store a fact before anything after it is done.
    Record(Fact),
    /// Store one attempt's full record (output, transcript, tokens). The driver fills in the
    /// backend URL of `model` when the record leaves it empty.
    RecordAttempt(Box<AttemptRecord>),
    /// Run `job` as attempt `attempt` of run `key` at `place`, within `deadline_ms`.
    Start {
        attempt: AttemptId,
        key: TaskKey,
        place: Place,
        job: Box<Job>,
        deadline_ms: u64,
    },
    /// Stop a live (or just fenced) attempt: kill the local worker, ask the peer to abort.
    Stop {
        attempt: AttemptId,
        place: Place,
    },
    /// Feed `Event::Timer(timer)` back after `ms`.
    After {
        ms: u64,
        timer: Timer,
    },
    Emit(Progress),
    /// Publish a note on the team board (teammates' insights).
    Publish {
        persona: String,
        topic: String,
        body: String,
    },
    /// Tell the model cards how a run on `model` went (runtime layer of the cards).
    LearnModel {
        model: String,
        persona: String,
        ok: bool,
        tokens_in: u64,
        tokens_out: u64,
        duration_ms: u64,
    },
    Count(Metric),
    Log(Level, String),
    /// Ask the exhaustive flow's file selector which files the next round reads; the answer
    /// comes back as `Event::RoundFilesChosen`.
    ChooseRoundFiles {
        round: u32,
        new: Vec<RoundFinding>,
    },
    /// Store the finished review's report.json (a fact like any other).
    RecordReport(String),
    /// The review is over: hand the report to whoever waits for it, stop every worker still
    /// running, and stop.
    Finish(Box<Report>),
}
