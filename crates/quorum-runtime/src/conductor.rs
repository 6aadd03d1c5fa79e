//! FlowConductor: the per-review supervisor and control plane, a thin actor around a pure core.
//!
//! Every decision about attempts — where each runs, its lease, whether a result counts, retry
//! or give up, circular fix, stop — is made by `quorum_core::schedule::Scheduler`, a state
//! machine with no I/O that a seeded simulation exercises under faults
//! (`crates/quorum-core/tests/schedule_sim.rs`). This actor feeds it events (outcomes,
//! renewals, membership, ticks, timers, cancel) and carries out its commands: spawning one
//! supervised [`TaskWorker`] per local attempt, shipping remote attempts to peers, recording
//! every fact before acting on it, emitting progress. Phase order (scout → planner →
//! specialists → verifier → synthesizer) and what each stage's result means live in
//! [`phases`].

mod judging;
mod panel;
mod phases;
mod rounds;

use crate::agent::CallStats;
use crate::context::SharedContext;
use crate::error::AttemptError;
use crate::facts::{now_ms, Resume};
use crate::progress::{Progress, ProgressSender};
use crate::remote::{RemoteAttempt, RemoteStage};
use crate::report::{TaskRun, TaskState};
use crate::stages::{self, Synthesis};
use crate::worker::{Job, JobOutcome, OutcomeSink, TaskWorker, WorkerArgs};
use quorum_core::report::Report;
use quorum_core::review::dedup::Gated;
use quorum_core::review::finding::Reported;
use quorum_core::schedule::{
    AttemptId, AttemptResult, Command, Input, Place, Scheduler, SchedulerParams, TaskKey,
    TaskStatus,
};
use quorum_core::task::Classification;
use quorum_store::{AttemptRecord, Event};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

pub struct FlowConductor;

pub struct ConductorArgs {
    pub ctx: SharedContext,
    pub done: oneshot::Sender<Report>,
    pub progress: Option<ProgressSender>,
    /// Continue from a replayed store instead of starting fresh.
    pub resume: Option<Resume>,
}

pub enum ConductorMsg {
    Start,
    /// The flow's wall-clock budget ran out.
    WallBudget,
    /// A local worker's outcome.
    Outcome {
        attempt: u64,
        outcome: Box<JobOutcome>,
    },
    /// A peer node was declared lost: fence and reassign its attempts.
    NodeLost(String),
    /// A peer joined (or came back): queued work may go to it now.
    NodeJoined(String),
    /// A backoff is over: run `run` again.
    Retry {
        run: usize,
    },
    /// A remote attempt's result, as sent by `node`: counted only when `node` is where the
    /// attempt was placed and the attempt is still live.
    RemoteOutcome {
        attempt: u64,
        node: String,
        outcome: Box<JobOutcome>,
    },
    /// The worker on `node` still works on `attempt`: extend its lease.
    Renew {
        attempt: u64,
        node: String,
    },
    /// Check leases and refresh the view of peers.
    LeaseTick,
    /// Stop the review now: every live attempt is stopped, no model call starts after the
    /// reply, and the review ends partial with `reason`.
    Cancel {
        reason: String,
        reply: ractor::RpcReplyPort<()>,
    },
}

// Conductor messages never cross the network: results from other nodes arrive through the
// node's message handler, which forwards them as local messages.
impl ractor::Message for ConductorMsg {}

/// Which part of the review is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Scout,
    Plan,
    Specialists,
    Verify,
    /// Conformance flows, after verification: the spec's criteria, then the judge batches.
    Conformance,
    /// Finish reviews, after verification (and conformance): the prior findings' rulings.
    Adjudicate,
    /// Panel flows, last before the synthesizer: the judges, then the meta-judge.
    Panel,
    Synthesize,
    Done,
}

struct Sink(ActorRef<ConductorMsg>);

impl OutcomeSink for Sink {
    fn deliver(&self, attempt: u64, outcome: JobOutcome) {
        // The conductor being gone means the review already ended; nothing to do.
        let _ = self.0.send_message(ConductorMsg::Outcome {
            attempt,
            outcome: Box::new(outcome),
        });
    }
}

/// The team board topic the conductor publishes teammates' insights under.
pub const INSIGHTS_TOPIC: &str = "insights";

/// How long a peer that could not be reached, or refused, is left out of placement.
const SUSPECT_FOR: Duration = Duration::from_secs(3);

/// How long a peer that let a lease lapse is left out of placement (unless it delivers first):
/// long enough that the retry of what it lost goes elsewhere.
const LAPSED_NODE_AVOIDED_FOR: Duration = Duration::from_secs(60);

pub struct ConductorState {
    ctx: SharedContext,
    done: Option<oneshot::Sender<Report>>,
    progress: Option<ProgressSender>,
    phase: Phase,
    started: Instant,
    /// Every attempt decision.
    sched: Scheduler,
    actors: HashMap<ActorId, AttemptId>,
    /// Live local worker actors by attempt, so a stop can kill them mid-call.
    workers: HashMap<AttemptId, ractor::ActorCell>,
    /// Every run: stage runs (scout, plan), then specialists, verify and synthesize. The index
    /// is the run's key in the scheduler.
    runs: Vec<TaskRun>,
    classification: Classification,
    classification_fallback: bool,
    rejected: Vec<quorum_core::task::RejectedTask>,
    reported: Vec<Reported>,
    /// Verdicts a resumed review found recorded by batches that finished before the stop, by
    /// (task id, ordinal): verification takes them as they are instead of asking again.
    prior_verdicts:
        std::collections::BTreeMap<(String, usize), quorum_core::review::judged::Judged>,
    /// The verification ledger, built where the verdicts are gated.
    ledger: Vec<quorum_core::review::ledger::LedgerEntry>,
    gated: Option<Gated>,
    synthesis: Option<Synthesis>,
    verifier_model: Option<String>,
    verifier_degraded: bool,
    usage: CallStats,
    failure: Option<String>,
    resume: Option<Resume>,
    /// Why the flow budget stopped new work, once it has.
    budget_spent: Option<String>,
    /// Why the review was cancelled, once it was.
    cancelled: Option<String>,
    /// The verification round in flight, once the specialists are done.
    verify: Option<phases::VerifyRound>,
    /// Conformance flows: the spec's criteria once read (and whether a model read them), the
    /// grounded verdicts so far by criterion id, the judge round in flight, whether judging
    /// is over, and why it could not run when it could not.
    criteria: Option<Vec<quorum_core::judging::conformance::Criterion>>,
    criteria_by_model: bool,
    judgments: std::collections::BTreeMap<String, quorum_core::judging::conformance::Judgment>,
    conformance: Option<judging::ConformanceRound>,
    conformance_done: bool,
    conformance_failure: Option<String>,
    /// Exhaustive flows: the rounds evaluated so far, in order.
    rounds: Vec<quorum_core::flows::rounds::RoundMetrics>,
    /// Two-tier selection's decisions (recorded before the plan), for the report.
    selection: Option<quorum_core::flows::selection::SelectionRecord>,
    /// Finish reviews: each prior finding's settled ruling by prior id, the adjudicator round
    /// in flight, and whether adjudication is over.
    adjudged: std::collections::BTreeMap<String, quorum_core::judging::adjudication::Adjudged>,
    adjudication: Option<judging::AdjudicationRound>,
    adjudication_done: bool,
    /// Panel flows: each judge's recorded scores and, for those that gave none, why; the
    /// verdict once given; the judge or meta-judge runs in flight; whether the panel is over.
    panel_scores: std::collections::BTreeMap<String, quorum_core::judging::panel::JudgeScore>,
    panel_failed: std::collections::BTreeMap<String, String>,
    panel_decision: Option<quorum_core::judging::panel::Decision>,
    panel: Option<panel::PanelRound>,
    panel_done: bool,
    /// Attempts recorded before a resume, by run id, so the panel's numbering continues.
    resumed_attempts: std::collections::BTreeMap<String, u32>,
    /// Working memory within the review: the insights completed tasks left (from grounded
    /// findings only), and what each task was offered, by task id (the first offer is
    /// recorded and kept, so retries and resumes build the same prompt).
    insights: Vec<quorum_core::memory::Insight>,
    offered: std::collections::BTreeMap<String, Vec<quorum_core::memory::Offered>>,
}

impl ConductorState {
    fn emit(&self, p: Progress) {
        crate::obs::observe(&self.ctx.flow_id, &p);
        if let Some(tx) = &self.progress {
            let _ = tx.send(p);
        }
    }

    fn add_run(&mut self, run: TaskRun) -> usize {
        self.runs.push(run);
        self.runs.len() - 1
    }

    fn emit_usage(&self) {
        self.emit(Progress::Usage {
            llm_calls: self.usage.llm_calls,
            tokens_in: self.usage.tokens_in,
            tokens_out: self.usage.tokens_out,
        });
    }

    /// Record a note for the reader as a fact (what the conductor saw and did).
    async fn note(&self, message: String) {
        self.ctx.facts.event(Event::Note { message }).await;
    }

    fn lease(&self) -> Duration {
        self.ctx
            .remote
            .as_ref()
            .map(|r| r.lease())
            .unwrap_or(Duration::from_secs(10))
    }
}

/// The full record of one attempt, for the store (and trace export).
fn attempt_record(
    ctx: &SharedContext,
    r: &TaskRun,
    model: &str,
    stats: &CallStats,
    iterations: u32,
    error: Option<(&str, &str)>,
) -> AttemptRecord {
    let ended = now_ms();
    AttemptRecord {
        task_id: r.id.clone(),
        attempt: r.attempts,
        persona: r.persona.clone(),
        model: model.to_string(),
        backend: ctx
            .backends
            .route(model)
            .map(|c| c.backend().url().to_string())
            .unwrap_or_default(),
        node: if r.node.is_empty() {
            ctx.node.clone()
        } else {
            r.node.clone()
        },
        prompt_hash: stats.prompt_hash.clone(),
        output: stats.output.clone(),
        iterations,
        tokens_in: stats.tokens_in,
        tokens_out: stats.tokens_out,
        started_ms: ended.saturating_sub(r.duration_ms),
        ended_ms: ended,
        error_class: error.map(|(c, _)| c.to_string()),
        error: error.map(|(_, m)| m.to_string()),
        transcript: serde_json::to_value(&stats.transcript).unwrap_or_default(),
    }
}

/// Choose the model for a specialist task: (model, the planner's request it replaced).
fn place_model(
    ctx: &SharedContext,
    task: &quorum_core::task::Task,
    prior_error: Option<&str>,
) -> Result<(String, Option<String>), AttemptError> {
    let (system, user) = stages::specialist_prompt(ctx, task, prior_error)?;
    let mut needs = quorum_core::models::TaskNeeds::new(task.persona.as_str());
    needs.prompt_tokens = (quorum_core::weaver::estimate_tokens(&system)
        + quorum_core::weaver::estimate_tokens(&user)) as u64;
    // The planner's choice, else the persona's execution preference, else scoring.
    let preferred = ctx
        .catalog
        .personas
        .get(&task.persona)
        .map(|p| p.models.execution.as_str())
        .filter(|m| !m.trim().is_empty() && !m.eq_ignore_ascii_case("auto"));
    let sel = ctx
        .backends
        .select(needs, task.model.as_deref().or(preferred))
        .map_err(|e| AttemptError::Config(e.to_string()))?;
    Ok((sel.model, sel.replaced))
}

/// The longest a specialist attempt may run anywhere: its turns, each bounded by the call
/// timeout, plus room for the final answer.
fn deadline_for_specialist(ctx: &SharedContext) -> Duration {
    let p = &ctx.flow.parameters;
    Duration::from_secs(
        p.call_timeout_secs
            .max(1)
            .saturating_mul(p.max_iterations as u64 + 2),
    )
}

fn deadline(ctx: &SharedContext, job: &Job) -> Duration {
    let p = &ctx.flow.parameters;
    let call = p.call_timeout_secs.max(1);
    let secs = match job {
        Job::Specialist { .. } => call.saturating_mul(p.max_iterations as u64 + 2),
        // Every finding is asked of every verifier, and of the consultant when there is one.
        Job::Verify { reported, .. } => call
            .saturating_mul(
                (reported.len() as u64).saturating_mul(crate::worker::calls_per_finding(&ctx.flow))
                    / ctx.max_concurrent() as u64
                    + 2,
            )
            .saturating_mul(2),
        Job::Plan(_) => call.saturating_mul(2 * (p.planner_retries as u64 + 1)),
        _ => call.saturating_mul(2),
    };
    Duration::from_secs(secs)
}

/// The scheduler's tunables for this review.
fn scheduler_params(ctx: &SharedContext) -> SchedulerParams {
    let p = &ctx.flow.parameters;
    let lease = ctx
        .remote
        .as_ref()
        .map(|r| r.lease())
        .unwrap_or(Duration::from_secs(10));
    SchedulerParams {
        task_attempts: p.task_attempts,
        // Stage runs get at least two tries: a flaky scout should not cost the whole plan.
        stage_attempts: p.task_attempts.max(2),
        circular_fix_repeats: p.circular_fix_repeats,
        local_capacity: ctx.max_concurrent(),
        lease_ms: lease.as_millis() as u64,
        attempt_ms: deadline_for_specialist(ctx).as_millis() as u64,
        suspect_ms: SUSPECT_FOR.as_millis() as u64,
        lapsed_avoid_ms: LAPSED_NODE_AVOIDED_FOR.as_millis() as u64,
        max_handbacks: 16,
        backoff_base_ms: 250,
        backoff_cap_ms: 10_000,
    }
}

fn task_state(s: TaskStatus) -> TaskState {
    match s {
        TaskStatus::Pending => TaskState::Pending,
        TaskStatus::Running => TaskState::Running,
        TaskStatus::Backoff => TaskState::Backoff,
        TaskStatus::Completed => TaskState::Completed,
        TaskStatus::Failed => TaskState::Failed,
        TaskStatus::CircularFix => TaskState::CircularFix,
        // Reported as "skipped".
        TaskStatus::Skipped => TaskState::Pending,
    }
}

/// What the scheduler needs to know of a worker's outcome.
fn result_of(outcome: &JobOutcome) -> AttemptResult {
    match outcome.error() {
        None => AttemptResult::Success,
        Some(e) => failure_of(e),
    }
}

/// An attempt error as the scheduler weighs it: its class, its words, whether to retry.
fn failure_of(e: &AttemptError) -> AttemptResult {
    AttemptResult::Failure {
        class: e.class().to_string(),
        message: e.to_string(),
        retryable: e.retryable(),
    }
}

impl FlowConductor {
    /// Feed the scheduler an event and carry out what it decides, then move the review on.
    /// `outcome` is the worker's result when the event is that worker's outcome.
    async fn feed(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        input: Input,
        outcome: Option<JobOutcome>,
    ) -> Result<(), ActorProcessingErr> {
        let mut queue = VecDeque::from([(input, outcome)]);
        while let Some((input, mut outcome)) = queue.pop_front() {
            let cmds = state.sched.step(now_ms(), input);
            for c in cmds {
                Box::pin(Self::apply(myself, state, c, &mut outcome, &mut queue)).await?;
            }
        }
        Box::pin(Self::advance(myself, state)).await
    }

    async fn apply(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        cmd: Command,
        outcome: &mut Option<JobOutcome>,
        queue: &mut VecDeque<(Input, Option<JobOutcome>)>,
    ) -> Result<(), ActorProcessingErr> {
        match cmd {
            Command::Start {
                attempt,
                key,
                place,
                attempt_no,
            } => {
                if let Some(input) =
                    Self::start_attempt(myself, state, attempt, key, place, attempt_no).await?
                {
                    queue.push_back((input, None));
                }
            }
            Command::Stop { attempt, place } => Self::stop_attempt(state, attempt, &place).await,
            Command::RetryAfter { key, delay_ms } => {
                myself.send_after(Duration::from_millis(delay_ms), move || {
                    ConductorMsg::Retry { run: key }
                });
            }
            Command::Succeeded { attempt, key } => {
                state.workers.remove(&attempt);
                state.actors.retain(|_, a| *a != attempt);
                match outcome.take() {
                    Some(o) => Box::pin(Self::succeeded(myself, state, key, o)).await?,
                    None => tracing::error!(attempt, "a success without its outcome"),
                }
            }
            Command::Failed {
                attempt,
                key,
                class,
                message,
                terminal,
            } => {
                state.workers.remove(&attempt);
                state.actors.retain(|_, a| *a != attempt);
                Box::pin(Self::failed(
                    myself, state, key, attempt, &class, &message, terminal,
                ))
                .await?;
            }
            Command::HandedBack {
                attempt,
                key,
                class,
                message,
            } => {
                state.workers.remove(&attempt);
                state.actors.retain(|_, a| *a != attempt);
                quorum_metrics::fenced(match class.as_str() {
                    "lease_expired" => "lease_lapsed",
                    "node_lost" => "node_lost",
                    _ => "refused",
                });
                let r = &mut state.runs[key];
                r.handed_back += 1;
                r.state = TaskState::Pending;
                tracing::warn!(task = %r.id, attempt, class = %class, "attempt handed back; placing it again");
                let (id, n) = (r.id.clone(), r.attempts);
                state
                    .ctx
                    .facts
                    .event(Event::AttemptFailed {
                        task_id: id,
                        attempt: n,
                        error_class: class,
                        error: message,
                    })
                    .await;
            }
            Command::Ignored { attempt, from, why } => {
                quorum_metrics::fenced(if why.starts_with("from a node") {
                    "wrong_node"
                } else {
                    "late_result"
                });
                let from = from.node().unwrap_or(state.ctx.node.as_str()).to_string();
                tracing::info!(attempt, from = %from, why, "result not counted");
                state
                    .note(format!(
                        "result of attempt {attempt} from {from} ignored: {why}"
                    ))
                    .await;
            }
        }
        Ok(())
    }

    /// Carry out a Start: record it, then run it here or ship it. Returns the event to feed
    /// back when it could not even begin (no model for it, peer unreachable).
    async fn start_attempt(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        attempt: AttemptId,
        key: TaskKey,
        place: Place,
        attempt_no: u32,
    ) -> Result<Option<Input>, ActorProcessingErr> {
        let node = place
            .node()
            .map(str::to_string)
            .unwrap_or_else(|| state.ctx.node.clone());
        let r = &mut state.runs[key];
        r.attempts = r.resumed_attempts + attempt_no;
        r.state = TaskState::Running;
        r.node = node.clone();
        r.started.get_or_insert_with(Instant::now);
        let (id, persona, n) = (r.id.clone(), r.persona.clone(), r.attempts);
        state
            .ctx
            .facts
            .event(Event::AttemptStarted {
                task_id: id.clone(),
                attempt: n,
                node: node.clone(),
            })
            .await;
        // The start is a fact like any other: if the control plane refused it (this node no
        // longer conducts the review), the attempt must not reach a model.
        if state.ctx.facts.fenced() {
            return Err("fenced: another node conducts this review now".into());
        }
        if state.runs[key].task.is_some() || state.verify.is_some() {
            quorum_metrics::placed(place != Place::Local);
        }
        state.emit(Progress::TaskStarted {
            task: id.clone(),
            persona,
            attempt: n,
            node: node.clone(),
            model: state.runs[key].model.clone(),
        });
        if let Some(batch) = state.verify.as_ref().and_then(|v| v.batch(key)) {
            return Self::start_verification_batch(myself, state, attempt, key, place, batch).await;
        }
        if let Some(criteria) = state.conformance.as_ref().and_then(|r| r.batch(key)) {
            // Judge batches are never placed on peers (added with placeable: false): the spec
            // and the whole target stay on the conducting node.
            Self::spawn_worker(myself, state, attempt, Job::Conformance { criteria }).await?;
            return Ok(None);
        }
        if let Some(findings) = state.adjudication.as_ref().and_then(|r| r.batch(key)) {
            // Like judge batches, adjudicator batches stay here with the prior report.
            Self::spawn_worker(myself, state, attempt, Job::Adjudicate { findings }).await?;
            return Ok(None);
        }
        if let Some(job) = Self::panel_job(state, key) {
            // Panel calls stay here too: they score this node's gated findings.
            Self::spawn_worker(myself, state, attempt, job).await?;
            return Ok(None);
        }
        let prior_error = state.runs[key].last_error.clone();
        let insights = Self::insights_for(state, key).await;
        let Some(mut task) = state.runs[key].task.clone() else {
            // A stage run: the job is the current phase's, here or on the chosen peer.
            let job = Self::stage_job(state);
            if let Place::Peer(peer) = &place {
                let stage = match job {
                    Job::Scout => Some(RemoteStage::Scout),
                    Job::Plan(classification) => Some(RemoteStage::Plan {
                        classification,
                        catalog: state.ctx.catalog.clone(),
                    }),
                    // A conformance flow is never placed on peers (its judge batches are
                    // not placeable and a node refuses it), so no gate travels here.
                    Job::Synthesize {
                        gated,
                        classification,
                        ..
                    } => Some(RemoteStage::Synthesize {
                        gated,
                        classification,
                    }),
                    _ => None,
                };
                if let (Some(stage), Some(remote)) = (stage, state.ctx.remote.clone()) {
                    tracing::debug!(task = %id, attempt = n, node = %peer, "dispatching a stage to a peer");
                    let req = RemoteAttempt::stage(&state.ctx, attempt, &id, stage, state.lease());
                    if let Err(e) = remote.dispatch(peer, req).await {
                        tracing::warn!(node = %peer, error = %e, "cannot reach peer; placing elsewhere");
                        return Ok(Some(Input::SendFailed { attempt }));
                    }
                    return Ok(None);
                }
                // Nothing to ship it with: hand it back, it runs here next.
                return Ok(Some(Input::SendFailed { attempt }));
            }
            Self::spawn_worker(myself, state, attempt, job).await?;
            return Ok(None);
        };
        if let Place::Peer(peer) = &place {
            tracing::debug!(task = %id, attempt = n, node = %peer, "dispatching attempt to a peer");
            let lease = state.lease();
            let sent = match (
                &state.ctx.remote,
                RemoteAttempt::build(&state.ctx, attempt, &task, prior_error, lease),
            ) {
                (Some(remote), Ok(mut req)) => {
                    req.insights = insights;
                    remote.dispatch(peer, req).await
                }
                (None, _) => Err("no remote executor".to_string()),
                (_, Err(e)) => {
                    return Ok(Some(Input::Outcome {
                        attempt,
                        from: place.clone(),
                        result: failure_of(&e),
                    }))
                }
            };
            if let Err(e) = sent {
                // The peer never got it: a placement failure, not the task's.
                tracing::warn!(node = %peer, error = %e, "cannot reach peer; placing elsewhere");
                return Ok(Some(Input::SendFailed { attempt }));
            }
            return Ok(None);
        }
        // Placement of the model is decided here, not in the worker: the conductor knows which
        // model runs each attempt, so failures are attributed and learned from.
        match place_model(&state.ctx, &task, prior_error.as_deref()) {
            Ok((model, replaced)) => {
                if let Some(old) = replaced {
                    state.runs[key]
                        .notes
                        .push(format!("planner model {old:?} replaced by {model}"));
                }
                state.runs[key].model = model.clone();
                task.model = Some(model);
            }
            Err(e) => {
                return Ok(Some(Input::Outcome {
                    attempt,
                    from: Place::Local,
                    result: failure_of(&e),
                }))
            }
        }
        tracing::debug!(task = %id, attempt = n, "dispatching attempt");
        Self::spawn_worker(
            myself,
            state,
            attempt,
            Job::Specialist {
                task,
                prior_error,
                insights,
            },
        )
        .await?;
        Ok(None)
    }

    /// The teammates' insights a specialist task's prompt carries: what it was offered
    /// before, else the review's top-k so far from other tasks, recorded before use. None
    /// for stage runs, with memory off, or while no other task left any.
    async fn insights_for(
        state: &mut ConductorState,
        key: TaskKey,
    ) -> Vec<quorum_core::memory::Offered> {
        let (Some(task), Some(memory)) = (&state.runs[key].task, &state.ctx.scope.memory) else {
            return Vec::new();
        };
        if let Some(offered) = state.offered.get(&task.id) {
            return offered.clone();
        }
        let others: Vec<quorum_core::memory::Insight> = state
            .insights
            .iter()
            .filter(|i| i.provenance.task_id != task.id)
            .cloned()
            .collect();
        let offered = quorum_core::memory::top_k(&others, now_ms(), memory.k, memory.base_rate);
        if offered.is_empty() {
            return offered;
        }
        let task_id = task.id.clone();
        state
            .ctx
            .facts
            .event(Event::InsightsOffered {
                task_id: task_id.clone(),
                insights: offered.clone(),
            })
            .await;
        state.offered.insert(task_id, offered.clone());
        offered
    }

    /// A completed specialist task's grounded findings become insights for the tasks that
    /// start after it, and notes on the team board's `insights` topic, so a teammate on
    /// another node can read them with `team_bb_read` too.
    fn learn(
        state: &mut ConductorState,
        task_id: &str,
        persona: &str,
        findings: &[quorum_core::review::finding::RawFinding],
    ) {
        let Some(memory) = &state.ctx.scope.memory else {
            return;
        };
        if findings.is_empty() || state.insights.len() >= quorum_core::memory::PER_REVIEW {
            return;
        }
        let provenance = quorum_core::memory::Provenance {
            flow_id: state.ctx.flow_id.clone(),
            task_id: task_id.to_string(),
            persona: persona.to_string(),
            findings: Vec::new(),
            target: memory.repository.clone(),
            created_ms: now_ms(),
        };
        let room = quorum_core::memory::PER_REVIEW - state.insights.len();
        // The same issue reported again (a later round re-reading the files) is known already.
        let learned: Vec<_> = quorum_core::memory::distill_task(
            findings,
            &state.ctx.pack,
            &provenance,
            &state.insights,
        )
        .into_iter()
        .take(room)
        .collect();
        if let Some(board) = &state.ctx.board {
            for i in &learned {
                let body = format!("{}: {}", i.title, i.content);
                if let Err(e) = board.publish(&state.ctx.flow_id, persona, INSIGHTS_TOPIC, &body) {
                    tracing::debug!(error = %e, "insight not published on the team board");
                }
            }
        }
        state.insights.extend(learned);
    }

    async fn spawn_worker(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        attempt: AttemptId,
        job: Job,
    ) -> Result<(), ActorProcessingErr> {
        let args = WorkerArgs {
            attempt,
            deadline: deadline(&state.ctx, &job),
            job,
            ctx: state.ctx.clone(),
            sink: Arc::new(Sink(myself.clone())),
        };
        let (worker, _) = Actor::spawn_linked(None, TaskWorker, args, myself.get_cell()).await?;
        state.actors.insert(worker.get_id(), attempt);
        state.workers.insert(attempt, worker.get_cell());
        Ok(())
    }

    /// Stop an attempt: a local worker is killed (its model request dropped); a peer is asked
    /// to abort (bounded wait, so a cancel has told the peers by the time it returns).
    async fn stop_attempt(state: &mut ConductorState, attempt: AttemptId, place: &Place) {
        if let Some(cell) = state.workers.remove(&attempt) {
            cell.kill();
        }
        state.actors.retain(|_, a| *a != attempt);
        if let (Place::Peer(node), Some(remote)) = (place, state.ctx.remote.clone()) {
            let told = remote.cancel(node, &state.ctx.flow_id, vec![attempt]);
            if tokio::time::timeout(Duration::from_secs(2), told)
                .await
                .is_err()
            {
                tracing::warn!(node = %node, "stop request not delivered in time; the attempt is fenced anyway");
            }
        }
    }

    /// The job of the current phase's stage run.
    fn stage_job(state: &ConductorState) -> Job {
        match state.phase {
            Phase::Scout => Job::Scout,
            Phase::Plan => Job::Plan(state.classification.clone()),
            Phase::Conformance => Job::Criteria,
            Phase::Verify => Job::Verify {
                reported: state.reported.clone(),
                grounding_only: state.budget_spent.is_some(),
            },
            _ => Job::Synthesize {
                gated: Box::new(state.gated.clone().unwrap_or_default()),
                classification: state.classification.clone(),
                conformance: Self::merge_readiness(state).map(Box::new),
            },
        }
    }

    /// Record an attempt charged to its task; a task that will not run again ends its stage's
    /// part in the review (fallback, failure or partial).
    #[allow(clippy::too_many_arguments)]
    async fn failed(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        key: TaskKey,
        attempt: AttemptId,
        class: &str,
        message: &str,
        terminal: Option<TaskStatus>,
    ) -> Result<(), ActorProcessingErr> {
        let elapsed = state.runs[key]
            .started
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(0);
        let r = &mut state.runs[key];
        r.duration_ms = elapsed;
        r.error_classes.push(class.to_string());
        r.last_error = Some(message.to_string());
        r.state = terminal.map(task_state).unwrap_or(TaskState::Backoff);
        let is_specialist = r.task.is_some();
        if is_specialist && !r.model.is_empty() {
            state
                .ctx
                .backends
                .record(&r.model, &r.persona, false, 0, 0, r.duration_ms);
        }
        let r = &state.runs[key];
        tracing::warn!(task = %r.id, attempt = r.attempts, class, error = message, "attempt failed");
        let facts = state.ctx.facts.clone();
        // attempt 0: a task the stop ended before it ran again; no attempt to record.
        if attempt != 0 {
            facts
                .event(Event::AttemptFailed {
                    task_id: r.id.clone(),
                    attempt: r.attempts,
                    error_class: class.to_string(),
                    error: message.to_string(),
                })
                .await;
            facts
                .attempt(attempt_record(
                    &state.ctx,
                    r,
                    &r.model,
                    &CallStats::default(),
                    0,
                    Some((class, message)),
                ))
                .await;
        }
        if let Some(end) = terminal {
            facts
                .event(Event::TaskAbandoned {
                    task_id: r.id.clone(),
                    reason: match end {
                        TaskStatus::CircularFix => format!(
                            "circular_fix: {class} failed the same way {} times in a row",
                            state.ctx.flow.parameters.circular_fix_repeats
                        ),
                        _ => format!("{class}: {message}"),
                    },
                })
                .await;
        }
        state.emit(Progress::TaskFinished {
            task: r.id.clone(),
            persona: r.persona.clone(),
            ok: false,
            findings: 0,
            error: Some(message.to_string()),
            error_class: Some(class.to_string()),
            model: r.model.clone(),
            tokens_in: 0,
            tokens_out: 0,
        });
        if terminal.is_some() {
            if let Some(v) = state.verify.as_mut() {
                if v.batch(key).is_some() {
                    // A batch that could not be verified leaves its findings UNVERIFIED, with
                    // the reason; the review goes on.
                    v.give_up(key, message);
                    return Ok(());
                }
            }
        }
        if terminal.is_some()
            && state
                .conformance
                .as_ref()
                .is_some_and(|r| r.batch(key).is_some())
        {
            // Criteria whose batch could not be judged stay unmet, not judged, with the
            // reason; nothing is recorded for them, so a resume judges them again.
            Self::conformance_gave_up(state, key, message);
            return Ok(());
        }
        if terminal.is_some()
            && state
                .adjudication
                .as_ref()
                .is_some_and(|r| r.batch(key).is_some())
        {
            // Prior findings whose batch could not be ruled on count as standing, not judged;
            // nothing is recorded for them, so a resume rules on them again.
            Self::adjudication_gave_up(state, key, message);
            return Ok(());
        }
        if terminal.is_some() && state.panel.as_ref().is_some_and(|r| r.has(key)) {
            // The panel fails open: a judge that gave no score is listed and not counted, a
            // meta-judge that gave no verdict leaves it to the rule; the review goes on.
            Self::panel_gave_up(state, key, message).await;
            return Ok(());
        }
        if terminal.is_some() && !is_specialist && !state.sched.stopped() {
            return Self::after_final_failure(myself, state, message.to_string()).await;
        }
        Ok(())
    }

    /// Move the review on once the specialists are done.
    async fn advance(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        if state.phase == Phase::Specialists && state.sched.all_terminal(false) {
            // An exhaustive flow's round may be followed by another before verification.
            if Box::pin(Self::end_round(myself, state)).await? {
                return Ok(());
            }
            return Box::pin(Self::start_phase(myself, state, Phase::Verify)).await;
        }
        if state.phase == Phase::Verify && state.verify.is_some() && state.sched.all_terminal(false)
        {
            return Box::pin(Self::verification_done(myself, state)).await;
        }
        if state.phase == Phase::Conformance
            && state.conformance.is_some()
            && state.sched.all_terminal(false)
        {
            return Box::pin(Self::conformance_finished(myself, state)).await;
        }
        if state.phase == Phase::Adjudicate
            && state.adjudication.is_some()
            && state.sched.all_terminal(false)
        {
            return Box::pin(Self::adjudication_finished(myself, state)).await;
        }
        if state.phase == Phase::Panel && state.panel.is_some() && state.sched.all_terminal(false) {
            return Box::pin(Self::panel_step(myself, state)).await;
        }
        Ok(())
    }

    /// Tell the scheduler which peers can take work now: new ones and changed capacities are
    /// up, peers no longer offered (draining, full, gone) are not chosen.
    async fn sync_peers(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(remote) = state.ctx.remote.clone() else {
            return Ok(());
        };
        let offered = remote.peers();
        let known: Vec<String> = state.sched.peers().map(str::to_string).collect();
        for node in known {
            if state.sched.peer_offer(&node).is_some() && !offered.iter().any(|p| p.node == node) {
                Self::feed(myself, state, Input::PeerDraining { node }, None).await?;
            }
        }
        for p in offered {
            let now = state.sched.peer_offer(&p.node);
            if now != Some(p.capacity) && !(p.capacity == 0 && now.is_none()) {
                let input = if p.capacity == 0 {
                    Input::PeerDraining { node: p.node }
                } else {
                    Input::PeerUp {
                        node: p.node,
                        capacity: p.capacity,
                    }
                };
                Self::feed(myself, state, input, None).await?;
            }
        }
        Ok(())
    }

    /// Stop the review: what runs is stopped (here and on peers), the cancellation is recorded,
    /// and the review ends partial with what was found, judged by grounding alone and
    /// summarised without a model.
    async fn cancel(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        reason: String,
    ) -> Result<(), ActorProcessingErr> {
        if state.phase == Phase::Done || state.cancelled.is_some() {
            return Ok(());
        }
        tracing::warn!(reason = %reason, "review cancelled");
        state.cancelled = Some(reason.clone());
        state.budget_spent = Some(reason.clone());
        state
            .ctx
            .facts
            .event(Event::Cancelled {
                reason: reason.clone(),
            })
            .await;
        state.phase = Phase::Synthesize;
        Self::feed(
            myself,
            state,
            Input::StopAll {
                class: "cancelled".into(),
                reason,
            },
            None,
        )
        .await?;
        if state.gated.is_none() {
            state.gated = Some(Self::ground_only(state));
        }
        Self::finish_with_fallback_summary(myself, state).await;
        Ok(())
    }

    /// Grounding alone judges what was reported (no model call), then the gate.
    fn ground_only(state: &mut ConductorState) -> Gated {
        let judged = stages::ground_only(&state.ctx, state.reported.clone());
        Self::gate(state, judged)
    }

    /// Merge and gate the verdicts and build the verification ledger from their ballots; the
    /// surviving findings go out as progress events.
    fn gate(state: &mut ConductorState, judged: Vec<quorum_core::review::judged::Judged>) -> Gated {
        let checked: Vec<quorum_core::review::judged::Judged> = judged
            .iter()
            .filter(|j| j.ballot.is_some())
            .cloned()
            .collect();
        let fresh: std::collections::BTreeSet<String> = state
            .runs
            .iter()
            .filter_map(|r| r.task.as_ref())
            .filter(|t| {
                t.origin.as_deref() == Some(quorum_core::flows::coverage::FRESH_EYES_ORIGIN)
            })
            .map(|t| t.id.clone())
            .collect();
        let anchors = (!fresh.is_empty()).then(|| judged.clone());
        let mut gated = state.ctx.gate(judged);
        if let Some(all) = anchors {
            for list in [
                &mut gated.findings,
                &mut gated.residual,
                &mut gated.pre_existing,
            ] {
                quorum_core::flows::coverage::mark_fresh_eyes(&state.ctx.flow, list, &all, &fresh);
            }
        }
        state.ledger = quorum_core::review::ledger::ledger(
            &checked,
            &[&gated.findings, &gated.residual, &gated.pre_existing],
        );
        for p in crate::obs::finding_events(&gated.findings) {
            state.emit(p);
        }
        gated
    }
}

#[ractor::async_trait]
impl Actor for FlowConductor {
    type Msg = ConductorMsg;
    type State = ConductorState;
    type Arguments = ConductorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ConductorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_message(ConductorMsg::Start)?;
        // The epoch is where this conductor's part of the log begins: it grows with every
        // resume, so attempt ids of an earlier incarnation never match a live one.
        let epoch = args
            .resume
            .as_ref()
            .map(|r| r.replay.last_seq + 1)
            .unwrap_or(1)
            & 0xFF_FFFF;
        let sched = Scheduler::new(scheduler_params(&args.ctx), epoch, rand::random());
        Ok(ConductorState {
            ctx: args.ctx,
            done: Some(args.done),
            progress: args.progress,
            phase: Phase::Scout,
            started: Instant::now(),
            sched,
            actors: HashMap::new(),
            workers: HashMap::new(),
            runs: Vec::new(),
            classification: Classification::default(),
            classification_fallback: false,
            rejected: Vec::new(),
            reported: Vec::new(),
            prior_verdicts: Default::default(),
            ledger: Vec::new(),
            gated: None,
            synthesis: None,
            verifier_model: None,
            verifier_degraded: false,
            usage: CallStats::default(),
            failure: None,
            resume: args.resume,
            budget_spent: None,
            cancelled: None,
            verify: None,
            criteria: None,
            criteria_by_model: false,
            judgments: std::collections::BTreeMap::new(),
            conformance: None,
            conformance_done: false,
            conformance_failure: None,
            rounds: Vec::new(),
            selection: None,
            adjudged: std::collections::BTreeMap::new(),
            adjudication: None,
            adjudication_done: false,
            panel_scores: std::collections::BTreeMap::new(),
            panel_failed: std::collections::BTreeMap::new(),
            panel_decision: None,
            panel: None,
            panel_done: false,
            resumed_attempts: std::collections::BTreeMap::new(),
            insights: Vec::new(),
            offered: std::collections::BTreeMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: ConductorMsg,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        // [raft hook] A review taken over elsewhere refuses this node's facts: stop conducting.
        if state.ctx.facts.fenced() {
            return Err("fenced: another node conducts this review now".into());
        }
        if state.phase == Phase::Done {
            if let ConductorMsg::Cancel { reply, .. } = msg {
                let _ = reply.send(());
            }
            return Ok(());
        }
        match msg {
            ConductorMsg::Start => {
                let wall = state.ctx.flow.parameters.max_wall_secs;
                if wall > 0 {
                    myself.send_after(Duration::from_secs(wall), || ConductorMsg::WallBudget);
                }
                if state.ctx.remote.is_some() {
                    let every = (state.lease() / 4).max(Duration::from_millis(50));
                    myself.send_interval(every, || ConductorMsg::LeaseTick);
                    Self::sync_peers(&myself, state).await?;
                }
                if let Some(resume) = state.resume.take() {
                    return Self::resume(&myself, state, resume).await;
                }
                state
                    .ctx
                    .facts
                    .event(Event::FlowStarted {
                        flow_id: state.ctx.flow_id.clone(),
                    })
                    .await;
                if state.ctx.pack.is_empty() {
                    // Nothing to review is a completed review that says so, with no model call.
                    tracing::info!("target holds no reviewable files");
                    Self::finish(&myself, state).await;
                    return Ok(());
                }
                Self::start_phase(&myself, state, Phase::Scout).await
            }
            ConductorMsg::NodeLost(node) => {
                let affected = state
                    .sched
                    .live()
                    .filter(|(_, _, p)| p.node() == Some(node.as_str()))
                    .count();
                if affected > 0 {
                    tracing::warn!(node = %node, attempts = affected, "node lost; reassigning its attempts");
                    state
                        .note(format!("node {node} lost; {affected} attempts reassigned"))
                        .await;
                }
                Self::feed(&myself, state, Input::PeerLost { node }, None).await
            }
            ConductorMsg::NodeJoined(node) => {
                state.note(format!("node {node} joined")).await;
                Self::sync_peers(&myself, state).await?;
                Self::feed(&myself, state, Input::Tick, None).await
            }
            ConductorMsg::WallBudget => {
                let secs = state.ctx.flow.parameters.max_wall_secs;
                Self::spend_budget(&myself, state, format!("wall-time budget spent ({secs}s)"))
                    .await
            }
            ConductorMsg::Outcome { attempt, outcome } => {
                let result = result_of(&outcome);
                let input = Input::Outcome {
                    attempt,
                    from: Place::Local,
                    result,
                };
                Self::feed(&myself, state, input, Some(*outcome)).await?;
                Self::check_budget(&myself, state).await
            }
            ConductorMsg::RemoteOutcome {
                attempt,
                node,
                outcome,
            } => {
                let result = result_of(&outcome);
                let input = Input::Outcome {
                    attempt,
                    from: Place::Peer(node),
                    result,
                };
                Self::feed(&myself, state, input, Some(*outcome)).await?;
                Self::check_budget(&myself, state).await
            }
            ConductorMsg::Renew { attempt, node } => {
                Self::feed(
                    &myself,
                    state,
                    Input::Renew {
                        attempt,
                        from: node,
                    },
                    None,
                )
                .await
            }
            ConductorMsg::LeaseTick => {
                Self::sync_peers(&myself, state).await?;
                Self::feed(&myself, state, Input::Tick, None).await
            }
            ConductorMsg::Retry { run } => {
                Self::feed(&myself, state, Input::RetryDue { key: run }, None).await
            }
            ConductorMsg::Cancel { reason, reply } => {
                Self::cancel(&myself, state, reason).await?;
                let _ = reply.send(());
                Ok(())
            }
        }
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        evt: SupervisionEvent,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, why) = evt {
            let Some(attempt) = state.actors.remove(&cell.get_id()) else {
                return Ok(());
            };
            state.workers.remove(&attempt);
            if state.phase == Phase::Done {
                return Ok(());
            }
            tracing::error!(attempt, error = %why, "task actor failed");
            let input = Input::Outcome {
                attempt,
                from: Place::Local,
                result: AttemptResult::Failure {
                    class: "internal".into(),
                    message: format!("internal: task actor failed: {why}"),
                    retryable: true,
                },
            };
            Self::feed(&myself, state, input, None).await?;
        }
        Ok(())
    }
}
