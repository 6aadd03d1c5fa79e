//! `quorum flows show FLOW_ID --watch`: follow a review until it ends, then show it.
//!
//! A review running locally holds its store's lock, so its database cannot be read while it
//! runs; the watcher reads the plain `meta.json` beside it and polls the lock. With
//! `--cluster URL` it follows the node's WatchReview stream with the progress display instead.

use crate::commands::{data_dir, load_settings};
use crate::exit::{incomplete, ExitCode};
use crate::FlowsCommand;
use anyhow::{Context, Result};
use quorum_core::report::Report;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// How often the lock of a locally running review is looked at.
const POLL: Duration = Duration::from_millis(300);
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

async fn watch_remote(
    flow_id: &str,
    urls: &[String],
    token_file: Option<&Path>,
) -> Result<ExitCode> {
    let token = quorum_api::load_token("QUORUM_API_TOKEN", token_file)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (client, _) = crate::node::connect_any(urls, &token).await?;
    // The same follower `review --cluster` uses: reconnects across URLs for a while.
    let quiet = !std::io::stderr().is_terminal();
    let client = crate::node::follow(urls, &token, client, flow_id, quiet, true).await?;
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
