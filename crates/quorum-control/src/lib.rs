//! The replicated control plane: which node conducts each review, at which epoch, and every fact
//! of the review, agreed on a majority of voters by Raft (openraft) so that a survivor can take
//! a review over when its conductor dies.
//!
//! - [`state`]: the reviews and the commands, pure and deterministic (the epoch fencing lives
//!   here);
//! - [`store`]: each node's log, vote, state machine and snapshot in sled;
//! - [`network`]: openraft's RPCs over an abstract [`Transport`], with adapters for
//!   `quorum_cluster` and in-process tests;
//! - [`plane`]: the [`ControlPlane`] handle a node holds.
//!
//! Election and log replication are openraft's; this crate only stores, transports and applies.

pub mod network;
pub mod plane;
pub mod state;
pub mod store;

pub use network::{
    handle_envelope, is_control_kind, ClusterTransport, MemNet, Transport, TransportError,
    CONTROL_KINDS,
};
pub use plane::{ControlConfig, ControlPlane, ControlStatus, MAX_COMMAND_BYTES};
pub use state::{Command, Outcome, Rejection, ReviewRecord, ReviewSummary, Reviews};

/// Raft node ids are derived from node names, so every node computes the same id for a name
/// without a registry.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The control plane's Raft types: commands in, outcomes out, nodes addressed by name.
    pub TypeConfig:
        D = Command,
        R = Outcome,
        SnapshotData = std::io::Cursor<Vec<u8>>,
);

/// The Raft id of the node called `name`.
pub fn node_id(name: &str) -> NodeId {
    let h = blake3::hash(name.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.as_bytes()[..8]);
    u64::from_le_bytes(b)
}

/// Why a control-plane operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("control plane misconfigured: {0}")]
    Config(String),
    #[error("cannot open the control-plane store at {path}: {message}")]
    Store { path: String, message: String },
    /// No leader could be reached, or no majority acknowledged in time.
    #[error("control plane unavailable: {0} (is a majority of the voters up?)")]
    Unavailable(String),
    #[error("control plane stopped: {0}")]
    Stopped(String),
    #[error("cannot encode the command: {0}")]
    Encode(String),
    #[error("command of {bytes} bytes exceeds the control plane's limit of {max} bytes")]
    TooLarge { bytes: usize, max: usize },
}
