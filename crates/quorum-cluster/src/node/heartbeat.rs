//! What a heartbeat says — this node's advert and incarnation, when it started, and every peer
//! it knows (the gossip that makes the mesh) — and whom it goes to: every peer with a link,
//! members or not yet, which is how joins happen. Receiving one is membership's
//! (`membership.rs`).

use std::sync::Arc;

use super::state::Core;
use crate::filter::KIND_HEARTBEAT;
use crate::wire::{Body, Frame, PeerAddr};

impl Core {
    pub(super) fn heartbeat_frame(&self) -> Frame {
        let st = self.lock();
        let mut peers: Vec<PeerAddr> = st
            .members
            .iter()
            .filter(|(_, m)| !m.advert.cluster_addr.is_empty())
            .map(|(name, m)| PeerAddr {
                name: name.clone(),
                addr: m.advert.cluster_addr.clone(),
            })
            .collect();
        peers.push(PeerAddr {
            name: self.name.clone(),
            addr: st.advert.cluster_addr.clone(),
        });
        Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Heartbeat {
                incarnation: self.incarnation,
                advert: st.advert.clone(),
                peers,
                started_ms: self.started_ms,
            },
        }
    }

    pub(super) fn heartbeat_to(self: &Arc<Self>, peer: &str, frame: &Frame) {
        if let Err(e) = self.enqueue(peer, KIND_HEARTBEAT, frame) {
            tracing::debug!(node = %self.name, %peer, "heartbeat not sent: {e}");
        }
    }

    /// Heartbeat every peer we have a link to, members or not yet: that is how joins happen.
    pub(super) fn heartbeat_all(self: &Arc<Self>) {
        let frame = self.heartbeat_frame();
        let peers: Vec<String> = self.lock().routes.keys().cloned().collect();
        for peer in peers {
            self.heartbeat_to(&peer, &frame);
        }
    }
}
