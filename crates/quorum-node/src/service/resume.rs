//! Reviews continued from their stored facts: those this node accepted and was running when it
//! stopped, and those the control plane assigns to it from a lost conductor.

use super::state::{internal, NodeService};
use quorum_api::ApiError;
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::flows::flow::Overrides;
use quorum_runtime::{FactLog, ReviewContext};
use std::sync::Arc;

impl NodeService {
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
        let sink_given = sink.is_some();
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
        let cache_mode = meta
            .params
            .get("cache")
            .and_then(|v| v.as_str())
            .unwrap_or("record");
        let incremental = super::results::incremental(setup, cache_mode);
        let ctx = Arc::new(ReviewContext {
            review: std::sync::Arc::new(quorum_core::machine::Review {
                flow_id: flow_id.to_string(),
                flow,
                catalog,
                pack,
                verifier_model: meta
                    .params
                    .get("verifier_model")
                    .and_then(|v| v.as_str())
                    .filter(|m| !m.trim().is_empty())
                    .map(str::to_string),
                node: setup.name.clone(),
                max_concurrent: setup.max_concurrent,
                started_at: meta.started_at.clone(),
                scope: resume.replay.scope.clone().unwrap_or_default(),
            }),
            backends,
            facts: match sink {
                Some(sink) => {
                    sink.on_waiting(self.waiting_notice(flow_id));
                    FactLog::replicated(store, sink)
                }
                None => FactLog::new(store),
            }
            .with_health(setup.storage.clone()),
            remote: setup.remote.clone(),
            board: Some(self.board.clone()),
            // A review taken over or resumed keeps the cache mode it was submitted with.
            incremental: incremental.clone(),
        });
        tracing::info!(
            flow_id,
            done = resume.replay.completed.len(),
            "resuming an interrupted review"
        );
        let taken_over = sink_given;
        self.start(
            ctx,
            Some(resume),
            meta.target_path.clone(),
            meta.started_at.clone(),
        )?;
        if taken_over {
            if let Some(f) = self.flows.lock().map_err(internal)?.get_mut(flow_id) {
                f.taken_over = true;
            }
        }
        Ok(true)
    }
}
