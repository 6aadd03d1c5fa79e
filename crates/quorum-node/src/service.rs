//! The `ReviewApi` implementation: submitted packs become reviews run on this node.

use quorum_api::{pb, ApiError, EventStream, ReviewApi, FINISHED_KIND};
use quorum_core::catalog::Catalog;
use quorum_core::flow::Flow;
use quorum_core::pack::{is_secret_file_name, ContextPack};
use quorum_core::report::Report;
use quorum_runtime::{Backends, FactLog, Progress, ReviewContext};
use quorum_store::{DataDir, FlowMeta};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// What the node runs reviews with.
#[derive(Debug, Clone)]
pub struct NodeSetup {
    pub name: String,
    pub data: DataDir,
    /// Probed backends; each review gets a copy with its own model pin and sensitivity.
    pub backends: Backends,
    pub personas_dir: PathBuf,
    pub flows_dir: PathBuf,
    pub default_flow: String,
    pub max_concurrent: Option<usize>,
    /// Address peers and clients see, for ClusterStatus.
    pub advertised_addr: String,
    /// The team blackboard reviews on this node share (replicated when clustered).
    pub board: Arc<dyn quorum_runtime::board::TeamBoard>,
    /// Peers that can run specialist attempts (None = this node alone).
    pub remote: Option<Arc<dyn quorum_runtime::remote::RemoteExecutor>>,
    /// Packs of reviews conducted here, served to peers by content hash.
    pub packs: Arc<crate::cluster::PackRegistry>,
}

/// One review this node runs or ran.
struct FlowState {
    events: Vec<pb::ReviewEvent>,
    live: broadcast::Sender<pb::ReviewEvent>,
    report: Option<Report>,
    abort: Option<tokio::task::AbortHandle>,
    flow: String,
    target: String,
    started_at: String,
}

impl FlowState {
    fn push(&mut self, kind: &str, json: String) {
        let ev = pb::ReviewEvent {
            seq: self.events.len() as u64 + 1,
            kind: kind.to_string(),
            json,
        };
        self.events.push(ev.clone());
        let _ = self.live.send(ev);
    }
}

/// Supplies the cluster's view of its members for ClusterStatus.
pub type MembersFn = Box<dyn Fn() -> Vec<pb::NodeStatus> + Send + Sync>;

pub struct NodeService {
    members: std::sync::OnceLock<MembersFn>,
    setup: Arc<NodeSetup>,
    board: Arc<dyn quorum_runtime::board::TeamBoard>,
    flows: Arc<Mutex<HashMap<String, FlowState>>>,
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(e.to_string())
}

fn progress_kind(p: &Progress) -> &'static str {
    match p {
        Progress::Stage { .. } => "stage",
        Progress::Planned { .. } => "planned",
        Progress::TaskStarted { .. } => "task_started",
        Progress::TaskFinished { .. } => "task_finished",
        Progress::Verified { .. } => "verified",
        Progress::Usage { .. } => "usage",
        Progress::Finished { .. } => "progress_finished",
    }
}

impl NodeService {
    pub fn new(setup: NodeSetup) -> Self {
        NodeService {
            members: std::sync::OnceLock::new(),
            board: setup.board.clone(),
            setup: Arc::new(setup),
            flows: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Report cluster membership in ClusterStatus (set once, when the node is clustered).
    pub fn set_members(&self, f: MembersFn) {
        let _ = self.members.set(f);
    }

    /// Reviews still running (for drain on shutdown).
    pub fn running(&self) -> usize {
        self.flows
            .lock()
            .map(|f| {
                f.values()
                    .filter(|s| s.report.is_none() && s.abort.is_some())
                    .count()
            })
            .unwrap_or(0)
    }

    /// Flow ids of the reviews this node conducts now.
    pub fn running_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .flows
            .lock()
            .map(|f| {
                f.iter()
                    .filter(|(_, s)| s.report.is_none() && s.abort.is_some())
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// Continue the reviews this node accepted and was running when it stopped (crash, kill,
    /// restart): they run again from their stored facts — completed tasks are not re-run, the
    /// plan is not re-made — and are watchable again under the same flow id. Returns their ids.
    pub fn resume_interrupted(&self) -> Vec<String> {
        let setup = self.setup.clone();
        let stored = match setup.data.list_flows() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list stored reviews; none resumed");
                return Vec::new();
            }
        };
        let mut resumed = Vec::new();
        for summary in stored {
            if summary.status != quorum_store::DerivedStatus::Interrupted {
                continue;
            }
            match self.resume_one(&summary.flow_id) {
                Ok(true) => resumed.push(summary.flow_id),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(flow_id = %summary.flow_id, error = %e, "cannot resume an interrupted review; `quorum resume` it by hand")
                }
            }
        }
        resumed
    }

    fn resume_one(&self, flow_id: &str) -> Result<bool, ApiError> {
        let setup = &self.setup;
        let store = setup.data.open_flow(flow_id).map_err(internal)?;
        let meta = store.meta().map_err(internal)?;
        let submitted = meta
            .params
            .get("submitted")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        // Only reviews accepted through this node's API: a local `quorum review` belongs to
        // whoever ran it.
        if !submitted || meta.node != setup.name {
            return Ok(false);
        }
        let resume = quorum_runtime::Resume::load(&store).map_err(internal)?;
        if resume.replay.cancelled.is_some() {
            return Ok(false);
        }
        let flow = Flow::parse(&meta.flow_yaml, std::path::Path::new(&meta.flow_name))
            .map_err(|e| ApiError::InvalidArgument(format!("stored flow is invalid: {e}")))?;
        let catalog = Catalog::load(&setup.personas_dir).map_err(|e| {
            ApiError::Unavailable(format!("this node's persona catalog is invalid: {e}"))
        })?;
        let pack = store.load_pack().map_err(internal)?;
        let mut backends = setup.backends.clone();
        if let Some(m) = meta.params.get("model").and_then(|v| v.as_str()) {
            if !m.trim().is_empty() {
                backends.default_model = m.to_string();
            }
        }
        // A request can only tighten the node's policy, never loosen it.
        backends.sensitive = setup.backends.sensitive
            || meta
                .params
                .get("sensitive")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
        setup.packs.register(flow_id, &pack);
        let ctx = Arc::new(ReviewContext {
            flow_id: flow_id.to_string(),
            flow,
            catalog,
            pack,
            backends,
            verifier_model: meta
                .params
                .get("verifier_model")
                .and_then(|v| v.as_str())
                .filter(|m| !m.trim().is_empty())
                .map(str::to_string),
            node: setup.name.clone(),
            max_concurrent: setup.max_concurrent,
            started_at: meta.started_at.clone(),
            facts: FactLog::new(store),
            remote: setup.remote.clone(),
            board: Some(self.board.clone()),
            scope: resume.replay.scope.clone().unwrap_or_default(),
        });
        tracing::info!(
            flow_id,
            done = resume.replay.completed.len(),
            "resuming an interrupted review"
        );
        self.start(
            ctx,
            Some(resume),
            meta.target_path.clone(),
            meta.started_at.clone(),
        )?;
        Ok(true)
    }

    /// Run a review (new, or resumed from its store) and keep its events for watchers.
    fn start(
        &self,
        ctx: Arc<ReviewContext>,
        resume: Option<quorum_runtime::Resume>,
        target: String,
        started_at: String,
    ) -> Result<(), ApiError> {
        let flow_id = ctx.flow_id.clone();
        let (live, _) = broadcast::channel(1024);
        self.flows.lock().map_err(internal)?.insert(
            flow_id.clone(),
            FlowState {
                events: Vec::new(),
                live,
                report: None,
                abort: None,
                flow: ctx.flow.name.clone(),
                target,
                started_at,
            },
        );
        let flows = self.flows.clone();
        let id = flow_id.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        // Progress → the flow's event log (and its live watchers).
        let pump_flows = flows.clone();
        let pump_id = id.clone();
        tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                let json = serde_json::to_string(&p).unwrap_or_default();
                if let Ok(mut f) = pump_flows.lock() {
                    if let Some(s) = f.get_mut(&pump_id) {
                        s.push(progress_kind(&p), json);
                    }
                }
            }
        });
        let packs = self.setup.packs.clone();
        let task = tokio::spawn(async move {
            let result = quorum_runtime::run_review_from(ctx, Some(tx), resume).await;
            // The review is over: its pack leaves memory (it stays in the review's store), so a
            // node's memory does not grow with every review it ever ran.
            packs.release(&id);
            // Let the progress pump drain before the final event.
            tokio::task::yield_now().await;
            if let Ok(mut f) = flows.lock() {
                if let Some(s) = f.get_mut(&id) {
                    match result {
                        Ok(report) => {
                            let status = format!("{:?}", report.status).to_lowercase();
                            s.report = Some(report);
                            s.push(
                                FINISHED_KIND,
                                serde_json::json!({"status": status}).to_string(),
                            );
                        }
                        Err(e) => {
                            s.push(
                                FINISHED_KIND,
                                serde_json::json!({"status": "failed", "error": e.to_string()})
                                    .to_string(),
                            );
                        }
                    }
                    s.abort = None;
                    // Watchers of a finished review need only its end; the full event log is
                    // in the review's store.
                    s.events.drain(..s.events.len().saturating_sub(1));
                    s.events.shrink_to_fit();
                }
            }
        });
        if let Ok(mut f) = self.flows.lock() {
            if let Some(s) = f.get_mut(&flow_id) {
                if s.report.is_none() {
                    s.abort = Some(task.abort_handle());
                }
            }
        }
        Ok(())
    }

    fn build_pack(req: &pb::SubmitReviewRequest) -> Result<ContextPack, ApiError> {
        let mut files = Vec::with_capacity(req.files.len());
        for f in &req.files {
            // The client already excluded secrets; a node does not trust that.
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            if is_secret_file_name(name) {
                continue;
            }
            let text = String::from_utf8(f.content.clone()).map_err(|_| {
                ApiError::InvalidArgument(format!("file {} is not utf-8 text", f.path))
            })?;
            files.push((f.path.clone(), text));
        }
        Ok(ContextPack::from_files(
            PathBuf::from(&req.target_name),
            req.head_sha.clone(),
            files,
        ))
    }
}

#[async_trait::async_trait]
impl ReviewApi for NodeService {
    async fn submit(&self, req: pb::SubmitReviewRequest) -> Result<String, ApiError> {
        let setup = self.setup.clone();
        let opts = req.options.clone().unwrap_or_default();
        // File and database work runs off the async threads, so one big submission (up to a
        // 256 MiB pack) does not stall every other call and heartbeat on this node.
        let personas = setup.personas_dir.clone();
        let catalog = tokio::task::spawn_blocking(move || Catalog::load(&personas))
            .await
            .map_err(internal)?
            .map_err(|e| {
                ApiError::Unavailable(format!("this node's persona catalog is invalid: {e}"))
            })?;
        let (flow, flow_yaml) = match &req.flow_yaml {
            Some(yaml) if !yaml.trim().is_empty() => {
                let f = Flow::parse(yaml, std::path::Path::new("submitted flow"))
                    .map_err(|e| ApiError::InvalidArgument(format!("invalid flow: {e}")))?;
                (f, yaml.clone())
            }
            _ => {
                let name = if req.flow.trim().is_empty() {
                    setup.default_flow.as_str()
                } else {
                    req.flow.as_str()
                };
                if name.contains('/') || name.contains("..") {
                    return Err(ApiError::InvalidArgument(format!(
                        "flow {name:?} must be a name; send a custom flow as flow_yaml"
                    )));
                }
                let path = Flow::locate(name, &setup.flows_dir)
                    .map_err(|e| ApiError::InvalidArgument(e.to_string()))?;
                let yaml = std::fs::read_to_string(&path).map_err(internal)?;
                (
                    Flow::parse(&yaml, &path)
                        .map_err(|e| ApiError::InvalidArgument(e.to_string()))?,
                    yaml,
                )
            }
        };
        let pack = Self::build_pack(&req)?;
        let mut backends = setup.backends.clone();
        if !opts.model.trim().is_empty() {
            backends.default_model = opts.model.clone();
        }
        // The node's own `sensitive` is a floor: a client may tighten it, never lower it.
        backends.sensitive = setup.backends.sensitive || opts.sensitive;
        let flow_id = format!(
            "{}-{}",
            chrono::Utc::now().format("%Y%m%d-%H%M%S"),
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        let started_at = chrono::Utc::now().to_rfc3339();
        let meta = FlowMeta {
            flow_id: flow_id.clone(),
            flow_name: flow.name.clone(),
            flow_yaml,
            params: serde_json::json!({
                "submitted": true,
                "model": backends.default_model,
                "sensitive": backends.sensitive,
                "fail_on": opts.fail_on,
                "verifier_model": opts.verifier_model,
            }),
            target_path: req.target_name.clone(),
            head_sha: req.head_sha.clone(),
            started_at: started_at.clone(),
            started_ms: quorum_runtime::facts::now_ms(),
            node: setup.name.clone(),
        };
        let (data, saved) = (setup.data.clone(), pack.clone());
        let store = tokio::task::spawn_blocking(move || {
            let store = data.create_flow(&meta).map_err(internal)?;
            store.save_pack(&saved).map_err(internal)?;
            Ok::<_, ApiError>(store)
        })
        .await
        .map_err(internal)??;
        setup.packs.register(&flow_id, &pack);
        let ctx = Arc::new(ReviewContext {
            flow_id: flow_id.clone(),
            flow,
            catalog,
            pack,
            backends,
            verifier_model: Some(opts.verifier_model.clone()).filter(|m| !m.trim().is_empty()),
            node: setup.name.clone(),
            max_concurrent: (opts.max_concurrent > 0)
                .then_some(opts.max_concurrent as usize)
                .or(setup.max_concurrent),
            started_at: started_at.clone(),
            facts: FactLog::new(store),
            remote: setup.remote.clone(),
            board: Some(self.board.clone()),
            scope: Default::default(),
        });
        self.start(ctx, None, req.target_name.clone(), started_at)?;
        tracing::info!(flow_id = %flow_id, target = %req.target_name, files = req.files.len(), "review submitted");
        Ok(flow_id)
    }

    async fn watch(&self, flow_id: &str) -> Result<EventStream, ApiError> {
        let (backlog, rx, done) = {
            let f = self.flows.lock().map_err(internal)?;
            let s = f
                .get(flow_id)
                .ok_or_else(|| ApiError::NotFound(format!("no review {flow_id} on this node")))?;
            let done = s.events.iter().any(|e| e.kind == FINISHED_KIND);
            (s.events.clone(), s.live.subscribe(), done)
        };
        let last = backlog.last().map(|e| e.seq).unwrap_or(0);
        let backlog = tokio_stream::iter(backlog);
        if done {
            return Ok(Box::pin(backlog));
        }
        use tokio_stream::StreamExt;
        let live = tokio_stream::wrappers::BroadcastStream::new(rx)
            .filter_map(|r| r.ok())
            .filter(move |e| e.seq > last);
        Ok(Box::pin(backlog.chain(live)))
    }

    async fn report(&self, flow_id: &str) -> Result<pb::GetReportResponse, ApiError> {
        let report = {
            let f = self.flows.lock().map_err(internal)?;
            match f.get(flow_id) {
                Some(s) => match &s.report {
                    Some(r) => Some(r.clone()),
                    None if s.abort.is_some() => {
                        return Err(ApiError::Running(format!(
                            "review {flow_id} is still running"
                        )))
                    }
                    None => None,
                },
                None => None,
            }
        };
        let report = match report {
            Some(r) => r,
            None => {
                // Not in memory: a review from before this node restarted.
                let store = self
                    .setup
                    .data
                    .open_flow(flow_id)
                    .map_err(|e| ApiError::NotFound(e.to_string()))?;
                let json = store.report().map_err(internal)?.ok_or_else(|| {
                    ApiError::Running(format!("review {flow_id} has no report (interrupted?)"))
                })?;
                serde_json::from_str(&json).map_err(internal)?
            }
        };
        Ok(pb::GetReportResponse {
            status: format!("{:?}", report.status).to_lowercase(),
            report_json: report.to_json(),
            report_markdown: report.to_markdown(),
            report_sarif: serde_json::to_string_pretty(&report.to_sarif()).unwrap_or_default(),
        })
    }

    async fn cancel(&self, flow_id: &str) -> Result<bool, ApiError> {
        let running = {
            let f = self.flows.lock().map_err(internal)?;
            let s = f
                .get(flow_id)
                .ok_or_else(|| ApiError::NotFound(format!("no review {flow_id} on this node")))?;
            s.report.is_none() && s.abort.is_some()
        };
        if !running {
            return Ok(false);
        }
        // The conductor stops every attempt (here and on peers), records the cancellation and
        // ends the review partial; its report is then served like any other.
        if quorum_runtime::remote::cancel_review(flow_id, "cancelled through the API").await {
            return Ok(true);
        }
        // No conductor answered (it was just finishing, or wedged): stop the task itself.
        let mut f = self.flows.lock().map_err(internal)?;
        match f.get_mut(flow_id).and_then(|s| s.abort.take()) {
            Some(h) => {
                h.abort();
                if let Some(s) = f.get_mut(flow_id) {
                    s.push(
                        FINISHED_KIND,
                        serde_json::json!({"status": "partial", "reason": "cancelled"}).to_string(),
                    );
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn list(&self) -> Result<Vec<pb::ReviewSummary>, ApiError> {
        // Opens every stored review's database in turn: off the async threads.
        let data = self.setup.data.clone();
        let stored = tokio::task::spawn_blocking(move || data.list_flows())
            .await
            .map_err(internal)?
            .map_err(internal)?;
        let f = self.flows.lock().map_err(internal)?;
        let mut out: Vec<pb::ReviewSummary> = stored
            .into_iter()
            .map(|s| pb::ReviewSummary {
                findings: f
                    .get(&s.flow_id)
                    .and_then(|x| x.report.as_ref())
                    .map(|r| r.findings.len() as u32)
                    .unwrap_or(s.findings as u32),
                flow_id: s.flow_id,
                flow: s.flow_name,
                target: s.target_path,
                status: s.status.to_string(),
                started_at: s.started_at,
            })
            .collect();
        for (id, s) in f.iter() {
            if !out.iter().any(|o| &o.flow_id == id) {
                out.push(pb::ReviewSummary {
                    flow_id: id.clone(),
                    flow: s.flow.clone(),
                    target: s.target.clone(),
                    status: if s.report.is_some() {
                        "completed".into()
                    } else {
                        "running".into()
                    },
                    started_at: s.started_at.clone(),
                    findings: s
                        .report
                        .as_ref()
                        .map(|r| r.findings.len() as u32)
                        .unwrap_or(0),
                });
            }
        }
        Ok(out)
    }

    async fn cluster_status(&self) -> Result<Vec<pb::NodeStatus>, ApiError> {
        if let Some(members) = self.members.get().map(|f| f()) {
            return Ok(members);
        }
        let b = &self.setup.backends;
        Ok(vec![pb::NodeStatus {
            name: self.setup.name.clone(),
            addr: self.setup.advertised_addr.clone(),
            alive: true,
            models: b.all_models(),
            capacity: b
                .backends
                .iter()
                .map(|x| x.config.max_concurrent as u32)
                .sum(),
            in_flight: self.running() as u32,
            last_seen_ms: 0,
            state: "up".into(),
            voter: false,
            leader: false,
            conducting: self.running_ids(),
        }])
    }
}
