//! What the node keeps in memory of each review it runs or ran — the event log, the live
//! channel watchers subscribe to, the report — and the bound on it: finished reviews shrink to
//! their end, lose their report and are finally forgotten, oldest first.

use quorum_api::pb;
use quorum_core::report::Report;
use quorum_runtime::Progress;
use std::collections::HashMap;
use tokio::sync::broadcast;

/// One review this node runs or ran.
pub(super) struct FlowState {
    /// When it finished, in finish order (0 while it runs).
    pub(super) finished_order: u64,
    pub(super) events: Vec<pb::ReviewEvent>,
    pub(super) live: broadcast::Sender<pb::ReviewEvent>,
    pub(super) report: Option<Report>,
    pub(super) abort: Option<tokio::task::AbortHandle>,
    pub(super) flow: String,
    pub(super) target: String,
    pub(super) started_at: String,
    /// Taken over here from another node's replicated facts: its own event log starts at the
    /// takeover, so a watcher is told the review from the facts instead (from the start).
    pub(super) taken_over: bool,
}

/// Finished reviews whose whole event log stays in memory (for the dashboard's timeline and a
/// late watcher); older ones keep only their end, so memory does not grow with every review a
/// node ever ran. The facts themselves are in each review's store.
pub(super) const FINISHED_EVENT_LOGS_KEPT: usize = 16;

/// Finished reviews whose report stays in memory; GetReport reads older ones from the review's
/// store (or the replicated facts), so a long-running node holds at most this many reports.
pub(super) const FINISHED_REPORTS_KEPT: usize = 16;

/// Finished reviews this node keeps any entry for; past that the oldest are forgotten whole.
/// Watch, GetReport, Cancel and ListReviews answer for them from their stores (or the
/// replicated facts), so the map of reviews is bounded however long the node runs.
pub(super) const FINISHED_ENTRIES_KEPT: usize = 256;

/// Mark `id` finished, shrink the event logs of all but the newest `kept.events` finished
/// reviews, drop the reports of all but the newest `kept.reports` and forget all but the
/// newest `kept.entries` entirely.
pub(super) fn release_finished(flows: &mut HashMap<String, FlowState>, id: &str, kept: Kept) {
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
pub(super) struct Kept {
    pub(super) events: usize,
    pub(super) reports: usize,
    pub(super) entries: usize,
}

impl FlowState {
    pub(super) fn push(&mut self, kind: &str, json: String) {
        let ev = pb::ReviewEvent {
            seq: self.events.len() as u64 + 1,
            kind: kind.to_string(),
            json,
        };
        self.events.push(ev.clone());
        let _ = self.live.send(ev);
    }
}

pub(super) fn progress_kind(p: &Progress) -> &'static str {
    match p {
        Progress::Stage { .. } => "stage",
        Progress::Planned { .. } => "planned",
        Progress::TaskStarted { .. } => "task_started",
        Progress::TaskFinished { .. } => "task_finished",
        Progress::Verified { .. } => "verified",
        Progress::Waiting { .. } => "waiting",
        Progress::Usage { .. } => "usage",
        Progress::Finding { .. } => "finding",
        Progress::Finished { .. } => "progress_finished",
    }
}
