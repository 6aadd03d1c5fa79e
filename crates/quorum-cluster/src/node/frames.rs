//! Frame dispatch. Every frame a peer sends arrives at this node's one agent actor. Here it is
//! authenticated — on mutual TLS by its authenticator under a key of the sender's verified
//! links, otherwise by the sender having an authenticated session — decoded, acknowledged if
//! stamped, and handed to the room it is for: heartbeats and goodbyes to membership, messages,
//! requests and replies to messaging, acknowledgements to the send queue, blackboard frames to
//! replication. A frame in this node's own name from another incarnation is a name clash.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::binding::MAC_BYTES;
use super::state::{Core, Inbound};
use crate::wire::{AgentMsg, Body, Frame};

/// The agent actor: the one remotable actor of a node, fed by every peer's link.
pub(super) struct Agent {
    pub(super) core: Weak<Core>,
}

#[ractor::async_trait]
impl Actor for Agent {
    type Msg = AgentMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        _args: (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        msg: AgentMsg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let AgentMsg::Frame(bytes) = msg;
        if let Some(core) = self.core.upgrade() {
            core.on_frame(&bytes);
        }
        // Never fail: a failing agent would stop receiving for the whole node.
        Ok(())
    }
}

impl Core {
    fn reject_frame(&self, from: &str, why: &str) {
        let n = {
            let mut st = self.lock();
            st.rejected_frames += 1;
            st.rejected_frames
        };
        // Loud at first, then sampled: a flood must not become a log flood.
        if n <= 10 || n.is_power_of_two() {
            tracing::warn!(node = %self.name, claimed = %from, rejected = n, "cluster frame in the name of {from} dropped: {why}");
        }
    }

    fn on_frame(self: &Arc<Self>, bytes: &[u8]) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let (mac, body) = if self.mutual() {
            if bytes.len() < MAC_BYTES {
                self.reject_frame("?", "it carries no authenticator");
                return;
            }
            let (m, b) = bytes.split_at(MAC_BYTES);
            (Some(m), b)
        } else {
            (None, bytes)
        };
        let frame = match Frame::decode(body) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(node = %self.name, "undecodable cluster frame dropped: {e}");
                return;
            }
        };
        let from = frame.from;
        if from == self.name {
            if let Body::Heartbeat {
                incarnation,
                started_ms,
                advert,
                ..
            } = &frame.body
            {
                if *incarnation != self.incarnation {
                    self.on_name_clash(*started_ms, *incarnation, &advert.cluster_addr);
                }
            }
            return;
        }
        // The sender is the node whose authenticated link the frame came over, never merely
        // what `from` claims: on mutual TLS, the frame's key must be one of that node's links'
        // (derived from a TLS session whose certificate names it); otherwise `from` must at
        // least be a node with an authenticated session here.
        let authentic = {
            let st = self.lock();
            match mac {
                Some(m) => st.peer_keys.get(&from).is_some_and(|keys| {
                    let Ok(m) = blake3::Hash::from_slice(m) else {
                        return false;
                    };
                    // blake3::Hash compares in constant time.
                    keys.iter().any(|k| blake3::keyed_hash(k, body) == m)
                }),
                None => st.sessions.iter().any(|s| s.peer == from),
            }
        };
        if !authentic {
            self.reject_frame(
                &from,
                "it did not come over an authenticated link of that node",
            );
            // Maybe the link is newer than our view of the sessions: look again.
            let me = self.clone();
            self.rt.spawn(async move { me.refresh_links().await });
            return;
        }
        if self.filter.is_partitioned(&from) {
            return;
        }
        if let Some(seq) = frame.ack {
            self.acknowledge(&from, seq);
        }
        match frame.body {
            Body::Ack { seq } => self.on_ack(&from, seq),
            Body::Heartbeat {
                incarnation,
                advert,
                peers,
                ..
            } => self.on_heartbeat(&from, incarnation, advert, peers),
            Body::Leave { incarnation, ack } => self.on_leave(&from, incarnation, ack),
            Body::Msg { env } => self.deliver(&from, Inbound::Msg(env)),
            Body::Req { id, env } => self.deliver(&from, Inbound::Req(id, env)),
            Body::Resp { id, result } => self.on_response(&from, id, result),
            Body::BbEntries { entries } => self.on_bb_entries(from, entries),
            Body::BbSummary { flows } => self.on_bb_summary(&from, flows),
            Body::BbIds { flow, ids } => self.on_bb_ids(&from, flow, ids),
            Body::BbWant { ids } => self.on_bb_want(&from, ids),
        }
    }
}
