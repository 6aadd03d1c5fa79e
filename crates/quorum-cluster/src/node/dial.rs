//! Dialing: every address this node knows (the join list, then what gossip teaches) is dialed
//! until a session to it stands, again every reconnect interval, forever — quietly after the
//! first warning. A link closed during its handshake is a refusal (a wrong cookie, a TLS
//! mismatch), reported once by name. On mutual TLS this crate terminates TLS itself, so the
//! links this node accepts are here too: each handshake in its own task with a deadline, the
//! link bound to what it proved ([`LinkId`]) and handed to the node server.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ractor::ActorRef;
use ractor_cluster::{ClientConnectErr, NodeServerMessage};

use super::binding::{frame_key, peer_cert, LinkId, TlsLink, TLS_HANDSHAKE_TIMEOUT};
use super::state::{Core, State, Target};
use crate::tls::ClusterTls;

/// Dials every address not connected, each reconnect interval and as soon as gossip names a
/// new one, until the node stops.
pub(super) async fn dial_loop(core: Weak<Core>) {
    let period = match core.upgrade() {
        Some(c) => c.reconnect_interval,
        None => return,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        {
            let Some(c) = core.upgrade() else { return };
            // Gossip that names a new peer wakes the loop so joins do not wait a whole interval.
            tokio::select! {
                _ = interval.tick() => {}
                _ = c.dial_wake.notified() => {}
            }
        }
        let Some(c) = core.upgrade() else { return };
        if c.closed.load(Ordering::SeqCst) {
            return;
        }
        c.dial_round().await;
    }
}

impl Core {
    fn target_connected(st: &State, t: &Target) -> bool {
        st.sessions.iter().any(|s| {
            t.name.as_deref() == Some(s.peer.as_str())
                || (!s.is_server && t.resolved.is_some_and(|r| r.to_string() == s.peer_addr))
        })
    }

    async fn dial_round(self: &Arc<Self>) {
        let now = Instant::now();
        let mut todo = Vec::new();
        let mut refused = Vec::new();
        {
            let mut st = self.lock();
            let connected: Vec<(String, bool)> = st
                .targets
                .iter()
                .map(|(a, t)| (a.clone(), Self::target_connected(&st, t)))
                .collect();
            for (addr, is_connected) in connected {
                let Some(t) = st.targets.get_mut(&addr) else {
                    continue;
                };
                if t.name.as_deref() == Some(self.name.as_str())
                    || t.resolved == Some(self.local_addr)
                {
                    continue;
                }
                if is_connected {
                    t.handshake_failed = None;
                    t.warned = false;
                    t.refusal_logged = false;
                    continue;
                }
                if let Some(why) = t.handshake_failed.take() {
                    if !std::mem::replace(&mut t.refusal_logged, true) {
                        refused.push((t.name.clone().unwrap_or_else(|| addr.clone()), why));
                    }
                }
                if t.last_dial
                    .is_some_and(|d| now.duration_since(d) < self.reconnect_interval)
                {
                    continue;
                }
                t.last_dial = Some(now);
                todo.push(addr);
            }
            for (peer, _) in &refused {
                if !st.refused.contains(peer) {
                    st.refused.push(peer.clone());
                }
            }
        }
        for (peer, why) in refused {
            tracing::error!(
                node = %self.name,
                %peer,
                "cluster link to {peer} was refused during the handshake ({why}); \
                 it stays out of the cluster until that is fixed"
            );
        }
        for addr in todo {
            self.rt.spawn(dial(Arc::downgrade(self), addr));
        }
    }

    fn note_unreachable(&self, addr: &str, why: &str) {
        let first = match self.lock().targets.get_mut(addr) {
            Some(t) => !std::mem::replace(&mut t.warned, true),
            None => false,
        };
        if first {
            tracing::warn!(node = %self.name, %addr, "cannot reach cluster peer (will keep retrying): {why}");
        } else {
            tracing::debug!(node = %self.name, %addr, "cannot reach cluster peer: {why}");
        }
    }
}

/// Dial one address (resolved, within a deadline) over plain TCP, TLS or mutual TLS.
async fn dial(core: Weak<Core>, addr: String) {
    let Some(c) = core.upgrade() else { return };
    let Some(server) = c.server().cloned() else {
        return;
    };
    let limit = c.reconnect_interval.max(Duration::from_secs(2));
    let resolved = match tokio::time::timeout(limit, tokio::net::lookup_host(addr.as_str())).await {
        Ok(Ok(mut it)) => it.next(),
        _ => None,
    };
    let Some(resolved) = resolved else {
        c.note_unreachable(&addr, "the address does not resolve");
        return;
    };
    if let Some(t) = c.lock().targets.get_mut(&addr) {
        t.resolved = Some(resolved);
    }
    if resolved == c.local_addr {
        return;
    }
    let connect = async {
        match &c.tls {
            None => ractor_cluster::client_connect(&server, resolved).await,
            Some(tls) if tls.mutual => dial_mutual(&c, &server, tls, resolved).await,
            Some(tls) => {
                let name = match tls.name_for(&addr) {
                    Ok(n) => n,
                    Err(e) => {
                        return Err(ClientConnectErr::Encryption(std::io::Error::other(e)));
                    }
                };
                ractor_cluster::client_connect_enc(&server, resolved, tls.connector.clone(), name)
                    .await
            }
        }
    };
    match tokio::time::timeout(limit, connect).await {
        Ok(Ok(())) => tracing::debug!(node = %c.name, %addr, "dialed"),
        // The peer answered but the TLS handshake failed: as much a refusal as a wrong cookie.
        Ok(Err(ClientConnectErr::Encryption(e))) => {
            if let Some(t) = c.lock().targets.get_mut(&addr) {
                t.handshake_failed = Some(format!("tls: {e}"));
            }
            tracing::debug!(node = %c.name, %addr, "tls handshake failed: {e}");
        }
        Ok(Err(e)) => c.note_unreachable(&addr, &e.to_string()),
        Err(_) => c.note_unreachable(&addr, "connect timed out"),
    }
}

/// Mutual TLS: dial `addr` and hand the established link to the node server.
async fn dial_mutual(
    c: &Arc<Core>,
    server: &ActorRef<NodeServerMessage>,
    tls: &ClusterTls,
    addr: SocketAddr,
) -> Result<(), ClientConnectErr> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(ClientConnectErr::Socket)?;
    let _ = stream.set_nodelay(true);
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    // The name is not checked here (see `ClusterTls::mutual`); any valid one will do.
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("quorum-cluster-peer")
        .map_err(|e| ClientConnectErr::Encryption(std::io::Error::other(e.to_string())))?;
    let stream = tls
        .connector
        .connect(name, stream)
        .await
        .map_err(ClientConnectErr::Encryption)?;
    let (Some(cert), Some(key)) = (peer_cert(stream.get_ref().1), frame_key(stream.get_ref().1))
    else {
        return Err(ClientConnectErr::Encryption(std::io::Error::other(
            "the peer presented no certificate",
        )));
    };
    let label = addr.to_string();
    c.lock().links.insert(
        label.clone(),
        LinkId {
            cert,
            key,
            since: Instant::now(),
        },
    );
    server
        .cast(NodeServerMessage::ConnectionOpenedExternal {
            stream: Box::new(TlsLink {
                io: stream,
                peer: label,
                local,
            }),
            is_server: false,
        })
        .map_err(ClientConnectErr::Messaging)
}

/// Mutual TLS: accept links; each handshake runs in its own task, bounded by
/// [`TLS_HANDSHAKE_TIMEOUT`], so a client that never finishes one delays nobody else.
pub(super) async fn accept_loop(core: Weak<Core>, listener: tokio::net::TcpListener) {
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!("cluster listener cannot accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(c) = core.upgrade() else { return };
        if c.closed.load(Ordering::SeqCst) {
            return;
        }
        c.rt.spawn(accept_one(Arc::downgrade(&c), stream, addr));
    }
}

async fn accept_one(core: Weak<Core>, stream: tokio::net::TcpStream, addr: SocketAddr) {
    let Some(acceptor) = core
        .upgrade()
        .and_then(|c| c.tls.as_ref().map(|t| t.acceptor.clone()))
    else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            tracing::info!(from = %addr, "incoming cluster link refused at the tls handshake: {e}");
            return;
        }
        Err(_) => {
            tracing::info!(from = %addr, "incoming cluster link did not finish its tls handshake in time; closed");
            return;
        }
    };
    let Some(c) = core.upgrade() else { return };
    let conn = tls.get_ref().1;
    let (Some(cert), Some(key)) = (peer_cert(conn), frame_key(conn)) else {
        return;
    };
    let label = addr.to_string();
    c.lock().links.insert(
        label.clone(),
        LinkId {
            cert,
            key,
            since: Instant::now(),
        },
    );
    if let Some(server) = c.server() {
        let _ = server.cast(NodeServerMessage::ConnectionOpenedExternal {
            stream: Box::new(TlsLink {
                io: tls,
                peer: label,
                local,
            }),
            is_server: true,
        });
    }
}
