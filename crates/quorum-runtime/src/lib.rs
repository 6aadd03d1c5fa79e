//! quorum-runtime: the actors that run a review.
//!
//! A review is one [`conductor::FlowConductor`] actor supervising one [`worker::TaskWorker`]
//! actor per task attempt. The conductor owns every decision (order, concurrency, retries,
//! circular-fix detection, fencing, status); workers own exactly one model-facing job each and
//! reach models only through this node's [`backends::Backends`].
//!
//! Architecture invariant: no function here reads the review target from disk. Everything a
//! stage sees comes from the `ContextPack` in the shared [`context::ReviewContext`].

pub mod agent;
pub mod analyzers;
pub mod backends;
pub mod board;
pub mod conductor;
pub mod context;
pub mod error;
pub mod facts;
pub mod history;
pub mod obs;
pub mod progress;
pub mod remote;
pub mod stages;
pub mod tools;
pub mod worker;

pub use backends::{Backend, Backends};
pub use context::{ReviewContext, SharedContext};
pub use error::{AttemptError, ReviewError};
pub use facts::{FactError, FactLog, FactSink, ReplicatedFact, Resume, StorageHealth};
pub use progress::{Progress, ProgressReplay, ProgressSender};

use quorum_core::report::Report;
use ractor::Actor;

/// Run one review to its end on this node and return the report.
///
/// The conductor always produces a report — partial or failed when stages fail — so the only
/// errors here are failures to run the actor system itself.
pub async fn run_review(
    ctx: SharedContext,
    progress: Option<ProgressSender>,
) -> Result<Report, ReviewError> {
    run_review_from(ctx, progress, None).await
}

/// Run a review, continuing from a replayed store when `resume` is given: completed tasks are
/// never re-run, generated tasks are not re-planned, tasks that were in flight run again.
pub async fn run_review_from(
    ctx: SharedContext,
    progress: Option<ProgressSender>,
    resume: Option<Resume>,
) -> Result<Report, ReviewError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let args = conductor::ConductorArgs {
        ctx,
        done: tx,
        progress,
        resume,
    };
    obs::review_started(&args.ctx.flow_id, &args.ctx.node);
    // Registered by name so results from other nodes can be routed to this review.
    let name = remote::conductor_name(&args.ctx.flow_id);
    let (actor, handle) = Actor::spawn(Some(name), conductor::FlowConductor, args)
        .await
        .map_err(|e| ReviewError::Actor(e.to_string()))?;
    let report = rx
        .await
        .map_err(|_| ReviewError::Actor("the flow conductor stopped without a report".into()));
    actor.stop(None);
    let _ = handle.await;
    report
}
