//! The wire form of an attempt shipped to another node, and the seam the conductor ships it
//! through ([`RemoteExecutor`]): the low floor the conductor, the context and the peer side all
//! stand on, knowing nothing of how a stage runs.
//!
//! ractor_cluster has no remote spawn, so an attempt travels as data: everything the remote
//! worker needs to rebuild the task's context (the task, its persona and heuristics, the flow,
//! a manifest of the files it reads). A specialist task's or verification batch's manifest
//! lists only its own files, so an attempt costs the network (and the worker's memory) what
//! the task reads, not the whole pack; stage runs (scout, planner, synthesizer) see the whole
//! pack. File contents are fetched by content hash from the origin node and cached, so a file
//! crosses the network once per node, not once per task. The remote node uses only its own
//! backends.

use crate::error::AttemptError;
use quorum_core::catalog::{Catalog, Heuristic, Persona};
use quorum_core::flows::flow::Flow;
use quorum_core::machine::Review;
use quorum_core::review::finding::Reported;
use quorum_core::task::Task;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// The task's attempt number (its `AttemptStarted` fact): with the task id and the node, what
    /// a conductor that takes the review over matches a worker's claim against.
    #[serde(default)]
    pub number: u32,
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
        ctx: &Review,
        sensitive: bool,
        attempt: u64,
        id: &str,
        stage: RemoteStage,
        lease: std::time::Duration,
    ) -> RemoteAttempt {
        let mut req = RemoteAttempt::verification(ctx, sensitive, attempt, id, Vec::new(), lease);
        req.verify = None;
        req.stage = Some(stage);
        req.scope = ctx.scope.clone();
        // The scout and the planner look at the whole pack.
        req.manifest = manifest(ctx, &[]);
        req
    }

    /// A batch of grounded findings to verify on another node.
    pub fn verification(
        ctx: &Review,
        sensitive: bool,
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
            probe: None,
            pass: None,
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
            sensitive,
            lease_ms: lease.as_millis() as u64,
            scope: Default::default(),
            verify: Some(reported),
            trace: crate::obs::trace_context(&ctx.flow_id, id),
            stage: None,
            insights: Vec::new(),
            number: 0,
        }
    }

    pub fn build(
        ctx: &Review,
        sensitive: bool,
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
            sensitive,
            lease_ms: lease.as_millis() as u64,
            scope: ctx.scope.for_task(&task.files),
            verify: None,
            trace: crate::obs::trace_context(&ctx.flow_id, &task.id),
            stage: None,
            insights: Vec::new(),
            number: 0,
        })
    }
}

/// The pack files `files` names, by path and content hash (contents are fetched by hash); every
/// pack file when `files` is empty (a stage run). A path the pack lacks is left out: the worker
/// reports it missing like a local run would.
fn manifest(ctx: &Review, files: &[String]) -> Vec<ManifestEntry> {
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
    /// Ask every live peer which attempts of `flow_id` it still runs (or holds an unsent result
    /// of), and to send their renewals and results to this node from now on: what a conductor
    /// that resumes or takes the review over may adopt. Bounded in time; a peer that does not
    /// answer claims nothing, and its attempts are placed again.
    async fn claim(&self, _flow_id: &str) -> Vec<quorum_core::machine::AttemptClaim> {
        Vec::new()
    }
}

/// The worker's renewal interval for a lease: a few renewals fit in every lease, so one lost
/// renewal frame does not lapse it.
pub fn renew_every(lease_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis((lease_ms / 4).clamp(50, 30_000))
}
