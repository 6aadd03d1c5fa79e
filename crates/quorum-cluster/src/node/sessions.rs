//! The node server's sessions as this node routes by them. ractor_cluster reports sessions
//! opening, authenticating, getting ready and closing; [`refresh_links`](Core::refresh_links)
//! re-reads the authenticated ones and finds each peer's agent actor on its session (the route a
//! frame for that peer takes), checking on mutual TLS that the name a session gives is the one
//! its link's certificate was issued for. A session that never authenticates is closed; one
//! closed during the handshake is remembered as a refusal for the dial loop to report.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ractor::ActorStatus;
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage};
use tokio::sync::mpsc;

use super::binding::{node_of, AGENT_PREFIX};
use super::state::{Core, SessionView};

/// Node-server events, forwarded from ractor_cluster's synchronous callbacks to our event task.
pub(super) enum LinkEvent {
    Opened(NodeServerSessionInformation),
    Authenticated(NodeServerSessionInformation),
    Ready(NodeServerSessionInformation),
    Disconnected(NodeServerSessionInformation),
}

/// Forwards ractor_cluster's session callbacks to [`link_loop`].
pub(super) struct Subscription {
    pub(super) tx: mpsc::UnboundedSender<LinkEvent>,
}

impl NodeEventSubscription for Subscription {
    fn node_session_opened(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Opened(ses));
    }
    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Disconnected(ses));
    }
    fn node_session_authenticated(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Authenticated(ses));
    }
    fn node_session_ready(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Ready(ses));
    }
}

/// Handles the node server's session events one at a time, in order, until the node stops.
pub(super) async fn link_loop(core: Weak<Core>, mut rx: mpsc::UnboundedReceiver<LinkEvent>) {
    while let Some(ev) = rx.recv().await {
        let Some(c) = core.upgrade() else { return };
        if c.closed.load(Ordering::SeqCst) {
            return;
        }
        c.on_link_event(ev).await;
    }
}

impl Core {
    /// Re-read the node server's authenticated sessions and find each peer's agent on them.
    pub(super) async fn refresh_links(&self) {
        let Some(server) = self.server() else { return };
        let sessions = match ractor::call_t!(server, NodeServerMessage::GetSessions, 1000) {
            Ok(s) => s,
            Err(_) => {
                tracing::debug!(node = %self.name, "node server did not list its sessions");
                return;
            }
        };
        let mut views = Vec::new();
        let mut routes = HashMap::new();
        let mutual = self.mutual();
        let links = if mutual {
            self.lock().links.clone()
        } else {
            HashMap::new()
        };
        let mut peer_keys: HashMap<String, Vec<[u8; 32]>> = HashMap::new();
        let mut route_keys = HashMap::new();
        let mut live_labels = HashSet::new();
        for info in sessions.into_values() {
            live_labels.insert(info.peer_addr.clone());
            let Some(pn) = info.peer_name.as_ref() else {
                continue;
            };
            let peer = node_of(&pn.name).to_string();
            let mut link_key = None;
            if mutual {
                // The name given in ractor_cluster's handshake must be the one the link's
                // certificate was issued for; otherwise the session is an impostor.
                match links.get(&info.peer_addr) {
                    Some(l) if crate::tls::names_node(&l.cert, &peer) => link_key = Some(l.key),
                    other => {
                        let why = if other.is_some() {
                            "its certificate is issued for another node"
                        } else {
                            "it did not arrive over a verified tls link"
                        };
                        if self.lock().impostors.insert(info.actor.get_id()) {
                            tracing::error!(
                                node = %self.name,
                                %peer,
                                from = %info.peer_addr,
                                "cluster link claiming to be {peer} closed: {why}"
                            );
                        }
                        info.actor
                            .stop(Some("certificate does not name this node".to_string()));
                        continue;
                    }
                }
                if let Some(k) = link_key {
                    peer_keys.entry(peer.clone()).or_default().push(k);
                }
            }
            let key = format!("{AGENT_PREFIX}{}|{}#", pn.name, pn.connection_string);
            let agent = info
                .actor
                .get_cell()
                .get_children()
                .into_iter()
                .filter(|c| {
                    c.get_status() < ActorStatus::Stopping
                        && c.get_name().is_some_and(|n| n.starts_with(&key))
                })
                // A newer incarnation in the same process has a higher pid.
                .max_by_key(|c| c.get_id().pid());
            if let Some(agent) = agent {
                routes.insert(peer.clone(), agent);
                if let Some(k) = link_key {
                    route_keys.insert(peer.clone(), k);
                }
            }
            views.push(SessionView {
                peer,
                is_server: info.is_server,
                peer_addr: info.peer_addr.clone(),
                actor: info.actor.clone(),
            });
        }
        let mut st = self.lock();
        // Learn which node answers at each dialed address.
        for t in st.targets.values_mut() {
            if t.name.is_none() {
                if let Some(r) = t.resolved {
                    let r = r.to_string();
                    if let Some(s) = views.iter().find(|s| !s.is_server && s.peer_addr == r) {
                        t.name = Some(s.peer.clone());
                    }
                }
            }
        }
        st.sessions = views;
        st.routes = routes;
        if mutual {
            st.peer_keys = peer_keys;
            st.route_keys = route_keys;
            // A link whose session is gone is forgotten; a fresh one may not be listed yet.
            st.links.retain(|label, l| {
                live_labels.contains(label) || l.since.elapsed() < Duration::from_secs(30)
            });
        }
    }

    async fn on_link_event(self: &Arc<Self>, ev: LinkEvent) {
        match ev {
            LinkEvent::Opened(ses) => {
                // ractor_cluster waits forever for a handshake; a peer that connects and goes
                // quiet (stopped process, scanner) would hold a session open indefinitely.
                let core = Arc::downgrade(self);
                let limit = self.heartbeat_deadline.max(Duration::from_secs(2));
                self.rt.spawn(async move {
                    tokio::time::sleep(limit).await;
                    let Some(c) = core.upgrade() else { return };
                    let id = ses.actor.get_id();
                    let authenticated = c.lock().authenticated.contains(&id);
                    if !authenticated && ses.actor.get_status() < ActorStatus::Stopping {
                        tracing::info!(
                            node = %c.name,
                            peer = %ses.peer_addr,
                            "cluster link did not authenticate in time; closing it"
                        );
                        ses.actor.stop(Some("handshake timeout".to_string()));
                    }
                });
            }
            LinkEvent::Authenticated(ses) => {
                self.lock().authenticated.insert(ses.actor.get_id());
            }
            LinkEvent::Ready(ses) => {
                self.refresh_links().await;
                // Say hello at once instead of at the next tick, so joins are fast.
                if let Some(pn) = ses.peer_name.as_ref() {
                    let peer = node_of(&pn.name).to_string();
                    self.heartbeat_to(&peer, &self.heartbeat_frame());
                }
            }
            LinkEvent::Disconnected(ses) => {
                let was_authenticated = self.lock().authenticated.remove(&ses.actor.get_id());
                if !was_authenticated {
                    if ses.is_server {
                        // Once per host: a misconfigured node redials forever.
                        let host = ses
                            .peer_addr
                            .parse::<SocketAddr>()
                            .map(|a| a.ip().to_string())
                            .unwrap_or_else(|_| ses.peer_addr.clone());
                        if self.lock().refused_incoming.insert(host) {
                            tracing::warn!(
                                node = %self.name,
                                from = %ses.peer_addr,
                                "incoming cluster link closed before authentication \
                                 (wrong cookie, or a duplicate connection)"
                            );
                        }
                    } else {
                        let mut st = self.lock();
                        for t in st.targets.values_mut() {
                            if t.resolved.is_some_and(|r| r.to_string() == ses.peer_addr) {
                                t.handshake_failed = Some(
                                    "closed during authentication: the cookies differ, \
                                     or the peer expects tls"
                                        .to_string(),
                                );
                            }
                        }
                    }
                }
                self.refresh_links().await;
            }
        }
    }
}
