//! What a link is bound to: the node a ractor_cluster session names (`name~incarnation@host`)
//! and the agent actor on it, and on mutual TLS what the handshake proved — the peer's
//! certificate and a key both ends derive from the TLS session, which authenticates every frame
//! on that link (`seal`).
//!
//! Pure: no state, no tasks. Dialing and accepting (`dial.rs`) record a [`LinkId`] per link;
//! `sessions.rs` matches it to the session; `outbound.rs` seals and `frames.rs` checks.

use std::time::{Duration, Instant};

/// Prefix of every agent actor's name; the rest identifies the node server it belongs to.
pub(super) const AGENT_PREFIX: &str = "quorum-cluster|";

/// ractor_cluster names a node `name~incarnation@host`; members are known by `name`.
///
/// The incarnation keeps two processes that were given the same name distinct at the link
/// level, so the clash reaches our membership (which can say what is wrong) instead of being
/// refused silently inside ractor_cluster's handshake.
pub(super) fn node_of(full: &str) -> &str {
    let n = full.rsplit_once('@').map(|(n, _)| n).unwrap_or(full);
    n.rsplit_once('~').map(|(n, _)| n).unwrap_or(n)
}

/// What a mutual-TLS link proved at its handshake: the peer's end-entity certificate (already
/// chained to the cluster CA) and a key both ends derived from the TLS session (RFC 5705
/// exporter), which authenticates every frame on that link.
#[derive(Clone)]
pub(super) struct LinkId {
    pub(super) cert: tokio_rustls::rustls::pki_types::CertificateDer<'static>,
    pub(super) key: [u8; 32],
    pub(super) since: Instant,
}

/// The exporter label of the frame key (RFC 5705).
const FRAME_KEY_LABEL: &[u8] = b"EXPORTER-quorum-cluster-frame-key";

/// How long a connecting peer has to finish its TLS handshake.
pub(super) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A frame's authenticator on a mutual-TLS link: blake3 keyed with the link's key.
pub(super) const MAC_BYTES: usize = 32;

/// An established TLS link handed to ractor_cluster as an external stream.
pub(super) struct TlsLink<S> {
    pub(super) io: S,
    pub(super) peer: String,
    pub(super) local: String,
}

impl<S> ractor_cluster::ClusterBidiStream for TlsLink<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    fn split(self: Box<Self>) -> (ractor_cluster::BoxRead, ractor_cluster::BoxWrite) {
        let (r, w) = tokio::io::split(self.io);
        (Box::new(r), Box::new(w))
    }
    fn peer_label(&self) -> Option<String> {
        Some(self.peer.clone())
    }
    fn local_label(&self) -> Option<String> {
        Some(self.local.clone())
    }
}

/// A frame as sent on a mutual-TLS link: its authenticator, then the frame.
pub(super) fn seal(key: &[u8; 32], frame: Vec<u8>) -> Vec<u8> {
    let mac = blake3::keyed_hash(key, &frame);
    let mut out = Vec::with_capacity(MAC_BYTES + frame.len());
    out.extend_from_slice(mac.as_bytes());
    out.extend_from_slice(&frame);
    out
}

/// The frame key of a TLS session, the same on both ends.
pub(super) fn frame_key<D>(conn: &tokio_rustls::rustls::ConnectionCommon<D>) -> Option<[u8; 32]> {
    conn.export_keying_material([0u8; 32], FRAME_KEY_LABEL, None)
        .ok()
}

/// The end-entity certificate the peer presented in a TLS session.
pub(super) fn peer_cert<D>(
    conn: &tokio_rustls::rustls::ConnectionCommon<D>,
) -> Option<tokio_rustls::rustls::pki_types::CertificateDer<'static>> {
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.clone().into_owned())
}
