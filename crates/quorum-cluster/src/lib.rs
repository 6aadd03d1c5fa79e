//! quorum's cluster layer over ractor_cluster: node membership with gossip, heartbeat failure
//! detection, reconnects, ordered messaging with request/reply, fault injection for tests, and the
//! replicated blackboard.
//!
//! ractor_cluster gives cookie-authenticated links and remote actor references, nothing more: no
//! failure detector, no reconnect, no discovery (its `Transitive` mode dials peers-of-peers
//! without TLS, so it is not used). Each node therefore runs one remotable agent actor, dials every
//! member it learns of by gossip (`Isolated` mode, full mesh), heartbeats every member, and
//! declares a member lost when it misses the deadline.
//!
//! Enabling this crate turns on ractor's `cluster` feature for the whole build, which removes the
//! blanket `ractor::Message` impl: every actor message type in the workspace then needs
//! `#[derive(ractor_cluster::RactorMessage)]` (or an empty `impl ractor::Message for T {}`).

mod blackboard;
mod config;
mod error;
mod filter;
pub mod lanes;
mod member;
mod message;
mod node;
mod tls;
mod wire;

pub use blackboard::{prune_replica, BbEntry, Blackboard, EntryId, MAX_FLOWS};
pub use config::ClusterConfig;
pub use error::ClusterError;
pub use filter::{TransportFilter, KIND_BB_PUBLISH, KIND_BB_SYNC, KIND_HEARTBEAT, KIND_LEAVE};
pub use member::{Member, MembershipEvent, NodeAdvert};
pub use message::{Envelope, MessageHandler};
pub use node::Cluster;
pub use tls::ClusterTls;
pub use wire::MAX_FRAME_BYTES;
