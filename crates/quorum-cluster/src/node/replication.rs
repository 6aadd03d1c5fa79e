//! Blackboard replication between replicas: a published entry is broadcast to the alive
//! members; anti-entropy (on join or rejoin, and every few heartbeat ticks) compares per-flow
//! digests, then each side sends the entries the other lacks, in batches that fit a frame. A
//! flow pruned here is neither asked back for nor taken back.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::state::Core;
use crate::blackboard::{BbEntry, EntryId};
use crate::filter::{KIND_BB_PUBLISH, KIND_BB_SYNC};
use crate::wire::{Body, Frame};

/// Anti-entropy runs every this many heartbeat ticks (and whenever a member joins or rejoins).
pub(super) const ANTI_ENTROPY_EVERY: u64 = 5;

/// Repair batches stay well under ractor_cluster's 16 MiB frame limit.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// Split entries into batches that each fit comfortably in one frame.
fn batches(entries: Vec<BbEntry>) -> Vec<Vec<BbEntry>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut size = 0;
    for e in entries {
        let n = e.body.len() + e.author.len() + e.topic.len() + e.id.flow_id.len() + 128;
        if !cur.is_empty() && size + n > MAX_BATCH_BYTES {
            out.push(std::mem::take(&mut cur));
            size = 0;
        }
        size += n;
        cur.push(e);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Core {
    fn send_entries(self: &Arc<Self>, peer: &str, kind: &str, entries: Vec<BbEntry>) {
        for batch in batches(entries) {
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::BbEntries { entries: batch },
            };
            if let Err(e) = self.enqueue(peer, kind, &frame) {
                tracing::debug!(node = %self.name, %peer, "blackboard entries not sent: {e}");
            }
        }
    }

    /// Start an anti-entropy round with `peer`: it answers with its ids of every flow whose
    /// digest differs, then each side sends what the other lacks.
    pub(super) fn send_summary(self: &Arc<Self>, peer: &str) {
        let frame = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::BbSummary {
                flows: self.bb.summary(),
            },
        };
        let _ = self.enqueue(peer, KIND_BB_SYNC, &frame);
    }

    /// Send an entry this node just published to every alive member.
    pub(crate) fn broadcast_entry(self: &Arc<Self>, entry: &BbEntry) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let alive: Vec<String> = self
            .lock()
            .members
            .iter()
            .filter(|(_, m)| m.alive)
            .map(|(n, _)| n.clone())
            .collect();
        for peer in alive {
            self.send_entries(&peer, KIND_BB_PUBLISH, vec![entry.clone()]);
        }
    }

    /// Entries from `from` (a publish broadcast or an anti-entropy repair).
    pub(super) fn on_bb_entries(self: &Arc<Self>, from: String, entries: Vec<BbEntry>) {
        // The sled batch (and the replica's lock) is blocking work: it runs off the
        // agent's handler and the async threads. Inserts of a grow-only set commute, so
        // two batches racing each other store the same thing.
        let me = self.clone();
        self.rt.spawn_blocking(move || {
            if let Err(e) = me.bb.insert(entries) {
                tracing::error!(node = %me.name, peer = %from, "blackboard entries not stored: {e}");
            }
        });
    }

    /// `from` starts an anti-entropy round: send it this node's ids of every flow whose digest
    /// differs.
    pub(super) fn on_bb_summary(self: &Arc<Self>, from: &str, flows: Vec<(String, String)>) {
        let theirs: HashMap<String, String> = flows.into_iter().collect();
        let ours: HashMap<String, String> = self.bb.summary().into_iter().collect();
        let mut differing: Vec<&String> = theirs
            .keys()
            .chain(ours.keys())
            .filter(|f| theirs.get(*f) != ours.get(*f))
            // A flow pruned here is not asked back for.
            .filter(|f| !self.bb.is_pruned(f))
            .collect();
        differing.sort();
        differing.dedup();
        for flow in differing {
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::BbIds {
                    flow: flow.clone(),
                    ids: self.bb.ids(flow),
                },
            };
            let _ = self.enqueue(from, KIND_BB_SYNC, &frame);
        }
    }

    /// `from`'s ids of `flow`: send what it lacks, ask for what this replica lacks.
    pub(super) fn on_bb_ids(self: &Arc<Self>, from: &str, flow: String, ids: Vec<EntryId>) {
        let missing = self.bb.missing_from(&flow, &ids);
        self.send_entries(from, KIND_BB_SYNC, missing);
        let want = self.bb.unknown(ids);
        if !want.is_empty() {
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::BbWant { ids: want },
            };
            let _ = self.enqueue(from, KIND_BB_SYNC, &frame);
        }
    }

    /// `from` asks for these entries.
    pub(super) fn on_bb_want(self: &Arc<Self>, from: &str, ids: Vec<EntryId>) {
        let entries = self.bb.get(&ids);
        self.send_entries(from, KIND_BB_SYNC, entries);
    }
}
