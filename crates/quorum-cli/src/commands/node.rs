//! `quorum node`: a long-running node — the review API, the dashboard, cluster links with the
//! control plane — started from the command line, drained on ctrl-c or SIGTERM.

mod dashboard;
mod faults;

use crate::args::NodeArgs;
use crate::client::TOKEN_ENV;
use crate::exit::ExitCode;
use crate::settings;
use crate::setup::{
    backend_configs, data_dir, load_settings, node_name, ready_backends, RuntimeLayer, RUNTIME_KEY,
};
use anyhow::{bail, Context, Result};
use quorum_api::pb;
use quorum_node::{NodeService, NodeSetup};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

fn load_cookie(file: Option<&std::path::Path>) -> Result<String> {
    if let Ok(c) = std::env::var("QUORUM_COOKIE") {
        if !c.trim().is_empty() {
            return Ok(c.trim().to_string());
        }
    }
    match file {
        Some(f) => {
            let c = std::fs::read_to_string(f).with_context(|| format!("cannot read cookie file {}", f.display()))?;
            if c.trim().is_empty() {
                bail!("cookie file {} is empty", f.display());
            }
            Ok(c.trim().to_string())
        }
        None => bail!("no cluster cookie: set QUORUM_COOKIE or pass --cookie-file (the same secret on every node)"),
    }
}

pub async fn node(args: NodeArgs) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    if args.api.is_none() && args.listen.is_none() {
        bail!("nothing to serve: pass --api HOST:PORT for the review API and/or --listen HOST:PORT to join a cluster");
    }
    if !args.voters.is_empty() && args.listen.is_none() {
        bail!("--voters needs --listen: the control plane runs over the cluster links");
    }
    if !args.join.is_empty() && args.listen.is_none() {
        bail!("--join needs --listen: a cluster node must be reachable by its peers");
    }
    let api_addr: Option<SocketAddr> = match &args.api {
        Some(a) => Some(a.parse().with_context(|| {
            format!("invalid --api address {a:?} (expected host:port, e.g. 127.0.0.1:7400)")
        })?),
        None => None,
    };
    if let Some(a) = &api_addr {
        if !is_loopback(a) && args.api_tls_cert.is_none() && !args.insecure {
            bail!("refusing to serve the API on non-loopback {a} without TLS; pass --api-tls-cert/--api-tls-key, put it behind a TLS proxy, or pass --insecure");
        }
    }
    let http_addr = dashboard::http_addr(args.http.as_deref(), args.insecure)?;
    let listen: Option<SocketAddr> = match &args.listen {
        Some(l) => Some(
            l.parse()
                .with_context(|| format!("invalid --listen address {l:?} (expected host:port)"))?,
        ),
        None => None,
    };
    if let Some(l) = &listen {
        if !is_loopback(l) && args.tls_cert.is_none() && !args.insecure {
            bail!("refusing to listen for peers on non-loopback {l} without TLS; pass --tls-cert/--tls-key (or --insecure on a trusted network)");
        }
    }
    let token = match api_addr {
        Some(_) => Some(
            quorum_api::load_token(TOKEN_ENV, args.token_file.as_deref())
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        ),
        None => None,
    };
    let cookie = match listen {
        Some(_) => Some(load_cookie(args.cookie_file.as_deref())?),
        None => None,
    };
    let configs = backend_configs(&args.backend, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend KIND=URL or add [[backends]] to the config");
    }
    let name = args.name.clone().unwrap_or_else(|| node_name(&settings));
    let model = args
        .backend
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let backends = ready_backends(
        &configs,
        &model,
        &settings.models,
        settings.sensitive,
        &name,
    )
    .await?;
    let data = data_dir(&args.backend.common, &settings);
    // The runtime layer of the cards outlives the process: restored here, saved periodically.
    let node_store = data
        .open_node()
        .map_err(|e| tracing::warn!(error = %e, "node store unavailable; runtime model stats not persisted"))
        .ok()
        .map(Arc::new);
    if let Some(ns) = &node_store {
        if let Ok(Some(learned)) = ns.get::<RuntimeLayer>(RUNTIME_KEY) {
            backends.apply_runtime(&learned);
        }
        // Saved every 30 s too, so a kill -9 loses at most that much learning.
        let ns = ns.clone();
        let b = backends.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = ns.put(RUNTIME_KEY, &b.runtime_snapshot()) {
                    tracing::warn!(error = %e, "cannot persist runtime model stats");
                }
            }
        });
    }
    let capacity: usize = if settings.max_concurrent > 0 {
        settings.max_concurrent
    } else {
        backends
            .backends
            .iter()
            .map(|b| b.config.max_concurrent)
            .sum::<usize>()
            .max(1)
    };
    let packs = Arc::new(quorum_node::PackRegistry::default());
    // Whether the data dir takes writes: reviews report to it, a probe clears it.
    let storage = Arc::new(quorum_runtime::StorageHealth::default());
    quorum_node::storage::watch(data.root().to_path_buf(), storage.clone());

    // The cluster first: reviews submitted to this node spread over its peers.
    let mut cluster = None;
    let mut agent = None;
    let mut control: Option<Arc<quorum_node::NodeControl>> = None;
    let mut line = format!("quorum node {name}:");
    if let (Some(listen), Some(cookie)) = (listen, cookie) {
        let mut cfg = quorum_cluster::ClusterConfig::new(name.clone(), listen, cookie);
        cfg.join = args.join.clone();
        cfg.heartbeat_interval = std::time::Duration::from_millis(args.heartbeat_ms.max(10));
        cfg.heartbeat_deadline =
            std::time::Duration::from_millis(args.deadline_ms.max(args.heartbeat_ms * 2));
        cfg.data_dir = Some(data.root().join("cluster"));
        cfg.advert = quorum_cluster::NodeAdvert {
            name: name.clone(),
            cluster_addr: args.advertise.clone().unwrap_or_default(),
            api_addr: args.api.clone(),
            models: backends.all_models(),
            capacity: capacity as u32,
            in_flight: 0,
            cards: serde_json::to_value(backends.cards()).unwrap_or_default(),
            ..Default::default()
        };
        let mut peer_backends = backends.clone();
        peer_backends.allow_peers_remote_backends = settings.allow_peers_remote_backends;
        let a = quorum_node::NodeAgent::with_capacity(
            &name,
            peer_backends,
            packs.clone(),
            capacity as u32,
        );
        a.set_storage(storage.clone());
        a.set_data_dir(&data);
        // The control plane before the cluster, so Raft requests are answered from the start.
        let transport = quorum_control::ClusterTransport::new();
        if !args.voters.is_empty() && args.voters.len() < 3 {
            eprintln!(
                "quorum node {name}: takeover not available: --voters names {} node(s), 3 or 5 are needed; running without a control plane",
                args.voters.len()
            );
        } else if !args.voters.is_empty() {
            let mut cc = quorum_control::ControlConfig::new(
                name.clone(),
                data.root().join("control"),
                args.voters.clone(),
            );
            cc.heartbeat = cfg.heartbeat_interval;
            // An openraft follower stands for election only after the leader's lease (the
            // election timeout's maximum) plus a random election timeout: with these bounds a new
            // leader is in place by the time membership declares the old one lost (the
            // deadline), so a conductor that was also the Raft leader is replaced as fast as
            // any other.
            let (min, max) = election_timeouts(cfg.heartbeat_interval, cfg.heartbeat_deadline);
            cc.election_timeout_min = min;
            cc.election_timeout_max = max;
            cc.rpc_timeout = cfg.heartbeat_deadline;
            let plane = quorum_control::ControlPlane::start(cc, Arc::new(transport.clone()))
                .await
                .map_err(|e| anyhow::anyhow!("cannot start the control plane: {e}"))?;
            let c = quorum_node::NodeControl::new(plane, &name, data.clone());
            if args.voter_grace_secs > 0 {
                c.set_voter_grace(std::time::Duration::from_secs(args.voter_grace_secs));
            }
            a.set_control(c.clone());
            control = Some(c);
        }
        let control_tick = cfg.heartbeat_interval;
        let started = match (&args.tls_cert, &args.tls_key, &args.tls_ca) {
            (Some(cert), Some(key), Some(ca)) => {
                let tls = quorum_cluster::ClusterTls::mutual(cert, key, ca)
                    .map_err(|e| anyhow::anyhow!("invalid tls setup: {e}"))?;
                quorum_cluster::Cluster::start_tls(cfg, a.clone(), tls).await
            }
            _ => quorum_cluster::Cluster::start(cfg, a.clone()).await,
        }
        .map_err(|e| anyhow::anyhow!("cannot start the cluster node: {e}"))?;
        a.attach(started.clone());
        transport.bind(started.clone());
        if let Ok(path) = std::env::var("QUORUM_FAULTS") {
            tokio::spawn(faults::fault_file_loop(started.clone(), path.into()));
        }
        if let Some(c) = &control {
            c.attach(started.clone(), control_tick);
            line.push_str(&format!(
                " control plane with voters {}",
                args.voters.join(",")
            ));
        }
        // Share what this node learned about its models: re-advertise the cards as they change.
        {
            let c = started.clone();
            let b = backends.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(15));
                loop {
                    tick.tick().await;
                    let mut advert = match c.members().into_iter().find(|m| m.is_self) {
                        Some(me) => me.advert,
                        None => continue,
                    };
                    let cards = serde_json::to_value(b.cards()).unwrap_or_default();
                    if advert.cards != cards {
                        advert.cards = cards;
                        c.set_advert(advert);
                    }
                }
            });
        }
        line.push_str(&format!(" cluster on {}", started.local_addr()));
        cluster = Some(started);
        agent = Some(a);
    }

    let board: Arc<dyn quorum_runtime::board::TeamBoard> = match &cluster {
        Some(c) => Arc::new(quorum_node::ClusterBoard(c.blackboard())),
        None => Arc::new(quorum_runtime::board::MemoryBoard::default()),
    };
    let deadline = std::time::Duration::from_millis(args.deadline_ms.max(args.heartbeat_ms * 2));
    let remote: Option<Arc<dyn quorum_runtime::remote::RemoteExecutor>> =
        cluster.clone().map(|c| {
            let mut executor = quorum_node::ClusterExecutor::new(c, deadline);
            // A review this node takes over also adopts what its own worker runs for it.
            if let Some(a) = &agent {
                executor = executor.with_agent(a.clone());
            }
            Arc::new(executor) as Arc<dyn quorum_runtime::remote::RemoteExecutor>
        });

    let mut server = None;
    let mut stop_tx = None;
    let mut service = None;
    if let (Some(api_addr), Some(token)) = (api_addr, token) {
        let listener = tokio::net::TcpListener::bind(api_addr)
            .await
            .with_context(|| format!("cannot listen on {api_addr}"))?;
        let bound = listener
            .local_addr()
            .context("cannot read the bound address")?;
        let api_url = api_url_to_advertise(
            if args.api_tls_cert.is_some() {
                "https"
            } else {
                "http"
            },
            bound,
            args.advertise.as_deref(),
            args.api_url.as_deref(),
        );
        let svc = Arc::new(NodeService::new(NodeSetup {
            name: name.clone(),
            data: data.clone(),
            backends: backends.clone(),
            personas_dir: settings::data_dir(&settings.personas_dir, "personas")?,
            flows_dir: settings::data_dir(&settings.flows_dir, "flows")?,
            default_flow: settings.flow.clone(),
            max_concurrent: Some(capacity),
            advertised_addr: api_url.clone().unwrap_or_else(|| format!("http://{bound}")),
            board: board.clone(),
            remote: remote.clone(),
            packs: packs.clone(),
            analyzers: settings.analyzers.setup(data.root())?,
            // The node keeps the insights of the reviews it conducts in its own database.
            memory: node_store
                .clone()
                .filter(|_| settings.memory.enabled)
                .map(|store| quorum_node::NodeMemory {
                    store,
                    k: settings.memory.k,
                    base_rate: settings.memory.base_rate,
                }),
            storage: storage.clone(),
            results: open_results(&data, &settings),
        }));
        if let Some(c) = &control {
            svc.set_control(c.clone());
        }
        // Fix attempts for `quorum fix --cluster` runs elsewhere, with this node's models and
        // its own test policy.
        let policy = quorum_node::fixes::test_policy(&name, args.fix_tests).await;
        if let quorum_fix::remote::TestPolicy::Refused(why) = &policy {
            if args.fix_tests {
                eprintln!("quorum: warning: {why}; fix attempts here run no tests");
            }
        }
        svc.set_fix_worker(Arc::new(quorum_node::fixes::FixWorker::new(
            &name,
            backends.clone(),
            policy,
            capacity,
            data.root().join("fix-attempts"),
        )));
        if let Some(c) = cluster.clone() {
            let suspect_after = deadline.as_millis() as u64 / 2;
            let view = c.clone();
            let plane = control.as_ref().map(|c| c.plane().clone());
            let node_control = control.clone();
            svc.set_members(Box::new(move || {
                let raft = plane.as_ref().map(|p| p.status());
                let replicated = plane
                    .as_ref()
                    .map(|p| p.replication_matched())
                    .unwrap_or_default();
                view.members()
                    .into_iter()
                    .map(|m| (replicated.get(&m.name).copied().unwrap_or(0), m))
                    .map(|(replicated, m)| pb::NodeStatus {
                        state: if !m.alive {
                            "lost"
                        } else if m.advert.draining {
                            "draining"
                        } else if !m.is_self && m.last_seen_ms_ago > suspect_after {
                            "suspect"
                        } else {
                            "up"
                        }
                        .into(),
                        voter: raft.as_ref().is_some_and(|r| r.voters.contains(&m.name)),
                        leader: raft
                            .as_ref()
                            .is_some_and(|r| r.leader.as_deref() == Some(m.name.as_str())),
                        conducting: m.advert.conducting,
                        storage: m.advert.storage.unwrap_or_default(),
                        api_url: m.advert.api_url.unwrap_or_default(),
                        name: m.name,
                        addr: m.advert.cluster_addr,
                        alive: m.alive,
                        models: m.advert.models,
                        capacity: m.advert.capacity,
                        in_flight: m.advert.in_flight,
                        last_seen_ms: m.last_seen_ms_ago,
                        control: node_control
                            .as_ref()
                            .filter(|_| m.is_self)
                            .map(|c| c.describe())
                            .unwrap_or_default(),
                        replicated,
                    })
                    .collect()
            }));
            // Clients learn where else to follow a review from the cluster's status.
            let mut advert = c.advert();
            advert.api_url = api_url.clone();
            c.set_advert(advert);
            // Peers learn which reviews this node conducts from its advert.
            let svc2 = svc.clone();
            let agent2 = agent.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
                loop {
                    tick.tick().await;
                    if let Some(a) = &agent2 {
                        a.advertise_storage();
                    }
                    let ids = svc2.running_ids();
                    let mut advert = c.advert();
                    if advert.conducting != ids {
                        advert.conducting = ids;
                        c.set_advert(advert);
                    }
                }
            });
        }
        if let Some(addr) = http_addr {
            let url = dashboard::start(addr, svc.clone(), &token).await?;
            line.push_str(&format!(" dashboard on {url}"));
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let api_tls = match (&args.api_tls_cert, &args.api_tls_key) {
            (Some(cert), Some(key)) => Some(
                quorum_api::ServerTls::from_pem_files(cert, key)
                    .map_err(|e| anyhow::anyhow!("{e}"))?,
            ),
            _ => None,
        };
        // Pinged at the cluster's own cadence: a watcher that went silent is let go about
        // when a silent peer would be declared lost.
        let options = quorum_api::ServeOptions {
            tls: api_tls,
            keepalive: quorum_api::Keepalive::for_deadline(deadline),
        };
        server = Some(tokio::spawn(quorum_api::serve_with_options(
            listener,
            svc.clone(),
            token,
            options,
            async {
                let _ = rx.await;
            },
        )));
        stop_tx = Some(tx);
        // Reviews this node accepted and was running when it went down go on now.
        let resumed = svc.resume_interrupted();
        if !resumed.is_empty() {
            eprintln!(
                "quorum node {name}: resuming {} interrupted review(s): {}",
                resumed.len(),
                resumed.join(", ")
            );
        }
        service = Some(svc);
        let scheme = if args.api_tls_cert.is_some() {
            "https"
        } else {
            "http"
        };
        line.push_str(&format!(" api on {scheme}://{bound}"));
    }
    println!("{line}");
    let _ = std::io::stdout().flush();

    // A node that finds its name already taken leaves at once, saying so (exit 2).
    let clash = async {
        let Some(c) = cluster.clone() else {
            return std::future::pending::<String>().await;
        };
        loop {
            if let Some(msg) = c.name_clash() {
                return msg;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let refused = tokio::select! {
        _ = shutdown_signal() => None,
        msg = clash => Some(msg),
    };
    if let Some(msg) = refused {
        if let Some(c) = cluster {
            c.shutdown().await;
        }
        bail!("{msg}");
    }
    eprintln!("quorum node {name}: draining");
    if let Some(a) = &agent {
        // Finish the attempts we are running for peers (bounded), take no new ones.
        a.drain();
        for _ in 0..1200 {
            if a.in_flight() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    if let Some(svc) = &service {
        let running = svc.running();
        if running > 0 {
            eprintln!("quorum node {name}: {running} review(s) conducted here are interrupted; continue them with `quorum resume`");
        }
    }
    if let Some(tx) = stop_tx {
        let _ = tx.send(());
    }
    if let Some(s) = server {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), s).await;
    }
    if let Some(c) = cluster {
        c.shutdown().await;
    }
    if let Some(ns) = &node_store {
        if let Err(e) = ns.put(RUNTIME_KEY, &backends.runtime_snapshot()) {
            tracing::warn!(error = %e, "cannot persist runtime model stats");
        }
    }
    Ok(ExitCode::Clean)
}

/// The control plane's election timeout bounds for a heartbeat interval and a membership
/// deadline: lease + timeout (between `deadline/3 + deadline/2` and `deadline`) ends no later
/// than the deadline, and never within two heartbeats.
fn election_timeouts(
    heartbeat: std::time::Duration,
    deadline: std::time::Duration,
) -> (std::time::Duration, std::time::Duration) {
    let min = (deadline / 3).max(heartbeat * 2);
    let max = (deadline / 2).max(min + heartbeat);
    (min, max)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The URL a client can reach this node's API at: the one its operator gave (`--api-url`),
/// else the bound address when it names a host, else the host peers dial (`--advertise`) with
/// the bound port; `None` when none does (a wildcard bind with no advertised host), rather
/// than a URL nobody can dial.
fn api_url_to_advertise(
    scheme: &str,
    bound: SocketAddr,
    advertise: Option<&str>,
    given: Option<&str>,
) -> Option<String> {
    if let Some(url) = given {
        return Some(url.to_string());
    }
    if !bound.ip().is_unspecified() {
        return Some(format!("{scheme}://{bound}"));
    }
    let host = advertise?.rsplit_once(':').map(|(h, _)| h)?;
    (!host.is_empty()).then(|| format!("{scheme}://{host}:{}", bound.port()))
}

/// The node's result cache, held for its life; a node that cannot open it says so once and
/// runs every review without one.
fn open_results(
    data: &quorum_store::DataDir,
    settings: &crate::settings::Settings,
) -> Option<Arc<quorum_store::ResultCache>> {
    if !settings.cache.enabled {
        return None;
    }
    match data.open_results(settings.cache.max_entries) {
        Ok(cache) => Some(Arc::new(cache)),
        Err(e) => {
            eprintln!("quorum: warning: the result cache is not available ({e}); reviews on this node neither reuse nor record results");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{api_url_to_advertise, election_timeouts};
    use std::net::SocketAddr;
    use std::time::Duration;

    #[test]
    fn the_api_url_names_a_host_a_client_can_dial() {
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        assert_eq!(
            api_url_to_advertise("http", at("127.0.0.1:7400"), None, None).as_deref(),
            Some("http://127.0.0.1:7400")
        );
        assert_eq!(
            api_url_to_advertise("https", at("0.0.0.0:7400"), Some("10.0.0.2:7401"), None)
                .as_deref(),
            Some("https://10.0.0.2:7400")
        );
        assert_eq!(
            api_url_to_advertise("http", at("0.0.0.0:7400"), None, None),
            None
        );
        // A proxy in front of a loopback API: the URL its operator gave wins.
        assert_eq!(
            api_url_to_advertise(
                "http",
                at("127.0.0.1:7400"),
                Some("10.0.0.2:7401"),
                Some("https://ws2:8443")
            )
            .as_deref(),
            Some("https://ws2:8443")
        );
    }

    #[test]
    fn a_new_raft_leader_stands_before_membership_declares_the_old_one_lost() {
        for (hb, deadline) in [(500, 3000), (100, 1000), (1000, 3000), (50, 200)] {
            let (hb, deadline) = (Duration::from_millis(hb), Duration::from_millis(deadline));
            let (min, max) = election_timeouts(hb, deadline);
            assert!(min >= hb * 2, "{min:?} within two heartbeats of {hb:?}");
            assert!(max > min);
            // openraft elects after lease (= max) + a timeout in [min, max].
            if hb * 6 <= deadline {
                assert!(
                    max * 2 <= deadline,
                    "{max:?} x2 past the deadline {deadline:?}"
                );
            }
        }
    }
}
