//! `quorum fix --cluster URL`: the cluster's nodes as places for fix attempts — the
//! `quorum_fix::remote::FixWorkers` seam over each node's API. The nodes are read from the
//! cluster status of the first URL that answers — every node that is up, serves an API and
//! takes attempts — and read again every few seconds, so a workstation that joins while the
//! run works takes attempts too. Contents go by hash; a node is sent only what it has not been
//! sent in this run, and what it lacks anyway (evicted, restarted) when it says so.

use crate::client::connect_any;
use anyhow::Result;
use quorum_api::{pb, ApiClient, ApiError};
use quorum_fix::remote::{missing, FixWorkers, PlacementError, ShippedAttempt, ShippedResult};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// One node that takes fix attempts.
struct NodeLink {
    name: String,
    client: ApiClient,
    capacity: usize,
    /// Hashes already sent to it in this run.
    sent: Mutex<HashSet<String>>,
}

/// How often the cluster is asked for nodes that joined.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(2);

type Links = Arc<Mutex<Vec<Arc<NodeLink>>>>;

/// The cluster's nodes, as the fix driver places attempts on them.
pub struct ClusterFixers {
    nodes: Links,
    /// Told when a node joins.
    joined: Arc<tokio::sync::Notify>,
}

/// Whether a node, as the cluster status shows it, can take fix attempts.
fn usable(n: &pb::NodeStatus) -> bool {
    n.alive
        && !n.api_url.is_empty()
        && n.storage.is_empty()
        && n.state != "draining"
        && n.state != "lost"
}

/// Connect to `n`'s API; None (said on stderr) when it does not answer, or when another node
/// answers there: a listed URL that only leads to `n` from `n`'s own machine (a loopback API
/// behind a proxy) must not send `n`'s attempts to whichever node answers it here.
async fn link(n: pb::NodeStatus, token: &str) -> Option<Arc<NodeLink>> {
    let connected = match connect_any(std::slice::from_ref(&n.api_url), token).await {
        Ok((client, _)) => match tokio::time::timeout(
            quorum_api::CONNECT_TIMEOUT,
            client.answered_by(),
        )
        .await
        .unwrap_or_else(|_| Err(quorum_api::ApiError::Unavailable("it did not answer".into())))
        {
            Ok(name) if !name.is_empty() && name != n.name => Err(format!(
                "its listed API {} answers here as node {name} (start {} with --api-url set to the URL this machine reaches it at)",
                n.api_url, n.name
            )),
            Ok(_) => Ok(client),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    match connected {
        Ok(client) => Some(Arc::new(NodeLink {
            name: n.name,
            client,
            capacity: n.capacity.max(1) as usize,
            sent: Mutex::new(HashSet::new()),
        })),
        Err(e) => {
            eprintln!("quorum: note: node {} is left out of this run: {e}", n.name);
            None
        }
    }
}

/// Every [`REFRESH`], the nodes that joined since, while the run holds its fixers.
fn watch_for_joins(
    nodes: std::sync::Weak<Mutex<Vec<Arc<NodeLink>>>>,
    joined: Arc<tokio::sync::Notify>,
    token: String,
) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH).await;
            let Some(links) = nodes.upgrade() else {
                return;
            };
            let known: Vec<Arc<NodeLink>> = links.lock().map(|l| l.clone()).unwrap_or_default();
            let mut status = None;
            for l in &known {
                if let Ok(Ok(s)) =
                    tokio::time::timeout(quorum_api::CONNECT_TIMEOUT, l.client.cluster_status())
                        .await
                {
                    status = Some(s);
                    break;
                }
            }
            for n in status.unwrap_or_default() {
                if !usable(&n) || known.iter().any(|k| k.name == n.name) {
                    continue;
                }
                if let Some(new) = link(n, &token).await {
                    if let Ok(mut l) = links.lock() {
                        l.push(new);
                    }
                    joined.notify_one();
                }
            }
        }
    });
}

impl ClusterFixers {
    /// The nodes of the cluster `urls` reach (the first that answers is asked for the rest).
    /// A node that cannot be connected to is left out, saying so; none at all is an error.
    pub async fn connect(urls: &[String], token: &str) -> Result<ClusterFixers> {
        let (first, url) = connect_any(urls, token).await?;
        let status = first.cluster_status().await.map_err(|e| {
            crate::exit::incomplete(format!("cannot read the cluster from {url}: {e}"))
        })?;
        let mut nodes = Vec::new();
        let mut status = status;
        status.sort_by(|a, b| a.name.cmp(&b.name));
        for n in status.into_iter().filter(usable) {
            if let Some(l) = link(n, token).await {
                nodes.push(l);
            }
        }
        if nodes.is_empty() {
            return Err(crate::exit::incomplete(format!(
                "the cluster at {url} lists no node that takes fix attempts (every node is lost, draining, or serves no API)"
            )));
        }
        let nodes: Links = Arc::new(Mutex::new(nodes));
        let joined = Arc::new(tokio::sync::Notify::new());
        watch_for_joins(Arc::downgrade(&nodes), joined.clone(), token.to_string());
        Ok(ClusterFixers { nodes, joined })
    }

    /// The nodes' names and capacities, for the run's first line.
    pub fn describe(&self) -> String {
        self.links()
            .iter()
            .map(|n| format!("{} ({})", n.name, n.capacity))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The blobs of `hashes`, from `contents`.
fn blobs(hashes: &[String], contents: &HashMap<String, Arc<str>>) -> Vec<pb::Blob> {
    hashes
        .iter()
        .filter_map(|h| {
            contents.get(h).map(|c| pb::Blob {
                hash: h.clone(),
                content: c.as_bytes().to_vec(),
            })
        })
        .collect()
}

fn placement_error(node: &str, e: ApiError) -> PlacementError {
    match e {
        ApiError::Busy(m) => PlacementError::Busy(m),
        // Unreachable, silent (the keepalive's verdict), or failing: off this run.
        other => PlacementError::Lost(format!("{node}: {other}")),
    }
}

impl ClusterFixers {
    fn links(&self) -> Vec<Arc<NodeLink>> {
        self.nodes.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl FixWorkers for ClusterFixers {
    async fn joined(&self) {
        self.joined.notified().await
    }

    fn nodes(&self) -> Vec<(String, usize)> {
        self.links()
            .iter()
            .map(|n| (n.name.clone(), n.capacity))
            .collect()
    }

    async fn run(
        &self,
        node: &str,
        attempt: ShippedAttempt,
        contents: Arc<HashMap<String, Arc<str>>>,
    ) -> Result<ShippedResult, PlacementError> {
        let Some(link) = self.links().into_iter().find(|n| n.name == node) else {
            return Err(PlacementError::Lost(format!("{node} is not in this run")));
        };
        let attempt_json = serde_json::to_string(&attempt)
            .map_err(|e| PlacementError::Lost(format!("the attempt could not be encoded: {e}")))?;
        let unsent = {
            let sent = link
                .sent
                .lock()
                .map_err(|_| PlacementError::Lost("poisoned".into()))?;
            missing(&attempt.tree, |h| sent.contains(h))
        };
        let mut to_send = unsent;
        // The first answer may name contents the node let go; they are sent once more.
        for _ in 0..2 {
            let req = pb::FixAttemptRequest {
                attempt_json: attempt_json.clone(),
                blobs: blobs(&to_send, &contents),
            };
            let answer = link
                .client
                .fix_attempt(req)
                .await
                .map_err(|e| placement_error(node, e))?;
            if let Ok(mut sent) = link.sent.lock() {
                sent.extend(to_send.iter().cloned());
            }
            if answer.missing.is_empty() {
                return serde_json::from_str(&answer.result_json).map_err(|e| {
                    PlacementError::Lost(format!("{node} answered with an unreadable result: {e}"))
                });
            }
            to_send = answer.missing;
        }
        Err(PlacementError::Lost(format!(
            "{node} still lacked contents after they were sent"
        )))
    }
}
