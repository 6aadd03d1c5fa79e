//! The `ReviewApi` implementation: submitted packs become reviews run on this node.

use quorum_api::{pb, ApiError, EventStream, ReviewApi, FINISHED_KIND};
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::flows::flow::Overrides;
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
    /// The deterministic analyzers this node runs on the reviews it accepts (None = off).
    /// Their leads travel with each attempt, so workers need none of the tools.
    pub analyzers: Option<quorum_runtime::analyzers::AnalyzerSetup>,
    /// Memory across the reviews this node conducts (None = off): where insights are kept and
    /// how many are offered.
    pub memory: Option<NodeMemory>,
}

/// A node's memory across reviews: the node database insights are kept in, and the `[memory]`
/// parameters. A review submitted for a target is offered the insights of earlier reviews of
/// the same target (the client's path), and its own surviving findings are kept when it ends.
#[derive(Clone)]
pub struct NodeMemory {
    pub store: Arc<quorum_store::NodeStore>,
    pub k: usize,
    pub base_rate: f64,
}

impl std::fmt::Debug for NodeMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMemory")
            .field("k", &self.k)
            .field("base_rate", &self.base_rate)
            .finish_non_exhaustive()
    }
}

impl NodeMemory {
    /// The memory a submitted review starts with; an unreadable store costs the offer, never
    /// the review.
    async fn offer(&self, target: &str) -> quorum_core::scope::MemoryScope {
        let repository = format!("path:{target}");
        let (store, repo, k, rate) = (
            self.store.clone(),
            repository.clone(),
            self.k,
            self.base_rate,
        );
        let offered = tokio::task::spawn_blocking(move || {
            store.offer_insights(&repo, quorum_runtime::facts::now_ms(), k, rate)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "earlier reviews' insights not offered");
            Vec::new()
        });
        quorum_core::scope::MemoryScope {
            repository,
            k,
            base_rate: rate,
            offered,
        }
    }

    /// Keep a finished review's surviving findings as insights for the next review of its
    /// target (the same distillation its report counted).
    async fn keep(&self, memory: &quorum_core::scope::MemoryScope, report: &Report) {
        let now = quorum_runtime::facts::now_ms();
        let learned = quorum_core::memory::distill_report(report, &memory.repository, now);
        if learned.is_empty() {
            return;
        }
        let (store, repo, rate) = (
            self.store.clone(),
            memory.repository.clone(),
            memory.base_rate,
        );
        let kept =
            tokio::task::spawn_blocking(move || store.record_insights(&repo, learned, now, rate))
                .await;
        match kept {
            Ok(Ok(n)) => {
                tracing::info!(insights = n, repository = %memory.repository, "insights kept for the next review of this target")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "this review's insights not kept"),
            Err(e) => tracing::warn!(error = %e, "this review's insights not kept"),
        }
    }
}

/// One review this node runs or ran.
struct FlowState {
    /// When it finished, in finish order (0 while it runs).
    finished_order: u64,
    events: Vec<pb::ReviewEvent>,
    live: broadcast::Sender<pb::ReviewEvent>,
    report: Option<Report>,
    abort: Option<tokio::task::AbortHandle>,
    flow: String,
    target: String,
    started_at: String,
}

/// Finished reviews whose whole event log stays in memory (for the dashboard's timeline and a
/// late watcher); older ones keep only their end, so memory does not grow with every review a
/// node ever ran. The facts themselves are in each review's store.
const FINISHED_EVENT_LOGS_KEPT: usize = 16;

/// Finished reviews whose report stays in memory; GetReport reads older ones from the review's
/// store (or the replicated facts), so a long-running node holds at most this many reports.
const FINISHED_REPORTS_KEPT: usize = 16;

/// Finished reviews this node keeps any entry for; past that the oldest are forgotten whole.
/// Watch, GetReport, Cancel and ListReviews answer for them from their stores (or the
/// replicated facts), so the map of reviews is bounded however long the node runs.
const FINISHED_ENTRIES_KEPT: usize = 256;

/// Mark `id` finished, shrink the event logs of all but the newest `kept.events` finished
/// reviews, drop the reports of all but the newest `kept.reports` and forget all but the
/// newest `kept.entries` entirely.
fn release_finished(flows: &mut HashMap<String, FlowState>, id: &str, kept: Kept) {
    let Kept {
        events: events_kept,
        reports: reports_kept,
        entries: entries_kept,
    } = kept;
    let next = flows.values().map(|s| s.finished_order).max().unwrap_or(0) + 1;
    if let Some(s) = flows.get_mut(id) {
        s.finished_order = next;
        // The live channel's ring (1024 slots, and the events in them) is only for watchers
        // of a running review: a finished one is served from its log. Watchers already
        // subscribed have the end event and then see the channel close.
        s.live = broadcast::channel(1).0;
    }
    let newest_first = |keep: fn(&FlowState) -> bool| {
        let mut finished: Vec<(u64, String)> = flows
            .iter()
            .filter(|(_, s)| s.finished_order > 0 && keep(s))
            .map(|(k, s)| (s.finished_order, k.clone()))
            .collect();
        finished.sort_by(|a, b| b.cmp(a));
        finished
    };
    let old_logs: Vec<String> = newest_first(|s| s.events.len() > 1)
        .into_iter()
        .skip(events_kept)
        .map(|(_, k)| k)
        .collect();
    let old_reports: Vec<String> = newest_first(|s| s.report.is_some())
        .into_iter()
        .skip(reports_kept)
        .map(|(_, k)| k)
        .collect();
    let forgotten: Vec<String> = newest_first(|_| true)
        .into_iter()
        .skip(entries_kept)
        .map(|(_, k)| k)
        .collect();
    for k in old_logs {
        if let Some(s) = flows.get_mut(&k) {
            s.events.drain(..s.events.len().saturating_sub(1));
            s.events.shrink_to_fit();
        }
    }
    for k in old_reports {
        if let Some(s) = flows.get_mut(&k) {
            s.report = None;
        }
    }
    for k in forgotten {
        flows.remove(&k);
    }
}

/// How much of its finished reviews a node keeps in memory.
#[derive(Debug, Clone, Copy)]
struct Kept {
    events: usize,
    reports: usize,
    entries: usize,
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

/// The longest a finished review waits for its progress events before its end event.
const PUMP_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// How often a watcher of a review conducted elsewhere looks for new replicated facts.
const REPLICA_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// A review conducted on another node, as its replicated facts tell it: the stream lives on
/// this node, so it survives the conductor's death and the takeover that follows. It ends with
/// the review (a `finished` event), or when this replica no longer knows the review.
fn watch_replicated(control: Arc<crate::control::NodeControl>, flow_id: String) -> EventStream {
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::ReviewEvent>(256);
    tokio::spawn(async move {
        let mut progress = quorum_runtime::progress::ProgressFromFacts::default();
        let (mut next_fact, mut seq) = (0usize, 0u64);
        loop {
            let Some((facts, finished)) = control.plane().facts_since(&flow_id, next_fact) else {
                return;
            };
            next_fact += facts.len();
            for fact in facts {
                let Ok(fact) = serde_json::from_value::<quorum_runtime::ReplicatedFact>(fact)
                else {
                    continue;
                };
                for p in progress.next(&fact) {
                    seq += 1;
                    let ev = pb::ReviewEvent {
                        seq,
                        kind: progress_kind(&p).to_string(),
                        json: serde_json::to_string(&p).unwrap_or_default(),
                    };
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
            }
            // The end is the control plane's `finished` mark, committed after the report fact,
            // not the FlowFinished fact before it: a client asks for the report next, and this
            // replica must have it by then.
            if finished {
                let status = progress.finished().unwrap_or_default().to_string();
                let end = pb::ReviewEvent {
                    seq: seq + 1,
                    kind: FINISHED_KIND.to_string(),
                    json: serde_json::json!({ "status": status }).to_string(),
                };
                let _ = tx.send(end).await;
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(REPLICA_POLL) => {}
                _ = tx.closed() => return,
            }
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Supplies the cluster's view of its members for ClusterStatus.
pub type MembersFn = Box<dyn Fn() -> Vec<pb::NodeStatus> + Send + Sync>;

pub struct NodeService {
    members: std::sync::OnceLock<MembersFn>,
    /// The replicated control plane, when the node runs with three or more voters.
    control: std::sync::OnceLock<Arc<crate::control::NodeControl>>,
    setup: Arc<NodeSetup>,
    board: Arc<dyn quorum_runtime::board::TeamBoard>,
    flows: Arc<Mutex<HashMap<String, FlowState>>>,
    /// How many finished reviews keep their whole event log in memory.
    event_logs_kept: Arc<std::sync::atomic::AtomicUsize>,
    /// How many finished reviews keep their report in memory.
    reports_kept: Arc<std::sync::atomic::AtomicUsize>,
    /// How many finished reviews keep any entry in memory.
    entries_kept: Arc<std::sync::atomic::AtomicUsize>,
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
        Progress::Finding { .. } => "finding",
        Progress::Finished { .. } => "progress_finished",
    }
}

impl NodeService {
    pub fn new(setup: NodeSetup) -> Self {
        NodeService {
            members: std::sync::OnceLock::new(),
            control: std::sync::OnceLock::new(),
            board: setup.board.clone(),
            setup: Arc::new(setup),
            flows: Arc::new(Mutex::new(HashMap::new())),
            event_logs_kept: Arc::new(std::sync::atomic::AtomicUsize::new(
                FINISHED_EVENT_LOGS_KEPT,
            )),
            reports_kept: Arc::new(std::sync::atomic::AtomicUsize::new(FINISHED_REPORTS_KEPT)),
            entries_kept: Arc::new(std::sync::atomic::AtomicUsize::new(FINISHED_ENTRIES_KEPT)),
        }
    }

    /// How many finished reviews keep any entry in memory (default 256); the others are
    /// answered for from their stores.
    pub fn set_entries_kept(&self, n: usize) {
        self.entries_kept
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reviews (running or finished) this node holds an entry for now.
    pub fn reviews_in_memory(&self) -> usize {
        self.flows.lock().map(|f| f.len()).unwrap_or(0)
    }

    /// How many finished reviews keep their report in memory (default 16); GetReport reads
    /// the others from their stores.
    pub fn set_reports_kept(&self, n: usize) {
        self.reports_kept
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reports of finished reviews held in memory now (bounded by `set_reports_kept`).
    pub fn reports_in_memory(&self) -> usize {
        self.flows
            .lock()
            .map(|f| f.values().filter(|s| s.report.is_some()).count())
            .unwrap_or(0)
    }

    /// How many finished reviews keep their whole event log in memory (default 16; the
    /// others keep only their end — their facts are in their stores).
    pub fn set_event_logs_kept(&self, n: usize) {
        self.event_logs_kept
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Report cluster membership in ClusterStatus (set once, when the node is clustered).
    pub fn set_members(&self, f: MembersFn) {
        let _ = self.members.set(f);
    }

    /// Conduct reviews through the control plane: facts are replicated before they are acted
    /// on, and reviews of a lost node are taken over (set once, before the API serves).
    pub fn set_control(self: &Arc<Self>, control: Arc<crate::control::NodeControl>) {
        control.bind_service(Arc::downgrade(self));
        let _ = self.control.set(control);
    }

    /// Has this process run (or is it running) the review? A review it was fenced off is not
    /// counted, so it can be handed back to this node later.
    pub fn conducts(&self, flow_id: &str) -> bool {
        self.flows
            .lock()
            .map(|f| f.contains_key(flow_id))
            .unwrap_or(true)
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
            // A review the control plane knows is resumed by whichever node it assigns it to.
            if let Some(c) = self.control.get() {
                if c.review(&summary.flow_id).is_some() {
                    continue;
                }
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
        self.resume_with(flow_id, None)
    }

    /// Resume a review this node was assigned by the control plane, from its store rebuilt from
    /// the replicated facts; its facts go on through `sink` at the new epoch.
    pub fn resume_replicated(
        &self,
        flow_id: &str,
        sink: Arc<dyn quorum_runtime::FactSink>,
    ) -> Result<bool, ApiError> {
        self.resume_with(flow_id, Some(sink))
    }

    fn resume_with(
        &self,
        flow_id: &str,
        sink: Option<Arc<dyn quorum_runtime::FactSink>>,
    ) -> Result<bool, ApiError> {
        let setup = &self.setup;
        let store = setup.data.open_flow(flow_id).map_err(internal)?;
        let meta = store.meta().map_err(internal)?;
        let submitted = meta
            .params
            .get("submitted")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        // Only reviews accepted through this node's API (or assigned to it by the control
        // plane): a local `quorum review` belongs to whoever ran it.
        if sink.is_none() && (!submitted || meta.node != setup.name) {
            return Ok(false);
        }
        let resume = quorum_runtime::Resume::load(&store).map_err(internal)?;
        if resume.replay.cancelled.is_some() {
            return Ok(false);
        }
        let mut flow = Flow::parse(&meta.flow_yaml, std::path::Path::new(&meta.flow_name))
            .map_err(|e| ApiError::InvalidArgument(format!("stored flow is invalid: {e}")))?;
        // The submitter's --verifiers / --verify-threshold bind the review wherever it resumes.
        if let Some(o) = meta
            .params
            .get("verification")
            .and_then(|v| serde_json::from_value::<Overrides>(v.clone()).ok())
        {
            o.apply(&mut flow.parameters);
        }
        // So is the coverage mode: a re-plan after a takeover adds the same tasks.
        if let Some(mode) = meta.params.get("coverage").and_then(|v| {
            serde_json::from_value::<quorum_core::flows::flow::CoverageMode>(v.clone()).ok()
        }) {
            flow.set_coverage(mode)
                .map_err(|e| ApiError::InvalidArgument(format!("stored review: {e}")))?;
        }
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
            facts: match sink {
                Some(sink) => FactLog::replicated(store, sink),
                None => FactLog::new(store),
            },
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
                finished_order: 0,
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
        let kept = (
            self.event_logs_kept.clone(),
            self.reports_kept.clone(),
            self.entries_kept.clone(),
        );
        let id = flow_id.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        // Progress → the flow's event log (and its live watchers).
        let pump_flows = flows.clone();
        let pump_id = id.clone();
        let pump = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                // When it happened, for the dashboard's timeline (readers ignore the field).
                let mut v = serde_json::to_value(&p).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("at_ms".into(), quorum_runtime::facts::now_ms().into());
                }
                let json = v.to_string();
                if let Ok(mut f) = pump_flows.lock() {
                    if let Some(s) = f.get_mut(&pump_id) {
                        s.push(progress_kind(&p), json);
                    }
                }
            }
        });
        let packs = self.setup.packs.clone();
        let node_memory = self.setup.memory.clone();
        let task = tokio::spawn(async move {
            let facts = ctx.facts.clone();
            let review_memory = ctx.scope.memory.clone();
            let result = quorum_runtime::run_review_from(ctx, Some(tx), resume).await;
            if let (Some(node), Some(memory), Ok(report)) = (&node_memory, &review_memory, &result)
            {
                if !facts.fenced() {
                    node.keep(memory, report).await;
                }
            }
            // The review is over: its pack leaves memory (it stays in the review's store), so a
            // node's memory does not grow with every review it ever ran.
            packs.release(&id);
            // Let the progress pump drain before the final event: it ends when the review's
            // actors drop their senders. A yield was not enough under load (a late `usage`
            // landed after `finished`); the wait is bounded in case a sender outlives them.
            let _ = tokio::time::timeout(PUMP_DRAIN, pump).await;
            if facts.fenced() {
                // Another node conducts the review now: end the watchers' streams without a
                // verdict (they reconnect and find the conductor) and forget it here.
                if let Ok(mut f) = flows.lock() {
                    f.remove(&id);
                }
                tracing::warn!(flow_id = %id, reason = facts.fence_reason().unwrap_or(""), "stepped down from conducting the review");
                return;
            }
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
                }
                let relaxed = std::sync::atomic::Ordering::Relaxed;
                let kept = Kept {
                    events: kept.0.load(relaxed),
                    reports: kept.1.load(relaxed),
                    entries: kept.2.load(relaxed),
                };
                release_finished(&mut f, &id, kept);
            }
        });
        if let Ok(mut f) = self.flows.lock() {
            if let Some(s) = f.get_mut(&flow_id) {
                // Not if it already ended (its report may be released by now).
                if s.finished_order == 0 {
                    s.abort = Some(task.abort_handle());
                }
            }
        }
        Ok(())
    }

    /// The error for a review this node does not hold: where it is, if the control plane knows.
    fn elsewhere(&self, flow_id: &str) -> ApiError {
        match self.control.get().and_then(|c| c.review(flow_id)) {
            Some(r) => ApiError::Unavailable(format!(
                "review {flow_id} is conducted by node {} (epoch {}); ask that node",
                r.conductor, r.epoch
            )),
            None => ApiError::NotFound(format!("no review {flow_id} on this node")),
        }
    }

    /// The status a finished review's stored report gives (completed|partial|failed), read
    /// off the async threads; `None` when this node has no report for it.
    async fn stored_status(&self, flow_id: &str) -> Option<String> {
        let (data, id) = (self.setup.data.clone(), flow_id.to_string());
        let json = tokio::task::spawn_blocking(move || data.open_flow(&id).ok()?.report().ok()?)
            .await
            .ok()??;
        serde_json::from_str::<serde_json::Value>(&json)
            .ok()?
            .get("status")?
            .as_str()
            .map(str::to_string)
    }

    /// A finished review's report from the replicated facts, on any node.
    fn replicated_report(&self, flow_id: &str) -> Option<String> {
        let r = self.control.get()?.review(flow_id)?;
        if !r.finished {
            return None;
        }
        r.facts.iter().rev().find_map(|f| {
            match serde_json::from_value::<quorum_runtime::ReplicatedFact>(f.clone()) {
                Ok(quorum_runtime::ReplicatedFact::Report { json }) => Some(json),
                _ => None,
            }
        })
    }

    /// The spec a conformance flow judges against, as the client sent it: required by such a
    /// flow, refused by any other, and checked here as a local review checks its file (this
    /// node trusts no client). Its place in the pack is kept only where the pack has it.
    fn spec_of(
        flow: &Flow,
        req: &pb::SubmitReviewRequest,
        pack: &ContextPack,
    ) -> Result<Option<quorum_core::judging::conformance::Spec>, ApiError> {
        match (flow.uses_spec(), &req.spec) {
            (true, None) => Err(ApiError::InvalidArgument(format!(
                "flow {} judges the target against a spec: pass --spec FILE (acceptance criteria as a markdown checklist, numbered requirements or MUST/SHALL lines)",
                flow.name
            ))),
            (false, Some(_)) => Err(ApiError::InvalidArgument(format!(
                "--spec is only read by a flow with a conformance stage, and flow {} has none: use --flow conformance, or drop --spec",
                flow.name
            ))),
            (false, None) => Ok(None),
            (true, Some(s)) => {
                let name = s.path.rsplit(['/', '\\']).next().unwrap_or(&s.path);
                if is_secret_file_name(name) {
                    return Err(ApiError::InvalidArgument(format!(
                        "the spec {} is a secrets file, and its text would be sent to models: pass the spec's own file",
                        s.path
                    )));
                }
                let mut spec =
                    quorum_core::judging::conformance::Spec::from_text(&s.path, s.text.clone())
                        .map_err(ApiError::InvalidArgument)?;
                spec.pack_path = Some(s.pack_path.clone())
                    .filter(|p| !p.is_empty() && pack.get(p).is_some());
                Ok(Some(spec))
            }
        }
    }

    /// The prior review a finish-review flow adjudicates, parsed here from the texts the
    /// client read: required by such a flow, refused by any other.
    fn prior_of(
        flow: &Flow,
        req: &pb::SubmitReviewRequest,
    ) -> Result<Option<quorum_core::judging::adjudication::Prior>, ApiError> {
        match (flow.uses_prior(), &req.prior) {
            (true, None) => Err(ApiError::InvalidArgument(format!(
                "flow {} adjudicates a prior review: pass --prior REPORT.json (the report.json of that review)",
                flow.name
            ))),
            (false, Some(_)) => Err(ApiError::InvalidArgument(format!(
                "--prior is only read by a flow with an adjudicator stage, and flow {} has none: use --flow finish-review, or drop --prior",
                flow.name
            ))),
            (false, None) => Ok(None),
            (true, Some(p)) => {
                let dispositions = (!p.dispositions_path.is_empty() || !p.dispositions.is_empty())
                    .then_some((p.dispositions_path.as_str(), p.dispositions.as_str()));
                quorum_core::judging::adjudication::Prior::from_texts(&p.path, &p.report_json, dispositions)
                    .map(Some)
                    .map_err(|e| {
                        let file = match &e {
                            quorum_core::error::PriorError::Report(_) => &p.path,
                            quorum_core::error::PriorError::Dispositions(_) => &p.dispositions_path,
                        };
                        ApiError::InvalidArgument(format!("{e} ({file})"))
                    })
            }
        }
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
        let mut scope = quorum_core::scope::ReviewScope {
            spec: Self::spec_of(&flow, &req, &pack)?,
            prior: Self::prior_of(&flow, &req)?.map(Box::new),
            ..Default::default()
        };
        let client_scope = match req.scope_json.as_deref().filter(|j| !j.trim().is_empty()) {
            Some(json) => Some(
                quorum_core::scope::ClientScope::parse(json, &pack)
                    .map_err(ApiError::InvalidArgument)?,
            ),
            None => None,
        };
        let scoped = client_scope.as_ref().is_some_and(|c| !c.is_default());
        if let Some(c) = client_scope {
            c.apply_to(&mut scope);
        }
        // The node runs the tools it has, before it acknowledges the review (the client waits
        // at most the catalog's timeouts); the leads are recorded with the review's scope.
        if let Some(m) = setup
            .memory
            .as_ref()
            .filter(|_| !opts.no_memory && !pack.is_empty())
        {
            scope.memory = Some(Box::new(m.offer(&req.target_name).await));
        }
        if let Some(a) = setup.analyzers.as_ref().filter(|_| !opts.no_analyzers) {
            if !pack.is_empty() {
                scope.analyzers = a.run(&pack).await;
            }
        }
        let mut backends = setup.backends.clone();
        if !opts.model.trim().is_empty() {
            backends.default_model = opts.model.clone();
        }
        let verification = Overrides::parse(
            (opts.verifiers > 0).then_some(opts.verifiers as usize),
            Some(opts.verify_threshold.as_str()).filter(|t| !t.trim().is_empty()),
        )
        .map_err(ApiError::InvalidArgument)?;
        let mut flow = flow;
        verification.apply(&mut flow.parameters);
        let coverage = match opts.coverage.trim() {
            "" => None,
            c => Some(
                quorum_core::flows::flow::CoverageMode::parse_for(c, "coverage")
                    .map_err(ApiError::InvalidArgument)?,
            ),
        };
        if let Some(mode) = coverage {
            flow.set_coverage(mode).map_err(ApiError::InvalidArgument)?;
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
                "verification": verification,
                "coverage": coverage,
            }),
            target_path: req.target_name.clone(),
            head_sha: req.head_sha.clone(),
            started_at: started_at.clone(),
            started_ms: quorum_runtime::facts::now_ms(),
            node: setup.name.clone(),
        };
        let (data, saved, created) = (setup.data.clone(), pack.clone(), meta.clone());
        let store = tokio::task::spawn_blocking(move || {
            let store = data.create_flow(&created).map_err(internal)?;
            store.save_pack(&saved).map_err(internal)?;
            Ok::<_, ApiError>(store)
        })
        .await
        .map_err(internal)??;
        setup.packs.register(&flow_id, &pack);
        // With a control plane the review is agreed (and its pack copied to a majority of
        // voters) before it is acknowledged, so a survivor can take it over.
        let facts = match self.control.get() {
            Some(c) => match c.accept(&meta, &pack).await {
                Ok(sink) => FactLog::replicated(store, sink),
                Err(e) => {
                    drop(store);
                    let _ = setup.data.delete_flow(&flow_id);
                    c.release(&flow_id);
                    return Err(ApiError::Unavailable(format!(
                        "cannot replicate the review: {e}"
                    )));
                }
            },
            None => FactLog::new(store),
        };
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
            facts,
            remote: setup.remote.clone(),
            board: Some(self.board.clone()),
            scope,
        });
        if scoped
            || !ctx.scope.analyzers.is_empty()
            || ctx.scope.spec.is_some()
            || ctx.scope.prior.is_some()
            || ctx.scope.memory.is_some()
        {
            // Before the first stage, as a local review records it: a survivor that takes the
            // review over, or a resume, reuses the same leads, spec and prior review.
            ctx.facts
                .event(quorum_store::Event::ScopeRecorded {
                    scope: ctx.scope.clone(),
                })
                .await;
        }
        self.start(ctx, None, req.target_name.clone(), started_at)?;
        if let Some(c) = self.control.get() {
            // Running now, so the reconciler sees it as conducted here without the claim.
            c.release(&flow_id);
        }
        tracing::info!(flow_id = %flow_id, target = %req.target_name, files = req.files.len(), "review submitted");
        Ok(flow_id)
    }

    async fn watch(&self, flow_id: &str) -> Result<EventStream, ApiError> {
        if !self.conducts(flow_id) {
            // Finished elsewhere: its end is in the replicated facts, and so is its report.
            if let Some(json) = self.replicated_report(flow_id) {
                let status = serde_json::from_str::<serde_json::Value>(&json)
                    .ok()
                    .and_then(|v| v.get("status").and_then(|s| s.as_str()).map(str::to_string))
                    .unwrap_or_default();
                let ev = pb::ReviewEvent {
                    seq: 1,
                    kind: FINISHED_KIND.to_string(),
                    json: serde_json::json!({ "status": status }).to_string(),
                };
                return Ok(Box::pin(tokio_stream::iter(vec![ev])));
            }
            // Running elsewhere: follow it through the facts this node's replica receives.
            if let Some(control) = self.control.get() {
                if control.plane().facts_since(flow_id, usize::MAX).is_some() {
                    return Ok(watch_replicated(control.clone(), flow_id.to_string()));
                }
            }
        }
        let tracked = {
            let f = self.flows.lock().map_err(internal)?;
            f.get(flow_id).map(|s| {
                let done = s.events.iter().any(|e| e.kind == FINISHED_KIND);
                (s.events.clone(), s.live.subscribe(), done)
            })
        };
        let (backlog, rx, done) = match tracked {
            Some(t) => t,
            None => {
                // Finished here long ago (its entry forgotten): its end is in its store.
                let status = self
                    .stored_status(flow_id)
                    .await
                    .ok_or_else(|| self.elsewhere(flow_id))?;
                let ev = pb::ReviewEvent {
                    seq: 1,
                    kind: FINISHED_KIND.to_string(),
                    json: serde_json::json!({ "status": status }).to_string(),
                };
                return Ok(Box::pin(tokio_stream::iter(vec![ev])));
            }
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
                match self.replicated_report(flow_id) {
                    Some(json) => serde_json::from_str(&json).map_err(internal)?,
                    None => {
                        // A sled open and read: off the async threads.
                        let (data, id) = (self.setup.data.clone(), flow_id.to_string());
                        let stored = tokio::task::spawn_blocking(move || {
                            let store = data.open_flow(&id).ok()?;
                            Some(store.report())
                        })
                        .await
                        .map_err(internal)?;
                        let json = stored
                            .ok_or_else(|| self.elsewhere(flow_id))?
                            .map_err(internal)?
                            .ok_or_else(|| {
                                ApiError::Running(format!(
                                    "review {flow_id} has no report (interrupted?)"
                                ))
                            })?;
                        serde_json::from_str(&json).map_err(internal)?
                    }
                }
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
            f.get(flow_id)
                .map(|s| s.report.is_none() && s.abort.is_some())
        };
        let running = match running {
            Some(r) => r,
            // Forgotten here: it ended, if its store says so.
            None if self.stored_status(flow_id).await.is_some() => false,
            None => {
                return Err(ApiError::NotFound(format!(
                    "no review {flow_id} on this node"
                )))
            }
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
                    status: if s.finished_order > 0 {
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
