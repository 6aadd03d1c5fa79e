//! The control plane's Raft vocabulary: the openraft type configuration (commands in, outcomes
//! out, nodes addressed by name) and the node ids every node derives from names alike.

use crate::state::{Command, Outcome};

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
