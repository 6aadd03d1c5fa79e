//! One node's replica of the blackboard: the entries of each flow in memory, mirrored to sled
//! when the node has a data directory, bounded to [`MAX_FLOWS`] flows with tombstones for the
//! pruned ones, and the digests, id lists and lookups anti-entropy compares replicas by.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use super::entry::{BbEntry, EntryId};
use crate::error::ClusterError;
use crate::wire::MAX_FRAME_BYTES;

/// Prune the blackboard replica stored under `data_dir` (a node's cluster directory) while no
/// node runs on it, as `quorum flows gc` does: the notes of `flows` and of flows whose newest note
/// is older than `older_than_ms` (ms since the epoch). No replica there is nothing to prune.
/// A running node holds the database, and this fails with `ClusterError::Store`.
pub fn prune_replica(
    data_dir: &Path,
    flows: &[String],
    older_than_ms: u64,
) -> Result<usize, ClusterError> {
    if !data_dir.join("blackboard").is_dir() {
        return Ok(0);
    }
    let store = BbStore::open("", Some(data_dir))?;
    let removed = store.prune(flows, older_than_ms);
    store.close();
    removed
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
    /// Tombstones: flow id -> when it was pruned (ms).
    pruned: sled::Tree,
    path: PathBuf,
}

/// Flows whose notes one replica keeps; a review needs its notes only while it runs, so this
/// is far above the reviews a node runs at once.
pub const MAX_FLOWS: usize = 256;

/// Pruned flows remembered so a peer cannot re-send them; the oldest are forgotten first.
pub const MAX_TOMBSTONES: usize = 4096;

struct Mem {
    flows: BTreeMap<String, BTreeMap<EntryId, BbEntry>>,
    last_seq: u64,
    /// When each held flow was last written or read (a logical clock), for LRU pruning.
    used: HashMap<String, u64>,
    tick: u64,
    /// Pruned flows, with when they were pruned (ms since the epoch).
    pruned: HashMap<String, u64>,
}

impl Mem {
    fn touch(&mut self, flow_id: &str) {
        self.tick += 1;
        self.used.insert(flow_id.to_string(), self.tick);
    }

    fn is_pruned(&self, flow_id: &str) -> bool {
        self.pruned.contains_key(flow_id)
    }
}

/// The replica's storage: entries in memory, mirrored to sled when there is a data directory.
pub(crate) struct BbStore {
    node: String,
    mem: Mutex<Mem>,
    disk: Mutex<Option<Disk>>,
    closed: std::sync::atomic::AtomicBool,
    max_flows: usize,
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

/// Open the replica's sled database. A replica this process (or its gc thread) just closed can
/// hold the lock file a moment longer — sled frees it once the writing thread's epoch garbage
/// is collected — so a lock refusal is retried for up to 2 s before it counts as another
/// process's (a running node's) lock.
fn open_waiting_out_our_own_lock(path: &Path) -> sled::Result<sled::Db> {
    const TRIES: u32 = 80;
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(25);
    let mut tries = 0;
    loop {
        match sled::Config::new().path(path).open() {
            Err(sled::Error::Io(e)) if tries < TRIES && is_lock_refusal(&e) => {
                tries += 1;
                std::thread::sleep(PAUSE);
            }
            other => return other,
        }
    }
}

/// sled's "could not acquire lock" (its own wording around the OS's would-block).
fn is_lock_refusal(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock")
}

impl BbStore {
    /// Open the replica of `node`, loading `data_dir/blackboard` when a directory is given.
    pub(crate) fn open(node: &str, data_dir: Option<&Path>) -> Result<BbStore, ClusterError> {
        let mut mem = Mem {
            flows: BTreeMap::new(),
            last_seq: 0,
            used: HashMap::new(),
            tick: 0,
            pruned: HashMap::new(),
        };
        let disk = match data_dir {
            None => None,
            Some(dir) => {
                let path = dir.join("blackboard");
                std::fs::create_dir_all(&path).map_err(|e| store_err(&path, e))?;
                let db = open_waiting_out_our_own_lock(&path).map_err(|e| store_err(&path, e))?;
                let tree = db.open_tree("entries").map_err(|e| store_err(&path, e))?;
                let pruned = db.open_tree("pruned").map_err(|e| store_err(&path, e))?;
                for item in pruned.iter() {
                    let (k, v) = item.map_err(|e| store_err(&path, e))?;
                    let at: u64 = serde_json::from_slice(&v).unwrap_or(0);
                    mem.pruned
                        .insert(String::from_utf8_lossy(&k).into_owned(), at);
                }
                for item in tree.iter() {
                    let (_, v) = item.map_err(|e| store_err(&path, e))?;
                    let entry: BbEntry = serde_json::from_slice(&v)
                        .map_err(|e| store_err(&path, format!("corrupt entry: {e}")))?;
                    if entry.id.node == node {
                        mem.last_seq = mem.last_seq.max(entry.id.seq);
                    }
                    // Left over from a prune interrupted between its two writes.
                    if mem.is_pruned(&entry.id.flow_id) {
                        continue;
                    }
                    mem.used.entry(entry.id.flow_id.clone()).or_insert(0);
                    mem.flows
                        .entry(entry.id.flow_id.clone())
                        .or_default()
                        .insert(entry.id.clone(), entry);
                }
                Some(Disk {
                    db,
                    tree,
                    pruned,
                    path,
                })
            }
        };
        Ok(BbStore {
            node: node.to_string(),
            mem: Mutex::new(mem),
            disk: Mutex::new(disk),
            closed: std::sync::atomic::AtomicBool::new(false),
            max_flows: MAX_FLOWS,
        })
    }

    #[cfg(test)]
    fn with_max_flows(mut self, n: usize) -> Self {
        self.max_flows = n.max(1);
        self
    }

    /// Drop `flows` from memory and disk and leave their tombstones. Returns the entries
    /// removed. The caller holds the memory lock, so no publish interleaves.
    fn prune_locked(&self, mem: &mut Mem, flows: &[String]) -> Result<usize, ClusterError> {
        let now = now_ms();
        let mut removed = Vec::new();
        for f in flows {
            if let Some(entries) = mem.flows.remove(f) {
                removed.extend(entries.into_keys());
            }
            mem.used.remove(f);
            mem.pruned.insert(f.clone(), now);
        }
        let mut forgotten = Vec::new();
        if mem.pruned.len() > MAX_TOMBSTONES {
            let mut by_age: Vec<(u64, String)> =
                mem.pruned.iter().map(|(f, at)| (*at, f.clone())).collect();
            by_age.sort();
            for (_, f) in by_age.into_iter().take(mem.pruned.len() - MAX_TOMBSTONES) {
                mem.pruned.remove(&f);
                forgotten.push(f);
            }
        }
        let disk = self.disk();
        if let Some(d) = disk.as_ref() {
            let mut batch = sled::Batch::default();
            for id in &removed {
                let key = serde_json::to_vec(id).map_err(|err| store_err(&d.path, err))?;
                batch.remove(key);
            }
            d.tree
                .apply_batch(batch)
                .map_err(|e| store_err(&d.path, e))?;
            let mut tombs = sled::Batch::default();
            for f in flows {
                tombs.insert(f.as_bytes(), now.to_string().as_bytes());
            }
            for f in &forgotten {
                tombs.remove(f.as_bytes());
            }
            d.pruned
                .apply_batch(tombs)
                .map_err(|e| store_err(&d.path, e))?;
        }
        Ok(removed.len())
    }

    /// Past the cap, prune the least recently used flows.
    fn enforce_cap(&self, mem: &mut Mem) -> Result<(), ClusterError> {
        let excess = mem.flows.len().saturating_sub(self.max_flows);
        if excess == 0 {
            return Ok(());
        }
        let mut lru: Vec<(u64, String)> = mem
            .flows
            .keys()
            .map(|f| (mem.used.get(f).copied().unwrap_or(0), f.clone()))
            .collect();
        lru.sort();
        let victims: Vec<String> = lru.into_iter().take(excess).map(|(_, f)| f).collect();
        tracing::debug!(node = %self.node, flows = ?victims, "blackboard full: pruning least recently used flows");
        self.prune_locked(mem, &victims).map(|_| ())
    }

    /// Prune the notes of `flows` and of every flow whose newest note is older than
    /// `older_than_ms` (ms since the epoch; 0 = none by age). Returns the entries removed.
    pub(crate) fn prune(
        &self,
        flows: &[String],
        older_than_ms: u64,
    ) -> Result<usize, ClusterError> {
        let mut mem = self.mem();
        let mut victims: Vec<String> = flows.to_vec();
        for (f, entries) in &mem.flows {
            let newest = entries.values().map(|e| e.at_ms).max().unwrap_or(0);
            if newest < older_than_ms && !victims.contains(f) {
                victims.push(f.clone());
            }
        }
        self.prune_locked(&mut mem, &victims)
    }

    pub(crate) fn is_pruned(&self, flow_id: &str) -> bool {
        self.mem().is_pruned(flow_id)
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
        if size > MAX_FRAME_BYTES - 4096 {
            return Err(ClusterError::Store(format!(
                "a blackboard entry of {size} bytes is too large to replicate"
            )));
        }
        self.persist(&[&entry])?;
        mem.last_seq = seq;
        // Publishing is use: a flow this node writes to again is live, whatever pruned it.
        if mem.pruned.remove(flow_id).is_some() {
            if let Some(d) = self.disk().as_ref() {
                let _ = d.pruned.remove(flow_id.as_bytes());
            }
        }
        mem.touch(flow_id);
        mem.flows
            .entry(flow_id.to_string())
            .or_default()
            .insert(entry.id.clone(), entry.clone());
        self.enforce_cap(&mut mem)?;
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
            // A pruned flow is not taken back from a peer that still holds it.
            if !known && !mem.is_pruned(&e.id.flow_id) && seen.insert(e.id.clone()) {
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
            mem.touch(&e.id.flow_id);
            mem.flows
                .entry(e.id.flow_id.clone())
                .or_default()
                .insert(e.id.clone(), e);
        }
        self.enforce_cap(&mut mem)?;
        Ok(n)
    }

    pub(crate) fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<BbEntry> {
        let mut mem = self.mem();
        if mem.flows.contains_key(flow_id) {
            mem.touch(flow_id);
        }
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
                !mem.is_pruned(&id.flow_id)
                    && !mem
                        .flows
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
        let huge = "x".repeat(MAX_FRAME_BYTES);
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

    #[test]
    fn past_the_cap_the_least_recently_used_flow_is_pruned_and_not_taken_back() {
        let s = BbStore::open("a", None).unwrap().with_max_flows(2);
        s.create("f1", "au", "t", "one").unwrap();
        let old = s.create("f2", "au", "t", "two").unwrap();
        // Reading f1 makes f2 the least recently used.
        assert_eq!(s.read("f1", None).len(), 1);
        s.create("f3", "au", "t", "three").unwrap();
        assert_eq!(s.flows(), vec!["f1".to_string(), "f3".to_string()]);
        assert!(s.is_pruned("f2"));
        // A peer that still holds f2 cannot bring it back through anti-entropy.
        assert_eq!(s.insert(vec![old.clone()]).unwrap(), 0);
        assert!(s.unknown(vec![old.id]).is_empty());
        assert!(s.summary().iter().all(|(f, _)| f != "f2"));
    }

    #[test]
    fn pruned_flows_stay_pruned_across_reopen_and_old_flows_go_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let s = BbStore::open("a", Some(dir.path())).unwrap();
        let gone = s.create("deleted", "au", "t", "x").unwrap();
        s.create("kept", "au", "t", "y").unwrap();
        // A flow whose newest note is from the distant past (at_ms 5).
        s.insert(vec![entry("stale", "b", 5)]).unwrap();
        s.close();
        // Offline, as `quorum flows gc` does: the deleted review's notes and notes older than 10 ms
        // after the epoch.
        // On its own thread, as in its own `quorum flows gc` process: sled frees its lock file
        // only once the epoch garbage of the thread that wrote is collected, at thread exit.
        let path = dir.path().to_path_buf();
        let removed =
            std::thread::spawn(move || prune_replica(&path, &["deleted".to_string()], 10))
                .join()
                .unwrap()
                .unwrap();
        assert_eq!(removed, 2);
        let s = BbStore::open("a", Some(dir.path())).unwrap();
        assert_eq!(s.flows(), vec!["kept".to_string()]);
        assert_eq!(s.insert(vec![gone, entry("stale", "b", 5)]).unwrap(), 0);
        // A review that publishes again is live: its flow is no longer pruned.
        s.create("deleted", "au", "t", "again").unwrap();
        assert!(!s.is_pruned("deleted"));
        assert_eq!(s.read("deleted", None).len(), 1);
        // No replica under a directory is nothing to prune.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(prune_replica(empty.path(), &[], u64::MAX).unwrap(), 0);
    }
}
