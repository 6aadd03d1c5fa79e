//! Three voters and a learner as real `quorum node` processes with `--voters`, each with its
//! own scripted model server: the harness the takeover and voter tests share.

use super::*;
use quorum_api::ApiClient;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const COOKIE: &str = "takeover-test-cookie";
pub const VOTERS: &str = "n1,n2,n3";

pub struct Node {
    pub name: String,
    pub child: tokio::process::Child,
    pub cluster: String,
    pub api: String,
    pub server: ScriptedServer,
    pub data: PathBuf,
}

pub async fn start(name: &str, work: &Path, join: &[&str]) -> Node {
    start_with(name, work, join, &[]).await
}

/// [`start`] with more `quorum node` arguments.
pub async fn start_with(name: &str, work: &Path, join: &[&str], extra: &[&str]) -> Node {
    // t1 and t2 answer at once, t3..t6 are held until the test releases them: the review
    // stops at exactly two tasks done, the rest asked and unanswered, however fast or slow the
    // machine, and the test kills, stops or cuts off the conductor at that point. (A scripted
    // delay of 400 ms, then 1 s, had let a fresh-clone CI run finish the whole review first.)
    let server = ScriptedServer::start(six_tasks_holding_after(2))
        .await
        .unwrap();
    let data = work.join(format!("data-{name}"));
    let mut args: Vec<String> = [
        "--name",
        name,
        "--listen",
        "127.0.0.1:0",
        "--api",
        "127.0.0.1:0",
        "--backend",
        &format!("ollama={}", server.ollama_url()),
        "--model",
        MODEL,
        "--data-dir",
        &data.display().to_string(),
        "--voters",
        VOTERS,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Short timeouts keep the suite fast; the takeover figure in the notes is measured with the
    // shipped defaults (QUORUM_TAKEOVER_DEFAULT_TIMEOUTS=1).
    if std::env::var_os("QUORUM_TAKEOVER_DEFAULT_TIMEOUTS").is_none() {
        args.extend(["--heartbeat-ms", "100", "--deadline-ms", "1000"].map(String::from));
    }
    for j in join {
        args.extend(["--join".into(), j.to_string()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = spawn_node(
        node_command(&args, work)
            .env("QUORUM_COOKIE", COOKIE)
            .env("QUORUM_MAX_CONCURRENT", "1")
            .env("QUORUM_FAULTS", work.join(format!("faults-{name}")))
            .env(
                "RUST_LOG",
                std::env::var("QUORUM_TEST_NODE_LOG").unwrap_or_else(|_| "warn".into()),
            ),
    )
    .await;
    assert!(
        node.banner.contains("control plane with voters n1,n2,n3"),
        "{}",
        node.banner
    );
    Node {
        name: name.to_string(),
        cluster: node.cluster().to_string(),
        api: node.api().to_string(),
        child: node.child,
        server,
        data,
    }
}

pub async fn connect(node: &Node) -> ApiClient {
    ApiClient::connect(&node.api, NODE_TOKEN).await.unwrap()
}

/// Four nodes up, every one seen alive, the three voters in one group with a leader and the
/// fourth node a learner (bounded poll).
pub async fn cluster(work: &Path) -> Vec<Node> {
    cluster_with(work, &[]).await
}

/// [`cluster`] with more `quorum node` arguments for every node.
pub async fn cluster_with(work: &Path, extra: &[&str]) -> Vec<Node> {
    cluster_of(work, &["n1", "n2", "n3", "n4"], extra).await
}

/// The voters n1-n3 and the learners named after them (n4, n5, …), every one seen alive, one
/// leader among the voters.
pub async fn cluster_of(work: &Path, names: &[&str], extra: &[&str]) -> Vec<Node> {
    let n1 = start_with(names[0], work, &[], extra).await;
    let join = n1.cluster.clone();
    let mut nodes = vec![n1];
    for n in &names[1..] {
        nodes.push(start_with(n, work, &[&join], extra).await);
    }
    let c = connect(&nodes[0]).await;
    let mut last = Vec::new();
    for _ in 0..600 {
        let st = c.cluster_status().await.unwrap();
        let alive = st.iter().filter(|n| n.alive).count();
        let voters: BTreeSet<String> = st
            .iter()
            .filter(|n| n.voter)
            .map(|n| n.name.clone())
            .collect();
        let leaders = st.iter().filter(|n| n.leader).count();
        if alive == names.len()
            && voters.len() == 3
            && leaders == 1
            && voters
                .iter()
                .all(|v| ["n1", "n2", "n3"].contains(&v.as_str()))
        {
            return nodes;
        }
        last = st;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the control plane never formed: {last:?}");
}

/// Specialist requests per task, over every node's model server.
pub fn requests_per_task(nodes: &[Node]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for n in nodes {
        for r in n.server.requests() {
            if let Some(t) = task_of(&r) {
                *m.entry(t).or_insert(0) += 1;
            }
        }
    }
    m
}

/// Wait (bounded) until the review exists on n1 and `n` specialist requests were made; its id.
/// If it never does, the client's own account of why.
pub async fn review_under_way(
    nodes: &[Node],
    n: usize,
    follow: &mut tokio::task::JoinHandle<(i32, Option<Value>, String)>,
) -> String {
    tokio::select! {
        id = under_way(nodes, n) => id,
        ended = follow => {
            let (code, _, stderr) = ended.unwrap();
            panic!("the client ended ({code}) before the review got under way: {stderr}")
        }
    }
}

pub async fn under_way(nodes: &[Node], n: usize) -> String {
    use tokio_stream::StreamExt;
    let c = connect(&nodes[0]).await;
    let mut flow_id = None;
    for _ in 0..1200 {
        flow_id = c
            .list()
            .await
            .unwrap()
            .into_iter()
            .next()
            .map(|r| r.flow_id);
        if flow_id.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let flow_id = flow_id.expect("the review never appeared on n1");
    // The conductor's own progress stream says when a specialist task is done.
    // (Listed as soon as it is stored; watchable once the control plane has agreed it.)
    let mut events = None;
    for _ in 0..1200 {
        if let Ok(e) = c.watch(&flow_id).await {
            events = Some(e);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut events = events.expect("the review never became watchable on n1");
    let mut done = BTreeSet::new();
    while let Some(Ok(ev)) = events.next().await {
        let v: Value = serde_json::from_str(&ev.json).unwrap_or_default();
        if ev.kind == "task_finished" && v["ok"] == true {
            let task = v["task"].as_str().unwrap_or_default().to_string();
            if task.starts_with('t') {
                done.insert(task);
            }
        }
        if done.len() >= n {
            return flow_id;
        }
    }
    panic!("the review ended before {n} specialist tasks were done");
}

/// Specialist tasks whose success the node's own store recorded (written only after the
/// control plane committed it).
pub fn completed_on(data: &Path, flow_id: &str) -> BTreeSet<String> {
    let store = quorum_store::DataDir::new(data).open_flow(flow_id).unwrap();
    store
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            quorum_store::Event::AttemptSucceeded { task_id, .. } if task_id.starts_with('t') => {
                Some(task_id)
            }
            _ => None,
        })
        .collect()
}

/// Ask `asker` for the cluster's status until `ok` holds for it (bounded); the last status.
pub async fn until_status(
    asker: &Node,
    what: &str,
    ok: impl Fn(&[quorum_api::pb::NodeStatus]) -> bool,
) -> Vec<quorum_api::pb::NodeStatus> {
    let c = connect(asker).await;
    let mut last = Vec::new();
    for _ in 0..1200 {
        if let Ok(st) = c.cluster_status().await {
            if ok(&st) {
                return st;
            }
            last = st;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never happened: {last:?}");
}
