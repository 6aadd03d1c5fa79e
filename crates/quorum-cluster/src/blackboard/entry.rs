//! A blackboard entry and its id: immutable once published, unique by `(flow, node, seq)`.

use serde::{Deserialize, Serialize};

/// Unique id of a blackboard entry: the flow it belongs to, the node that published it, and that
/// node's sequence number (a hybrid clock, increasing per node).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryId {
    pub flow_id: String,
    pub node: String,
    pub seq: u64,
}

/// One immutable blackboard entry.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BbEntry {
    pub id: EntryId,
    /// The task or persona that published it.
    pub author: String,
    pub topic: String,
    pub body: String,
    /// Wall-clock publish time on the publishing node, in ms since the Unix epoch.
    pub at_ms: u64,
}
