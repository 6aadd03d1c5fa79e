//! The gRPC calls a node answers (`ReviewApi`): submit, watch, report, cancel, list and the
//! cluster's status, for reviews run here, finished long ago, or conducted elsewhere.

use super::replica::watch_replicated;
use super::state::{internal, NodeService};
use quorum_api::{pb, ApiError, EventStream, ReviewApi, FINISHED_KIND};

#[async_trait::async_trait]
impl ReviewApi for NodeService {
    async fn submit(&self, req: pb::SubmitReviewRequest) -> Result<String, ApiError> {
        self.submit_review(req).await
    }

    async fn fix_attempt(
        &self,
        req: pb::FixAttemptRequest,
    ) -> Result<pb::FixAttemptResponse, ApiError> {
        if let Some(why) = self.setup.storage.failing() {
            return Err(ApiError::Busy(format!(
                "node {} takes no attempt: {why}",
                self.setup.name
            )));
        }
        match self.fixes.get() {
            Some(worker) => worker.run(req).await,
            None => Err(ApiError::Unavailable(format!(
                "node {} runs no fix attempts",
                self.setup.name
            ))),
        }
    }

    async fn watch(&self, flow_id: &str) -> Result<EventStream, ApiError> {
        // A review taken over here: this node's own log starts at the takeover, so a watcher
        // switching here from the silent old conductor would miss what happened before.
        let taken_over = self
            .flows
            .lock()
            .map_err(internal)?
            .get(flow_id)
            .is_some_and(|f| f.taken_over);
        if taken_over {
            if let Some(control) = self.control.get() {
                if control.plane().facts_since(flow_id, usize::MAX).is_some() {
                    return Ok(watch_replicated(control.clone(), flow_id.to_string()));
                }
            }
        }
        if !self.conducts(flow_id) {
            // Running or finished elsewhere: told from the facts this node's replica holds,
            // from the start. A client that switched here from a silent node then misses no
            // event, even when the review ended while it was switching (it drops what it
            // already showed).
            if let Some(control) = self.control.get() {
                if control.plane().facts_since(flow_id, usize::MAX).is_some() {
                    return Ok(watch_replicated(control.clone(), flow_id.to_string()));
                }
            }
            // Finished elsewhere and its facts compacted away: its end is in the replicated
            // report.
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
                    // Still running here — unless its report is already agreed: the control
                    // plane commits it (and a replica's stream ends) a moment before the run
                    // here hands it over, and a client asks for it right then.
                    None if s.abort.is_some() => {
                        drop(f);
                        match self.replicated_report(flow_id) {
                            Some(json) => Some(serde_json::from_str(&json).map_err(internal)?),
                            None => {
                                return Err(ApiError::Running(format!(
                                    "review {flow_id} is still running"
                                )))
                            }
                        }
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
        if quorum_runtime::conductor::cancel_review(flow_id, "cancelled through the API").await {
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

    fn node_name(&self) -> String {
        self.setup.name.clone()
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
            storage: self.setup.storage.failing().unwrap_or_default(),
            api_url: self.setup.advertised_addr.clone(),
            control: String::new(),
            replicated: 0,
        }])
    }

    async fn change_voters(
        &self,
        add: Vec<String>,
        remove: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        let Some(control) = self.control.get() else {
            return Err(ApiError::Unavailable(
                "this node runs no control plane (start the nodes with --voters)".into(),
            ));
        };
        // A node to add must be up in the cluster (a typo or a machine not yet joined is
        // refused at once, not after the leader's catch-up wait).
        let live: Vec<String> = self
            .cluster_status()
            .await?
            .into_iter()
            .filter(|n| n.alive)
            .map(|n| n.name)
            .collect();
        if let Some(absent) = add.iter().find(|a| !live.contains(a)) {
            return Err(ApiError::InvalidArgument(format!(
                "{absent} is not a live member of the cluster: start it with --join, and wait until `quorum cluster status` lists it as up"
            )));
        }
        control
            .plane()
            .change_voters(quorum_control::VoterChange { add, remove })
            .await
            .map_err(|e| match e {
                quorum_control::ChangeError::Refused(m) => ApiError::InvalidArgument(m),
                quorum_control::ChangeError::Unavailable(m) => ApiError::Unavailable(m),
            })
    }
}
