//! The messages a review's conductor takes: what its workers, its peers, its timers and its
//! node tell it. They never cross the network: results from other nodes arrive through the
//! node's message handler, which forwards them as local messages (`routing`).

use crate::worker::JobOutcome;
use quorum_core::machine::{AttemptStats, Timer};

pub enum ConductorMsg {
    /// Begin (or resume) the review.
    Start,
    /// A timer the review machine set is due.
    Timer(Timer),
    /// A local worker's outcome.
    Outcome {
        attempt: u64,
        outcome: Box<JobOutcome>,
    },
    /// A remote attempt's result, as sent by `node`: counted only when `node` is where the
    /// attempt was placed and the attempt is still live.
    RemoteOutcome {
        attempt: u64,
        node: String,
        outcome: Box<JobOutcome>,
    },
    /// The worker on `node` still works on `attempt`: extend its lease.
    Renew { attempt: u64, node: String },
    /// A peer node was declared lost: fence and reassign its attempts.
    NodeLost(String),
    /// A peer joined (or came back): queued work may go to it now.
    NodeJoined(String),
    /// Stop the review now: every live attempt is stopped, no model call starts after the
    /// reply, and the review ends partial with `reason`.
    Cancel {
        reason: String,
        reply: ractor::RpcReplyPort<()>,
    },
    /// An exhaustive round's file selector answered.
    RoundFiles {
        round: u32,
        answer: Result<Vec<String>, String>,
        stats: Box<AttemptStats>,
    },
}

impl ractor::Message for ConductorMsg {}
