//! One function per command. Each returns the exit code, or an error whose one-line message
//! tells the user what failed and what to do.

use crate::exit::{incomplete, ExitCode};
use crate::settings::{self, Settings};
use crate::{BackendArgs, Cli, Command, FlowsCommand, ModelsCommand, PersonasCommand, ReviewArgs};
use anyhow::{bail, Context, Result};
use quorum_core::catalog::Catalog;
use quorum_core::flow::Flow;
use quorum_core::pack::ContextPack;
use quorum_core::report::{Report, ReviewStatus};
use quorum_llm::BackendConfig;
use quorum_runtime::{Backends, ReviewContext};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Review(args) => review(args).await,
        Command::Personas { command, common } => personas(command, common.config.as_deref()),
        Command::Models { command: ModelsCommand::List { backend, format } } => models_list(backend, &format).await,
        Command::Resume { flow_id } => bail!(
            "cannot resume {flow_id}: this build keeps no durable review state yet; run `quorum review PATH` again"
        ),
        Command::Node { .. } => bail!(
            "cluster nodes are not available in this build; run `quorum review PATH` on one machine"
        ),
        Command::Flows { command } => {
            let what = match command {
                FlowsCommand::List => "list",
                FlowsCommand::Show { .. } => "show",
                FlowsCommand::Gc { .. } => "gc",
            };
            bail!("`quorum flows {what}` needs the durable review store, which this build does not have yet; reports are in ./quorum-out/")
        }
    }
}

fn cwd() -> Result<PathBuf> {
    std::env::current_dir().context("cannot read the current directory")
}

fn load_settings(config: Option<&Path>) -> Result<Settings> {
    Settings::load(config, &cwd()?)
}

fn load_catalog(dir: &Path) -> Result<Catalog> {
    Catalog::load(dir).map_err(|e| anyhow::anyhow!("invalid persona catalog: {e}"))
}

fn backend_configs(args: &BackendArgs, settings: &Settings) -> Result<Vec<BackendConfig>> {
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

fn node_name(settings: &Settings) -> String {
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
async fn ready_backends(
    configs: &[BackendConfig],
    model: &str,
    settings: &Settings,
    sensitive: bool,
    node: &str,
) -> Result<Backends> {
    let mut backends =
        Backends::from_configs(configs, model).map_err(|e| anyhow::anyhow!("{e}"))?;
    backends.sensitive = sensitive;
    backends.node = node.to_string();
    backends.probe(&settings.models).await.map_err(|e| {
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

async fn review(args: ReviewArgs) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    if args.cluster.is_some() {
        bail!("--cluster is not available in this build; run the review locally without it");
    }
    let fail_on = match &args.fail_on {
        Some(s) => settings::parse_fail_on(s)?,
        None => settings.fail_on_severity()?,
    };
    let formats = args
        .format
        .clone()
        .unwrap_or_else(|| settings.formats.clone());
    for f in &formats {
        if !["md", "json", "sarif"].contains(&f.as_str()) {
            bail!("unknown --format {f:?}: use md, json, sarif (comma-separated)");
        }
    }
    if args.max_concurrent == Some(0) {
        bail!("--max-concurrent must be at least 1");
    }
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
    let flow = Flow::locate(&flow_name, &flows_dir)
        .and_then(|p| Flow::load(&p))
        .map_err(|e| anyhow::anyhow!("invalid flow: {e}"))?;
    let configs = backend_configs(&args.backend, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend ollama=http://127.0.0.1:11434 (or openai=URL/v1), or add [[backends]] to the config");
    }
    let root = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let pack = ContextPack::snapshot(&root, &settings.pack)
        .map_err(|e| anyhow::anyhow!("cannot snapshot the target: {e}"))?;

    let model = args
        .backend
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let sensitive = args.sensitive || settings.sensitive;
    let node = node_name(&settings);
    let backends = if pack.is_empty() {
        // Nothing will be sent to a model; don't demand a reachable one.
        Backends::from_configs(&configs, &model).map_err(|e| anyhow::anyhow!("{e}"))?
    } else {
        ready_backends(&configs, &model, &settings, sensitive, &node).await?
    };
    let verifier_model = args
        .verifier_model
        .clone()
        .or_else(|| Some(settings.verifier_model.clone()))
        .filter(|m| !m.trim().is_empty());
    let flow_id = new_flow_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("quorum-out").join(&flow_id));
    let max_concurrent = args
        .max_concurrent
        .or((settings.max_concurrent > 0).then_some(settings.max_concurrent));
    let ctx = Arc::new(ReviewContext {
        flow_id: flow_id.clone(),
        flow,
        catalog,
        pack,
        backends,
        verifier_model,
        node,
        max_concurrent,
        started_at: chrono::Utc::now().to_rfc3339(),
    });
    tracing::info!(flow_id = %flow_id, target = %root.display(), files = ctx.pack.len(), model = %ctx.backends.default_model, sensitive, "review starting");

    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !args.quiet && std::io::stderr().is_terminal();
    let renderer = tokio::spawn(crate::progress::render(rx, draw));
    let report = quorum_runtime::run_review(ctx, Some(tx)).await;
    let _ = renderer.await;
    let report = report.map_err(|e| incomplete(format!("review could not run: {e}")))?;

    write_reports(&report, &out_dir, &formats)?;
    print_outcome(&report, &out_dir, &formats);
    Ok(match report.status {
        ReviewStatus::Failed | ReviewStatus::Partial => ExitCode::Incomplete,
        ReviewStatus::Completed => match fail_on {
            Some(t) if report.has_findings_at_or_above(t) => ExitCode::Findings,
            _ => ExitCode::Clean,
        },
    })
}

fn write_reports(report: &Report, out: &Path, formats: &[String]) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    for f in formats {
        let (name, body) = match f.as_str() {
            "md" => ("report.md", report.to_markdown()),
            "json" => ("report.json", report.to_json()),
            "sarif" => (
                "report.sarif",
                serde_json::to_string_pretty(&report.to_sarif()).unwrap_or_default(),
            ),
            _ => continue,
        };
        let path = out.join(name);
        // Write-then-rename so a reader never sees half a report.
        let tmp = out.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, body).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn print_outcome(report: &Report, out: &Path, formats: &[String]) {
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
    if !report.status_reason.is_empty() {
        println!("note: {}", report.status_reason);
    }
    let main = if formats.iter().any(|f| f == "md") {
        "report.md"
    } else if formats.iter().any(|f| f == "json") {
        "report.json"
    } else {
        "report.sarif"
    };
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
                println!("{:width$}  {:<10}  {}", p.name, p.domain, p.summary.trim());
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
            println!(
                "ok: {} personas, {} heuristics in {}",
                catalog.personas.len(),
                catalog.heuristics.len(),
                dir.display()
            );
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
