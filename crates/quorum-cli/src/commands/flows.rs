//! `quorum flows list|show|gc|cancel`: the reviews stored in the data dir, one review's
//! record, pruning old ones, and stopping a running one (here or through a node's API).
//!
//! `flows show --watch` follows a running review first. A review running locally holds its
//! store's lock, so its database cannot be read while it runs; the watcher reads the plain
//! `meta.json` beside it and polls the lock. With `--cluster URL` it follows the node's
//! WatchReview stream with the progress display instead.

use crate::args::{CommonArgs, FlowsCommand};
use crate::client::{api_token, connect_any, follow, other_api_urls};
use crate::exit::{incomplete, store_err, ExitCode};
use crate::setup::{data_dir, load_settings};
use anyhow::{bail, Context, Result};
use quorum_core::report::Report;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// `quorum flows cancel`: through a node's API, or for a review run by a process on this
/// machine (asked to stop through its store), or recorded at once for one nobody runs.
pub async fn cancel(
    flow_id: &str,
    cluster: &[String],
    token_file: Option<&Path>,
    common: &CommonArgs,
) -> Result<ExitCode> {
    if !cluster.is_empty() {
        return cancel_remote(flow_id, cluster, token_file).await;
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

pub fn flows(command: FlowsCommand, common: &CommonArgs) -> Result<ExitCode> {
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
            println!("status:    {}", quorum_store::status_of(&replay));
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
            // Results recorded by reviews that are gone are never reused again: pruned with them.
            let kept: std::collections::HashSet<String> = data
                .list_flows()
                .map_err(store_err)?
                .into_iter()
                .map(|f| f.flow_id)
                .collect();
            match data
                .open_results(settings.cache.max_entries)
                .and_then(|cache| cache.prune(|flow| kept.contains(flow)))
            {
                Ok(n) => println!("pruned {n} recorded results of deleted reviews"),
                Err(e) => eprintln!(
                    "warning: result cache not pruned ({e}); stop the review that holds it and run gc again"
                ),
            }
            // File contents no remaining review references (each is kept once for all).
            let freed = data.collect_blobs().map_err(store_err)?;
            println!(
                "removed {} stored file contents no review references ({:.1} MiB)",
                freed.blobs,
                freed.bytes as f64 / (1024.0 * 1024.0)
            );
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

/// `flows cancel` is async and dispatched before `flows`; reaching it here is a bug in dispatch.
fn unreachable_cancel() -> Result<()> {
    bail!("internal: flows cancel was not dispatched")
}

/// `quorum flows cancel FLOW_ID --cluster URL`.
pub async fn cancel_remote(
    flow_id: &str,
    urls: &[String],
    token_file: Option<&std::path::Path>,
) -> Result<ExitCode> {
    let token = api_token(token_file)?;
    let (client, url) = connect_any(urls, &token).await?;
    let cancelled = client
        .cancel(flow_id)
        .await
        .map_err(|e| anyhow::anyhow!("cannot cancel review {flow_id} on {url}: {e}"))?;
    if cancelled {
        println!("review {flow_id} cancelled on {url}; its report says so");
    } else {
        println!("review {flow_id} had already finished on {url}; nothing to cancel");
    }
    Ok(ExitCode::Clean)
}

/// How often the lock of a locally running review is looked at.
const POLL: Duration = Duration::from_millis(300);
pub async fn watch(
    flow_id: &str,
    cluster: &[String],
    token_file: Option<&Path>,
    events: Option<&Path>,
    common: &CommonArgs,
) -> Result<ExitCode> {
    let settings = load_settings(common.config.as_deref())?;
    if !cluster.is_empty() {
        crate::client::set_api_keepalive(settings.api.keepalive());
        return watch_remote(flow_id, cluster, token_file, events).await;
    }
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
    flows(
        FlowsCommand::Show {
            flow_id: flow_id.to_string(),
            watch: false,
            cluster: Vec::new(),
            token_file: None,
            events: None,
        },
        common,
    )
}

async fn watch_remote(
    flow_id: &str,
    urls: &[String],
    token_file: Option<&Path>,
    events: Option<&Path>,
) -> Result<ExitCode> {
    let token = quorum_api::load_token("QUORUM_API_TOKEN", token_file)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (client, _) = connect_any(urls, &token).await?;
    // The same follower `review --cluster` uses: reconnects across nodes for a while, and
    // says on stderr which node it switched to (progress is drawn only on a terminal).
    let learned = other_api_urls(&client, urls).await;
    let client = follow(urls, learned, &token, client, flow_id, false, true, events).await?;
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
