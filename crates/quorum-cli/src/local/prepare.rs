//! Everything `quorum review PATH` does before the review runs: the inputs checked, the flow
//! and catalog loaded, the snapshot taken, analyzers run, memory offered, backends probed, the
//! store created — a review ready to drive, or the interrupted one to continue.

use super::drive::drive_with;
use super::params::RunParams;
use crate::args::{ResumeArgs, ReviewArgs};
use crate::exit::{store_err, ExitCode};
use crate::settings;
use crate::setup::{
    backend_configs, data_dir, load_catalog, load_settings, node_name, ready_backends,
};
use anyhow::{bail, Context, Result};
use quorum_core::flows::flow::Flow;
use quorum_runtime::{Backends, FactLog, ReviewContext};
use quorum_store::{DataDir, FlowMeta};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn new_flow_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &rand[..6])
}

/// A local review ready to run: its store is created and its pack saved.
pub struct LocalReview {
    pub data: DataDir,
    pub ctx: Arc<ReviewContext>,
    pub params: RunParams,
}

impl LocalReview {
    /// Where its reports go and in which formats.
    pub fn outputs(&self) -> (&Path, &[String]) {
        (&self.params.out_dir, &self.params.formats)
    }

    /// Run it to the end as `quorum review` does (progress, reports, exit code), without the
    /// outcome lines on stdout.
    pub async fn run_silently(self, quiet: bool) -> Result<ExitCode> {
        drive_with(&self.data, self.ctx, None, &self.params, None, quiet, false).await
    }
}

pub enum Prepared {
    /// `--resume` found an interrupted review of the same target and flow.
    Resume(ResumeArgs),
    Run(LocalReview),
}

/// Everything `quorum review PATH` does before the review runs.
pub async fn prepare_review(args: &ReviewArgs) -> Result<Prepared> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    if let Some(p) = &args.profile {
        settings::parse_profile(p, "--profile")?;
    }
    let fail_on_text = args
        .fail_on
        .clone()
        .unwrap_or_else(|| settings.fail_on.clone());
    settings::parse_fail_on(&fail_on_text)?;
    let formats = args
        .format
        .clone()
        .unwrap_or_else(|| settings.formats.clone());
    settings::check_formats(&formats, "--format")?;
    if args.max_concurrent == Some(0) {
        bail!("--max-concurrent must be at least 1");
    }
    let verification = quorum_core::flows::flow::Overrides::parse(
        args.verifiers,
        args.verify_threshold.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let target = &args.path;
    if !target.exists() {
        bail!(
            "{} does not exist: pass the directory to review",
            target.display()
        );
    }
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory to review",
            target.display()
        );
    }
    let personas_dir = match &args.personas {
        Some(p) => p.clone(),
        None => settings::data_dir(&settings.personas_dir, "personas")?,
    };
    let catalog = load_catalog(&personas_dir)?;
    let flows_dir = settings::data_dir(&settings.flows_dir, "flows")?;
    let flow_name = args.flow.clone().unwrap_or_else(|| settings.flow.clone());
    let flow_path =
        Flow::locate(&flow_name, &flows_dir).map_err(|e| anyhow::anyhow!("invalid flow: {e}"))?;
    let flow_yaml = std::fs::read_to_string(&flow_path)
        .with_context(|| format!("cannot read flow {}", flow_path.display()))?;
    let mut flow =
        Flow::parse(&flow_yaml, &flow_path).map_err(|e| anyhow::anyhow!("invalid flow: {e}"))?;
    if flow.improve.is_some() && !args.improving {
        bail!(
            "flow {} reviews and then fixes what it found, in cycles: run it with `quorum fix {} --flow {}` (with --test-cmd auto, the project's tests judge each fix)",
            flow.name,
            target.display(),
            flow_name
        );
    }
    verification.apply(&mut flow.parameters);
    let coverage = settings.coverage_mode(args.coverage.as_deref())?;
    if let Some(mode) = coverage {
        flow.set_coverage(mode).map_err(|e| anyhow::anyhow!(e))?;
    }
    flow.check_personas(&catalog)
        .map_err(|e| anyhow::anyhow!("invalid flow: {e}; see `quorum personas list`"))?;
    let spec = crate::target::read_spec(&flow, args.spec.as_deref())?;
    if args.since.is_some() && flow.uses_prior() {
        bail!("--since compares with an earlier review, and flow {} already adjudicates one (--prior): drop --since", flow.name);
    }
    // With --since, the dispositions are the author's answer to that review's findings.
    let prior = crate::target::read_prior(
        &flow,
        args.prior.as_deref(),
        args.dispositions
            .as_deref()
            .filter(|_| args.since.is_none()),
    )?;
    let since_given = match &args.since {
        Some(p) => Some(crate::target::read_since(p, args.dispositions.as_deref())?),
        None => None,
    };
    if let Some(dir) = &args.apply_safe_fixes {
        crate::fixes::check_destination(target, dir)?;
    }
    let configs = backend_configs(&args.backend, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend ollama=http://127.0.0.1:11434 (or openai=URL/v1), or add [[backends]] to the config");
    }
    let root = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let data = data_dir(&args.backend.common, &settings);

    // An interrupted review of the same target and flow: continue it on request, else say so.
    if let Ok(Some(prev)) = data.find_resumable(&root.display().to_string(), &flow.name) {
        if args.resume {
            return Ok(Prepared::Resume(ResumeArgs {
                flow_id: prev.flow_id,
                backend: args.backend.clone(),
                out: args.out.clone(),
                quiet: args.quiet,
            }));
        }
        eprintln!(
            "quorum: note: review {} of this target was interrupted; continue it with `quorum resume {}` (or --resume). Starting a new review.",
            prev.flow_id, prev.flow_id
        );
    }

    let (pack, mut scope) = crate::target::snapshot(
        &root,
        &settings,
        args.diff.as_deref(),
        args.profile.as_deref(),
    )?;
    scope.spec = spec.map(|s| crate::target::place_spec(s, &root, &pack));
    scope.prior = prior.map(Box::new);
    // An invalid analyzer catalog stops the review before anything runs; the tools themselves
    // run once the models are known to be reachable.
    let analyzers = if args.no_analyzers || pack.is_empty() {
        None
    } else {
        settings.analyzers.setup(data.root())?
    };
    let repo_incremental = crate::target::repo_config_on_disk(&root)?
        .map(|c| c.incremental)
        .unwrap_or(false);
    let cache = super::params::CacheMode::chosen(
        args.no_cache,
        settings.cache.enabled,
        args.incremental || settings.cache.incremental || repo_incremental,
    );
    let since = match since_given {
        Some(b) => Some(b),
        None if cache == super::params::CacheMode::Reuse => {
            crate::target::last_completed_review(&data, &root, args.dispositions.as_deref())?
        }
        None => None,
    };
    let flow_id = new_flow_id();
    let params = RunParams {
        backends: configs,
        model: args
            .backend
            .model
            .clone()
            .unwrap_or_else(|| settings.default_model.clone()),
        verifier_model: args
            .verifier_model
            .clone()
            .or_else(|| Some(settings.verifier_model.clone()))
            .filter(|m| !m.trim().is_empty()),
        max_concurrent: args
            .max_concurrent
            .or((settings.max_concurrent > 0).then_some(settings.max_concurrent)),
        sensitive: args.sensitive || settings.sensitive,
        fail_on: fail_on_text,
        fail_on_unverified: args.fail_on_unverified,
        formats,
        out_dir: args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("quorum-out").join(&flow_id)),
        personas_dir: personas_dir.canonicalize().unwrap_or(personas_dir),
        models: settings.models.clone(),
        submitted: false,
        apply_safe_fixes: args.apply_safe_fixes.clone(),
        verification,
        coverage,
        cache,
        since: since.map(Box::new),
        events: args.events.clone(),
        explain_cache: args.explain_cache,
    };
    let node = node_name(&settings);
    let backends = if pack.is_empty() {
        // Nothing will be sent to a model; don't demand a reachable one.
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

    let mut scope = run_analyzers(analyzers.as_ref(), args.quiet, &pack, scope).await;
    if settings.memory.enabled && !args.no_memory && !pack.is_empty() {
        scope.memory = Some(Box::new(
            offer_memory(&data, &settings.memory, &root, args.quiet).await,
        ));
    }
    let started_at = chrono::Utc::now().to_rfc3339();
    let meta = FlowMeta {
        flow_id: flow_id.clone(),
        flow_name: flow.name.clone(),
        flow_yaml,
        params: serde_json::to_value(&params).context("cannot encode review parameters")?,
        target_path: root.display().to_string(),
        head_sha: pack.head_sha.clone(),
        started_at: started_at.clone(),
        started_ms: quorum_runtime::facts::now_ms(),
        node: node.clone(),
    };
    let store = data.create_flow(&meta).map_err(store_err)?;
    store.save_pack(&pack).map_err(store_err)?;
    store
        .append(&quorum_store::Event::ScopeRecorded {
            scope: scope.clone(),
        })
        .map_err(store_err)?;
    tracing::info!(flow_id = %flow_id, target = %root.display(), files = pack.len(), data_dir = %data.root().display(), "review starting");
    if !args.quiet {
        eprintln!(
            "quorum: review {flow_id} of {} ({} files)",
            root.display(),
            pack.len()
        );
    }
    let incremental = cache.open(&data, settings.cache.max_entries, args.quiet);
    let ctx = Arc::new(ReviewContext {
        review: std::sync::Arc::new(quorum_core::machine::Review {
            flow_id: flow_id.clone(),
            flow,
            catalog,
            pack,
            verifier_model: params.verifier_model.clone(),
            node,
            max_concurrent: params.max_concurrent,
            started_at,
            scope,
        }),
        backends,
        facts: FactLog::new(store),
        remote: None,
        board: Some(Arc::new(quorum_runtime::board::MemoryBoard::default())),
        incremental,
    });
    Ok(Prepared::Run(LocalReview { data, ctx, params }))
}

/// The identity a target's insights are kept under: its canonical path. It is the same for
/// every review of that checkout on this machine (whole-tree or `--diff`, any branch or
/// commit), and the data dir is this machine's anyway; a checkout moved or cloned elsewhere
/// starts with no memory rather than borrowing another tree's.
pub fn repository_identity(root: &Path) -> String {
    format!("path:{}", root.display())
}

/// The memory a review starts with: its parameters and the earlier reviews' top-k insights
/// for the planner (each offer counted as an access). An unreadable store costs the offer,
/// never the review.
async fn offer_memory(
    data: &DataDir,
    memory: &settings::MemorySettings,
    root: &Path,
    quiet: bool,
) -> quorum_core::scope::MemoryScope {
    let repository = repository_identity(root);
    let (d, repo, k, rate) = (data.clone(), repository.clone(), memory.k, memory.base_rate);
    let offered = tokio::task::spawn_blocking(move || {
        d.open_node()
            .and_then(|ns| ns.offer_insights(&repo, quorum_runtime::facts::now_ms(), k, rate))
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r.map_err(|e| e.to_string()))
    .unwrap_or_else(|e| {
        eprintln!("quorum: warning: earlier reviews' insights not offered ({e})");
        Vec::new()
    });
    if !quiet && !offered.is_empty() {
        eprintln!(
            "quorum: offering the planner {} insights from earlier reviews of this target",
            offered.len()
        );
    }
    quorum_core::scope::MemoryScope {
        repository,
        k,
        base_rate: rate,
        offered,
    }
}

/// The analyzers' leads, decided once before the review starts and recorded with its scope
/// (so `quorum resume` reuses them and remote attempts carry them). Progress lines say what
/// ran and what was skipped; nothing here fails the review.
async fn run_analyzers(
    setup: Option<&quorum_runtime::analyzers::AnalyzerSetup>,
    quiet: bool,
    pack: &quorum_core::pack::ContextPack,
    mut scope: quorum_core::scope::ReviewScope,
) -> quorum_core::scope::ReviewScope {
    let Some(setup) = setup else {
        return scope;
    };
    scope.analyzers = setup
        .run_reporting(pack, |run| {
            if !quiet {
                eprintln!("quorum: analyzer {}", run.describe());
            }
        })
        .await;
    scope
}
