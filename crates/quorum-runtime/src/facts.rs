//! The conductor's fact log: every fact of a review is written to the flow's store as it
//! happens, before the conductor acts on it.
//!
//! Writes go through `spawn_blocking` (sled flushes to disk) and are awaited, so facts land in
//! the order they happened and a `kill -9` after any step loses nothing already decided. A review
//! without a store (benchmarks, some tests) uses [`FactLog::disabled`].
//!
//! In a cluster with a control plane a [`FactSink`] is plugged in: each fact is committed on a
//! majority of voters *before* it is written locally and before the write returns, so a node
//! that takes the review over has every fact the conductor acted on. A sink that refuses a fact
//! (the review was taken over: this conductor's epoch is stale) fences the log: the fact and every
//! later one are dropped, and [`FactLog::fenced`] tells the conductor to stop.

use quorum_store::{AttemptRecord, Event, FlowStore, Replay, StoreError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// One fact as it is replicated: exactly what [`FactLog`] writes to the local store, so a
/// replica can rebuild the store from the sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum ReplicatedFact {
    Event {
        event: Event,
    },
    Attempt {
        record: AttemptRecord,
    },
    Report {
        json: String,
    },
    /// A specialist result recorded for incremental reviews, replicated so that every node
    /// can take it into its own result cache: a review conducted anywhere in the cluster then
    /// reuses it. Not part of the review's own history (replay and resume skip it).
    CachedResult {
        key: String,
        identity: String,
        result: Box<quorum_core::reuse::TaskResult>,
        trace: quorum_core::reuse::TaskTrace,
    },
}

impl ReplicatedFact {
    /// Write this fact to a local store (what the conductor did, or what a node taking the
    /// review over replays).
    pub fn apply_to(&self, store: &FlowStore) -> Result<(), quorum_store::StoreError> {
        match self {
            ReplicatedFact::Event { event } => store.append(event).map(|_| ()),
            ReplicatedFact::Attempt { record } => store.record_attempt(record),
            ReplicatedFact::Report { json } => store.save_report(json),
            // Kept in the result caches, not in the review's store.
            ReplicatedFact::CachedResult { .. } => Ok(()),
        }
    }
}

/// Where a fact log writes: the review's flow store, or something standing in for it (tests
/// put a fault-injecting wrapper here).
pub trait FactStore: Send + Sync + std::fmt::Debug {
    /// Write one fact durably (flushed before it returns).
    fn write(&self, fact: &ReplicatedFact) -> Result<(), StoreError>;
    /// The flow store's directory (`<data dir>/flows/<flow id>/db`), for messages.
    fn path(&self) -> &Path;
}

impl FactStore for FlowStore {
    fn write(&self, fact: &ReplicatedFact) -> Result<(), StoreError> {
        fact.apply_to(self)
    }

    fn path(&self) -> &Path {
        FlowStore::path(self)
    }
}

/// What is wrong with the disk under a store that refused a write, without what to do about
/// one review: "the data dir DIR is out of space (...): free space". A refused write of another
/// kind names the store and the error.
pub fn disk_problem(path: &Path, e: &StoreError) -> String {
    // <data dir>/flows/<flow id>/db
    let data_dir = path
        .parent()
        .and_then(|d| d.parent())
        .and_then(|d| d.parent());
    match (e.storage_fault(), data_dir) {
        (Some(fault), Some(dir)) => {
            // "out of space" and "read-only" say it all; a failing device's own words may help.
            let cause = match (e, &fault) {
                (StoreError::Io { source, .. }, quorum_store::StorageFault::Failing) => {
                    format!(" ({source})")
                }
                _ => String::new(),
            };
            format!(
                "the data dir {} {}{cause}: {}",
                dir.display(),
                fault.describe(),
                fault.remedy()
            )
        }
        _ => format!("the review's facts could not be stored: {e}"),
    }
}

/// The one line a user reads when the store refused a fact: which data dir, what is wrong
/// with it, and what to do — then resume the review.
pub fn store_failure(path: &Path, e: &StoreError) -> String {
    let flow_id = path
        .parent()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    match flow_id {
        Some(id) => format!("{}, then `quorum resume {id}`", disk_problem(path, e)),
        None => disk_problem(path, e),
    }
}

/// Whether this node's store takes writes, as its fact logs last found: a node whose store
/// refuses writes takes no new review and no attempt (it says so in `cluster status`) until a
/// write succeeds again. Shared by every fact log of the node.
#[derive(Debug, Default)]
pub struct StorageHealth {
    failing: std::sync::Mutex<Option<String>>,
}

impl StorageHealth {
    /// A write was refused, for `why`.
    pub fn failed(&self, why: &str) {
        if let Ok(mut f) = self.failing.lock() {
            if f.is_none() {
                tracing::warn!(reason = %why, "the store refuses writes: this node takes no new work until it takes them again");
            }
            *f = Some(why.to_string());
        }
    }

    /// A write went through: the store takes writes again.
    pub fn recovered(&self) {
        if let Ok(mut f) = self.failing.lock() {
            if f.take().is_some() {
                tracing::info!("the store takes writes again");
            }
        }
    }

    /// Why the store refuses writes, while it does.
    pub fn failing(&self) -> Option<String> {
        self.failing.lock().ok().and_then(|f| f.clone())
    }
}

/// Where facts are committed before the conductor acts on them. Implemented outside the runtime
/// (the node's control plane); the runtime only needs to know whether a fact was committed.
#[async_trait::async_trait]
pub trait FactSink: Send + Sync + std::fmt::Debug {
    /// Commit `fact` durably on a majority. `Err` says why it was not (a stale epoch after a
    /// takeover, or no majority within the sink's patience); the conductor must then stop: it
    /// is no longer the review's conductor, or cannot prove it still is.
    async fn commit(&self, fact: &ReplicatedFact) -> Result<(), String>;
    /// Who to tell when a commit has to wait (`Some(why)`) and when it goes on (`None`): the
    /// review's watchers. A sink that never waits ignores it.
    fn on_waiting(&self, _tell: WaitingNotice) {}
}

/// Tells a review's watchers that it waits, and why, or (`None`) that it goes on.
pub type WaitingNotice = Arc<dyn Fn(Option<String>) + Send + Sync>;

/// Why a fact was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactError {
    /// The control plane refused it: another node conducts the review now.
    Fenced(String),
    /// The store could not write it (the data dir is full, read-only or failing).
    Store(String),
}

#[derive(Debug, Clone, Default)]
pub struct FactLog {
    store: Option<Arc<dyn FactStore>>,
    /// The node's view of its store, told of every refusal and every success.
    health: Option<Arc<StorageHealth>>,
    sink: Option<Arc<dyn FactSink>>,
    /// Why the sink refused a fact; set once, shared by every clone of this log.
    fenced: Arc<OnceLock<String>>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl FactLog {
    pub fn new(store: FlowStore) -> Self {
        FactLog::with_store(Arc::new(store))
    }

    /// A log writing to `store` (a flow store, or a stand-in for one).
    pub fn with_store(store: Arc<dyn FactStore>) -> Self {
        FactLog {
            store: Some(store),
            ..FactLog::default()
        }
    }

    /// A log whose facts are committed through `sink` before they are written to `store`.
    pub fn replicated(store: FlowStore, sink: Arc<dyn FactSink>) -> Self {
        FactLog {
            store: Some(Arc::new(store)),
            sink: Some(sink),
            ..FactLog::default()
        }
    }

    pub fn disabled() -> Self {
        FactLog::default()
    }

    /// Report this log's refusals and successes to the node's `health`.
    pub fn with_health(mut self, health: Arc<StorageHealth>) -> Self {
        self.health = Some(health);
        self
    }

    pub fn is_replicated(&self) -> bool {
        self.sink.is_some()
    }

    /// True once the sink refused a fact: the conductor must stop conducting, and nothing it
    /// records from now on is kept.
    pub fn fenced(&self) -> bool {
        self.fenced.get().is_some()
    }

    /// Why the log is fenced, if it is.
    pub fn fence_reason(&self) -> Option<&str> {
        self.fenced.get().map(String::as_str)
    }

    pub fn is_enabled(&self) -> bool {
        self.store.is_some()
    }

    async fn write(&self, what: &'static str, fact: ReplicatedFact) -> Result<(), FactError> {
        if let Some(why) = self.fence_reason() {
            return Err(FactError::Fenced(why.to_string()));
        }
        if let Some(sink) = &self.sink {
            if let Err(reason) = sink.commit(&fact).await {
                tracing::warn!(what, %reason, "fact not committed by the control plane; this node stops conducting the review");
                let _ = self.fenced.set(reason.clone());
                return Err(FactError::Fenced(reason));
            }
        }
        let Some(store) = self.store.clone() else {
            return Ok(());
        };
        let result = tokio::task::spawn_blocking(move || {
            let written = store.write(&fact);
            written.map_err(|e| {
                (
                    store_failure(store.path(), &e),
                    disk_problem(store.path(), &e),
                )
            })
        })
        .await;
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                let why = format!("the fact writer failed: {e}");
                Err((why.clone(), why))
            }
        };
        match result {
            Ok(()) => {
                if let Some(h) = &self.health {
                    h.recovered();
                }
                Ok(())
            }
            // Not stored: nothing that depends on it may happen. The conductor tells the review
            // machine, which ends the review saying this; a resume continues from what was.
            Err((why, disk)) => {
                tracing::debug!(what, error = %why, "fact not stored");
                if let Some(h) = &self.health {
                    h.failed(&disk);
                }
                Err(FactError::Store(why))
            }
        }
    }

    pub async fn event(&self, event: Event) -> Result<(), FactError> {
        self.write("event", ReplicatedFact::Event { event }).await
    }

    pub async fn attempt(&self, record: AttemptRecord) -> Result<(), FactError> {
        self.write("attempt", ReplicatedFact::Attempt { record })
            .await
    }

    pub async fn report(&self, json: String) -> Result<(), FactError> {
        self.write("report", ReplicatedFact::Report { json }).await
    }

    /// Replicate a recorded result to the cluster (a log without a control plane keeps none:
    /// the conducting process's own result cache holds it).
    pub async fn cached_result(
        &self,
        key: String,
        identity: String,
        result: quorum_core::reuse::TaskResult,
        trace: quorum_core::reuse::TaskTrace,
    ) -> Result<(), FactError> {
        if !self.is_replicated() {
            return Ok(());
        }
        let fact = ReplicatedFact::CachedResult {
            key,
            identity,
            result: Box::new(result),
            trace,
        };
        self.write("cached result", fact).await
    }
}

/// What a resumed review starts from: the replayed log and the recorded attempts.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub replay: Replay,
    pub attempts: Vec<AttemptRecord>,
}

impl Resume {
    pub fn load(store: &FlowStore) -> Result<Resume, quorum_store::StoreError> {
        Ok(Resume {
            replay: store.replay()?,
            attempts: store.attempts()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Commits the first `accept` facts, then refuses like a control plane after a takeover.
    #[derive(Debug, Default)]
    struct Sink {
        accept: usize,
        seen: Mutex<Vec<ReplicatedFact>>,
    }

    #[async_trait::async_trait]
    impl FactSink for Sink {
        async fn commit(&self, fact: &ReplicatedFact) -> Result<(), String> {
            let mut seen = self.seen.lock().unwrap();
            if seen.len() >= self.accept {
                return Err("stale epoch 1: the review is at epoch 2".into());
            }
            seen.push(fact.clone());
            Ok(())
        }
    }

    fn store(dir: &std::path::Path) -> FlowStore {
        let data = quorum_store::DataDir::new(dir);
        let meta = quorum_store::FlowMeta {
            flow_id: "f".into(),
            flow_name: "review".into(),
            flow_yaml: String::new(),
            params: serde_json::json!({}),
            target_path: "t".into(),
            head_sha: None,
            started_at: String::new(),
            started_ms: 0,
            node: "n1".into(),
        };
        data.create_flow(&meta).unwrap()
    }

    fn started(n: u32) -> Event {
        Event::AttemptStarted {
            task_id: format!("t{n}"),
            attempt: 1,
            node: "n1".into(),
        }
    }

    #[tokio::test]
    async fn facts_are_committed_then_written_and_a_refusal_fences_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let sink = Arc::new(Sink {
            accept: 2,
            ..Sink::default()
        });
        let log = FactLog::replicated(store.clone(), sink.clone());
        let clone = log.clone();
        let _ = log.event(started(1)).await;
        let _ = log.report("{}".into()).await;
        assert!(!log.fenced());
        // Refused: not written locally, and the log (and every clone) is fenced.
        let _ = log.event(started(2)).await;
        assert!(clone.fenced());
        assert!(log.fence_reason().unwrap().contains("stale epoch"));
        // Nothing after the fence is offered to the sink or written.
        let _ = log.event(started(3)).await;
        let seen = sink.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                ReplicatedFact::Event { event: started(1) },
                ReplicatedFact::Report { json: "{}".into() }
            ]
        );
        let local: Vec<Event> = store
            .events()
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(local, vec![started(1)]);
        assert_eq!(store.report().unwrap().as_deref(), Some("{}"));
    }

    #[tokio::test]
    async fn replayed_facts_rebuild_the_same_store() {
        let dir = tempfile::tempdir().unwrap();
        let a = store(&dir.path().join("a"));
        let b = store(&dir.path().join("b"));
        let facts = [
            ReplicatedFact::Event { event: started(1) },
            ReplicatedFact::Event { event: started(2) },
        ];
        let log = FactLog::new(a.clone());
        for f in &facts {
            if let ReplicatedFact::Event { event } = f {
                let _ = log.event(event.clone()).await;
            }
            f.apply_to(&b).unwrap();
        }
        let ev = |s: &FlowStore| -> Vec<Event> {
            s.events().unwrap().into_iter().map(|e| e.event).collect()
        };
        assert_eq!(ev(&a), ev(&b));
        assert!(!log.is_replicated());
    }
}
