//! What an attempt is asked to do ([`Job`]) and what it answers ([`Outcome`]), as data.
//!
//! The review machine starts attempts with a job and is fed their outcomes; the runtime's
//! workers (here, or on a peer) turn a job into model calls and their answer into an outcome.
//! Neither side knows how the other works: a job carries everything its stage needs from the
//! machine, and an outcome everything the machine needs to decide — the answer, which model gave
//! it and what it cost.

use crate::flows::selection::SelectionRecord;
use crate::judging::adjudication::{Adjudged, PriorFinding};
use crate::judging::conformance::{Criterion, Judgment, MergeReadiness};
use crate::judging::panel::{AxisReport, Decision, JudgeScore};
use crate::memory::Offered;
use crate::review::dedup::Gated;
use crate::review::finding::{Finding, RawFinding, Reported};
use crate::review::judged::Judged;
use crate::task::{Classification, RejectedTask, Task};
use serde::{Deserialize, Serialize};

/// What an attempt is asked to do.
#[derive(Debug, Clone)]
pub enum Job {
    Scout,
    Plan(Classification),
    Specialist {
        task: Task,
        prior_error: Option<String>,
        /// Teammates' insights the machine chose (and recorded) for this task.
        insights: Vec<Offered>,
    },
    /// Verify the reports; `grounding_only` when the flow budget is spent (no model calls).
    Verify {
        reported: Vec<Reported>,
        grounding_only: bool,
    },
    Synthesize {
        gated: Box<Gated>,
        classification: Classification,
        /// A conformance flow's gate, for the summary to say what blocks the merge.
        conformance: Option<Box<MergeReadiness>>,
    },
    /// Read a spec's acceptance criteria with a model (its form gave none).
    Criteria,
    /// Judge a batch of criteria against the target.
    Conformance {
        criteria: Vec<Criterion>,
    },
    /// Rule on a batch of a prior review's findings against the target (finish review).
    Adjudicate {
        findings: Vec<PriorFinding>,
    },
    /// One panel judge scores the surviving findings (`judge` is its catalog name).
    Judge {
        judge: String,
        findings: Vec<Finding>,
    },
    /// The meta-judge turns the panel's aggregates into a verdict.
    MetaJudge {
        meta: String,
        axes: Vec<AxisReport>,
        overall: Option<f64>,
    },
}

impl Job {
    /// Whether a peer can run this job: the judging jobs need the conducting node's spec, prior
    /// report or gated findings and always run there.
    pub fn shippable(&self) -> bool {
        matches!(
            self,
            Job::Scout
                | Job::Plan(_)
                | Job::Specialist { .. }
                | Job::Verify { .. }
                | Job::Synthesize { .. }
        )
    }
}

/// What one attempt cost and said, for the record and the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttemptStats {
    pub llm_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tool_calls: u32,
    pub text_tool_calls: u32,
    /// How an unusable answer was recovered, when it was.
    pub recovery: Option<String>,
    /// The final answer's full text (never truncated).
    pub output: String,
    /// blake3 of the first system + user prompt.
    pub prompt_hash: String,
    /// Responses the output-token bound cut off.
    #[serde(default)]
    pub bound_hits: u32,
    /// Every message of the attempt's conversation(s), in order, for the store and trace export.
    pub transcript: Vec<serde_json::Value>,
    /// Every tool call the attempt made and its result's digest (what an incremental review
    /// replays to know whether the attempt's result still holds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_reads: Vec<crate::reuse::ToolRead>,
    /// The review whose recorded result this attempt took instead of calling a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// Why an incremental review ran this attempt, or took a recorded result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
}

impl AttemptStats {
    /// Add another attempt's counts (a run's attempts, a review's usage); the text of the
    /// conversation stays with the attempt's own record.
    pub fn add_counts(&mut self, o: &AttemptStats) {
        self.llm_calls += o.llm_calls;
        self.tokens_in += o.tokens_in;
        self.tokens_out += o.tokens_out;
        self.tool_calls += o.tool_calls;
        self.text_tool_calls += o.text_tool_calls;
        self.bound_hits += o.bound_hits;
        if o.recovery.is_some() {
            self.recovery = o.recovery.clone();
        }
        if o.reused_from.is_some() {
            self.reused_from = o.reused_from.clone();
        }
        if o.cache.is_some() {
            self.cache = o.cache.clone();
        }
    }
}

/// The model that answered and what the answer cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelUse {
    pub model: String,
    pub stats: AttemptStats,
}

/// The summary and action items of a review: the synthesizer's, or built without a model
/// (`fallback`) when it failed or the budget left none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Synthesis {
    pub summary: String,
    pub action_items: Vec<String>,
    pub fallback: bool,
}

/// What a successful attempt produced, by stage.
#[derive(Debug, Clone)]
pub enum Outcome {
    Scout {
        classification: Classification,
        by: ModelUse,
    },
    Plan {
        tasks: Vec<Task>,
        rejected: Vec<RejectedTask>,
        selection: Option<SelectionRecord>,
        by: ModelUse,
    },
    Specialist {
        findings: Vec<RawFinding>,
        /// Objects in the answer that were not usable findings.
        invalid: usize,
        iterations: u32,
        by: ModelUse,
    },
    /// A verification batch: every finding judged (never an error per finding).
    Verify {
        judged: Vec<Judged>,
        /// The verifier shares a model family with a finder: independence is degraded.
        degraded: bool,
        by: ModelUse,
    },
    Synthesize {
        synthesis: Synthesis,
        by: ModelUse,
    },
    Criteria {
        criteria: Vec<Criterion>,
        by: ModelUse,
    },
    Conformance {
        judgments: Vec<Judgment>,
        by: ModelUse,
    },
    Adjudicate {
        rulings: Vec<Adjudged>,
        by: ModelUse,
    },
    Judge {
        score: JudgeScore,
        by: ModelUse,
    },
    MetaJudge {
        decision: Decision,
        by: ModelUse,
    },
}

impl Outcome {
    /// Which model answered and what it cost.
    pub fn by(&self) -> &ModelUse {
        match self {
            Outcome::Scout { by, .. }
            | Outcome::Plan { by, .. }
            | Outcome::Specialist { by, .. }
            | Outcome::Verify { by, .. }
            | Outcome::Synthesize { by, .. }
            | Outcome::Criteria { by, .. }
            | Outcome::Conformance { by, .. }
            | Outcome::Adjudicate { by, .. }
            | Outcome::Judge { by, .. }
            | Outcome::MetaJudge { by, .. } => by,
        }
    }
}

/// Why an attempt failed: its error class (`timeout`, `malformed_output`, …), its words, and
/// whether trying again could help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: String,
    pub message: String,
    pub retryable: bool,
}

/// How one attempt ended.
pub type AttemptOutcome = Result<Outcome, Failure>;
