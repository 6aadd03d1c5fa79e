//! Membership and failure detection. A heartbeat from a node makes it a member (joined), brings
//! a lost one back (rejoined; a new incarnation is a restart: lost, then rejoined), or reports a
//! changed advert, and teaches this node the peers it gossips. A member silent past the
//! heartbeat deadline, or one that says goodbye, is lost: its pending requests fail at once and
//! a dead peer's links are closed so its restart can connect. The tick loop drives it all:
//! refresh the links, heartbeat, check deadlines, and now and then anti-entropy. Two processes
//! with one name: the later one gives way.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use ractor::ActorRef;
use ractor_cluster::NodeSessionMessage;

use super::replication::ANTI_ENTROPY_EVERY;
use super::state::{Core, MemberState, Target};
use crate::filter::KIND_LEAVE;
use crate::member::{Member, MembershipEvent, NodeAdvert};
use crate::message::Envelope;
use crate::wire::{Body, Frame, PeerAddr};

/// The advert as this node sends it: its own name, and the bound address where it names none
/// or port 0.
pub(super) fn normalize_advert(
    mut advert: NodeAdvert,
    name: &str,
    bound: SocketAddr,
) -> NodeAdvert {
    advert.name = name.to_string();
    if advert.cluster_addr.is_empty() {
        advert.cluster_addr = bound.to_string();
    } else if let Ok(sa) = advert.cluster_addr.parse::<SocketAddr>() {
        if sa.port() == 0 {
            advert.cluster_addr = SocketAddr::new(sa.ip(), bound.port()).to_string();
        }
    }
    advert
}

/// Adverts that differ only in load are not a membership event.
fn same_but_load(a: &NodeAdvert, b: &NodeAdvert) -> bool {
    let mut a = a.clone();
    a.in_flight = b.in_flight;
    &a == b
}

impl Core {
    fn emit(&self, ev: MembershipEvent) {
        tracing::info!(node = %self.name, event = ?ev, "membership");
        let _ = self.events.send(ev);
    }

    pub(super) fn members(&self) -> Vec<Member> {
        let st = self.lock();
        let now = Instant::now();
        let mut others: Vec<Member> = st
            .members
            .iter()
            .map(|(name, m)| Member {
                name: name.clone(),
                advert: m.advert.clone(),
                alive: m.alive,
                last_seen_ms_ago: now.duration_since(m.last_seen).as_millis() as u64,
                is_self: false,
            })
            .collect();
        others.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = vec![Member {
            name: self.name.clone(),
            advert: st.advert.clone(),
            alive: true,
            last_seen_ms_ago: 0,
            is_self: true,
        }];
        out.extend(others);
        out
    }

    /// Declare `node` lost. With `drop_links`, its sessions are closed too: ractor_cluster keeps a
    /// half-open link (peer host gone, no RST) alive and would refuse the restarted peer's new
    /// one as a duplicate, so a dead peer's link is closed and redialed instead.
    fn mark_lost(&self, node: &str, drop_links: bool) {
        let (was_alive, links) = {
            let mut st = self.lock();
            let was_alive = match st.members.get_mut(node) {
                Some(m) if m.alive => {
                    m.alive = false;
                    true
                }
                _ => false,
            };
            let links: Vec<ActorRef<NodeSessionMessage>> = if was_alive && drop_links {
                st.routes.remove(node);
                st.sessions
                    .iter()
                    .filter(|s| s.peer == node)
                    .map(|s| s.actor.clone())
                    .collect()
            } else {
                Vec::new()
            };
            (was_alive, links)
        };
        if was_alive {
            if let Some(q) = self.lock().outbound.get(node).cloned() {
                // Nothing more will be acknowledged on the links it had.
                q.lanes().reset_window();
            }
            self.emit(MembershipEvent::Lost(node.to_string()));
            self.fail_pending(node);
            for link in links {
                link.stop(Some("peer lost".to_string()));
            }
        }
    }

    fn check_deadlines(&self) {
        let now = Instant::now();
        let late: Vec<String> = self
            .lock()
            .members
            .iter()
            .filter(|(_, m)| m.alive && now.duration_since(m.last_seen) > self.heartbeat_deadline)
            .map(|(n, _)| n.clone())
            .collect();
        for n in late {
            tracing::warn!(node = %self.name, peer = %n, "heartbeat deadline missed");
            self.mark_lost(&n, true);
        }
    }

    pub(super) fn on_heartbeat(
        self: &Arc<Self>,
        from: &str,
        incarnation: u64,
        advert: NodeAdvert,
        peers: Vec<PeerAddr>,
    ) {
        let mut events = Vec::new();
        let mut sync = false;
        let mut new_target = false;
        {
            let mut st = self.lock();
            let now = Instant::now();
            match st.members.get_mut(from) {
                None => {
                    st.members.insert(
                        from.to_string(),
                        MemberState {
                            advert: advert.clone(),
                            alive: true,
                            last_seen: now,
                            incarnation,
                            left: false,
                        },
                    );
                    events.push(MembershipEvent::Joined(from.to_string()));
                    sync = true;
                }
                Some(m) if m.left && m.incarnation == incarnation => return,
                Some(m) => {
                    if m.incarnation != incarnation {
                        // A restart: whatever the old incarnation held is gone.
                        if m.alive {
                            events.push(MembershipEvent::Lost(from.to_string()));
                        }
                        events.push(MembershipEvent::Rejoined(from.to_string()));
                        sync = true;
                    } else if !m.alive {
                        events.push(MembershipEvent::Rejoined(from.to_string()));
                        sync = true;
                    } else if !same_but_load(&m.advert, &advert) {
                        events.push(MembershipEvent::AdvertChanged(from.to_string()));
                    }
                    m.alive = true;
                    m.left = false;
                    m.last_seen = now;
                    m.incarnation = incarnation;
                    m.advert = advert.clone();
                }
            }
            let mut learned = peers;
            learned.push(PeerAddr {
                name: from.to_string(),
                addr: advert.cluster_addr.clone(),
            });
            for p in learned {
                if p.name == self.name || p.addr.is_empty() {
                    continue;
                }
                // An unspecified address would make us dial ourselves.
                if p.addr
                    .parse::<SocketAddr>()
                    .is_ok_and(|sa| sa.ip().is_unspecified())
                {
                    continue;
                }
                let known = st.targets.contains_key(&p.addr)
                    || st
                        .targets
                        .values()
                        .any(|t| t.name.as_deref() == Some(p.name.as_str()));
                if !known {
                    st.targets.insert(
                        p.addr.clone(),
                        Target {
                            name: Some(p.name.clone()),
                            ..Target::default()
                        },
                    );
                    new_target = true;
                }
            }
        }
        for ev in events {
            let lost = matches!(ev, MembershipEvent::Lost(_));
            self.emit(ev);
            if lost {
                self.fail_pending(from);
            }
        }
        if sync {
            self.send_summary(from);
        }
        if new_target {
            self.dial_wake.notify_one();
        }
    }

    /// Another process carries this node's name. The one that started later gives way: it
    /// records why (the binary exits on it); the other logs once and ignores the newcomer.
    pub(super) fn on_name_clash(
        &self,
        their_started: u64,
        their_incarnation: u64,
        their_addr: &str,
    ) {
        let we_yield = (their_started, their_incarnation) < (self.started_ms, self.incarnation);
        let mut clash = self.name_clash.lock().unwrap_or_else(|p| p.into_inner());
        if we_yield {
            if clash.is_none() {
                let msg = format!(
                    "a node named {} is already in the cluster (at {their_addr}); start this node with a different --name",
                    self.name
                );
                tracing::error!(node = %self.name, "{msg}");
                *clash = Some(msg);
            }
        } else if clash.is_none() {
            tracing::warn!(node = %self.name, peer_addr = %their_addr, "a second node with this node's name tried to join; it is ignored and told to use another --name");
            *clash = Some(String::new());
        }
    }

    /// `from` says goodbye: an incarnation that is still current is lost at once (its links
    /// stay up until it closes them, so the acknowledgement gets through), and it is answered.
    pub(super) fn on_leave(self: &Arc<Self>, from: &str, incarnation: u64, ack: u64) {
        let current = match self.lock().members.get_mut(from) {
            Some(m) if m.incarnation == incarnation => {
                m.left = true;
                true
            }
            _ => false,
        };
        if current {
            tracing::info!(node = %self.name, peer = %from, "peer left the cluster");
            // Its link stays up until it closes it, so the goodbye ack can get through.
            self.mark_lost(from, false);
        }
        let ok = Envelope {
            kind: KIND_LEAVE.to_string(),
            flow_id: String::new(),
            payload: serde_json::Value::Null,
        };
        let frame = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Resp {
                id: ack,
                result: Ok(ok),
            },
        };
        // The ack is best effort: the leaving node does not wait long for it.
        let _ = self.enqueue(from, KIND_LEAVE, &frame);
    }
}

/// The node's clock: every heartbeat interval, refresh the links, heartbeat every peer, declare
/// the late lost, and every few ticks start anti-entropy with each alive member.
pub(super) async fn tick_loop(core: Weak<Core>) {
    let period = match core.upgrade() {
        Some(c) => c.heartbeat_interval,
        None => return,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        interval.tick().await;
        let Some(core) = core.upgrade() else { return };
        if core.closed.load(Ordering::SeqCst) {
            return;
        }
        core.refresh_links().await;
        core.heartbeat_all();
        core.check_deadlines();
        if n % ANTI_ENTROPY_EVERY == ANTI_ENTROPY_EVERY - 1 {
            let alive: Vec<String> = core
                .lock()
                .members
                .iter()
                .filter(|(_, m)| m.alive)
                .map(|(n, _)| n.clone())
                .collect();
            for peer in alive {
                core.send_summary(&peer);
            }
        }
        n = n.wrapping_add(1);
    }
}
