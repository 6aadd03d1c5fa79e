//! The words of membership: what a node advertises, a member as this node sees it, and the
//! changes a subscriber is told about.

use serde::{Deserialize, Serialize};

/// What a node tells the others about itself, with every heartbeat.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeAdvert {
    pub name: String,
    /// Address peers dial to reach this node's cluster listener.
    pub cluster_addr: String,
    /// The node's gRPC API address, if it serves one.
    pub api_addr: Option<String>,
    /// The URL clients reach that API at (scheme, dialable host, bound port), once it is bound
    /// and when one can be named: a client that loses its node follows the review there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    pub models: Vec<String>,
    pub capacity: u32,
    pub in_flight: u32,
    /// Model cards, opaque to this crate.
    pub cards: serde_json::Value,
    /// Shutting down: finishes what it runs, takes nothing new.
    #[serde(default)]
    pub draining: bool,
    /// Reviews this node conducts now (flow ids).
    #[serde(default)]
    pub conducting: Vec<String>,
    /// Why this node's store refuses writes, while it does: it takes no new review and no
    /// attempt then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

/// A node as this node currently sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub name: String,
    pub advert: NodeAdvert,
    pub alive: bool,
    pub last_seen_ms_ago: u64,
    pub is_self: bool,
}

/// A change in membership, as seen by this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MembershipEvent {
    /// First heartbeat from this node.
    Joined(String),
    /// The node missed its heartbeat deadline, left, or restarted (a restart is `Lost` followed by
    /// `Rejoined`, so work it held is known to be gone). Emitted once per loss.
    Lost(String),
    /// A heartbeat from a node that was lost.
    Rejoined(String),
    /// The node's advert changed in anything but `in_flight` (read `in_flight` from
    /// [`crate::Cluster::members`], it changes too often to be an event).
    AdvertChanged(String),
}
