//! One cluster node: the ractor_cluster node server and agent actor, membership with gossip and
//! heartbeat failure detection, dialing and redialing peers, ordered messaging with request/reply,
//! and blackboard replication (broadcast on publish, anti-entropy on join and periodically).
//!
//! Routing never goes through ractor's process-wide registries (`pg`, names): a frame for peer P
//! is sent only to the `RemoteActor` child of *this* node server's session with P whose name is P's
//! agent name. That keeps several nodes in one process (the test sandbox) from talking through
//! each other's links, and keeps a peer that failed the cookie handshake unreachable.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, ActorStatus};
use ractor_cluster::node::{NodeConnectionMode, NodeServerSessionInformation};
use ractor_cluster::{
    ClientConnectErr, IncomingEncryptionMode, NodeEventSubscription, NodeServer, NodeServerMessage,
    NodeSessionMessage,
};
use tokio::sync::{broadcast, mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::blackboard::{BbEntry, BbStore, Blackboard};
use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::filter::{
    TransportFilter, Verdict, KIND_ACK, KIND_BB_PUBLISH, KIND_BB_SYNC, KIND_HEARTBEAT, KIND_LEAVE,
};
use crate::lanes::{Lanes, Limits, Queued};
use crate::member::{Member, MembershipEvent, NodeAdvert};
use crate::message::{Envelope, MessageHandler};
use crate::tls::ClusterTls;
use crate::wire::{AgentMsg, Body, Frame, PeerAddr, MAX_FRAME_BYTES};

/// Prefix of every agent actor's name; the rest identifies the node server it belongs to.
const AGENT_PREFIX: &str = "quorum-cluster|";
/// Anti-entropy runs every this many heartbeat ticks (and whenever a member joins or rejoins).
const ANTI_ENTROPY_EVERY: u64 = 5;
/// Repair batches stay well under ractor_cluster's 16 MiB frame limit.
const MAX_BATCH_BYTES: usize = 1 << 20;
/// How long `shutdown` waits for peers to acknowledge the leave notice.
const LEAVE_ACK_WAIT: Duration = Duration::from_secs(1);

/// A running cluster node. Cheap to clone; the node stops when [`shutdown`](Self::shutdown) is
/// called or the last clone is dropped.
#[derive(Clone)]
pub struct Cluster {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.handle.core.name)
            .field("local_addr", &self.handle.core.local_addr)
            .finish_non_exhaustive()
    }
}

/// Owns the node's lifetime: dropping the last one stops it.
struct Handle {
    core: Arc<Core>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.stop_now();
    }
}

struct Actors {
    server: ActorRef<NodeServerMessage>,
    agent: ActorRef<AgentMsg>,
}

struct MemberState {
    advert: NodeAdvert,
    alive: bool,
    last_seen: Instant,
    incarnation: u64,
    /// This incarnation said goodbye; a heartbeat it sent just before is not a rejoin.
    left: bool,
}

/// An address to keep connected to: from the join list or learned by gossip.
#[derive(Default)]
struct Target {
    name: Option<String>,
    resolved: Option<SocketAddr>,
    last_dial: Option<Instant>,
    /// Why the last link to it failed its handshake; reported if it is still down next round.
    handshake_failed: Option<String>,
    /// Already said at warn level that it cannot be reached, so the redial loop stays quiet.
    warned: bool,
    /// Already logged the refusal; said again only after a link to it has worked.
    refusal_logged: bool,
}

struct SessionView {
    peer: String,
    is_server: bool,
    peer_addr: String,
    actor: ActorRef<NodeSessionMessage>,
}

/// One peer's send queue ([`Lanes`]) and the wake-up of its writer task.
struct PeerQueue {
    lanes: Mutex<Lanes>,
    wake: Notify,
}

impl PeerQueue {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // Every method leaves the lanes consistent, so a poisoned lock is still usable.
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Frames from one peer waiting for this node's handler; past it a request is answered
/// "overloaded" and a message is dropped, instead of buffering without limit.
const INBOUND_DEPTH: usize = 1024;

/// What a mutual-TLS link proved at its handshake: the peer's end-entity certificate (already
/// chained to the cluster CA) and a key both ends derived from the TLS session (RFC 5705
/// exporter), which authenticates every frame on that link.
#[derive(Clone)]
struct LinkId {
    cert: tokio_rustls::rustls::pki_types::CertificateDer<'static>,
    key: [u8; 32],
    since: Instant,
}

/// The exporter label of the frame key (RFC 5705).
const FRAME_KEY_LABEL: &[u8] = b"EXPORTER-quorum-cluster-frame-key";
/// How long a connecting peer has to finish its TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A frame's authenticator on a mutual-TLS link: blake3 keyed with the link's key.
const MAC_BYTES: usize = 32;

/// An established TLS link handed to ractor_cluster as an external stream.
struct TlsLink<S> {
    io: S,
    peer: String,
    local: String,
}

impl<S> ractor_cluster::ClusterBidiStream for TlsLink<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    fn split(self: Box<Self>) -> (ractor_cluster::BoxRead, ractor_cluster::BoxWrite) {
        let (r, w) = tokio::io::split(self.io);
        (Box::new(r), Box::new(w))
    }
    fn peer_label(&self) -> Option<String> {
        Some(self.peer.clone())
    }
    fn local_label(&self) -> Option<String> {
        Some(self.local.clone())
    }
}

enum Inbound {
    Msg(Envelope),
    Req(u64, Envelope),
}

struct Pending {
    node: String,
    tx: oneshot::Sender<Result<Envelope, ClusterError>>,
}

#[derive(Default)]
struct State {
    advert: NodeAdvert,
    members: HashMap<String, MemberState>,
    targets: HashMap<String, Target>,
    sessions: Vec<SessionView>,
    routes: HashMap<String, ActorCell>,
    outbound: HashMap<String, Arc<PeerQueue>>,
    inbound: HashMap<String, mpsc::Sender<Inbound>>,
    pending: HashMap<u64, Pending>,
    authenticated: HashSet<ActorId>,
    /// Mutual TLS: what each link's handshake proved, by the link's peer address (the label
    /// ractor_cluster reports as the session's `peer_addr`).
    links: HashMap<String, LinkId>,
    /// Mutual TLS: the frame keys of each peer's verified links (more than one while a
    /// duplicate connection is being closed).
    peer_keys: HashMap<String, Vec<[u8; 32]>>,
    /// Mutual TLS: the key of the link each peer's frames are sent on (the route's).
    route_keys: HashMap<String, [u8; 32]>,
    /// Sessions already closed for naming a node their certificate is not for.
    impostors: HashSet<ActorId>,
    /// Frames dropped because their sender did not authenticate as the node they name.
    rejected_frames: u64,
    refused: Vec<String>,
    /// Hosts whose failed incoming handshakes were already logged.
    refused_incoming: HashSet<String>,
}

/// Node-server events, forwarded from ractor_cluster's synchronous callbacks to our event task.
enum LinkEvent {
    Opened(NodeServerSessionInformation),
    Authenticated(NodeServerSessionInformation),
    Ready(NodeServerSessionInformation),
    Disconnected(NodeServerSessionInformation),
}

struct Subscription {
    tx: mpsc::UnboundedSender<LinkEvent>,
}

impl NodeEventSubscription for Subscription {
    fn node_session_opened(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Opened(ses));
    }
    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Disconnected(ses));
    }
    fn node_session_authenticated(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Authenticated(ses));
    }
    fn node_session_ready(&self, ses: NodeServerSessionInformation) {
        let _ = self.tx.send(LinkEvent::Ready(ses));
    }
}

/// The agent actor: the one remotable actor of a node, fed by every peer's link.
struct Agent {
    core: Weak<Core>,
}

#[ractor::async_trait]
impl Actor for Agent {
    type Msg = AgentMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        _args: (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        msg: AgentMsg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let AgentMsg::Frame(bytes) = msg;
        if let Some(core) = self.core.upgrade() {
            core.on_frame(&bytes);
        }
        // Never fail: a failing agent would stop receiving for the whole node.
        Ok(())
    }
}

/// Everything a node shares between its handle, its tasks and its blackboard.
pub(crate) struct Core {
    pub(crate) name: String,
    incarnation: u64,
    local_addr: SocketAddr,
    heartbeat_interval: Duration,
    heartbeat_deadline: Duration,
    reconnect_interval: Duration,
    handler: Arc<dyn MessageHandler>,
    pub(crate) bb: BbStore,
    filter: TransportFilter,
    send_limits: Limits,
    events: broadcast::Sender<MembershipEvent>,
    state: Mutex<State>,
    next_id: AtomicU64,
    closed: AtomicBool,
    actors: OnceLock<Actors>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    dial_wake: Notify,
    rt: tokio::runtime::Handle,
    tls: Option<ClusterTls>,
    started_ms: u64,
    /// Set when another node already carries this node's name and this one must give way.
    name_clash: Mutex<Option<String>>,
}

fn normalize_advert(mut advert: NodeAdvert, name: &str, bound: SocketAddr) -> NodeAdvert {
    advert.name = name.to_string();
    if advert.cluster_addr.is_empty() {
        advert.cluster_addr = bound.to_string();
    } else if let Ok(sa) = advert.cluster_addr.parse::<SocketAddr>() {
        if sa.port() == 0 {
            advert.cluster_addr = SocketAddr::new(sa.ip(), bound.port()).to_string();
        }
    }
    advert
}

/// Adverts that differ only in load are not a membership event.
fn same_but_load(a: &NodeAdvert, b: &NodeAdvert) -> bool {
    let mut a = a.clone();
    a.in_flight = b.in_flight;
    &a == b
}

/// ractor_cluster names a node `name~incarnation@host`; members are known by `name`.
///
/// The incarnation keeps two processes that were given the same name distinct at the link
/// level, so the clash reaches our membership (which can say what is wrong) instead of being
/// refused silently inside ractor_cluster's handshake.
fn node_of(full: &str) -> &str {
    let n = full.rsplit_once('@').map(|(n, _)| n).unwrap_or(full);
    n.rsplit_once('~').map(|(n, _)| n).unwrap_or(n)
}

/// Split entries into batches that each fit comfortably in one frame.
fn batches(entries: Vec<BbEntry>) -> Vec<Vec<BbEntry>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut size = 0;
    for e in entries {
        let n = e.body.len() + e.author.len() + e.topic.len() + e.id.flow_id.len() + 128;
        if !cur.is_empty() && size + n > MAX_BATCH_BYTES {
            out.push(std::mem::take(&mut cur));
            size = 0;
        }
        size += n;
        cur.push(e);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Cluster {
    /// Start the node: listen, dial the join list, and begin heartbeating. Links are plain TCP;
    /// see [`start_tls`](Self::start_tls) for encrypted ones.
    ///
    /// Fails with [`ClusterError::Bind`] if the address cannot be listened on and with
    /// [`ClusterError::Store`] if the blackboard directory cannot be opened.
    pub async fn start(
        cfg: ClusterConfig,
        handler: Arc<dyn MessageHandler>,
    ) -> Result<Cluster, ClusterError> {
        Self::start_inner(cfg, handler, None).await
    }

    /// Like [`start`](Self::start), with every link (accepted and dialed) over TLS. Peers without
    /// TLS, or whose certificate does not verify, never become members and are reported by
    /// [`refused_peers`](Self::refused_peers).
    pub async fn start_tls(
        cfg: ClusterConfig,
        handler: Arc<dyn MessageHandler>,
        tls: ClusterTls,
    ) -> Result<Cluster, ClusterError> {
        Self::start_inner(cfg, handler, Some(tls)).await
    }

    async fn start_inner(
        cfg: ClusterConfig,
        handler: Arc<dyn MessageHandler>,
        tls: Option<ClusterTls>,
    ) -> Result<Cluster, ClusterError> {
        let bb = BbStore::open(&cfg.name, cfg.data_dir.as_deref())?;
        let ip = cfg.listen.ip();
        let host = ip.to_string();
        let incarnation: u64 = rand::random();
        // Mutual TLS: links arrive on our own listener, whose handshakes run each in their own
        // task with a deadline. ractor_cluster's listener does its TLS handshake inline in its
        // one accept loop, so one client that never says hello there would block every join;
        // it only gets a loopback decoy that refuses everyone.
        let mutual = tls.as_ref().is_some_and(|t| t.mutual);
        let own_listener = if mutual {
            match tokio::net::TcpListener::bind(cfg.listen).await {
                Ok(l) => Some(l),
                Err(e) => {
                    bb.close();
                    return Err(ClusterError::Bind {
                        addr: cfg.listen,
                        message: e.to_string().to_lowercase(),
                    });
                }
            }
        } else {
            None
        };
        let decoy = match (&tls, mutual) {
            (Some(t), true) => match t.decoy_acceptor() {
                Ok(a) => Some(a),
                Err(e) => {
                    bb.close();
                    return Err(e);
                }
            },
            _ => None,
        };
        let server_listen = if mutual {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 0)
        } else {
            cfg.listen
        };

        // ractor_cluster does not report the port it bound, so with port 0 we pick a free port
        // first and hand it over; another process could take it in between, hence the retries.
        let mut attempt = 0;
        let (port, server_ref) = loop {
            attempt += 1;
            let port = if server_listen.port() == 0 {
                let probe =
                    std::net::TcpListener::bind(server_listen).map_err(|e| ClusterError::Bind {
                        addr: cfg.listen,
                        message: e.to_string().to_lowercase(),
                    })?;
                let port = probe
                    .local_addr()
                    .map_err(|e| ClusterError::Bind {
                        addr: cfg.listen,
                        message: e.to_string().to_lowercase(),
                    })?
                    .port();
                drop(probe);
                port
            } else {
                server_listen.port()
            };
            let encryption = match (&decoy, &tls) {
                (Some(d), _) => Some(IncomingEncryptionMode::Tls(d.clone())),
                (None, Some(t)) => Some(IncomingEncryptionMode::Tls(t.acceptor.clone())),
                (None, None) => None,
            };
            let server = NodeServer::new(
                port,
                cfg.cookie.clone(),
                format!("{}~{incarnation:x}", cfg.name),
                host.clone(),
                encryption,
                Some(NodeConnectionMode::Isolated),
            )
            .with_listen_addr(server_listen.ip());
            match Actor::spawn(None, server, ()).await {
                Ok((server_ref, _)) => break (port, server_ref),
                Err(e) if server_listen.port() == 0 && attempt < 3 => {
                    tracing::debug!("node server failed to start on probed port {port}: {e}");
                }
                Err(e) => {
                    bb.close();
                    return Err(ClusterError::Bind {
                        addr: cfg.listen,
                        message: e.to_string().to_lowercase(),
                    });
                }
            }
        };
        let local_addr = match &own_listener {
            Some(l) => match l.local_addr() {
                Ok(a) => a,
                Err(e) => {
                    server_ref.stop(None);
                    bb.close();
                    return Err(ClusterError::Bind {
                        addr: cfg.listen,
                        message: e.to_string().to_lowercase(),
                    });
                }
            },
            None => SocketAddr::new(ip, port),
        };

        let (events, _) = broadcast::channel(1024);
        let core = Arc::new(Core {
            name: cfg.name.clone(),
            incarnation,
            local_addr,
            heartbeat_interval: cfg.heartbeat_interval.max(Duration::from_millis(1)),
            heartbeat_deadline: cfg.heartbeat_deadline,
            send_limits: cfg.send_queue,
            reconnect_interval: cfg.reconnect_interval.max(Duration::from_millis(1)),
            handler,
            bb,
            filter: TransportFilter::default(),
            events,
            state: Mutex::new(State {
                advert: normalize_advert(cfg.advert.clone(), &cfg.name, local_addr),
                ..State::default()
            }),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            actors: OnceLock::new(),
            tasks: Mutex::new(Vec::new()),
            dial_wake: Notify::new(),
            rt: tokio::runtime::Handle::current(),
            tls,
            started_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            name_clash: Mutex::new(None),
        });

        // The name ties the agent to this node server (`name@host` and `host:port` are what peers
        // see of it in their session), and the incarnation keeps it unique across restarts.
        let agent_name = format!(
            "{AGENT_PREFIX}{}~{incarnation:x}@{host}|{host}:{port}#{incarnation}",
            cfg.name
        );
        let agent = match Actor::spawn(
            Some(agent_name),
            Agent {
                core: Arc::downgrade(&core),
            },
            (),
        )
        .await
        {
            Ok((agent, _)) => agent,
            Err(e) => {
                server_ref.stop(None);
                core.bb.close();
                return Err(ClusterError::Transport(format!(
                    "cannot start the cluster agent: {e}"
                )));
            }
        };

        let (link_tx, link_rx) = mpsc::unbounded_channel();
        if server_ref
            .cast(NodeServerMessage::SubscribeToEvents {
                id: "quorum-cluster".to_string(),
                subscription: Box::new(Subscription { tx: link_tx }),
            })
            .is_err()
        {
            agent.stop(None);
            server_ref.stop(None);
            core.bb.close();
            return Err(ClusterError::Transport(
                "the node server stopped while starting".to_string(),
            ));
        }
        let _ = core.actors.set(Actors {
            server: server_ref,
            agent,
        });

        {
            let mut st = core.lock();
            for addr in &cfg.join {
                st.targets.entry(addr.clone()).or_default();
            }
        }

        let mut tasks = vec![
            tokio::spawn(tick_loop(Arc::downgrade(&core))),
            tokio::spawn(dial_loop(Arc::downgrade(&core))),
            tokio::spawn(link_loop(Arc::downgrade(&core), link_rx)),
        ];
        if let Some(l) = own_listener {
            tasks.push(tokio::spawn(accept_loop(Arc::downgrade(&core), l)));
        }
        core.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(tasks);
        tracing::info!(node = %core.name, addr = %local_addr, "cluster node listening");

        Ok(Cluster {
            handle: Arc::new(Handle { core }),
        })
    }

    fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.core().name
    }

    /// The address the node server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.core().local_addr
    }

    /// Every node ever heard from, this one first (`is_self`, always alive), then by name.
    pub fn members(&self) -> Vec<Member> {
        self.core().members()
    }

    /// The members currently alive, this one included.
    pub fn alive_members(&self) -> Vec<Member> {
        self.members().into_iter().filter(|m| m.alive).collect()
    }

    /// Membership events from now on. A receiver that falls more than 1024 events behind gets
    /// `RecvError::Lagged`; [`members`](Self::members) is always current.
    pub fn subscribe(&self) -> broadcast::Receiver<MembershipEvent> {
        self.core().events.subscribe()
    }

    /// Replace this node's advert; peers get it with the next heartbeat.
    pub fn set_advert(&self, advert: NodeAdvert) {
        let core = self.core();
        let advert = normalize_advert(advert, &core.name, core.local_addr);
        core.lock().advert = advert;
    }

    /// Why this node must not stay in the cluster: another node already carries its name
    /// (`None` while there is no clash, or when the other node is the one to give way).
    pub fn name_clash(&self) -> Option<String> {
        self.core()
            .name_clash
            .lock()
            .ok()?
            .clone()
            .filter(|m| !m.is_empty())
    }

    /// Change what this node advertises and tell every peer now rather than at the next
    /// heartbeat (a draining node must stop being chosen at once).
    pub fn set_advert_now(&self, advert: NodeAdvert) {
        self.set_advert(advert);
        self.core().heartbeat_all();
    }

    /// What this node advertises now.
    pub fn advert(&self) -> NodeAdvert {
        self.core().lock().advert.clone()
    }

    /// Send a one-way message. Messages from one node arrive in the order they were sent.
    /// Sending to this node's own name delivers locally.
    ///
    /// `Ok` means the message was handed to a live link; a link that drops afterwards loses it,
    /// and the loss shows up as [`MembershipEvent::Lost`] once the deadline passes.
    pub async fn send(&self, node: &str, msg: Envelope) -> Result<(), ClusterError> {
        let core = self.core();
        core.check_open()?;
        if node == core.name {
            core.deliver(&core.name, Inbound::Msg(msg));
            return Ok(());
        }
        core.check_reachable(node).await?;
        let kind = msg.kind.clone();
        core.enqueue(
            node,
            &kind,
            &Frame {
                from: core.name.clone(),
                ack: None,
                body: Body::Msg { env: msg },
            },
        )
    }

    /// Send a request and wait for the reply, at most `timeout`. Fails at once for unknown or
    /// lost nodes, and as soon as the node is declared lost while waiting.
    pub async fn request(
        &self,
        node: &str,
        msg: Envelope,
        timeout: Duration,
    ) -> Result<Envelope, ClusterError> {
        let core = self.core();
        core.check_open()?;
        let timed_out = || ClusterError::Timeout {
            node: node.to_string(),
            ms: timeout.as_millis() as u64,
        };
        if node == core.name {
            return match tokio::time::timeout(timeout, core.handler.on_request(node, msg)).await {
                Ok(r) => r.map_err(ClusterError::Remote),
                Err(_) => Err(timed_out()),
            };
        }
        core.check_reachable(node).await?;
        let id = core.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        core.lock().pending.insert(
            id,
            Pending {
                node: node.to_string(),
                tx,
            },
        );
        let kind = msg.kind.clone();
        let frame = Frame {
            from: core.name.clone(),
            ack: None,
            body: Body::Req { id, env: msg },
        };
        if let Err(e) = core.enqueue(node, &kind, &frame) {
            core.lock().pending.remove(&id);
            return Err(e);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ClusterError::Transport(
                "the cluster node shut down while waiting for a reply".to_string(),
            )),
            Err(_) => {
                core.lock().pending.remove(&id);
                Err(timed_out())
            }
        }
    }

    /// This node's blackboard replica.
    pub fn blackboard(&self) -> Blackboard {
        Blackboard {
            core: self.core().clone(),
        }
    }

    /// Fault injection on this node's traffic.
    pub fn filter(&self) -> TransportFilter {
        self.core().filter.clone()
    }

    /// Peers (address, or name when known) whose links were closed during the handshake and that
    /// stayed unreachable: a wrong cookie, most likely. Oldest first, each once.
    pub fn refused_peers(&self) -> Vec<String> {
        self.core().lock().refused.clone()
    }

    /// Frames dropped because their sender did not authenticate as the node they name.
    pub fn rejected_frames(&self) -> u64 {
        self.core().lock().rejected_frames
    }

    /// Test hook: queue raw frame bytes (JSON, unsealed) for `peer` as if this node had built
    /// them, so tests can play a peer that lies in its frames.
    #[doc(hidden)]
    pub fn send_raw_frame_for_test(&self, peer: &str, frame_json: Vec<u8>) {
        let core = self.core();
        let q = core.queue_for(peer);
        let _ = q.lanes().push_bulk(Queued {
            bytes: frame_json,
            due: None,
            seq: None,
        });
        q.wake.notify_one();
    }

    /// Leave the cluster: tell alive members (they mark this node lost at once), stop heartbeats
    /// and dialing, close the links, stop the node server and close the blackboard's store.
    pub async fn shutdown(&self) {
        self.core().shutdown().await;
    }
}

async fn tick_loop(core: Weak<Core>) {
    let period = match core.upgrade() {
        Some(c) => c.heartbeat_interval,
        None => return,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        interval.tick().await;
        let Some(core) = core.upgrade() else { return };
        if core.closed.load(Ordering::SeqCst) {
            return;
        }
        core.refresh_links().await;
        core.heartbeat_all();
        core.check_deadlines();
        if n % ANTI_ENTROPY_EVERY == ANTI_ENTROPY_EVERY - 1 {
            let alive: Vec<String> = core
                .lock()
                .members
                .iter()
                .filter(|(_, m)| m.alive)
                .map(|(n, _)| n.clone())
                .collect();
            for peer in alive {
                core.send_summary(&peer);
            }
        }
        n = n.wrapping_add(1);
    }
}

async fn dial_loop(core: Weak<Core>) {
    let period = match core.upgrade() {
        Some(c) => c.reconnect_interval,
        None => return,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        {
            let Some(c) = core.upgrade() else { return };
            // Gossip that names a new peer wakes the loop so joins do not wait a whole interval.
            tokio::select! {
                _ = interval.tick() => {}
                _ = c.dial_wake.notified() => {}
            }
        }
        let Some(c) = core.upgrade() else { return };
        if c.closed.load(Ordering::SeqCst) {
            return;
        }
        c.dial_round().await;
    }
}

async fn link_loop(core: Weak<Core>, mut rx: mpsc::UnboundedReceiver<LinkEvent>) {
    while let Some(ev) = rx.recv().await {
        let Some(c) = core.upgrade() else { return };
        if c.closed.load(Ordering::SeqCst) {
            return;
        }
        c.on_link_event(ev).await;
    }
}

/// Hands one peer's frames to its link, control lane first, as the window allows; ends when the
/// node stops or forgets the queue.
async fn writer_loop(core: Weak<Core>, peer: String, queue: Arc<PeerQueue>) {
    loop {
        let next = queue.lanes().take(Instant::now());
        let Some(o) = next else {
            // A timeout too: an acknowledgement given up on reopens the window without a wake.
            let _ = tokio::time::timeout(Duration::from_millis(250), queue.wake.notified()).await;
            let Some(c) = core.upgrade() else { return };
            let current = c
                .lock()
                .outbound
                .get(&peer)
                .is_some_and(|q| Arc::ptr_eq(q, &queue));
            if c.closed.load(Ordering::SeqCst) || !current {
                return;
            }
            continue;
        };
        if let Some(due) = o.due {
            tokio::time::sleep_until(due).await;
        }
        let Some(c) = core.upgrade() else { return };
        // A partition set while the frame waited for its delay still applies.
        if c.filter.is_partitioned(&peer) {
            continue;
        }
        let (route, key) = {
            let st = c.lock();
            (
                st.routes.get(&peer).cloned(),
                st.route_keys.get(&peer).copied(),
            )
        };
        let len = o.bytes.len();
        let bytes = match (c.mutual(), key) {
            (false, _) => o.bytes,
            (true, Some(k)) => seal(&k, o.bytes),
            (true, None) => {
                tracing::debug!(node = %c.name, %peer, "no authenticated link; frame dropped");
                continue;
            }
        };
        match route {
            Some(cell) => {
                if cell.send_message(AgentMsg::Frame(bytes)).is_err() {
                    tracing::debug!(node = %c.name, %peer, "link closed; frame dropped");
                } else if let Some(seq) = o.seq {
                    queue.lanes().sent(seq, len, Instant::now());
                }
            }
            None => tracing::debug!(node = %c.name, %peer, "no link; frame dropped"),
        }
        // A test's slow wire: the link is busy with this frame for a while.
        let busy = c.filter.wire_time(&peer, len);
        drop(c);
        if !busy.is_zero() {
            tokio::time::sleep(busy).await;
        }
    }
}

async fn dispatch_loop(
    core: Weak<Core>,
    handler: Arc<dyn MessageHandler>,
    from: String,
    mut rx: mpsc::Receiver<Inbound>,
) {
    while let Some(item) = rx.recv().await {
        match item {
            Inbound::Msg(env) => {
                // Awaiting a task per message keeps per-sender order and contains handler panics.
                let (h, f) = (handler.clone(), from.clone());
                let kind = env.kind.clone();
                if let Err(e) = tokio::spawn(async move { h.on_message(&f, env).await }).await {
                    tracing::error!(%from, %kind, "message handler failed: {e}");
                }
            }
            Inbound::Req(id, env) => {
                let (h, f, c) = (handler.clone(), from.clone(), core.clone());
                tokio::spawn(async move {
                    let kind = env.kind.clone();
                    let (h2, f2) = (h.clone(), f.clone());
                    let result =
                        match tokio::spawn(async move { h2.on_request(&f2, env).await }).await {
                            Ok(r) => r,
                            Err(e) => {
                                tracing::error!(from = %f, %kind, "request handler failed: {e}");
                                Err(format!("request handler failed: {e}"))
                            }
                        };
                    if let Some(core) = c.upgrade() {
                        core.respond(&f, id, result);
                    }
                });
            }
        }
    }
}

impl Core {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_open(&self) -> Result<(), ClusterError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(ClusterError::Transport(
                "the cluster node is shut down".to_string(),
            ))
        } else {
            Ok(())
        }
    }

    /// Fail fast for unknown and lost nodes. A link that came up since the last refresh (the
    /// heartbeat can beat the link event) is picked up here rather than reported missing.
    async fn check_reachable(&self, node: &str) -> Result<(), ClusterError> {
        let alive_without_route = {
            let st = self.lock();
            st.members.get(node).is_some_and(|m| m.alive) && !st.routes.contains_key(node)
        };
        if alive_without_route {
            self.refresh_links().await;
        }
        let st = self.lock();
        match st.members.get(node) {
            None => Err(ClusterError::UnknownNode(node.to_string())),
            Some(m) if !m.alive => Err(ClusterError::NodeLost(node.to_string())),
            Some(_) if !st.routes.contains_key(node) => Err(ClusterError::Transport(format!(
                "no link to {node}: reconnecting"
            ))),
            Some(_) => Ok(()),
        }
    }

    fn emit(&self, ev: MembershipEvent) {
        tracing::info!(node = %self.name, event = ?ev, "membership");
        let _ = self.events.send(ev);
    }

    fn members(&self) -> Vec<Member> {
        let st = self.lock();
        let now = Instant::now();
        let mut others: Vec<Member> = st
            .members
            .iter()
            .map(|(name, m)| Member {
                name: name.clone(),
                advert: m.advert.clone(),
                alive: m.alive,
                last_seen_ms_ago: now.duration_since(m.last_seen).as_millis() as u64,
                is_self: false,
            })
            .collect();
        others.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = vec![Member {
            name: self.name.clone(),
            advert: st.advert.clone(),
            alive: true,
            last_seen_ms_ago: 0,
            is_self: true,
        }];
        out.extend(others);
        out
    }

    /// Queue a frame for `peer`, through the filter. A dropped frame is not an error: the filter
    /// plays a lossy network.
    fn enqueue(
        self: &Arc<Self>,
        peer: &str,
        kind: &str,
        frame: &Frame,
    ) -> Result<(), ClusterError> {
        let due = match self.filter.outgoing(peer, kind) {
            Verdict::Drop => return Ok(()),
            Verdict::Send(d) => d.map(|d| tokio::time::Instant::now() + d),
        };
        let bytes = frame
            .encode()
            .map_err(|e| ClusterError::Transport(format!("cannot encode a frame: {e}")))?;
        if bytes.len() > MAX_FRAME_BYTES {
            return Err(ClusterError::Transport(format!(
                "a {kind} frame of {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit",
                bytes.len()
            )));
        }
        self.check_open()?;
        let q = self.queue_for(peer);
        let pushed = {
            let mut lanes = q.lanes();
            if matches!(kind, KIND_HEARTBEAT | KIND_LEAVE | KIND_ACK) {
                lanes.push_control(Queued {
                    bytes,
                    due,
                    seq: None,
                });
                Ok(())
            } else {
                let seq = lanes.is_windowed(bytes.len()).then(|| lanes.next_seq());
                let bytes = match seq {
                    Some(n) => Frame::stamp_ack(bytes, n),
                    None => bytes,
                };
                lanes.push_bulk(Queued { bytes, due, seq })
            }
        };
        q.wake.notify_one();
        pushed.map_err(|full| {
            ClusterError::Transport(format!(
                "the send queue to {peer} is full ({} frames, {} bytes waiting): it is not keeping up; try again later",
                full.waiting_frames, full.waiting_bytes
            ))
        })
    }

    /// `peer`'s send queue, with its writer task started on first use.
    fn queue_for(self: &Arc<Self>, peer: &str) -> Arc<PeerQueue> {
        let mut st = self.lock();
        st.outbound
            .entry(peer.to_string())
            .or_insert_with(|| {
                let q = Arc::new(PeerQueue {
                    lanes: Mutex::new(Lanes::new(self.send_limits)),
                    wake: Notify::new(),
                });
                self.rt.spawn(writer_loop(
                    Arc::downgrade(self),
                    peer.to_string(),
                    q.clone(),
                ));
                q
            })
            .clone()
    }

    fn deliver(self: &Arc<Self>, from: &str, item: Inbound) {
        let tx = {
            let mut st = self.lock();
            st.inbound
                .entry(from.to_string())
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::channel(INBOUND_DEPTH);
                    self.rt.spawn(dispatch_loop(
                        Arc::downgrade(self),
                        self.handler.clone(),
                        from.to_string(),
                        rx,
                    ));
                    tx
                })
                .clone()
        };
        match tx.try_send(item) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Inbound::Req(id, env))) => {
                tracing::warn!(node = %self.name, peer = %from, kind = %env.kind, "inbound queue full; request refused");
                self.respond(
                    from,
                    id,
                    Err(format!(
                        "{} is overloaded ({INBOUND_DEPTH} frames from {from} waiting): try again",
                        self.name
                    )),
                );
            }
            Err(mpsc::error::TrySendError::Full(Inbound::Msg(env))) => {
                tracing::warn!(node = %self.name, peer = %from, kind = %env.kind, "inbound queue full; message dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn respond(self: &Arc<Self>, to: &str, id: u64, result: Result<Envelope, String>) {
        let kind = match &result {
            Ok(env) => env.kind.clone(),
            Err(_) => "error".to_string(),
        };
        let frame = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Resp { id, result },
        };
        if let Err(e) = self.enqueue(to, &kind, &frame) {
            tracing::warn!(node = %self.name, %to, "reply not sent: {e}");
            // Tell the caller now rather than let it wait for its timeout.
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::Resp {
                    id,
                    result: Err(format!("reply not sent: {e}")),
                },
            };
            let _ = self.enqueue(to, "error", &frame);
        }
    }

    fn fail_pending(&self, node: &str) {
        let failed: Vec<Pending> = {
            let mut st = self.lock();
            let ids: Vec<u64> = st
                .pending
                .iter()
                .filter(|(_, p)| p.node == node)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| st.pending.remove(id)).collect()
        };
        for p in failed {
            let _ = p.tx.send(Err(ClusterError::NodeLost(node.to_string())));
        }
    }

    /// Declare `node` lost. With `drop_links`, its sessions are closed too: ractor_cluster keeps a
    /// half-open link (peer host gone, no RST) alive and would refuse the restarted peer's new
    /// one as a duplicate, so a dead peer's link is closed and redialed instead.
    fn mark_lost(&self, node: &str, drop_links: bool) {
        let (was_alive, links) = {
            let mut st = self.lock();
            let was_alive = match st.members.get_mut(node) {
                Some(m) if m.alive => {
                    m.alive = false;
                    true
                }
                _ => false,
            };
            let links: Vec<ActorRef<NodeSessionMessage>> = if was_alive && drop_links {
                st.routes.remove(node);
                st.sessions
                    .iter()
                    .filter(|s| s.peer == node)
                    .map(|s| s.actor.clone())
                    .collect()
            } else {
                Vec::new()
            };
            (was_alive, links)
        };
        if was_alive {
            if let Some(q) = self.lock().outbound.get(node).cloned() {
                // Nothing more will be acknowledged on the links it had.
                q.lanes().reset_window();
            }
            self.emit(MembershipEvent::Lost(node.to_string()));
            self.fail_pending(node);
            for link in links {
                link.stop(Some("peer lost".to_string()));
            }
        }
    }

    // ---- links -------------------------------------------------------------------------------

    fn server(&self) -> Option<&ActorRef<NodeServerMessage>> {
        self.actors.get().map(|a| &a.server)
    }

    /// Re-read the node server's authenticated sessions and find each peer's agent on them.
    async fn refresh_links(&self) {
        let Some(server) = self.server() else { return };
        let sessions = match ractor::call_t!(server, NodeServerMessage::GetSessions, 1000) {
            Ok(s) => s,
            Err(_) => {
                tracing::debug!(node = %self.name, "node server did not list its sessions");
                return;
            }
        };
        let mut views = Vec::new();
        let mut routes = HashMap::new();
        let mutual = self.mutual();
        let links = if mutual {
            self.lock().links.clone()
        } else {
            HashMap::new()
        };
        let mut peer_keys: HashMap<String, Vec<[u8; 32]>> = HashMap::new();
        let mut route_keys = HashMap::new();
        let mut live_labels = HashSet::new();
        for info in sessions.into_values() {
            live_labels.insert(info.peer_addr.clone());
            let Some(pn) = info.peer_name.as_ref() else {
                continue;
            };
            let peer = node_of(&pn.name).to_string();
            let mut link_key = None;
            if mutual {
                // The name given in ractor_cluster's handshake must be the one the link's
                // certificate was issued for; otherwise the session is an impostor.
                match links.get(&info.peer_addr) {
                    Some(l) if crate::tls::names_node(&l.cert, &peer) => link_key = Some(l.key),
                    other => {
                        let why = if other.is_some() {
                            "its certificate is issued for another node"
                        } else {
                            "it did not arrive over a verified tls link"
                        };
                        if self.lock().impostors.insert(info.actor.get_id()) {
                            tracing::error!(
                                node = %self.name,
                                %peer,
                                from = %info.peer_addr,
                                "cluster link claiming to be {peer} closed: {why}"
                            );
                        }
                        info.actor
                            .stop(Some("certificate does not name this node".to_string()));
                        continue;
                    }
                }
                if let Some(k) = link_key {
                    peer_keys.entry(peer.clone()).or_default().push(k);
                }
            }
            let key = format!("{AGENT_PREFIX}{}|{}#", pn.name, pn.connection_string);
            let agent = info
                .actor
                .get_cell()
                .get_children()
                .into_iter()
                .filter(|c| {
                    c.get_status() < ActorStatus::Stopping
                        && c.get_name().is_some_and(|n| n.starts_with(&key))
                })
                // A newer incarnation in the same process has a higher pid.
                .max_by_key(|c| c.get_id().pid());
            if let Some(agent) = agent {
                routes.insert(peer.clone(), agent);
                if let Some(k) = link_key {
                    route_keys.insert(peer.clone(), k);
                }
            }
            views.push(SessionView {
                peer,
                is_server: info.is_server,
                peer_addr: info.peer_addr.clone(),
                actor: info.actor.clone(),
            });
        }
        let mut st = self.lock();
        // Learn which node answers at each dialed address.
        for t in st.targets.values_mut() {
            if t.name.is_none() {
                if let Some(r) = t.resolved {
                    let r = r.to_string();
                    if let Some(s) = views.iter().find(|s| !s.is_server && s.peer_addr == r) {
                        t.name = Some(s.peer.clone());
                    }
                }
            }
        }
        st.sessions = views;
        st.routes = routes;
        if mutual {
            st.peer_keys = peer_keys;
            st.route_keys = route_keys;
            // A link whose session is gone is forgotten; a fresh one may not be listed yet.
            st.links.retain(|label, l| {
                live_labels.contains(label) || l.since.elapsed() < Duration::from_secs(30)
            });
        }
    }

    fn target_connected(st: &State, t: &Target) -> bool {
        st.sessions.iter().any(|s| {
            t.name.as_deref() == Some(s.peer.as_str())
                || (!s.is_server && t.resolved.is_some_and(|r| r.to_string() == s.peer_addr))
        })
    }

    async fn dial_round(self: &Arc<Self>) {
        let now = Instant::now();
        let mut todo = Vec::new();
        let mut refused = Vec::new();
        {
            let mut st = self.lock();
            let connected: Vec<(String, bool)> = st
                .targets
                .iter()
                .map(|(a, t)| (a.clone(), Self::target_connected(&st, t)))
                .collect();
            for (addr, is_connected) in connected {
                let Some(t) = st.targets.get_mut(&addr) else {
                    continue;
                };
                if t.name.as_deref() == Some(self.name.as_str())
                    || t.resolved == Some(self.local_addr)
                {
                    continue;
                }
                if is_connected {
                    t.handshake_failed = None;
                    t.warned = false;
                    t.refusal_logged = false;
                    continue;
                }
                if let Some(why) = t.handshake_failed.take() {
                    if !std::mem::replace(&mut t.refusal_logged, true) {
                        refused.push((t.name.clone().unwrap_or_else(|| addr.clone()), why));
                    }
                }
                if t.last_dial
                    .is_some_and(|d| now.duration_since(d) < self.reconnect_interval)
                {
                    continue;
                }
                t.last_dial = Some(now);
                todo.push(addr);
            }
            for (peer, _) in &refused {
                if !st.refused.contains(peer) {
                    st.refused.push(peer.clone());
                }
            }
        }
        for (peer, why) in refused {
            tracing::error!(
                node = %self.name,
                %peer,
                "cluster link to {peer} was refused during the handshake ({why}); \
                 it stays out of the cluster until that is fixed"
            );
        }
        for addr in todo {
            self.rt.spawn(dial(Arc::downgrade(self), addr));
        }
    }

    async fn on_link_event(self: &Arc<Self>, ev: LinkEvent) {
        match ev {
            LinkEvent::Opened(ses) => {
                // ractor_cluster waits forever for a handshake; a peer that connects and goes
                // quiet (stopped process, scanner) would hold a session open indefinitely.
                let core = Arc::downgrade(self);
                let limit = self.heartbeat_deadline.max(Duration::from_secs(2));
                self.rt.spawn(async move {
                    tokio::time::sleep(limit).await;
                    let Some(c) = core.upgrade() else { return };
                    let id = ses.actor.get_id();
                    let authenticated = c.lock().authenticated.contains(&id);
                    if !authenticated && ses.actor.get_status() < ActorStatus::Stopping {
                        tracing::info!(
                            node = %c.name,
                            peer = %ses.peer_addr,
                            "cluster link did not authenticate in time; closing it"
                        );
                        ses.actor.stop(Some("handshake timeout".to_string()));
                    }
                });
            }
            LinkEvent::Authenticated(ses) => {
                self.lock().authenticated.insert(ses.actor.get_id());
            }
            LinkEvent::Ready(ses) => {
                self.refresh_links().await;
                // Say hello at once instead of at the next tick, so joins are fast.
                if let Some(pn) = ses.peer_name.as_ref() {
                    let peer = node_of(&pn.name).to_string();
                    self.heartbeat_to(&peer, &self.heartbeat_frame());
                }
            }
            LinkEvent::Disconnected(ses) => {
                let was_authenticated = self.lock().authenticated.remove(&ses.actor.get_id());
                if !was_authenticated {
                    if ses.is_server {
                        // Once per host: a misconfigured node redials forever.
                        let host = ses
                            .peer_addr
                            .parse::<SocketAddr>()
                            .map(|a| a.ip().to_string())
                            .unwrap_or_else(|_| ses.peer_addr.clone());
                        if self.lock().refused_incoming.insert(host) {
                            tracing::warn!(
                                node = %self.name,
                                from = %ses.peer_addr,
                                "incoming cluster link closed before authentication \
                                 (wrong cookie, or a duplicate connection)"
                            );
                        }
                    } else {
                        let mut st = self.lock();
                        for t in st.targets.values_mut() {
                            if t.resolved.is_some_and(|r| r.to_string() == ses.peer_addr) {
                                t.handshake_failed = Some(
                                    "closed during authentication: the cookies differ, \
                                     or the peer expects tls"
                                        .to_string(),
                                );
                            }
                        }
                    }
                }
                self.refresh_links().await;
            }
        }
    }

    // ---- membership --------------------------------------------------------------------------

    fn heartbeat_frame(&self) -> Frame {
        let st = self.lock();
        let mut peers: Vec<PeerAddr> = st
            .members
            .iter()
            .filter(|(_, m)| !m.advert.cluster_addr.is_empty())
            .map(|(name, m)| PeerAddr {
                name: name.clone(),
                addr: m.advert.cluster_addr.clone(),
            })
            .collect();
        peers.push(PeerAddr {
            name: self.name.clone(),
            addr: st.advert.cluster_addr.clone(),
        });
        Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::Heartbeat {
                incarnation: self.incarnation,
                advert: st.advert.clone(),
                peers,
                started_ms: self.started_ms,
            },
        }
    }

    fn heartbeat_to(self: &Arc<Self>, peer: &str, frame: &Frame) {
        if let Err(e) = self.enqueue(peer, KIND_HEARTBEAT, frame) {
            tracing::debug!(node = %self.name, %peer, "heartbeat not sent: {e}");
        }
    }

    /// Heartbeat every peer we have a link to, members or not yet: that is how joins happen.
    fn heartbeat_all(self: &Arc<Self>) {
        let frame = self.heartbeat_frame();
        let peers: Vec<String> = self.lock().routes.keys().cloned().collect();
        for peer in peers {
            self.heartbeat_to(&peer, &frame);
        }
    }

    fn check_deadlines(&self) {
        let now = Instant::now();
        let late: Vec<String> = self
            .lock()
            .members
            .iter()
            .filter(|(_, m)| m.alive && now.duration_since(m.last_seen) > self.heartbeat_deadline)
            .map(|(n, _)| n.clone())
            .collect();
        for n in late {
            tracing::warn!(node = %self.name, peer = %n, "heartbeat deadline missed");
            self.mark_lost(&n, true);
        }
    }

    fn on_heartbeat(
        self: &Arc<Self>,
        from: &str,
        incarnation: u64,
        advert: NodeAdvert,
        peers: Vec<PeerAddr>,
    ) {
        let mut events = Vec::new();
        let mut sync = false;
        let mut new_target = false;
        {
            let mut st = self.lock();
            let now = Instant::now();
            match st.members.get_mut(from) {
                None => {
                    st.members.insert(
                        from.to_string(),
                        MemberState {
                            advert: advert.clone(),
                            alive: true,
                            last_seen: now,
                            incarnation,
                            left: false,
                        },
                    );
                    events.push(MembershipEvent::Joined(from.to_string()));
                    sync = true;
                }
                Some(m) if m.left && m.incarnation == incarnation => return,
                Some(m) => {
                    if m.incarnation != incarnation {
                        // A restart: whatever the old incarnation held is gone.
                        if m.alive {
                            events.push(MembershipEvent::Lost(from.to_string()));
                        }
                        events.push(MembershipEvent::Rejoined(from.to_string()));
                        sync = true;
                    } else if !m.alive {
                        events.push(MembershipEvent::Rejoined(from.to_string()));
                        sync = true;
                    } else if !same_but_load(&m.advert, &advert) {
                        events.push(MembershipEvent::AdvertChanged(from.to_string()));
                    }
                    m.alive = true;
                    m.left = false;
                    m.last_seen = now;
                    m.incarnation = incarnation;
                    m.advert = advert.clone();
                }
            }
            let mut learned = peers;
            learned.push(PeerAddr {
                name: from.to_string(),
                addr: advert.cluster_addr.clone(),
            });
            for p in learned {
                if p.name == self.name || p.addr.is_empty() {
                    continue;
                }
                // An unspecified address would make us dial ourselves.
                if p.addr
                    .parse::<SocketAddr>()
                    .is_ok_and(|sa| sa.ip().is_unspecified())
                {
                    continue;
                }
                let known = st.targets.contains_key(&p.addr)
                    || st
                        .targets
                        .values()
                        .any(|t| t.name.as_deref() == Some(p.name.as_str()));
                if !known {
                    st.targets.insert(
                        p.addr.clone(),
                        Target {
                            name: Some(p.name.clone()),
                            ..Target::default()
                        },
                    );
                    new_target = true;
                }
            }
        }
        for ev in events {
            let lost = matches!(ev, MembershipEvent::Lost(_));
            self.emit(ev);
            if lost {
                self.fail_pending(from);
            }
        }
        if sync {
            self.send_summary(from);
        }
        if new_target {
            self.dial_wake.notify_one();
        }
    }

    /// Another process carries this node's name. The one that started later gives way: it
    /// records why (the binary exits on it); the other logs once and ignores the newcomer.
    fn on_name_clash(&self, their_started: u64, their_incarnation: u64, their_addr: &str) {
        let we_yield = (their_started, their_incarnation) < (self.started_ms, self.incarnation);
        let mut clash = self.name_clash.lock().unwrap_or_else(|p| p.into_inner());
        if we_yield {
            if clash.is_none() {
                let msg = format!(
                    "a node named {} is already in the cluster (at {their_addr}); start this node with a different --name",
                    self.name
                );
                tracing::error!(node = %self.name, "{msg}");
                *clash = Some(msg);
            }
        } else if clash.is_none() {
            tracing::warn!(node = %self.name, peer_addr = %their_addr, "a second node with this node's name tried to join; it is ignored and told to use another --name");
            *clash = Some(String::new());
        }
    }

    // ---- frames ------------------------------------------------------------------------------

    fn mutual(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.mutual)
    }

    fn reject_frame(&self, from: &str, why: &str) {
        let n = {
            let mut st = self.lock();
            st.rejected_frames += 1;
            st.rejected_frames
        };
        // Loud at first, then sampled: a flood must not become a log flood.
        if n <= 10 || n.is_power_of_two() {
            tracing::warn!(node = %self.name, claimed = %from, rejected = n, "cluster frame in the name of {from} dropped: {why}");
        }
    }

    fn on_frame(self: &Arc<Self>, bytes: &[u8]) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let (mac, body) = if self.mutual() {
            if bytes.len() < MAC_BYTES {
                self.reject_frame("?", "it carries no authenticator");
                return;
            }
            let (m, b) = bytes.split_at(MAC_BYTES);
            (Some(m), b)
        } else {
            (None, bytes)
        };
        let frame = match Frame::decode(body) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(node = %self.name, "undecodable cluster frame dropped: {e}");
                return;
            }
        };
        let from = frame.from;
        if from == self.name {
            if let Body::Heartbeat {
                incarnation,
                started_ms,
                advert,
                ..
            } = &frame.body
            {
                if *incarnation != self.incarnation {
                    self.on_name_clash(*started_ms, *incarnation, &advert.cluster_addr);
                }
            }
            return;
        }
        // The sender is the node whose authenticated link the frame came over, never merely
        // what `from` claims: on mutual TLS, the frame's key must be one of that node's links'
        // (derived from a TLS session whose certificate names it); otherwise `from` must at
        // least be a node with an authenticated session here.
        let authentic = {
            let st = self.lock();
            match mac {
                Some(m) => st.peer_keys.get(&from).is_some_and(|keys| {
                    let Ok(m) = blake3::Hash::from_slice(m) else {
                        return false;
                    };
                    // blake3::Hash compares in constant time.
                    keys.iter().any(|k| blake3::keyed_hash(k, body) == m)
                }),
                None => st.sessions.iter().any(|s| s.peer == from),
            }
        };
        if !authentic {
            self.reject_frame(
                &from,
                "it did not come over an authenticated link of that node",
            );
            // Maybe the link is newer than our view of the sessions: look again.
            let me = self.clone();
            self.rt.spawn(async move { me.refresh_links().await });
            return;
        }
        if self.filter.is_partitioned(&from) {
            return;
        }
        if let Some(seq) = frame.ack {
            let ack = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::Ack { seq },
            };
            let _ = self.enqueue(&from, KIND_ACK, &ack);
        }
        match frame.body {
            Body::Ack { seq } => {
                if let Some(q) = self.lock().outbound.get(&from).cloned() {
                    q.lanes().acked(seq);
                    q.wake.notify_one();
                }
            }
            Body::Heartbeat {
                incarnation,
                advert,
                peers,
                ..
            } => self.on_heartbeat(&from, incarnation, advert, peers),
            Body::Leave { incarnation, ack } => {
                let current = match self.lock().members.get_mut(&from) {
                    Some(m) if m.incarnation == incarnation => {
                        m.left = true;
                        true
                    }
                    _ => false,
                };
                if current {
                    tracing::info!(node = %self.name, peer = %from, "peer left the cluster");
                    // Its link stays up until it closes it, so the goodbye ack can get through.
                    self.mark_lost(&from, false);
                }
                let ok = Envelope {
                    kind: KIND_LEAVE.to_string(),
                    flow_id: String::new(),
                    payload: serde_json::Value::Null,
                };
                let frame = Frame {
                    from: self.name.clone(),
                    ack: None,
                    body: Body::Resp {
                        id: ack,
                        result: Ok(ok),
                    },
                };
                // The ack is best effort: the leaving node does not wait long for it.
                let _ = self.enqueue(&from, KIND_LEAVE, &frame);
            }
            Body::Msg { env } => self.deliver(&from, Inbound::Msg(env)),
            Body::Req { id, env } => self.deliver(&from, Inbound::Req(id, env)),
            Body::Resp { id, result } => {
                let pending = {
                    let mut st = self.lock();
                    match st.pending.get(&id) {
                        Some(p) if p.node == from => st.pending.remove(&id),
                        _ => None,
                    }
                };
                if let Some(p) = pending {
                    let _ = p.tx.send(result.map_err(ClusterError::Remote));
                }
            }
            Body::BbEntries { entries } => {
                // The sled batch (and the replica's lock) is blocking work: it runs off the
                // agent's handler and the async threads. Inserts of a grow-only set commute, so
                // two batches racing each other store the same thing.
                let me = self.clone();
                self.rt.spawn_blocking(move || {
                    if let Err(e) = me.bb.insert(entries) {
                        tracing::error!(node = %me.name, peer = %from, "blackboard entries not stored: {e}");
                    }
                });
            }
            Body::BbSummary { flows } => {
                let theirs: HashMap<String, String> = flows.into_iter().collect();
                let ours: HashMap<String, String> = self.bb.summary().into_iter().collect();
                let mut differing: Vec<&String> = theirs
                    .keys()
                    .chain(ours.keys())
                    .filter(|f| theirs.get(*f) != ours.get(*f))
                    // A flow pruned here is not asked back for.
                    .filter(|f| !self.bb.is_pruned(f))
                    .collect();
                differing.sort();
                differing.dedup();
                for flow in differing {
                    let frame = Frame {
                        from: self.name.clone(),
                        ack: None,
                        body: Body::BbIds {
                            flow: flow.clone(),
                            ids: self.bb.ids(flow),
                        },
                    };
                    let _ = self.enqueue(&from, KIND_BB_SYNC, &frame);
                }
            }
            Body::BbIds { flow, ids } => {
                let missing = self.bb.missing_from(&flow, &ids);
                self.send_entries(&from, KIND_BB_SYNC, missing);
                let want = self.bb.unknown(ids);
                if !want.is_empty() {
                    let frame = Frame {
                        from: self.name.clone(),
                        ack: None,
                        body: Body::BbWant { ids: want },
                    };
                    let _ = self.enqueue(&from, KIND_BB_SYNC, &frame);
                }
            }
            Body::BbWant { ids } => {
                let entries = self.bb.get(&ids);
                self.send_entries(&from, KIND_BB_SYNC, entries);
            }
        }
    }

    // ---- blackboard replication ---------------------------------------------------------------

    fn send_entries(self: &Arc<Self>, peer: &str, kind: &str, entries: Vec<BbEntry>) {
        for batch in batches(entries) {
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::BbEntries { entries: batch },
            };
            if let Err(e) = self.enqueue(peer, kind, &frame) {
                tracing::debug!(node = %self.name, %peer, "blackboard entries not sent: {e}");
            }
        }
    }

    /// Start an anti-entropy round with `peer`: it answers with its ids of every flow whose
    /// digest differs, then each side sends what the other lacks.
    fn send_summary(self: &Arc<Self>, peer: &str) {
        let frame = Frame {
            from: self.name.clone(),
            ack: None,
            body: Body::BbSummary {
                flows: self.bb.summary(),
            },
        };
        let _ = self.enqueue(peer, KIND_BB_SYNC, &frame);
    }

    pub(crate) fn broadcast_entry(self: &Arc<Self>, entry: &BbEntry) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let alive: Vec<String> = self
            .lock()
            .members
            .iter()
            .filter(|(_, m)| m.alive)
            .map(|(n, _)| n.clone())
            .collect();
        for peer in alive {
            self.send_entries(&peer, KIND_BB_PUBLISH, vec![entry.clone()]);
        }
    }

    // ---- lifecycle ---------------------------------------------------------------------------

    async fn shutdown(self: &Arc<Self>) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        // Tell alive peers first so they mark us lost now rather than after the deadline.
        let peers: Vec<String> = {
            let st = self.lock();
            st.members
                .iter()
                .filter(|(n, m)| m.alive && st.routes.contains_key(*n))
                .map(|(n, _)| n.clone())
                .collect()
        };
        let mut acks = Vec::new();
        for peer in peers {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            self.lock().pending.insert(
                id,
                Pending {
                    node: peer.clone(),
                    tx,
                },
            );
            let frame = Frame {
                from: self.name.clone(),
                ack: None,
                body: Body::Leave {
                    incarnation: self.incarnation,
                    ack: id,
                },
            };
            if self.enqueue(&peer, KIND_LEAVE, &frame).is_ok() {
                acks.push(rx);
            }
        }
        let deadline = tokio::time::Instant::now() + LEAVE_ACK_WAIT.min(self.heartbeat_deadline);
        for rx in acks {
            let _ = tokio::time::timeout_at(deadline, rx).await;
        }

        self.abort_tasks();
        if let Some(actors) = self.actors.get() {
            // Wait for the listener too, so the address can be bound again right away.
            let children = actors.server.get_cell().get_children();
            let _ = actors
                .server
                .stop_and_wait(Some("shutdown".to_string()), Some(Duration::from_secs(5)))
                .await;
            for child in children {
                let _ = child.wait(Some(Duration::from_secs(2))).await;
            }
            let _ = actors
                .agent
                .stop_and_wait(Some("shutdown".to_string()), Some(Duration::from_secs(5)))
                .await;
        }
        self.release();
        tracing::info!(node = %self.name, "cluster node stopped");
    }

    fn abort_tasks(&self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }

    /// Drop queues (ending writer and dispatcher tasks), fail waiting requests, close the store.
    fn release(&self) {
        let pending: Vec<Pending> = {
            let mut st = self.lock();
            for q in st.outbound.values() {
                q.wake.notify_one();
            }
            st.outbound.clear();
            st.inbound.clear();
            st.routes.clear();
            st.pending.drain().map(|(_, p)| p).collect()
        };
        for p in pending {
            let _ = p.tx.send(Err(ClusterError::Transport(
                "the cluster node is shut down".to_string(),
            )));
        }
        self.bb.close();
    }

    /// The synchronous stop used when the last handle is dropped without `shutdown`.
    fn stop_now(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.abort_tasks();
        if let Some(actors) = self.actors.get() {
            actors.server.stop(Some("dropped".to_string()));
            actors.agent.stop(Some("dropped".to_string()));
        }
        self.release();
    }
}

/// A frame as sent on a mutual-TLS link: its authenticator, then the frame.
fn seal(key: &[u8; 32], frame: Vec<u8>) -> Vec<u8> {
    let mac = blake3::keyed_hash(key, &frame);
    let mut out = Vec::with_capacity(MAC_BYTES + frame.len());
    out.extend_from_slice(mac.as_bytes());
    out.extend_from_slice(&frame);
    out
}

/// The frame key of a TLS session, the same on both ends.
fn frame_key<D>(conn: &tokio_rustls::rustls::ConnectionCommon<D>) -> Option<[u8; 32]> {
    conn.export_keying_material([0u8; 32], FRAME_KEY_LABEL, None)
        .ok()
}

fn peer_cert<D>(
    conn: &tokio_rustls::rustls::ConnectionCommon<D>,
) -> Option<tokio_rustls::rustls::pki_types::CertificateDer<'static>> {
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.clone().into_owned())
}

/// Mutual TLS: accept links; each handshake runs in its own task, bounded by
/// [`TLS_HANDSHAKE_TIMEOUT`], so a client that never finishes one delays nobody else.
async fn accept_loop(core: Weak<Core>, listener: tokio::net::TcpListener) {
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!("cluster listener cannot accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(c) = core.upgrade() else { return };
        if c.closed.load(Ordering::SeqCst) {
            return;
        }
        c.rt.spawn(accept_one(Arc::downgrade(&c), stream, addr));
    }
}

async fn accept_one(core: Weak<Core>, stream: tokio::net::TcpStream, addr: SocketAddr) {
    let Some(acceptor) = core
        .upgrade()
        .and_then(|c| c.tls.as_ref().map(|t| t.acceptor.clone()))
    else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            tracing::info!(from = %addr, "incoming cluster link refused at the tls handshake: {e}");
            return;
        }
        Err(_) => {
            tracing::info!(from = %addr, "incoming cluster link did not finish its tls handshake in time; closed");
            return;
        }
    };
    let Some(c) = core.upgrade() else { return };
    let conn = tls.get_ref().1;
    let (Some(cert), Some(key)) = (peer_cert(conn), frame_key(conn)) else {
        return;
    };
    let label = addr.to_string();
    c.lock().links.insert(
        label.clone(),
        LinkId {
            cert,
            key,
            since: Instant::now(),
        },
    );
    if let Some(server) = c.server() {
        let _ = server.cast(NodeServerMessage::ConnectionOpenedExternal {
            stream: Box::new(TlsLink {
                io: tls,
                peer: label,
                local,
            }),
            is_server: true,
        });
    }
}

/// Mutual TLS: dial `addr` and hand the established link to the node server.
async fn dial_mutual(
    c: &Arc<Core>,
    server: &ActorRef<NodeServerMessage>,
    tls: &ClusterTls,
    addr: SocketAddr,
) -> Result<(), ClientConnectErr> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(ClientConnectErr::Socket)?;
    let _ = stream.set_nodelay(true);
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    // The name is not checked here (see `ClusterTls::mutual`); any valid one will do.
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("quorum-cluster-peer")
        .map_err(|e| ClientConnectErr::Encryption(std::io::Error::other(e.to_string())))?;
    let stream = tls
        .connector
        .connect(name, stream)
        .await
        .map_err(ClientConnectErr::Encryption)?;
    let (Some(cert), Some(key)) = (peer_cert(stream.get_ref().1), frame_key(stream.get_ref().1))
    else {
        return Err(ClientConnectErr::Encryption(std::io::Error::other(
            "the peer presented no certificate",
        )));
    };
    let label = addr.to_string();
    c.lock().links.insert(
        label.clone(),
        LinkId {
            cert,
            key,
            since: Instant::now(),
        },
    );
    server
        .cast(NodeServerMessage::ConnectionOpenedExternal {
            stream: Box::new(TlsLink {
                io: stream,
                peer: label,
                local,
            }),
            is_server: false,
        })
        .map_err(ClientConnectErr::Messaging)
}

async fn dial(core: Weak<Core>, addr: String) {
    let Some(c) = core.upgrade() else { return };
    let Some(server) = c.server().cloned() else {
        return;
    };
    let limit = c.reconnect_interval.max(Duration::from_secs(2));
    let resolved = match tokio::time::timeout(limit, tokio::net::lookup_host(addr.as_str())).await {
        Ok(Ok(mut it)) => it.next(),
        _ => None,
    };
    let Some(resolved) = resolved else {
        c.note_unreachable(&addr, "the address does not resolve");
        return;
    };
    if let Some(t) = c.lock().targets.get_mut(&addr) {
        t.resolved = Some(resolved);
    }
    if resolved == c.local_addr {
        return;
    }
    let connect = async {
        match &c.tls {
            None => ractor_cluster::client_connect(&server, resolved).await,
            Some(tls) if tls.mutual => dial_mutual(&c, &server, tls, resolved).await,
            Some(tls) => {
                let name = match tls.name_for(&addr) {
                    Ok(n) => n,
                    Err(e) => {
                        return Err(ClientConnectErr::Encryption(std::io::Error::other(e)));
                    }
                };
                ractor_cluster::client_connect_enc(&server, resolved, tls.connector.clone(), name)
                    .await
            }
        }
    };
    match tokio::time::timeout(limit, connect).await {
        Ok(Ok(())) => tracing::debug!(node = %c.name, %addr, "dialed"),
        // The peer answered but the TLS handshake failed: as much a refusal as a wrong cookie.
        Ok(Err(ClientConnectErr::Encryption(e))) => {
            if let Some(t) = c.lock().targets.get_mut(&addr) {
                t.handshake_failed = Some(format!("tls: {e}"));
            }
            tracing::debug!(node = %c.name, %addr, "tls handshake failed: {e}");
        }
        Ok(Err(e)) => c.note_unreachable(&addr, &e.to_string()),
        Err(_) => c.note_unreachable(&addr, "connect timed out"),
    }
}

impl Core {
    fn note_unreachable(&self, addr: &str, why: &str) {
        let first = match self.lock().targets.get_mut(addr) {
            Some(t) => !std::mem::replace(&mut t.warned, true),
            None => false,
        };
        if first {
            tracing::warn!(node = %self.name, %addr, "cannot reach cluster peer (will keep retrying): {why}");
        } else {
            tracing::debug!(node = %self.name, %addr, "cannot reach cluster peer: {why}");
        }
    }
}
