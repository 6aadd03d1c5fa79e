//! Carrying out what the review machine starts and stops: a job runs here in a supervised
//! [`TaskWorker`] (a specialist's model chosen first by this node's backends), or is shipped to
//! the peer the machine placed it on; a stop kills the local worker or asks the peer to abort.

use crate::conductor::msg::ConductorMsg;
use crate::context::{ReviewContext, SharedContext};
use crate::error::AttemptError;
use crate::remote::{RemoteAttempt, RemoteStage};
use crate::stages;
use crate::worker::{failure_of, JobOutcome, OutcomeSink, TaskWorker, WorkerArgs};
use quorum_core::machine::schedule::{AttemptId, Place};
use quorum_core::machine::{Event, Job};
use quorum_core::models::TaskNeeds;
use quorum_core::task::Task;
use quorum_core::weaver::estimate_tokens;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use std::sync::Arc;
use std::time::Duration;

/// Delivers a local worker's outcome to its conductor.
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

/// Choose the model for a specialist task: (model, the planner's request it replaced).
pub(super) fn place_model(
    ctx: &ReviewContext,
    task: &Task,
    prior_error: Option<&str>,
) -> Result<(String, Option<String>), AttemptError> {
    let (system, user) = stages::specialist_prompt(ctx, task, prior_error)?;
    let mut needs = TaskNeeds::new(task.persona.as_str());
    needs.prompt_tokens = (estimate_tokens(&system) + estimate_tokens(&user)) as u64;
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

/// A worker started here.
pub(super) struct Spawned {
    pub cell: ActorCell,
    /// What the machine must hear before the worker's outcome (the model it runs on).
    pub told: Option<Event>,
}

/// Run `job` here: a specialist's model is placed by this node's backends first (the
/// conductor knows which model runs each attempt, so failures are attributed and learned
/// from). `Err(event)` when the attempt cannot even begin: the event to feed back.
pub(super) async fn run_here(
    myself: &ActorRef<ConductorMsg>,
    ctx: &SharedContext,
    attempt: AttemptId,
    job: Job,
    deadline: Duration,
) -> Result<Result<Spawned, Event>, ActorProcessingErr> {
    let (job, told) = match job {
        Job::Specialist {
            mut task,
            prior_error,
            insights,
        } => match place_model(ctx, &task, prior_error.as_deref()) {
            Ok((model, replaced)) => {
                task.model = Some(model.clone());
                let told = Event::ModelChosen {
                    attempt,
                    model,
                    replaced,
                };
                let job = Job::Specialist {
                    task,
                    prior_error,
                    insights,
                };
                (job, Some(told))
            }
            Err(e) => {
                return Ok(Err(Event::Outcome {
                    attempt,
                    from: Place::Local,
                    outcome: Err(failure_of(&e)),
                }))
            }
        },
        other => (other, None),
    };
    let args = WorkerArgs {
        attempt,
        deadline,
        job,
        ctx: ctx.clone(),
        sink: Arc::new(Sink(myself.clone())),
    };
    let (worker, _) = Actor::spawn_linked(None, TaskWorker, args, myself.get_cell()).await?;
    Ok(Ok(Spawned {
        cell: worker.get_cell(),
        told,
    }))
}

/// Ship `job` to `peer`. `Some(event)` when it did not get there: the event to feed back
/// (a placement failure, not the task's, unless the attempt could not even be built).
pub(super) async fn ship(
    ctx: &SharedContext,
    peer: &str,
    attempt: AttemptId,
    run_id: &str,
    number: u32,
    job: Job,
) -> Option<Event> {
    let send_failed = Some(Event::SendFailed { attempt });
    let Some(remote) = ctx.remote.clone() else {
        return send_failed;
    };
    let lease = remote.lease();
    let sensitive = ctx.backends.sensitive;
    let stage = |stage| RemoteAttempt::stage(ctx, sensitive, attempt, run_id, stage, lease);
    let req = match job {
        Job::Specialist {
            task,
            prior_error,
            insights,
        } => match RemoteAttempt::build(ctx, sensitive, attempt, &task, prior_error, lease) {
            Ok(mut req) => {
                req.insights = insights;
                req
            }
            Err(e) => {
                return Some(Event::Outcome {
                    attempt,
                    from: Place::Peer(peer.to_string()),
                    outcome: Err(failure_of(&e)),
                })
            }
        },
        Job::Verify { reported, .. } => {
            RemoteAttempt::verification(ctx, sensitive, attempt, run_id, reported, lease)
        }
        Job::Scout => stage(RemoteStage::Scout),
        Job::Plan(classification) => stage(RemoteStage::Plan {
            classification,
            catalog: ctx.catalog.clone(),
        }),
        // A conformance flow is never placed on peers (its judge batches are not placeable
        // and a node refuses it), so no gate travels here.
        Job::Synthesize {
            gated,
            classification,
            ..
        } => stage(RemoteStage::Synthesize {
            gated,
            classification,
        }),
        // Nothing to ship it with: hand it back, it runs here next.
        _ => return send_failed,
    };
    let mut req = req;
    req.number = number;
    tracing::debug!(task = %run_id, attempt, node = %peer, "dispatching attempt to a peer");
    if let Err(e) = remote.dispatch(peer, req).await {
        tracing::warn!(node = %peer, error = %e, "cannot reach peer; placing elsewhere");
        return send_failed;
    }
    None
}

/// Ask a peer to abort an attempt, waiting a bounded time, so a cancel has told the peers by
/// the time it returns.
pub(super) async fn stop_on_peer(ctx: &SharedContext, node: &str, attempt: AttemptId) {
    let Some(remote) = ctx.remote.clone() else {
        return;
    };
    let told = remote.cancel(node, &ctx.flow_id, vec![attempt]);
    if tokio::time::timeout(Duration::from_secs(2), told)
        .await
        .is_err()
    {
        tracing::warn!(node = %node, "stop request not delivered in time; the attempt is fenced anyway");
    }
}
