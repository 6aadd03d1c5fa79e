//! The append-only event log of a flow, and its replay into what a resume needs.
//!
//! The log is the source of truth: status, progress and resume state are all derived from it
//! when read. Nothing here is ever updated in place; a later fact supersedes an earlier one
//! only in the way [`Replay::from_events`] documents.

use crate::status::DerivedStatus;
use quorum_core::review::finding::RawFinding;
use quorum_core::review::judged::Judged;
use quorum_core::task::{Classification, RejectedTask, Task};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One fact about a flow, as the conductor records it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
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
        selection: quorum_core::flows::selection::SelectionRecord,
    },
    ScopeRecorded {
        scope: quorum_core::scope::ReviewScope,
    },
    /// The spec's acceptance criteria (conformance flows), read from its form or, when it has
    /// none, by the criteria stage's model (`by_model`): a resume judges these, never re-reads.
    CriteriaExtracted {
        criteria: Vec<quorum_core::judging::conformance::Criterion>,
        by_model: bool,
    },
    /// One judge batch's verdicts, after grounding: a resume does not judge these again.
    CriteriaJudged {
        judgments: Vec<quorum_core::judging::conformance::Judgment>,
    },
    /// An exhaustive round ended: its metrics and the tasks of the next round (none when the
    /// review converged). A resume runs those tasks as planned ones and never re-evaluates the
    /// round.
    RoundCompleted {
        metrics: quorum_core::flows::rounds::RoundMetrics,
        next: Vec<Task>,
    },
    /// One adjudicator batch's rulings on prior findings (finish review), after they were
    /// settled against the tree, or the pre-check's own rulings: a resume does not rule again.
    PriorAdjudicated {
        rulings: Vec<quorum_core::judging::adjudication::Adjudged>,
    },
    /// A panel judge's scores of the review's findings, as it answered: a resume never asks
    /// that judge again.
    PanelScored {
        score: quorum_core::judging::panel::JudgeScore,
    },
    /// A panel judge gave no score (its attempts ran out). Not final: a resume asks it again
    /// unless the panel's verdict was recorded.
    PanelJudgeFailed {
        judge: String,
        error: String,
    },
    /// The panel's verdict (the meta-judge's, or the rule's): a resume runs no panel call.
    PanelDecided {
        decision: quorum_core::judging::panel::Decision,
    },
    /// The teammates' insights a specialist task's prompt carries, decided by the conductor
    /// when the task's first attempt started: every later attempt, and a resume, offers these.
    InsightsOffered {
        task_id: String,
        insights: Vec<quorum_core::memory::Offered>,
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

/// An event as stored: its sequence number (1-based, gap-free within one store) and the wall
/// clock time it was appended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub at_ms: u64,
    pub event: Event,
}

/// The state of a flow as its event log tells it.
///
/// Rules, in log order:
/// - classification and plan: the first one recorded wins, because the tasks that ran belong
///   to it (a resumed flow never re-plans);
/// - `completed`: the findings of a task's first successful attempt; a later success (a fenced
///   attempt that woke up) is ignored, so no finding is counted twice;
/// - `abandoned`: the latest reason per task; a task may be both abandoned and completed when
///   a late success arrived after giving up, and then completed wins for resume;
/// - `attempts`: the highest attempt number seen in any attempt event;
/// - judged and synthesis: the latest one;
/// - `verdicts`: per (task, ordinal) the first verdict recorded by a batch (a fenced batch's
///   late success is never counted, so there is no second one to prefer);
/// - scope: the first one recorded wins;
/// - criteria: the first extraction recorded wins (the judgments belong to it); a criterion's
///   judgment: the first one recorded (a late batch that was fenced changes nothing);
/// - a prior finding's ruling: the first one recorded;
/// - a panel judge's scores: the first recorded; its failure: the latest; the panel's verdict:
///   the first recorded;
/// - a task's offered insights: the first record;
/// - `finished`: set by `FlowFinished`, cleared by a later `Resumed` (the flow runs again);
/// - `cancelled`: set by `Cancelled`; a cancelled review is not resumed;
/// - rounds: the first record of each round; its next tasks are appended to the plan;
///   other events after a finish (late results) are still folded in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    pub classification: Option<(Classification, bool)>,
    pub plan: Option<(Vec<Task>, Vec<RejectedTask>)>,
    pub completed: BTreeMap<String, Vec<RawFinding>>,
    pub abandoned: BTreeMap<String, String>,
    pub attempts: BTreeMap<String, u32>,
    pub judged: Option<Vec<Judged>>,
    /// Verdicts of the verification batches that finished, by (task id, ordinal).
    pub verdicts: BTreeMap<(String, usize), Judged>,
    pub synthesis: Option<(String, Vec<String>, bool)>,
    pub finished: Option<(String, String)>,
    /// Why the review was cancelled, when it was.
    pub cancelled: Option<String>,
    pub last_seq: u64,
    /// Two-tier selection's decisions (the first record wins).
    pub selection: Option<quorum_core::flows::selection::SelectionRecord>,
    /// The first recorded scope (a review's scope never changes once it started).
    pub scope: Option<quorum_core::scope::ReviewScope>,
    /// The criteria extracted, and whether a model extracted them.
    pub criteria: Option<(Vec<quorum_core::judging::conformance::Criterion>, bool)>,
    /// Judged criteria by id.
    pub criteria_judged: BTreeMap<String, quorum_core::judging::conformance::Judgment>,
    /// Exhaustive rounds evaluated, in order (the first record of a round wins).
    pub rounds: Vec<quorum_core::flows::rounds::RoundMetrics>,
    /// Prior findings ruled on (finish review), by prior finding id.
    pub adjudicated: BTreeMap<String, quorum_core::judging::adjudication::Adjudged>,
    /// Panel judges that answered, by judge name.
    pub panel_scores: BTreeMap<String, quorum_core::judging::panel::JudgeScore>,
    /// Panel judges that gave no score, by judge name, with why.
    pub panel_failed: BTreeMap<String, String>,
    /// The panel's verdict, once given.
    pub panel_decision: Option<quorum_core::judging::panel::Decision>,
    /// The insights offered to each specialist task, by task id.
    pub offered: BTreeMap<String, Vec<quorum_core::memory::Offered>>,
}

impl Replay {
    pub fn from_events(events: &[StoredEvent]) -> Replay {
        let mut r = Replay::default();
        for stored in events {
            r.last_seq = r.last_seq.max(stored.seq);
            match &stored.event {
                Event::FlowStarted { .. } | Event::Note { .. } => {}
                Event::Cancelled { reason } => r.cancelled = Some(reason.clone()),
                Event::ScoutCompleted {
                    classification,
                    fallback,
                } => {
                    if r.classification.is_none() {
                        r.classification = Some((classification.clone(), *fallback));
                    }
                }
                Event::PlanCompleted { tasks, rejected } => {
                    if r.plan.is_none() {
                        r.plan = Some((tasks.clone(), rejected.clone()));
                    }
                }
                Event::AttemptStarted {
                    task_id, attempt, ..
                }
                | Event::AttemptFailed {
                    task_id, attempt, ..
                } => r.saw_attempt(task_id, *attempt),
                Event::AttemptSucceeded {
                    task_id,
                    attempt,
                    findings,
                } => {
                    r.saw_attempt(task_id, *attempt);
                    r.completed
                        .entry(task_id.clone())
                        .or_insert_with(|| findings.clone());
                }
                Event::TaskAbandoned { task_id, reason } => {
                    r.abandoned.insert(task_id.clone(), reason.clone());
                }
                Event::VerifyCompleted { judged } => r.judged = Some(judged.clone()),
                Event::VerdictsRecorded { verdicts } => {
                    for v in verdicts {
                        r.verdicts
                            .entry((v.task_id.clone(), v.ordinal))
                            .or_insert_with(|| v.judged.clone());
                    }
                }
                Event::SynthesisCompleted {
                    summary,
                    action_items,
                    fallback,
                } => r.synthesis = Some((summary.clone(), action_items.clone(), *fallback)),
                Event::FlowFinished { status, reason } => {
                    r.finished = Some((status.clone(), reason.clone()));
                }
                Event::Resumed { .. } => r.finished = None,
                Event::SelectionRecorded { selection } => {
                    if r.selection.is_none() {
                        r.selection = Some(selection.clone());
                    }
                }
                Event::ScopeRecorded { scope } => {
                    if r.scope.is_none() {
                        r.scope = Some(scope.clone());
                    }
                }
                Event::CriteriaExtracted { criteria, by_model } => {
                    if r.criteria.is_none() {
                        r.criteria = Some((criteria.clone(), *by_model));
                    }
                }
                Event::RoundCompleted { metrics, next } => {
                    // A round is evaluated once; its next tasks join the plan they extend.
                    if !r.rounds.iter().any(|m| m.round == metrics.round) {
                        r.rounds.push(metrics.clone());
                        if let Some((tasks, _)) = r.plan.as_mut() {
                            tasks.extend(next.iter().cloned());
                        }
                    }
                }
                Event::PriorAdjudicated { rulings } => {
                    for a in rulings {
                        r.adjudicated
                            .entry(a.id.clone())
                            .or_insert_with(|| a.clone());
                    }
                }
                Event::PanelScored { score } => {
                    r.panel_failed.remove(&score.judge);
                    r.panel_scores
                        .entry(score.judge.clone())
                        .or_insert_with(|| score.clone());
                }
                Event::PanelJudgeFailed { judge, error } => {
                    if !r.panel_scores.contains_key(judge) {
                        r.panel_failed.insert(judge.clone(), error.clone());
                    }
                }
                Event::PanelDecided { decision } => {
                    if r.panel_decision.is_none() {
                        r.panel_decision = Some(decision.clone());
                    }
                }
                Event::InsightsOffered { task_id, insights } => {
                    r.offered
                        .entry(task_id.clone())
                        .or_insert_with(|| insights.clone());
                }
                Event::CriteriaJudged { judgments } => {
                    for j in judgments {
                        r.criteria_judged
                            .entry(j.id.clone())
                            .or_insert_with(|| j.clone());
                    }
                }
            }
        }
        r
    }

    fn saw_attempt(&mut self, task_id: &str, attempt: u32) {
        let seen = self.attempts.entry(task_id.to_string()).or_insert(0);
        *seen = (*seen).max(attempt);
    }

    /// Planned tasks that neither succeeded nor were abandoned, in plan order: what a resume
    /// has to run. Empty before a plan exists.
    pub fn unfinished_tasks(&self) -> Vec<&Task> {
        self.plan
            .as_ref()
            .map(|(tasks, _)| {
                tasks
                    .iter()
                    .filter(|t| {
                        !self.completed.contains_key(&t.id) && !self.abandoned.contains_key(&t.id)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Status as the log alone tells it: the finish, else interrupted. Only the process that
    /// holds the store open knows a flow is running.
    pub fn status(&self) -> DerivedStatus {
        match &self.finished {
            Some((status, _)) => DerivedStatus::from_finish(status),
            None => DerivedStatus::Interrupted,
        }
    }
}
