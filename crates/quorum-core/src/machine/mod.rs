//! The review machine: the whole conductor of one review as a pure state machine.
//!
//! `ReviewMachine::step(now, Event) -> Vec<Command>` owns everything a review must get right
//! under faults: the order of the phases (scout → plan → specialists or rounds → grounding →
//! verification votes → conformance → adjudication → panel → synthesis → report), what each
//! stage's outcome means (accept, retry with the error injected, circular fix, fail open,
//! degrade to a deterministic fallback), the budgets, cancel, the decision to stop and the
//! derived status. Attempt placement, leases, fencing and retries are its scheduling core
//! ([`schedule`]). It does no I/O and has no clock of its own: events are the only way in
//! (an attempt's outcome, a timer, a node lost or joined, a cancel, the recorded facts of an
//! earlier run), commands the only way out (record a fact, start or stop an attempt, set a
//! timer, emit progress, finish with the report). A driver — the runtime's `FlowConductor`
//! actor, or the seeded simulation in `tests/review_sim.rs` — carries the commands out and
//! feeds the events back.
//!
//! Replay after a crash or a takeover is feeding the recorded facts back
//! ([`protocol::Event::Resume`] with the [`replay::Replay`] of the log): a recorded plan is
//! never re-made, a completed task never re-run, a recorded verdict never asked again.
//!
//! **Architecture invariant:** phase order lives only here. The driver makes no decision the
//! machine did not command; it only runs jobs, stores facts, keeps timers and reports back.
//!
//! Rooms: [`state`] (the state and the phases), [`step`] (events in), [`attempts`] (the
//! scheduler's commands carried out), [`phases`] (order, budgets, cancel), [`outcomes`] (what
//! each stage's answer means), [`verify`], [`judging`], [`panel`], [`rounds`], [`resume`],
//! [`finish`] and [`assemble`] (the report); below them the data: [`protocol`], [`job`],
//! [`fact`], [`replay`], [`progress`], [`run`], [`review`], [`batches`], [`limits`],
//! [`grounded`], [`fallback`].

pub mod assemble;
pub mod attempts;
pub mod batches;
pub mod fact;
pub mod fallback;
pub mod finish;
pub mod grounded;
pub mod job;
pub mod judging;
pub mod limits;
pub mod outcomes;
pub mod panel;
pub mod phases;
pub mod progress;
pub mod protocol;
pub mod replay;
pub mod resume;
pub mod review;
pub mod rounds;
pub mod run;
pub mod schedule;
pub mod state;
pub mod step;
pub mod verify;

pub use fact::{AttemptRecord, Fact, RecordedVerdict};
pub use job::{AttemptOutcome, AttemptStats, Failure, Job, ModelUse, Outcome, Synthesis};
pub use progress::Progress;
pub use protocol::{AttemptClaim, Command, Event, Level, Metric, PeerOffer, RoundFinding, Timer};
pub use replay::Replay;
pub use review::Review;
pub use run::{TaskRun, TaskState};
pub use state::{MachineConfig, Phase, ReviewMachine};
