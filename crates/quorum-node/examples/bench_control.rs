//! What replicating facts costs: the same scripted review (24 specialist tasks at 200 ms,
//! capacity 2) run twice on one node, once with its facts written to the local store only and
//! once committed first on a three-voter control plane (real quorum-cluster nodes on 127.0.0.1,
//! in this process, Raft logs in sled), and the wall times printed side by side.
//!
//!     cargo run --release -p quorum-node --example bench_control

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_cluster::{Cluster, ClusterConfig, Envelope, MessageHandler};
use quorum_control::{Command, ControlConfig, ControlPlane};
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_node::ControlSink;
use quorum_runtime::{Backends, FactLog, ReviewContext};
use quorum_store::{DataDir, FlowMeta};
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use support::*;

const TASKS: usize = 24;
const CAPACITY: usize = 2;
const LATENCY_MS: u64 = 200;

fn script() -> Script {
    let tasks: Vec<_> = (1..=TASKS)
        .map(|i| json!({"id": format!("t{i}"), "persona": "security_sentinel", "files": ["src/db.py"], "mandate": format!("area {i}")}))
        .collect();
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": tasks}))),
        )
        .rule(
            Rule::new("spec")
                .when_system(["You are security_sentinel"])
                .reply(Reply::delay(
                    LATENCY_MS,
                    Reply::json(&json!({"findings": []})),
                )),
        )
        .rule(synthesizer_rule())
}

#[derive(Default)]
struct Handler(OnceLock<ControlPlane>);

#[async_trait::async_trait]
impl MessageHandler for Handler {
    async fn on_message(&self, _from: &str, _msg: Envelope) {}
    async fn on_request(&self, _from: &str, msg: Envelope) -> Result<Envelope, String> {
        match self.0.get() {
            Some(p) => quorum_control::handle_envelope(p, msg).await,
            None => Err("not started".into()),
        }
    }
}

async fn voter(name: &str, join: Vec<String>, root: &std::path::Path) -> (Cluster, ControlPlane) {
    let mut cfg = ClusterConfig::new(name, "127.0.0.1:0".parse().unwrap(), "bench-cookie");
    cfg.join = join;
    cfg.heartbeat_interval = Duration::from_millis(100);
    cfg.heartbeat_deadline = Duration::from_millis(1000);
    let handler = Arc::new(Handler::default());
    let cluster = Cluster::start(cfg, handler.clone()).await.unwrap();
    let transport = quorum_control::ClusterTransport::new();
    transport.bind(cluster.clone());
    let mut cc = ControlConfig::new(
        name,
        root.join(name),
        vec!["a".into(), "b".into(), "c".into()],
    );
    cc.heartbeat = Duration::from_millis(100);
    cc.election_timeout_min = Duration::from_millis(1000);
    cc.election_timeout_max = Duration::from_millis(2000);
    let plane = ControlPlane::start(cc, Arc::new(transport)).await.unwrap();
    let _ = handler.0.set(plane.clone());
    (cluster, plane)
}

fn meta(flow_id: &str) -> FlowMeta {
    FlowMeta {
        flow_id: flow_id.into(),
        flow_name: "review".into(),
        flow_yaml: String::new(),
        params: json!({}),
        target_path: "code_project".into(),
        head_sha: None,
        started_at: String::new(),
        started_ms: 0,
        node: "a".into(),
    }
}

fn context(server: &ScriptedServer, flow_id: &str, facts: FactLog) -> Arc<ReviewContext> {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.max_tasks = TASKS;
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.max_concurrent = CAPACITY;
    Arc::new(ReviewContext {
        review: std::sync::Arc::new(quorum_core::machine::Review {
            flow_id: flow_id.into(),
            flow,
            catalog: Catalog::load(&repo_root().join("personas")).unwrap(),
            pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
            verifier_model: None,
            node: "a".into(),
            max_concurrent: Some(CAPACITY),
            started_at: String::new(),
            scope: Default::default(),
        }),
        backends: Backends::from_configs(&[cfg], MODEL).unwrap(),
        facts,
        remote: None,
        board: None,
        incremental: None,
    })
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(dir.path().join("data"));
    let server = ScriptedServer::start(script()).await.unwrap();

    let (ca, a) = voter("a", vec![], dir.path()).await;
    let join = vec![ca.local_addr().to_string()];
    let (cb, _b) = voter("b", join.clone(), dir.path()).await;
    let (cc, _c) = voter("c", join, dir.path()).await;
    a.wait_for_leader(Duration::from_secs(30)).await.unwrap();

    let store = data.create_flow(&meta("local")).unwrap();
    let t = Instant::now();
    let local = quorum_runtime::run_review(context(&server, "local", FactLog::new(store)), None)
        .await
        .unwrap();
    let local_ms = t.elapsed().as_secs_f64() * 1e3;

    let accept = Command::Accept {
        flow_id: "replicated".into(),
        node: "a".into(),
        meta: json!({}),
    };
    assert!(a.propose(accept).await.unwrap().is_accepted());
    let store = data.create_flow(&meta("replicated")).unwrap();
    let sink = Arc::new(ControlSink::new(a.clone(), "replicated", 1, 0));
    let t = Instant::now();
    let replicated = quorum_runtime::run_review(
        context(&server, "replicated", FactLog::replicated(store, sink)),
        None,
    )
    .await
    .unwrap();
    let replicated_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(local.status, replicated.status);
    let facts = a.review("replicated").map(|r| r.facts.len()).unwrap_or(0);

    println!(
        "review of {TASKS} specialist tasks, scripted latency {LATENCY_MS} ms, capacity {CAPACITY}"
    );
    println!("  facts local only:            {local_ms:>8.0} ms");
    println!("  facts committed on 3 voters: {replicated_ms:>8.0} ms   ({facts} facts, {:.1} ms per fact)",
        (replicated_ms - local_ms).max(0.0) / facts.max(1) as f64);
    println!(
        "  cost of replication: {:+.1}%",
        (replicated_ms / local_ms - 1.0) * 100.0
    );
    for c in [&ca, &cb, &cc] {
        c.shutdown().await;
    }
}
