//! The append-only event log of a flow as stored: each fact with its sequence number and time.
//!
//! The facts themselves ([`Event`], a review machine's `Fact`) and their fold into what a
//! resume needs ([`Replay`]) are quorum-core's: the review machine records them and reads them
//! back. This crate stores them in order and says what a log's status is.

use crate::status::DerivedStatus;
pub use quorum_core::machine::fact::{Fact as Event, RecordedVerdict};
pub use quorum_core::machine::replay::Replay;
use serde::{Deserialize, Serialize};

/// An event as stored: its sequence number (1-based, gap-free within one store) and the wall
/// clock time it was appended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub at_ms: u64,
    pub event: Event,
}

impl quorum_core::machine::replay::LoggedFact for StoredEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn fact(&self) -> &Event {
        &self.event
    }
}

/// Status as the log alone tells it: the finish, else interrupted. Only the process that holds
/// the store open knows a flow is running.
pub fn status_of(replay: &Replay) -> DerivedStatus {
    match &replay.finished {
        Some((status, _)) => DerivedStatus::from_finish(status),
        None => DerivedStatus::Interrupted,
    }
}
