//! The node's shared state: [`Core`], which the handle, every task and the blackboard hold, and
//! the one lock over what changes (members, addresses to dial, sessions and routes, send and
//! receive queues, pending requests, what each mutual-TLS link proved).
//!
//! Every room of the node works on this state through `impl Core` blocks of its own; this room
//! only says what there is and how it is locked.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ractor::{ActorCell, ActorId, ActorRef};
use ractor_cluster::{NodeServerMessage, NodeSessionMessage};
use tokio::sync::{broadcast, mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use super::binding::LinkId;
use crate::blackboard::BbStore;
use crate::error::ClusterError;
use crate::filter::TransportFilter;
use crate::lanes::{Lanes, Limits};
use crate::member::{MembershipEvent, NodeAdvert};
use crate::message::{Envelope, MessageHandler};
use crate::tls::ClusterTls;
use crate::wire::AgentMsg;

/// The node server and the agent, set once both have started.
pub(super) struct Actors {
    pub(super) server: ActorRef<NodeServerMessage>,
    pub(super) agent: ActorRef<AgentMsg>,
}

/// A member as this node tracks it.
pub(super) struct MemberState {
    pub(super) advert: NodeAdvert,
    pub(super) alive: bool,
    pub(super) last_seen: Instant,
    pub(super) incarnation: u64,
    /// This incarnation said goodbye; a heartbeat it sent just before is not a rejoin.
    pub(super) left: bool,
}

/// An address to keep connected to: from the join list or learned by gossip.
#[derive(Default)]
pub(super) struct Target {
    pub(super) name: Option<String>,
    pub(super) resolved: Option<SocketAddr>,
    pub(super) last_dial: Option<Instant>,
    /// Why the last link to it failed its handshake; reported if it is still down next round.
    pub(super) handshake_failed: Option<String>,
    /// Already said at warn level that it cannot be reached, so the redial loop stays quiet.
    pub(super) warned: bool,
    /// Already logged the refusal; said again only after a link to it has worked.
    pub(super) refusal_logged: bool,
}

/// One authenticated session of the node server, as the last refresh of the links saw it.
pub(super) struct SessionView {
    pub(super) peer: String,
    pub(super) is_server: bool,
    pub(super) peer_addr: String,
    pub(super) actor: ActorRef<NodeSessionMessage>,
}

/// One peer's send queue ([`Lanes`]) and the wake-up of its writer task.
pub(super) struct PeerQueue {
    pub(super) lanes: Mutex<Lanes>,
    pub(super) wake: Notify,
}

impl PeerQueue {
    pub(super) fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // Every method leaves the lanes consistent, so a poisoned lock is still usable.
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a sender's dispatcher hands to the handler, in arrival order.
pub(super) enum Inbound {
    Msg(Envelope),
    Req(u64, Envelope),
}

/// A request waiting for its reply from `node`.
pub(super) struct Pending {
    pub(super) node: String,
    pub(super) tx: oneshot::Sender<Result<Envelope, ClusterError>>,
}

/// What changes while the node runs, behind [`Core::lock`].
#[derive(Default)]
pub(super) struct State {
    pub(super) advert: NodeAdvert,
    pub(super) members: HashMap<String, MemberState>,
    pub(super) targets: HashMap<String, Target>,
    pub(super) sessions: Vec<SessionView>,
    pub(super) routes: HashMap<String, ActorCell>,
    pub(super) outbound: HashMap<String, Arc<PeerQueue>>,
    pub(super) inbound: HashMap<String, mpsc::Sender<Inbound>>,
    pub(super) pending: HashMap<u64, Pending>,
    pub(super) authenticated: HashSet<ActorId>,
    /// Mutual TLS: what each link's handshake proved, by the link's peer address (the label
    /// ractor_cluster reports as the session's `peer_addr`).
    pub(super) links: HashMap<String, LinkId>,
    /// Mutual TLS: the frame keys of each peer's verified links (more than one while a
    /// duplicate connection is being closed).
    pub(super) peer_keys: HashMap<String, Vec<[u8; 32]>>,
    /// Mutual TLS: the key of the link each peer's frames are sent on (the route's).
    pub(super) route_keys: HashMap<String, [u8; 32]>,
    /// Sessions already closed for naming a node their certificate is not for.
    pub(super) impostors: HashSet<ActorId>,
    /// Frames dropped because their sender did not authenticate as the node they name.
    pub(super) rejected_frames: u64,
    pub(super) refused: Vec<String>,
    /// Hosts whose failed incoming handshakes were already logged.
    pub(super) refused_incoming: HashSet<String>,
}

/// Everything a node shares between its handle, its tasks and its blackboard.
pub(crate) struct Core {
    pub(crate) name: String,
    pub(super) incarnation: u64,
    pub(super) local_addr: SocketAddr,
    pub(super) heartbeat_interval: Duration,
    pub(super) heartbeat_deadline: Duration,
    pub(super) reconnect_interval: Duration,
    pub(super) handler: Arc<dyn MessageHandler>,
    pub(crate) bb: BbStore,
    pub(super) filter: TransportFilter,
    pub(super) send_limits: Limits,
    pub(super) events: broadcast::Sender<MembershipEvent>,
    pub(super) state: Mutex<State>,
    pub(super) next_id: AtomicU64,
    pub(super) closed: AtomicBool,
    pub(super) actors: OnceLock<Actors>,
    pub(super) tasks: Mutex<Vec<JoinHandle<()>>>,
    pub(super) dial_wake: Notify,
    pub(super) rt: tokio::runtime::Handle,
    pub(super) tls: Option<ClusterTls>,
    pub(super) started_ms: u64,
    /// Set when another node already carries this node's name and this one must give way.
    pub(super) name_clash: Mutex<Option<String>>,
}

impl Core {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails once the node is shut down.
    pub(super) fn check_open(&self) -> Result<(), ClusterError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(ClusterError::Transport(
                "the cluster node is shut down".to_string(),
            ))
        } else {
            Ok(())
        }
    }

    /// The node server, once started.
    pub(super) fn server(&self) -> Option<&ActorRef<NodeServerMessage>> {
        self.actors.get().map(|a| &a.server)
    }

    /// Mutual TLS with node identities: this crate terminates TLS and authenticates frames.
    pub(super) fn mutual(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.mutual)
    }
}
