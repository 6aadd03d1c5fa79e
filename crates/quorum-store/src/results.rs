//! The result cache of incremental reviews: completed specialist results and verifier votes
//! under their content keys (`quorum_core::reuse`), in a database of its own under the data
//! dir (`<root>/results/`), bounded in entries, surviving restarts, pruned by `flows gc`.
//!
//! A review opens it for its life (a node for its own): a second process on the same data
//! dir finds it locked and reviews without it ([`DataDir::open_results`] says so). Entries are
//! evicted oldest first past the bound. Unlike a review's facts, a write is not flushed before
//! it returns: the cache is a shortcut for later reviews, so a review flushes it once at its
//! end ([`ResultCache::flush`]); a kill -9 loses at most the results recorded since, which a
//! resumed or later review then runs again.

use crate::data_dir::DataDir;
use crate::error::StoreError;
use crate::flow_store::{open_db, sled_err};
use quorum_core::reuse::{TaskResult, TaskTrace, VoteResult};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The directory of the result cache under the data dir.
pub const RESULTS_DIR: &str = "results";
/// Entries kept when the configuration does not say (tasks, votes and traces together).
pub const DEFAULT_MAX_ENTRIES: usize = 20_000;

const TASKS: &str = "tasks";
const TRACES: &str = "traces";
const VOTES: &str = "votes";
/// Insertion order: big-endian sequence number -> "tree\u{1f}key", for eviction.
const ORDER: &str = "order";

/// A value and its place in the insertion order.
#[derive(Serialize, Deserialize)]
struct Stored<T> {
    seq: u64,
    value: T,
}

/// Completed results by content key, bounded.
#[derive(Clone)]
pub struct ResultCache {
    db: sled::Db,
    path: Arc<PathBuf>,
    max_entries: usize,
    /// Entries held (the `order` tree's length, which sled would count by walking it).
    held: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Debug for ResultCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultCache")
            .field("path", &self.path)
            .field("max_entries", &self.max_entries)
            .finish_non_exhaustive()
    }
}

impl DataDir {
    /// Open the result cache, bounded at `max_entries` (at least 1). `StoreError::Locked`
    /// when another process holds it.
    pub fn open_results(&self, max_entries: usize) -> Result<ResultCache, StoreError> {
        let path = self.root().join(RESULTS_DIR);
        // A cache this process just closed may hold its lock a moment longer.
        let db = crate::data_dir::waiting_out_our_own_lock(|| open_db(&path))?;
        let held = db
            .open_tree(ORDER)
            .map(|t| t.len())
            .map_err(|e| sled_err(&path, e))?;
        Ok(ResultCache {
            db,
            path: Arc::new(path),
            max_entries: max_entries.max(1),
            held: Arc::new(std::sync::atomic::AtomicUsize::new(held)),
        })
    }
}

impl ResultCache {
    fn tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        self.db.open_tree(name).map_err(|e| sled_err(&self.path, e))
    }

    fn get<T: DeserializeOwned>(&self, tree: &str, key: &str) -> Result<Option<T>, StoreError> {
        let Some(bytes) = self
            .tree(tree)?
            .get(key.as_bytes())
            .map_err(|e| sled_err(&self.path, e))?
        else {
            return Ok(None);
        };
        serde_json::from_slice::<Stored<T>>(&bytes)
            .map(|s| Some(s.value))
            .map_err(|e| StoreError::Decode {
                what: format!("cached result {key}"),
                message: e.to_string(),
            })
    }

    fn put<T: Serialize>(&self, tree: &str, key: &str, value: &T) -> Result<(), StoreError> {
        let err = |e| sled_err(&self.path, e);
        let t = self.tree(tree)?;
        let order = self.tree(ORDER)?;
        let seq = self.db.generate_id().map_err(err)?;
        let bytes = serde_json::to_vec(&Stored { seq, value })
            .map_err(|e| StoreError::Encode(e.to_string()))?;
        if let Some(old) = t.insert(key.as_bytes(), bytes).map_err(err)? {
            if let Ok(old) = serde_json::from_slice::<Stored<serde::de::IgnoredAny>>(&old) {
                if order.remove(old.seq.to_be_bytes()).map_err(err)?.is_some() {
                    self.held.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        order
            .insert(seq.to_be_bytes(), format!("{tree}\u{1f}{key}").as_bytes())
            .map_err(err)?;
        self.held.fetch_add(1, Ordering::Relaxed);
        self.evict(&order)
    }

    /// Write what was recorded to disk (a review does it once, at its end).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| sled_err(&self.path, e))
    }

    /// Remove the oldest entries past the bound.
    fn evict(&self, order: &sled::Tree) -> Result<(), StoreError> {
        let err = |e| sled_err(&self.path, e);
        while self.held.load(Ordering::Relaxed) > self.max_entries {
            let Some((_, what)) = order.pop_min().map_err(err)? else {
                break;
            };
            self.held.fetch_sub(1, Ordering::Relaxed);
            let what = String::from_utf8_lossy(&what).into_owned();
            if let Some((tree, key)) = what.split_once('\u{1f}') {
                self.tree(tree)?.remove(key.as_bytes()).map_err(err)?;
            }
        }
        Ok(())
    }

    /// The result recorded under a task key.
    pub fn task(&self, key: &str) -> Result<Option<TaskResult>, StoreError> {
        self.get(TASKS, key)
    }

    /// The last result recorded under a task identity (what a miss is explained against).
    pub fn trace(&self, identity: &str) -> Result<Option<TaskTrace>, StoreError> {
        self.get(TRACES, identity)
    }

    /// Record a task's result under its key, and its trace under its identity.
    pub fn put_task(
        &self,
        key: &str,
        identity: &str,
        result: &TaskResult,
        trace: &TaskTrace,
    ) -> Result<(), StoreError> {
        self.put(TASKS, key, result)?;
        self.put(TRACES, identity, trace)
    }

    pub fn vote(&self, key: &str) -> Result<Option<VoteResult>, StoreError> {
        self.get(VOTES, key)
    }

    pub fn put_vote(&self, key: &str, vote: &VoteResult) -> Result<(), StoreError> {
        self.put(VOTES, key, vote)
    }

    /// Entries held (tasks, traces and votes).
    pub fn len(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop every entry recorded by a review `keep` refuses (one `flows gc` deleted).
    /// Returns how many went.
    pub fn prune(&self, keep: impl Fn(&str) -> bool) -> Result<usize, StoreError> {
        let err = |e| sled_err(&self.path, e);
        let order = self.tree(ORDER)?;
        let mut gone = 0;
        for name in [TASKS, TRACES, VOTES] {
            let tree = self.tree(name)?;
            for item in tree.iter() {
                let (key, bytes) = item.map_err(err)?;
                let Ok(stored) = serde_json::from_slice::<Stored<FlowOf>>(&bytes) else {
                    continue;
                };
                if !keep(&stored.value.flow_id) {
                    tree.remove(&key).map_err(err)?;
                    if order
                        .remove(stored.seq.to_be_bytes())
                        .map_err(err)?
                        .is_some()
                    {
                        self.held.fetch_sub(1, Ordering::Relaxed);
                    }
                    gone += 1;
                }
            }
        }
        self.db.flush().map_err(err)?;
        Ok(gone)
    }
}

/// Any entry's recording review.
#[derive(Deserialize)]
struct FlowOf {
    flow_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(flow: &str) -> VoteResult {
        VoteResult {
            flow_id: flow.into(),
            model: "m".into(),
            verdict: None,
            reason: "r".into(),
        }
    }

    #[test]
    fn entries_survive_reopening_stay_bounded_and_are_pruned_by_flow() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path());
        {
            let cache = data.open_results(3).unwrap();
            for i in 0..5 {
                cache.put_vote(&format!("k{i}"), &vote("f1")).unwrap();
            }
            assert_eq!(cache.len(), 3, "bounded at 3");
            assert!(cache.vote("k0").unwrap().is_none(), "oldest evicted first");
            // A key written again moves to the back instead of taking two places.
            cache.put_vote("k2", &vote("f2")).unwrap();
            cache.put_vote("k5", &vote("f1")).unwrap();
            assert_eq!(cache.len(), 3);
            assert!(cache.vote("k2").unwrap().is_some());
            assert!(cache.vote("k3").unwrap().is_none());
            cache.flush().unwrap();
        }
        let cache = data.open_results(3).unwrap();
        assert_eq!(cache.vote("k2").unwrap().unwrap().flow_id, "f2");
        assert_eq!(cache.prune(|flow| flow != "f1").unwrap(), 2);
        assert_eq!(cache.len(), 1);
        assert!(cache.vote("k2").unwrap().is_some());
    }
}
