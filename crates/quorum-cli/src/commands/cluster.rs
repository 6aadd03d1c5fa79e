//! `quorum cluster status|voters|init-ca|issue-cert`: every node as the cluster's API reports
//! it, changing the control plane's voters, and the private CA and node certificates for mutual
//! TLS (in `certs`).

pub mod certs;

use crate::client::{api_token, connect_any};
use crate::exit::{incomplete, ExitCode};
use anyhow::{Context, Result};

/// `quorum cluster voters add|remove|replace … --cluster URL`: the change is made by the Raft
/// leader; a refusal is one line saying why (exit 2), a cluster that cannot make it now exits 3.
pub async fn change_voters(change: crate::args::VotersCommand) -> Result<ExitCode> {
    use crate::args::VotersCommand;
    let (add, remove, api) = match change {
        VotersCommand::Add { names, api } => (names, Vec::new(), api),
        VotersCommand::Remove { names, api } => (Vec::new(), names, api),
        VotersCommand::Replace { pair, api } => {
            let Some((old, new)) = pair
                .split_once('=')
                .filter(|(o, n)| !o.is_empty() && !n.is_empty())
            else {
                anyhow::bail!("voters replace needs OLD=NEW (for example: voters replace ws2=ws4), got {pair:?}");
            };
            (vec![new.to_string()], vec![old.to_string()], api)
        }
    };
    let token = api_token(api.token_file.as_deref())?;
    let (client, url) = connect_any(&api.cluster, &token).await?;
    match client.change_voters(add, remove).await {
        Ok(voters) => {
            println!("voters: {}", voters.join(", "));
            Ok(ExitCode::Clean)
        }
        Err(quorum_api::ApiError::InvalidArgument(why)) => {
            anyhow::bail!("the voters were not changed: {why}")
        }
        Err(e) => Err(incomplete(format!(
            "the voters were not changed: {url}: {e}"
        ))),
    }
}

/// `quorum cluster status --cluster URL [--format json]`.
pub async fn cluster_status(
    urls: &[String],
    format: &str,
    token_file: Option<&std::path::Path>,
) -> Result<ExitCode> {
    let token = api_token(token_file)?;
    let (client, url) = connect_any(urls, &token).await?;
    let mut nodes = client
        .cluster_status()
        .await
        .map_err(|e| incomplete(format!("cannot read the cluster status from {url}: {e}")))?;
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    if format == "json" {
        let out: Vec<serde_json::Value> = nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "name": n.name,
                    "state": if n.state.is_empty() { if n.alive { "up" } else { "lost" } } else { n.state.as_str() },
                    "voter": n.voter,
                    "leader": n.leader,
                    "capacity": n.capacity,
                    "in_flight": n.in_flight,
                    "models": n.models,
                    "conducting": n.conducting,
                    "addr": n.addr,
                    "last_seen_ms": n.last_seen_ms,
                    "storage": if n.storage.is_empty() { "ok" } else { n.storage.as_str() },
                    "replicated": n.replicated,
                    "control": n.control,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "nodes": out }))
                .context("cannot encode the status")?
        );
        return Ok(ExitCode::Clean);
    }
    if let Some(me) = nodes.iter().find(|n| !n.control.is_empty()) {
        println!("control plane, as {} sees it: {}", me.name, me.control);
    }
    println!(
        "{:<16} {:<9} {:<10} {:>8} {:>9}  {:<28} conducting",
        "node", "state", "role", "capacity", "in flight", "models"
    );
    for n in &nodes {
        let role = match (n.voter, n.leader) {
            (_, true) => "leader",
            (true, false) => "voter",
            _ => "member",
        };
        println!(
            "{:<16} {:<9} {:<10} {:>8} {:>9}  {:<28} {}",
            n.name,
            if n.state.is_empty() {
                "up"
            } else {
                n.state.as_str()
            },
            role,
            n.capacity,
            n.in_flight,
            n.models.join(","),
            if n.conducting.is_empty() {
                "-".to_string()
            } else {
                n.conducting.join(",")
            }
        );
    }
    for n in nodes.iter().filter(|n| !n.storage.is_empty()) {
        println!(
            "\n{}: takes no new review and no attempt: its store refuses writes: {}",
            n.name, n.storage
        );
    }
    if !nodes.iter().any(|n| n.voter) {
        println!("\nno consensus group (takeover not available; start 3 or 5 nodes with the same --voters): a review survives its conducting node only by `quorum resume` (or a node restart) on that node");
    }
    Ok(ExitCode::Clean)
}
