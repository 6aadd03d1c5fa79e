//! [`Cluster`], the handle the rest of quorum holds: start a node, read and change membership
//! and this node's advert, send messages and requests, reach the blackboard replica and the
//! fault filter, and shut down. Cheap to clone; the last clone dropped stops the node. Every
//! method hands over to the room that does the work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::lifecycle;
use super::membership::normalize_advert;
use super::state::Core;
use crate::blackboard::Blackboard;
use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::filter::TransportFilter;
use crate::lanes::Queued;
use crate::member::{Member, MembershipEvent, NodeAdvert};
use crate::message::{Envelope, MessageHandler};
use crate::tls::ClusterTls;

/// A running cluster node. Cheap to clone; the node stops when [`shutdown`](Self::shutdown) is
/// called or the last clone is dropped.
#[derive(Clone)]
pub struct Cluster {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.handle.core.name)
            .field("local_addr", &self.handle.core.local_addr)
            .finish_non_exhaustive()
    }
}

/// Owns the node's lifetime: dropping the last one stops it.
struct Handle {
    core: Arc<Core>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.stop_now();
    }
}

impl Cluster {
    /// Start the node: listen, dial the join list, and begin heartbeating. Links are plain TCP;
    /// see [`start_tls`](Self::start_tls) for encrypted ones.
    ///
    /// Fails with [`ClusterError::Bind`] if the address cannot be listened on and with
    /// [`ClusterError::Store`] if the blackboard directory cannot be opened.
    pub async fn start(
        cfg: ClusterConfig,
        handler: Arc<dyn MessageHandler>,
    ) -> Result<Cluster, ClusterError> {
        Self::start_inner(cfg, handler, None).await
    }

    /// Like [`start`](Self::start), with every link (accepted and dialed) over TLS. Peers without
    /// TLS, or whose certificate does not verify, never become members and are reported by
    /// [`refused_peers`](Self::refused_peers).
    pub async fn start_tls(
        cfg: ClusterConfig,
        handler: Arc<dyn MessageHandler>,
        tls: ClusterTls,
    ) -> Result<Cluster, ClusterError> {
        Self::start_inner(cfg, handler, Some(tls)).await
    }

    async fn start_inner(
        cfg: ClusterConfig,
        handler: Arc<dyn MessageHandler>,
        tls: Option<ClusterTls>,
    ) -> Result<Cluster, ClusterError> {
        let core = lifecycle::start(cfg, handler, tls).await?;
        Ok(Cluster {
            handle: Arc::new(Handle { core }),
        })
    }

    fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.core().name
    }

    /// The address the node server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.core().local_addr
    }

    /// Every node ever heard from, this one first (`is_self`, always alive), then by name.
    pub fn members(&self) -> Vec<Member> {
        self.core().members()
    }

    /// The members currently alive, this one included.
    pub fn alive_members(&self) -> Vec<Member> {
        self.members().into_iter().filter(|m| m.alive).collect()
    }

    /// Membership events from now on. A receiver that falls more than 1024 events behind gets
    /// `RecvError::Lagged`; [`members`](Self::members) is always current.
    pub fn subscribe(&self) -> broadcast::Receiver<MembershipEvent> {
        self.core().events.subscribe()
    }

    /// Replace this node's advert; peers get it with the next heartbeat.
    pub fn set_advert(&self, advert: NodeAdvert) {
        let core = self.core();
        let advert = normalize_advert(advert, &core.name, core.local_addr);
        core.lock().advert = advert;
    }

    /// Why this node must not stay in the cluster: another node already carries its name
    /// (`None` while there is no clash, or when the other node is the one to give way).
    pub fn name_clash(&self) -> Option<String> {
        self.core()
            .name_clash
            .lock()
            .ok()?
            .clone()
            .filter(|m| !m.is_empty())
    }

    /// Change what this node advertises and tell every peer now rather than at the next
    /// heartbeat (a draining node must stop being chosen at once).
    pub fn set_advert_now(&self, advert: NodeAdvert) {
        self.set_advert(advert);
        self.core().heartbeat_all();
    }

    /// What this node advertises now.
    pub fn advert(&self) -> NodeAdvert {
        self.core().lock().advert.clone()
    }

    /// Send a one-way message. Messages from one node arrive in the order they were sent.
    /// Sending to this node's own name delivers locally.
    ///
    /// `Ok` means the message was handed to a live link; a link that drops afterwards loses it,
    /// and the loss shows up as [`MembershipEvent::Lost`] once the deadline passes.
    pub async fn send(&self, node: &str, msg: Envelope) -> Result<(), ClusterError> {
        self.core().send(node, msg).await
    }

    /// Send a request and wait for the reply, at most `timeout`. Fails at once for unknown or
    /// lost nodes, and as soon as the node is declared lost while waiting.
    pub async fn request(
        &self,
        node: &str,
        msg: Envelope,
        timeout: Duration,
    ) -> Result<Envelope, ClusterError> {
        self.core().request(node, msg, timeout).await
    }

    /// This node's blackboard replica.
    pub fn blackboard(&self) -> Blackboard {
        Blackboard {
            core: self.core().clone(),
        }
    }

    /// Fault injection on this node's traffic.
    pub fn filter(&self) -> TransportFilter {
        self.core().filter.clone()
    }

    /// Peers (address, or name when known) whose links were closed during the handshake and that
    /// stayed unreachable: a wrong cookie, most likely. Oldest first, each once.
    pub fn refused_peers(&self) -> Vec<String> {
        self.core().lock().refused.clone()
    }

    /// Frames dropped because their sender did not authenticate as the node they name.
    pub fn rejected_frames(&self) -> u64 {
        self.core().lock().rejected_frames
    }

    /// Test hook: queue raw frame bytes (JSON, unsealed) for `peer` as if this node had built
    /// them, so tests can play a peer that lies in its frames.
    #[doc(hidden)]
    pub fn send_raw_frame_for_test(&self, peer: &str, frame_json: Vec<u8>) {
        let core = self.core();
        let q = core.queue_for(peer);
        let _ = q.lanes().push_bulk(Queued {
            bytes: frame_json,
            due: None,
            seq: None,
        });
        q.wake.notify_one();
    }

    /// Leave the cluster: tell alive members (they mark this node lost at once), stop heartbeats
    /// and dialing, close the links, stop the node server and close the blackboard's store.
    pub async fn shutdown(&self) {
        self.core().shutdown().await;
    }
}
