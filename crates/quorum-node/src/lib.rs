//! quorum-node: a long-running node — the review service behind the gRPC API.
//!
//! A node accepts reviews (a pack uploaded by `quorum review --cluster`), runs each one with a
//! FlowConductor against this node's backends, streams progress to watchers, records every fact
//! in its data dir and serves the report. Nothing here decides how a review runs; that is the
//! runtime's job. This crate maps the API onto it.

mod attempts;
mod autopilot;
pub mod cluster;
pub mod control;
mod error;
mod executor;
pub mod fixes;
pub mod http;
mod packs;
mod service;
mod sink;
pub mod storage;

pub use cluster::{ClusterBoard, NodeAgent};
pub use control::{ControlSink, NodeControl, ReviewHost};
pub use error::NodeError;
pub use executor::ClusterExecutor;
pub use packs::{BlobCache, PackRegistry, BLOB_CACHE_BYTES};
pub use service::setup::{NodeMemory, NodeSetup};
pub use service::state::NodeService;
