//! What a node has queued for one peer, as a pure state machine: a control lane (heartbeats,
//! leave notices, acknowledgements) that always goes first, and a bounded bulk lane paced by
//! the peer's acknowledgements, so liveness never waits behind megabytes of fetch replies and a
//! slow or dead peer cannot make a node buffer without limit.
//!
//! ractor_cluster gives each link one ordered, unbounded queue to the socket and says nothing
//! about what has been written. So the writer hands the link at most [`Limits::window`] bytes of
//! large ("windowed") bulk frames that the peer has not acknowledged yet: a heartbeat queued
//! behind them waits for at most that much data, whatever is waiting here. Small bulk frames
//! are not windowed (their acknowledgements would cost more than they save). An
//! acknowledgement that never comes (a frame lost with its link, a peer that stopped) stops
//! counting after [`Limits::ack_timeout`], so a window cannot stay shut.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The lane bounds of one peer's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes waiting in the bulk lane; a frame that would pass it is refused.
    pub bulk_bytes: usize,
    /// Most frames waiting in the bulk lane.
    pub bulk_frames: usize,
    /// Most frames waiting in the control lane; past it the oldest is dropped (a newer
    /// heartbeat supersedes an older one).
    pub control_frames: usize,
    /// Most unacknowledged windowed bytes handed to the link.
    pub window: usize,
    /// Frames at least this large are windowed (and acknowledged by the peer).
    pub windowed_min: usize,
    /// An acknowledgement not received by then is given up on.
    pub ack_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_bytes: 64 << 20,
            bulk_frames: 4096,
            control_frames: 64,
            window: 2 << 20,
            windowed_min: 64 << 10,
            ack_timeout: Duration::from_secs(5),
        }
    }
}

/// A frame to send: its bytes (unsealed), when it may leave (a test filter's delay), and the
/// sequence number the peer acknowledges it with, for a windowed frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub bytes: Vec<u8>,
    pub due: Option<tokio::time::Instant>,
    pub seq: Option<u64>,
}

/// Why a bulk frame was not queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    pub waiting_bytes: usize,
    pub waiting_frames: usize,
}

/// One peer's outgoing frames.
#[derive(Debug)]
pub struct Lanes {
    limits: Limits,
    control: VecDeque<Queued>,
    bulk: VecDeque<Queued>,
    bulk_bytes: usize,
    /// Windowed frames handed to the link and not yet acknowledged: seq → (bytes, when).
    unacked: BTreeMap<u64, (usize, Instant)>,
    unacked_bytes: usize,
    next_seq: u64,
    /// Control frames dropped because newer ones superseded them.
    pub superseded: u64,
    /// Acknowledgements given up on.
    pub expired: u64,
}

impl Lanes {
    pub fn new(limits: Limits) -> Lanes {
        Lanes {
            limits,
            control: VecDeque::new(),
            bulk: VecDeque::new(),
            bulk_bytes: 0,
            unacked: BTreeMap::new(),
            unacked_bytes: 0,
            next_seq: 1,
            superseded: 0,
            expired: 0,
        }
    }

    /// Whether a bulk frame of `len` bytes is windowed: it then needs a sequence number
    /// ([`Lanes::next_seq`]) in its encoding, which the peer acknowledges.
    pub fn is_windowed(&self, len: usize) -> bool {
        len >= self.limits.windowed_min
    }

    /// A fresh sequence number for a windowed frame.
    pub fn next_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Queue a control frame; the oldest waiting one goes when the lane is full.
    pub fn push_control(&mut self, q: Queued) {
        if self.control.len() >= self.limits.control_frames.max(1) {
            self.control.pop_front();
            self.superseded += 1;
        }
        self.control.push_back(q);
    }

    /// Queue a bulk frame, or refuse it when the lane is full (backpressure: the caller says so).
    pub fn push_bulk(&mut self, q: Queued) -> Result<(), Full> {
        let full = self.bulk.len() >= self.limits.bulk_frames
            || (!self.bulk.is_empty() && self.bulk_bytes + q.bytes.len() > self.limits.bulk_bytes);
        if full {
            return Err(Full {
                waiting_bytes: self.bulk_bytes,
                waiting_frames: self.bulk.len(),
            });
        }
        self.bulk_bytes += q.bytes.len();
        self.bulk.push_back(q);
        Ok(())
    }

    /// The next frame to hand to the link, if any may go now: control first; then the head of
    /// the bulk lane, unless it is windowed and the window is full.
    pub fn take(&mut self, now: Instant) -> Option<Queued> {
        self.expire(now);
        if let Some(q) = self.control.pop_front() {
            return Some(q);
        }
        let head = self.bulk.front()?;
        if head.seq.is_some()
            && self.unacked_bytes > 0
            && self.unacked_bytes + head.bytes.len() > self.limits.window
        {
            return None;
        }
        let q = self.bulk.pop_front()?;
        self.bulk_bytes -= q.bytes.len();
        Some(q)
    }

    /// A windowed frame was handed to the link (call it only for frames really sent).
    pub fn sent(&mut self, seq: u64, len: usize, now: Instant) {
        if self.unacked.insert(seq, (len, now)).is_none() {
            self.unacked_bytes += len;
        }
    }

    /// The peer acknowledged `seq`; an unknown or repeated acknowledgement changes nothing.
    pub fn acked(&mut self, seq: u64) {
        if let Some((len, _)) = self.unacked.remove(&seq) {
            self.unacked_bytes -= len;
        }
    }

    /// Forget every outstanding acknowledgement (the link went down: nothing more will come).
    pub fn reset_window(&mut self) {
        self.unacked.clear();
        self.unacked_bytes = 0;
    }

    fn expire(&mut self, now: Instant) {
        let timeout = self.limits.ack_timeout;
        let late: Vec<u64> = self
            .unacked
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) >= timeout)
            .map(|(s, _)| *s)
            .collect();
        for s in late {
            self.acked(s);
            self.expired += 1;
        }
    }

    /// Bytes of windowed frames in flight, unacknowledged.
    pub fn in_flight(&self) -> usize {
        self.unacked_bytes
    }

    /// Frames waiting in (control, bulk).
    pub fn waiting(&self) -> (usize, usize) {
        (self.control.len(), self.bulk.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(len: usize, seq: Option<u64>) -> Queued {
        Queued {
            bytes: vec![b'x'; len],
            due: None,
            seq,
        }
    }

    fn limits() -> Limits {
        Limits {
            bulk_bytes: 1000,
            bulk_frames: 4,
            control_frames: 2,
            window: 300,
            windowed_min: 100,
            ack_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn control_frames_go_before_every_waiting_bulk_frame() {
        let now = Instant::now();
        let mut l = Lanes::new(limits());
        l.push_bulk(q(50, None)).unwrap();
        l.push_bulk(q(60, None)).unwrap();
        l.push_control(q(1, None));
        assert_eq!(l.take(now).unwrap().bytes.len(), 1, "the heartbeat first");
        assert_eq!(l.take(now).unwrap().bytes.len(), 50, "then bulk in order");
        l.push_control(q(2, None));
        assert_eq!(l.take(now).unwrap().bytes.len(), 2);
        assert_eq!(l.take(now).unwrap().bytes.len(), 60);
        assert!(l.take(now).is_none());
    }

    #[test]
    fn a_full_control_lane_drops_its_oldest_frame() {
        let now = Instant::now();
        let mut l = Lanes::new(limits());
        for n in 1..=3 {
            l.push_control(q(n, None));
        }
        assert_eq!(l.superseded, 1);
        assert_eq!(l.take(now).unwrap().bytes.len(), 2);
        assert_eq!(l.take(now).unwrap().bytes.len(), 3);
    }

    #[test]
    fn the_bulk_lane_refuses_past_its_bytes_or_frames() {
        let mut l = Lanes::new(limits());
        l.push_bulk(q(600, None)).unwrap();
        assert_eq!(
            l.push_bulk(q(500, None)),
            Err(Full {
                waiting_bytes: 600,
                waiting_frames: 1
            })
        );
        l.push_bulk(q(400, None)).unwrap();
        let mut l = Lanes::new(limits());
        for _ in 0..4 {
            l.push_bulk(q(1, None)).unwrap();
        }
        assert!(l.push_bulk(q(1, None)).is_err(), "frame bound");
        // One frame larger than the byte bound alone is still sent: it is bounded by the
        // frame limit, and refusing it would make it unsendable.
        let mut l = Lanes::new(limits());
        l.push_bulk(q(5000, None)).unwrap();
    }

    #[test]
    fn windowed_frames_wait_for_acknowledgements_and_control_never_does() {
        let now = Instant::now();
        let mut l = Lanes::new(limits());
        for seq in 1..=3 {
            l.push_bulk(q(150, Some(seq))).unwrap();
        }
        let a = l.take(now).unwrap();
        l.sent(a.seq.unwrap(), 150, now);
        let b = l.take(now).unwrap();
        l.sent(b.seq.unwrap(), 150, now);
        assert_eq!(l.in_flight(), 300);
        assert!(l.take(now).is_none(), "the window is full");
        l.push_control(q(1, None));
        assert_eq!(
            l.take(now).unwrap().bytes.len(),
            1,
            "a heartbeat goes anyway"
        );
        l.acked(1);
        l.acked(1);
        assert_eq!(l.in_flight(), 150, "a repeated ack counts once");
        let c = l.take(now).unwrap();
        assert_eq!(c.seq, Some(3));
    }

    #[test]
    fn an_unwindowed_frame_is_not_held_by_the_window_nor_a_first_frame_by_its_size() {
        let now = Instant::now();
        let mut l = Lanes::new(limits());
        // Alone, a windowed frame bigger than the window still goes.
        l.push_bulk(q(900, Some(1))).unwrap();
        let a = l.take(now).unwrap();
        l.sent(1, 900, now);
        l.push_bulk(q(20, None)).unwrap();
        assert_eq!(l.take(now).unwrap().bytes.len(), 20, "small frames flow");
        assert!(l.is_windowed(100) && !l.is_windowed(99));
        drop(a);
    }

    #[test]
    fn a_lost_acknowledgement_stops_counting_after_the_timeout_or_a_reset() {
        let t0 = Instant::now();
        let mut l = Lanes::new(limits());
        l.push_bulk(q(200, Some(1))).unwrap();
        l.push_bulk(q(200, Some(2))).unwrap();
        l.take(t0).unwrap();
        l.sent(1, 200, t0);
        assert!(l.take(t0 + Duration::from_secs(4)).is_none());
        let b = l
            .take(t0 + Duration::from_secs(5))
            .expect("the window reopened");
        assert_eq!((b.seq, l.expired), (Some(2), 1));
        l.sent(2, 200, t0);
        l.reset_window();
        assert_eq!(l.in_flight(), 0);
    }
}
