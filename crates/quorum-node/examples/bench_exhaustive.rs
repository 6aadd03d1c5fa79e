//! The exhaustive flow on a large tree, 1 node against 3, measured side by side in one run.
//!
//! A generated tree of 2,000 small files (50 directories of 40) is reviewed with
//! `flows/exhaustive.yaml`: round 1 reads every file in directory batches (50 specialist
//! tasks), one batch reports two problems, so round 2 re-reads it and converges. Every model
//! call has a scripted latency (`LATENCY_MS`) and each node runs `CAPACITY` calls at once. The
//! same review runs on 1 node and then on 3 real quorum-cluster nodes on 127.0.0.1 (in this
//! process, each with its own scripted model server); the wall-time ratio and the tasks each
//! node ran are printed, with the ideal critical path beside them.
//!
//!     cargo run --release -p quorum-node --example bench_exhaustive

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_cluster::{Cluster, ClusterConfig, NodeAdvert};
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_node::{ClusterBoard, ClusterExecutor, NodeAgent, PackRegistry};
use quorum_runtime::{Backends, FactLog, ReviewContext};
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const DIRS: usize = 50;
const PER_DIR: usize = 40;
const CAPACITY: usize = 2;
const LATENCY_MS: u64 = 200;

fn generate_tree(root: &std::path::Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("pkg{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..PER_DIR {
            let n = d * PER_DIR + f;
            std::fs::write(
                dir.join(format!("m{f:02}.py")),
                format!("def handler_{n}(x):\n    return x + {n}\n"),
            )
            .unwrap();
        }
    }
}

fn finding(file: &str, n: usize) -> serde_json::Value {
    json!({"title": format!("Unchecked input in handler_{n}"), "severity": "P2",
        "confidence": 0.9, "category": "correctness/validation", "file": file,
        "line_start": 2, "line_end": 2, "symbol": format!("handler_{n}"),
        "evidence": format!("return x + {n}"), "why_it_matters": "x is never validated",
        "suggested_fix": "validate x"})
}

fn slow(reply: Reply) -> Reply {
    Reply::delay(LATENCY_MS, reply)
}

/// Round 1: the first batch finds two problems, the others none; round 2 (the second lane)
/// finds the same two, so the rounds converge after it.
fn script() -> Script {
    let two = json!({"findings": [finding("pkg00/m00.py", 0), finding("pkg00/m01.py", 1)]});
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("round1-hit")
                .when_system(["You are software_developer,"])
                .when_last_user(["## Task r1b1\n"])
                .reply(slow(Reply::json(&two))),
        )
        .rule(
            Rule::new("round2-same")
                .when_system(["You are security_sentinel,"])
                .reply(slow(Reply::json(&two))),
        )
        .rule(
            Rule::new("no-findings")
                .when_system(["## Output format (required)"])
                .reply(slow(Reply::json(&json!({"findings": []})))),
        )
        .rule(
            Rule::new("verifier")
                .when_system(["You are an independent verifier"])
                .reply(slow(Reply::json(
                    &json!({"verdict": "CONFIRMED", "reason": "x is returned unchecked"}),
                ))),
        )
        .rule(synthesizer_rule())
}

fn backends(server: &ScriptedServer) -> Backends {
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.max_concurrent = CAPACITY;
    Backends::from_configs(&[cfg], MODEL).unwrap()
}

struct BenchNode {
    cluster: Cluster,
    server: ScriptedServer,
    packs: Arc<PackRegistry>,
}

async fn node(name: &str, join: Vec<String>) -> BenchNode {
    let server = ScriptedServer::start(script()).await.unwrap();
    let packs = Arc::new(PackRegistry::default());
    let agent = NodeAgent::new(name, backends(&server), packs.clone());
    let mut cfg = ClusterConfig::new(name, "127.0.0.1:0".parse().unwrap(), "bench-cookie");
    cfg.join = join;
    cfg.heartbeat_interval = Duration::from_millis(100);
    cfg.heartbeat_deadline = Duration::from_millis(1000);
    cfg.advert = NodeAdvert {
        name: name.into(),
        capacity: CAPACITY as u32,
        models: vec![MODEL.into()],
        ..NodeAdvert::default()
    };
    let cluster = Cluster::start(cfg, agent.clone()).await.unwrap();
    agent.attach(cluster.clone());
    BenchNode {
        cluster,
        server,
        packs,
    }
}

fn context(
    origin: &BenchNode,
    pack: &ContextPack,
    clustered: bool,
    flow_id: &str,
) -> Arc<ReviewContext> {
    let flow = Flow::load(&repo_root().join("flows/exhaustive.yaml")).unwrap();
    let catalog = Catalog::load(&repo_root().join("personas")).unwrap();
    flow.check_personas(&catalog).unwrap();
    origin.packs.register(flow_id, pack);
    Arc::new(ReviewContext {
        review: std::sync::Arc::new(quorum_core::machine::Review {
            flow_id: flow_id.into(),
            flow,
            catalog,
            pack: pack.clone(),
            verifier_model: None,
            node: origin.cluster.name().to_string(),
            max_concurrent: Some(CAPACITY),
            started_at: String::new(),
            scope: Default::default(),
        }),
        backends: backends(&origin.server),
        facts: FactLog::disabled(),
        remote: clustered.then(|| {
            Arc::new(ClusterExecutor::new(
                origin.cluster.clone(),
                std::time::Duration::from_secs(1),
            )) as Arc<dyn quorum_runtime::remote::RemoteExecutor>
        }),
        board: Some(Arc::new(ClusterBoard(origin.cluster.blackboard()))),
        incremental: None,
    })
}

async fn wait_members(c: &Cluster, n: usize) {
    for _ in 0..400 {
        if c.alive_members().len() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("cluster did not form");
}

/// Round tasks per node, and the report's files reviewed of files total.
fn summary(r: &quorum_core::report::Report) -> (BTreeMap<String, usize>, usize, usize) {
    let mut per_node = BTreeMap::new();
    for t in r.tasks.iter().filter(|t| t.id.starts_with('r')) {
        *per_node.entry(t.node.clone()).or_insert(0) += 1;
    }
    let c = r.coverage.as_ref();
    (
        per_node,
        c.map_or(0, |c| c.files_reviewed),
        c.map_or(0, |c| c.files_total),
    )
}

#[tokio::main]
async fn main() {
    let tree = tempfile::tempdir().unwrap();
    generate_tree(tree.path());
    let pack = ContextPack::snapshot(tree.path(), &PackOptions::default()).unwrap();
    assert_eq!(pack.len(), DIRS * PER_DIR);

    let a = node("a", vec![]).await;
    let b = node("b", vec![a.cluster.local_addr().to_string()]).await;
    let c = node("c", vec![a.cluster.local_addr().to_string()]).await;
    wait_members(&a.cluster, 3).await;

    let t = Instant::now();
    let one = quorum_runtime::run_review(context(&a, &pack, false, "exh-one"), None)
        .await
        .unwrap();
    let single = t.elapsed();
    let t = Instant::now();
    let three = quorum_runtime::run_review(context(&a, &pack, true, "exh-three"), None)
        .await
        .unwrap();
    let clustered = t.elapsed();
    assert_eq!(one.status, three.status, "{}", three.status_reason);
    assert_eq!(one.rounds.len(), three.rounds.len());

    let (per_one, read_one, total) = summary(&one);
    let (per_three, read_three, _) = summary(&three);
    let tasks: usize = per_one.values().sum();
    let round1 = one.rounds.first().map_or(0, |r| r.tasks);
    // Rounds run one after the other; within a round, CAPACITY calls per node at once.
    let ideal = |nodes: usize| {
        let slots = (nodes * CAPACITY) as f64;
        one.rounds
            .iter()
            .map(|r| (r.tasks as f64 / slots).ceil() * LATENCY_MS as f64)
            .sum::<f64>()
    };
    println!(
        "exhaustive review of {total} files: {} round(s), {tasks} specialist tasks ({round1} in round 1), scripted latency {LATENCY_MS} ms per call, capacity {CAPACITY} per node",
        one.rounds.len()
    );
    println!(
        "  ideal critical path of the rounds: 1 node {:.0} ms, 3 nodes {:.0} ms (ratio {:.2}x)",
        ideal(1),
        ideal(3),
        ideal(1) / ideal(3)
    );
    println!(
        "  1 node:  {:>8.0} ms   files reviewed {read_one}/{total}   tasks per node {per_one:?}",
        single.as_secs_f64() * 1e3
    );
    println!(
        "  3 nodes: {:>8.0} ms   files reviewed {read_three}/{total}   tasks per node {per_three:?}",
        clustered.as_secs_f64() * 1e3
    );
    println!(
        "  speed-up 3 nodes / 1 node: {:.2}x",
        single.as_secs_f64() / clustered.as_secs_f64()
    );
    for n in [&a, &b, &c] {
        n.cluster.shutdown().await;
    }
}
