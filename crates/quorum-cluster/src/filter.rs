//! Fault injection on this node's links (TiKV transport_simulate style), so tests can make a live
//! node look dead, slow or lossy to its peers without killing it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Frame kind of heartbeats, for [`TransportFilter::drop_kinds`].
pub const KIND_HEARTBEAT: &str = "heartbeat";
/// Frame kind of the graceful-leave notice sent by [`crate::Cluster::shutdown`].
pub const KIND_LEAVE: &str = "leave";
/// Frame kind of blackboard entries broadcast on publish.
pub const KIND_BB_PUBLISH: &str = "bb_publish";
/// Frame kind of every blackboard anti-entropy frame (summaries, id lists, wants, repairs).
pub const KIND_BB_SYNC: &str = "bb_sync";
/// Frame kind of the acknowledgement of a large frame (see [`crate::lanes`]).
pub const KIND_ACK: &str = "ack";

#[derive(Debug, Default)]
struct FilterState {
    partitioned: HashSet<String>,
    delays: HashMap<String, Duration>,
    dropped_kinds: HashSet<String>,
    bandwidth: HashMap<String, u64>,
}

/// Rules applied to this node's traffic. Cheap to clone; all clones share the rules.
///
/// `partition` cuts both directions at this node (outgoing frames are not sent, incoming ones are
/// discarded); `delay` and `drop_kinds` act on outgoing frames only. Heartbeats and blackboard
/// traffic are frames like any other, with the kinds [`KIND_HEARTBEAT`], [`KIND_LEAVE`],
/// [`KIND_BB_PUBLISH`] and [`KIND_BB_SYNC`]; application frames use their envelope's `kind`.
#[derive(Clone, Debug, Default)]
pub struct TransportFilter {
    state: Arc<Mutex<FilterState>>,
}

/// What the filter decided for one outgoing frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Drop,
    Send(Option<Duration>),
}

impl TransportFilter {
    fn lock(&self) -> MutexGuard<'_, FilterState> {
        // A panic while holding this lock cannot leave the sets half-updated, so poisoning is moot.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drop everything to and from `node` until [`heal`](Self::heal) or [`clear`](Self::clear).
    pub fn partition(&self, node: &str) {
        self.lock().partitioned.insert(node.to_string());
    }

    /// Undo [`partition`](Self::partition) for `node`.
    pub fn heal(&self, node: &str) {
        self.lock().partitioned.remove(node);
    }

    /// Hold every frame to `node` for `d` before sending it (order is kept).
    pub fn delay(&self, node: &str, d: Duration) {
        self.lock().delays.insert(node.to_string(), d);
    }

    /// Play a slow wire to `node`: after each frame the link to it is busy for the frame's
    /// length at `bytes_per_sec`, so everything queued behind it waits (as behind a slow
    /// socket). Order is kept.
    pub fn bandwidth(&self, node: &str, bytes_per_sec: u64) {
        self.lock()
            .bandwidth
            .insert(node.to_string(), bytes_per_sec.max(1));
    }

    /// How long the wire to `to` is busy with a frame of `len` bytes (zero without a rule).
    pub(crate) fn wire_time(&self, to: &str, len: usize) -> Duration {
        match self.lock().bandwidth.get(to) {
            Some(bps) => Duration::from_secs_f64(len as f64 / *bps as f64),
            None => Duration::ZERO,
        }
    }

    /// Drop outgoing frames of these kinds, to any node.
    pub fn drop_kinds(&self, kinds: &[&str]) {
        let mut s = self.lock();
        for k in kinds {
            s.dropped_kinds.insert((*k).to_string());
        }
    }

    /// Send frames of these kinds again (undo [`drop_kinds`](Self::drop_kinds)).
    pub fn allow_kinds(&self, kinds: &[&str]) {
        let mut s = self.lock();
        for k in kinds {
            s.dropped_kinds.remove(*k);
        }
    }

    /// Remove every rule.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.partitioned.clear();
        s.delays.clear();
        s.dropped_kinds.clear();
        s.bandwidth.clear();
    }

    pub(crate) fn outgoing(&self, to: &str, kind: &str) -> Verdict {
        let s = self.lock();
        if s.partitioned.contains(to) || s.dropped_kinds.contains(kind) {
            return Verdict::Drop;
        }
        Verdict::Send(s.delays.get(to).copied())
    }

    pub(crate) fn is_partitioned(&self, node: &str) -> bool {
        self.lock().partitioned.contains(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_and_clear() {
        let f = TransportFilter::default();
        assert_eq!(f.outgoing("a", "x"), Verdict::Send(None));
        f.partition("a");
        assert_eq!(f.outgoing("a", "x"), Verdict::Drop);
        assert!(f.is_partitioned("a"));
        f.heal("a");
        f.delay("a", Duration::from_millis(5));
        assert_eq!(
            f.outgoing("a", "x"),
            Verdict::Send(Some(Duration::from_millis(5)))
        );
        f.drop_kinds(&["x"]);
        assert_eq!(f.outgoing("b", "x"), Verdict::Drop);
        assert_eq!(f.outgoing("b", "y"), Verdict::Send(None));
        f.allow_kinds(&["x"]);
        assert_eq!(f.outgoing("b", "x"), Verdict::Send(None));
        f.drop_kinds(&["x"]);
        f.clear();
        assert_eq!(f.outgoing("a", "x"), Verdict::Send(None));
    }
}
