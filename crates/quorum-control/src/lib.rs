//! The replicated control plane: which node conducts each review, at which epoch, and every fact
//! of the review, agreed on a majority of voters by Raft (openraft) so that a survivor can take
//! a review over when its conductor dies.
//!
//! - [`state`]: the reviews and the commands, pure and deterministic (the epoch fencing lives
//!   here);
//! - [`store`]: each node's log, vote, state machine and snapshot in sled;
//! - [`network`]: openraft's RPCs over an abstract [`Transport`];
//! - `cluster`: the transport over `quorum_cluster` and the handler that answers it;
//! - `memnet`: an in-process transport with partitions, for tests;
//! - [`plane`]: the [`ControlPlane`] handle a node holds;
//! - `autopilot`: which lost voter a live learner replaces, and when (pure);
//! - `membership`: changing the voters online (the plan is a pure check; openraft's joint
//!   consensus carries it out on the leader);
//! - `raft`: the Raft type configuration and node ids; `error`: [`ControlError`].
//!
//! Election and log replication are openraft's; this crate only stores, transports and applies.

pub mod autopilot;
mod cluster;
mod error;
mod membership;
mod memnet;
pub mod network;
pub mod plane;
mod raft;
pub mod state;
pub mod store;

pub use cluster::{handle_envelope, ClusterTransport};
pub use error::ControlError;
pub use membership::{plan_voters, ChangeError, VoterChange};
pub use memnet::MemNet;
pub use network::{is_control_kind, Transport, TransportError, CONTROL_KINDS};
pub use plane::{ControlConfig, ControlPlane, ControlStatus, MAX_COMMAND_BYTES};
pub use raft::{node_id, NodeId, TypeConfig};
pub use state::{Command, Outcome, Rejection, ReviewRecord, ReviewSummary, Reviews};
