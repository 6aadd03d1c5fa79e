//! Memory across reviews: each repository's insights (`quorum_core::memory::Insight`, with
//! their provenance) in the node database's `insights` tree, one JSON list per repository
//! identity, bounded by `quorum_core::memory::PER_REPOSITORY`.
//!
//! The list is read, changed and written back under the node database's lock (one process
//! per data dir holds it), so two reviews never interleave their updates.

use crate::data_dir::NodeStore;
use crate::error::StoreError;
use crate::flow_store::sled_err;
use quorum_core::memory::{self, Insight, Offered};

const TREE: &str = "insights";

impl NodeStore {
    fn insights_tree(&self) -> Result<sled::Tree, StoreError> {
        self.db.open_tree(TREE).map_err(|e| sled_err(&self.path, e))
    }

    /// The insights kept for `repository`, in no particular order.
    pub fn insights(&self, repository: &str) -> Result<Vec<Insight>, StoreError> {
        let tree = self.insights_tree()?;
        match tree
            .get(repository.as_bytes())
            .map_err(|e| sled_err(&self.path, e))?
        {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Decode {
                what: format!("insights of {repository}"),
                message: e.to_string(),
            }),
            None => Ok(Vec::new()),
        }
    }

    fn put_insights(&self, repository: &str, list: &[Insight]) -> Result<(), StoreError> {
        let tree = self.insights_tree()?;
        if list.is_empty() {
            tree.remove(repository.as_bytes())
                .map_err(|e| sled_err(&self.path, e))?;
        } else {
            let bytes = serde_json::to_vec(list).map_err(|e| StoreError::Encode(e.to_string()))?;
            tree.insert(repository.as_bytes(), bytes)
                .map_err(|e| sled_err(&self.path, e))?;
        }
        tree.flush()
            .map(|_| ())
            .map_err(|e| sled_err(&self.path, e))
    }

    /// Offer `repository`'s top `k` insights by decayed score at `now_ms`: each one offered
    /// counts an access (its score's bonus), written back before they are returned.
    pub fn offer_insights(
        &self,
        repository: &str,
        now_ms: u64,
        k: usize,
        base_rate: f64,
    ) -> Result<Vec<Offered>, StoreError> {
        let mut list = self.insights(repository)?;
        let offered = memory::top_k(&list, now_ms, k, base_rate);
        if offered.is_empty() {
            return Ok(offered);
        }
        for i in &mut list {
            if offered.iter().any(|o| o.insight.id == i.id) {
                i.access_count = i.access_count.saturating_add(1);
            }
        }
        self.put_insights(repository, &list)?;
        Ok(offered)
    }

    /// Keep a finished review's insights for `repository` (same issue: replaced, access kept;
    /// the list bounded). Returns how many the repository holds now.
    pub fn record_insights(
        &self,
        repository: &str,
        new: Vec<Insight>,
        now_ms: u64,
        base_rate: f64,
    ) -> Result<usize, StoreError> {
        if new.is_empty() {
            return Ok(self.insights(repository)?.len());
        }
        let mut list = self.insights(repository)?;
        memory::merge(&mut list, new, now_ms, base_rate);
        self.put_insights(repository, &list)?;
        Ok(list.len())
    }

    /// Drop, in every repository, insights older than `older_than_ms` or scoring below
    /// `below` at `now_ms`. Returns how many went.
    pub fn prune_insights(
        &self,
        now_ms: u64,
        base_rate: f64,
        below: f64,
        older_than_ms: Option<u64>,
    ) -> Result<usize, StoreError> {
        let tree = self.insights_tree()?;
        let repos: Vec<String> = tree
            .iter()
            .keys()
            .map(|k| {
                k.map(|k| String::from_utf8_lossy(&k).into_owned())
                    .map_err(|e| sled_err(&self.path, e))
            })
            .collect::<Result<_, _>>()?;
        let mut pruned = 0;
        for repo in repos {
            let mut list = self.insights(&repo)?;
            let n = memory::prune(&mut list, now_ms, base_rate, below, older_than_ms);
            if n > 0 {
                pruned += n;
                self.put_insights(&repo, &list)?;
            }
        }
        Ok(pruned)
    }
}
