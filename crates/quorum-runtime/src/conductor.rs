//! FlowConductor: the per-review supervisor and control plane.
//!
//! It walks the flow's stages (scout → planner → specialists → verifier → synthesizer), spawns
//! one supervised [`TaskWorker`] per attempt, bounds concurrency, retries failed attempts with
//! backoff, stops retrying a task that fails the same way three times in a row (circular fix),
//! fences late results, and finally assembles the report. All decisions here are deterministic
//! Rust; models are only reached through the workers.

use crate::agent::CallStats;
use crate::context::SharedContext;
use crate::error::AttemptError;
use crate::facts::{now_ms, Resume};
use crate::progress::{Progress, ProgressSender};
use crate::remote::RemoteAttempt;
use crate::report::{assemble, RunFacts, TaskRun, TaskState};
use crate::stages::{self, Synthesis};
use crate::worker::{Job, JobOutcome, OutcomeSink, TaskWorker, WorkerArgs};
use quorum_core::dedup::{self, Gated};
use quorum_core::finding::{Reported, Reporter};
use quorum_core::report::Report;
use quorum_core::task::Classification;
use quorum_store::{AttemptRecord, Event};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a peer that could not be reached is left out of placement.
const SUSPECT_FOR: Duration = Duration::from_secs(3);

/// How long a peer that let a lease lapse is left out of placement (unless it delivers a
/// result first): long enough that the retry of what it lost goes elsewhere.
const LAPSED_NODE_AVOIDED_FOR: Duration = Duration::from_secs(60);

/// Error classes that say where an attempt ran, not how the task went: they never count
/// towards the task's attempts or its circular-fix streak.
const PLACEMENT_CLASSES: &[&str] = &["node_lost", "refused", "lease_expired"];

/// Error classes that say the model's answer was at fault: retries carry the error back to
/// the model, so the same one again means the fixes go in circles. Infrastructure failures
/// (timeouts, transport, rate limits) are not circular: they run out the attempts instead.
const OUTPUT_CLASSES: &[&str] = &[
    "malformed_output",
    "schema_violation",
    "tool_error",
    "context_overflow",
];

/// A task handed back this many times for placement reasons counts further ones as failures,
/// so a cluster that keeps losing its work still ends the review.
const MAX_HANDBACKS: u32 = 16;

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
    Outcome {
        attempt: u64,
        outcome: Box<JobOutcome>,
    },
    /// A peer node was declared lost: fence and reassign its attempts.
    NodeLost(String),
    /// A peer joined (or came back): queued work may go to it now.
    NodeJoined(String),
    /// Re-dispatch run `run` after its backoff.
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
    /// Fence remote attempts whose lease lapsed.
    LeaseTick,
    /// Stop the review now: every live attempt is stopped, no model call starts after the
    /// reply, and the review ends partial with `reason`.
    Cancel {
        reason: String,
        reply: ractor::RpcReplyPort<()>,
    },
}

/// A remote attempt's lease: renewed by its worker, fenced when it lapses.
#[derive(Debug, Clone)]
struct Lease {
    node: String,
    renew_by: Instant,
    /// However often it is renewed, an attempt past this is fenced: the worker's own deadline
    /// should have ended it long before.
    hard: Instant,
}

// Conductor messages never cross the network: results from other nodes arrive through the
// node's message handler, which forwards them as local messages.
impl ractor::Message for ConductorMsg {}

/// Which part of the review a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Scout,
    Plan,
    Specialists,
    Verify,
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

pub struct ConductorState {
    ctx: SharedContext,
    done: Option<oneshot::Sender<Report>>,
    progress: Option<ProgressSender>,
    phase: Phase,
    started: Instant,
    next_attempt: u64,
    /// Live attempt id -> run index. An outcome for an id not here is fenced off.
    live: HashMap<u64, usize>,
    actors: HashMap<ActorId, u64>,
    /// Live worker actors by attempt, so a spent budget can stop them mid-call.
    workers: HashMap<u64, ractor::ActorCell>,
    /// Every run: stage runs first (scout, plan), then specialists, verify and synthesize.
    runs: Vec<TaskRun>,
    pending: VecDeque<usize>,
    /// Specialist attempts in flight anywhere (this node and peers).
    active_specialists: usize,
    /// Remote attempts: attempt id -> node running it.
    placements: HashMap<u64, String>,
    /// Our attempts in flight per peer node.
    remote_in_flight: HashMap<String, usize>,
    /// Peers a send just failed to reach, or that let a lease lapse, until when: skipped for a
    /// while, so one bad node cannot burn a task's attempts before membership declares it lost.
    suspects: HashMap<String, Instant>,
    /// Leases of live remote attempts.
    leases: HashMap<u64, Lease>,
    /// Why the review was cancelled, once it was.
    cancelled: Option<String>,
    classification: Classification,
    classification_fallback: bool,
    rejected: Vec<quorum_core::task::RejectedTask>,
    reported: Vec<Reported>,
    gated: Option<Gated>,
    synthesis: Option<Synthesis>,
    verifier_model: Option<String>,
    verifier_degraded: bool,
    usage: CallStats,
    failure: Option<String>,
    resume: Option<Resume>,
    /// Why the flow budget stopped new work, once it has.
    budget_spent: Option<String>,
}

impl ConductorState {
    fn emit(&self, p: Progress) {
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
}

/// The full record of one attempt, for the store (and trace export).
fn attempt_record(
    ctx: &SharedContext,
    r: &TaskRun,
    model: &str,
    stats: &CallStats,
    iterations: u32,
    error: Option<&AttemptError>,
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
        node: ctx.node.clone(),
        prompt_hash: stats.prompt_hash.clone(),
        output: stats.output.clone(),
        iterations,
        tokens_in: stats.tokens_in,
        tokens_out: stats.tokens_out,
        started_ms: ended.saturating_sub(r.duration_ms),
        ended_ms: ended,
        error_class: error.map(|e| e.class().to_string()),
        error: error.map(|e| e.to_string()),
        transcript: serde_json::to_value(&stats.transcript).unwrap_or_default(),
    }
}

/// Choose the model for a specialist task: (model, the planner's request it replaced).
fn place(
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
            .saturating_mul(u64::from(p.max_iterations).saturating_add(2)),
    )
}

fn deadline(ctx: &SharedContext, job: &Job) -> Duration {
    let p = &ctx.flow.parameters;
    let call = p.call_timeout_secs.max(1);
    let rounds = match job {
        Job::Specialist { .. } => u64::from(p.max_iterations).saturating_add(2),
        Job::Verify { reported, .. } => (reported.len() as u64)
            .checked_div(ctx.max_concurrent() as u64)
            .unwrap_or(0)
            .saturating_add(2)
            .saturating_mul(2),
        Job::Plan(_) => 2 * (u64::from(p.planner_retries).saturating_add(1)),
        _ => 2,
    };
    // Saturating: a huge timeout means "no deadline", never a wrapped tiny one.
    let secs = call.saturating_mul(rounds);
    Duration::from_secs(secs)
}

impl FlowConductor {
    async fn dispatch(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        run: usize,
        job: Job,
    ) -> Result<(), ActorProcessingErr> {
        state.next_attempt += 1;
        let attempt = state.next_attempt;
        let r = &mut state.runs[run];
        r.attempts += 1;
        r.state = TaskState::Running;
        r.node = state.ctx.node.clone();
        r.started.get_or_insert_with(Instant::now);
        let (id, persona, n) = (r.id.clone(), r.persona.clone(), r.attempts);
        state
            .ctx
            .facts
            .event(Event::AttemptStarted {
                task_id: id.clone(),
                attempt: n,
                node: state.ctx.node.clone(),
            })
            .await;
        state.live.insert(attempt, run);
        state.emit(Progress::TaskStarted {
            task: id.clone(),
            persona,
            attempt: n,
        });
        tracing::debug!(task = %id, attempt = n, "dispatching attempt");
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

    async fn start_phase(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        phase: Phase,
    ) -> Result<(), ActorProcessingErr> {
        state.phase = phase;
        let (name, job) = match phase {
            Phase::Scout => ("scout", Job::Scout),
            Phase::Plan => ("planner", Job::Plan(state.classification.clone())),
            Phase::Verify => {
                if state.reported.is_empty() {
                    // Nothing to judge: skip the stage entirely, no model call.
                    state.gated = Some(Gated::default());
                    return Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await;
                }
                (
                    "verifier",
                    Job::Verify {
                        reported: state.reported.clone(),
                        grounding_only: state.budget_spent.is_some(),
                    },
                )
            }
            Phase::Synthesize if state.budget_spent.is_some() => {
                // No more model calls once the budget is spent: a deterministic summary.
                Self::finish_with_fallback_summary(myself, state).await;
                return Ok(());
            }
            Phase::Synthesize => {
                let gated = state.gated.clone().unwrap_or_default();
                (
                    "synthesizer",
                    Job::Synthesize {
                        gated: Box::new(gated),
                        classification: state.classification.clone(),
                    },
                )
            }
            Phase::Specialists | Phase::Done => return Ok(()),
        };
        state.emit(Progress::Stage {
            stage: name.to_string(),
        });
        let run = state.add_run(TaskRun::stage(name));
        Self::dispatch(myself, state, run, job).await
    }

    /// Start queued specialist tasks up to the concurrency bound; when every task is terminal,
    /// move on to verification.
    async fn pump(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        while state.budget_spent.is_none() {
            if state.pending.is_empty() {
                break;
            }
            let Some(target) = Self::choose_node(state) else {
                break;
            };
            let Some(run) = state.pending.pop_front() else {
                break;
            };
            if let Some(node) = target {
                Self::dispatch_remote(myself, state, run, node).await;
                continue;
            }
            let Some(mut task) = state.runs[run].task.clone() else {
                continue;
            };
            let prior_error = state.runs[run].last_error.clone();
            // Placement is decided here, not in the worker: the conductor knows which model
            // runs each attempt, so failures are attributed and learned from.
            match place(&state.ctx, &task, prior_error.as_deref()) {
                Ok((model, replaced)) => {
                    if let Some(old) = replaced {
                        state.runs[run]
                            .notes
                            .push(format!("planner model {old:?} replaced by {model}"));
                    }
                    state.runs[run].model = model.clone();
                    task.model = Some(model);
                }
                Err(err) => {
                    state.runs[run].attempts += 1;
                    Self::fail_attempt(myself, state, run, &err);
                    continue;
                }
            }
            state.active_specialists += 1;
            Self::dispatch(myself, state, run, Job::Specialist { task, prior_error }).await?;
        }
        let all_terminal = state.budget_spent.is_some()
            || state
                .runs
                .iter()
                .filter(|r| r.task.is_some())
                .all(|r| r.state.is_terminal());
        if state.phase == Phase::Specialists && all_terminal && state.active_specialists == 0 {
            Self::start_phase(myself, state, Phase::Verify).await?;
        }
        Ok(())
    }

    /// Where the next specialist attempt goes: `Some(None)` this node, `Some(Some(peer))` a peer,
    /// `None` nowhere has room. The least-loaded place (in-flight / capacity) wins; ties go to
    /// this node, whose pack needs no transfer.
    fn choose_node(state: &ConductorState) -> Option<Option<String>> {
        let remote_total: usize = state.remote_in_flight.values().sum();
        let local_active = state.active_specialists.saturating_sub(remote_total);
        let local_cap = state.ctx.max_concurrent();
        let mut best: Option<(f64, Option<String>)> =
            (local_active < local_cap).then(|| (local_active as f64 / local_cap as f64, None));
        if let Some(remote) = &state.ctx.remote {
            for peer in remote.peers() {
                if state
                    .suspects
                    .get(&peer.node)
                    .is_some_and(|until| Instant::now() < *until)
                {
                    continue;
                }
                let busy = state.remote_in_flight.get(&peer.node).copied().unwrap_or(0);
                if peer.capacity == 0 || busy >= peer.capacity {
                    continue;
                }
                let load = busy as f64 / peer.capacity as f64;
                if best.as_ref().is_none_or(|(b, _)| load < *b) {
                    best = Some((load, Some(peer.node)));
                }
            }
        }
        best.map(|(_, node)| node)
    }

    /// Ship a specialist attempt to a peer. A failed send is an ordinary (retryable) failure.
    async fn dispatch_remote(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        run: usize,
        node: String,
    ) {
        let Some(task) = state.runs[run].task.clone() else {
            return;
        };
        state.next_attempt += 1;
        let attempt = state.next_attempt;
        let prior_error = state.runs[run].last_error.clone();
        let r = &mut state.runs[run];
        r.attempts += 1;
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
        state.live.insert(attempt, run);
        state.placements.insert(attempt, node.clone());
        *state.remote_in_flight.entry(node.clone()).or_default() += 1;
        state.active_specialists += 1;
        state.emit(Progress::TaskStarted {
            task: id.clone(),
            persona,
            attempt: n,
        });
        tracing::debug!(task = %id, attempt = n, node = %node, "dispatching attempt to a peer");
        let lease = state
            .ctx
            .remote
            .as_ref()
            .map(|r| r.lease())
            .unwrap_or(Duration::from_secs(10));
        let now = Instant::now();
        let hard = now + lease + deadline_for_specialist(&state.ctx);
        state.leases.insert(
            attempt,
            Lease {
                node: node.clone(),
                renew_by: now + lease,
                hard,
            },
        );
        let sent = match (
            &state.ctx.remote,
            RemoteAttempt::build(&state.ctx, attempt, &task, prior_error, lease),
        ) {
            (Some(remote), Ok(req)) => remote
                .dispatch(&node, req)
                .await
                .map_err(AttemptError::Internal),
            (None, _) => Err(AttemptError::Internal("no remote executor".into())),
            (_, Err(e)) => Err(e),
        };
        if let Err(e) = sent {
            // The peer never got it: a placement failure, not the task's; it does not use up
            // the task's attempts, and the peer is avoided until it proves itself again.
            tracing::warn!(node = %node, error = %e, "cannot reach peer; placing elsewhere");
            state
                .suspects
                .insert(node.clone(), Instant::now() + SUSPECT_FOR);
            let err = AttemptError::NodeLost(node.clone());
            let _ = myself.send_message(ConductorMsg::Outcome {
                attempt,
                outcome: Box::new(JobOutcome::Specialist(Err(err))),
            });
        }
    }

    /// Count the outcome of a live attempt; an attempt no longer live is fenced and ignored.
    async fn take_outcome(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        attempt: u64,
        outcome: JobOutcome,
    ) -> Result<(), ActorProcessingErr> {
        let remote_node = state.placements.remove(&attempt);
        state.leases.remove(&attempt);
        let Some(run) = state.live.remove(&attempt) else {
            tracing::info!(attempt, node = ?remote_node, "ignoring result of a fenced attempt");
            state
                .ctx
                .facts
                .event(Event::Note {
                    message: format!("late result of fenced attempt {attempt} ignored"),
                })
                .await;
            return Ok(());
        };
        state.actors.retain(|_, a| *a != attempt);
        state.workers.remove(&attempt);
        Self::on_outcome(myself, state, run, outcome).await
    }

    /// Fence every remote attempt whose lease lapsed (no result, no renewal) and place it
    /// elsewhere; its node is avoided until it delivers again or a while has passed.
    async fn check_leases(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        if state.phase == Phase::Done {
            return Ok(());
        }
        let now = Instant::now();
        let lapsed: Vec<(u64, String)> = state
            .leases
            .iter()
            .filter(|(_, l)| now >= l.renew_by || now >= l.hard)
            .map(|(a, l)| (*a, l.node.clone()))
            .collect();
        for (attempt, node) in lapsed {
            state.leases.remove(&attempt);
            state.placements.remove(&attempt);
            if let Some(c) = state.remote_in_flight.get_mut(&node) {
                *c = c.saturating_sub(1);
            }
            let Some(run) = state.live.remove(&attempt) else {
                continue;
            };
            tracing::warn!(attempt, node = %node, "attempt lease lapsed; fencing it and placing it elsewhere");
            state
                .suspects
                .insert(node.clone(), now + LAPSED_NODE_AVOIDED_FOR);
            state
                .ctx
                .facts
                .event(Event::Note {
                    message: format!(
                        "lease of attempt {attempt} ({}) on {node} lapsed; fenced and re-placed",
                        state.runs[run].id
                    ),
                })
                .await;
            if let Some(remote) = state.ctx.remote.clone() {
                let flow_id = state.ctx.flow_id.clone();
                let n = node.clone();
                tokio::spawn(async move { remote.cancel(&n, &flow_id, vec![attempt]).await });
            }
            let outcome = JobOutcome::Specialist(Err(AttemptError::LeaseExpired(node)));
            Self::on_outcome(myself, state, run, outcome).await?;
        }
        Ok(())
    }

    /// Stop the review: what runs here is killed (its model requests are dropped), peers are
    /// told to stop theirs, the cancellation is recorded, and the review ends partial with
    /// what was found, judged by grounding alone and summarised without a model.
    async fn cancel(myself: &ActorRef<ConductorMsg>, state: &mut ConductorState, reason: String) {
        if state.phase == Phase::Done || state.cancelled.is_some() {
            return;
        }
        tracing::warn!(reason = %reason, "review cancelled");
        state.cancelled = Some(reason.clone());
        state.budget_spent = Some(reason.clone());
        state.pending.clear();
        for (_, cell) in state.workers.drain() {
            cell.kill();
        }
        state.actors.clear();
        let mut by_node: HashMap<String, Vec<u64>> = HashMap::new();
        for (attempt, node) in state.placements.drain() {
            by_node.entry(node).or_default().push(attempt);
        }
        if let Some(remote) = state.ctx.remote.clone() {
            // Awaited (bounded), so the peers have been told by the time the cancel returns.
            for (node, attempts) in by_node {
                let told = remote.cancel(&node, &state.ctx.flow_id, attempts);
                if tokio::time::timeout(Duration::from_secs(2), told)
                    .await
                    .is_err()
                {
                    tracing::warn!(node = %node, "stop request not delivered in time; its attempts are fenced");
                }
            }
        }
        state.leases.clear();
        state.remote_in_flight.clear();
        state.active_specialists = 0;
        let live: Vec<usize> = state.live.drain().map(|(_, run)| run).collect();
        for run in live {
            let r = &mut state.runs[run];
            r.state = TaskState::Failed;
            r.error_classes.push("cancelled".into());
            r.last_error = Some(reason.clone());
        }
        state
            .ctx
            .facts
            .event(Event::Cancelled {
                reason: reason.clone(),
            })
            .await;
        if state.gated.is_none() {
            let judged = stages::ground_only(&state.ctx, state.reported.clone());
            state.gated = Some(dedup::merge_and_gate(
                judged,
                state.ctx.flow.parameters.confidence_gate,
            ));
        }
        Self::finish_with_fallback_summary(myself, state).await;
    }

    /// A peer is gone: its attempts are fenced (a late result is ignored) and re-queued.
    async fn node_lost(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        node: String,
    ) -> Result<(), ActorProcessingErr> {
        let lost: Vec<u64> = state
            .placements
            .iter()
            .filter(|(_, n)| **n == node)
            .map(|(a, _)| *a)
            .collect();
        if lost.is_empty() {
            return Ok(());
        }
        tracing::warn!(node = %node, attempts = lost.len(), "node lost; reassigning its attempts");
        state
            .ctx
            .facts
            .event(Event::Note {
                message: format!("node {node} lost; {} attempts reassigned", lost.len()),
            })
            .await;
        for attempt in lost {
            let outcome = JobOutcome::Specialist(Err(AttemptError::NodeLost(node.clone())));
            state.leases.remove(&attempt);
            if let Some(run) = state.live.remove(&attempt) {
                state.placements.remove(&attempt);
                if let Some(c) = state.remote_in_flight.get_mut(&node) {
                    *c = c.saturating_sub(1);
                }
                Self::on_outcome(myself, state, run, outcome).await?;
            }
        }
        Ok(())
    }

    /// Record a failed attempt; returns true when the run will be retried.
    ///
    /// Also feeds the model card's runtime layer, so a model that keeps failing a kind of task
    /// loses that task type to another model on the next choice.
    fn fail_attempt(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        run: usize,
        err: &AttemptError,
    ) -> bool {
        let max_attempts = if state.runs[run].task.is_some() {
            state.ctx.flow.parameters.task_attempts
        } else {
            // Stage runs get the same budget, at least two tries: a flaky scout should not
            // cost the whole plan.
            state.ctx.flow.parameters.task_attempts.max(2)
        };
        if state.runs[run].task.is_some() && !state.runs[run].model.is_empty() {
            let r = &state.runs[run];
            state
                .ctx
                .backends
                .record(&r.model, &r.persona, false, 0, 0, r.duration_ms);
        }
        let r = &mut state.runs[run];
        r.error_classes.push(err.class().to_string());
        r.last_error = Some(err.to_string());
        let n = r.error_classes.len();
        let repeats = state.ctx.flow.parameters.circular_fix_repeats.max(2) as usize;
        let circular = OUTPUT_CLASSES.contains(&err.class())
            && n >= repeats
            && r.error_classes[n - repeats..]
                .iter()
                .all(|c| c == &r.error_classes[n - 1]);
        tracing::warn!(task = %r.id, attempt = r.attempts, class = err.class(), error = %err, "attempt failed");
        if circular {
            r.state = TaskState::CircularFix;
            return false;
        }
        // Losing a node, a refusal from a full or draining node, or a lapsed lease is not the
        // task's fault: the attempt is handed back and does not use up the task's budget.
        if PLACEMENT_CLASSES.contains(&err.class()) && r.handed_back < MAX_HANDBACKS {
            r.error_classes.pop();
            r.handed_back += 1;
            r.state = TaskState::Backoff;
            // Nothing to back off from: the work is fine, its node is not. Re-place now.
            let _ = myself.send_message(ConductorMsg::Retry { run });
            return true;
        }
        if err.retryable() && r.attempts.saturating_sub(r.handed_back) < max_attempts {
            r.state = TaskState::Backoff;
            let exp = 250u64.saturating_mul(1 << r.attempts.min(6));
            let jitter = rand::thread_rng().gen_range(0..=exp / 2);
            let delay = Duration::from_millis((exp + jitter).min(10_000));
            myself.send_after(delay, move || ConductorMsg::Retry { run });
            return true;
        }
        r.state = TaskState::Failed;
        false
    }

    async fn on_outcome(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        run: usize,
        outcome: JobOutcome,
    ) -> Result<(), ActorProcessingErr> {
        let elapsed = state.runs[run]
            .started
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(0);
        state.runs[run].duration_ms = elapsed;
        if let Some(err) = outcome.error() {
            let err = err.clone();
            let is_specialist = state.runs[run].task.is_some();
            if is_specialist {
                state.active_specialists = state.active_specialists.saturating_sub(1);
            }
            let retrying = Self::fail_attempt(myself, state, run, &err);
            let r = &state.runs[run];
            let facts = state.ctx.facts.clone();
            facts
                .event(Event::AttemptFailed {
                    task_id: r.id.clone(),
                    attempt: r.attempts,
                    error_class: err.class().to_string(),
                    error: err.to_string(),
                })
                .await;
            facts
                .attempt(attempt_record(
                    &state.ctx,
                    r,
                    &r.model,
                    &CallStats::default(),
                    0,
                    Some(&err),
                ))
                .await;
            if !retrying {
                facts
                    .event(Event::TaskAbandoned {
                        task_id: r.id.clone(),
                        reason: match r.state {
                            TaskState::CircularFix => format!(
                                "circular_fix: {} failed the same way {} times in a row",
                                err.class(),
                                state.ctx.flow.parameters.circular_fix_repeats
                            ),
                            _ => format!("{}: {err}", err.class()),
                        },
                    })
                    .await;
            }
            let r = &state.runs[run];
            state.emit(Progress::TaskFinished {
                task: r.id.clone(),
                persona: r.persona.clone(),
                ok: false,
                findings: 0,
                error: Some(err.to_string()),
            });
            if retrying {
                return if is_specialist {
                    Self::pump(myself, state).await
                } else {
                    Ok(())
                };
            }
            return Self::after_final_failure(myself, state, run, err).await;
        }
        match outcome {
            JobOutcome::Scout(Ok((c, st))) => {
                state.runs[run].complete(&st.model, &st.stats);
                Self::record_success(state, run, &st.model, &st.stats, 1, Vec::new()).await;
                state
                    .ctx
                    .facts
                    .event(Event::ScoutCompleted {
                        classification: c.clone(),
                        fallback: false,
                    })
                    .await;
                state.usage.merge(&st.stats);
                state.classification = c;
                Self::start_phase(myself, state, Phase::Plan).await?;
            }
            JobOutcome::Plan(Ok(plan)) => {
                state.runs[run].complete(&plan.stage.model, &plan.stage.stats);
                Self::record_success(
                    state,
                    run,
                    &plan.stage.model,
                    &plan.stage.stats,
                    1,
                    Vec::new(),
                )
                .await;
                state
                    .ctx
                    .facts
                    .event(Event::PlanCompleted {
                        tasks: plan.tasks.clone(),
                        rejected: plan.rejected.clone(),
                    })
                    .await;
                state.usage.merge(&plan.stage.stats);
                state.emit(Progress::Planned {
                    tasks: plan.tasks.len(),
                    rejected: plan.rejected.len(),
                });
                state.rejected = plan.rejected;
                state.phase = Phase::Specialists;
                state.emit(Progress::Stage {
                    stage: "specialists".into(),
                });
                for t in plan.tasks {
                    let idx = state.add_run(TaskRun::specialist(t));
                    state.pending.push_back(idx);
                }
                Self::pump(myself, state).await?;
            }
            JobOutcome::Specialist(Ok(out)) => {
                state.active_specialists = state.active_specialists.saturating_sub(1);
                Self::record_success(
                    state,
                    run,
                    &out.stage.model,
                    &out.stage.stats,
                    out.iterations,
                    out.findings.clone(),
                )
                .await;
                state.ctx.backends.record(
                    &out.stage.model,
                    &state.runs[run].persona,
                    true,
                    out.stage.stats.tokens_in,
                    out.stage.stats.tokens_out,
                    elapsed,
                );
                let r = &mut state.runs[run];
                r.complete(&out.stage.model, &out.stage.stats);
                r.findings = out.findings.len();
                r.invalid_findings = out.invalid;
                let persona = r.persona.clone();
                let task_id = r.id.clone();
                state.usage.merge(&out.stage.stats);
                state.emit(Progress::TaskFinished {
                    task: task_id.clone(),
                    persona: persona.clone(),
                    ok: true,
                    findings: out.findings.len(),
                    error: None,
                });
                let reporter = Reporter {
                    persona,
                    model: out.stage.model.clone(),
                    node: state.runs[run].node.clone(),
                };
                for f in out.findings {
                    state.reported.push(Reported {
                        task_id: task_id.clone(),
                        reporter: reporter.clone(),
                        finding: f,
                    });
                }
                Self::pump(myself, state).await?;
            }
            JobOutcome::Verify(Ok(v)) => {
                state.runs[run].complete(&v.stage.model, &v.stage.stats);
                Self::record_success(state, run, &v.stage.model, &v.stage.stats, 1, Vec::new())
                    .await;
                state
                    .ctx
                    .facts
                    .event(Event::VerifyCompleted {
                        judged: v.judged.clone(),
                    })
                    .await;
                state.usage.merge(&v.stage.stats);
                state.verifier_model = Some(v.stage.model.clone());
                state.verifier_degraded = v.degraded;
                let total = v.judged.len();
                state.emit(Progress::Verified { done: total, total });
                state.gated = Some(dedup::merge_and_gate(
                    v.judged,
                    state.ctx.flow.parameters.confidence_gate,
                ));
                Self::start_phase(myself, state, Phase::Synthesize).await?;
            }
            JobOutcome::Synthesize(Ok((s, st))) => {
                state.runs[run].complete(&st.model, &st.stats);
                Self::record_success(state, run, &st.model, &st.stats, 1, Vec::new()).await;
                state.usage.merge(&st.stats);
                Self::finish_with_summary(myself, state, s).await;
            }
            // Errors were handled above.
            _ => {}
        }
        Self::check_budget(myself, state).await?;
        state.emit_usage();
        Ok(())
    }

    async fn record_success(
        state: &ConductorState,
        run: usize,
        model: &str,
        stats: &CallStats,
        iterations: u32,
        findings: Vec<quorum_core::finding::RawFinding>,
    ) {
        let r = &state.runs[run];
        let facts = &state.ctx.facts;
        facts
            .attempt(attempt_record(
                &state.ctx, r, model, stats, iterations, None,
            ))
            .await;
        facts
            .event(Event::AttemptSucceeded {
                task_id: r.id.clone(),
                attempt: r.attempts,
                findings,
            })
            .await;
    }

    /// Stop new work once the flow's token budget is spent; what is running finishes, what was
    /// found is kept, the review ends partial.
    async fn check_budget(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let max = state.ctx.flow.parameters.max_tokens;
        let used = state.usage.tokens_in + state.usage.tokens_out;
        if max > 0 && used >= max && state.budget_spent.is_none() {
            Self::spend_budget(
                myself,
                state,
                format!("token budget spent ({used} of {max} tokens)"),
            )
            .await?;
        }
        Ok(())
    }

    async fn spend_budget(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        why: String,
    ) -> Result<(), ActorProcessingErr> {
        if state.budget_spent.is_some() || state.phase == Phase::Done {
            return Ok(());
        }
        tracing::warn!(reason = %why, "flow budget spent; finishing with what was found");
        state
            .ctx
            .facts
            .event(Event::Note {
                message: why.clone(),
            })
            .await;
        state.budget_spent = Some(why.clone());
        state.pending.clear();
        // Stop what is running: its model calls are cut, its late outcomes are fenced.
        let live: Vec<(u64, usize)> = state.live.drain().collect();
        for (attempt, run) in live {
            if let Some(cell) = state.workers.remove(&attempt) {
                cell.kill();
            }
            state.placements.remove(&attempt);
            let r = &mut state.runs[run];
            r.state = TaskState::Failed;
            r.error_classes.push("budget_exhausted".into());
            r.last_error = Some(why.clone());
            state
                .ctx
                .facts
                .event(Event::TaskAbandoned {
                    task_id: r.id.clone(),
                    reason: format!("budget_exhausted: {why}"),
                })
                .await;
        }
        state.remote_in_flight.clear();
        state.leases.clear();
        state.active_specialists = 0;
        match state.phase {
            // Nothing planned yet: there is nothing to keep.
            Phase::Scout | Phase::Plan => {
                state.failure = Some(format!(
                    "{} before any task ran",
                    state.budget_spent.clone().unwrap_or_default()
                ));
                Self::finish(myself, state).await;
                Ok(())
            }
            Phase::Specialists => Self::pump(myself, state).await,
            // A cut verifier: grounding alone decides, then the deterministic summary.
            Phase::Verify => {
                let judged = stages::ground_only(&state.ctx, state.reported.clone());
                state.gated = Some(dedup::merge_and_gate(
                    judged,
                    state.ctx.flow.parameters.confidence_gate,
                ));
                Self::start_phase(myself, state, Phase::Synthesize).await
            }
            Phase::Synthesize => Self::start_phase(myself, state, Phase::Synthesize).await,
            Phase::Done => Ok(()),
        }
    }

    /// Rebuild the run from a replayed store and continue where it stopped. Completed tasks keep
    /// their recorded findings and are never re-run; the plan is never re-made; tasks that were
    /// in flight run again with their attempt numbers continuing.
    async fn resume(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        resume: Resume,
    ) -> Result<(), ActorProcessingErr> {
        let Resume { replay, attempts } = resume;
        tracing::info!(from_seq = replay.last_seq, "resuming review");
        state
            .ctx
            .facts
            .event(Event::Resumed {
                from_seq: replay.last_seq,
            })
            .await;
        // Usage so far comes from the recorded attempts, so the final report covers the whole
        // review, not only the part after the crash.
        for a in &attempts {
            state.usage.llm_calls += a.iterations.max(1) as u64;
            state.usage.tokens_in += a.tokens_in;
            state.usage.tokens_out += a.tokens_out;
        }
        let attempts_of = |id: &str| replay.attempts.get(id).copied().unwrap_or(0);
        let succeeded = |id: &str| {
            attempts
                .iter()
                .rev()
                .find(|a| a.task_id == id && a.error.is_none())
        };
        let stage_run = |name: &str, ok: bool| {
            let mut r = TaskRun::stage(name);
            r.attempts = attempts_of(name);
            r.state = if ok {
                TaskState::Completed
            } else {
                TaskState::Failed
            };
            if let Some(a) = succeeded(name) {
                r.model = a.model.clone();
                r.stats.tokens_in = a.tokens_in;
                r.stats.tokens_out = a.tokens_out;
            }
            r
        };
        if state.ctx.pack.is_empty() {
            Self::finish(myself, state).await;
            return Ok(());
        }
        let Some((classification, fallback)) = replay.classification.clone() else {
            return Self::start_phase(myself, state, Phase::Scout).await;
        };
        state.add_run(stage_run("scout", !fallback));
        state.classification = classification;
        state.classification_fallback = fallback;
        let Some((tasks, rejected)) = replay.plan.clone() else {
            return Self::start_phase(myself, state, Phase::Plan).await;
        };
        state.add_run(stage_run("planner", true));
        state.rejected = rejected;
        state.emit(Progress::Planned {
            tasks: tasks.len(),
            rejected: state.rejected.len(),
        });
        for t in tasks {
            let mut r = TaskRun::specialist(t.clone());
            r.attempts = attempts_of(&t.id);
            if let Some(findings) = replay.completed.get(&t.id) {
                r.state = TaskState::Completed;
                let (model, node) = succeeded(&t.id)
                    .map(|a| (a.model.clone(), a.node.clone()))
                    .unwrap_or_else(|| (String::new(), state.ctx.node.clone()));
                if let Some(a) = succeeded(&t.id) {
                    r.stats.tokens_in = a.tokens_in;
                    r.stats.tokens_out = a.tokens_out;
                }
                r.model = model.clone();
                r.findings = findings.len();
                let reporter = Reporter {
                    persona: t.persona.clone(),
                    model,
                    node,
                };
                for f in findings {
                    state.reported.push(Reported {
                        task_id: t.id.clone(),
                        reporter: reporter.clone(),
                        finding: f.clone(),
                    });
                }
                state.add_run(r);
            } else if let Some(reason) = replay.abandoned.get(&t.id) {
                let class = reason.split(':').next().unwrap_or("internal").to_string();
                r.state = if class == "circular_fix" {
                    TaskState::CircularFix
                } else {
                    TaskState::Failed
                };
                r.error_classes.push(class);
                r.last_error = Some(reason.clone());
                state.add_run(r);
            } else {
                let idx = state.add_run(r);
                state.pending.push_back(idx);
            }
        }
        state.phase = Phase::Specialists;
        state.emit(Progress::Stage {
            stage: "specialists".into(),
        });
        if state.pending.is_empty() {
            if let Some(judged) = replay.judged.clone() {
                state.add_run(stage_run("verifier", true));
                state.gated = Some(dedup::merge_and_gate(
                    judged,
                    state.ctx.flow.parameters.confidence_gate,
                ));
                state.verifier_model = succeeded("verifier").map(|a| a.model.clone());
                if let Some((summary, action_items, fallback)) = replay.synthesis.clone() {
                    state.add_run(stage_run("synthesizer", !fallback));
                    state.synthesis = Some(Synthesis {
                        summary,
                        action_items,
                        fallback,
                    });
                    state.phase = Phase::Synthesize;
                    Self::finish(myself, state).await;
                    return Ok(());
                }
                return Self::start_phase(myself, state, Phase::Synthesize).await;
            }
        }
        Self::pump(myself, state).await
    }

    /// A run failed for good. Scout and synthesizer degrade to deterministic fallbacks; the
    /// planner and verifier failing ends the review as failed; a specialist failing makes it partial.
    async fn after_final_failure(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        run: usize,
        err: AttemptError,
    ) -> Result<(), ActorProcessingErr> {
        match state.phase {
            Phase::Scout => {
                state.classification = stages::fallback_classification(&state.ctx);
                state.classification_fallback = true;
                state
                    .ctx
                    .facts
                    .event(Event::ScoutCompleted {
                        classification: state.classification.clone(),
                        fallback: true,
                    })
                    .await;
                Self::start_phase(myself, state, Phase::Plan).await
            }
            Phase::Plan => {
                state.failure = Some(format!("planning failed: {err}"));
                Self::finish(myself, state).await;
                Ok(())
            }
            Phase::Specialists => Self::pump(myself, state).await,
            Phase::Verify => {
                state.failure = Some(format!("verification failed: {err}"));
                Self::finish(myself, state).await;
                Ok(())
            }
            Phase::Synthesize => {
                Self::finish_with_fallback_summary(myself, state).await;
                Ok(())
            }
            Phase::Done => {
                let _ = run;
                Ok(())
            }
        }
    }

    /// Record and use the deterministic summary (synthesizer failed, or no budget left), then finish.
    async fn finish_with_fallback_summary(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) {
        let gated = state.gated.clone().unwrap_or_default();
        let s = stages::fallback_synthesis(&state.ctx, &gated);
        Self::finish_with_summary(myself, state, s).await;
    }

    /// Record the summary (model-written or fallback) as a fact, then finish.
    async fn finish_with_summary(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        s: Synthesis,
    ) {
        state
            .ctx
            .facts
            .event(Event::SynthesisCompleted {
                summary: s.summary.clone(),
                action_items: s.action_items.clone(),
                fallback: s.fallback,
            })
            .await;
        state.synthesis = Some(s);
        Self::finish(myself, state).await;
    }

    async fn finish(myself: &ActorRef<ConductorMsg>, state: &mut ConductorState) {
        if state.phase == Phase::Done {
            return;
        }
        state.phase = Phase::Done;
        let gated = state.gated.take().unwrap_or_default();
        let synthesis = state
            .synthesis
            .take()
            .unwrap_or_else(|| stages::fallback_synthesis(&state.ctx, &gated));
        let facts = RunFacts {
            runs: std::mem::take(&mut state.runs),
            classification: state.classification.clone(),
            classification_fallback: state.classification_fallback,
            rejected: std::mem::take(&mut state.rejected),
            reported: state.reported.len(),
            gated,
            synthesis,
            verifier_model: state.verifier_model.clone(),
            verifier_degraded: state.verifier_degraded,
            usage: state.usage.clone(),
            wall_ms: state.started.elapsed().as_millis() as u64,
            failure: state.failure.take(),
            budget: state.budget_spent.clone(),
            cancelled: state.cancelled.clone(),
        };
        let report = assemble(&state.ctx, facts);
        let status = format!("{:?}", report.status).to_lowercase();
        state
            .ctx
            .facts
            .event(Event::FlowFinished {
                status: status.clone(),
                reason: report.status_reason.clone(),
            })
            .await;
        state.ctx.facts.report(report.to_json()).await;
        state.emit_usage();
        state.emit(Progress::Finished {
            status: format!("{:?}", report.status).to_lowercase(),
        });
        if let Some(tx) = state.done.take() {
            let _ = tx.send(report);
        }
        myself.stop(None);
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
        Ok(ConductorState {
            ctx: args.ctx,
            done: Some(args.done),
            progress: args.progress,
            phase: Phase::Scout,
            started: Instant::now(),
            next_attempt: 0,
            live: HashMap::new(),
            actors: HashMap::new(),
            workers: HashMap::new(),
            runs: Vec::new(),
            pending: VecDeque::new(),
            active_specialists: 0,
            placements: HashMap::new(),
            remote_in_flight: HashMap::new(),
            suspects: HashMap::new(),
            leases: HashMap::new(),
            cancelled: None,
            classification: Classification::default(),
            classification_fallback: false,
            rejected: Vec::new(),
            reported: Vec::new(),
            gated: None,
            synthesis: None,
            verifier_model: None,
            verifier_degraded: false,
            usage: CallStats::default(),
            failure: None,
            resume: args.resume,
            budget_spent: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: ConductorMsg,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ConductorMsg::Start => {
                let wall = state.ctx.flow.parameters.max_wall_secs;
                if wall > 0 {
                    myself.send_after(Duration::from_secs(wall), || ConductorMsg::WallBudget);
                }
                if let Some(remote) = &state.ctx.remote {
                    let every = (remote.lease() / 4).max(Duration::from_millis(50));
                    myself.send_interval(every, || ConductorMsg::LeaseTick);
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
            ConductorMsg::NodeLost(node) => Self::node_lost(&myself, state, node).await,
            ConductorMsg::NodeJoined(node) => {
                state.suspects.remove(&node);
                state
                    .ctx
                    .facts
                    .event(Event::Note {
                        message: format!("node {node} joined"),
                    })
                    .await;
                if state.phase == Phase::Specialists {
                    Self::pump(&myself, state).await
                } else {
                    Ok(())
                }
            }
            ConductorMsg::WallBudget => {
                let secs = state.ctx.flow.parameters.max_wall_secs;
                Self::spend_budget(&myself, state, format!("wall-time budget spent ({secs}s)"))
                    .await
            }
            ConductorMsg::RemoteOutcome {
                attempt,
                node,
                outcome,
            } => {
                if state.placements.get(&attempt) != Some(&node) {
                    // Not where this attempt runs (any more): a late result of a fenced or
                    // re-placed attempt, or a peer speaking for another. Recorded, not counted.
                    tracing::info!(attempt, node = %node, "ignoring a result from a node the attempt is not placed on");
                    state
                        .ctx
                        .facts
                        .event(Event::Note {
                            message: format!(
                                "result of attempt {attempt} from {node} ignored (fenced or not placed there)"
                            ),
                        })
                        .await;
                    return Ok(());
                }
                if let Some(c) = state.remote_in_flight.get_mut(&node) {
                    *c = c.saturating_sub(1);
                }
                if outcome.error().is_some_and(|e| e.class() == "refused") {
                    // Draining or full: leave it alone for a while rather than ask again at once.
                    state
                        .suspects
                        .insert(node.clone(), Instant::now() + SUSPECT_FOR);
                } else {
                    // A node that delivers has proved itself again.
                    state.suspects.remove(&node);
                }
                Self::take_outcome(&myself, state, attempt, *outcome).await
            }
            ConductorMsg::Renew { attempt, node } => {
                if let Some(l) = state.leases.get_mut(&attempt) {
                    if l.node == node {
                        let lease = state
                            .ctx
                            .remote
                            .as_ref()
                            .map(|r| r.lease())
                            .unwrap_or(Duration::from_secs(10));
                        l.renew_by = Instant::now() + lease;
                    }
                }
                Ok(())
            }
            ConductorMsg::LeaseTick => Self::check_leases(&myself, state).await,
            ConductorMsg::Cancel { reason, reply } => {
                Self::cancel(&myself, state, reason).await;
                let _ = reply.send(());
                Ok(())
            }
            ConductorMsg::Outcome { attempt, outcome } => {
                if state.placements.contains_key(&attempt) {
                    // Remote attempts report through RemoteOutcome, which checks the sender;
                    // only placement failures detected here arrive as plain outcomes.
                    if !matches!(outcome.error().map(|e| e.class()), Some("node_lost")) {
                        return Ok(());
                    }
                }
                let remote_node = state.placements.get(&attempt).cloned();
                if let Some(node) = &remote_node {
                    if let Some(c) = state.remote_in_flight.get_mut(node) {
                        *c = c.saturating_sub(1);
                    }
                }
                Self::take_outcome(&myself, state, attempt, *outcome).await
            }
            ConductorMsg::Retry { run } => {
                if state.phase == Phase::Done {
                    return Ok(());
                }
                if state.runs[run].task.is_some() {
                    state.runs[run].state = TaskState::Pending;
                    // A retried task goes ahead of never-started ones: it was already running.
                    state.pending.push_front(run);
                    Self::pump(&myself, state).await
                } else {
                    let job = match state.phase {
                        Phase::Scout => Job::Scout,
                        Phase::Plan => Job::Plan(state.classification.clone()),
                        Phase::Verify => Job::Verify {
                            reported: state.reported.clone(),
                            grounding_only: state.budget_spent.is_some(),
                        },
                        Phase::Synthesize => Job::Synthesize {
                            gated: Box::new(state.gated.clone().unwrap_or_default()),
                            classification: state.classification.clone(),
                        },
                        _ => return Ok(()),
                    };
                    Self::dispatch(&myself, state, run, job).await
                }
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
            let Some(run) = state.live.remove(&attempt) else {
                return Ok(());
            };
            tracing::error!(attempt, error = %why, "task actor failed");
            let err = AttemptError::Internal(format!("task actor failed: {why}"));
            let outcome = match state.phase {
                Phase::Scout => JobOutcome::Scout(Err(err)),
                Phase::Plan => JobOutcome::Plan(Err(err)),
                Phase::Specialists => JobOutcome::Specialist(Err(err)),
                Phase::Verify => JobOutcome::Verify(Err(err)),
                _ => JobOutcome::Synthesize(Err(err)),
            };
            Self::on_outcome(&myself, state, run, outcome).await?;
        }
        Ok(())
    }
}
