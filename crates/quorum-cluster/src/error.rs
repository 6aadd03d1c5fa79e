//! The one error type of the cluster crate, so callers can tell a lost peer from a slow one.

use std::net::SocketAddr;

/// Why a cluster operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The node server could not listen on the configured address.
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: SocketAddr, message: String },
    /// No member of that name has ever been heard from.
    #[error("unknown node {0}")]
    UnknownNode(String),
    /// The member missed its heartbeat deadline or left; nothing is sent to it until it rejoins.
    #[error("node {0} is lost")]
    NodeLost(String),
    /// A request got no reply in time.
    #[error("request to {node} timed out after {ms} ms")]
    Timeout { node: String, ms: u64 },
    /// The remote handler answered with an error.
    #[error("remote handler failed: {0}")]
    Remote(String),
    /// The link to the node is down or the message could not be encoded.
    #[error("transport error: {0}")]
    Transport(String),
    /// The blackboard replica could not be read or written.
    #[error("blackboard store error: {0}")]
    Store(String),
}
