//! The data directory: one sled database per review, plus one for the node.
//!
//! ```text
//! <root>/flows/<flow_id>/db/         the flow's sled database (see flow_store)
//! <root>/flows/<flow_id>/meta.json   a copy of its FlowMeta, written once at creation
//! <root>/flows/<flow_id>/cancel-requested   written by `flows cancel` while another process runs it
//! <root>/node/                       node-level facts
//! ```
//!
//! A database per review makes sled's exclusive file lock a fact about the review: if the
//! lock is held, another process is running it. `flows list` therefore reports `running`
//! without any stored flag, and an unlocked database without a finish is `interrupted`.
//! While a flow is running its database cannot be read by anyone else, which is why the
//! metadata also sits beside it as plain JSON. Deleting a review is deleting its directory.

use crate::atomic::write_atomically;
use crate::blobs::{BlobStore, Collected, REFERENCES_FILE};
use crate::error::StoreError;
use crate::event::{status_of, Replay};
use crate::flow_store::{now_ms, open_db, sled_err, FlowMeta, FlowStore};
use crate::status::{DerivedStatus, FlowSummary};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const FLOWS_DIR: &str = "flows";
const NODE_DIR: &str = "node";
const DB_DIR: &str = "db";
const META_FILE: &str = "meta.json";
/// Beside a running flow's database: a request, from another process, to cancel it.
const CANCEL_FILE: &str = "cancel-requested";
const MAX_FLOW_ID_LEN: usize = 128;

/// What `cancel_flow` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Another process runs the flow; it was asked to stop.
    Requested,
    /// Nobody ran it; the cancellation is recorded and the flow is finished (partial).
    Recorded,
    /// It had already finished; nothing changed.
    AlreadyFinished,
}

/// The root of everything the store keeps on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    root: PathBuf,
    /// Where its file contents are kept: `root/blobs`, shared by the pack copies a node keeps
    /// under `root/replicas` ([`DataDir::replicas`]), so a node holds each content once.
    blobs_root: PathBuf,
}

/// Under a data dir: the pack copies a node keeps of reviews conducted elsewhere.
pub const REPLICAS_DIR: &str = "replicas";

/// How long an explicit open waits out a lock that may be this process's own, just released.
/// (2 s: a margin for a loaded machine, where the flusher can be slow to run.)
const LOCK_RETRIES: u32 = 80;
const LOCK_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// A store this process just dropped can hold its lock a moment longer (sled's flusher thread
/// lets go of it last): give that moment before saying another process holds it. Listing does
/// not wait — a running review is simply shown as running.
pub(crate) fn waiting_out_our_own_lock<T>(
    mut open: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tries = 0;
    loop {
        match open() {
            Err(StoreError::Locked { .. }) if tries < LOCK_RETRIES => {
                tries += 1;
                std::thread::sleep(LOCK_RETRY_PAUSE);
            }
            other => return other,
        }
    }
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        DataDir {
            blobs_root: root.join(crate::blobs::BLOBS_DIR),
            root,
        }
    }

    /// `$QUORUM_DATA_DIR` when set and non-empty, else the user's data directory + `quorum`,
    /// else `./.quorum`.
    pub fn default_location() -> PathBuf {
        match std::env::var_os("QUORUM_DATA_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => dirs::data_dir()
                .map(|d| d.join("quorum"))
                .unwrap_or_else(|| PathBuf::from(".quorum")),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn flows_dir(&self) -> PathBuf {
        self.root.join(FLOWS_DIR)
    }

    fn flow_dir(&self, flow_id: &str) -> Result<PathBuf, StoreError> {
        validate_flow_id(flow_id)?;
        Ok(self.flows_dir().join(flow_id))
    }

    /// Create a new flow's database, record its metadata, and return it open (and so locked).
    /// Fails with `AlreadyExists` if a flow with that id is stored.
    pub fn create_flow(&self, meta: &FlowMeta) -> Result<FlowStore, StoreError> {
        let dir = self.flow_dir(&meta.flow_id)?;
        let flows = self.flows_dir();
        std::fs::create_dir_all(&flows).map_err(|e| StoreError::io(&flows, e))?;
        // create_dir, not create_dir_all: its failure on an existing directory is the
        // existence check, atomic against a concurrent create of the same id.
        std::fs::create_dir(&dir).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StoreError::AlreadyExists {
                    flow_id: meta.flow_id.clone(),
                }
            } else {
                StoreError::io(&dir, e)
            }
        })?;
        let store = FlowStore::create(&dir.join(DB_DIR), meta)?
            .with_blobs(self.blobs(), dir.join(REFERENCES_FILE));
        write_atomically(&dir.join(META_FILE), &encode_pretty(meta)?)?;
        tracing::debug!(flow_id = %meta.flow_id, path = %dir.display(), "flow store created");
        Ok(store)
    }

    /// Open a stored flow: `NotFound` if there is none, `Locked` if another process is running
    /// it, `Corrupt` if its database cannot be read.
    pub fn open_flow(&self, flow_id: &str) -> Result<FlowStore, StoreError> {
        let dir = self.flow_dir(flow_id)?;
        if !dir.is_dir() {
            return Err(StoreError::NotFound {
                flow_id: flow_id.to_string(),
            });
        }
        let store = waiting_out_our_own_lock(|| FlowStore::open(&dir.join(DB_DIR)))?;
        Ok(store.with_blobs(self.blobs(), dir.join(REFERENCES_FILE)))
    }

    /// The file contents every review of this data dir shares, once per content.
    pub fn blobs(&self) -> BlobStore {
        BlobStore::at(self.blobs_root.clone())
    }

    /// The data dir of the pack copies a node keeps of reviews conducted elsewhere: its own
    /// reviews under `root/replicas`, its contents in this data dir's blob store.
    pub fn replicas(&self) -> DataDir {
        DataDir {
            root: self.root.join(REPLICAS_DIR),
            blobs_root: self.blobs_root.clone(),
        }
    }

    /// Delete the contents no stored review references any more (after [`DataDir::gc`] or
    /// [`DataDir::delete_flow`]): neither a review of the data dir that owns the blob store
    /// nor one of its pack copies.
    pub fn collect_blobs(&self) -> Result<Collected, StoreError> {
        let owner = self.blobs_root.parent().unwrap_or(&self.root);
        let referencing = [
            owner.join(FLOWS_DIR),
            owner.join(REPLICAS_DIR).join(FLOWS_DIR),
        ];
        self.blobs().collect(&referencing)
    }

    /// Every stored flow, newest first. One unreadable flow does not fail the listing: it
    /// appears with status `corrupt` and the reason. Entries of `flows/` that are not
    /// directories, or whose names are not flow ids, are not flows and are left out.
    pub fn list_flows(&self) -> Result<Vec<FlowSummary>, StoreError> {
        let flows = self.flows_dir();
        let entries = match std::fs::read_dir(&flows) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&flows, e)),
        };
        let mut ids = BTreeSet::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&flows, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if validate_flow_id(&name).is_ok()
                && entry.path().is_dir()
                && !being_created(&entry.path())
            {
                ids.insert(name);
            }
        }
        let mut out: Vec<FlowSummary> = ids.iter().map(|id| self.summarize(id)).collect();
        out.sort_by(|a, b| {
            b.started_ms
                .cmp(&a.started_ms)
                .then_with(|| b.flow_id.cmp(&a.flow_id))
        });
        Ok(out)
    }

    /// The summary of one flow; never fails (an unreadable flow is `Corrupt`).
    fn summarize(&self, flow_id: &str) -> FlowSummary {
        let dir = self.flows_dir().join(flow_id);
        let side_meta = read_side_meta(&dir.join(META_FILE));
        let base = |meta: Option<&FlowMeta>, status: DerivedStatus| FlowSummary {
            flow_id: flow_id.to_string(),
            flow_name: meta.map(|m| m.flow_name.clone()).unwrap_or_default(),
            target_path: meta.map(|m| m.target_path.clone()).unwrap_or_default(),
            started_at: meta.map(|m| m.started_at.clone()).unwrap_or_default(),
            started_ms: meta.map_or(0, |m| m.started_ms),
            status,
            last_event_ms: meta.map_or(0, |m| m.started_ms),
            tasks_total: 0,
            tasks_done: 0,
            findings: 0,
        };
        let store = match FlowStore::open(&dir.join(DB_DIR)) {
            Ok(store) => store,
            Err(StoreError::Locked { .. }) => {
                return base(side_meta.as_ref().ok(), DerivedStatus::Running)
            }
            Err(e) if e.storage_fault().is_some() => {
                return base(
                    side_meta.as_ref().ok(),
                    DerivedStatus::Unavailable(e.to_string()),
                )
            }
            Err(e) => {
                return base(
                    side_meta.as_ref().ok(),
                    DerivedStatus::Corrupt(e.to_string()),
                )
            }
        };
        let (meta, events) = match (store.meta(), store.events()) {
            (Ok(meta), Ok(events)) => (meta, events),
            (Err(e), _) | (_, Err(e)) => {
                return base(
                    side_meta.as_ref().ok(),
                    DerivedStatus::Corrupt(e.to_string()),
                )
            }
        };
        drop(store);
        let replay = Replay::from_events(&events);
        let mut summary = base(Some(&meta), status_of(&replay));
        if let Some(last) = events.iter().map(|e| e.at_ms).max() {
            summary.last_event_ms = summary.last_event_ms.max(last);
        }
        if let Some((tasks, _)) = &replay.plan {
            summary.tasks_total = tasks.len();
            summary.tasks_done = tasks
                .iter()
                .filter(|t| {
                    replay.completed.contains_key(&t.id) || replay.abandoned.contains_key(&t.id)
                })
                .count();
            summary.findings = tasks
                .iter()
                .filter_map(|t| replay.completed.get(&t.id))
                .map(Vec::len)
                .sum();
        }
        summary
    }

    /// Cancel a stored flow. A flow another process runs gets a cancel request beside its
    /// database, which that process acts on; a flow nobody runs has the cancellation recorded
    /// as facts at once (it then reads as partial and is never resumed).
    pub fn cancel_flow(&self, flow_id: &str, reason: &str) -> Result<CancelOutcome, StoreError> {
        let dir = self.flow_dir(flow_id)?;
        if !dir.is_dir() {
            return Err(StoreError::NotFound {
                flow_id: flow_id.to_string(),
            });
        }
        match FlowStore::open(&dir.join(DB_DIR)) {
            Ok(store) => {
                let replay = store.replay()?;
                if replay.finished.is_some() {
                    return Ok(CancelOutcome::AlreadyFinished);
                }
                store.append(&crate::Event::Cancelled {
                    reason: reason.to_string(),
                })?;
                store.append(&crate::Event::FlowFinished {
                    status: "partial".into(),
                    reason: format!("cancelled: {reason}"),
                })?;
                store.flush()?;
                Ok(CancelOutcome::Recorded)
            }
            Err(StoreError::Locked { .. }) => {
                write_atomically(&dir.join(CANCEL_FILE), reason.as_bytes())?;
                Ok(CancelOutcome::Requested)
            }
            Err(e) => Err(e),
        }
    }

    /// The reason of a pending cancel request for a flow this process runs, if there is one.
    pub fn cancel_requested(&self, flow_id: &str) -> Option<String> {
        let dir = self.flow_dir(flow_id).ok()?;
        std::fs::read_to_string(dir.join(CANCEL_FILE)).ok()
    }

    /// Whether another process holds the flow open (runs it) right now.
    pub fn is_running(&self, flow_id: &str) -> bool {
        match self.flow_dir(flow_id) {
            Ok(dir) => matches!(
                FlowStore::open(&dir.join(DB_DIR)),
                Err(StoreError::Locked { .. })
            ),
            Err(_) => false,
        }
    }

    /// Delete a stored flow. Refuses (`Locked`) while another process runs it; a corrupt flow
    /// can be deleted, which is the way out its error message offers.
    pub fn delete_flow(&self, flow_id: &str) -> Result<(), StoreError> {
        let dir = self.flow_dir(flow_id)?;
        if !dir.is_dir() {
            return Err(StoreError::NotFound {
                flow_id: flow_id.to_string(),
            });
        }
        let db = dir.join(DB_DIR);
        if db.is_dir() {
            // This process may have just dropped its own handle (listing opens every flow).
            match waiting_out_our_own_lock(|| open_db(&db)) {
                Ok(held) => drop(held),
                Err(StoreError::Locked { path }) => return Err(StoreError::Locked { path }),
                Err(_) => {}
            }
        }
        std::fs::remove_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        tracing::info!(flow_id, "flow deleted");
        Ok(())
    }

    /// Delete finished and interrupted flows whose last event is at least `older_than` old.
    /// Running and corrupt flows are never collected. Returns the deleted ids.
    pub fn gc(&self, older_than: Duration) -> Result<Vec<String>, StoreError> {
        let now = now_ms();
        let min_age = u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX);
        let mut deleted = Vec::new();
        for summary in self.list_flows()? {
            let collectable =
                summary.status.is_finished() || summary.status == DerivedStatus::Interrupted;
            if !collectable || now.saturating_sub(summary.last_event_ms) < min_age {
                continue;
            }
            match self.delete_flow(&summary.flow_id) {
                Ok(()) => deleted.push(summary.flow_id),
                // Resumed or deleted by someone else since it was listed.
                Err(StoreError::Locked { .. } | StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// The newest interrupted flow of this target and flow name, if any. `target_path` is
    /// compared as stored, so pass it in the same (canonical) form the review recorded.
    pub fn find_resumable(
        &self,
        target_path: &str,
        flow_name: &str,
    ) -> Result<Option<FlowSummary>, StoreError> {
        Ok(self.list_flows()?.into_iter().find(|s| {
            s.status == DerivedStatus::Interrupted
                && s.target_path == target_path
                && s.flow_name == flow_name
        }))
    }

    /// Open the node's own database (one process per data dir may hold it).
    pub fn open_node(&self) -> Result<NodeStore, StoreError> {
        let path = self.root.join(NODE_DIR);
        let db = waiting_out_our_own_lock(|| open_db(&path))?;
        Ok(NodeStore {
            db,
            path: Arc::new(path),
        })
    }
}

/// Node-level facts (model runtime statistics and the like), as JSON values under string keys.
#[derive(Clone)]
pub struct NodeStore {
    pub(crate) db: sled::Db,
    pub(crate) path: Arc<PathBuf>,
}

impl std::fmt::Debug for NodeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl NodeStore {
    /// Store `value` under `key`, replacing what was there, and flush.
    pub fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Encode(e.to_string()))?;
        self.db
            .insert(key.as_bytes(), bytes)
            .map_err(|e| sled_err(&self.path, e))?;
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| sled_err(&self.path, e))
    }

    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        match self
            .db
            .get(key.as_bytes())
            .map_err(|e| sled_err(&self.path, e))?
        {
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Decode {
                        what: format!("node fact {key:?}"),
                        message: e.to_string(),
                    })
            }
            None => Ok(None),
        }
    }

    /// Keys starting with `prefix`, in byte order.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.db
            .scan_prefix(prefix.as_bytes())
            .keys()
            .map(|k| {
                k.map(|k| String::from_utf8_lossy(&k).into_owned())
                    .map_err(|e| sled_err(&self.path, e))
            })
            .collect()
    }
}

/// A flow id names a directory, so it must be one safe path component.
fn validate_flow_id(flow_id: &str) -> Result<(), StoreError> {
    let ok = !flow_id.is_empty()
        && flow_id.len() <= MAX_FLOW_ID_LEN
        && !flow_id.starts_with('.')
        && flow_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidFlowId {
            flow_id: flow_id.to_string(),
        })
    }
}

fn encode_pretty<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec_pretty(value).map_err(|e| StoreError::Encode(e.to_string()))
}

/// A flow directory whose creation has not finished: no side metadata yet, made moments ago.
/// A listing leaves it out rather than open its database — sled writes its files before it
/// takes their lock, so an open in that moment would hold the lock and fail the creation as
/// `Locked` (and show the flow as corrupt). One left half-made by a crash is listed again once
/// it is older than this.
fn being_created(dir: &Path) -> bool {
    const CREATION_GRACE: Duration = Duration::from_secs(60);
    if dir.join(META_FILE).exists() {
        return false;
    }
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < CREATION_GRACE)
}

fn read_side_meta(path: &Path) -> Result<FlowMeta, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_ids_are_single_safe_path_components() {
        for good in ["20250101-120000-abcdef", "a", "flow_1.2-x"] {
            assert!(validate_flow_id(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_FLOW_ID_LEN + 1);
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a b",
            "é",
            long.as_str(),
        ] {
            assert!(
                matches!(validate_flow_id(bad), Err(StoreError::InvalidFlowId { .. })),
                "{bad}"
            );
        }
    }
}
