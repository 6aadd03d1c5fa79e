//! The conductor's view of the cluster (`ClusterExecutor`): the alive peers with their capacity,
//! shipping attempts to them and stopping them, and, when a review is taken over here, asking
//! every worker (this node's own included) for the attempts of it they still run.

use crate::cluster::{NodeAgent, CLAIM_TIMEOUT, KIND_CANCEL, KIND_CLAIM, KIND_RUN};
use quorum_cluster::{Cluster, Envelope};
use quorum_runtime::remote::{RemoteAttempt, RemoteExecutor, RemoteSlot};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The conductor's view of the cluster: alive peers with their capacity, and shipping attempts.
#[derive(Debug, Clone)]
pub struct ClusterExecutor {
    pub cluster: Cluster,
    /// How long a shipped attempt may go without a result or renewal.
    pub lease: Duration,
    /// This node's own worker: a review taken over here adopts what it runs, too.
    agent: Option<Arc<NodeAgent>>,
}

impl ClusterExecutor {
    /// The default lease: a few heartbeat deadlines, at least 5 s, so a renewal delayed behind
    /// bulk traffic does not lapse it while a silent worker is still caught quickly.
    pub fn new(cluster: Cluster, heartbeat_deadline: Duration) -> Self {
        ClusterExecutor {
            cluster,
            lease: (heartbeat_deadline * 3).max(Duration::from_secs(5)),
            agent: None,
        }
    }

    /// Claim this node's own worker's attempts too when a review is taken over here.
    pub fn with_agent(mut self, agent: Arc<NodeAgent>) -> Self {
        self.agent = Some(agent);
        self
    }
}

#[async_trait::async_trait]
impl RemoteExecutor for ClusterExecutor {
    fn peers(&self) -> Vec<RemoteSlot> {
        self.cluster
            .alive_members()
            .into_iter()
            .filter(|m| !m.is_self && m.advert.capacity > 0)
            .map(|m| RemoteSlot {
                node: m.name,
                capacity: m.advert.capacity as usize,
                models: m.advert.models,
            })
            .collect()
    }

    async fn dispatch(&self, node: &str, attempt: RemoteAttempt) -> Result<(), String> {
        let flow_id = attempt.flow_id.clone();
        let payload = serde_json::to_value(&attempt).map_err(|e| e.to_string())?;
        self.cluster
            .send(
                node,
                Envelope {
                    kind: KIND_RUN.into(),
                    flow_id,
                    payload,
                },
            )
            .await
            .map_err(|e| e.to_string())
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    async fn cancel(&self, node: &str, flow_id: &str, attempts: Vec<u64>) {
        let msg = Envelope {
            kind: KIND_CANCEL.into(),
            flow_id: flow_id.to_string(),
            payload: json!({ "attempts": attempts }),
        };
        if let Err(e) = self.cluster.send(node, msg).await {
            tracing::debug!(node, error = %e, "stop request not sent; the attempts are fenced anyway");
        }
    }

    async fn claim(&self, flow_id: &str) -> Vec<quorum_core::machine::AttemptClaim> {
        let peers: Vec<String> = self
            .cluster
            .alive_members()
            .into_iter()
            .filter(|m| !m.is_self)
            .map(|m| m.name)
            .collect();
        // Every worker at once: the review waits for the slowest answer, not their sum.
        let mut asks = tokio::task::JoinSet::new();
        for node in peers {
            let (cluster, flow_id) = (self.cluster.clone(), flow_id.to_string());
            asks.spawn(async move {
                let msg = Envelope {
                    kind: KIND_CLAIM.into(),
                    flow_id: flow_id.clone(),
                    payload: json!({}),
                };
                // The worker may wait for its replica to learn of the takeover: a margin over it.
                match cluster.request(&node, msg, CLAIM_TIMEOUT * 2).await {
                    Ok(reply) => crate::attempts::claims_of(&node, &reply.payload),
                    Err(e) => {
                        tracing::info!(node, flow = %flow_id, error = %e, "no claims from a worker; its attempts are placed again");
                        Vec::new()
                    }
                }
            });
        }
        let mut claims = match &self.agent {
            Some(agent) => agent.claim_own(flow_id).await,
            None => Vec::new(),
        };
        while let Some(answer) = asks.join_next().await {
            claims.extend(answer.unwrap_or_default());
        }
        claims
    }
}
