//! `quorum node` and `quorum review --cluster`: glue between the CLI, the node service and the
//! API client.

use crate::commands::{
    backend_configs, data_dir, load_settings, node_name, print_outcome, ready_backends,
    write_reports,
};
use crate::exit::{incomplete, ExitCode};
use crate::settings;
use crate::{NodeArgs, ReviewArgs};
use anyhow::{bail, Context, Result};
use quorum_api::{pb, ApiClient};
use quorum_core::pack::ContextPack;
use quorum_core::report::Report;
use quorum_node::{NodeService, NodeSetup};
use quorum_runtime::Progress;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::Arc;

const TOKEN_ENV: &str = "QUORUM_API_TOKEN";

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
    let http_addr = crate::dashboard::http_addr(args.http.as_deref(), args.insecure)?;
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
        if let Ok(Some(learned)) =
            ns.get::<crate::commands::RuntimeLayer>(crate::commands::RUNTIME_KEY)
        {
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
                if let Err(e) = ns.put(crate::commands::RUNTIME_KEY, &b.runtime_snapshot()) {
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
            tokio::spawn(fault_file_loop(started.clone(), path.into()));
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
            Arc::new(quorum_node::ClusterExecutor::new(c, deadline))
                as Arc<dyn quorum_runtime::remote::RemoteExecutor>
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
        let svc = Arc::new(NodeService::new(NodeSetup {
            name: name.clone(),
            data: data.clone(),
            backends: backends.clone(),
            personas_dir: settings::data_dir(&settings.personas_dir, "personas")?,
            flows_dir: settings::data_dir(&settings.flows_dir, "flows")?,
            default_flow: settings.flow.clone(),
            max_concurrent: Some(capacity),
            advertised_addr: format!("http://{bound}"),
            board: board.clone(),
            remote: remote.clone(),
            packs: packs.clone(),
            analyzers: settings.analyzers.setup()?,
            // The node keeps the insights of the reviews it conducts in its own database.
            memory: node_store
                .clone()
                .filter(|_| settings.memory.enabled)
                .map(|store| quorum_node::NodeMemory {
                    store,
                    k: settings.memory.k,
                    base_rate: settings.memory.base_rate,
                }),
        }));
        if let Some(c) = &control {
            svc.set_control(c.clone());
        }
        if let Some(c) = cluster.clone() {
            let suspect_after = deadline.as_millis() as u64 / 2;
            let view = c.clone();
            let plane = control.as_ref().map(|c| c.plane().clone());
            svc.set_members(Box::new(move || {
                let raft = plane.as_ref().map(|p| p.status());
                view.members()
                    .into_iter()
                    .map(|m| pb::NodeStatus {
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
                        name: m.name,
                        addr: m.advert.cluster_addr,
                        alive: m.alive,
                        models: m.advert.models,
                        capacity: m.advert.capacity,
                        in_flight: m.advert.in_flight,
                        last_seen_ms: m.last_seen_ms_ago,
                    })
                    .collect()
            }));
            // Peers learn which reviews this node conducts from its advert.
            let svc2 = svc.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
                loop {
                    tick.tick().await;
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
            let url = crate::dashboard::start(addr, svc.clone(), &token).await?;
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
        server = Some(tokio::spawn(quorum_api::serve_with_tls(
            listener,
            svc.clone(),
            token,
            api_tls,
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
        if let Err(e) = ns.put(crate::commands::RUNTIME_KEY, &backends.runtime_snapshot()) {
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

/// Fault injection for tests and chaos drills (`QUORUM_FAULTS=FILE`): every 100 ms the file is
/// read and each `partition NAME` line cuts this node off from that peer through the cluster's
/// transport filter (frames both ways are dropped), and each `drop KIND` line drops this node's
/// outgoing frames of that kind (`attempt_result`: a worker whose results never arrive); a line
/// removed undoes it. Without the variable nothing of this runs.
async fn fault_file_loop(cluster: quorum_cluster::Cluster, path: std::path::PathBuf) {
    use std::collections::BTreeSet;
    let (mut cut, mut dropped) = (BTreeSet::<String>::new(), BTreeSet::<String>::new());
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tick.tick().await;
        let text = tokio::fs::read_to_string(&path).await.unwrap_or_default();
        let rule = |prefix: &str| -> BTreeSet<String> {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix(prefix))
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        };
        let (want_cut, want_dropped) = (rule("partition "), rule("drop "));
        for n in want_cut.difference(&cut) {
            tracing::warn!(peer = %n, "fault injection: partitioned from peer");
            cluster.filter().partition(n);
        }
        for n in cut.difference(&want_cut) {
            tracing::warn!(peer = %n, "fault injection: partition healed");
            cluster.filter().heal(n);
        }
        for k in want_dropped.difference(&dropped) {
            tracing::warn!(kind = %k, "fault injection: dropping outgoing frames");
            cluster.filter().drop_kinds(&[k.as_str()]);
        }
        for k in dropped.difference(&want_dropped) {
            tracing::warn!(kind = %k, "fault injection: sending frames again");
            cluster.filter().allow_kinds(&[k.as_str()]);
        }
        (cut, dropped) = (want_cut, want_dropped);
    }
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

/// How long a follower keeps trying to find its review again after losing the stream (the
/// node restarting and resuming it, or another node answering for it).
const FOLLOW_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// The CA given with the global `--ca`, for `https://` cluster URLs.
static API_CA: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

pub fn set_api_ca(ca: Option<std::path::PathBuf>) {
    let _ = API_CA.set(ca);
}

/// Connect to the first node of `urls` that answers.
pub(crate) async fn connect_any(urls: &[String], token: &str) -> Result<(ApiClient, String)> {
    let ca = match API_CA.get().and_then(|c| c.as_deref()) {
        Some(path) => Some(quorum_api::read_ca(path).map_err(|e| anyhow::anyhow!("--ca: {e}"))?),
        None => None,
    };
    let mut last = String::new();
    for url in urls {
        match ApiClient::connect_with_ca(url, token, ca.as_deref()).await {
            Ok(c) => return Ok((c, url.clone())),
            Err(e) => last = format!("{url}: {e}"),
        }
    }
    Err(incomplete(format!("cannot reach the cluster ({last})")))
}

/// Follow `flow_id` to its end, reconnecting to any of `urls` when the stream is lost. Returns
/// the client of the node that holds the finished review. With `unknown_is_error`, a node
/// that has never heard of the review ends the follow at once (`flows show --watch`); a
/// review just submitted is followed through such answers instead.
pub(crate) async fn follow(
    urls: &[String],
    token: &str,
    mut client: ApiClient,
    flow_id: &str,
    quiet: bool,
    unknown_is_error: bool,
) -> Result<ApiClient> {
    use tokio_stream::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !quiet && std::io::stderr().is_terminal();
    let renderer = tokio::spawn(crate::progress::render(rx, draw));
    let mut lost_since: Option<std::time::Instant> = None;
    let mut last_error = String::new();
    // Each reconnect starts one URL further on: after a takeover the node that answered first
    // may not be the one that conducts the review now.
    let mut turn = 0usize;
    'follow: loop {
        match client.watch(flow_id).await {
            Ok(mut events) => {
                lost_since = None;
                while let Some(ev) = events.next().await {
                    match ev {
                        Ok(ev) if ev.kind == quorum_api::FINISHED_KIND => break 'follow,
                        Ok(ev) => {
                            if let Ok(p) = serde_json::from_str::<Progress>(&ev.json) {
                                let _ = tx.send(p);
                            }
                        }
                        Err(e) => {
                            last_error = e.to_string();
                            break;
                        }
                    }
                }
                if last_error.is_empty() {
                    last_error = "the event stream ended early".into();
                }
            }
            Err(quorum_api::ApiError::NotFound(m)) if unknown_is_error => {
                drop(tx);
                renderer.abort();
                bail!("no review {flow_id} on {}: {m}", urls.join(","));
            }
            Err(e) => last_error = e.to_string(),
        }
        let since = *lost_since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > FOLLOW_WINDOW {
            drop(tx);
            renderer.abort();
            return Err(incomplete(format!(
                "lost review {flow_id} ({last_error}) and no node of {} has it back after {} s; fetch it later with `quorum flows show`",
                urls.join(","),
                FOLLOW_WINDOW.as_secs()
            )));
        }
        if !quiet {
            eprintln!("quorum: lost the review's event stream ({last_error}); reconnecting");
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        turn += 1;
        let mut rotated = urls.to_vec();
        if !rotated.is_empty() {
            rotated.rotate_left(turn % urls.len());
        }
        if let Ok((c, _)) = connect_any(&rotated, token).await {
            client = c;
        }
    }
    drop(tx);
    let _ = renderer.await;
    Ok(client)
}

/// A snapshot's files as a submission carries them.
pub(crate) fn source_files(pack: &ContextPack) -> Vec<pb::SourceFile> {
    pack.files
        .values()
        .map(|f| pb::SourceFile {
            path: f.path.clone(),
            content: f.content.as_bytes().to_vec(),
        })
        .collect()
}

fn api_token(token_file: Option<&std::path::Path>) -> Result<String> {
    quorum_api::load_token(TOKEN_ENV, token_file).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `quorum flows cancel FLOW_ID --cluster URL`.
pub async fn cancel_remote(
    flow_id: &str,
    urls: &[String],
    token_file: Option<&std::path::Path>,
) -> Result<ExitCode> {
    let token = api_token(token_file)?;
    let (client, url) = connect_any(urls, &token).await?;
    let cancelled = client
        .cancel(flow_id)
        .await
        .map_err(|e| anyhow::anyhow!("cannot cancel review {flow_id} on {url}: {e}"))?;
    if cancelled {
        println!("review {flow_id} cancelled on {url}; its report says so");
    } else {
        println!("review {flow_id} had already finished on {url}; nothing to cancel");
    }
    Ok(ExitCode::Clean)
}

/// `quorum cluster status --cluster URL [--format json]`.
pub async fn cluster_status(
    urls: &[String],
    format: &str,
    token_file: Option<&std::path::Path>,
) -> Result<ExitCode> {
    let token = api_token(token_file)?;
    let (client, url) = connect_any(urls, &token).await?;
    let mut nodes = client
        .cluster_status()
        .await
        .map_err(|e| incomplete(format!("cannot read the cluster status from {url}: {e}")))?;
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    if format == "json" {
        let out: Vec<serde_json::Value> = nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "name": n.name,
                    "state": if n.state.is_empty() { if n.alive { "up" } else { "lost" } } else { n.state.as_str() },
                    "voter": n.voter,
                    "leader": n.leader,
                    "capacity": n.capacity,
                    "in_flight": n.in_flight,
                    "models": n.models,
                    "conducting": n.conducting,
                    "addr": n.addr,
                    "last_seen_ms": n.last_seen_ms,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "nodes": out }))
                .context("cannot encode the status")?
        );
        return Ok(ExitCode::Clean);
    }
    println!(
        "{:<16} {:<9} {:<10} {:>8} {:>9}  {:<28} conducting",
        "node", "state", "role", "capacity", "in flight", "models"
    );
    for n in &nodes {
        let role = match (n.voter, n.leader) {
            (_, true) => "leader",
            (true, false) => "voter",
            _ => "member",
        };
        println!(
            "{:<16} {:<9} {:<10} {:>8} {:>9}  {:<28} {}",
            n.name,
            if n.state.is_empty() {
                "up"
            } else {
                n.state.as_str()
            },
            role,
            n.capacity,
            n.in_flight,
            n.models.join(","),
            if n.conducting.is_empty() {
                "-".to_string()
            } else {
                n.conducting.join(",")
            }
        );
    }
    if !nodes.iter().any(|n| n.voter) {
        println!("\nno consensus group (takeover not available; start 3 or 5 nodes with the same --voters): a review survives its conducting node only by `quorum resume` (or a node restart) on that node");
    }
    Ok(ExitCode::Clean)
}

/// `quorum review PATH --cluster URL[,URL...]`: snapshot locally (the same exclusions as a
/// local review), upload, follow (across reconnects), and write the same reports with the same
/// exit codes.
pub async fn review_remote(args: ReviewArgs, urls: &[String]) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    let fail_on_text = args
        .fail_on
        .clone()
        .unwrap_or_else(|| settings.fail_on.clone());
    let fail_on = settings::parse_fail_on(&fail_on_text)?;
    let formats = args
        .format
        .clone()
        .unwrap_or_else(|| settings.formats.clone());
    settings::check_formats(&formats, "--format")?;
    let verification = quorum_core::flows::flow::Overrides::parse(
        args.verifiers,
        args.verify_threshold.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Checked here so a bad value is refused before the upload; the node checks the flow.
    let coverage = settings.coverage_mode(args.coverage.as_deref())?;
    let target = &args.path;
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory to review",
            target.display()
        );
    }
    let root = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    // The same snapshot and scope as a local review: the directory, or with --diff the head
    // tree and the change; the repository's excludes, guidance and profile. The scope travels
    // with the pack; the node checks it.
    let (pack, scope) = crate::target::snapshot(
        &root,
        &settings,
        args.diff.as_deref(),
        args.profile.as_deref(),
    )?;
    let client_scope = quorum_core::scope::ClientScope::of(&scope);
    let scope_json = (!client_scope.is_default())
        .then(|| serde_json::to_string(&client_scope))
        .transpose()
        .context("cannot encode the review's scope")?;
    let flow_yaml = match &args.flow {
        Some(f) if std::path::Path::new(f).is_file() => {
            Some(std::fs::read_to_string(f).with_context(|| format!("cannot read flow {f}"))?)
        }
        _ => None,
    };
    let (spec, prior) = review_inputs(
        args.spec.as_deref(),
        args.prior.as_deref(),
        args.dispositions.as_deref(),
        &root,
        &pack,
    )?;
    let req = pb::SubmitReviewRequest {
        target_name: root.display().to_string(),
        head_sha: pack.head_sha.clone(),
        files: source_files(&pack),
        spec,
        prior,
        scope_json,
        flow: args
            .flow
            .clone()
            .filter(|_| flow_yaml.is_none())
            .unwrap_or_default(),
        flow_yaml,
        options: Some(pb::ReviewOptions {
            model: args.backend.model.clone().unwrap_or_default(),
            fail_on: fail_on_text,
            max_concurrent: args.max_concurrent.unwrap_or(0) as u32,
            sensitive: args.sensitive || settings.sensitive,
            verifier_model: args.verifier_model.clone().unwrap_or_default(),
            no_analyzers: args.no_analyzers,
            no_memory: args.no_memory,
            verifiers: verification.verifiers.unwrap_or(0) as u32,
            verify_threshold: verification
                .verify_threshold
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            coverage: coverage.map(|m| m.as_str().to_string()).unwrap_or_default(),
        }),
    };
    let token = api_token(args.token_file.as_deref())?;
    let (client, url) = connect_any(urls, &token).await?;
    let flow_id = client
        .submit(req)
        .await
        .map_err(|e| anyhow::anyhow!("the cluster refused the review: {e}"))?;
    if !args.quiet {
        eprintln!(
            "quorum: review {flow_id} submitted to {url} ({} files)",
            pack.len()
        );
    }
    let client = follow(urls, &token, client, &flow_id, args.quiet, false).await?;
    let r = client
        .report(&flow_id)
        .await
        .map_err(|e| incomplete(format!("cannot fetch the report of {flow_id}: {e}")))?;
    let report: Report =
        serde_json::from_str(&r.report_json).context("the cluster sent an unreadable report")?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("quorum-out").join(&flow_id));
    write_reports(&report, &out_dir, &formats)?;
    print_outcome(&report, &out_dir, &formats);
    // The same gate as a local review: a conformance review's readiness and a finish review's
    // standing findings decide it too.
    Ok(crate::commands::exit_for(&report, fail_on))
}

/// What a review sent to a cluster carries besides the pack: the spec a conformance flow
/// judges against and the prior review a finish review adjudicates, read and checked here so a
/// bad file is one line before anything is uploaded. The node checks them again against its
/// flow (which also decides whether the flow reads them at all).
pub(crate) fn review_inputs(
    spec: Option<&std::path::Path>,
    prior: Option<&std::path::Path>,
    dispositions: Option<&std::path::Path>,
    root: &std::path::Path,
    pack: &ContextPack,
) -> Result<(Option<pb::SpecText>, Option<pb::PriorReview>)> {
    let spec = match spec {
        Some(p) => {
            let spec = crate::target::place_spec(crate::target::read_spec_file(p)?, root, pack);
            Some(pb::SpecText {
                path: spec.path,
                text: spec.text,
                pack_path: spec.pack_path.unwrap_or_default(),
            })
        }
        None => None,
    };
    let prior = match (prior, dispositions) {
        (Some(p), d) => {
            let files = crate::target::PriorFiles::read(p, d)?;
            files.parse()?;
            let (dispositions_path, dispositions) = files.dispositions.unwrap_or_default();
            Some(pb::PriorReview {
                path: files.path,
                report_json: files.report,
                dispositions_path,
                dispositions,
            })
        }
        (None, Some(_)) => bail!(
            "--dispositions is only read with --prior by a flow with an adjudicator stage: use --flow finish-review --prior REPORT.json, or drop --dispositions"
        ),
        (None, None) => None,
    };
    Ok((spec, prior))
}

#[cfg(test)]
mod tests {
    use super::election_timeouts;
    use std::time::Duration;

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
