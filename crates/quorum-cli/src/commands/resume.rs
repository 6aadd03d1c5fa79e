//! `quorum resume FLOW_ID`: continue an interrupted review from its stored facts (completed
//! tasks are never re-run), on this machine's backends; a review this node only holds a replica
//! of is rebuilt from the cluster's facts first.

use crate::args::ResumeArgs;
use crate::exit::{store_err, ExitCode};
use crate::local::drive::drive;
use crate::local::params::RunParams;
use crate::outcome::{exit_for, print_outcome, write_reports_or_say};
use crate::settings;
use crate::setup::{
    backend_configs, data_dir, load_catalog, load_settings, node_name, ready_backends,
};
use anyhow::{bail, Context, Result};
use quorum_core::flows::flow::Flow;
use quorum_core::report::Report;
use quorum_runtime::{Backends, FactLog, Resume, ReviewContext};
use quorum_store::DataDir;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A review this node never conducted, rebuilt from its replica of the cluster's facts and the
/// pack copy it holds: a review submitted to a cluster resumes on any node that took part, even
/// when the whole cluster is down. `None` when this data dir has no control plane or its
/// replica does not know the review.
fn from_cluster_replica(data: &DataDir, flow_id: &str) -> Result<Option<quorum_store::FlowStore>> {
    let control = data.root().join("control");
    let record = quorum_control::store::read_review(&control, flow_id).map_err(|e| {
        anyhow::anyhow!(
            "{e}; if `quorum node` runs on this data dir, its cluster resumes the review by itself (see `quorum cluster status`)"
        )
    })?;
    let Some(record) = record else {
        return Ok(None);
    };
    let store = quorum_node::control::rebuild_review(data, flow_id, &record).map_err(|e| {
        anyhow::anyhow!("cannot rebuild review {flow_id} from this node's replica: {e}")
    })?;
    eprintln!(
        "quorum: review {flow_id} rebuilt from this node's replica of the cluster's facts ({} facts, epoch {}, last conducted by {}); it resumes here, outside the cluster",
        record.facts.len(),
        record.epoch,
        record.conductor
    );
    Ok(Some(store))
}

pub async fn resume(args: ResumeArgs) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    let data = data_dir(&args.backend.common, &settings);
    let store = match data.open_flow(&args.flow_id) {
        Ok(store) => store,
        Err(e) => match from_cluster_replica(&data, &args.flow_id)? {
            Some(store) => store,
            None => return Err(store_err(e)),
        },
    };
    let meta = store.meta().map_err(store_err)?;
    let mut params: RunParams = serde_json::from_value(meta.params.clone())
        .map_err(|e| anyhow::anyhow!("flow {} has unreadable parameters: {e}", meta.flow_id))?;
    if !args.backend.backends.is_empty() || params.backends.is_empty() {
        params.backends = backend_configs(&args.backend, &settings)?;
    }
    if let Some(m) = &args.backend.model {
        params.model = m.clone();
    }
    // A review submitted to a node stored only the client's choices: the rest is this
    // machine's configuration.
    if params.model.trim().is_empty() {
        params.model = settings.default_model.clone();
    }
    if params.formats.is_empty() {
        params.formats = settings.formats.clone();
    }
    if params.fail_on.trim().is_empty() {
        params.fail_on = settings.fail_on.clone();
    }
    if params.out_dir.as_os_str().is_empty() {
        params.out_dir = PathBuf::from("quorum-out").join(&meta.flow_id);
    }
    if params.personas_dir.as_os_str().is_empty() {
        params.personas_dir = settings::data_dir(&settings.personas_dir, "personas")?;
    }
    if params.submitted {
        params.sensitive = params.sensitive || settings.sensitive;
    }
    if params.backends.is_empty() {
        bail!(
            "no backend configured to resume {} with: pass --backend KIND=URL",
            meta.flow_id
        );
    }
    let resume = Resume::load(&store).map_err(store_err)?;
    if let Some((status, _)) = &resume.replay.finished {
        // Nothing left to do: re-emit the stored report.
        let json = store.report().map_err(store_err)?.ok_or_else(|| {
            anyhow::anyhow!(
                "flow {} finished ({status}) but holds no report",
                meta.flow_id
            )
        })?;
        let report: Report = serde_json::from_str(&json).context("stored report is unreadable")?;
        let out_dir = args.out.clone().unwrap_or_else(|| params.out_dir.clone());
        write_reports_or_say(&report, &out_dir, &params.formats)?;
        eprintln!(
            "quorum: review {} already finished ({status}); nothing to resume",
            meta.flow_id
        );
        print_outcome(&report, &out_dir, &params.formats);
        return Ok(exit_for(
            &report,
            settings::parse_fail_on(&params.fail_on)?,
            params.fail_on_unverified,
        ));
    }
    let path = Path::new(&meta.flow_name);
    let mut flow = Flow::parse(&meta.flow_yaml, path)
        .map_err(|e| anyhow::anyhow!("stored flow is invalid: {e}"))?;
    params.verification.apply(&mut flow.parameters);
    if let Some(mode) = params.coverage {
        flow.set_coverage(mode)
            .map_err(|e| anyhow::anyhow!("cannot resume {}: {e}", meta.flow_id))?;
    }
    let catalog = load_catalog(&params.personas_dir)?;
    // The snapshot taken when the review started: what is reviewed does not change, even if
    // the directory has.
    let pack = store.load_pack().map_err(store_err)?;
    let node = node_name(&settings);
    let backends = if pack.is_empty() {
        Backends::from_configs(&params.backends, &params.model)
            .map_err(|e| anyhow::anyhow!("{e}"))?
    } else {
        ready_backends(
            &params.backends,
            &params.model,
            &params.models,
            params.sensitive,
            &node,
        )
        .await?
    };
    if !args.quiet {
        let done = resume.replay.completed.len();
        eprintln!(
            "quorum: resuming {} ({} tasks already done)",
            meta.flow_id, done
        );
    }
    let ctx = Arc::new(ReviewContext {
        review: std::sync::Arc::new(quorum_core::machine::Review {
            flow_id: meta.flow_id.clone(),
            flow,
            catalog,
            pack,
            verifier_model: params.verifier_model.clone(),
            node,
            max_concurrent: params.max_concurrent,
            started_at: meta.started_at.clone(),
            scope: resume.replay.scope.clone().unwrap_or_default(),
        }),
        backends,
        facts: FactLog::new(store),
        remote: None,
        board: Some(Arc::new(quorum_runtime::board::MemoryBoard::default())),
        incremental: params
            .cache
            .open(&data, settings.cache.max_entries, args.quiet),
    });
    drive(
        &data,
        ctx,
        Some(resume),
        &params,
        args.out.as_deref(),
        args.quiet,
    )
    .await
}
