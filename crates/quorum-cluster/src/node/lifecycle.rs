//! Starting and stopping a node. Start: open the blackboard replica, bind (on mutual TLS this
//! crate's own listener, with ractor_cluster's behind a loopback decoy), start the node server
//! and the agent, subscribe to session events, and spawn the tick, dial, session-event and
//! accept tasks. Stop: say goodbye to the alive members and wait briefly for their
//! acknowledgements, stop the tasks, the node server and the agent, fail what still waits, and
//! close the replica — or, when the last handle is dropped without `shutdown`, all of it at once
//! without the goodbye.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ractor::Actor;
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{IncomingEncryptionMode, NodeServer, NodeServerMessage};
use tokio::sync::{broadcast, mpsc, oneshot, Notify};

use super::binding::AGENT_PREFIX;
use super::dial::{accept_loop, dial_loop};
use super::frames::Agent;
use super::membership::{normalize_advert, tick_loop};
use super::sessions::{link_loop, Subscription};
use super::state::{Actors, Core, Pending, State};
use crate::blackboard::BbStore;
use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::filter::{TransportFilter, KIND_LEAVE};
use crate::message::MessageHandler;
use crate::tls::ClusterTls;
use crate::wire::{Body, Frame};

/// How long `shutdown` waits for peers to acknowledge the leave notice.
const LEAVE_ACK_WAIT: Duration = Duration::from_secs(1);

/// Start a node (see [`Cluster::start`](super::Cluster::start)): everything but the handle.
pub(super) async fn start(
    cfg: ClusterConfig,
    handler: Arc<dyn MessageHandler>,
    tls: Option<ClusterTls>,
) -> Result<Arc<Core>, ClusterError> {
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

    Ok(core)
}

impl Core {
    pub(super) async fn shutdown(self: &Arc<Self>) {
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
    pub(super) fn stop_now(&self) {
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
