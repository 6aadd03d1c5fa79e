//! The pack contents that cross the cluster, by content hash: the packs of the reviews this
//! node conducts, served to peers' fetches while each review runs (`PackRegistry`), and what a
//! worker fetched from other nodes, bounded by bytes, least recently used first (`BlobCache`).

use quorum_core::pack::ContextPack;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Packs of reviews this node conducts, by flow, indexed by content hash for peers' fetches.
#[derive(Debug, Default)]
pub struct PackRegistry {
    packs: Mutex<HashMap<String, HashMap<String, quorum_core::pack::Text>>>,
}

impl PackRegistry {
    pub fn register(&self, flow_id: &str, pack: &ContextPack) {
        let index = pack
            .files
            .values()
            .map(|f| (f.hash.clone(), f.content.clone()))
            .collect();
        if let Ok(mut p) = self.packs.lock() {
            p.insert(flow_id.to_string(), index);
        }
    }

    /// The content of the file with `hash` in `flow_id`'s pack, while the review runs.
    pub fn get(&self, flow_id: &str, hash: &str) -> Option<Arc<str>> {
        let text = self.packs.lock().ok()?.get(flow_id)?.get(hash).cloned()?;
        Some(text.to_arc())
    }

    /// Forget a review's pack (it ended); peers' later fetches for it fail, as they should.
    pub fn release(&self, flow_id: &str) {
        if let Ok(mut p) = self.packs.lock() {
            p.remove(flow_id);
        }
    }

    /// How many reviews' packs are held.
    pub fn len(&self) -> usize {
        self.packs.lock().map(|p| p.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Contents fetched from other nodes, by hash, least recently used evicted first once the
/// total passes its byte budget: a worker's memory stays bounded however many reviews it
/// serves, and a pack still crosses the network about once per node while it is in use.
#[derive(Debug)]
pub struct BlobCache {
    budget: u64,
    bytes: u64,
    tick: u64,
    entries: HashMap<String, (Arc<str>, u64)>,
}

/// The default budget of a worker's fetched-content cache.
pub const BLOB_CACHE_BYTES: u64 = 256 * 1024 * 1024;

impl BlobCache {
    pub fn new(budget: u64) -> BlobCache {
        BlobCache {
            budget,
            bytes: 0,
            tick: 0,
            entries: HashMap::new(),
        }
    }

    pub fn get(&mut self, hash: &str) -> Option<Arc<str>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(hash).map(|(c, used)| {
            *used = tick;
            c.clone()
        })
    }

    pub fn insert(&mut self, hash: String, content: Arc<str>) {
        self.tick += 1;
        if let Some((old, _)) = self.entries.insert(hash, (content.clone(), self.tick)) {
            self.bytes -= old.len() as u64;
        }
        self.bytes += content.len() as u64;
        while self.bytes > self.budget && self.entries.len() > 1 {
            // O(n) per eviction; evictions are rare next to fetches, which are network-bound.
            let Some(victim) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(h, _)| h.clone())
            else {
                break;
            };
            if let Some((c, _)) = self.entries.remove(&victim) {
                self.bytes -= c.len() as u64;
            }
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blob_cache_stays_within_its_budget_evicting_the_least_recently_used() {
        let mut c = BlobCache::new(10);
        c.insert("a".into(), Arc::from("aaaa"));
        c.insert("b".into(), Arc::from("bbbb"));
        // Touch a: b is now the least recently used.
        assert!(c.get("a").is_some());
        c.insert("c".into(), Arc::from("cccc"));
        assert!(c.bytes() <= 10, "{}", c.bytes());
        assert!(c.get("b").is_none(), "the least recently used entry stayed");
        assert!(c.get("a").is_some() && c.get("c").is_some());
        // Re-inserting a key does not count it twice.
        c.insert("a".into(), Arc::from("aaaa"));
        assert_eq!(c.bytes(), 8);
        // One entry larger than the budget is kept alone rather than refused.
        c.insert("big".into(), Arc::from("x".repeat(50)));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_released_pack_is_no_longer_served() {
        let reg = PackRegistry::default();
        let pack = ContextPack::from_files("/t".into(), None, vec![("a.rs".into(), "x".into())]);
        reg.register("f1", &pack);
        let hash = pack.files["a.rs"].hash.clone();
        assert!(reg.get("f1", &hash).is_some());
        reg.release("f1");
        assert!(reg.get("f1", &hash).is_none() && reg.is_empty());
    }
}
