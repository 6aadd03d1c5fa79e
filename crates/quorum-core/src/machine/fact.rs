//! The facts of a review: what the review machine records before it acts on it.
//!
//! A fact is immutable and recorded once, in order: the store appends it to the review's log,
//! the control plane commits it on a majority first, and a resume or a takeover folds the
//! recorded facts back into the machine ([`crate::machine::replay::Replay`]). Nothing here is a
//! status flag: status is derived from the facts when they are read.

use crate::review::finding::RawFinding;
use crate::review::judged::Judged;
use crate::task::{Classification, RejectedTask, Task};
use serde::{Deserialize, Serialize};

/// One fact about a flow, as the conductor records it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fact {
    FlowStarted {
        flow_id: String,
    },
    ScoutCompleted {
        classification: Classification,
        fallback: bool,
    },
    PlanCompleted {
        tasks: Vec<Task>,
        rejected: Vec<RejectedTask>,
    },
    AttemptStarted {
        task_id: String,
        attempt: u32,
        node: String,
    },
    /// A conductor that took the review over (or resumed it) adopted this attempt, started by
    /// an earlier conductor and still running on `node`'s worker: its result counts, and it is
    /// not started again.
    AttemptAdopted {
        task_id: String,
        attempt: u32,
        node: String,
    },
    /// Specialists carry their findings; other stages record `findings: []`.
    AttemptSucceeded {
        task_id: String,
        attempt: u32,
        findings: Vec<RawFinding>,
    },
    AttemptFailed {
        task_id: String,
        attempt: u32,
        error_class: String,
        error: String,
    },
    /// The task will not be tried again (circular_fix, attempts exhausted).
    TaskAbandoned {
        task_id: String,
        reason: String,
    },
    VerifyCompleted {
        judged: Vec<Judged>,
    },
    /// One verification batch's verdicts, recorded as the batch is counted, so a review resumed
    /// in the middle of verification never asks about these findings again.
    VerdictsRecorded {
        verdicts: Vec<RecordedVerdict>,
    },
    SynthesisCompleted {
        summary: String,
        action_items: Vec<String>,
        fallback: bool,
    },
    /// `status` is `completed`, `partial` or `failed`.
    FlowFinished {
        status: String,
        reason: String,
    },
    Resumed {
        from_seq: u64,
    },
    Note {
        message: String,
    },
    /// The review was cancelled (by a user, through the CLI or the API): nothing more runs.
    Cancelled {
        reason: String,
    },
    /// What the review is scoped to — the change under review (base, head, files, hunks), the
    /// repository's guidance, the profile, the analyzers' runs and leads — recorded before the
    /// first stage so a resume reviews the same change with the same guidance and leads.
    /// Two-tier selection's decisions, recorded before the plan they shaped (flows that select
    /// their roster).
    SelectionRecorded {
        selection: crate::flows::selection::SelectionRecord,
    },
    ScopeRecorded {
        scope: crate::scope::ReviewScope,
    },
    /// The spec's acceptance criteria (conformance flows), read from its form or, when it has
    /// none, by the criteria stage's model (`by_model`): a resume judges these, never re-reads.
    CriteriaExtracted {
        criteria: Vec<crate::judging::conformance::Criterion>,
        by_model: bool,
    },
    /// One judge batch's verdicts, after grounding: a resume does not judge these again.
    CriteriaJudged {
        judgments: Vec<crate::judging::conformance::Judgment>,
    },
    /// An exhaustive round ended: its metrics and the tasks of the next round (none when the
    /// review converged). A resume runs those tasks as planned ones and never re-evaluates the
    /// round.
    RoundCompleted {
        metrics: crate::flows::rounds::RoundMetrics,
        next: Vec<Task>,
    },
    /// One adjudicator batch's rulings on prior findings (finish review), after they were
    /// settled against the tree, or the pre-check's own rulings: a resume does not rule again.
    PriorAdjudicated {
        rulings: Vec<crate::judging::adjudication::Adjudged>,
    },
    /// A panel judge's scores of the review's findings, as it answered: a resume never asks
    /// that judge again.
    PanelScored {
        score: crate::judging::panel::JudgeScore,
    },
    /// A panel judge gave no score (its attempts ran out). Not final: a resume asks it again
    /// unless the panel's verdict was recorded.
    PanelJudgeFailed {
        judge: String,
        error: String,
    },
    /// The panel's verdict (the meta-judge's, or the rule's): a resume runs no panel call.
    PanelDecided {
        decision: crate::judging::panel::Decision,
    },
    /// The teammates' insights a specialist task's prompt carries, decided by the conductor
    /// when the task's first attempt started: every later attempt, and a resume, offers these.
    InsightsOffered {
        task_id: String,
        insights: Vec<crate::memory::Offered>,
    },
}

/// One finding's verdict, keyed by what survives a resume: the reporting task and the
/// finding's position among that task's findings (a completed task's findings are replayed in
/// the order it reported them; the order of tasks is not kept).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RecordedVerdict {
    pub task_id: String,
    pub ordinal: usize,
    pub judged: Judged,
}

/// Everything about one attempt at one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub task_id: String,
    pub attempt: u32,
    pub persona: String,
    pub model: String,
    pub backend: String,
    pub node: String,
    /// blake3 of system + user prompt.
    pub prompt_hash: String,
    /// The full final output, never truncated.
    pub output: String,
    pub iterations: u32,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub error_class: Option<String>,
    pub error: Option<String>,
    /// The message list (system/user/assistant/tool), for trace export.
    pub transcript: serde_json::Value,
    /// The review whose recorded result this attempt took (an incremental review's reuse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// Why an incremental review ran the attempt or took a recorded result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
}
