//! In-process sandbox of real cluster nodes on 127.0.0.1: start nodes on port 0, record what their
//! handlers receive, and poll (bounded by the caller's timeout) until a condition holds.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_cluster::{Cluster, ClusterConfig, Envelope, MembershipEvent, MessageHandler};
use tokio::sync::broadcast;

pub const COOKIE: &str = "sandbox-cookie";
/// Bound on every test; nothing in a healthy run comes close.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Records one-way messages; answers requests by kind: `echo` echoes, `fail` errors, `hang`
/// never answers, `bulk` answers `payload.n` bytes.
#[derive(Default)]
pub struct Recorder {
    pub messages: Mutex<Vec<(String, Envelope)>>,
}

impl Recorder {
    pub fn received(&self) -> Vec<(String, Envelope)> {
        self.messages.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl MessageHandler for Recorder {
    async fn on_message(&self, from: &str, msg: Envelope) {
        self.messages.lock().unwrap().push((from.to_string(), msg));
    }

    async fn on_request(&self, _from: &str, msg: Envelope) -> Result<Envelope, String> {
        match msg.kind.as_str() {
            "echo" => Ok(Envelope {
                kind: "echo_reply".into(),
                ..msg
            }),
            "hang" => std::future::pending().await,
            // A reply of `n` bytes, as a pack-content fetch answers.
            "bulk" => {
                let n = msg.payload["n"].as_u64().unwrap_or(0) as usize;
                Ok(Envelope {
                    kind: "bulk_reply".into(),
                    flow_id: msg.flow_id,
                    payload: serde_json::json!({ "blob": "x".repeat(n) }),
                })
            }
            other => Err(format!("unsupported kind {other}")),
        }
    }
}

pub fn env(kind: &str, n: u64) -> Envelope {
    Envelope {
        kind: kind.into(),
        flow_id: "flow-1".into(),
        payload: serde_json::json!({ "n": n }),
    }
}

pub fn config(name: &str, join: &[SocketAddr]) -> ClusterConfig {
    let mut cfg = ClusterConfig::new(name, "127.0.0.1:0".parse().unwrap(), COOKIE);
    cfg.join = join.iter().map(|a| a.to_string()).collect();
    cfg.heartbeat_interval = Duration::from_millis(100);
    cfg.heartbeat_deadline = Duration::from_millis(600);
    cfg.reconnect_interval = Duration::from_millis(100);
    cfg
}

pub struct Node {
    pub cluster: Cluster,
    pub recorder: Arc<Recorder>,
}

/// Logs go to the test output when RUST_LOG is set (e.g. `RUST_LOG=quorum_cluster=debug`).
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub async fn start_with(cfg: ClusterConfig) -> Node {
    init_logs();
    let recorder = Arc::new(Recorder::default());
    let cluster = Cluster::start(cfg, recorder.clone()).await.unwrap();
    Node { cluster, recorder }
}

pub async fn start(name: &str, join: &[SocketAddr]) -> Node {
    start_with(config(name, join)).await
}

/// Poll `cond` until it holds. Callers bound the wait with `tokio::time::timeout`.
pub async fn wait_for(mut cond: impl FnMut() -> bool) {
    while !cond() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn alive_names(c: &Cluster) -> Vec<String> {
    c.alive_members().into_iter().map(|m| m.name).collect()
}

/// Wait until every node sees exactly `names` alive.
pub async fn wait_mesh(nodes: &[&Cluster], names: &[&str]) {
    let want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    wait_for(|| {
        nodes.iter().all(|c| {
            let mut got = alive_names(c);
            got.sort();
            got == want
        })
    })
    .await;
}

/// Receive events until one equals `want`; returns every event seen, `want` last.
pub async fn wait_event(
    rx: &mut broadcast::Receiver<MembershipEvent>,
    want: MembershipEvent,
) -> Vec<MembershipEvent> {
    let mut seen = Vec::new();
    loop {
        match rx.recv().await {
            Ok(ev) => {
                let done = ev == want;
                seen.push(ev);
                if done {
                    return seen;
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => panic!("missed {n} events"),
            Err(broadcast::error::RecvError::Closed) => panic!("event channel closed"),
        }
    }
}

/// Wait until a request succeeds (a freshly rejoined link may need a moment to carry it).
pub async fn request_until_ok(from: &Cluster, to: &str) -> Envelope {
    loop {
        if let Ok(r) = from
            .request(to, env("echo", 0), Duration::from_millis(500))
            .await
        {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `send` until the link takes it: right after a rejoin, membership can say a node is up while
/// this side's link to it is still being dialled. Bounded by the test's own time limit.
pub async fn send_until_ok(from: &Cluster, to: &str, msg: Envelope) {
    while from.send(to, msg.clone()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
