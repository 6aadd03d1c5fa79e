//! Running a review (new, or resumed from its store) on this node: its progress pumped into the
//! event log and to live watchers, its insights kept, its pack released and its end recorded —
//! or, fenced by a takeover, its watchers let go without a verdict.

use super::flows::{progress_kind, release_finished, FlowState, Kept};
use super::state::{internal, NodeService};
use quorum_api::{ApiError, FINISHED_KIND};
use quorum_runtime::{Progress, ReviewContext};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The longest a finished review waits for its progress events before its end event.
const PUMP_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

impl NodeService {
    /// Tells the review's watchers (its event log) that it waits for the control plane, or goes
    /// on: what its fact sink calls.
    pub(super) fn waiting_notice(&self, flow_id: &str) -> quorum_runtime::facts::WaitingNotice {
        let (flows, id) = (self.flows.clone(), flow_id.to_string());
        Arc::new(move |reason| {
            let p = Progress::Waiting { reason };
            let mut v = serde_json::to_value(&p).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("at_ms".into(), quorum_runtime::facts::now_ms().into());
            }
            if let Ok(mut f) = flows.lock() {
                if let Some(s) = f.get_mut(&id) {
                    s.push(progress_kind(&p), v.to_string());
                }
            }
        })
    }

    /// Run a review (new, or resumed from its store) and keep its events for watchers.
    pub(super) fn start(
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
                taken_over: false,
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
}
