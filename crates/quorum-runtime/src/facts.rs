//! The conductor's fact log: every fact of a review is written to the flow's store as it
//! happens, before the conductor acts on it.
//!
//! Writes go through `spawn_blocking` (sled flushes to disk) and are awaited, so facts land in
//! the order they happened and a `kill -9` after any step loses nothing already decided. A review
//! without a store (benchmarks, some tests) uses [`FactLog::disabled`].

use quorum_store::{AttemptRecord, Event, FlowStore, Replay};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Default)]
pub struct FactLog {
    store: Option<FlowStore>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl FactLog {
    pub fn new(store: FlowStore) -> Self {
        FactLog { store: Some(store) }
    }

    pub fn disabled() -> Self {
        FactLog { store: None }
    }

    pub fn is_enabled(&self) -> bool {
        self.store.is_some()
    }

    pub fn store(&self) -> Option<&FlowStore> {
        self.store.as_ref()
    }

    async fn write<F>(&self, what: &'static str, f: F)
    where
        F: FnOnce(&FlowStore) -> Result<(), quorum_store::StoreError> + Send + 'static,
    {
        let Some(store) = self.store.clone() else {
            return;
        };
        let result = tokio::task::spawn_blocking(move || f(&store)).await;
        match result {
            Ok(Ok(())) => {}
            // A store that stops accepting writes mid-review is loud but not fatal: the review
            // still produces its report; resume will re-run what was not recorded.
            Ok(Err(e)) => tracing::error!(what, error = %e, "cannot record fact"),
            Err(e) => tracing::error!(what, error = %e, "fact writer panicked"),
        }
    }

    pub async fn event(&self, event: Event) {
        self.write("event", move |s| s.append(&event).map(|_| ()))
            .await;
    }

    pub async fn attempt(&self, record: AttemptRecord) {
        self.write("attempt", move |s| s.record_attempt(&record))
            .await;
    }

    pub async fn report(&self, json: String) {
        self.write("report", move |s| s.save_report(&json)).await;
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
