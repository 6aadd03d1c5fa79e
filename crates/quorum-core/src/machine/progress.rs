//! Progress a running review emits, for the CLI's status line, WatchReview and the node's
//! dashboard: the review machine's `Command::Emit`. Fields added later carry `#[serde(default)]`,
//! so an older peer's or client's events still parse.

use serde::{Deserialize, Serialize};

/// One thing that happened in a review. Sent best-effort: a slow or absent listener never
/// blocks the review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Progress {
    Stage {
        stage: String,
    },
    Planned {
        tasks: usize,
        rejected: usize,
    },
    TaskStarted {
        task: String,
        persona: String,
        attempt: u32,
        /// The node the attempt runs on.
        #[serde(default)]
        node: String,
        /// The model it was placed on (empty when the stage picks its model itself).
        #[serde(default)]
        model: String,
    },
    TaskFinished {
        task: String,
        persona: String,
        ok: bool,
        findings: usize,
        error: Option<String>,
        /// The error's class (timeout, schema_violation, ...) when it failed.
        #[serde(default)]
        error_class: Option<String>,
        #[serde(default)]
        model: String,
        #[serde(default)]
        tokens_in: u64,
        #[serde(default)]
        tokens_out: u64,
    },
    /// The review waits, and why (no majority of the control plane's voters is up); `None`:
    /// it goes on. Told by the node, not the machine.
    Waiting {
        reason: Option<String>,
    },
    Verified {
        done: usize,
        total: usize,
    },
    Usage {
        llm_calls: u64,
        tokens_in: u64,
        tokens_out: u64,
    },
    /// A finding that survived verification and the gate, with the lines it cites.
    Finding {
        id: String,
        title: String,
        severity: String,
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        line_start: Option<u32>,
        #[serde(default)]
        line_end: Option<u32>,
        #[serde(default)]
        verdict: String,
        #[serde(default)]
        evidence: String,
    },
    Finished {
        status: String,
    },
}
