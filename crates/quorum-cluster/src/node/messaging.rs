//! Ordered messaging with request/reply. A message or request for a peer is refused at once when
//! the peer is unknown, lost or has no link; one for this node is delivered locally. What
//! arrives is handed to the [`MessageHandler`] by one dispatcher task per sender (messages in
//! that sender's order, requests each as its own task), bounded so a flood is refused instead
//! of buffered. A request waits for the reply with the same id from the same node, its timeout,
//! or the node's loss, whichever comes first.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::state::{Core, Inbound, Pending};
use crate::error::ClusterError;
use crate::message::{Envelope, MessageHandler};
use crate::wire::{Body, Frame};

/// Frames from one peer waiting for this node's handler; past it a request is answered
/// "overloaded" and a message is dropped, instead of buffering without limit.
const INBOUND_DEPTH: usize = 1024;

impl Core {
    /// [`Cluster::send`](super::Cluster::send).
    pub(super) async fn send(
        self: &Arc<Self>,
        node: &str,
        msg: Envelope,
    ) -> Result<(), ClusterError> {
        self.check_open()?;
        if node == self.name {
            self.deliver(&self.name, Inbound::Msg(msg));
            return Ok(());
        }
        self.check_reachable(node).await?;
        let kind = msg.kind.clone();
        self.enqueue(
            node,
            &kind,
            &Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::Msg { env: msg },
            },
        )
    }

    /// [`Cluster::request`](super::Cluster::request).
    pub(super) async fn request(
        self: &Arc<Self>,
        node: &str,
        msg: Envelope,
        timeout: Duration,
    ) -> Result<Envelope, ClusterError> {
        self.check_open()?;
        let timed_out = || ClusterError::Timeout {
            node: node.to_string(),
            ms: timeout.as_millis() as u64,
        };
        if node == self.name {
            return match tokio::time::timeout(timeout, self.handler.on_request(node, msg)).await {
                Ok(r) => r.map_err(ClusterError::Remote),
                Err(_) => Err(timed_out()),
            };
        }
        self.check_reachable(node).await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock().pending.insert(
            id,
            Pending {
                node: node.to_string(),
                tx,
            },
        );
        let kind = msg.kind.clone();
        let frame = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Req { id, env: msg },
        };
        if let Err(e) = self.enqueue(node, &kind, &frame) {
            self.lock().pending.remove(&id);
            return Err(e);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ClusterError::Transport(
                "the cluster node shut down while waiting for a reply".to_string(),
            )),
            Err(_) => {
                self.lock().pending.remove(&id);
                Err(timed_out())
            }
        }
    }

    /// Fail fast for unknown and lost nodes. A link that came up since the last refresh (the
    /// heartbeat can beat the link event) is picked up here rather than reported missing.
    async fn check_reachable(&self, node: &str) -> Result<(), ClusterError> {
        let alive_without_route = {
            let st = self.lock();
            st.members.get(node).is_some_and(|m| m.alive) && !st.routes.contains_key(node)
        };
        if alive_without_route {
            self.refresh_links().await;
        }
        let st = self.lock();
        match st.members.get(node) {
            None => Err(ClusterError::UnknownNode(node.to_string())),
            Some(m) if !m.alive => Err(ClusterError::NodeLost(node.to_string())),
            Some(_) if !st.routes.contains_key(node) => Err(ClusterError::Transport(format!(
                "no link to {node}: reconnecting"
            ))),
            Some(_) => Ok(()),
        }
    }

    pub(super) fn deliver(self: &Arc<Self>, from: &str, item: Inbound) {
        let tx = {
            let mut st = self.lock();
            st.inbound
                .entry(from.to_string())
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::channel(INBOUND_DEPTH);
                    self.rt.spawn(dispatch_loop(
                        Arc::downgrade(self),
                        self.handler.clone(),
                        from.to_string(),
                        rx,
                    ));
                    tx
                })
                .clone()
        };
        match tx.try_send(item) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Inbound::Req(id, env))) => {
                tracing::warn!(node = %self.name, peer = %from, kind = %env.kind, "inbound queue full; request refused");
                self.respond(
                    from,
                    id,
                    Err(format!(
                        "{} is overloaded ({INBOUND_DEPTH} frames from {from} waiting): try again",
                        self.name
                    )),
                );
            }
            Err(mpsc::error::TrySendError::Full(Inbound::Msg(env))) => {
                tracing::warn!(node = %self.name, peer = %from, kind = %env.kind, "inbound queue full; message dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn respond(self: &Arc<Self>, to: &str, id: u64, result: Result<Envelope, String>) {
        let kind = match &result {
            Ok(env) => env.kind.clone(),
            Err(_) => "error".to_string(),
        };
        let frame = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Resp { id, result },
        };
        if let Err(e) = self.enqueue(to, &kind, &frame) {
            tracing::warn!(node = %self.name, %to, "reply not sent: {e}");
            // Tell the caller now rather than let it wait for its timeout.
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::Resp {
                    id,
                    result: Err(format!("reply not sent: {e}")),
                },
            };
            let _ = self.enqueue(to, "error", &frame);
        }
    }

    pub(super) fn fail_pending(&self, node: &str) {
        let failed: Vec<Pending> = {
            let mut st = self.lock();
            let ids: Vec<u64> = st
                .pending
                .iter()
                .filter(|(_, p)| p.node == node)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| st.pending.remove(id)).collect()
        };
        for p in failed {
            let _ = p.tx.send(Err(ClusterError::NodeLost(node.to_string())));
        }
    }

    /// The reply `id` from `from`: it completes the request waiting for it, if that request was
    /// sent to `from` (a reply from anyone else is not one).
    pub(super) fn on_response(&self, from: &str, id: u64, result: Result<Envelope, String>) {
        let pending = {
            let mut st = self.lock();
            match st.pending.get(&id) {
                Some(p) if p.node == from => st.pending.remove(&id),
                _ => None,
            }
        };
        if let Some(p) = pending {
            let _ = p.tx.send(result.map_err(ClusterError::Remote));
        }
    }
}

async fn dispatch_loop(
    core: Weak<Core>,
    handler: Arc<dyn MessageHandler>,
    from: String,
    mut rx: mpsc::Receiver<Inbound>,
) {
    while let Some(item) = rx.recv().await {
        match item {
            Inbound::Msg(env) => {
                // Awaiting a task per message keeps per-sender order and contains handler panics.
                let (h, f) = (handler.clone(), from.clone());
                let kind = env.kind.clone();
                if let Err(e) = tokio::spawn(async move { h.on_message(&f, env).await }).await {
                    tracing::error!(%from, %kind, "message handler failed: {e}");
                }
            }
            Inbound::Req(id, env) => {
                let (h, f, c) = (handler.clone(), from.clone(), core.clone());
                tokio::spawn(async move {
                    let kind = env.kind.clone();
                    let (h2, f2) = (h.clone(), f.clone());
                    let result =
                        match tokio::spawn(async move { h2.on_request(&f2, env).await }).await {
                            Ok(r) => r,
                            Err(e) => {
                                tracing::error!(from = %f, %kind, "request handler failed: {e}");
                                Err(format!("request handler failed: {e}"))
                            }
                        };
                    if let Some(core) = c.upgrade() {
                        core.respond(&f, id, result);
                    }
                });
            }
        }
    }
}
