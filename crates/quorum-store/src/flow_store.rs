//! One review's durable facts: its metadata, pack snapshot, event log, attempts and report,
//! in one sled database that the running process holds exclusively.
//!
//! Every write that records a fact is flushed before it returns, so a `kill -9` right after
//! any call loses nothing that call reported as written.
//!
//! Trees: the default tree holds `meta` and `report`; `events` maps a big-endian `u64` seq to
//! `{at_ms, event}` (so iteration is log order); `attempts` maps `task_id \0 attempt(BE u32)`
//! to an [`AttemptRecord`]; `pack` holds the manifest. File contents live in the data dir's
//! [`BlobStore`], once per content for every review (a store opened outside a data dir, and
//! stores written before it existed, keep them in their own `blobs` tree, blake3 hex hash to
//! content), so a resume reads exactly the snapshot the review started with.

use crate::blobs::BlobStore;
use crate::error::StoreError;
use crate::event::{status_of, Event, Replay, StoredEvent};
use crate::status::DerivedStatus;
pub use quorum_core::machine::fact::AttemptRecord;
use quorum_core::pack::{ContextPack, PackFile, Skipped};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const META_KEY: &[u8] = b"meta";
const REPORT_KEY: &[u8] = b"report";
const MANIFEST_KEY: &[u8] = b"manifest";
const EVENTS_TREE: &[u8] = b"events";
const ATTEMPTS_TREE: &[u8] = b"attempts";
const PACK_TREE: &[u8] = b"pack";
const BLOBS_TREE: &[u8] = b"blobs";

/// What a review was started with, written once at creation so it can be replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowMeta {
    pub flow_id: String,
    pub flow_name: String,
    /// The flow file's text.
    pub flow_yaml: String,
    /// Resolved settings: backends, models, max_concurrent, fail_on, ...
    pub params: serde_json::Value,
    pub target_path: String,
    pub head_sha: Option<String>,
    /// rfc3339.
    pub started_at: String,
    pub started_ms: u64,
    pub node: String,
}

/// The pack without file contents; contents live in the blobs tree under their hash.
#[derive(Serialize, Deserialize)]
struct PackManifest {
    root: PathBuf,
    head_sha: Option<String>,
    files: Vec<PackFile>,
    skipped: Vec<Skipped>,
}

#[derive(Deserialize)]
struct EventRecord {
    at_ms: u64,
    event: Event,
}

/// The same record, borrowed for writing.
#[derive(Serialize)]
struct EventRecordRef<'a> {
    at_ms: u64,
    event: &'a Event,
}

/// An open flow database. Cheap to clone; all clones share the database and its lock, which
/// is released when the last clone is dropped.
#[derive(Clone)]
pub struct FlowStore {
    db: sled::Db,
    path: Arc<PathBuf>,
    /// Held across the insert so seq order is insertion order.
    log: Arc<Mutex<LogClock>>,
    /// The data dir's contents and this review's list of references into them; `None` for a
    /// store opened on its own, which keeps contents in its `blobs` tree.
    content: Option<Arc<(BlobStore, PathBuf)>>,
}

/// The next seq to assign and the latest `at_ms` given out, so `at_ms` never goes backwards
/// along the log even if the wall clock does.
#[derive(Debug, Clone, Copy)]
struct LogClock {
    next_seq: u64,
    last_at_ms: u64,
}

impl std::fmt::Debug for FlowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Page cache of each sled database this crate opens.
const DB_CACHE_BYTES: u64 = 32 << 20;

/// Open a sled database, telling lock contention apart from everything else.
pub(crate) fn open_db(path: &Path) -> Result<sled::Db, StoreError> {
    // sled's page cache defaults to 1 GiB per database: a review's store writes a pack once and
    // reads it rarely, so a small cache keeps a large pack from sitting in memory twice.
    //
    // Every write that records a fact flushes before it returns, so sled's own background
    // flusher has nothing to add — and on a full disk it would log the same error twice a
    // second, a line the user does not need beside the one the review gives.
    sled::Config::new()
        .path(path)
        .cache_capacity(DB_CACHE_BYTES)
        .flush_every_ms(None)
        .open()
        .map_err(|e| match e {
            sled::Error::Io(ref io)
                if io.kind() == std::io::ErrorKind::WouldBlock
                    || io.to_string().contains("could not acquire lock") =>
            {
                StoreError::Locked {
                    path: path.to_path_buf(),
                }
            }
            // The disk refused (full, read-only): the store is fine, the disk is not.
            sled::Error::Io(io) => StoreError::io(path, io),
            other => StoreError::corrupt(path, describe_sled(&other)),
        })
}

fn describe_sled(e: &sled::Error) -> String {
    match e {
        sled::Error::Corruption { at, .. } => match at {
            Some(at) => format!("sled detected corruption at {at:?}"),
            None => "sled detected corruption".to_string(),
        },
        other => other.to_string().to_lowercase(),
    }
}

/// Map an error from a read or write on an open database.
pub(crate) fn sled_err(path: &Path, e: sled::Error) -> StoreError {
    match e {
        sled::Error::Io(io) => StoreError::io(path, io),
        other => StoreError::corrupt(path, describe_sled(&other)),
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Encode(e.to_string()))
}

fn decode<T: DeserializeOwned>(what: impl Into<String>, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Decode {
        what: what.into(),
        message: e.to_string(),
    })
}

fn attempt_key(task_id: &str, attempt: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(task_id.len() + 5);
    key.extend_from_slice(task_id.as_bytes());
    key.push(0);
    key.extend_from_slice(&attempt.to_be_bytes());
    key
}

impl FlowStore {
    /// Create the database at `path` (which must not hold one yet) and record `meta`.
    pub(crate) fn create(path: &Path, meta: &FlowMeta) -> Result<FlowStore, StoreError> {
        let db = open_db(path)?;
        let store = FlowStore::wrap(db, path);
        store
            .db
            .insert(META_KEY, encode(meta)?)
            .map_err(|e| sled_err(path, e))?;
        store.flush()?;
        Ok(store)
    }

    /// Open an existing database. It must hold flow metadata: sled opens a damaged or emptied
    /// log as an empty database, and that must read as corrupt, not as a fresh flow.
    pub(crate) fn open(path: &Path) -> Result<FlowStore, StoreError> {
        for file in ["conf", "db"] {
            if !path.join(file).is_file() {
                return Err(StoreError::corrupt(
                    path,
                    format!("database file {file:?} is missing"),
                ));
            }
        }
        let db = open_db(path)?;
        let store = FlowStore::wrap(db, path);
        let meta = store
            .db
            .get(META_KEY)
            .map_err(|e| sled_err(path, e))?
            .ok_or_else(|| StoreError::corrupt(path, "the database holds no flow metadata"))?;
        let _: FlowMeta =
            decode("flow metadata", &meta).map_err(|e| StoreError::corrupt(path, e.to_string()))?;
        let events = store.tree(EVENTS_TREE)?;
        if let Some((key, value)) = events.last().map_err(|e| sled_err(path, e))? {
            let seq = seq_from_key(path, &key)?;
            let record: EventRecord = decode(format!("event {seq}"), &value)
                .map_err(|e| StoreError::corrupt(path, e.to_string()))?;
            *store.lock_log() = LogClock {
                next_seq: seq.saturating_add(1),
                last_at_ms: record.at_ms,
            };
        }
        Ok(store)
    }

    fn wrap(db: sled::Db, path: &Path) -> FlowStore {
        FlowStore {
            db,
            path: Arc::new(path.to_path_buf()),
            log: Arc::new(Mutex::new(LogClock {
                next_seq: 1,
                last_at_ms: 0,
            })),
            content: None,
        }
    }

    /// Keep pack contents in `blobs`, recording this review's references in `references`.
    pub(crate) fn with_blobs(mut self, blobs: BlobStore, references: PathBuf) -> FlowStore {
        self.content = Some(Arc::new((blobs, references)));
        self
    }

    fn lock_log(&self) -> std::sync::MutexGuard<'_, LogClock> {
        // The clock is only written after a successful insert, so a panic elsewhere while
        // holding the guard cannot leave it half-updated.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tree(&self, name: &[u8]) -> Result<sled::Tree, StoreError> {
        self.db.open_tree(name).map_err(|e| sled_err(&self.path, e))
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn meta(&self) -> Result<FlowMeta, StoreError> {
        let bytes = self
            .db
            .get(META_KEY)
            .map_err(|e| sled_err(&self.path, e))?
            .ok_or_else(|| {
                StoreError::corrupt(&*self.path, "the database holds no flow metadata")
            })?;
        decode("flow metadata", &bytes)
    }

    /// Store the pack: every file's content under its blake3 hash (identical content once,
    /// in the data dir's blob store when there is one), then the manifest, so a manifest never
    /// names a missing blob.
    pub fn save_pack(&self, pack: &ContextPack) -> Result<(), StoreError> {
        let files: Vec<&PackFile> = pack.files.values().collect();
        match self.content.as_deref() {
            Some((blobs, references)) => {
                // Named by the hash the pack computed from the same bytes; the blob store
                // checks each content it writes against its name, and every read checks again.
                let contents: Vec<(&str, &quorum_core::pack::Text)> = files
                    .iter()
                    .map(|f| (f.hash.as_str(), &f.content))
                    .collect();
                let stats = blobs.put_all(references, &contents)?;
                tracing::debug!(
                    written = stats.written,
                    written_bytes = stats.written_bytes,
                    reused = stats.reused,
                    "pack contents stored"
                );
            }
            None => {
                let mut batch = sled::Batch::default();
                for file in &files {
                    let hash = blake3::hash(file.content.as_bytes()).to_hex();
                    if hash.as_str() != file.hash {
                        return Err(StoreError::corrupt(
                            &*self.path,
                            format!("the pack's hash of {} is not its content's", file.path),
                        ));
                    }
                    batch.insert(hash.as_bytes(), file.content.as_bytes());
                }
                self.tree(BLOBS_TREE)?
                    .apply_batch(batch)
                    .map_err(|e| sled_err(&self.path, e))?;
            }
        }
        let manifest = PackManifest {
            root: pack.root.clone(),
            head_sha: pack.head_sha.clone(),
            files: files.into_iter().cloned().collect(),
            skipped: pack.skipped.clone(),
        };
        self.tree(PACK_TREE)?
            .insert(MANIFEST_KEY, encode(&manifest)?)
            .map_err(|e| sled_err(&self.path, e))?;
        self.flush()
    }

    /// One file's stored content: from the blob store, else (older stores) this store's own
    /// blobs tree, checked against its hash either way.
    fn content_of(&self, file: &PackFile, blobs: &sled::Tree) -> Result<Vec<u8>, StoreError> {
        if let Some((store, _)) = self.content.as_deref() {
            if let Some(bytes) = store.get(&file.hash, &file.path)? {
                return Ok(bytes);
            }
        }
        let blob = blobs
            .get(file.hash.as_bytes())
            .map_err(|e| sled_err(&self.path, e))?
            .ok_or_else(|| {
                StoreError::corrupt(
                    &*self.path,
                    format!("content of {} (blob {}) is missing", file.path, file.hash),
                )
            })?;
        let actual = blake3::hash(&blob).to_hex().to_string();
        if actual != file.hash {
            return Err(StoreError::corrupt(
                &*self.path,
                format!(
                    "content of {} does not match its hash (expected {}, found {actual})",
                    file.path, file.hash
                ),
            ));
        }
        Ok(blob.to_vec())
    }

    /// Rebuild the snapshot exactly as saved. Each blob is checked against its hash; a
    /// mismatch or a missing blob is `Corrupt`.
    pub fn load_pack(&self) -> Result<ContextPack, StoreError> {
        let bytes = self
            .tree(PACK_TREE)?
            .get(MANIFEST_KEY)
            .map_err(|e| sled_err(&self.path, e))?
            .ok_or_else(|| StoreError::NoPack {
                path: self.path.to_path_buf(),
            })?;
        let manifest: PackManifest = decode("pack manifest", &bytes)?;
        let blobs = self.tree(BLOBS_TREE)?;
        let mut files = BTreeMap::new();
        for mut file in manifest.files {
            let blob = self.content_of(&file, &blobs)?;
            let text = std::str::from_utf8(&blob).map_err(|e| {
                StoreError::corrupt(
                    &*self.path,
                    format!("content of {} is not utf-8: {e}", file.path),
                )
            })?;
            file.content = quorum_core::pack::Text::from(text);
            files.insert(file.path.clone(), file);
        }
        Ok(ContextPack {
            root: manifest.root,
            head_sha: manifest.head_sha,
            files,
            skipped: manifest.skipped,
        })
    }

    /// Append an event and flush it; returns its seq.
    pub fn append(&self, event: &Event) -> Result<u64, StoreError> {
        let events = self.tree(EVENTS_TREE)?;
        let seq = {
            let mut clock = self.lock_log();
            let seq = clock.next_seq;
            let at_ms = now_ms().max(clock.last_at_ms);
            let record = EventRecordRef { at_ms, event };
            events
                .insert(seq.to_be_bytes(), encode(&record)?)
                .map_err(|e| sled_err(&self.path, e))?;
            *clock = LogClock {
                next_seq: seq.saturating_add(1),
                last_at_ms: at_ms,
            };
            seq
        };
        self.flush()?;
        Ok(seq)
    }

    /// The whole log, in seq order.
    pub fn events(&self) -> Result<Vec<StoredEvent>, StoreError> {
        let mut out = Vec::new();
        for item in self.tree(EVENTS_TREE)?.iter() {
            let (key, value) = item.map_err(|e| sled_err(&self.path, e))?;
            let seq = seq_from_key(&self.path, &key)?;
            let record: EventRecord = decode(format!("event {seq}"), &value)?;
            out.push(StoredEvent {
                seq,
                at_ms: record.at_ms,
                event: record.event,
            });
        }
        Ok(out)
    }

    /// The log folded into resume state.
    pub fn replay(&self) -> Result<Replay, StoreError> {
        Ok(Replay::from_events(&self.events()?))
    }

    /// Record an attempt (replacing an earlier record of the same task and attempt) and flush.
    pub fn record_attempt(&self, a: &AttemptRecord) -> Result<(), StoreError> {
        self.tree(ATTEMPTS_TREE)?
            .insert(attempt_key(&a.task_id, a.attempt), encode(a)?)
            .map_err(|e| sled_err(&self.path, e))?;
        self.flush()
    }

    /// All attempt records, ordered by task id then attempt number.
    pub fn attempts(&self) -> Result<Vec<AttemptRecord>, StoreError> {
        let mut out = Vec::new();
        for item in self.tree(ATTEMPTS_TREE)?.iter() {
            let (key, value) = item.map_err(|e| sled_err(&self.path, e))?;
            let what = format!("attempt record {}", String::from_utf8_lossy(&key));
            out.push(decode(what, &value)?);
        }
        Ok(out)
    }

    /// Store the rendered report.json text and flush.
    pub fn save_report(&self, report_json: &str) -> Result<(), StoreError> {
        self.db
            .insert(REPORT_KEY, report_json.as_bytes())
            .map_err(|e| sled_err(&self.path, e))?;
        self.flush()
    }

    pub fn report(&self) -> Result<Option<String>, StoreError> {
        match self
            .db
            .get(REPORT_KEY)
            .map_err(|e| sled_err(&self.path, e))?
        {
            Some(bytes) => {
                String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|e| StoreError::Decode {
                        what: "report".to_string(),
                        message: e.to_string(),
                    })
            }
            None => Ok(None),
        }
    }

    /// Status from the log: the finish if there is one, else interrupted; `Corrupt` when the
    /// log cannot be read. The process running the flow knows it is running; nobody else can
    /// open the store while it does.
    pub fn status(&self) -> DerivedStatus {
        match self.events() {
            Ok(events) => status_of(&Replay::from_events(&events)),
            Err(e) => DerivedStatus::Corrupt(e.to_string()),
        }
    }

    /// Make everything written so far durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| sled_err(&self.path, e))
    }
}

fn seq_from_key(path: &Path, key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| StoreError::corrupt(path, format!("event key of {} bytes", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str) -> FlowMeta {
        FlowMeta {
            flow_id: id.to_string(),
            flow_name: "review".to_string(),
            flow_yaml: "name: review\n".to_string(),
            params: serde_json::json!({}),
            target_path: "/t".to_string(),
            head_sha: None,
            started_at: "2025-01-01T00:00:00Z".to_string(),
            started_ms: 1,
            node: "n1".to_string(),
        }
    }

    fn pack() -> ContextPack {
        ContextPack::from_files(
            PathBuf::from("/t"),
            Some("abc".to_string()),
            vec![
                ("a.rs".to_string(), "fn a() {}\n".to_string()),
                ("b/a_copy.rs".to_string(), "fn a() {}\n".to_string()),
                ("c.md".to_string(), "# c\n".to_string()),
            ],
        )
    }

    #[test]
    fn identical_contents_are_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlowStore::create(&dir.path().join("db"), &meta("f")).unwrap();
        store.save_pack(&pack()).unwrap();
        assert_eq!(store.tree(BLOBS_TREE).unwrap().len(), 2);
        assert_eq!(store.load_pack().unwrap().files.len(), 3);
    }

    #[test]
    fn a_tampered_blob_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = FlowStore::create(&path, &meta("f")).unwrap();
        let pack = pack();
        store.save_pack(&pack).unwrap();
        let hash = pack.files["c.md"].hash.clone();
        store
            .tree(BLOBS_TREE)
            .unwrap()
            .insert(hash.as_bytes(), &b"# tampered\n"[..])
            .unwrap();
        match store.load_pack() {
            Err(StoreError::Corrupt { path: p, message }) => {
                assert_eq!(p, path);
                assert!(message.contains("c.md"), "{message}");
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
        store
            .tree(BLOBS_TREE)
            .unwrap()
            .remove(hash.as_bytes())
            .unwrap();
        let err = store.load_pack().unwrap_err();
        assert!(err.to_string().contains("is missing"), "{err}");
    }

    #[test]
    fn stores_can_be_shared_across_threads() {
        fn shareable<T: Send + Sync + Clone + 'static>() {}
        shareable::<FlowStore>();
        shareable::<crate::NodeStore>();
    }

    #[test]
    fn attempt_keys_order_by_task_then_attempt_number() {
        let mut keys = vec![
            attempt_key("t10", 1),
            attempt_key("t1", 256),
            attempt_key("t1", 2),
            attempt_key("t1", 10),
        ];
        keys.sort();
        assert_eq!(
            keys,
            vec![
                attempt_key("t1", 2),
                attempt_key("t1", 10),
                attempt_key("t1", 256),
                attempt_key("t10", 1),
            ]
        );
    }
}
