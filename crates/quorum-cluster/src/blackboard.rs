//! The replicated blackboard: a grow-only set of immutable entries per flow, one replica per node.
//!
//! Entry ids are `(flow, node, seq)` where `seq` is a per-node hybrid clock (strictly increasing,
//! never below the wall clock in microseconds), so ids stay unique even when a node without a data
//! directory restarts and starts counting again. Because entries never change and ids never
//! collide, inserting is idempotent and replicas that have seen the same ids hold the same set:
//! broadcast on publish plus anti-entropy (see `node.rs`) is all convergence needs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use crate::node::Core;

/// Unique id of a blackboard entry: the flow it belongs to, the node that published it, and that
/// node's sequence number (a hybrid clock, increasing per node).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryId {
    pub flow_id: String,
    pub node: String,
    pub seq: u64,
}

/// One immutable blackboard entry.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BbEntry {
    pub id: EntryId,
    /// The task or persona that published it.
    pub author: String,
    pub topic: String,
    pub body: String,
    /// Wall-clock publish time on the publishing node, in ms since the Unix epoch.
    pub at_ms: u64,
}

/// This node's replica of the blackboard. Cheap to clone. Once the node stops, `publish` fails
/// and reads keep answering from memory.
#[derive(Clone)]
pub struct Blackboard {
    pub(crate) core: Arc<Core>,
}

impl std::fmt::Debug for Blackboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blackboard")
            .field("node", &self.core.name)
            .finish_non_exhaustive()
    }
}

impl Blackboard {
    /// Publish an entry: it gets the id `(flow_id, this node, next seq)`, is stored in this replica
    /// (and in sled when the node has a data directory) and is broadcast to the alive members.
    pub fn publish(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<BbEntry, ClusterError> {
        let entry = self.core.bb.create(flow_id, author, topic, body)?;
        self.core.broadcast_entry(&entry);
        Ok(entry)
    }

    /// The entries of a flow, optionally only one topic, sorted by `(at_ms, id)`.
    pub fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<BbEntry> {
        self.core.bb.read(flow_id, topic)
    }

    /// An order-independent hash of the ids of a flow's entries: two replicas hold the same
    /// entries of the flow exactly when their digests are equal.
    pub fn digest(&self, flow_id: &str) -> String {
        self.core.bb.digest(flow_id)
    }

    /// Every flow this replica holds entries for, sorted.
    pub fn all_flows(&self) -> Vec<String> {
        self.core.bb.flows()
    }
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

pub(crate) fn now_ms() -> u64 {
    now_micros() / 1000
}

/// The sled side of a replica; `None` once closed so a restarted node can reopen the directory.
struct Disk {
    db: sled::Db,
    tree: sled::Tree,
    path: PathBuf,
}

struct Mem {
    flows: BTreeMap<String, BTreeMap<EntryId, BbEntry>>,
    last_seq: u64,
}

/// The replica's storage: entries in memory, mirrored to sled when there is a data directory.
pub(crate) struct BbStore {
    node: String,
    mem: Mutex<Mem>,
    disk: Mutex<Option<Disk>>,
    closed: std::sync::atomic::AtomicBool,
}

fn store_err(path: &Path, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Store(format!("{}: {e}", path.display()))
}

fn digest_of(entries: Option<&BTreeMap<EntryId, BbEntry>>) -> String {
    let mut h = blake3::Hasher::new();
    // The map is sorted by id, so hashing in iteration order is independent of arrival order.
    for id in entries.into_iter().flat_map(|m| m.keys()) {
        h.update(&(id.flow_id.len() as u64).to_le_bytes());
        h.update(id.flow_id.as_bytes());
        h.update(&(id.node.len() as u64).to_le_bytes());
        h.update(id.node.as_bytes());
        h.update(&id.seq.to_le_bytes());
    }
    h.finalize().to_hex().to_string()
}

impl BbStore {
    /// Open the replica of `node`, loading `data_dir/blackboard` when a directory is given.
    pub(crate) fn open(node: &str, data_dir: Option<&Path>) -> Result<BbStore, ClusterError> {
        let mut mem = Mem {
            flows: BTreeMap::new(),
            last_seq: 0,
        };
        let disk = match data_dir {
            None => None,
            Some(dir) => {
                let path = dir.join("blackboard");
                std::fs::create_dir_all(&path).map_err(|e| store_err(&path, e))?;
                let db = sled::Config::new()
                    .path(&path)
                    .open()
                    .map_err(|e| store_err(&path, e))?;
                let tree = db.open_tree("entries").map_err(|e| store_err(&path, e))?;
                for item in tree.iter() {
                    let (_, v) = item.map_err(|e| store_err(&path, e))?;
                    let entry: BbEntry = serde_json::from_slice(&v)
                        .map_err(|e| store_err(&path, format!("corrupt entry: {e}")))?;
                    if entry.id.node == node {
                        mem.last_seq = mem.last_seq.max(entry.id.seq);
                    }
                    mem.flows
                        .entry(entry.id.flow_id.clone())
                        .or_default()
                        .insert(entry.id.clone(), entry);
                }
                Some(Disk { db, tree, path })
            }
        };
        Ok(BbStore {
            node: node.to_string(),
            mem: Mutex::new(mem),
            disk: Mutex::new(disk),
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn mem(&self) -> MutexGuard<'_, Mem> {
        self.mem.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn disk(&self) -> MutexGuard<'_, Option<Disk>> {
        self.disk.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persist(&self, entries: &[&BbEntry]) -> Result<(), ClusterError> {
        let disk = self.disk();
        let Some(d) = disk.as_ref() else {
            return Ok(());
        };
        let mut batch = sled::Batch::default();
        for e in entries {
            let key = serde_json::to_vec(&e.id).map_err(|err| store_err(&d.path, err))?;
            let val = serde_json::to_vec(e).map_err(|err| store_err(&d.path, err))?;
            batch.insert(key, val);
        }
        d.tree.apply_batch(batch).map_err(|e| store_err(&d.path, e))
    }

    /// Create, store and return a new entry published by this node.
    pub(crate) fn create(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<BbEntry, ClusterError> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ClusterError::Store(
                "the blackboard is closed: the node was shut down".to_string(),
            ));
        }
        // Holding the memory lock across the disk write keeps seq assignment and storage atomic.
        let mut mem = self.mem();
        let seq = (mem.last_seq + 1).max(now_micros());
        let entry = BbEntry {
            id: EntryId {
                flow_id: flow_id.to_string(),
                node: self.node.clone(),
                seq,
            },
            author: author.to_string(),
            topic: topic.to_string(),
            body: body.to_string(),
            at_ms: now_ms(),
        };
        // An entry too big for one frame could never reach the other replicas.
        let size = serde_json::to_vec(&entry)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > crate::node::MAX_FRAME_BYTES - 4096 {
            return Err(ClusterError::Store(format!(
                "a blackboard entry of {size} bytes is too large to replicate"
            )));
        }
        self.persist(&[&entry])?;
        mem.last_seq = seq;
        mem.flows
            .entry(flow_id.to_string())
            .or_default()
            .insert(entry.id.clone(), entry.clone());
        Ok(entry)
    }

    /// Insert entries received from peers; returns how many were new. Known ids are skipped.
    pub(crate) fn insert(&self, entries: Vec<BbEntry>) -> Result<usize, ClusterError> {
        let mut mem = self.mem();
        let mut fresh = Vec::new();
        let mut seen = BTreeSet::new();
        for e in entries {
            let known = mem
                .flows
                .get(&e.id.flow_id)
                .is_some_and(|m| m.contains_key(&e.id));
            if !known && seen.insert(e.id.clone()) {
                fresh.push(e);
            }
        }
        if fresh.is_empty() {
            return Ok(0);
        }
        self.persist(&fresh.iter().collect::<Vec<_>>())?;
        let n = fresh.len();
        for e in fresh {
            if e.id.node == self.node {
                // Our own entries coming back (e.g. after a memory-only restart) keep seqs unique.
                mem.last_seq = mem.last_seq.max(e.id.seq);
            }
            mem.flows
                .entry(e.id.flow_id.clone())
                .or_default()
                .insert(e.id.clone(), e);
        }
        Ok(n)
    }

    pub(crate) fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<BbEntry> {
        let mem = self.mem();
        let mut out: Vec<BbEntry> = mem
            .flows
            .get(flow_id)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|e| topic.is_none_or(|t| e.topic == t))
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.at_ms, &a.id).cmp(&(b.at_ms, &b.id)));
        out
    }

    pub(crate) fn digest(&self, flow_id: &str) -> String {
        digest_of(self.mem().flows.get(flow_id))
    }

    pub(crate) fn flows(&self) -> Vec<String> {
        self.mem().flows.keys().cloned().collect()
    }

    /// `(flow, digest)` for every flow held, for the anti-entropy summary.
    pub(crate) fn summary(&self) -> Vec<(String, String)> {
        let mem = self.mem();
        mem.flows
            .iter()
            .map(|(f, m)| (f.clone(), digest_of(Some(m))))
            .collect()
    }

    pub(crate) fn ids(&self, flow_id: &str) -> Vec<EntryId> {
        self.mem()
            .flows
            .get(flow_id)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Entries of `flow_id` that are not among `theirs`.
    pub(crate) fn missing_from(&self, flow_id: &str, theirs: &[EntryId]) -> Vec<BbEntry> {
        let theirs: BTreeSet<&EntryId> = theirs.iter().collect();
        self.mem()
            .flows
            .get(flow_id)
            .map(|m| {
                m.values()
                    .filter(|e| !theirs.contains(&e.id))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The ids among `theirs` this replica lacks.
    pub(crate) fn unknown(&self, theirs: Vec<EntryId>) -> Vec<EntryId> {
        let mem = self.mem();
        theirs
            .into_iter()
            .filter(|id| {
                !mem.flows
                    .get(&id.flow_id)
                    .is_some_and(|m| m.contains_key(id))
            })
            .collect()
    }

    pub(crate) fn get(&self, ids: &[EntryId]) -> Vec<BbEntry> {
        let mem = self.mem();
        ids.iter()
            .filter_map(|id| mem.flows.get(&id.flow_id).and_then(|m| m.get(id)).cloned())
            .collect()
    }

    /// Flush and release the sled database so the directory can be opened again.
    pub(crate) fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(d) = self.disk().take() {
            if let Err(e) = d.db.flush() {
                tracing::warn!(path = %d.path.display(), "blackboard flush failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(flow: &str, node: &str, seq: u64) -> BbEntry {
        BbEntry {
            id: EntryId {
                flow_id: flow.into(),
                node: node.into(),
                seq,
            },
            author: "a".into(),
            topic: "t".into(),
            body: "b".into(),
            at_ms: seq,
        }
    }

    #[test]
    fn insert_is_idempotent_and_digest_order_independent() {
        let a = BbStore::open("a", None).unwrap();
        let b = BbStore::open("b", None).unwrap();
        assert_eq!(a.digest("f"), b.digest("f"));
        assert_eq!(
            a.insert(vec![entry("f", "x", 1), entry("f", "y", 2)])
                .unwrap(),
            2
        );
        assert_eq!(a.insert(vec![entry("f", "x", 1)]).unwrap(), 0);
        assert_ne!(a.digest("f"), b.digest("f"));
        b.insert(vec![entry("f", "y", 2)]).unwrap();
        b.insert(vec![entry("f", "x", 1)]).unwrap();
        assert_eq!(a.digest("f"), b.digest("f"));
        assert_eq!(a.read("f", None), b.read("f", None));
        assert_eq!(a.missing_from("f", &b.ids("f")), vec![]);
        assert_eq!(b.unknown(vec![entry("f", "z", 3).id]).len(), 1);
    }

    #[test]
    fn own_seqs_increase_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = BbStore::open("a", Some(dir.path())).unwrap();
        let e1 = s.create("f", "au", "t", "one").unwrap();
        let e2 = s.create("f", "au", "u", "two").unwrap();
        assert!(e2.id.seq > e1.id.seq);
        assert_eq!(s.read("f", Some("u")), vec![e2.clone()]);
        let huge = "x".repeat(crate::node::MAX_FRAME_BYTES);
        assert!(matches!(
            s.create("f", "au", "t", &huge),
            Err(ClusterError::Store(_))
        ));
        s.close();
        assert!(s.create("f", "au", "t", "x").is_err());
        let s = BbStore::open("a", Some(dir.path())).unwrap();
        assert_eq!(s.read("f", None), vec![e1, e2.clone()]);
        let e3 = s.create("f", "au", "t", "three").unwrap();
        assert!(e3.id.seq > e2.id.seq);
        assert_eq!(s.flows(), vec!["f".to_string()]);
    }
}
