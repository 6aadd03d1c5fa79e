//! `quorum node` and `quorum review --cluster`: glue between the CLI, the node service and the
//! API client.

use crate::commands::{
    backend_configs, data_dir, load_settings, node_name, print_outcome, ready_backends,
    write_reports,
};
use crate::exit::{incomplete, ExitCode};
use crate::settings;
use crate::{NodeArgs, ReviewArgs};
use anyhow::{bail, Context, Result};
use quorum_api::{pb, ApiClient};
use quorum_core::pack::ContextPack;
use quorum_core::report::{Report, ReviewStatus};
use quorum_node::{NodeService, NodeSetup};
use quorum_runtime::Progress;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::Arc;

const TOKEN_ENV: &str = "QUORUM_API_TOKEN";

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

pub async fn node(args: NodeArgs) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    if args.listen.is_some() || !args.join.is_empty() {
        bail!("multi-node clustering (--listen/--join) is not available in this build; run `quorum node --api ADDR` for a single-node service");
    }
    let Some(api) = &args.api else {
        bail!("nothing to serve: pass --api HOST:PORT (and set QUORUM_API_TOKEN or --token-file)");
    };
    let api_addr: SocketAddr = api.parse().with_context(|| {
        format!("invalid --api address {api:?} (expected host:port, e.g. 127.0.0.1:7400)")
    })?;
    if !is_loopback(&api_addr) && !args.insecure {
        bail!("refusing to serve the API on non-loopback {api_addr} without TLS; put it behind a TLS proxy or pass --insecure");
    }
    let token = quorum_api::load_token(TOKEN_ENV, args.token_file.as_deref())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let configs = backend_configs(&args.backend, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend KIND=URL or add [[backends]] to the config");
    }
    let name = args.name.clone().unwrap_or_else(|| node_name(&settings));
    let model = args
        .backend
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let backends = ready_backends(
        &configs,
        &model,
        &settings.models,
        settings.sensitive,
        &name,
    )
    .await?;
    let listener = tokio::net::TcpListener::bind(api_addr)
        .await
        .with_context(|| format!("cannot listen on {api_addr}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let service = Arc::new(NodeService::new(NodeSetup {
        name: name.clone(),
        data: data_dir(&args.backend.common, &settings),
        backends,
        personas_dir: settings::data_dir(&settings.personas_dir, "personas")?,
        flows_dir: settings::data_dir(&settings.flows_dir, "flows")?,
        default_flow: settings.flow.clone(),
        max_concurrent: (settings.max_concurrent > 0).then_some(settings.max_concurrent),
        advertised_addr: format!("http://{bound}"),
        board: Arc::new(quorum_runtime::board::MemoryBoard::default()),
    }));
    println!("quorum node {name}: api on http://{bound}");
    let _ = std::io::stdout().flush();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(quorum_api::serve_with_listener(
        listener,
        service.clone(),
        token,
        async {
            let _ = stop_rx.await;
        },
    ));
    shutdown_signal().await;
    let running = service.running();
    if running > 0 {
        eprintln!("quorum node {name}: stopping; {running} running review(s) are interrupted and can be resumed with `quorum resume`");
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), server).await;
    Ok(ExitCode::Clean)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `quorum review PATH --cluster URL`: snapshot locally (the same exclusions as a local
/// review), upload, follow, and write the same reports with the same exit codes.
pub async fn review_remote(args: ReviewArgs, url: &str) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    let fail_on_text = args
        .fail_on
        .clone()
        .unwrap_or_else(|| settings.fail_on.clone());
    let fail_on = settings::parse_fail_on(&fail_on_text)?;
    let formats = args
        .format
        .clone()
        .unwrap_or_else(|| settings.formats.clone());
    let target = &args.path;
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory to review",
            target.display()
        );
    }
    let token = quorum_api::load_token(TOKEN_ENV, args.token_file.as_deref())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let root = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let pack = ContextPack::snapshot(&root, &settings.pack)
        .map_err(|e| anyhow::anyhow!("cannot snapshot the target: {e}"))?;
    let flow_yaml = match &args.flow {
        Some(f) if std::path::Path::new(f).is_file() => {
            Some(std::fs::read_to_string(f).with_context(|| format!("cannot read flow {f}"))?)
        }
        _ => None,
    };
    let req = pb::SubmitReviewRequest {
        target_name: root.display().to_string(),
        head_sha: pack.head_sha.clone(),
        files: pack
            .files
            .values()
            .map(|f| pb::SourceFile {
                path: f.path.clone(),
                content: f.content.as_bytes().to_vec(),
            })
            .collect(),
        flow: args
            .flow
            .clone()
            .filter(|_| flow_yaml.is_none())
            .unwrap_or_default(),
        flow_yaml,
        options: Some(pb::ReviewOptions {
            model: args.backend.model.clone().unwrap_or_default(),
            fail_on: fail_on_text,
            max_concurrent: args.max_concurrent.unwrap_or(0) as u32,
            sensitive: args.sensitive || settings.sensitive,
            verifier_model: args.verifier_model.clone().unwrap_or_default(),
        }),
    };
    let client = ApiClient::connect(url, &token)
        .await
        .map_err(|e| incomplete(format!("cannot reach the cluster: {e}")))?;
    let flow_id = client
        .submit(req)
        .await
        .map_err(|e| anyhow::anyhow!("the cluster refused the review: {e}"))?;
    if !args.quiet {
        eprintln!(
            "quorum: review {flow_id} submitted to {url} ({} files)",
            pack.len()
        );
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !args.quiet && std::io::stderr().is_terminal();
    let renderer = tokio::spawn(crate::progress::render(rx, draw));
    {
        use tokio_stream::StreamExt;
        let mut events = client
            .watch(&flow_id)
            .await
            .map_err(|e| incomplete(format!("cannot follow review {flow_id}: {e}")))?;
        while let Some(ev) = events.next().await {
            let ev = ev.map_err(|e| {
                incomplete(format!(
                    "lost the review's event stream: {e}; the review goes on, fetch it later"
                ))
            })?;
            if ev.kind == quorum_api::FINISHED_KIND {
                break;
            }
            if let Ok(p) = serde_json::from_str::<Progress>(&ev.json) {
                let _ = tx.send(p);
            }
        }
    }
    drop(tx);
    let _ = renderer.await;
    let r = client
        .report(&flow_id)
        .await
        .map_err(|e| incomplete(format!("cannot fetch the report of {flow_id}: {e}")))?;
    let report: Report =
        serde_json::from_str(&r.report_json).context("the cluster sent an unreadable report")?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("quorum-out").join(&flow_id));
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
