//! The service itself: its fields (shared by the other rooms of `service`), construction, the
//! settings a node wires in once, and the plain queries — which reviews it conducts, and where
//! a review it does not hold is, or what its store says of it.

use super::flows::{
    FlowState, FINISHED_ENTRIES_KEPT, FINISHED_EVENT_LOGS_KEPT, FINISHED_REPORTS_KEPT,
};
use super::setup::NodeSetup;
use crate::control::{NodeControl, ReviewHost};
use quorum_api::{pb, ApiError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Supplies the cluster's view of its members for ClusterStatus.
pub type MembersFn = Box<dyn Fn() -> Vec<pb::NodeStatus> + Send + Sync>;

pub struct NodeService {
    pub(super) members: std::sync::OnceLock<MembersFn>,
    /// The replicated control plane, when the node runs with three or more voters.
    pub(super) control: std::sync::OnceLock<Arc<NodeControl>>,
    pub(super) setup: Arc<NodeSetup>,
    pub(super) board: Arc<dyn quorum_runtime::board::TeamBoard>,
    pub(super) flows: Arc<Mutex<HashMap<String, FlowState>>>,
    /// How many finished reviews keep their whole event log in memory.
    pub(super) event_logs_kept: Arc<std::sync::atomic::AtomicUsize>,
    /// How many finished reviews keep their report in memory.
    pub(super) reports_kept: Arc<std::sync::atomic::AtomicUsize>,
    /// How many finished reviews keep any entry in memory.
    pub(super) entries_kept: Arc<std::sync::atomic::AtomicUsize>,
    /// How far the replicated results of each review were taken into the result cache.
    pub(super) result_cursors: Arc<super::results::Cursors>,
    /// The fix attempts this node runs for `quorum fix` runs elsewhere (unset: none).
    pub(super) fixes: std::sync::OnceLock<Arc<crate::fixes::FixWorker>>,
}

pub(super) fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(e.to_string())
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
            result_cursors: Arc::default(),
            fixes: std::sync::OnceLock::new(),
        }
    }

    /// Run fix attempts for `quorum fix` runs elsewhere with `worker` (set once).
    pub fn set_fix_worker(&self, worker: Arc<crate::fixes::FixWorker>) {
        let _ = self.fixes.set(worker);
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
    pub fn set_control(self: &Arc<Self>, control: Arc<NodeControl>) {
        let me: std::sync::Weak<NodeService> = Arc::downgrade(self);
        control.bind_service(me);
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

    /// The error for a review this node does not hold: where it is, if the control plane knows.
    pub(super) fn elsewhere(&self, flow_id: &str) -> ApiError {
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
    pub(super) async fn stored_status(&self, flow_id: &str) -> Option<String> {
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
    pub(super) fn replicated_report(&self, flow_id: &str) -> Option<String> {
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
}

impl ReviewHost for NodeService {
    fn conducts(&self, flow_id: &str) -> bool {
        NodeService::conducts(self, flow_id)
    }

    fn resume_replicated(
        &self,
        flow_id: &str,
        sink: Arc<dyn quorum_runtime::FactSink>,
    ) -> Result<bool, ApiError> {
        NodeService::resume_replicated(self, flow_id, sink)
    }
}
