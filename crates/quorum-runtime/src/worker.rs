//! TaskWorker: the actor that runs one task attempt, reports its outcome and stops.
//!
//! One actor per attempt keeps failure isolated: a panic inside a stage is caught by ractor and
//! arrives at the supervising conductor as `ActorFailed`, which retries it like any other error.
//! The attempt id travels with the outcome so the conductor can ignore a result from an attempt
//! it has already given up on (fencing).

use crate::agent::CallStats;
use crate::context::SharedContext;
use crate::error::AttemptError;
use crate::stages::{self, Plan, SpecialistOutput, StageStats, Synthesis};
use quorum_core::dedup::Gated;
use quorum_core::finding::{Judged, Reported};
use quorum_core::task::{Classification, Task};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// What an attempt is asked to do.
#[derive(Debug, Clone)]
pub enum Job {
    Scout,
    Plan(Classification),
    Specialist {
        task: Task,
        prior_error: Option<String>,
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
        conformance: Option<Box<quorum_core::conformance::MergeReadiness>>,
    },
    /// Read a spec's acceptance criteria with a model (its form gave none).
    Criteria,
    /// Judge a batch of criteria against the target.
    Conformance {
        criteria: Vec<quorum_core::conformance::Criterion>,
    },
}

/// The verifier stage's result: every finding judged, never an error (a failed model call
/// leaves that finding UNVERIFIABLE with the reason).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct VerifyOutput {
    pub judged: Vec<Judged>,
    pub stage: StageStats,
    /// The verifier shares a model family with a finder: independence is degraded.
    pub degraded: bool,
}

/// What an attempt produced.
#[derive(Debug)]
pub enum JobOutcome {
    Scout(Result<(Classification, StageStats), AttemptError>),
    Plan(Result<Plan, AttemptError>),
    Specialist(Result<SpecialistOutput, AttemptError>),
    Verify(Result<VerifyOutput, AttemptError>),
    Synthesize(Result<(Synthesis, StageStats), AttemptError>),
    Criteria(Result<(Vec<quorum_core::conformance::Criterion>, StageStats), AttemptError>),
    Conformance(Result<stages::ConformanceOutput, AttemptError>),
}

impl JobOutcome {
    pub fn error(&self) -> Option<&AttemptError> {
        match self {
            JobOutcome::Scout(Err(e))
            | JobOutcome::Plan(Err(e))
            | JobOutcome::Specialist(Err(e))
            | JobOutcome::Verify(Err(e))
            | JobOutcome::Synthesize(Err(e))
            | JobOutcome::Criteria(Err(e))
            | JobOutcome::Conformance(Err(e)) => Some(e),
            _ => None,
        }
    }
}

/// Messages the conductor accepts from workers (see `conductor`).
pub trait OutcomeSink: Send + Sync + 'static {
    fn deliver(&self, attempt: u64, outcome: JobOutcome);
}

pub struct TaskWorker;

pub struct WorkerArgs {
    pub attempt: u64,
    pub job: Job,
    pub ctx: SharedContext,
    pub sink: Arc<dyn OutcomeSink>,
    pub deadline: Duration,
}

pub enum WorkerMsg {
    Run,
}

impl ractor::Message for WorkerMsg {}

pub struct WorkerState {
    args: Option<WorkerArgs>,
}

#[ractor::async_trait]
impl Actor for TaskWorker {
    type Msg = WorkerMsg;
    type State = WorkerState;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: WorkerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_message(WorkerMsg::Run)?;
        Ok(WorkerState { args: Some(args) })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        _msg: WorkerMsg,
        state: &mut WorkerState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(args) = state.args.take() else {
            return Ok(());
        };
        let secs = args.deadline.as_secs();
        let outcome =
            match tokio::time::timeout(args.deadline, run(&args.ctx, args.job.clone())).await {
                Ok(o) => o,
                Err(_) => deadline_outcome(&args.job, secs),
            };
        args.sink.deliver(args.attempt, outcome);
        myself.stop(None);
        Ok(())
    }
}

fn deadline_outcome(job: &Job, secs: u64) -> JobOutcome {
    let e = AttemptError::Deadline(secs);
    match job {
        Job::Scout => JobOutcome::Scout(Err(e)),
        Job::Plan(_) => JobOutcome::Plan(Err(e)),
        Job::Specialist { .. } => JobOutcome::Specialist(Err(e)),
        Job::Verify { .. } => JobOutcome::Verify(Err(e)),
        Job::Synthesize { .. } => JobOutcome::Synthesize(Err(e)),
        Job::Criteria => JobOutcome::Criteria(Err(e)),
        Job::Conformance { .. } => JobOutcome::Conformance(Err(e)),
    }
}

async fn run(ctx: &SharedContext, job: Job) -> JobOutcome {
    match job {
        Job::Scout => JobOutcome::Scout(stages::scout(ctx).await),
        Job::Plan(c) => JobOutcome::Plan(stages::plan(ctx, &c).await),
        Job::Specialist { task, prior_error } => {
            JobOutcome::Specialist(stages::specialist(ctx, &task, prior_error.as_deref()).await)
        }
        Job::Verify {
            reported,
            grounding_only,
        } => JobOutcome::Verify(verify_all(ctx, reported, grounding_only).await),
        Job::Synthesize {
            gated,
            classification,
            conformance,
        } => JobOutcome::Synthesize(
            stages::synthesize(ctx, &gated, &classification, conformance.as_deref()).await,
        ),
        Job::Criteria => JobOutcome::Criteria(stages::conformance::extract_criteria(ctx).await),
        Job::Conformance { criteria } => {
            JobOutcome::Conformance(stages::conformance::judge_criteria(ctx, &criteria).await)
        }
    }
}

/// Verify every reported finding with bounded concurrency. Grounding runs for all of them; at
/// most `max_verifications` grounded findings get a model call, the rest keep grounding's word.
pub(crate) async fn verify_all(
    ctx: &SharedContext,
    reported: Vec<Reported>,
    grounding_only: bool,
) -> Result<VerifyOutput, AttemptError> {
    let finder_models: Vec<String> = {
        // An analyzer's candidate has no model: it says nothing about families.
        let mut m: Vec<String> = reported
            .iter()
            .map(|r| r.reporter.model.clone())
            .filter(|m| !m.is_empty())
            .collect();
        m.sort();
        m.dedup();
        m
    };
    let (verifier, degraded) = match ctx
        .backends
        .select_verifier(ctx.verifier_model.as_deref(), &finder_models)
    {
        Ok(v) => v,
        Err(e) => return Err(AttemptError::Config(e.to_string())),
    };
    let model = verifier.model.clone();
    let verifier = Arc::new(verifier);
    let permits = Arc::new(Semaphore::new(ctx.max_concurrent()));
    let budget = if grounding_only {
        0
    } else {
        ctx.flow.parameters.max_verifications
    };
    let mut set = tokio::task::JoinSet::new();
    let mut out: Vec<(usize, Judged)> = Vec::new();
    // The budget counts grounded findings: those grounding already decided cost no model call
    // and take nothing from it.
    let mut grounded = 0usize;
    for (i, r) in reported.into_iter().enumerate() {
        let (reported, excerpt, notes) = match stages::ground_one(ctx, r) {
            stages::Grounded::Decided(j) => {
                out.push((i, j));
                continue;
            }
            stages::Grounded::Ready {
                reported,
                excerpt,
                notes,
            } => (reported, excerpt, notes),
        };
        grounded += 1;
        if grounded > budget {
            let why = if grounding_only {
                "grounded; not model-checked: the flow budget was spent".to_string()
            } else {
                format!("grounded; not model-checked: over the flow's max_verifications ({budget})")
            };
            out.push((i, stages::unverified(reported, notes, why)));
            continue;
        }
        let ctx = ctx.clone();
        let permits = permits.clone();
        let verifier = verifier.clone();
        set.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let mut stats = CallStats::default();
            let judged =
                stages::verify_grounded(&ctx, reported, &excerpt, notes, &verifier, &mut stats)
                    .await;
            (i, judged, stats)
        });
    }
    let mut total = CallStats::default();
    while let Some(res) = set.join_next().await {
        match res {
            Ok((i, j, s)) => {
                total.merge(&s);
                out.push((i, j));
            }
            Err(e) => tracing::error!(error = %e, "verification task panicked"),
        }
    }
    // Deterministic order regardless of completion order.
    out.sort_by_key(|(i, _)| *i);
    Ok(VerifyOutput {
        judged: out.into_iter().map(|(_, j)| j).collect(),
        stage: StageStats {
            model,
            stats: total,
        },
        degraded,
    })
}
