//! How a node joins and watches the cluster: its name, addresses, cookie, timings, where its
//! blackboard lives, what it advertises and how much it queues for each peer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::lanes;
use crate::member::NodeAdvert;

/// How a node joins and watches the cluster.
#[derive(Clone)]
pub struct ClusterConfig {
    /// Unique node name, e.g. "ws1".
    pub name: String,
    /// Where the ractor_cluster node server listens; port 0 picks a free port
    /// (see [`crate::Cluster::local_addr`]).
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
