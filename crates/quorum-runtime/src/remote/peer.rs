//! The peer side of a remote attempt: rebuild the task's context from the shipped attempt and
//! the fetched file contents, then run it with this node's own backends.

use crate::backends::Backends;
use crate::board::TeamBoard;
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::remote::attempt::{RemoteAttempt, RemoteStage};
use crate::remote::outcome::RemoteOutcome;
use crate::stages;
use quorum_core::catalog::Catalog;
use quorum_core::machine::limits::calls_per_finding;
use quorum_core::machine::Review;
use quorum_core::pack::ContextPack;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Worker side: rebuild the task's context from the shipped attempt and the fetched file
/// contents, then run the specialist with this node's backends.
pub async fn run_attempt(
    req: RemoteAttempt,
    contents: &BTreeMap<String, Arc<str>>,
    backends: &Backends,
    board: Option<Arc<dyn TeamBoard>>,
    node: &str,
) -> RemoteOutcome {
    // The flow arrived as data from a peer: it obeys the same rules as a flow file.
    if let Err(e) = req.flow.validate() {
        return RemoteOutcome::Err {
            class: "config".into(),
            message: format!("the flow sent by {} is invalid: {e}", req.origin),
        };
    }
    let mut files = Vec::with_capacity(req.manifest.len());
    for m in &req.manifest {
        match contents.get(&m.hash) {
            Some(c) => files.push((m.path.clone(), c.to_string())),
            None => {
                return RemoteOutcome::Err {
                    class: "transport".into(),
                    message: format!(
                        "content of {} ({}) was not fetched from {}",
                        m.path, m.hash, req.origin
                    ),
                }
            }
        }
    }
    let pack = ContextPack::from_files(req.root.clone(), req.head_sha.clone(), files);
    let mut catalog = Catalog::default();
    for h in &req.heuristics {
        catalog.heuristics.insert(h.name.clone(), h.clone());
    }
    if let Some(p) = &req.persona {
        catalog.personas.insert(p.name.clone(), p.clone());
    }
    if let Some(RemoteStage::Plan {
        catalog: shipped, ..
    }) = &req.stage
    {
        catalog = shipped.clone();
    }
    // The request's `sensitive` can only tighten this node's policy, never relax it.
    let backends = backends.for_peer(req.sensitive);
    let review = Review {
        flow_id: req.flow_id.clone(),
        flow: req.flow.clone(),
        catalog,
        pack,
        verifier_model: None,
        node: node.to_string(),
        max_concurrent: None,
        started_at: String::new(),
        scope: req.scope.clone(),
    };
    let ctx = ReviewContext::new(review, backends).with_board(board);
    if let Some(stage) = req.stage.clone() {
        let ctx = Arc::new(ctx);
        let p = &ctx.flow.parameters;
        let deadline = std::time::Duration::from_secs(
            p.call_timeout_secs
                .max(1)
                .saturating_mul(2 * (p.planner_retries as u64 + 1)),
        );
        let err = |e: AttemptError| RemoteOutcome::Err {
            class: e.class().to_string(),
            message: e.to_string(),
        };
        let run = async {
            match stage {
                RemoteStage::Scout => match stages::scout(&ctx).await {
                    Ok((c, st)) => RemoteOutcome::Scouted(c, st),
                    Err(e) => err(e),
                },
                RemoteStage::Plan { classification, .. } => {
                    match stages::plan(&ctx, &classification).await {
                        Ok(p) => RemoteOutcome::Planned(p),
                        Err(e) => err(e),
                    }
                }
                RemoteStage::Synthesize {
                    gated,
                    classification,
                } => match stages::synthesize(&ctx, &gated, &classification, None).await {
                    Ok((s, st)) => RemoteOutcome::Synthesized(s, st),
                    Err(e) => err(e),
                },
            }
        };
        return match tokio::time::timeout(deadline, run).await {
            Ok(o) => o,
            Err(_) => err(AttemptError::Deadline(deadline.as_secs())),
        };
    }
    if let Some(reported) = req.verify.clone() {
        let ctx = Arc::new(ctx);
        let p = &ctx.flow.parameters;
        // Every finding is asked of every verifier, and of the consultant when there is one.
        let n = (reported.len() as u64).saturating_mul(calls_per_finding(&ctx.flow));
        let deadline = std::time::Duration::from_secs(
            p.call_timeout_secs
                .max(1)
                .saturating_mul(n / ctx.max_concurrent() as u64 + 2)
                .saturating_mul(2),
        );
        return match tokio::time::timeout(
            deadline,
            crate::worker::verify_all(&ctx, reported, false),
        )
        .await
        {
            Ok(Ok(v)) => RemoteOutcome::Verified(v),
            Ok(Err(e)) => RemoteOutcome::from_result(Err(e)),
            Err(_) => RemoteOutcome::from_result(Err(AttemptError::Deadline(deadline.as_secs()))),
        };
    }
    // The remote node chooses among its own models; the origin's placement does not apply.
    let mut task = req.task.clone();
    if !ctx.backends.is_auto() {
        task.model = None;
    }
    let deadline = std::time::Duration::from_secs(
        ctx.flow
            .parameters
            .call_timeout_secs
            .max(1)
            .saturating_mul(u64::from(ctx.flow.parameters.max_iterations).saturating_add(2)),
    );
    let span = crate::obs::remote_attempt_span(req.trace.as_ref(), &req.flow_id, &task.id, node);
    let run = tracing::Instrument::instrument(
        stages::specialist(&ctx, &task, req.prior_error.as_deref(), &req.insights),
        span,
    );
    match tokio::time::timeout(deadline, run).await {
        Ok(r) => RemoteOutcome::from_result(r),
        Err(_) => RemoteOutcome::from_result(Err(AttemptError::Deadline(deadline.as_secs()))),
    }
}
