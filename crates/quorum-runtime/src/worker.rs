//! TaskWorker: the actor that runs one task attempt, reports its outcome and stops.
//!
//! One actor per attempt keeps failure isolated: a panic inside a stage is caught by ractor and
//! arrives at the supervising conductor as `ActorFailed`, which retries it like any other error.
//! The attempt id travels with the outcome so the conductor can ignore a result from an attempt
//! it has already given up on (fencing).

use crate::agent::CallStats;
use crate::context::SharedContext;
use crate::error::AttemptError;
use crate::stages::{self, Plan, SpecialistOutput, StageStats};
use quorum_core::machine::grounded::{ground_one, unverified, Grounded};
use quorum_core::machine::{AttemptOutcome, Failure, ModelUse, Outcome, Synthesis};
use quorum_core::review::finding::{RawFinding, Reported, Verdict};
use quorum_core::review::judged::Judged;
use quorum_core::review::vote::Vote;
use quorum_core::task::Classification;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

pub use quorum_core::machine::Job;

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
    Criteria(
        Result<
            (
                Vec<quorum_core::judging::conformance::Criterion>,
                StageStats,
            ),
            AttemptError,
        >,
    ),
    Conformance(Result<stages::ConformanceOutput, AttemptError>),
    Adjudicate(Result<stages::AdjudicationOutput, AttemptError>),
    Judge(Result<stages::JudgeOutput, AttemptError>),
    MetaJudge(Result<stages::MetaOutput, AttemptError>),
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
            | JobOutcome::Conformance(Err(e))
            | JobOutcome::Adjudicate(Err(e))
            | JobOutcome::Judge(Err(e))
            | JobOutcome::MetaJudge(Err(e)) => Some(e),
            _ => None,
        }
    }
}

impl JobOutcome {
    /// The outcome as the review machine takes it: the stage's answer, which model gave it and
    /// what it cost, or the failure's class, words and whether to retry.
    pub fn into_outcome(self) -> AttemptOutcome {
        let by = |st: StageStats| ModelUse {
            model: st.model,
            stats: st.stats.to_attempt_stats(),
        };
        match self {
            JobOutcome::Scout(Ok((classification, st))) => Ok(Outcome::Scout {
                classification,
                by: by(st),
            }),
            JobOutcome::Plan(Ok(p)) => Ok(Outcome::Plan {
                tasks: p.tasks,
                rejected: p.rejected,
                selection: p.selection,
                by: by(p.stage),
            }),
            JobOutcome::Specialist(Ok(o)) => Ok(Outcome::Specialist {
                findings: o.findings,
                invalid: o.invalid,
                iterations: o.iterations,
                by: by(o.stage),
            }),
            JobOutcome::Verify(Ok(v)) => Ok(Outcome::Verify {
                judged: v.judged,
                degraded: v.degraded,
                by: by(v.stage),
            }),
            JobOutcome::Synthesize(Ok((synthesis, st))) => Ok(Outcome::Synthesize {
                synthesis,
                by: by(st),
            }),
            JobOutcome::Criteria(Ok((criteria, st))) => Ok(Outcome::Criteria {
                criteria,
                by: by(st),
            }),
            JobOutcome::Conformance(Ok(o)) => Ok(Outcome::Conformance {
                judgments: o.judgments,
                by: by(o.stage),
            }),
            JobOutcome::Adjudicate(Ok(o)) => Ok(Outcome::Adjudicate {
                rulings: o.rulings,
                by: by(o.stage),
            }),
            JobOutcome::Judge(Ok(o)) => Ok(Outcome::Judge {
                score: o.score,
                by: by(o.stage),
            }),
            JobOutcome::MetaJudge(Ok(o)) => Ok(Outcome::MetaJudge {
                decision: o.decision,
                by: by(o.stage),
            }),
            JobOutcome::Scout(Err(e))
            | JobOutcome::Plan(Err(e))
            | JobOutcome::Specialist(Err(e))
            | JobOutcome::Verify(Err(e))
            | JobOutcome::Synthesize(Err(e))
            | JobOutcome::Criteria(Err(e))
            | JobOutcome::Conformance(Err(e))
            | JobOutcome::Adjudicate(Err(e))
            | JobOutcome::Judge(Err(e))
            | JobOutcome::MetaJudge(Err(e)) => Err(failure_of(&e)),
        }
    }
}

/// An attempt error as the review machine weighs it: its class, its words, whether to retry.
pub fn failure_of(e: &AttemptError) -> Failure {
    Failure {
        class: e.class().to_string(),
        message: e.to_string(),
        retryable: e.retryable(),
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
        Job::Adjudicate { .. } => JobOutcome::Adjudicate(Err(e)),
        Job::Judge { .. } => JobOutcome::Judge(Err(e)),
        Job::MetaJudge { .. } => JobOutcome::MetaJudge(Err(e)),
    }
}

async fn run(ctx: &SharedContext, job: Job) -> JobOutcome {
    match job {
        Job::Scout => JobOutcome::Scout(stages::scout(ctx).await),
        Job::Plan(c) => JobOutcome::Plan(stages::plan(ctx, &c).await),
        Job::Specialist {
            task,
            prior_error,
            insights,
        } => JobOutcome::Specialist(
            stages::specialist(ctx, &task, prior_error.as_deref(), &insights).await,
        ),
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
        Job::Adjudicate { findings } => {
            JobOutcome::Adjudicate(stages::adjudication::adjudicate(ctx, &findings).await)
        }
        Job::Judge { judge, findings } => {
            JobOutcome::Judge(stages::panel::judge(ctx, &judge, &findings).await)
        }
        Job::MetaJudge {
            meta,
            axes,
            overall,
        } => JobOutcome::MetaJudge(stages::panel::meta_judge(ctx, &meta, &axes, overall).await),
    }
}

/// A finding waiting for its votes.
struct Pending {
    reported: Reported,
    /// What grounding noted.
    notes: Vec<String>,
    /// One slot per verifier.
    votes: Vec<Option<Vote>>,
    /// The claim as the verifiers (and the consultant) see it, and its cited lines.
    claim: Arc<(RawFinding, String)>,
}

/// Verify every reported finding with bounded concurrency. Grounding runs for all of them; at
/// most `max_verifications` grounded findings (findings, not calls) get model calls, the rest
/// keep grounding's word. Each checked finding is asked of the flow's `verifiers` verifiers,
/// one call each, all in this attempt, so a batch shipped to a peer votes there the same way.
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
    let voters = ctx.flow.parameters.verifiers.max(1);
    let (verifiers, degraded) =
        match ctx
            .backends
            .select_verifiers(ctx.verifier_model.as_deref(), &finder_models, voters)
        {
            Ok(v) => v,
            Err(e) => return Err(AttemptError::Config(e.to_string())),
        };
    let model = verifiers
        .first()
        .map(|v| v.model.clone())
        .unwrap_or_default();
    let verifiers = Arc::new(verifiers);
    let permits = Arc::new(Semaphore::new(ctx.max_concurrent()));
    let budget = if grounding_only {
        0
    } else {
        ctx.flow.parameters.max_verifications
    };
    let mut set = tokio::task::JoinSet::new();
    let mut out: Vec<(usize, Judged)> = Vec::new();
    let mut pending: BTreeMap<usize, Pending> = BTreeMap::new();
    // The budget counts grounded findings: those grounding already decided cost no model call
    // and take nothing from it.
    let mut grounded = 0usize;
    for (i, r) in reported.into_iter().enumerate() {
        let (reported, excerpt, notes) = match ground_one(&ctx.pack, &ctx.catalog, r) {
            Grounded::Decided(j) => {
                out.push((i, j));
                continue;
            }
            Grounded::Ready {
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
            out.push((i, unverified(reported, notes, why)));
            continue;
        }
        let claim: Arc<(RawFinding, String)> = Arc::new((reported.finding.clone(), excerpt));
        for k in 0..voters {
            let ctx = ctx.clone();
            let permits = permits.clone();
            let verifiers = verifiers.clone();
            let claim = claim.clone();
            set.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let mut stats = CallStats::default();
                let vote = stages::ask_verifier(
                    &ctx,
                    &claim.0,
                    &claim.1,
                    &verifiers[k % verifiers.len()],
                    k,
                    &mut stats,
                )
                .await;
                (i, k, vote, stats)
            });
        }
        pending.insert(
            i,
            Pending {
                reported,
                notes,
                votes: vec![None; voters],
                claim,
            },
        );
    }
    let mut total = CallStats::default();
    while let Some(res) = set.join_next().await {
        match res {
            Ok((i, k, vote, s)) => {
                total.merge(&s);
                if let Some(slot) = pending.get_mut(&i).and_then(|p| p.votes.get_mut(k)) {
                    *slot = Some(vote);
                }
            }
            Err(e) => tracing::error!(error = %e, "verification task panicked"),
        }
    }
    // The optional confidence consultant re-scores what the verifiers kept, blind to the
    // finder's scores, in this same attempt (so also on the peer that runs the batch).
    let consultant = ctx
        .flow
        .optional_stage(quorum_core::flows::flow::Role::Consultant)
        .is_some();
    let mut consults = tokio::task::JoinSet::new();
    let mut unconsulted: BTreeMap<usize, Judged> = BTreeMap::new();
    for (i, p) in pending {
        let Pending {
            reported,
            notes,
            votes,
            claim,
        } = p;
        let votes = votes
            .into_iter()
            .enumerate()
            .map(|(k, v)| {
                v.unwrap_or_else(|| Vote {
                    verifier: format!("v{}", k + 1),
                    model: verifiers[k % verifiers.len()].model.clone(),
                    verdict: None,
                    reason: "the verifier task failed".into(),
                    prompt_digest: String::new(),
                })
            })
            .collect();
        let judged = stages::judge_by_votes(ctx, reported, notes, votes);
        let kept = matches!(
            judged.verdict,
            Verdict::Confirmed | Verdict::Plausible | Verdict::Unverifiable
        );
        if !(consultant && kept) {
            out.push((i, judged));
            continue;
        }
        // Kept until its consult returns, so even a panicking consult cannot drop the finding.
        unconsulted.insert(i, judged.clone());
        let ctx = ctx.clone();
        let permits = permits.clone();
        consults.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let mut stats = CallStats::default();
            let mut judged = judged;
            let answer = stages::consult(&ctx, &claim.0, &claim.1, &mut stats).await;
            stages::apply_rescore(&mut judged, answer);
            (i, judged, stats)
        });
    }
    while let Some(res) = consults.join_next().await {
        match res {
            Ok((i, j, s)) => {
                total.merge(&s);
                unconsulted.remove(&i);
                out.push((i, j));
            }
            Err(e) => tracing::error!(error = %e, "consultant task panicked"),
        }
    }
    for (i, mut j) in unconsulted {
        stages::apply_rescore(&mut j, Err("the consultant task failed".into()));
        out.push((i, j));
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
