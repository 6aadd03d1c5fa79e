//! The send side, wired to the lanes: every frame for a peer goes through the transport filter
//! into that peer's [`Lanes`](crate::lanes::Lanes) (control frames on the control lane, the rest
//! on the bounded bulk lane, large ones windowed), and one writer task per peer hands them to
//! the peer's link, sealed on mutual TLS, as the window allows. The receiving end's half of the
//! window is here too: acknowledging a stamped frame and taking an acknowledgement back.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::binding::seal;
use super::state::{Core, PeerQueue};
use crate::error::ClusterError;
use crate::filter::{Verdict, KIND_ACK, KIND_HEARTBEAT, KIND_LEAVE};
use crate::lanes::{Lanes, Queued};
use crate::wire::{AgentMsg, Body, Frame, MAX_FRAME_BYTES};

impl Core {
    /// Queue a frame for `peer`, through the filter. A dropped frame is not an error: the filter
    /// plays a lossy network.
    pub(super) fn enqueue(
        self: &Arc<Self>,
        peer: &str,
        kind: &str,
        frame: &Frame,
    ) -> Result<(), ClusterError> {
        let due = match self.filter.outgoing(peer, kind) {
            Verdict::Drop => return Ok(()),
            Verdict::Send(d) => d.map(|d| tokio::time::Instant::now() + d),
        };
        let bytes = frame
            .encode()
            .map_err(|e| ClusterError::Transport(format!("cannot encode a frame: {e}")))?;
        if bytes.len() > MAX_FRAME_BYTES {
            return Err(ClusterError::Transport(format!(
                "a {kind} frame of {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit",
                bytes.len()
            )));
        }
        self.check_open()?;
        let q = self.queue_for(peer);
        let pushed = {
            let mut lanes = q.lanes();
            if matches!(kind, KIND_HEARTBEAT | KIND_LEAVE | KIND_ACK) {
                lanes.push_control(Queued {
                    bytes,
                    due,
                    seq: None,
                });
                Ok(())
            } else {
                let seq = lanes.is_windowed(bytes.len()).then(|| lanes.next_seq());
                let bytes = match seq {
                    Some(n) => Frame::stamp_ack(bytes, n),
                    None => bytes,
                };
                lanes.push_bulk(Queued { bytes, due, seq })
            }
        };
        q.wake.notify_one();
        pushed.map_err(|full| {
            ClusterError::Transport(format!(
                "the send queue to {peer} is full ({} frames, {} bytes waiting): it is not keeping up; try again later",
                full.waiting_frames, full.waiting_bytes
            ))
        })
    }

    /// `peer`'s send queue, with its writer task started on first use.
    pub(super) fn queue_for(self: &Arc<Self>, peer: &str) -> Arc<PeerQueue> {
        let mut st = self.lock();
        st.outbound
            .entry(peer.to_string())
            .or_insert_with(|| {
                let q = Arc::new(PeerQueue {
                    lanes: Mutex::new(Lanes::new(self.send_limits)),
                    wake: Notify::new(),
                });
                self.rt.spawn(writer_loop(
                    Arc::downgrade(self),
                    peer.to_string(),
                    q.clone(),
                ));
                q
            })
            .clone()
    }

    /// A frame stamped `ack: seq` arrived from `from`: tell it, so its window opens again.
    pub(super) fn acknowledge(self: &Arc<Self>, from: &str, seq: u64) {
        let ack = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Ack { seq },
        };
        let _ = self.enqueue(from, KIND_ACK, &ack);
    }

    /// `from` acknowledged the windowed frame `seq`.
    pub(super) fn on_ack(&self, from: &str, seq: u64) {
        if let Some(q) = self.lock().outbound.get(from).cloned() {
            q.lanes().acked(seq);
            q.wake.notify_one();
        }
    }
}

/// Hands one peer's frames to its link, control lane first, as the window allows; ends when the
/// node stops or forgets the queue.
async fn writer_loop(core: Weak<Core>, peer: String, queue: Arc<PeerQueue>) {
    loop {
        let next = queue.lanes().take(Instant::now());
        let Some(o) = next else {
            // A timeout too: an acknowledgement given up on reopens the window without a wake.
            let _ = tokio::time::timeout(Duration::from_millis(250), queue.wake.notified()).await;
            let Some(c) = core.upgrade() else { return };
            let current = c
                .lock()
                .outbound
                .get(&peer)
                .is_some_and(|q| Arc::ptr_eq(q, &queue));
            if c.closed.load(Ordering::SeqCst) || !current {
                return;
            }
            continue;
        };
        if let Some(due) = o.due {
            tokio::time::sleep_until(due).await;
        }
        let Some(c) = core.upgrade() else { return };
        // A partition set while the frame waited for its delay still applies.
        if c.filter.is_partitioned(&peer) {
            continue;
        }
        let (route, key) = {
            let st = c.lock();
            (
                st.routes.get(&peer).cloned(),
                st.route_keys.get(&peer).copied(),
            )
        };
        let len = o.bytes.len();
        let bytes = match (c.mutual(), key) {
            (false, _) => o.bytes,
            (true, Some(k)) => seal(&k, o.bytes),
            (true, None) => {
                tracing::debug!(node = %c.name, %peer, "no authenticated link; frame dropped");
                continue;
            }
        };
        match route {
            Some(cell) => {
                if cell.send_message(AgentMsg::Frame(bytes)).is_err() {
                    tracing::debug!(node = %c.name, %peer, "link closed; frame dropped");
                } else if let Some(seq) = o.seq {
                    queue.lanes().sent(seq, len, Instant::now());
                }
            }
            None => tracing::debug!(node = %c.name, %peer, "no link; frame dropped"),
        }
        // A test's slow wire: the link is busy with this frame for a while.
        let busy = c.filter.wire_time(&peer, len);
        drop(c);
        if !busy.is_zero() {
            tokio::time::sleep(busy).await;
        }
    }
}
