//! Progress events a running review emits, for the CLI's status line and (later) WatchReview.

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
    },
    TaskFinished {
        task: String,
        persona: String,
        ok: bool,
        findings: usize,
        error: Option<String>,
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
    Finished {
        status: String,
    },
}

pub type ProgressSender = tokio::sync::mpsc::UnboundedSender<Progress>;
