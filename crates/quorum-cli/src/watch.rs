//! `quorum flows show FLOW_ID --watch`: follow a review until it ends, then show it.
//!
//! A review running locally holds its store's lock, so its database cannot be read while it
//! runs; the watcher reads the plain `meta.json` beside it and polls the lock. With
//! `--cluster URL` it follows the node's WatchReview stream with the progress display instead.

use crate::commands::{data_dir, load_settings};
use crate::exit::{incomplete, ExitCode};
use crate::FlowsCommand;
use anyhow::{bail, Context, Result};
use quorum_api::ApiClient;
use quorum_core::report::Report;
use quorum_runtime::Progress;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// How often the lock of a locally running review is looked at.
const POLL: Duration = Duration::from_millis(300);
/// How long a lost event stream is retried before giving up.
const RECONNECT_WINDOW: Duration = Duration::from_secs(300);

pub async fn watch(
    flow_id: &str,
    cluster: &[String],
    token_file: Option<&Path>,
    common: &crate::CommonArgs,
) -> Result<ExitCode> {
    if !cluster.is_empty() {
        return watch_remote(flow_id, cluster, token_file).await;
    }
    let settings = load_settings(common.config.as_deref())?;
    let data = data_dir(common, &settings);
    if data.is_running(flow_id) {
        let meta_path = data.root().join("flows").join(flow_id).join("meta.json");
        let meta: Option<quorum_store::FlowMeta> = std::fs::read_to_string(&meta_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        match &meta {
            Some(m) => eprintln!(
                "quorum: review {flow_id} ({} of {}) is running on {} since {}; following it",
                m.flow_name, m.target_path, m.node, m.started_at
            ),
            None => eprintln!("quorum: review {flow_id} is running; following it"),
        }
        let spinner = std::io::stderr().is_terminal().then(|| {
            let s = indicatif::ProgressBar::new_spinner();
            s.set_message(format!("{flow_id} running"));
            s.enable_steady_tick(Duration::from_millis(120));
            s
        });
        while data.is_running(flow_id) {
            tokio::time::sleep(POLL).await;
        }
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
    }
    crate::commands::flows(
        FlowsCommand::Show {
            flow_id: flow_id.to_string(),
            watch: false,
            cluster: Vec::new(),
            token_file: None,
        },
        common,
    )
}

async fn connect_any(urls: &[String], token: &str) -> Result<ApiClient> {
    let mut last = String::new();
    for url in urls {
        match ApiClient::connect(url, token).await {
            Ok(c) => return Ok(c),
            Err(e) => last = format!("{url}: {e}"),
        }
    }
    Err(incomplete(format!("cannot reach the cluster ({last})")))
}

async fn watch_remote(
    flow_id: &str,
    urls: &[String],
    token_file: Option<&Path>,
) -> Result<ExitCode> {
    use tokio_stream::StreamExt;
    let token = quorum_api::load_token("QUORUM_API_TOKEN", token_file)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut client = connect_any(urls, &token).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let renderer = tokio::spawn(crate::progress::render(rx, std::io::stderr().is_terminal()));
    let mut lost_since: Option<std::time::Instant> = None;
    let mut seen = 0u64;
    'follow: loop {
        let why = match client.watch(flow_id).await {
            Ok(mut events) => {
                lost_since = None;
                let mut why = String::from("the event stream ended early");
                while let Some(ev) = events.next().await {
                    match ev {
                        Ok(ev) if ev.kind == quorum_api::FINISHED_KIND => break 'follow,
                        Ok(ev) => {
                            // A reconnect replays the backlog: draw each event once.
                            if ev.seq > seen {
                                seen = ev.seq;
                                if let Ok(p) = serde_json::from_str::<Progress>(&ev.json) {
                                    let _ = tx.send(p);
                                }
                            }
                        }
                        Err(e) => {
                            why = e.to_string();
                            break;
                        }
                    }
                }
                why
            }
            Err(quorum_api::ApiError::NotFound(m)) => {
                renderer.abort();
                bail!("no review {flow_id} on {}: {m}", urls.join(","));
            }
            Err(e) => e.to_string(),
        };
        let since = *lost_since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > RECONNECT_WINDOW {
            renderer.abort();
            return Err(incomplete(format!(
                "lost review {flow_id} ({why}); no node of {} has it back",
                urls.join(",")
            )));
        }
        eprintln!("quorum: lost the review's event stream ({why}); reconnecting");
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(c) = connect_any(urls, &token).await {
            client = c;
        }
    }
    drop(tx);
    let _ = renderer.await;
    let r = client
        .report(flow_id)
        .await
        .map_err(|e| incomplete(format!("cannot fetch the report of {flow_id}: {e}")))?;
    let report: Report =
        serde_json::from_str(&r.report_json).context("the node sent an unreadable report")?;
    println!("flow id:   {}", report.flow_id);
    println!("status:    {}", r.status);
    if !report.status_reason.is_empty() {
        println!("reason:    {}", report.status_reason);
    }
    println!("flow:      {}", report.flow);
    println!("target:    {}", report.target.path);
    println!("started:   {}", report.started_at);
    println!("\ntasks ({}):", report.tasks.len());
    for t in &report.tasks {
        println!(
            "  {:<12} {:<22} {:<10} attempts {} on {} ({})",
            t.id, t.persona, t.status, t.attempts, t.node, t.model
        );
    }
    println!("\nfindings ({}):", report.findings.len());
    for f in &report.findings {
        let at = match (&f.file, f.line_start) {
            (Some(file), Some(l)) => format!("{file}:{l}"),
            (Some(file), None) => file.clone(),
            _ => String::new(),
        };
        println!("  {} {:?} {} {}", f.id, f.severity, f.title, at);
    }
    Ok(ExitCode::Clean)
}
