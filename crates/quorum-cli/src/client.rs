//! Talking to a node's API: the token, the CA for `https://` URLs, connecting to the first of
//! several nodes that answers, following a review's event stream across reconnects and
//! takeovers, and what a submission carries besides its options (the files, spec and prior).

use crate::exit::incomplete;
use anyhow::{bail, Result};
use quorum_api::{pb, ApiClient};
use quorum_core::pack::ContextPack;
use quorum_runtime::Progress;
use std::io::IsTerminal;

pub const TOKEN_ENV: &str = "QUORUM_API_TOKEN";

/// How long a follower keeps trying to find its review again after losing the stream (the
/// node restarting and resuming it, or another node answering for it).
const FOLLOW_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// The CA given with the global `--ca`, for `https://` cluster URLs.
static API_CA: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

pub fn set_api_ca(ca: Option<std::path::PathBuf>) {
    let _ = API_CA.set(ca);
}

/// Connect to the first node of `urls` that answers.
pub async fn connect_any(urls: &[String], token: &str) -> Result<(ApiClient, String)> {
    let ca = match API_CA.get().and_then(|c| c.as_deref()) {
        Some(path) => Some(quorum_api::read_ca(path).map_err(|e| anyhow::anyhow!("--ca: {e}"))?),
        None => None,
    };
    let mut last = String::new();
    for url in urls {
        match ApiClient::connect_with_ca(url, token, ca.as_deref()).await {
            Ok(c) => return Ok((c, url.clone())),
            Err(e) => last = format!("{url}: {e}"),
        }
    }
    Err(incomplete(format!("cannot reach the cluster ({last})")))
}

/// Follow `flow_id` to its end, reconnecting to any of `urls` when the stream is lost. Returns
/// the client of the node that holds the finished review. With `unknown_is_error`, a node
/// that has never heard of the review ends the follow at once (`flows show --watch`); a
/// review just submitted is followed through such answers instead.
pub async fn follow(
    urls: &[String],
    token: &str,
    mut client: ApiClient,
    flow_id: &str,
    quiet: bool,
    unknown_is_error: bool,
) -> Result<ApiClient> {
    use tokio_stream::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !quiet && std::io::stderr().is_terminal();
    let renderer = tokio::spawn(crate::progress::render(rx, draw));
    let mut lost_since: Option<std::time::Instant> = None;
    let mut last_error = String::new();
    // Each reconnect starts one URL further on: after a takeover the node that answered first
    // may not be the one that conducts the review now.
    let mut turn = 0usize;
    'follow: loop {
        match client.watch(flow_id).await {
            Ok(mut events) => {
                lost_since = None;
                while let Some(ev) = events.next().await {
                    match ev {
                        Ok(ev) if ev.kind == quorum_api::FINISHED_KIND => break 'follow,
                        Ok(ev) => {
                            if let Ok(p) = serde_json::from_str::<Progress>(&ev.json) {
                                let _ = tx.send(p);
                            }
                        }
                        Err(e) => {
                            last_error = e.to_string();
                            break;
                        }
                    }
                }
                if last_error.is_empty() {
                    last_error = "the event stream ended early".into();
                }
            }
            Err(quorum_api::ApiError::NotFound(m)) if unknown_is_error => {
                drop(tx);
                renderer.abort();
                bail!("no review {flow_id} on {}: {m}", urls.join(","));
            }
            Err(e) => last_error = e.to_string(),
        }
        let since = *lost_since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > FOLLOW_WINDOW {
            drop(tx);
            renderer.abort();
            return Err(incomplete(format!(
                "lost review {flow_id} ({last_error}) and no node of {} has it back after {} s; fetch it later with `quorum flows show`",
                urls.join(","),
                FOLLOW_WINDOW.as_secs()
            )));
        }
        if !quiet {
            eprintln!("quorum: lost the review's event stream ({last_error}); reconnecting");
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        turn += 1;
        let mut rotated = urls.to_vec();
        if !rotated.is_empty() {
            rotated.rotate_left(turn % urls.len());
        }
        if let Ok((c, _)) = connect_any(&rotated, token).await {
            client = c;
        }
    }
    drop(tx);
    let _ = renderer.await;
    Ok(client)
}

/// A snapshot's files as a submission carries them.
pub fn source_files(pack: &ContextPack) -> Vec<pb::SourceFile> {
    pack.files
        .values()
        .map(|f| pb::SourceFile {
            path: f.path.clone(),
            content: f.content.as_bytes().to_vec(),
        })
        .collect()
}

pub fn api_token(token_file: Option<&std::path::Path>) -> Result<String> {
    quorum_api::load_token(TOKEN_ENV, token_file).map_err(|e| anyhow::anyhow!("{e}"))
}

/// What a review sent to a cluster carries besides the pack: the spec a conformance flow
/// judges against and the prior review a finish review adjudicates, read and checked here so a
/// bad file is one line before anything is uploaded. The node checks them again against its
/// flow (which also decides whether the flow reads them at all).
pub fn review_inputs(
    spec: Option<&std::path::Path>,
    prior: Option<&std::path::Path>,
    dispositions: Option<&std::path::Path>,
    root: &std::path::Path,
    pack: &ContextPack,
) -> Result<(Option<pb::SpecText>, Option<pb::PriorReview>)> {
    let spec = match spec {
        Some(p) => {
            let spec = crate::target::place_spec(crate::target::read_spec_file(p)?, root, pack);
            Some(pb::SpecText {
                path: spec.path,
                text: spec.text,
                pack_path: spec.pack_path.unwrap_or_default(),
            })
        }
        None => None,
    };
    let prior = match (prior, dispositions) {
        (Some(p), d) => {
            let files = crate::target::PriorFiles::read(p, d)?;
            files.parse()?;
            let (dispositions_path, dispositions) = files.dispositions.unwrap_or_default();
            Some(pb::PriorReview {
                path: files.path,
                report_json: files.report,
                dispositions_path,
                dispositions,
            })
        }
        (None, Some(_)) => bail!(
            "--dispositions is only read with --prior by a flow with an adjudicator stage: use --flow finish-review --prior REPORT.json, or drop --dispositions"
        ),
        (None, None) => None,
    };
    Ok((spec, prior))
}
