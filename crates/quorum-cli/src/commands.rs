//! One function per command. Each returns the exit code, or an error whose one-line message
//! tells the user what failed and what to do.

use crate::exit::{incomplete, ExitCode};
use crate::settings::{self, Settings};
use crate::{
    BackendArgs, Cli, ClusterCommand, Command, FlowsCommand, ModelsCommand, PackArgs,
    PersonasCommand, ReviewArgs, TraceCommand,
};
use anyhow::{bail, Context, Result};
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::ContextPack;
use quorum_core::report::{report_format, Report, ReviewStatus, REPORT_FORMATS};
use quorum_llm::BackendConfig;
use quorum_runtime::{Backends, FactLog, Resume, ReviewContext};
use quorum_store::{DataDir, FlowMeta};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Review(args) => review(args).await,
        Command::Personas { command, common } => personas(command, common.config.as_deref()),
        Command::Models {
            command: ModelsCommand::List { backend, format },
        } => models_list(backend, &format).await,
        Command::Bench {
            command: crate::BenchCommand::Quality(args),
        } => crate::bench::quality(args).await,
        Command::Pack(args) => pack(&args),
        Command::Resume(args) => resume(args).await,
        Command::Trace { command, common } => trace(command, &common),
        Command::Node(args) => crate::node::node(args).await,
        Command::Mcp(args) => crate::mcp::serve(args).await,
        Command::Flows {
            command:
                FlowsCommand::Cancel {
                    flow_id,
                    cluster,
                    token_file,
                },
            common,
        } => cancel(&flow_id, &cluster, token_file.as_deref(), &common).await,
        Command::Flows {
            command:
                FlowsCommand::Show {
                    flow_id,
                    watch: true,
                    cluster,
                    token_file,
                },
            common,
        } => crate::watch::watch(&flow_id, &cluster, token_file.as_deref(), &common).await,
        Command::Flows { command, common } => flows(command, &common),
        Command::Cluster {
            command:
                ClusterCommand::Status {
                    cluster,
                    format,
                    token_file,
                },
        } => crate::node::cluster_status(&cluster, &format, token_file.as_deref()).await,
        Command::Cluster {
            command: ClusterCommand::InitCa { dir },
        } => crate::certs::init_ca(&dir),
        Command::Cluster {
            command:
                ClusterCommand::IssueCert {
                    name,
                    ca,
                    host,
                    out,
                },
        } => crate::certs::issue_cert(&name, &ca, &host, out.as_deref()),
    }
}

fn cwd() -> Result<PathBuf> {
    std::env::current_dir().context("cannot read the current directory")
}

pub(crate) fn load_settings(config: Option<&Path>) -> Result<Settings> {
    Settings::load(config, &cwd()?)
}

fn load_catalog(dir: &Path) -> Result<Catalog> {
    Catalog::load(dir).map_err(|e| anyhow::anyhow!("invalid persona catalog: {e}"))
}

pub(crate) fn backend_configs(
    args: &BackendArgs,
    settings: &Settings,
) -> Result<Vec<BackendConfig>> {
    if args.backends.is_empty() {
        return Ok(settings.backends.clone());
    }
    args.backends
        .iter()
        .map(|b| {
            b.parse::<BackendConfig>().map_err(|e| {
                anyhow::anyhow!(
                    "invalid --backend: {e} (example: --backend openai=http://127.0.0.1:8080/v1)"
                )
            })
        })
        .collect()
}

pub(crate) fn node_name(settings: &Settings) -> String {
    if !settings.node_name.trim().is_empty() {
        return settings.node_name.trim().to_string();
    }
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "local".into())
}

/// Probe backends and build model cards. Unreachable backends are exit 3: nothing is wrong
/// with the input, the world is not ready.
pub(crate) async fn ready_backends(
    configs: &[BackendConfig],
    model: &str,
    operator: &std::collections::BTreeMap<String, quorum_core::models::AgenticCard>,
    sensitive: bool,
    node: &str,
) -> Result<Backends> {
    let mut backends =
        Backends::from_configs(configs, model).map_err(|e| anyhow::anyhow!("{e}"))?;
    backends.sensitive = sensitive;
    backends.node = node.to_string();
    backends.probe(operator).await.map_err(|e| {
        incomplete(format!(
            "no backend reachable: {e}; start the model server, or point quorum at one with --backend ollama=URL or --backend openai=URL/v1"
        ))
    })?;
    let cards = backends.cards();
    if backends.is_auto() {
        if cards.is_empty() {
            bail!("the backend serves no model; pull one or pass --model NAME");
        }
        if sensitive
            && !cards
                .iter()
                .any(|c| c.agentic.locality != Some(quorum_core::models::Locality::Remote))
        {
            bail!("--sensitive: every configured model is remote; add a local backend");
        }
    } else if sensitive {
        let remote = cards.iter().any(|c| {
            c.name == backends.default_model
                && c.agentic.locality == Some(quorum_core::models::Locality::Remote)
        });
        if remote {
            bail!(
                "--sensitive: model {} is served by a remote host; use a local model",
                backends.default_model
            );
        }
    }
    Ok(backends)
}

fn new_flow_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &rand[..6])
}

/// What a review runs with, beyond the pack: stored in the flow's metadata so `resume` can
/// rebuild the same review.
///
/// A review submitted to a node stores only what the client chose (`submitted: true`, model,
/// sensitivity, fail-on); everything else defaults here and is filled from this machine's
/// settings when such a review is resumed by hand.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
struct RunParams {
    backends: Vec<BackendConfig>,
    model: String,
    verifier_model: Option<String>,
    max_concurrent: Option<usize>,
    sensitive: bool,
    fail_on: String,
    formats: Vec<String>,
    out_dir: PathBuf,
    personas_dir: PathBuf,
    models: std::collections::BTreeMap<String, quorum_core::models::AgenticCard>,
    /// Accepted through a node's API (the node's settings supply what is not stored).
    submitted: bool,
    /// `--apply-safe-fixes DIR`: where the fixed copy of the target goes.
    apply_safe_fixes: Option<PathBuf>,
    /// `--verifiers` / `--verify-threshold`, applied over the stored flow again on resume.
    verification: quorum_core::flows::flow::Overrides,
    /// `--coverage` (or the config's `coverage`), applied over the stored flow again on
    /// resume; `None` = the flow's own mode.
    coverage: Option<quorum_core::flows::flow::CoverageMode>,
}

pub(crate) fn data_dir(common: &crate::CommonArgs, settings: &Settings) -> DataDir {
    match (&common.data_dir, settings.data_dir.trim()) {
        (Some(d), _) => DataDir::new(d),
        (None, d) if !d.is_empty() => DataDir::new(d),
        _ => DataDir::new(DataDir::default_location()),
    }
}

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

/// Store errors are input errors (exit 2): a corrupt store is named, never silently reset.
fn store_err(e: quorum_store::StoreError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

async fn review(args: ReviewArgs) -> Result<ExitCode> {
    if !args.cluster.is_empty() {
        if args.apply_safe_fixes.is_some() {
            bail!("--apply-safe-fixes needs the target on this machine: drop --cluster, or apply the fixes listed in the report by hand");
        }
        let urls = args.cluster.clone();
        return crate::node::review_remote(args, &urls).await;
    }
    match prepare_review(&args).await? {
        Prepared::Resume(r) => resume(r).await,
        Prepared::Run(l) => {
            drive(
                &l.data,
                l.ctx,
                None,
                &l.params,
                args.out.as_deref(),
                args.quiet,
            )
            .await
        }
    }
}

/// A local review ready to run: its store is created and its pack saved.
pub(crate) struct LocalReview {
    pub data: DataDir,
    pub ctx: Arc<ReviewContext>,
    params: RunParams,
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

pub(crate) enum Prepared {
    /// `--resume` found an interrupted review of the same target and flow.
    Resume(crate::ResumeArgs),
    Run(LocalReview),
}

/// Everything `quorum review PATH` does before the review runs.
pub(crate) async fn prepare_review(args: &ReviewArgs) -> Result<Prepared> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    if let Some(p) = &args.profile {
        crate::target::parse_profile(p, "--profile")?;
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
    verification.apply(&mut flow.parameters);
    let coverage = settings.coverage_mode(args.coverage.as_deref())?;
    if let Some(mode) = coverage {
        flow.set_coverage(mode).map_err(|e| anyhow::anyhow!(e))?;
    }
    flow.check_personas(&catalog)
        .map_err(|e| anyhow::anyhow!("invalid flow: {e}; see `quorum personas list`"))?;
    let spec = crate::target::read_spec(&flow, args.spec.as_deref())?;
    let prior =
        crate::target::read_prior(&flow, args.prior.as_deref(), args.dispositions.as_deref())?;
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
            return Ok(Prepared::Resume(crate::ResumeArgs {
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
        settings.analyzers.setup()?
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
    let ctx = Arc::new(ReviewContext {
        flow_id: flow_id.clone(),
        flow,
        catalog,
        pack,
        backends,
        verifier_model: params.verifier_model.clone(),
        node,
        max_concurrent: params.max_concurrent,
        started_at,
        facts: FactLog::new(store),
        remote: None,
        board: Some(Arc::new(quorum_runtime::board::MemoryBoard::default())),
        scope,
    });
    Ok(Prepared::Run(LocalReview { data, ctx, params }))
}

/// The identity a target's insights are kept under: its canonical path. It is the same for
/// every review of that checkout on this machine (whole-tree or `--diff`, any branch or
/// commit), and the data dir is this machine's anyway; a checkout moved or cloned elsewhere
/// starts with no memory rather than borrowing another tree's.
pub(crate) fn repository_identity(root: &Path) -> String {
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

pub(crate) type RuntimeLayer = std::collections::BTreeMap<
    String,
    std::collections::BTreeMap<String, quorum_core::models::RuntimeStats>,
>;
pub(crate) const RUNTIME_KEY: &str = "model_runtime";

/// Run (or continue) a review to its end, or until ctrl-c, and write its reports.
async fn drive(
    data: &DataDir,
    ctx: Arc<ReviewContext>,
    resume: Option<Resume>,
    params: &RunParams,
    out: Option<&Path>,
    quiet: bool,
) -> Result<ExitCode> {
    drive_with(data, ctx, resume, params, out, quiet, true).await
}

/// `drive`, saying the outcome on stdout or not (a caller with output of its own there).
async fn drive_with(
    data: &DataDir,
    ctx: Arc<ReviewContext>,
    resume: Option<Resume>,
    params: &RunParams,
    out: Option<&Path>,
    quiet: bool,
    say_outcome: bool,
) -> Result<ExitCode> {
    let flow_id = ctx.flow_id.clone();
    // The runtime layer of the model cards is learned across reviews on this machine.
    let node_store = data.open_node().map_err(|e| tracing::debug!(error = %e, "node store unavailable; runtime model stats not persisted")).ok();
    if let Some(ns) = &node_store {
        if let Ok(Some(learned)) = ns.get::<RuntimeLayer>(RUNTIME_KEY) {
            ctx.backends.apply_runtime(&learned);
        }
    }
    let backends = ctx.backends.clone();
    let ctx_memory = ctx.scope.memory.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !quiet && std::io::stderr().is_terminal();
    let pack = params.apply_safe_fixes.as_ref().map(|_| ctx.pack.clone());
    let hint = crate::progress::Hint::from_backends(&ctx.backends, ctx.max_concurrent());
    let renderer = tokio::spawn(crate::progress::render_with(rx, draw, hint));
    let run = quorum_runtime::run_review_from(ctx, Some(tx), resume);
    // `quorum flows cancel` from another process leaves a request beside the store.
    let cancel_watch = {
        let data = data.clone();
        let id = flow_id.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
            loop {
                tick.tick().await;
                let (d, i) = (data.clone(), id.clone());
                let asked = tokio::task::spawn_blocking(move || d.cancel_requested(&i))
                    .await
                    .ok()
                    .flatten();
                if let Some(reason) = asked {
                    let reason = if reason.trim().is_empty() {
                        "cancelled with quorum flows cancel".to_string()
                    } else {
                        reason.trim().to_string()
                    };
                    quorum_runtime::remote::cancel_review(&id, &reason).await;
                    break;
                }
            }
        })
    };
    let report = tokio::select! {
        r = run => { cancel_watch.abort(); r },
        _ = tokio::signal::ctrl_c() => {
            renderer.abort();
            // Every fact so far is already durable; the flow reads as interrupted.
            return Err(incomplete(format!("interrupted; continue with `quorum resume {flow_id}`")));
        }
    };
    let _ = renderer.await;
    if let Some(ns) = &node_store {
        if let Err(e) = ns.put(RUNTIME_KEY, &backends.runtime_snapshot()) {
            tracing::warn!(error = %e, "cannot persist runtime model stats");
        }
    }
    let mut report = report.map_err(|e| incomplete(format!("review could not run: {e}")))?;
    if let (Some(memory), Some(ns)) = (&ctx_memory, &node_store) {
        // The same distillation the report counted in `insights.recorded`.
        let now = quorum_runtime::facts::now_ms();
        let learned = quorum_core::memory::distill_report(&report, &memory.repository, now);
        let n = learned.len();
        if n > 0 {
            match ns.record_insights(&memory.repository, learned, now, memory.base_rate) {
                Ok(_) if !quiet => {
                    eprintln!("quorum: kept {n} insights for the next review of this target")
                }
                Ok(_) => {}
                Err(e) => eprintln!("quorum: warning: this review's insights not kept ({e})"),
            }
        }
    }
    let out_dir = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| params.out_dir.clone());
    if let (Some(dir), Some(pack)) = (&params.apply_safe_fixes, &pack) {
        report.safe_fixes = crate::fixes::write_fixed_copy(pack, &report.findings, dir)?;
    }
    write_reports(&report, &out_dir, &params.formats)?;
    if say_outcome {
        print_outcome(&report, &out_dir, &params.formats);
    }
    let fail_on = settings::parse_fail_on(&params.fail_on)?;
    Ok(exit_for(&report, fail_on))
}

/// `flows cancel` is async and dispatched before `flows`; reaching it here is a bug in dispatch.
fn unreachable_cancel() -> Result<()> {
    bail!("internal: flows cancel was not dispatched")
}

/// DESIGN §6, with the conformance gate folded into 1: a completed conformance review exits 1
/// when any criterion is not met (or, as any review, a finding is at/above --fail-on), 0 only
/// when every criterion is met; partial or failed is 3 whatever the criteria say. A completed
/// finish review exits 1 when a prior finding still stands (still_present, disputed_rejected)
/// or a new finding is at/above --fail-on; a finding of this review at a prior finding's
/// anchor is that finding again, adjudicated, and is not counted twice.
pub(crate) fn exit_for(
    report: &Report,
    fail_on: Option<quorum_core::review::finding::Severity>,
) -> ExitCode {
    match report.status {
        ReviewStatus::Failed | ReviewStatus::Partial => ExitCode::Incomplete,
        ReviewStatus::Completed if report.conformance.as_ref().is_some_and(|c| !c.ready) => {
            ExitCode::Findings
        }
        ReviewStatus::Completed if report.adjudication.is_some() => {
            match (fail_on, &report.adjudication) {
                (Some(t), Some(a)) if a.blocks(&report.findings, t) => ExitCode::Findings,
                _ => ExitCode::Clean,
            }
        }
        ReviewStatus::Completed => match fail_on {
            Some(t) if report.has_findings_at_or_above(t) => ExitCode::Findings,
            _ => ExitCode::Clean,
        },
    }
}

pub async fn resume(args: crate::ResumeArgs) -> Result<ExitCode> {
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
        write_reports(&report, &out_dir, &params.formats)?;
        eprintln!(
            "quorum: review {} already finished ({status}); nothing to resume",
            meta.flow_id
        );
        print_outcome(&report, &out_dir, &params.formats);
        return Ok(exit_for(&report, settings::parse_fail_on(&params.fail_on)?));
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
        flow_id: meta.flow_id.clone(),
        flow,
        catalog,
        pack,
        backends,
        verifier_model: params.verifier_model.clone(),
        node,
        max_concurrent: params.max_concurrent,
        started_at: meta.started_at.clone(),
        facts: FactLog::new(store),
        remote: None,
        board: Some(Arc::new(quorum_runtime::board::MemoryBoard::default())),
        scope: resume.replay.scope.clone().unwrap_or_default(),
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

/// `quorum flows cancel`: through a node's API, or for a review run by a process on this
/// machine (asked to stop through its store), or recorded at once for one nobody runs.
async fn cancel(
    flow_id: &str,
    cluster: &[String],
    token_file: Option<&Path>,
    common: &crate::CommonArgs,
) -> Result<ExitCode> {
    if !cluster.is_empty() {
        return crate::node::cancel_remote(flow_id, cluster, token_file).await;
    }
    let settings = load_settings(common.config.as_deref())?;
    let data = data_dir(common, &settings);
    let reason = "cancelled with quorum flows cancel";
    match data.cancel_flow(flow_id, reason).map_err(store_err)? {
        quorum_store::CancelOutcome::AlreadyFinished => {
            println!("review {flow_id} had already finished; nothing to cancel");
        }
        quorum_store::CancelOutcome::Recorded => {
            println!("review {flow_id} was not running; it is recorded as cancelled (partial)");
        }
        quorum_store::CancelOutcome::Requested => {
            // The running process stops within a fraction of a second and writes its report.
            for _ in 0..240 {
                if !data.is_running(flow_id) {
                    println!("review {flow_id} cancelled; its report says so");
                    return Ok(ExitCode::Clean);
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            return Err(incomplete(format!(
                "asked review {flow_id} to stop, but the process running it has not finished after 60 s"
            )));
        }
    }
    Ok(ExitCode::Clean)
}

pub fn flows(command: FlowsCommand, common: &crate::CommonArgs) -> Result<ExitCode> {
    let settings = load_settings(common.config.as_deref())?;
    let data = data_dir(common, &settings);
    match command {
        FlowsCommand::Cancel { .. } => unreachable_cancel()?,
        FlowsCommand::List => {
            let flows = data.list_flows().map_err(store_err)?;
            if flows.is_empty() {
                println!("no stored reviews in {}", data.root().display());
                return Ok(ExitCode::Clean);
            }
            println!(
                "{:<24} {:<12} {:<8} {:>9} {:>8}  {:<25} target",
                "flow id", "status", "flow", "tasks", "findings", "started"
            );
            for f in flows {
                println!(
                    "{:<24} {:<12} {:<8} {:>9} {:>8}  {:<25} {}",
                    f.flow_id,
                    f.status.to_string(),
                    f.flow_name,
                    format!("{}/{}", f.tasks_done, f.tasks_total),
                    f.findings,
                    f.started_at,
                    f.target_path
                );
            }
        }
        FlowsCommand::Show { flow_id, .. } => {
            let store = data.open_flow(&flow_id).map_err(store_err)?;
            let meta = store.meta().map_err(store_err)?;
            let replay = store.replay().map_err(store_err)?;
            let events = store.events().map_err(store_err)?;
            println!("flow id:   {}", meta.flow_id);
            println!("status:    {}", replay.status());
            if let Some((_, reason)) = &replay.finished {
                if !reason.is_empty() {
                    println!("reason:    {reason}");
                }
            }
            println!("flow:      {}", meta.flow_name);
            println!("target:    {}", meta.target_path);
            println!("head:      {}", meta.head_sha.as_deref().unwrap_or("-"));
            if let Some(scope) = &replay.scope {
                if let Some(c) = &scope.change {
                    println!(
                        "change:    {} ({}..{}), {} files",
                        c.spec,
                        c.base.get(..12).unwrap_or(&c.base),
                        c.head.get(..12).unwrap_or(&c.head),
                        c.files.len()
                    );
                }
                println!("profile:   {}", scope.profile.as_str());
                for run in &scope.analyzers.runs {
                    println!("analyzer:  {}", run.describe());
                }
            }
            println!("started:   {}", meta.started_at);
            println!("node:      {}", meta.node);
            println!("events:    {}", events.len());
            if let Some((c, fallback)) = &replay.classification {
                println!(
                    "domain:    {}{}",
                    c.domain,
                    if *fallback { " (from facts)" } else { "" }
                );
            }
            if let Some((tasks, rejected)) = &replay.plan {
                println!(
                    "\ntasks ({} planned, {} rejected):",
                    tasks.len(),
                    rejected.len()
                );
                for t in tasks {
                    let state = if let Some(f) = replay.completed.get(&t.id) {
                        format!("completed, {} findings", f.len())
                    } else if let Some(why) = replay.abandoned.get(&t.id) {
                        format!("abandoned: {why}")
                    } else {
                        "not finished".to_string()
                    };
                    let attempts = replay.attempts.get(&t.id).copied().unwrap_or(0);
                    println!(
                        "  {:<6} {:<24} attempts {attempts}  {state}",
                        t.id, t.persona
                    );
                }
            }
        }
        FlowsCommand::Gc { older_than } => {
            let deleted = data
                .gc(std::time::Duration::from_secs(
                    older_than.saturating_mul(86_400),
                ))
                .map_err(store_err)?;
            println!(
                "deleted {} reviews older than {older_than} days",
                deleted.len()
            );
            for id in &deleted {
                println!("  {id}");
            }
            // The cluster blackboard's notes of those reviews, and any older than DAYS, go too
            // (a node that was clustered on this data dir keeps its replica there).
            let cutoff = (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0))
            .saturating_sub(older_than.saturating_mul(86_400_000));
            // Insights older than DAYS, or faded below [memory] prune_below, go as well.
            let now = quorum_runtime::facts::now_ms();
            match data.open_node().and_then(|ns| {
                ns.prune_insights(
                    now,
                    settings.memory.base_rate,
                    settings.memory.prune_below,
                    Some(older_than.saturating_mul(86_400_000)),
                )
            }) {
                Ok(n) => println!("pruned {n} insights"),
                Err(e) => eprintln!(
                    "warning: insights not pruned ({e}); stop the process that holds the data dir and run gc again"
                ),
            }
            match quorum_cluster::prune_replica(&data.root().join("cluster"), &deleted, cutoff) {
                Ok(0) => {}
                Ok(n) => println!("pruned {n} blackboard notes"),
                Err(e) => eprintln!(
                    "warning: blackboard not pruned ({e}); a node running on this data dir keeps its blackboard to {} reviews itself",
                    quorum_cluster::MAX_FLOWS
                ),
            }
        }
    }
    Ok(ExitCode::Clean)
}

pub fn trace(command: TraceCommand, common: &crate::CommonArgs) -> Result<ExitCode> {
    let settings = load_settings(common.config.as_deref())?;
    let data = data_dir(common, &settings);
    let TraceCommand::Export { flow_id, out } = command;
    let store = data.open_flow(&flow_id).map_err(store_err)?;
    let n = match out {
        Some(path) => {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            );
            let n = quorum_store::trace_export(&store, &mut f).map_err(store_err)?;
            std::io::Write::flush(&mut f)
                .with_context(|| format!("cannot write {}", path.display()))?;
            n
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            quorum_store::trace_export(&store, &mut lock).map_err(store_err)?
        }
    };
    eprintln!("quorum: exported {n} attempts");
    Ok(ExitCode::Clean)
}

/// Entries per list in `quorum pack` text output before "... and N more".
const PACK_TEXT_LIMIT: usize = 40;

/// `quorum pack PATH`: the snapshot a review would take, with the same config layering and
/// `pack.*` settings, and a reason for everything it leaves out. No backend is touched.
fn pack(args: &PackArgs) -> Result<ExitCode> {
    let settings = load_settings(args.common.config.as_deref())?;
    let target = &args.path;
    if !target.exists() {
        bail!(
            "{} does not exist: pass the directory a review would read",
            target.display()
        );
    }
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory a review would read",
            target.display()
        );
    }
    let listing = ContextPack::survey(target, &settings.pack)
        .map_err(|e| anyhow::anyhow!("cannot snapshot the target: {e}"))?
        .listing();
    let body = if args.format == "json" {
        let mut json =
            serde_json::to_string_pretty(&listing).context("cannot encode the listing")?;
        json.push('\n');
        json
    } else {
        listing.to_text((!args.all).then_some(PACK_TEXT_LIMIT))
    };
    let mut stdout = std::io::stdout().lock();
    match std::io::Write::write_all(&mut stdout, body.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut stdout))
    {
        // `quorum pack . | head` is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(ExitCode::Clean),
    }
}

pub(crate) fn write_reports(report: &Report, out: &Path, formats: &[String]) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    // The merge-request formats name files relative to the repository, which a review of a
    // subdirectory of a checkout is not the root of.
    let repo_prefix =
        quorum_core::pack::git_work_tree_prefix(Path::new(&report.target.path)).unwrap_or_default();
    for f in formats {
        let Some(format) = report_format(f) else {
            continue;
        };
        let Some(body) = report.render(format.name, &repo_prefix) else {
            continue;
        };
        let name = format.file_name;
        write_atomically(out, name, &body)?;
    }
    // A conformance review's gate is its own file whatever the formats: scripts read it.
    if let Some(c) = &report.conformance {
        write_atomically(out, MERGE_READINESS, &c.to_json())?;
    }
    Ok(())
}

/// The file a conformance review writes its merge gate to, beside the reports.
pub(crate) const MERGE_READINESS: &str = "merge-readiness.json";

/// Write-then-rename so a reader never sees half a file.
fn write_atomically(out: &Path, name: &str, body: &str) -> Result<()> {
    let path = out.join(name);
    let tmp = out.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, body).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

pub(crate) fn print_outcome(report: &Report, out: &Path, formats: &[String]) {
    let mut counts = [0usize; 4];
    for f in &report.findings {
        counts[f.severity as usize] += 1;
    }
    let status = format!("{:?}", report.status).to_lowercase();
    println!(
        "review {status}: {} findings (P0 {}, P1 {}, P2 {}, P3 {}), {} dropped, {} residual",
        report.findings.len(),
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        report.dropped.len(),
        report.residual_concerns.len()
    );
    if let Some(d) = &report.target.diff {
        println!(
            "change {}: {} files changed; {} pre-existing findings off the change",
            d.spec,
            d.files_changed,
            report.pre_existing.len()
        );
    }
    if let Some(c) = &report.conformance {
        let (met, unmet, divergent) = c.counts();
        println!(
            "conformance: {} ({met} met, {unmet} unmet, {divergent} divergent of {} criteria): {}",
            if c.ready { "ready" } else { "not ready" },
            c.criteria.len(),
            out.join(MERGE_READINESS).display()
        );
    }
    if let Some(a) = &report.adjudication {
        let s = &a.summary;
        println!(
            "finish review: {} fixed, {} still present, {} disputed accepted, {} disputed rejected of {} prior findings; {} new",
            s.fixed,
            s.still_present,
            s.disputed_accepted,
            s.disputed_rejected,
            a.findings.len(),
            s.new
        );
    }
    if !report.status_reason.is_empty() {
        println!("note: {}", report.status_reason);
    }
    // The first written file in REPORT_FORMATS order: report.md when there is one.
    let main = REPORT_FORMATS
        .iter()
        .find(|f| formats.iter().any(|w| w == f.name))
        .map_or("report.md", |f| f.file_name);
    println!("report: {}", out.join(main).display());
}

fn personas(command: PersonasCommand, config: Option<&Path>) -> Result<ExitCode> {
    let settings = load_settings(config)?;
    let dir = settings::data_dir(&settings.personas_dir, "personas")?;
    let catalog = load_catalog(&dir)?;
    match command {
        PersonasCommand::List => {
            let width = catalog.personas.keys().map(|k| k.len()).max().unwrap_or(0);
            for p in catalog.personas.values() {
                let domain = if p.is_reviewer() {
                    p.domain.clone()
                } else {
                    p.kind.as_str().to_string()
                };
                println!("{:width$}  {:<10}  {}", p.name, domain, p.summary.trim());
            }
        }
        PersonasCommand::Show { name } => {
            let p = catalog
                .get(&name)
                .map_err(|e| anyhow::anyhow!("{e}; see `quorum personas list`"))?;
            println!("{}", quorum_core::weaver::persona_prefix(p, &catalog));
            println!("## Tools\n{}", p.tools.join(", "));
            println!(
                "\n## Models\nplanning: {}\nexecution: {}",
                p.models.planning, p.models.execution
            );
        }
        PersonasCommand::Check => {
            let mut domains: std::collections::BTreeMap<&str, usize> = Default::default();
            for p in catalog.reviewers() {
                *domains.entry(p.domain.as_str()).or_default() += 1;
            }
            let panel = catalog.judge_panel();
            println!(
                "ok: {} personas ({} reviewers, {} judges on {} axes, meta-judges: {}), {} heuristics in {}",
                catalog.personas.len(),
                catalog.reviewers().count(),
                panel.judges(),
                panel.axes.len(),
                panel.meta.len(),
                catalog.heuristics.len(),
                dir.display()
            );
            let by_domain: Vec<String> = domains.iter().map(|(d, n)| format!("{d} {n}")).collect();
            println!("reviewers by domain: {}", by_domain.join(", "));
        }
    }
    Ok(ExitCode::Clean)
}

async fn models_list(args: BackendArgs, format: &str) -> Result<ExitCode> {
    let settings = load_settings(args.common.config.as_deref())?;
    let configs = backend_configs(&args, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend KIND=URL or add [[backends]] to the config");
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let mut backends =
        Backends::from_configs(&configs, &model).map_err(|e| anyhow::anyhow!("{e}"))?;
    backends.node = node_name(&settings);
    backends.probe(&settings.models).await.map_err(|e| {
        incomplete(format!(
            "no backend reachable: {e}; start the model server or pass --backend KIND=URL"
        ))
    })?;
    let cards = backends.cards();
    if format == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(&cards).unwrap_or_default()
        );
        return Ok(ExitCode::Clean);
    }
    println!(
        "{:<34} {:<10} {:>7} {:<8} {:>7} {:<6} {:<6} {:<9} {:<6} {:<7}",
        "model",
        "family",
        "params",
        "quant",
        "context",
        "tools",
        "json",
        "reasoning",
        "speed",
        "local"
    );
    let tier = |t: Option<quorum_core::models::Tier>| {
        t.map(|t| t.to_string()).unwrap_or_else(|| "-".into())
    };
    for c in &cards {
        println!(
            "{:<34} {:<10} {:>7} {:<8} {:>7} {:<6} {:<6} {:<9} {:<6} {:<7}",
            c.name,
            c.family(),
            c.vendor
                .parameter_count
                .map(|p| format!("{p:.1}B"))
                .unwrap_or_else(|| "-".into()),
            c.vendor.quantization.as_deref().unwrap_or("-"),
            c.vendor
                .context_length
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            tier(c.agentic.tool_use),
            tier(c.agentic.json_compliance),
            tier(c.agentic.reasoning),
            tier(c.agentic.speed_tier),
            c.agentic
                .locality
                .map(|l| l.to_string())
                .unwrap_or_else(|| "-".into()),
        );
    }
    Ok(ExitCode::Clean)
}
