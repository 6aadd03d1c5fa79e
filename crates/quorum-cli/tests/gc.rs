//! `quorum flows gc` on a data dir a clustered node used: the cluster blackboard's notes older
//! than DAYS are pruned and counted, and while a node holds that database gc only warns.

mod common;

use common::*;
use quorum_cluster::{Cluster, ClusterConfig, Envelope, MessageHandler};
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

struct Quiet;

#[async_trait::async_trait]
impl MessageHandler for Quiet {
    async fn on_message(&self, _from: &str, _msg: Envelope) {}
    async fn on_request(&self, _from: &str, _msg: Envelope) -> Result<Envelope, String> {
        Err("nothing here".into())
    }
}

/// A node's cluster replica on `data/cluster`, as `quorum node --cluster` keeps it.
async fn node_on(data: &Path) -> Cluster {
    let mut cfg = ClusterConfig::new("gc-node", "127.0.0.1:0".parse().unwrap(), "cookie");
    cfg.data_dir = Some(data.join("cluster"));
    Cluster::start(cfg, Arc::new(Quiet)).await.unwrap()
}

/// `quorum flows gc --older-than DAYS` on `data`.
async fn gc(data: &Path, days: &str) -> Output {
    let d = data.to_str().unwrap();
    quorum(
        &["flows", "gc", "--older-than", days, "--data-dir", d],
        data,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_prunes_old_blackboard_notes_and_only_warns_while_a_node_holds_them() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let node = node_on(&data).await;
    let board = node.blackboard();
    board
        .publish(
            "old-review",
            "security_sentinel",
            "auth",
            "login skips the rate limit",
        )
        .unwrap();
    board
        .publish(
            "old-review",
            "software_developer",
            "db",
            "the pool is never closed",
        )
        .unwrap();

    // A node running on the data dir holds the replica: gc says so and changes nothing.
    let o = gc(&data, "0").await;
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning: blackboard not pruned"), "{err}");
    assert_eq!(board.read("old-review", None).len(), 2);
    node.shutdown().await;
    drop(board);
    drop(node);

    // Notes newer than the cutoff stay.
    let o = gc(&data, "30").await;
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("blackboard notes"));

    // Older than 0 days: both notes go, counted.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let o = gc(&data, "0").await;
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("pruned 2 blackboard notes"), "{out}");
    let node = node_on(&data).await;
    assert!(
        node.blackboard().read("old-review", None).is_empty(),
        "a pruned review's notes stay gone after a restart"
    );
    node.shutdown().await;
}
