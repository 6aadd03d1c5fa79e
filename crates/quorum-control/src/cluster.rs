//! The control plane over `quorum_cluster`, both halves: [`ClusterTransport`] sends each Raft
//! message as a `Cluster::request`, and [`handle_envelope`] answers one that arrives at a node.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::network::{Transport, TransportError};
use crate::plane::ControlPlane;

/// The control plane over `quorum_cluster`: every call is a `Cluster::request` whose envelope
/// kind is the Raft message kind and whose payload is the message.
///
/// The cluster is bound after it starts, because the cluster's message handler (which routes to
/// the control plane) must exist before the cluster does.
#[derive(Clone, Default)]
pub struct ClusterTransport {
    cluster: Arc<OnceLock<quorum_cluster::Cluster>>,
}

impl ClusterTransport {
    pub fn new() -> Self {
        Self::default()
    }

    /// Use this cluster node for every call from now on. Binding twice keeps the first.
    pub fn bind(&self, cluster: quorum_cluster::Cluster) {
        let _ = self.cluster.set(cluster);
    }
}

#[async_trait::async_trait]
impl Transport for ClusterTransport {
    async fn call(
        &self,
        target: &str,
        kind: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        use quorum_cluster::ClusterError as C;
        let Some(cluster) = self.cluster.get() else {
            return Err(TransportError::Unreachable(target.to_string()));
        };
        let payload: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| TransportError::Failed(format!("cannot encode {kind}: {e}")))?;
        let env = quorum_cluster::Envelope {
            kind: kind.to_string(),
            flow_id: String::new(),
            payload,
        };
        match cluster.request(target, env, timeout).await {
            Ok(reply) => serde_json::to_vec(&reply.payload)
                .map_err(|e| TransportError::Failed(format!("cannot decode {kind} reply: {e}"))),
            Err(C::UnknownNode(n) | C::NodeLost(n)) => Err(TransportError::Unreachable(n)),
            Err(C::Timeout { node, ms }) => Err(TransportError::Timeout { node, ms }),
            Err(C::Transport(_)) => Err(TransportError::Unreachable(target.to_string())),
            Err(e) => Err(TransportError::Failed(e.to_string())),
        }
    }
}

/// The reply envelope for a control-plane request handled by `plane`: the handler a node's
/// `MessageHandler::on_request` calls for [`is_control_kind`] kinds.
pub async fn handle_envelope(
    plane: &ControlPlane,
    msg: quorum_cluster::Envelope,
) -> Result<quorum_cluster::Envelope, String> {
    let body = serde_json::to_vec(&msg.payload).map_err(|e| e.to_string())?;
    let reply = plane.answer(&msg.kind, &body).await?;
    let payload = serde_json::from_slice(&reply).map_err(|e| e.to_string())?;
    Ok(quorum_cluster::Envelope {
        kind: msg.kind,
        flow_id: msg.flow_id,
        payload,
    })
}
