//! Cluster scaling and failover, measured side by side in one run.
//!
//! The same review of 60 specialist tasks, each reporting one grounded finding, plus the 60
//! verifications those need (scripted model latency 300 ms for both, per-node capacity 2) runs
//! on 1 node and on 3 nodes — real quorum-cluster nodes on 127.0.0.1, in this process, each with
//! its own scripted model server — and the wall-time ratio is printed, with the ideal critical
//! path beside it. Then a worker
//! is cut off mid-review (a transport partition, as a dead host looks to its peers) and the
//! time until its tasks run elsewhere is measured.
//!
//!     cargo run --release -p quorum-node --example bench_cluster

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
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const TASKS: usize = 60;
const CAPACITY: usize = 2;
const LATENCY_MS: u64 = 300;

fn script() -> Script {
    let files = ["src/db.py", "src/auth.py", "src/utils.py", "src/app.py"];
    let tasks: Vec<_> = (1..=TASKS)
        .map(|i| json!({"id": format!("t{i}"), "persona": "security_sentinel", "files": [files[i % 4]], "mandate": format!("area {i}")}))
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
                    Reply::json(&json!({"findings": [{"title": "Injection in the search query",
                        "severity": "P1", "confidence": 0.9, "category": "security/injection",
                        "file": "src/db.py", "line_start": 53, "line_end": 53,
                        "evidence": "name LIKE '%{term}%'", "why_it_matters": "attacker-controlled SQL",
                        "suggested_fix": "bind the parameter"}]})),
                )),
        )
        .rule(
            Rule::new("verifier")
                .when_system(["You are an independent verifier"])
                .reply(Reply::delay(
                    LATENCY_MS,
                    Reply::json(&json!({"verdict": "CONFIRMED", "reason": "the cited line builds SQL from input"})),
                )),
        )
        .rule(synthesizer_rule())
}

fn backends(server: &ScriptedServer) -> Backends {
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.max_concurrent = CAPACITY;
    Backends::from_configs(&[cfg], MODEL).unwrap()
}

struct TestNode {
    cluster: Cluster,
    server: ScriptedServer,
    packs: Arc<PackRegistry>,
}

async fn node(name: &str, join: Vec<String>) -> TestNode {
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
    TestNode {
        cluster,
        server,
        packs,
    }
}

fn context(origin: &TestNode, clustered: bool, flow_id: &str) -> Arc<ReviewContext> {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.max_tasks = TASKS;
    let pack = ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap();
    origin.packs.register(flow_id, &pack);
    Arc::new(ReviewContext {
        review: std::sync::Arc::new(quorum_core::machine::Review {
            flow_id: flow_id.into(),
            flow,
            catalog: Catalog::load(&repo_root().join("personas")).unwrap(),
            pack,
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

#[tokio::main]
async fn main() {
    let a = node("a", vec![]).await;
    let b = node("b", vec![a.cluster.local_addr().to_string()]).await;
    let c = node("c", vec![a.cluster.local_addr().to_string()]).await;
    wait_members(&a.cluster, 3).await;

    let t = Instant::now();
    let one = quorum_runtime::run_review(context(&a, false, "bench-one"), None)
        .await
        .unwrap();
    let single = t.elapsed();
    let t = Instant::now();
    let three = quorum_runtime::run_review(context(&a, true, "bench-three"), None)
        .await
        .unwrap();
    let clustered = t.elapsed();
    assert_eq!(one.status, three.status);
    let mut per_node = std::collections::BTreeMap::new();
    for task in three.tasks.iter().filter(|t| t.id.starts_with('t')) {
        *per_node.entry(task.node.clone()).or_insert(0) += 1;
    }

    // Failover: cut b off once it is working, measure until its tasks run elsewhere.
    let mut b_feed = b.server.subscribe();
    let mut a_feed = a.server.subscribe();
    let mut c_feed = c.server.subscribe();
    let review = tokio::spawn(quorum_runtime::run_review(
        context(&a, true, "bench-failover"),
        None,
    ));
    let mut on_b = std::collections::BTreeSet::new();
    while on_b.len() < CAPACITY {
        if let Some(r) = b_feed.recv().await {
            if let Some(t) = task_of(&r) {
                on_b.insert(t);
            }
        }
    }
    // Drain what a and c had already received.
    while a_feed.try_recv().is_ok() {}
    while c_feed.try_recv().is_ok() {}
    let cut = Instant::now();
    b.cluster.filter().partition("a");
    b.cluster.filter().partition("c");
    a.cluster.filter().partition("b");
    c.cluster.filter().partition("b");
    let reassigned = loop {
        let r = tokio::select! {
            Some(r) = a_feed.recv() => r,
            Some(r) = c_feed.recv() => r,
        };
        if task_of(&r).is_some_and(|t| on_b.contains(&t)) {
            break cut.elapsed();
        }
    };
    let failover = review.await.unwrap().unwrap();

    let verifications = |r: &quorum_core::report::Report| {
        r.tasks
            .iter()
            .filter(|t| t.id.starts_with("verifier"))
            .count()
    };
    let ideal = |nodes: usize| {
        // Specialists then verifications, each call LATENCY_MS, CAPACITY calls per node at once.
        let slots = (nodes * CAPACITY) as f64;
        2.0 * (TASKS as f64 / slots).ceil() * LATENCY_MS as f64
    };
    println!("review of {TASKS} specialist tasks + {TASKS} verifications (batches: {} on 3 nodes), scripted latency {LATENCY_MS} ms, capacity {CAPACITY} per node", verifications(&three));
    println!(
        "  ideal critical path: 1 node {:.0} ms, 3 nodes {:.0} ms (ratio {:.2}x)",
        ideal(1),
        ideal(3),
        ideal(1) / ideal(3)
    );
    println!("  1 node:  {:>8.0} ms", single.as_secs_f64() * 1e3);
    println!(
        "  3 nodes: {:>8.0} ms   tasks per node {per_node:?}",
        clustered.as_secs_f64() * 1e3
    );
    println!(
        "  speed-up 3 nodes / 1 node: {:.2}x",
        single.as_secs_f64() / clustered.as_secs_f64()
    );
    println!(
        "  failover: node b cut off mid-review; its tasks running elsewhere after {:.0} ms (heartbeat deadline 1000 ms); review {:?}",
        reassigned.as_secs_f64() * 1e3,
        failover.status
    );
    for n in [&a, &b, &c] {
        n.cluster.shutdown().await;
    }
}
