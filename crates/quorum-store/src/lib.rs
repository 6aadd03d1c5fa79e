//! quorum-store: durable, truthful review state.
//!
//! Every fact of a review — its parameters, the pack snapshot, each task attempt with its full
//! output, and an append-only event log — is written to sled as it happens, one database per
//! review (see [`data_dir`]). Status is derived from those facts when read: a finish event
//! says completed, partial or failed; a database locked by another process is running; an
//! unlocked one without a finish was interrupted. Nothing here resets or repairs a store it
//! cannot read; it reports it as [`StoreError::Corrupt`], naming the path.
//!
//! Architecture invariant: the API is synchronous and knows nothing about tokio or actors.
//! sled writes are fast; async callers use `spawn_blocking` or call it directly.

mod atomic;
pub mod blobs;
pub mod data_dir;
pub mod error;
pub mod event;
pub mod flow_store;
pub mod insights;
pub mod results;
pub mod status;
pub mod trace;

pub use blobs::{BlobStore, Collected, PutStats};
pub use data_dir::{CancelOutcome, DataDir, NodeStore};
pub use error::{StorageFault, StoreError};
pub use event::{status_of, Event, RecordedVerdict, Replay, StoredEvent};
pub use flow_store::{AttemptRecord, FlowMeta, FlowStore};
pub use results::ResultCache;
pub use status::{DerivedStatus, FlowSummary};
pub use trace::trace_export;
