//! quorum's cluster layer over ractor_cluster: node membership with gossip, heartbeat failure
//! detection, reconnects, ordered messaging with request/reply, fault injection for tests, and the
//! replicated blackboard.
//!
//! ractor_cluster gives cookie-authenticated links and remote actor references, nothing more: no
//! failure detector, no reconnect, no discovery (its `Transitive` mode dials peers-of-peers
//! without TLS, so it is not used). Each node therefore runs one remotable agent actor, dials every
//! member it learns of by gossip (`Isolated` mode, full mesh), heartbeats every member, and
//! declares a member lost when it misses the deadline.
//!
//! Enabling this crate turns on ractor's `cluster` feature for the whole build, which removes the
//! blanket `ractor::Message` impl: every actor message type in the workspace then needs
//! `#[derive(ractor_cluster::RactorMessage)]` (or an empty `impl ractor::Message for T {}`).

mod blackboard;
mod error;
mod filter;
pub mod lanes;
mod node;
mod tls;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use blackboard::{prune_replica, BbEntry, Blackboard, EntryId, MAX_FLOWS};
pub use error::ClusterError;
pub use filter::{TransportFilter, KIND_BB_PUBLISH, KIND_BB_SYNC, KIND_HEARTBEAT, KIND_LEAVE};
pub use node::{Cluster, MAX_FRAME_BYTES};
pub use tls::ClusterTls;

/// How a node joins and watches the cluster.
#[derive(Clone)]
pub struct ClusterConfig {
    /// Unique node name, e.g. "ws1".
    pub name: String,
    /// Where the ractor_cluster node server listens; port 0 picks a free port
    /// (see [`Cluster::local_addr`]).
    pub listen: SocketAddr,
    /// Shared secret; peers with another cookie are refused by ractor_cluster's handshake.
    pub cookie: String,
    /// `host:port` of peers to dial at start; the rest are learned by gossip.
    pub join: Vec<String>,
    /// How often this node heartbeats every member (default 500 ms).
    pub heartbeat_interval: Duration,
    /// A member silent for longer than this is declared lost (default 3 s).
    pub heartbeat_deadline: Duration,
    /// How often unconnected known peers are dialed again, forever (default 1 s).
    pub reconnect_interval: Duration,
    /// Where the blackboard replica is persisted (`<data_dir>/blackboard`, sled); `None` keeps it
    /// in memory only.
    pub data_dir: Option<PathBuf>,
    /// What this node advertises. `name` is forced to [`ClusterConfig::name`]; an empty
    /// `cluster_addr`, or one with port 0, is replaced by the bound address.
    pub advert: NodeAdvert,
    /// Bounds of each peer's send queue (default 64 MiB waiting, 2 MiB unacknowledged on the
    /// link); past them a send fails saying the peer is not keeping up.
    pub send_queue: lanes::Limits,
}

impl ClusterConfig {
    /// A config with the default timings, no peers to join, memory-only blackboard and an advert
    /// carrying only the name.
    pub fn new(name: impl Into<String>, listen: SocketAddr, cookie: impl Into<String>) -> Self {
        let name = name.into();
        ClusterConfig {
            advert: NodeAdvert {
                name: name.clone(),
                ..NodeAdvert::default()
            },
            name,
            listen,
            cookie: cookie.into(),
            join: Vec::new(),
            heartbeat_interval: Duration::from_millis(500),
            heartbeat_deadline: Duration::from_secs(3),
            reconnect_interval: Duration::from_secs(1),
            data_dir: None,
            send_queue: lanes::Limits::default(),
        }
    }
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The cookie is a secret: never let it reach a log line.
        f.debug_struct("ClusterConfig")
            .field("name", &self.name)
            .field("listen", &self.listen)
            .field("cookie", &"<redacted>")
            .field("join", &self.join)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("heartbeat_deadline", &self.heartbeat_deadline)
            .field("reconnect_interval", &self.reconnect_interval)
            .field("data_dir", &self.data_dir)
            .field("advert", &self.advert)
            .field("send_queue", &self.send_queue)
            .finish()
    }
}

/// What a node tells the others about itself, with every heartbeat.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeAdvert {
    pub name: String,
    /// Address peers dial to reach this node's cluster listener.
    pub cluster_addr: String,
    /// The node's gRPC API address, if it serves one.
    pub api_addr: Option<String>,
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
    /// [`Cluster::members`], it changes too often to be an event).
    AdvertChanged(String),
}

/// An application message between nodes. `kind` routes it ("run_attempt", "attempt_result",
/// "fetch_blobs", ...); the payload is JSON.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Envelope {
    pub kind: String,
    pub flow_id: String,
    pub payload: serde_json::Value,
}

/// Receives the application messages addressed to this node.
///
/// `on_message` calls for one sender are made one at a time, in the order that sender sent them;
/// `on_request` calls run concurrently, each as its own task.
#[async_trait::async_trait]
pub trait MessageHandler: Send + Sync + 'static {
    /// A one-way message from `from`.
    async fn on_message(&self, from: &str, msg: Envelope);
    /// A request from `from`; the reply goes back to the caller of [`Cluster::request`].
    async fn on_request(&self, from: &str, msg: Envelope) -> Result<Envelope, String>;
}
