//! Flow status as derived from facts when read, and the one-line summary `flows list` shows.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a flow's facts say about it. Never stored: computed from the event log and from
/// whether another process holds the flow's database lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DerivedStatus {
    /// Another process holds the database open.
    Running,
    /// Nobody holds it and the log has no (current) finish: the process died or was stopped.
    Interrupted,
    Completed,
    Partial,
    Failed,
    /// The store could not be read; the message says why.
    Corrupt(String),
    /// The disk under the store refuses it now (full, read-only): the store may be fine and is
    /// read again once the disk is; the message says why.
    Unavailable(String),
}

impl DerivedStatus {
    /// The status a `FlowFinished { status }` event stands for.
    pub fn from_finish(status: &str) -> DerivedStatus {
        match status {
            "completed" => DerivedStatus::Completed,
            "partial" => DerivedStatus::Partial,
            "failed" => DerivedStatus::Failed,
            other => DerivedStatus::Corrupt(format!("flow finished with unknown status {other:?}")),
        }
    }

    /// The lowercase name, without the corrupt message.
    pub fn as_str(&self) -> &'static str {
        match self {
            DerivedStatus::Running => "running",
            DerivedStatus::Interrupted => "interrupted",
            DerivedStatus::Completed => "completed",
            DerivedStatus::Partial => "partial",
            DerivedStatus::Failed => "failed",
            DerivedStatus::Corrupt(_) => "corrupt",
            DerivedStatus::Unavailable(_) => "unavailable",
        }
    }

    /// Finished one way or another (completed, partial or failed).
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            DerivedStatus::Completed | DerivedStatus::Partial | DerivedStatus::Failed
        )
    }
}

impl fmt::Display for DerivedStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stored flow as `quorum flows list` shows it.
///
/// For a running flow the database cannot be read (another process holds it), so the counts
/// are 0 and `last_event_ms` is the start time; name, target and start come from the metadata
/// file written beside the database at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    pub flow_id: String,
    pub flow_name: String,
    pub target_path: String,
    /// rfc3339, as recorded at creation.
    pub started_at: String,
    pub started_ms: u64,
    pub status: DerivedStatus,
    pub last_event_ms: u64,
    /// Tasks in the plan (0 before planning).
    pub tasks_total: usize,
    /// Planned tasks that reached an end: succeeded or abandoned.
    pub tasks_done: usize,
    /// Raw findings reported by the planned tasks that succeeded, before verification.
    pub findings: usize,
}
