//! The Raft log, vote and state machine of one node, persisted in sled under its data dir, so a
//! restarted node keeps its vote and log and catches up from the leader instead of starting over.
//!
//! Layout (one sled database, `<data dir>/control/`):
//! - tree `log`: entry index (big-endian u64) → entry JSON;
//! - tree `raft`: `vote`, `purged`, `committed`;
//! - tree `sm`: `m/applied`, `m/membership`, `r/<flow>` (a review without its facts) and
//!   `f/<flow>/<seq>` (one fact each, so appending a fact writes one key, not the whole review);
//! - tree `snapshot`: `current` (the last built or installed snapshot, meta and data).
//!
//! Every write that Raft relies on for safety (vote, appended entries) is flushed before it is
//! acknowledged.

// openraft's trait methods return its `StorageError` by value; the helpers here return the same
// type so they compose with `?`, and boxing it would only be unboxed again at the trait edge.
#![allow(clippy::result_large_err)]

use crate::raft::{NodeId, TypeConfig};
use crate::state::{Command, Outcome, ReviewRecord, Reviews};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, LogState,
    RaftLogReader, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, RwLock};

type SErr = StorageError<NodeId>;

fn io_err(subject: ErrorSubject<NodeId>, verb: ErrorVerb, e: impl std::fmt::Display) -> SErr {
    StorageIOError::new(subject, verb, AnyError::error(e.to_string())).into()
}

fn logs_err(verb: ErrorVerb, e: impl std::fmt::Display) -> SErr {
    io_err(ErrorSubject::Logs, verb, e)
}

fn sm_err(verb: ErrorVerb, e: impl std::fmt::Display) -> SErr {
    io_err(ErrorSubject::StateMachine, verb, e)
}

/// Open (or create) the control-plane database of a node.
pub fn open(dir: &Path) -> Result<(LogStore, StateMachineStore), crate::error::ControlError> {
    let store_err = |e: sled::Error| crate::error::ControlError::Store {
        path: dir.display().to_string(),
        message: e.to_string(),
    };
    let db = sled::open(dir).map_err(store_err)?;
    let log = LogStore {
        log: db.open_tree("log").map_err(store_err)?,
        raft: db.open_tree("raft").map_err(store_err)?,
        db: db.clone(),
    };
    let sm = StateMachineStore::load(db).map_err(|e| crate::error::ControlError::Store {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    Ok((log, sm))
}

/// One review's record as a stopped node's replica holds it (its state machine as last
/// applied), read without starting Raft: what `quorum resume` rebuilds a review from on a node
/// that never conducted it. `Ok(None)` when the replica does not know the review (or there is
/// no control-plane store in `dir`). Fails while a running node holds the store.
pub fn read_review(
    dir: &Path,
    flow_id: &str,
) -> Result<Option<ReviewRecord>, crate::error::ControlError> {
    if !dir.join("conf").exists() && !dir.join("db").exists() {
        return Ok(None);
    }
    let (_, sm) = open(dir)?;
    Ok(sm.review(flow_id))
}

/// The Raft log and vote.
#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    log: sled::Tree,
    raft: sled::Tree,
}

impl LogStore {
    fn get_json<T: for<'a> Deserialize<'a>>(&self, key: &str) -> Result<Option<T>, SErr> {
        match self
            .raft
            .get(key)
            .map_err(|e| logs_err(ErrorVerb::Read, e))?
        {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v)
                .map(Some)
                .map_err(|e| logs_err(ErrorVerb::Read, e)),
        }
    }

    fn put_json<T: Serialize>(&self, key: &str, v: &T) -> Result<(), SErr> {
        let bytes = serde_json::to_vec(v).map_err(|e| logs_err(ErrorVerb::Write, e))?;
        self.raft
            .insert(key, bytes)
            .map_err(|e| logs_err(ErrorVerb::Write, e))?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), SErr> {
        self.db
            .flush_async()
            .await
            .map_err(|e| logs_err(ErrorVerb::Write, e))?;
        Ok(())
    }
}

fn range_keys<RB: RangeBounds<u64>>(range: &RB) -> (Bound<[u8; 8]>, Bound<[u8; 8]>) {
    let map = |b: Bound<&u64>| match b {
        Bound::Included(i) => Bound::Included(i.to_be_bytes()),
        Bound::Excluded(i) => Bound::Excluded(i.to_be_bytes()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (map(range.start_bound()), map(range.end_bound()))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, SErr> {
        let mut out = Vec::new();
        for kv in self.log.range(range_keys(&range)) {
            let (_, v) = kv.map_err(|e| logs_err(ErrorVerb::Read, e))?;
            out.push(serde_json::from_slice(&v).map_err(|e| logs_err(ErrorVerb::Read, e))?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, SErr> {
        let purged: Option<LogId<NodeId>> = self.get_json("purged")?;
        let last = match self.log.last().map_err(|e| logs_err(ErrorVerb::Read, e))? {
            Some((_, v)) => {
                let e: Entry<TypeConfig> =
                    serde_json::from_slice(&v).map_err(|e| logs_err(ErrorVerb::Read, e))?;
                Some(e.log_id)
            }
            None => purged,
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), SErr> {
        self.put_json("vote", vote)?;
        self.flush().await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, SErr> {
        self.get_json("vote")
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), SErr> {
        // Not flushed: a lost committed index is only re-learned from the leader.
        self.put_json("committed", &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, SErr> {
        Ok(self
            .get_json::<Option<LogId<NodeId>>>("committed")?
            .flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut batch = sled::Batch::default();
        for e in entries {
            let bytes = serde_json::to_vec(&e).map_err(|e| logs_err(ErrorVerb::Write, e))?;
            batch.insert(&e.log_id.index.to_be_bytes(), bytes);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| logs_err(ErrorVerb::Write, e))?;
        let flushed = self.db.flush_async().await;
        match flushed {
            Ok(_) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                callback.log_io_completed(Err(std::io::Error::other(msg.clone())));
                Err(logs_err(ErrorVerb::Write, msg))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), SErr> {
        let mut batch = sled::Batch::default();
        for kv in self.log.range(log_id.index.to_be_bytes()..) {
            let (k, _) = kv.map_err(|e| logs_err(ErrorVerb::Delete, e))?;
            batch.remove(k);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| logs_err(ErrorVerb::Delete, e))?;
        self.flush().await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), SErr> {
        // The purge marker first: a crash between the two leaves extra entries, never a gap.
        self.put_json("purged", &Some(log_id))?;
        let mut batch = sled::Batch::default();
        for kv in self.log.range(..=log_id.index.to_be_bytes()) {
            let (k, _) = kv.map_err(|e| logs_err(ErrorVerb::Delete, e))?;
            batch.remove(k);
        }
        self.log
            .apply_batch(batch)
            .map_err(|e| logs_err(ErrorVerb::Delete, e))?;
        self.flush().await
    }
}

/// A review as stored, without its facts (they are stored one key each).
#[derive(Serialize, Deserialize)]
struct ReviewHeader {
    conductor: String,
    epoch: u64,
    meta: serde_json::Value,
    pack_holders: BTreeSet<String>,
    finished: bool,
}

/// The whole state machine, as a snapshot carries it.
#[derive(Serialize, Deserialize, Default)]
struct SmImage {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    reviews: Reviews,
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

/// The state machine: the reviews in memory (read by [`crate::ControlPlane::review`]) and in
/// sled (read back on restart).
#[derive(Clone)]
pub struct StateMachineStore {
    db: sled::Db,
    sm: sled::Tree,
    snap: sled::Tree,
    image: Arc<RwLock<SmImage>>,
    /// Counts snapshots built by this process, so two built at one log id get distinct ids.
    built: Arc<std::sync::atomic::AtomicU64>,
}

fn fact_prefix(flow: &str) -> String {
    format!("f/{flow}/")
}

fn fact_key(flow: &str, seq: usize) -> String {
    format!("f/{flow}/{seq:020}")
}

impl StateMachineStore {
    fn load(db: sled::Db) -> Result<Self, String> {
        let sm = db.open_tree("sm").map_err(|e| e.to_string())?;
        let snap = db.open_tree("snapshot").map_err(|e| e.to_string())?;
        let mut image = SmImage::default();
        let read = |k: &str| sm.get(k).map_err(|e| e.to_string());
        if let Some(v) = read("m/applied")? {
            image.last_applied = serde_json::from_slice(&v).map_err(|e| e.to_string())?;
        }
        if let Some(v) = read("m/membership")? {
            image.membership = serde_json::from_slice(&v).map_err(|e| e.to_string())?;
        }
        for kv in sm.scan_prefix("r/") {
            let (k, v) = kv.map_err(|e| e.to_string())?;
            let flow = String::from_utf8_lossy(&k[2..]).to_string();
            let h: ReviewHeader = serde_json::from_slice(&v).map_err(|e| e.to_string())?;
            let mut facts = Vec::new();
            for f in sm.scan_prefix(fact_prefix(&flow)) {
                let (_, fv) = f.map_err(|e| e.to_string())?;
                facts.push(serde_json::from_slice(&fv).map_err(|e| e.to_string())?);
            }
            image.reviews.reviews.insert(
                flow,
                ReviewRecord {
                    conductor: h.conductor,
                    epoch: h.epoch,
                    meta: h.meta,
                    facts,
                    pack_holders: h.pack_holders,
                    finished: h.finished,
                },
            );
        }
        Ok(StateMachineStore {
            db,
            sm,
            snap,
            image: Arc::new(RwLock::new(image)),
            built: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        })
    }

    /// A copy of one review's record, from this node's replica.
    pub fn review(&self, flow_id: &str) -> Option<ReviewRecord> {
        self.read_image(|i| i.reviews.reviews.get(flow_id).cloned())
    }

    /// The facts of one review from index `from` on, and whether it is finished: what a watcher
    /// on any node reads each time it looks, without copying the facts it already has.
    pub fn facts_since(
        &self,
        flow_id: &str,
        from: usize,
    ) -> Option<(Vec<serde_json::Value>, bool)> {
        self.read_image(|i| {
            i.reviews.reviews.get(flow_id).map(|r| {
                (
                    r.facts.get(from..).map(<[_]>::to_vec).unwrap_or_default(),
                    r.finished,
                )
            })
        })
    }

    /// Every review without its facts, from this node's replica (cheap enough for every tick).
    pub fn summaries(&self) -> Vec<crate::state::ReviewSummary> {
        self.read_image(|i| {
            i.reviews
                .reviews
                .iter()
                .map(|(id, r)| crate::state::ReviewSummary {
                    flow_id: id.clone(),
                    conductor: r.conductor.clone(),
                    epoch: r.epoch,
                    facts: r.facts.len(),
                    pack_holders: r.pack_holders.clone(),
                    finished: r.finished,
                })
                .collect()
        })
    }

    /// A copy of every review's record, from this node's replica.
    pub fn reviews(&self) -> Reviews {
        self.read_image(|i| i.reviews.clone())
    }

    fn read_image<T>(&self, f: impl FnOnce(&SmImage) -> T) -> T {
        // A poisoned lock means a panic mid-apply in this process; the data is still the last
        // consistent image because apply mutates it only after computing the batch.
        let g = self.image.read().unwrap_or_else(|p| p.into_inner());
        f(&g)
    }

    fn header_of(r: &ReviewRecord) -> ReviewHeader {
        ReviewHeader {
            conductor: r.conductor.clone(),
            epoch: r.epoch,
            meta: r.meta.clone(),
            pack_holders: r.pack_holders.clone(),
            finished: r.finished,
        }
    }

    /// Write the whole image to the `sm` tree (after installing a snapshot).
    fn rewrite_all(&self, image: &SmImage) -> Result<(), SErr> {
        let mut batch = sled::Batch::default();
        for kv in self.sm.iter() {
            let (k, _) = kv.map_err(|e| sm_err(ErrorVerb::Delete, e))?;
            batch.remove(k);
        }
        batch.insert("m/applied", enc(&image.last_applied)?);
        batch.insert("m/membership", enc(&image.membership)?);
        for (flow, r) in &image.reviews.reviews {
            batch.insert(format!("r/{flow}").as_bytes(), enc(&Self::header_of(r))?);
            for (i, f) in r.facts.iter().enumerate() {
                batch.insert(fact_key(flow, i).as_bytes(), enc(f)?);
            }
        }
        self.sm
            .apply_batch(batch)
            .map_err(|e| sm_err(ErrorVerb::Write, e))
    }
}

fn enc<T: Serialize>(v: &T) -> Result<Vec<u8>, SErr> {
    serde_json::to_vec(v).map_err(|e| sm_err(ErrorVerb::Write, e))
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, SErr> {
        let (data, last_applied, membership) = {
            let g = self.image.read().unwrap_or_else(|p| p.into_inner());
            let data = serde_json::to_vec(&*g).map_err(|e| sm_err(ErrorVerb::Read, e))?;
            (data, g.last_applied, g.membership.clone())
        };
        let n = self
            .built
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let snapshot_id = match last_applied {
            Some(l) => format!("{}-{}-{n}", l.leader_id, l.index),
            None => format!("empty-{n}"),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        let bytes = serde_json::to_vec(&stored).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        self.snap
            .insert("current", bytes)
            .map_err(|e| sm_err(ErrorVerb::Write, e))?;
        self.db
            .flush_async()
            .await
            .map_err(|e| sm_err(ErrorVerb::Write, e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), SErr> {
        Ok(self.read_image(|i| (i.last_applied, i.membership.clone())))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        {
            let mut g = self.image.write().unwrap_or_else(|p| p.into_inner());
            let mut batch = sled::Batch::default();
            for entry in entries {
                g.last_applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => out.push(Outcome::Noop),
                    EntryPayload::Membership(m) => {
                        g.membership = StoredMembership::new(Some(entry.log_id), m);
                        let v = serde_json::to_vec(&g.membership)
                            .map_err(|e| sm_err(ErrorVerb::Write, e))?;
                        batch.insert("m/membership", v);
                        out.push(Outcome::Noop);
                    }
                    EntryPayload::Normal(cmd) => {
                        let flow = cmd.flow_id().to_string();
                        let before = g.reviews.reviews.get(&flow).map(|r| r.facts.len());
                        let outcome = g.reviews.apply(&cmd);
                        match g.reviews.reviews.get(&flow) {
                            None => {
                                if before.is_some() {
                                    batch.remove(format!("r/{flow}").as_bytes());
                                    for kv in self.sm.scan_prefix(fact_prefix(&flow)) {
                                        let (k, _) =
                                            kv.map_err(|e| sm_err(ErrorVerb::Delete, e))?;
                                        batch.remove(k);
                                    }
                                }
                            }
                            Some(r) => {
                                if outcome.is_accepted() {
                                    let h = serde_json::to_vec(&Self::header_of(r))
                                        .map_err(|e| sm_err(ErrorVerb::Write, e))?;
                                    batch.insert(format!("r/{flow}").as_bytes(), h);
                                    let had = before.unwrap_or(0);
                                    if let Command::AppendFact { .. } = cmd {
                                        for i in had..r.facts.len() {
                                            let f = serde_json::to_vec(&r.facts[i])
                                                .map_err(|e| sm_err(ErrorVerb::Write, e))?;
                                            batch.insert(fact_key(&flow, i).as_bytes(), f);
                                        }
                                    }
                                }
                            }
                        }
                        out.push(outcome);
                    }
                }
            }
            let applied =
                serde_json::to_vec(&g.last_applied).map_err(|e| sm_err(ErrorVerb::Write, e))?;
            batch.insert("m/applied", applied);
            self.sm
                .apply_batch(batch)
                .map_err(|e| sm_err(ErrorVerb::Write, e))?;
        }
        self.db
            .flush_async()
            .await
            .map_err(|e| sm_err(ErrorVerb::Write, e))?;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, SErr> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), SErr> {
        let data = snapshot.into_inner();
        let image: SmImage = serde_json::from_slice(&data).map_err(|e| {
            io_err(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
                e,
            )
        })?;
        self.rewrite_all(&image)?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        let bytes = serde_json::to_vec(&stored).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        self.snap
            .insert("current", bytes)
            .map_err(|e| sm_err(ErrorVerb::Write, e))?;
        self.db
            .flush_async()
            .await
            .map_err(|e| sm_err(ErrorVerb::Write, e))?;
        *self.image.write().unwrap_or_else(|p| p.into_inner()) = image;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, SErr> {
        let Some(v) = self
            .snap
            .get("current")
            .map_err(|e| sm_err(ErrorVerb::Read, e))?
        else {
            return Ok(None);
        };
        let s: StoredSnapshot =
            serde_json::from_slice(&v).map_err(|e| sm_err(ErrorVerb::Read, e))?;
        Ok(Some(Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}
