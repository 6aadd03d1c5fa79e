//! How Raft messages travel: an abstract request/reply [`Transport`] (one per node), openraft's
//! network over it, an adapter over `quorum_cluster::Cluster::request`, and an in-memory
//! transport with partitions for tests.
//!
//! Every message is JSON, so the cluster adapter can put it into an `Envelope` payload as is. An
//! append request larger than [`MAX_RPC_BYTES`] is refused before it is sent with a hint to send
//! fewer entries, which keeps every frame well under the cluster's 16 MiB limit.

use crate::{NodeId, TypeConfig};
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Envelope kinds of the control plane. A node's message handler routes requests of these kinds
/// to [`crate::ControlPlane::handle`].
pub const KIND_APPEND: &str = "raft_append";
pub const KIND_VOTE: &str = "raft_vote";
pub const KIND_SNAPSHOT: &str = "raft_snapshot";
/// A command sent by a follower to the leader to be proposed there.
pub const KIND_FORWARD: &str = "raft_forward";
/// "Are you there, and is your Raft initialised?" — used by the bootstrap.
pub const KIND_PING: &str = "raft_ping";

/// Every kind the control plane answers.
pub const CONTROL_KINDS: [&str; 5] = [
    KIND_APPEND,
    KIND_VOTE,
    KIND_SNAPSHOT,
    KIND_FORWARD,
    KIND_PING,
];

/// Is this an envelope kind for the control plane?
pub fn is_control_kind(kind: &str) -> bool {
    CONTROL_KINDS.contains(&kind)
}

/// The largest serialised request the network sends (8 MiB, half the cluster's frame limit, to
/// leave room for the envelope and JSON escaping).
pub const MAX_RPC_BYTES: usize = 8 << 20;

/// Why a call to a peer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The peer is unknown, lost or cut off; retry after a pause.
    #[error("node {0} is unreachable")]
    Unreachable(String),
    /// No reply in time.
    #[error("no reply from {node} within {ms} ms")]
    Timeout { node: String, ms: u64 },
    /// The peer answered with an error.
    #[error("{0}")]
    Failed(String),
}

/// A request/reply link to the other nodes, by node name.
#[async_trait::async_trait]
pub trait Transport: Send + Sync + 'static {
    async fn call(
        &self,
        target: &str,
        kind: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError>;
}

/// openraft's network factory: one client per peer, all over the same transport.
#[derive(Clone)]
pub struct Network {
    pub(crate) transport: Arc<dyn Transport>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            transport: self.transport.clone(),
            target,
            name: node.addr.clone(),
        }
    }
}

/// The Raft RPCs to one peer.
pub struct PeerClient {
    transport: Arc<dyn Transport>,
    target: NodeId,
    name: String,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl PeerClient {
    async fn rpc<Req, Resp, E>(
        &self,
        kind: &str,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RpcErr<E>>
    where
        Req: Serialize,
        Resp: for<'a> Deserialize<'a>,
        E: std::error::Error + for<'a> Deserialize<'a>,
    {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let reply = self
            .transport
            .call(&self.name, kind, body, option.hard_ttl())
            .await
            .map_err(|e| match e {
                TransportError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&e)),
                _ => RPCError::Network(NetworkError::new(&e)),
            })?;
        let answer: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&reply).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                BasicNode::new(&self.name),
                e,
            ))
        })
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        let size = serde_json::to_vec(&rpc).map(|b| b.len()).unwrap_or(0);
        if size > MAX_RPC_BYTES && rpc.entries.len() > 1 {
            // Ask openraft to send fewer entries, in proportion to how far over the limit we are.
            let n = rpc.entries.len() as u64;
            let hint = (n * MAX_RPC_BYTES as u64 / size as u64).clamp(1, n - 1);
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(hint),
            ));
        }
        self.rpc(KIND_APPEND, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        self.rpc(KIND_SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        self.rpc(KIND_VOTE, &rpc, &option).await
    }

    fn backoff(&self) -> openraft::network::Backoff {
        // A lost peer is retried every 200 ms rather than openraft's 500 ms, so a node that comes
        // back catches up quickly; the cluster's heartbeats make an unreachable answer cheap.
        openraft::network::Backoff::new(std::iter::repeat(Duration::from_millis(200)))
    }
}

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
    plane: &crate::ControlPlane,
    msg: quorum_cluster::Envelope,
) -> Result<quorum_cluster::Envelope, String> {
    let body = serde_json::to_vec(&msg.payload).map_err(|e| e.to_string())?;
    let reply = plane.handle(&msg.kind, &body).await?;
    let payload = serde_json::from_slice(&reply).map_err(|e| e.to_string())?;
    Ok(quorum_cluster::Envelope {
        kind: msg.kind,
        flow_id: msg.flow_id,
        payload,
    })
}

/// An in-process network of control planes, for tests: calls go straight to the target's
/// handler, and any node can be cut off from the others.
#[derive(Default)]
pub struct MemNet {
    nodes: Mutex<HashMap<String, crate::ControlPlane>>,
    cut: Mutex<BTreeSet<String>>,
}

impl MemNet {
    pub fn new() -> Arc<MemNet> {
        Arc::new(MemNet::default())
    }

    /// The transport a node named `from` uses.
    pub fn transport(self: &Arc<Self>, from: &str) -> Arc<dyn Transport> {
        Arc::new(MemTransport {
            net: self.clone(),
            from: from.to_string(),
        })
    }

    /// Route calls for `plane`'s name to it.
    pub fn register(&self, plane: &crate::ControlPlane) {
        self.lock_nodes()
            .insert(plane.name().to_string(), plane.clone());
    }

    /// Forget a node (it crashed): calls to it fail as unreachable.
    pub fn unregister(&self, name: &str) {
        self.lock_nodes().remove(name);
    }

    /// Cut `name` off: nothing it sends arrives and nothing reaches it.
    pub fn partition(&self, name: &str) {
        self.lock_cut().insert(name.to_string());
    }

    pub fn heal(&self, name: &str) {
        self.lock_cut().remove(name);
    }

    fn lock_nodes(&self) -> std::sync::MutexGuard<'_, HashMap<String, crate::ControlPlane>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_cut(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.cut.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct MemTransport {
    net: Arc<MemNet>,
    from: String,
}

#[async_trait::async_trait]
impl Transport for MemTransport {
    async fn call(
        &self,
        target: &str,
        kind: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let cut_off = {
            let cut = self.net.lock_cut();
            cut.contains(&self.from) || cut.contains(target)
        };
        let plane = self.net.lock_nodes().get(target).cloned();
        let Some(plane) = plane.filter(|_| !cut_off) else {
            return Err(TransportError::Unreachable(target.to_string()));
        };
        match tokio::time::timeout(timeout, plane.handle(kind, &body)).await {
            Ok(r) => r.map_err(TransportError::Failed),
            Err(_) => Err(TransportError::Timeout {
                node: target.to_string(),
                ms: timeout.as_millis() as u64,
            }),
        }
    }
}
