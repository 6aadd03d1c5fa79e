//! One cluster node: the ractor_cluster node server and agent actor, membership with gossip and
//! heartbeat failure detection, dialing and redialing peers, ordered messaging with request/reply,
//! and blackboard replication (broadcast on publish, anti-entropy on join and periodically).
//!
//! Routing never goes through ractor's process-wide registries (`pg`, names): a frame for peer P
//! is sent only to the `RemoteActor` child of *this* node server's session with P whose name is P's
//! agent name. That keeps several nodes in one process (the test sandbox) from talking through
//! each other's links, and keeps a peer that failed the cookie handshake unreachable.
//!
//! The rooms, from the floor up (each uses only rooms below it):
//! - `binding`: what a link is bound to — the node a session names, its agent, and on mutual TLS
//!   the certificate and frame key its handshake proved (pure);
//! - `state`: [`Core`], the state every task shares, and its one lock;
//! - `outbound`: each peer's send queue, wired to [`crate::lanes`], and its writer task;
//! - `heartbeat`: what a heartbeat says and whom it goes to;
//! - `sessions`: the node server's sessions turned into routes, and its session events;
//! - `messaging`: messages and requests out, the per-sender dispatch in, reply correlation;
//! - `replication`: blackboard broadcast and anti-entropy;
//! - `membership`: joins, losses, goodbyes, deadlines, name clashes, and the tick loop;
//! - `dial`: dialing known addresses forever, and on mutual TLS accepting links;
//! - `frames`: the agent actor and frame dispatch — authenticate, decode, hand to a room above;
//! - `lifecycle`: start and stop;
//! - `handle`: [`Cluster`], the handle the rest of quorum holds.

mod binding;
mod dial;
mod frames;
mod handle;
mod heartbeat;
mod lifecycle;
mod membership;
mod messaging;
mod outbound;
mod replication;
mod sessions;
mod state;

pub use handle::Cluster;
pub(crate) use state::Core;
