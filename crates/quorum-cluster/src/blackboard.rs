//! The replicated blackboard: a grow-only set of immutable entries per flow, one replica per node.
//!
//! Entry ids are `(flow, node, seq)` where `seq` is a per-node hybrid clock (strictly increasing,
//! never below the wall clock in microseconds), so ids stay unique even when a node without a data
//! directory restarts and starts counting again. Because entries never change and ids never
//! collide, inserting is idempotent and replicas that have seen the same ids hold the same set:
//! broadcast on publish plus anti-entropy (see `node/replication.rs`) is all convergence needs.
//!
//! Bounded: a replica holds the notes of at most [`MAX_FLOWS`] flows; past that the least
//! recently used flow is pruned. A pruned flow (by the cap or by `quorum flows gc`) leaves a
//! tombstone, so anti-entropy does not bring it back from a peer that still holds it; tombstones
//! are capped too (`replica::MAX_TOMBSTONES`).

mod entry;
mod replica;

use std::sync::Arc;

use crate::error::ClusterError;
use crate::node::Core;

pub use entry::{BbEntry, EntryId};
pub(crate) use replica::BbStore;
pub use replica::{prune_replica, MAX_FLOWS};

/// This node's replica of the blackboard. Cheap to clone. Once the node stops, `publish` fails
/// and reads keep answering from memory.
#[derive(Clone)]
pub struct Blackboard {
    pub(crate) core: Arc<Core>,
}

impl std::fmt::Debug for Blackboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blackboard")
            .field("node", &self.core.name)
            .finish_non_exhaustive()
    }
}

impl Blackboard {
    /// Publish an entry: it gets the id `(flow_id, this node, next seq)`, is stored in this replica
    /// (and in sled when the node has a data directory) and is broadcast to the alive members.
    pub fn publish(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<BbEntry, ClusterError> {
        let entry = self.core.bb.create(flow_id, author, topic, body)?;
        self.core.broadcast_entry(&entry);
        Ok(entry)
    }

    /// The entries of a flow, optionally only one topic, sorted by `(at_ms, id)`.
    pub fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<BbEntry> {
        self.core.bb.read(flow_id, topic)
    }

    /// An order-independent hash of the ids of a flow's entries: two replicas hold the same
    /// entries of the flow exactly when their digests are equal.
    pub fn digest(&self, flow_id: &str) -> String {
        self.core.bb.digest(flow_id)
    }

    /// Every flow this replica holds entries for, sorted.
    pub fn all_flows(&self) -> Vec<String> {
        self.core.bb.flows()
    }

    /// Prune this replica's notes of `flows` and of flows whose newest note is older than
    /// `older_than_ms` (ms since the epoch; 0 = none by age); peers do not send them back.
    /// Returns the entries removed.
    pub fn prune(&self, flows: &[String], older_than_ms: u64) -> Result<usize, ClusterError> {
        self.core.bb.prune(flows, older_than_ms)
    }
}
