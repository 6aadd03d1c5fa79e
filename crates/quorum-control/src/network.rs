//! How Raft messages travel: an abstract request/reply [`Transport`] (one per node) and
//! openraft's network over it. The transports are rooms of their own: `cluster` (over
//! `quorum_cluster`) and `memnet` (in-process, for tests).
//!
//! Every message is JSON, so the cluster adapter can put it into an `Envelope` payload as is. An
//! append request larger than [`MAX_RPC_BYTES`] is refused before it is sent with a hint to send
//! fewer entries, which keeps every frame well under the cluster's 16 MiB limit.

use crate::raft::{NodeId, TypeConfig};
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
use std::sync::Arc;
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
/// A change of the voters, sent by a follower to the leader to be made there.
pub const KIND_VOTERS: &str = "raft_voters";

/// Every kind the control plane answers.
pub const CONTROL_KINDS: [&str; 6] = [
    KIND_APPEND,
    KIND_VOTE,
    KIND_SNAPSHOT,
    KIND_FORWARD,
    KIND_PING,
    KIND_VOTERS,
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
