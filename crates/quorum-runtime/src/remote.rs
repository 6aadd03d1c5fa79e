//! Running specialist attempts on other nodes: the wire form of an attempt and its outcome,
//! the seam the conductor dispatches through, and the worker-side execution.
//!
//! ractor_cluster has no remote spawn, so an attempt travels as data: everything the remote
//! worker needs to rebuild the task's context (the task, its persona and heuristics, the flow,
//! a manifest of the files it reads). A specialist task's or verification batch's manifest
//! lists only its own files, so an attempt costs the network (and the worker's memory) what
//! the task reads, not the whole pack; stage runs (scout, planner, synthesizer) see the whole
//! pack. File contents are fetched by content hash from the origin node and cached, so a file
//! crosses the network once per node, not once per task. The remote node uses only its own
//! backends.

use crate::backends::Backends;
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::facts::FactLog;
use crate::stages::{self, SpecialistOutput};
use quorum_core::catalog::{Catalog, Heuristic, Persona};
use quorum_core::flows::flow::Flow;
use quorum_core::pack::ContextPack;
use quorum_core::review::finding::Reported;
use quorum_core::task::Task;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The ractor registry name of a review's conductor, so a node can route a remote result to it.
pub fn conductor_name(flow_id: &str) -> String {
    format!("quorum.conductor.{flow_id}")
}

/// One pack file as the manifest lists it: path and content hash (contents fetched by hash).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestEntry {
    pub path: String,
    pub hash: String,
    /// Bytes, so a fetch can be split into bounded batches.
    pub size: u64,
}

/// An attempt shipped to another node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteAttempt {
    pub flow_id: String,
    pub attempt: u64,
    /// The node whose conductor waits for the result and holds the pack.
    pub origin: String,
    pub task: Task,
    pub prior_error: Option<String>,
    pub flow: Flow,
    /// The specialist's persona (none for a verification batch).
    #[serde(default)]
    pub persona: Option<Persona>,
    pub heuristics: Vec<Heuristic>,
    pub root: PathBuf,
    pub head_sha: Option<String>,
    /// The files this attempt reads (the task's, the batch's findings'; every file for a stage
    /// run): the worker's pack holds these and nothing else.
    pub manifest: Vec<ManifestEntry>,
    pub sensitive: bool,
    /// How long the origin waits for a result or a renewal before it fences the attempt and
    /// places it elsewhere; the worker renews well within it while it works.
    #[serde(default)]
    pub lease_ms: u64,
    /// The review's scope as this task needs it (its files' hunks, the owner's guidance).
    #[serde(default)]
    pub scope: quorum_core::scope::ReviewScope,
    /// A verification batch instead of a specialist task: judge these findings (grounding,
    /// then this node's verifier model, which never sees who reported them or how sure).
    #[serde(default)]
    pub verify: Option<Vec<Reported>>,
    /// A stage run (scout, planner, synthesizer) instead of a specialist task.
    #[serde(default)]
    pub stage: Option<RemoteStage>,
    /// The origin's trace context (W3C headers) when it exports traces, so the peer's spans
    /// join the review's trace.
    #[serde(default)]
    pub trace: Option<std::collections::BTreeMap<String, String>>,
    /// A specialist task's teammates' insights, as the conductor chose and recorded them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insights: Vec<quorum_core::memory::Offered>,
}

/// A stage shipped to another node, with what it needs beyond the pack.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RemoteStage {
    Scout,
    Plan {
        classification: quorum_core::task::Classification,
        /// The whole catalog: the planner chooses among every reviewer.
        catalog: Catalog,
    },
    Synthesize {
        gated: Box<quorum_core::review::dedup::Gated>,
        classification: quorum_core::task::Classification,
    },
}

impl RemoteAttempt {
    /// A stage run to do on another node.
    pub fn stage(
        ctx: &ReviewContext,
        attempt: u64,
        id: &str,
        stage: RemoteStage,
        lease: std::time::Duration,
    ) -> RemoteAttempt {
        let mut req = RemoteAttempt::verification(ctx, attempt, id, Vec::new(), lease);
        req.verify = None;
        req.stage = Some(stage);
        req.scope = ctx.scope.clone();
        // The scout and the planner look at the whole pack.
        req.manifest = manifest(ctx, &[]);
        req
    }

    /// A batch of grounded findings to verify on another node.
    pub fn verification(
        ctx: &ReviewContext,
        attempt: u64,
        id: &str,
        reported: Vec<Reported>,
        lease: std::time::Duration,
    ) -> RemoteAttempt {
        let mut files: Vec<String> = reported
            .iter()
            .filter_map(|r| r.finding.file.clone())
            .collect();
        files.sort();
        files.dedup();
        let task = Task {
            id: id.to_string(),
            persona: String::new(),
            files: files.clone(),
            mandate: String::new(),
            tools: Vec::new(),
            verification: String::new(),
            model: None,
            dimension: None,
            origin: None,
        };
        RemoteAttempt {
            flow_id: ctx.flow_id.clone(),
            attempt,
            origin: ctx.node.clone(),
            task,
            prior_error: None,
            flow: ctx.flow.clone(),
            persona: None,
            heuristics: Vec::new(),
            root: ctx.pack.root.clone(),
            head_sha: ctx.pack.head_sha.clone(),
            manifest: manifest(ctx, &files),
            sensitive: ctx.backends.sensitive,
            lease_ms: lease.as_millis() as u64,
            scope: Default::default(),
            verify: Some(reported),
            trace: crate::obs::trace_context(&ctx.flow_id, id),
            stage: None,
            insights: Vec::new(),
        }
    }

    pub fn build(
        ctx: &ReviewContext,
        attempt: u64,
        task: &Task,
        prior_error: Option<String>,
        lease: std::time::Duration,
    ) -> Result<RemoteAttempt, AttemptError> {
        let persona = ctx
            .catalog
            .get(&task.persona)
            .map_err(|e| AttemptError::Internal(e.to_string()))?
            .clone();
        let heuristics = ctx
            .catalog
            .heuristics_of(&persona)
            .into_iter()
            .cloned()
            .collect();
        Ok(RemoteAttempt {
            flow_id: ctx.flow_id.clone(),
            attempt,
            origin: ctx.node.clone(),
            task: task.clone(),
            prior_error,
            flow: ctx.flow.clone(),
            persona: Some(persona),
            heuristics,
            root: ctx.pack.root.clone(),
            head_sha: ctx.pack.head_sha.clone(),
            manifest: manifest(ctx, &task.files),
            sensitive: ctx.backends.sensitive,
            lease_ms: lease.as_millis() as u64,
            scope: ctx.scope.for_task(&task.files),
            verify: None,
            trace: crate::obs::trace_context(&ctx.flow_id, &task.id),
            stage: None,
            insights: Vec::new(),
        })
    }
}

/// The pack files `files` names, by path and content hash (contents are fetched by hash); every
/// pack file when `files` is empty (a stage run). A path the pack lacks is left out: the worker
/// reports it missing like a local run would.
fn manifest(ctx: &ReviewContext, files: &[String]) -> Vec<ManifestEntry> {
    let entry = |f: &quorum_core::pack::PackFile| ManifestEntry {
        path: f.path.clone(),
        hash: f.hash.clone(),
        size: f.size,
    };
    if files.is_empty() {
        return ctx.pack.files.values().map(entry).collect();
    }
    files
        .iter()
        .filter_map(|p| ctx.pack.get(p))
        .map(entry)
        .collect()
}

/// What comes back: the specialist's output, a verification batch's verdicts, or the error as
/// class + message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RemoteOutcome {
    Ok(SpecialistOutput),
    Verified(crate::worker::VerifyOutput),
    Scouted(quorum_core::task::Classification, crate::stages::StageStats),
    Planned(crate::stages::Plan),
    Synthesized(crate::stages::Synthesis, crate::stages::StageStats),
    Err { class: String, message: String },
}

impl RemoteOutcome {
    pub fn from_result(r: Result<SpecialistOutput, AttemptError>) -> Self {
        match r {
            Ok(o) => RemoteOutcome::Ok(o),
            Err(e) => RemoteOutcome::Err {
                class: e.class().to_string(),
                message: e.to_string(),
            },
        }
    }

    pub fn into_result(self) -> Result<SpecialistOutput, AttemptError> {
        match self {
            RemoteOutcome::Ok(o) => Ok(o),
            RemoteOutcome::Verified(_)
            | RemoteOutcome::Scouted(..)
            | RemoteOutcome::Planned(_)
            | RemoteOutcome::Synthesized(..) => Err(AttemptError::Internal(
                "a stage's result where a specialist's was expected".into(),
            )),
            RemoteOutcome::Err { class, message } => Err(AttemptError::Remote { class, message }),
        }
    }

    /// As the conductor takes it: a specialist's or a verification batch's outcome.
    pub fn into_job_outcome(self) -> crate::worker::JobOutcome {
        use crate::worker::JobOutcome;
        match self {
            RemoteOutcome::Verified(v) => JobOutcome::Verify(Ok(v)),
            RemoteOutcome::Scouted(c, st) => JobOutcome::Scout(Ok((c, st))),
            RemoteOutcome::Planned(p) => JobOutcome::Plan(Ok(p)),
            RemoteOutcome::Synthesized(s, st) => JobOutcome::Synthesize(Ok((s, st))),
            other => JobOutcome::Specialist(other.into_result()),
        }
    }
}

/// A node with room for more of this review's attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteSlot {
    pub node: String,
    pub capacity: usize,
    pub models: Vec<String>,
}

/// How the conductor reaches other nodes. Implemented by the node over the cluster transport;
/// absent for a single-process review.
#[async_trait::async_trait]
pub trait RemoteExecutor: Send + Sync + std::fmt::Debug + 'static {
    /// Alive peer nodes (never this node) that can run specialist attempts.
    fn peers(&self) -> Vec<RemoteSlot>;
    /// Ship an attempt; the result arrives later as a message to the conductor.
    async fn dispatch(&self, node: &str, attempt: RemoteAttempt) -> Result<(), String>;
    /// How long a shipped attempt may go without a result or a renewal before the conductor
    /// fences it and places it elsewhere.
    fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(10)
    }
    /// Ask `node` to stop these attempts of `flow_id` now (cancel, fencing). Best effort: a
    /// node that never hears it is fenced anyway.
    async fn cancel(&self, _node: &str, _flow_id: &str, _attempts: Vec<u64>) {}
}

/// The worker's renewal interval for a lease: a few renewals fit in every lease, so one lost
/// renewal frame does not lapse it.
pub fn renew_every(lease_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis((lease_ms / 4).clamp(50, 30_000))
}

/// Worker side: rebuild the task's context from the shipped attempt and the fetched file
/// contents, then run the specialist with this node's backends.
pub async fn run_attempt(
    req: RemoteAttempt,
    contents: &BTreeMap<String, Arc<str>>,
    backends: &Backends,
    board: Option<Arc<dyn crate::board::TeamBoard>>,
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
    let ctx = ReviewContext {
        flow_id: req.flow_id.clone(),
        flow: req.flow.clone(),
        catalog,
        pack,
        backends,
        verifier_model: None,
        node: node.to_string(),
        max_concurrent: None,
        started_at: String::new(),
        facts: FactLog::disabled(),
        remote: None,
        board,
        scope: req.scope.clone(),
    };
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
        let n = (reported.len() as u64).saturating_mul(crate::worker::calls_per_finding(&ctx.flow));
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

/// Hand a remote attempt's outcome, as sent by `node`, to the review's conductor in this
/// process. Returns false when no such review runs here (it finished, or this is not its
/// origin). The conductor accepts it only from the node the attempt was placed on.
pub fn deliver_result(flow_id: &str, attempt: u64, node: &str, outcome: RemoteOutcome) -> bool {
    use crate::conductor::ConductorMsg;
    let Some(conductor) = conductor_of(flow_id) else {
        return false;
    };
    conductor
        .send_message(ConductorMsg::RemoteOutcome {
            attempt,
            node: node.to_string(),
            outcome: Box::new(outcome.into_job_outcome()),
        })
        .is_ok()
}

/// A worker on `node` is still working on `attempt`: extend its lease.
pub fn deliver_renewal(flow_id: &str, attempt: u64, node: &str) -> bool {
    use crate::conductor::ConductorMsg;
    let Some(conductor) = conductor_of(flow_id) else {
        return false;
    };
    conductor
        .send_message(ConductorMsg::Renew {
            attempt,
            node: node.to_string(),
        })
        .is_ok()
}

/// Cancel the review `flow_id` conducted in this process: every live attempt stops, no model
/// call starts after this returns, and the review ends partial saying why. Returns false when
/// no such review runs here.
pub async fn cancel_review(flow_id: &str, reason: &str) -> bool {
    use crate::conductor::ConductorMsg;
    let Some(conductor) = conductor_of(flow_id) else {
        return false;
    };
    let reason = reason.to_string();
    ractor::call_t!(
        conductor,
        |reply| ConductorMsg::Cancel { reason, reply },
        10_000
    )
    .is_ok()
}

fn conductor_of(flow_id: &str) -> Option<ractor::ActorRef<crate::conductor::ConductorMsg>> {
    ractor::registry::where_is(conductor_name(flow_id)).map(Into::into)
}

/// Tell every conductor in this process that a peer is gone.
pub fn notify_node_lost(node: &str) -> usize {
    notify_all(|| crate::conductor::ConductorMsg::NodeLost(node.to_string()))
}

/// Tell every conductor in this process that a peer joined, so queued work can go to it now.
pub fn notify_node_joined(node: &str) -> usize {
    notify_all(|| crate::conductor::ConductorMsg::NodeJoined(node.to_string()))
}

fn notify_all(msg: impl Fn() -> crate::conductor::ConductorMsg) -> usize {
    use crate::conductor::ConductorMsg;
    let prefix = conductor_name("");
    let mut n = 0;
    for name in ractor::registry::registered() {
        if !name.starts_with(&prefix) {
            continue;
        }
        if let Some(cell) = ractor::registry::where_is(name) {
            let conductor: ractor::ActorRef<ConductorMsg> = cell.into();
            if conductor.send_message(msg()).is_ok() {
                n += 1;
            }
        }
    }
    n
}
