//! Talking to a node's API: the token, the CA for `https://` URLs and the keepalive cadence,
//! connecting to the first of several nodes that answers, following a review across nodes (a
//! silent or dead node is left for another that holds the review's facts), and what a
//! submission carries besides its options (the files, spec and prior).

use crate::exit::incomplete;
use anyhow::{bail, Result};
use quorum_api::{pb, ApiClient};
use quorum_core::pack::ContextPack;
use quorum_runtime::{Progress, ProgressReplay};
use std::io::IsTerminal;

pub const TOKEN_ENV: &str = "QUORUM_API_TOKEN";

/// How long a follower keeps trying to find its review again after losing the stream (the
/// node restarting and resuming it, or another node answering for it).
const FOLLOW_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);
/// While the followed node waits for a majority: how often the other nodes are asked whether
/// the review was taken over, and how long each may take to answer.
const ELSEWHERE_PROBE: std::time::Duration = std::time::Duration::from_secs(2);

/// The CA given with the global `--ca`, for `https://` cluster URLs.
static API_CA: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

/// The ping cadence of every API connection this process opens (`[api]` in the settings).
static API_KEEPALIVE: std::sync::OnceLock<quorum_api::Keepalive> = std::sync::OnceLock::new();

pub fn set_api_ca(ca: Option<std::path::PathBuf>) {
    let _ = API_CA.set(ca);
}

/// Set once, from the settings, before the first connection; later calls are ignored.
pub fn set_api_keepalive(keepalive: quorum_api::Keepalive) {
    let _ = API_KEEPALIVE.set(keepalive);
}

fn keepalive() -> quorum_api::Keepalive {
    API_KEEPALIVE.get().copied().unwrap_or_default()
}

/// Connect to the first node of `urls` that answers.
pub async fn connect_any(urls: &[String], token: &str) -> Result<(ApiClient, String)> {
    let ca = match API_CA.get().and_then(|c| c.as_deref()) {
        Some(path) => Some(quorum_api::read_ca(path).map_err(|e| anyhow::anyhow!("--ca: {e}"))?),
        None => None,
    };
    let mut last = String::new();
    for url in urls {
        match ApiClient::connect_with(url, token, ca.as_deref(), keepalive()).await {
            Ok(c) => return Ok((c, url.clone())),
            Err(e) => last = format!("{url}: {e}"),
        }
    }
    Err(incomplete(format!("cannot reach the cluster ({last})")))
}

/// `http://host:port` for `host:port`, without a trailing slash: how URLs are compared.
fn normalized(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    }
}

/// The API URLs of the other nodes `client`'s node knows, as its cluster status lists them
/// (alive or not: a node down now may be back when it is needed), leaving out `known`. Read
/// once, at submit time, so that a review given one URL can still be followed when that node
/// goes silent. Empty when the node is not in a cluster or does not answer.
pub async fn other_api_urls(client: &ApiClient, known: &[String]) -> Vec<String> {
    let known: Vec<String> = known.iter().map(|u| normalized(u)).collect();
    let Ok(Ok(nodes)) =
        tokio::time::timeout(quorum_api::CONNECT_TIMEOUT, client.cluster_status()).await
    else {
        return Vec::new();
    };
    let mut urls: Vec<String> = nodes
        .into_iter()
        .map(|n| n.api_url)
        .filter(|u| !u.is_empty())
        .map(|u| normalized(&u))
        .filter(|u| !known.contains(u))
        .collect();
    urls.dedup();
    urls
}

/// Follows one review to its end across nodes. Each stream it reads is one node's account of
/// the review; when it breaks or goes silent (the connection's pings go unanswered) the
/// follower reconnects, trying the other nodes first, and the new node replays the review from
/// its replicated facts. What was already shown is not shown again ([`ProgressReplay`]).
pub struct Follower {
    /// The URLs the user gave, then the ones the cluster listed: where to look, in order.
    urls: Vec<String>,
    /// How many of `urls` the user gave (the rest were learned from the cluster).
    given: usize,
    token: String,
    client: ApiClient,
    /// The URL `client` talks to, normalised.
    at: String,
    flow_id: String,
    unknown_is_error: bool,
    events: Option<quorum_api::ClientEventStream>,
    replay: ProgressReplay,
    streamed: bool,
    lost_since: Option<std::time::Instant>,
    /// Whether the user was told the review is being waited for (said once per loss).
    said_waiting: bool,
    /// The node followed says the review waits for a majority of voters: it may be cut off
    /// from a majority that took the review over, so the other nodes are asked now and then.
    conductor_waits: bool,
    last_error: String,
    /// The one-line notes a follower has for its user (which node it switched to, and why).
    say: Box<dyn Fn(String) + Send + Sync>,
}

impl Follower {
    /// Follow `flow_id` from `client` (connected to `at`), falling back on `urls` and then on
    /// `learned` (other nodes' API URLs from the cluster's status). With `unknown_is_error`, a
    /// node that has never heard of the review ends the follow at once (`flows show
    /// --watch`); a review just submitted is followed through such answers instead.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: ApiClient,
        urls: &[String],
        learned: Vec<String>,
        token: &str,
        flow_id: &str,
        unknown_is_error: bool,
        say: Box<dyn Fn(String) + Send + Sync>,
    ) -> Follower {
        let mut all: Vec<String> = urls.iter().map(|u| normalized(u)).collect();
        all.dedup();
        let given = all.len();
        for u in learned {
            let u = normalized(&u);
            if !all.contains(&u) {
                all.push(u);
            }
        }
        Follower {
            at: normalized(client.url()),
            urls: all,
            given,
            token: token.to_string(),
            client,
            flow_id: flow_id.to_string(),
            unknown_is_error,
            events: None,
            replay: ProgressReplay::default(),
            streamed: false,
            lost_since: None,
            said_waiting: false,
            conductor_waits: false,
            last_error: String::new(),
            say,
        }
    }

    /// The client of the node the follower reads now: after the end, one that holds the
    /// finished review.
    pub fn client(&self) -> &ApiClient {
        &self.client
    }

    /// The next event the user has not seen, or `None` once the review has finished.
    pub async fn next(&mut self) -> Result<Option<Progress>> {
        use tokio_stream::StreamExt;
        loop {
            let Some(events) = self.events.as_mut() else {
                match self.client.watch(&self.flow_id).await {
                    Ok(stream) => {
                        self.events = Some(stream);
                        self.replay.new_stream();
                        self.streamed = true;
                        self.lost_since = None;
                        self.said_waiting = false;
                    }
                    Err(quorum_api::ApiError::NotFound(m))
                        if self.unknown_is_error && !self.streamed =>
                    {
                        bail!("no review {} on {}: {m}", self.flow_id, self.urls.join(","));
                    }
                    Err(e) => {
                        self.last_error = e.to_string();
                        self.switch().await?;
                    }
                }
                continue;
            };
            let next = if self.conductor_waits {
                match tokio::time::timeout(ELSEWHERE_PROBE, events.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        self.follow_elsewhere_if_taken_over().await;
                        continue;
                    }
                }
            } else {
                events.next().await
            };
            match next {
                Some(Ok(ev)) if ev.kind == quorum_api::FINISHED_KIND => return Ok(None),
                Some(Ok(ev)) => {
                    let Ok(p) = serde_json::from_str::<Progress>(&ev.json) else {
                        continue;
                    };
                    if let Progress::Waiting { reason } = &p {
                        self.conductor_waits = reason.is_some();
                    }
                    if self.replay.admit(&p) {
                        return Ok(Some(p));
                    }
                }
                Some(Err(e)) => {
                    self.last_error = e.to_string();
                    self.events = None;
                    self.switch().await?;
                }
                None => {
                    self.last_error = "its event stream ended early".into();
                    self.events = None;
                    self.switch().await?;
                }
            }
        }
    }

    /// Connect to the next node that answers, the other nodes first; says which and why.
    async fn switch(&mut self) -> Result<()> {
        let since = *self.lost_since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > FOLLOW_WINDOW {
            return Err(incomplete(format!(
                "lost review {} ({}) and no node of {} has it back after {} s; fetch it later with `quorum flows show`",
                self.flow_id,
                self.last_error,
                self.urls.join(","),
                FOLLOW_WINDOW.as_secs()
            )));
        }
        // A pause, so a node that refuses at once is not asked in a tight loop.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let mut order = self.urls.clone();
        if let Some(i) = order.iter().position(|u| *u == self.at) {
            order.rotate_left(i + 1);
        }
        let reason = self
            .last_error
            .strip_prefix(&format!("the api at {}: ", self.at))
            .unwrap_or(&self.last_error)
            .to_string();
        let Ok((client, url)) = connect_any(&order, &self.token).await else {
            self.say_waiting(&reason);
            return Ok(());
        };
        let url = normalized(&url);
        if url == self.at {
            self.say_waiting(&reason);
        } else {
            let learned = self.urls.iter().position(|u| *u == url).unwrap_or(0) >= self.given;
            (self.say)(format!(
                "following review {} on {url}{}; {} stopped answering: {reason}",
                self.flow_id,
                if learned {
                    " (listed by the cluster at submit time)"
                } else {
                    ""
                },
                self.at,
            ));
        }
        self.client = client;
        self.at = url;
        Ok(())
    }

    /// The node followed waits for a majority of voters. If another node it knows of is on a
    /// side with a leader that sees the review conducted by another live node, or sees the
    /// followed node lost, the majority took (or takes) the review over while the followed one
    /// is cut off: follow it there.
    async fn follow_elsewhere_if_taken_over(&mut self) {
        let others: Vec<String> = self
            .urls
            .iter()
            .filter(|u| **u != self.at)
            .cloned()
            .collect();
        for url in others {
            let Ok(Ok((client, url))) =
                tokio::time::timeout(ELSEWHERE_PROBE, connect_any(&[url], &self.token)).await
            else {
                continue;
            };
            let Ok(Ok(status)) =
                tokio::time::timeout(ELSEWHERE_PROBE, client.cluster_status()).await
            else {
                continue;
            };
            let led = status.iter().any(|n| n.leader && n.alive);
            let conducted = status.iter().any(|n| {
                n.alive && n.conducting.contains(&self.flow_id) && normalized(&n.api_url) != self.at
            });
            // The side with a leader has lost the followed node: it takes (or took, and may
            // have finished) the review over, and serves it from its replica meanwhile.
            let followed_lost = status
                .iter()
                .any(|n| !n.alive && normalized(&n.api_url) == self.at);
            if led && (conducted || followed_lost) {
                let url = normalized(&url);
                (self.say)(format!(
                    "following review {} on {url}; {} waits for a majority of voters, and the majority took the review over",
                    self.flow_id, self.at
                ));
                self.client = client;
                self.at = url;
                self.events = None;
                self.conductor_waits = false;
                return;
            }
        }
    }

    /// Once per loss, when no other node could take over the following: what is waited for.
    fn say_waiting(&mut self, reason: &str) {
        if self.said_waiting {
            return;
        }
        self.said_waiting = true;
        let others = if self.urls.len() > 1 {
            "no other node answers yet"
        } else {
            "no other node is known (give several with --cluster A,B,C)"
        };
        (self.say)(format!(
            "review {}: {} stopped answering ({reason}); {others}; retrying for up to {} s",
            self.flow_id,
            self.at,
            FOLLOW_WINDOW.as_secs()
        ));
    }
}

/// Follow `flow_id` to its end (see [`Follower`]), drawing progress unless `quiet`, and
/// writing every event shown to `events` as a JSON line when given. Returns the client of the
/// node that holds the finished review.
#[allow(clippy::too_many_arguments)]
pub async fn follow(
    urls: &[String],
    learned: Vec<String>,
    token: &str,
    client: ApiClient,
    flow_id: &str,
    quiet: bool,
    unknown_is_error: bool,
    events: Option<&std::path::Path>,
) -> Result<ApiClient> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !quiet && std::io::stderr().is_terminal();
    let sink = match events {
        Some(path) => Some(crate::progress::EventLog::create(path)?),
        None => None,
    };
    let renderer = tokio::spawn(crate::progress::render_to(rx, draw, sink));
    let say: Box<dyn Fn(String) + Send + Sync> = if quiet {
        Box::new(|_| {})
    } else {
        Box::new(|line| eprintln!("quorum: {line}"))
    };
    let mut follower = Follower::new(client, urls, learned, token, flow_id, unknown_is_error, say);
    loop {
        match follower.next().await {
            Ok(Some(p)) => {
                let _ = tx.send(p);
            }
            Ok(None) => break,
            Err(e) => {
                drop(tx);
                renderer.abort();
                return Err(e);
            }
        }
    }
    drop(tx);
    let _ = renderer.await;
    Ok(follower.client)
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
