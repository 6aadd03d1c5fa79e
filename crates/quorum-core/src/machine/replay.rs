//! A review's recorded facts folded into what a resume or a takeover needs.
//!
//! Replay is how the review machine comes back: the facts a conductor recorded (in its store,
//! or replicated by the control plane) are folded in log order by the precedence rules below,
//! and the machine continues from the result (`Event::Resume`). Nothing is re-decided that a
//! fact settled: a recorded plan is never re-made, a completed task never re-run.

use crate::machine::fact::Fact;
use crate::review::finding::RawFinding;
use crate::review::judged::Judged;
use crate::task::{Classification, RejectedTask, Task};
use std::collections::BTreeMap;

/// A fact as a log holds it: with its sequence number.
pub trait LoggedFact {
    fn seq(&self) -> u64;
    fn fact(&self) -> &Fact;
}

/// A fact with its sequence number, for callers that hold bare facts.
impl LoggedFact for (u64, Fact) {
    fn seq(&self) -> u64 {
        self.0
    }
    fn fact(&self) -> &Fact {
        &self.1
    }
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
    /// Per task, its last attempt that was started (or adopted) and has not ended: the attempt
    /// number and the node it runs on. What a conductor that takes over may adopt.
    pub in_flight: BTreeMap<String, (u32, String)>,
    pub judged: Option<Vec<Judged>>,
    /// Verdicts of the verification batches that finished, by (task id, ordinal).
    pub verdicts: BTreeMap<(String, usize), Judged>,
    pub synthesis: Option<(String, Vec<String>, bool)>,
    pub finished: Option<(String, String)>,
    /// Why the review was cancelled, when it was.
    pub cancelled: Option<String>,
    pub last_seq: u64,
    /// Two-tier selection's decisions (the first record wins).
    pub selection: Option<crate::flows::selection::SelectionRecord>,
    /// The first recorded scope (a review's scope never changes once it started).
    pub scope: Option<crate::scope::ReviewScope>,
    /// The criteria extracted, and whether a model extracted them.
    pub criteria: Option<(Vec<crate::judging::conformance::Criterion>, bool)>,
    /// Judged criteria by id.
    pub criteria_judged: BTreeMap<String, crate::judging::conformance::Judgment>,
    /// Exhaustive rounds evaluated, in order (the first record of a round wins).
    pub rounds: Vec<crate::flows::rounds::RoundMetrics>,
    /// Prior findings ruled on (finish review), by prior finding id.
    pub adjudicated: BTreeMap<String, crate::judging::adjudication::Adjudged>,
    /// Panel judges that answered, by judge name.
    pub panel_scores: BTreeMap<String, crate::judging::panel::JudgeScore>,
    /// Panel judges that gave no score, by judge name, with why.
    pub panel_failed: BTreeMap<String, String>,
    /// The panel's verdict, once given.
    pub panel_decision: Option<crate::judging::panel::Decision>,
    /// The insights offered to each specialist task, by task id.
    pub offered: BTreeMap<String, Vec<crate::memory::Offered>>,
}

impl Replay {
    pub fn from_events<E: LoggedFact>(events: &[E]) -> Replay {
        let mut r = Replay::default();
        for stored in events {
            r.last_seq = r.last_seq.max(stored.seq());
            match stored.fact() {
                Fact::FlowStarted { .. } | Fact::Note { .. } => {}
                Fact::Cancelled { reason } => r.cancelled = Some(reason.clone()),
                Fact::ScoutCompleted {
                    classification,
                    fallback,
                } => {
                    if r.classification.is_none() {
                        r.classification = Some((classification.clone(), *fallback));
                    }
                }
                Fact::PlanCompleted { tasks, rejected } => {
                    if r.plan.is_none() {
                        r.plan = Some((tasks.clone(), rejected.clone()));
                    }
                }
                Fact::AttemptStarted {
                    task_id,
                    attempt,
                    node,
                }
                | Fact::AttemptAdopted {
                    task_id,
                    attempt,
                    node,
                } => {
                    r.saw_attempt(task_id, *attempt);
                    r.in_flight
                        .insert(task_id.clone(), (*attempt, node.clone()));
                }
                Fact::AttemptFailed {
                    task_id, attempt, ..
                } => {
                    r.saw_attempt(task_id, *attempt);
                    r.ended(task_id, *attempt);
                }
                Fact::AttemptSucceeded {
                    task_id,
                    attempt,
                    findings,
                } => {
                    r.saw_attempt(task_id, *attempt);
                    r.ended(task_id, *attempt);
                    r.completed
                        .entry(task_id.clone())
                        .or_insert_with(|| findings.clone());
                }
                Fact::TaskAbandoned { task_id, reason } => {
                    r.abandoned.insert(task_id.clone(), reason.clone());
                }
                Fact::VerifyCompleted { judged } => r.judged = Some(judged.clone()),
                Fact::VerdictsRecorded { verdicts } => {
                    for v in verdicts {
                        r.verdicts
                            .entry((v.task_id.clone(), v.ordinal))
                            .or_insert_with(|| v.judged.clone());
                    }
                }
                Fact::SynthesisCompleted {
                    summary,
                    action_items,
                    fallback,
                } => r.synthesis = Some((summary.clone(), action_items.clone(), *fallback)),
                Fact::FlowFinished { status, reason } => {
                    r.finished = Some((status.clone(), reason.clone()));
                }
                Fact::Resumed { .. } => r.finished = None,
                Fact::SelectionRecorded { selection } => {
                    if r.selection.is_none() {
                        r.selection = Some(selection.clone());
                    }
                }
                Fact::ScopeRecorded { scope } => {
                    if r.scope.is_none() {
                        r.scope = Some(scope.clone());
                    }
                }
                Fact::CriteriaExtracted { criteria, by_model } => {
                    if r.criteria.is_none() {
                        r.criteria = Some((criteria.clone(), *by_model));
                    }
                }
                Fact::RoundCompleted { metrics, next } => {
                    // A round is evaluated once; its next tasks join the plan they extend.
                    if !r.rounds.iter().any(|m| m.round == metrics.round) {
                        r.rounds.push(metrics.clone());
                        if let Some((tasks, _)) = r.plan.as_mut() {
                            tasks.extend(next.iter().cloned());
                        }
                    }
                }
                Fact::PriorAdjudicated { rulings } => {
                    for a in rulings {
                        r.adjudicated
                            .entry(a.id.clone())
                            .or_insert_with(|| a.clone());
                    }
                }
                Fact::PanelScored { score } => {
                    r.panel_failed.remove(&score.judge);
                    r.panel_scores
                        .entry(score.judge.clone())
                        .or_insert_with(|| score.clone());
                }
                Fact::PanelJudgeFailed { judge, error } => {
                    if !r.panel_scores.contains_key(judge) {
                        r.panel_failed.insert(judge.clone(), error.clone());
                    }
                }
                Fact::PanelDecided { decision } => {
                    if r.panel_decision.is_none() {
                        r.panel_decision = Some(decision.clone());
                    }
                }
                Fact::InsightsOffered { task_id, insights } => {
                    r.offered
                        .entry(task_id.clone())
                        .or_insert_with(|| insights.clone());
                }
                Fact::CriteriaJudged { judgments } => {
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

    /// Attempt `attempt` of the task ended: it (and any earlier one) is no longer in flight.
    fn ended(&mut self, task_id: &str, attempt: u32) {
        if self
            .in_flight
            .get(task_id)
            .is_some_and(|(n, _)| *n <= attempt)
        {
            self.in_flight.remove(task_id);
        }
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
}
