//! How both ends of an API connection notice a peer that went silent without closing it: a
//! frozen workstation (SIGSTOP, a hung kernel) or a pulled cable sends no reset, so a stream
//! from it would otherwise wait for as long as the machine stays unreachable.
//!
//! HTTP/2 PING frames do the noticing: every `interval` each side pings, and a ping not
//! answered within `timeout` closes the connection, which ends every call on it with an
//! error. A review that is merely slow (a long model call, no events for minutes) still
//! answers its pings, so it is never mistaken for a dead one.

use std::time::Duration;

/// The ping cadence of one side of an API connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// How often an open connection is pinged, busy or idle.
    pub interval: Duration,
    /// How long an unanswered ping is waited for before the connection is declared dead.
    pub timeout: Duration,
}

impl Keepalive {
    /// The shortest cadence accepted: below it pings would be most of the traffic.
    pub const MIN: Duration = Duration::from_millis(50);

    /// Matched to a cluster whose heartbeat deadline is `deadline` (a node's `--deadline-ms`):
    /// a silent path is declared dead in under two deadlines, about when the cluster itself
    /// declares the node lost and a survivor takes its reviews over.
    pub fn for_deadline(deadline: Duration) -> Keepalive {
        Keepalive::new(deadline * 2 / 3, deadline)
    }

    /// `interval` and `timeout`, each raised to at least [`Keepalive::MIN`].
    pub fn new(interval: Duration, timeout: Duration) -> Keepalive {
        Keepalive {
            interval: interval.max(Keepalive::MIN),
            timeout: timeout.max(Keepalive::MIN),
        }
    }

    /// The longest a silent peer goes unnoticed: one interval to the next ping, then its
    /// timeout.
    pub fn dead_within(&self) -> Duration {
        self.interval + self.timeout
    }
}

impl Default for Keepalive {
    /// For the cluster's default heartbeat deadline of 3 s: ping every 2 s, give up after
    /// 3 s more, so a silent node is noticed within 5 s.
    fn default() -> Keepalive {
        Keepalive::for_deadline(Duration::from_secs(3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_notices_a_silent_peer_within_five_seconds() {
        let k = Keepalive::default();
        assert_eq!(k.interval, Duration::from_secs(2));
        assert_eq!(k.timeout, Duration::from_secs(3));
        assert_eq!(k.dead_within(), Duration::from_secs(5));
    }

    #[test]
    fn a_tiny_cadence_is_raised_to_the_floor() {
        let k = Keepalive::for_deadline(Duration::from_millis(30));
        assert_eq!((k.interval, k.timeout), (Keepalive::MIN, Keepalive::MIN));
    }
}
