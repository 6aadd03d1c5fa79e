//! A submission turned into a review: the flow located or parsed, the pack rebuilt from the
//! files sent (secrets dropped again), the spec and prior review checked, the client's scope
//! applied, analyzers run and memory offered, the review agreed with the control plane when
//! there is one, then started.

use super::state::{internal, NodeService};
use quorum_api::{pb, ApiError};
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::flows::flow::Overrides;
use quorum_core::pack::{is_secret_file_name, ContextPack};
use quorum_runtime::{FactLog, ReviewContext};
use quorum_store::FlowMeta;
use std::path::PathBuf;
use std::sync::Arc;

impl NodeService {
    /// Accept a submitted review and start it; returns its flow id.
    pub(super) async fn submit_review(
        &self,
        req: pb::SubmitReviewRequest,
    ) -> Result<String, ApiError> {
        let setup = self.setup.clone();
        // A node whose store refuses writes could not record the review's facts: it says so
        // and the client goes to another node.
        if let Some(why) = setup.storage.failing() {
            return Err(ApiError::Unavailable(format!(
                "node {} takes no new review while its store refuses writes: {why}",
                setup.name
            )));
        }
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
        // A flow that fixes what it finds changes the target, which only the machine holding it
        // can do: `quorum fix --flow` runs its cycles there.
        if flow.improve.is_some() {
            return Err(ApiError::InvalidArgument(format!(
                "flow {} reviews and then fixes what it found, which needs the target on the machine that runs it: run `quorum fix PATH --flow {}` on the machine that has the target",
                flow.name, flow.name
            )));
        }
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
        let cache_mode = match opts.cache.as_str() {
            "" | "record" => "record",
            "reuse" => "reuse",
            "off" => "off",
            other => {
                return Err(ApiError::InvalidArgument(format!(
                    "unknown cache mode {other:?}: use reuse, record or off"
                )))
            }
        };
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
                "cache": cache_mode,
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
                Ok(sink) => {
                    quorum_runtime::FactSink::on_waiting(&*sink, self.waiting_notice(&flow_id));
                    FactLog::replicated(store, sink).with_health(setup.storage.clone())
                }
                Err(e) => {
                    drop(store);
                    let _ = setup.data.delete_flow(&flow_id);
                    c.release(&flow_id);
                    return Err(ApiError::Unavailable(format!(
                        "cannot replicate the review: {e}"
                    )));
                }
            },
            None => FactLog::new(store).with_health(setup.storage.clone()),
        };
        let incremental = super::results::incremental(&setup, cache_mode);
        super::results::catch_up(
            self.control.get().map(|c| c.plane().clone()),
            &incremental,
            self.result_cursors.clone(),
        )
        .await;
        let ctx = Arc::new(ReviewContext {
            review: std::sync::Arc::new(quorum_core::machine::Review {
                flow_id: flow_id.clone(),
                flow,
                catalog,
                pack,
                verifier_model: Some(opts.verifier_model.clone()).filter(|m| !m.trim().is_empty()),
                node: setup.name.clone(),
                max_concurrent: (opts.max_concurrent > 0)
                    .then_some(opts.max_concurrent as usize)
                    .or(setup.max_concurrent),
                started_at: started_at.clone(),
                scope,
            }),
            backends,
            facts,
            remote: setup.remote.clone(),
            board: Some(self.board.clone()),
            incremental: incremental.clone(),
        });
        if scoped
            || !ctx.scope.analyzers.is_empty()
            || ctx.scope.spec.is_some()
            || ctx.scope.prior.is_some()
            || ctx.scope.memory.is_some()
        {
            // Before the first stage, as a local review records it: a survivor that takes the
            // review over, or a resume, reuses the same leads, spec and prior review.
            if let Err(e) = ctx
                .facts
                .event(quorum_store::Event::ScopeRecorded {
                    scope: ctx.scope.clone(),
                })
                .await
            {
                tracing::warn!(flow = %flow_id, error = ?e, "the review's scope was not recorded");
            }
        }
        self.start(ctx, None, req.target_name.clone(), started_at)?;
        if let Some(c) = self.control.get() {
            // Running now, so the reconciler sees it as conducted here without the claim.
            c.release(&flow_id);
        }
        tracing::info!(flow_id = %flow_id, target = %req.target_name, files = req.files.len(), "review submitted");
        Ok(flow_id)
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
