//! What travels between nodes: one remotable ractor message variant carrying a JSON frame, so the
//! protocol can grow without touching ractor's serialization and bad bytes never panic a decoder.

use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use crate::blackboard::{BbEntry, EntryId};
use crate::member::NodeAdvert;
use crate::message::Envelope;

/// The largest frame sent. A peer drops the whole link on a frame over its 16 MiB inbound limit,
/// so a bigger one is refused here instead (leaving room for ractor's own envelope).
pub const MAX_FRAME_BYTES: usize = 15 << 20;

/// The agent actor's message. Remote nodes reach it through ractor_cluster `RemoteActor`s.
#[derive(RactorClusterMessage)]
pub(crate) enum AgentMsg {
    Frame(Vec<u8>),
}

/// A frame, always stamped with the sender's node name.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Frame {
    pub(crate) from: String,
    pub(crate) body: Body,
    /// Set on a large frame: the receiver answers with `Ack { seq }` (see [`crate::lanes`]).
    /// Spliced into the encoding by the sender's queue, so it is never set by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ack: Option<u64>,
}

/// A peer known to the sender, gossiped with every heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct PeerAddr {
    pub(crate) name: String,
    pub(crate) addr: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Body {
    /// Liveness, the sender's advert and its member list. `incarnation` changes on every start,
    /// so a fast restart is still seen as a loss.
    Heartbeat {
        incarnation: u64,
        advert: NodeAdvert,
        peers: Vec<PeerAddr>,
        /// When the sender started (ms since the epoch): of two nodes given the same name, the
        /// one that started later gives way.
        #[serde(default)]
        started_ms: u64,
    },
    /// The sender is shutting down; answered with `Resp { id: ack }`.
    Leave {
        incarnation: u64,
        ack: u64,
    },
    Msg {
        env: Envelope,
    },
    Req {
        id: u64,
        env: Envelope,
    },
    Resp {
        id: u64,
        result: Result<Envelope, String>,
    },
    /// Entries to add (a publish broadcast or an anti-entropy repair).
    BbEntries {
        entries: Vec<BbEntry>,
    },
    /// Anti-entropy round start: the sender's `(flow, digest)` pairs.
    BbSummary {
        flows: Vec<(String, String)>,
    },
    /// The sender's ids for a flow whose digests differ.
    BbIds {
        flow: String,
        ids: Vec<EntryId>,
    },
    /// Ids the sender lacks and asks for.
    BbWant {
        ids: Vec<EntryId>,
    },
    /// The frame the receiver stamped `ack: seq` arrived.
    Ack {
        seq: u64,
    },
}

impl Frame {
    pub(crate) fn encode(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Frame, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Stamp an encoded frame (a JSON object) with `ack: seq` without encoding it again: a
    /// large frame is copied once, not serialised twice.
    pub(crate) fn stamp_ack(mut encoded: Vec<u8>, seq: u64) -> Vec<u8> {
        if encoded.last() == Some(&b'}') {
            encoded.pop();
            encoded.extend_from_slice(format!(",\"ack\":{seq}}}").as_bytes());
        }
        encoded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_garbage_is_an_error() {
        let f = Frame {
            from: "a".into(),
            ack: None,
            body: Body::Resp {
                id: 7,
                result: Err("no".into()),
            },
        };
        let back = Frame::decode(&f.encode().unwrap()).unwrap();
        assert_eq!(back.from, "a");
        assert!(matches!(back.body, Body::Resp { id: 7, result: Err(ref e) } if e == "no"));
        assert!(Frame::decode(b"\xff not json").is_err());
    }

    #[test]
    fn a_stamped_frame_carries_its_ack_and_decodes_as_it_was() {
        let f = Frame {
            from: "a".into(),
            ack: None,
            body: Body::Ack { seq: 3 },
        };
        let stamped = Frame::stamp_ack(f.encode().unwrap(), 42);
        let back = Frame::decode(&stamped).unwrap();
        assert_eq!((back.from.as_str(), back.ack), ("a", Some(42)));
        assert!(matches!(back.body, Body::Ack { seq: 3 }));
    }

    use proptest::prelude::*;

    /// Well-formed frames of every kind, as bytes, for the mutation fuzzers to start from.
    fn seeds() -> Vec<Vec<u8>> {
        let bodies = vec![
            Body::Heartbeat {
                incarnation: 1,
                started_ms: 1,
                advert: NodeAdvert::default(),
                peers: vec![PeerAddr {
                    name: "b".into(),
                    addr: "127.0.0.1:1".into(),
                }],
            },
            Body::Leave {
                incarnation: 2,
                ack: 3,
            },
            Body::Resp {
                id: 1,
                result: Err("e".into()),
            },
            Body::BbSummary {
                flows: vec![("f".into(), "d".into())],
            },
            Body::BbWant { ids: vec![] },
        ];
        bodies
            .into_iter()
            .map(|body| {
                Frame {
                    from: "a".into(),
                    ack: None,
                    body,
                }
                .encode()
                .unwrap()
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Whatever a peer sends, decoding returns a frame or an error; it never panics.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = Frame::decode(&bytes);
        }

        #[test]
        fn decoding_edited_frames_never_panics(
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0usize..3), 0..6),
        ) {
            let seeds = seeds();
            let mut b = seeds[seed.index(seeds.len())].clone();
            for (at, byte, delete) in edits {
                if b.is_empty() {
                    break;
                }
                let i = at.index(b.len());
                let end = (i + delete).min(b.len());
                b.splice(i..end, [byte]);
            }
            if let Ok(f) = Frame::decode(&b) {
                // What decodes re-encodes: nothing half-built escapes the decoder.
                prop_assert!(f.encode().is_ok());
            }
        }
    }

    #[test]
    fn deeply_nested_frames_are_an_error_not_a_stack_overflow() {
        let deep = format!(
            "{{\"from\":\"a\",\"body\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(Frame::decode(deep.as_bytes()).is_err());
    }
}
