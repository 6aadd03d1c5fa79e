//! The replicated blackboard across real nodes: broadcast, anti-entropy for late joiners and
//! healed partitions, persistence across restarts, and a cluster of one.

mod common;

use common::*;
use quorum_cluster::{Cluster, KIND_BB_PUBLISH};

fn publish_n(c: &Cluster, flow: &str, n: usize) {
    let bb = c.blackboard();
    for i in 0..n {
        bb.publish(flow, "persona", "notes", &format!("{} says {i}", c.name()))
            .unwrap();
    }
}

/// Wait until every replica of `flow` has `count` entries and the same digest.
async fn wait_converged(nodes: &[&Cluster], flow: &str, count: usize) {
    wait_for(|| {
        let first = nodes[0].blackboard().digest(flow);
        nodes.iter().all(|c| {
            c.blackboard().read(flow, None).len() == count && c.blackboard().digest(flow) == first
        })
    })
    .await;
    let reference = nodes[0].blackboard().read(flow, None);
    for c in nodes {
        assert_eq!(c.blackboard().read(flow, None), reference);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_published_everywhere_converge_and_late_joiners_catch_up() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        let c = start("c", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;

        for n in [&a, &b, &c] {
            publish_n(&n.cluster, "flow-1", 5);
        }
        publish_n(&b.cluster, "flow-2", 2);
        wait_converged(&[&a.cluster, &b.cluster, &c.cluster], "flow-1", 15).await;
        wait_converged(&[&a.cluster, &b.cluster, &c.cluster], "flow-2", 2).await;

        let entries = a.cluster.blackboard().read("flow-1", None);
        let mut ids: Vec<_> = entries.iter().map(|e| e.id.clone()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 15, "ids are unique");
        let from_c = entries.iter().filter(|e| e.id.node == "c").count();
        assert_eq!(from_c, 5);
        assert!(entries
            .windows(2)
            .all(|w| (w[0].at_ms, &w[0].id) <= (w[1].at_ms, &w[1].id)));
        assert_eq!(
            c.cluster.blackboard().read("flow-1", Some("notes")).len(),
            15
        );
        assert!(c
            .cluster
            .blackboard()
            .read("flow-1", Some("other"))
            .is_empty());

        // A node that joins afterwards never saw the broadcasts; anti-entropy brings everything.
        let d = start("d", &[b.cluster.local_addr()]).await;
        wait_converged(
            &[&a.cluster, &b.cluster, &c.cluster, &d.cluster],
            "flow-1",
            15,
        )
        .await;
        wait_converged(
            &[&a.cluster, &b.cluster, &c.cluster, &d.cluster],
            "flow-2",
            2,
        )
        .await;
        assert_eq!(
            d.cluster.blackboard().all_flows(),
            vec!["flow-1".to_string(), "flow-2".to_string()]
        );

        for n in [&a, &b, &c, &d] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_broadcasts_and_partitions_are_repaired_by_anti_entropy() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        let c = start("c", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;

        // Broadcasts lost on the wire, nodes all alive: the periodic round repairs it.
        a.cluster.filter().drop_kinds(&[KIND_BB_PUBLISH]);
        publish_n(&a.cluster, "flow-1", 3);
        wait_converged(&[&a.cluster, &b.cluster, &c.cluster], "flow-1", 3).await;
        a.cluster.filter().clear();

        // Both sides of a partition publish; after the heal every replica holds the union.
        c.cluster.filter().partition("a");
        c.cluster.filter().partition("b");
        let mut a_events = a.cluster.subscribe();
        wait_event(
            &mut a_events,
            quorum_cluster::MembershipEvent::Lost("c".into()),
        )
        .await;
        publish_n(&a.cluster, "flow-1", 2);
        publish_n(&c.cluster, "flow-1", 4);
        assert_eq!(c.cluster.blackboard().read("flow-1", None).len(), 7);
        c.cluster.filter().clear();
        wait_converged(&[&a.cluster, &b.cluster, &c.cluster], "flow-1", 9).await;

        for n in [&a, &b, &c] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_survives_a_restart_with_its_data_dir() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let a = start("a", &[]).await;
        let mut cfg = config("b", &[a.cluster.local_addr()]);
        cfg.data_dir = Some(dir.path().to_path_buf());
        let b = start_with(cfg.clone()).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;
        publish_n(&b.cluster, "flow-1", 3);
        publish_n(&a.cluster, "flow-1", 1);
        wait_converged(&[&a.cluster, &b.cluster], "flow-1", 4).await;
        let before = b.cluster.blackboard().read("flow-1", None);
        b.cluster.shutdown().await;
        drop(b);

        // Published while b is down: b must get it from a when it is back.
        publish_n(&a.cluster, "flow-1", 2);

        // Alone at first (no peers to join): the replica comes from disk, not from a.
        cfg.join.clear();
        let b2 = start_with(cfg.clone()).await;
        assert_eq!(b2.cluster.blackboard().read("flow-1", None), before);
        let own_max = before
            .iter()
            .filter(|e| e.id.node == "b")
            .map(|e| e.id.seq)
            .max()
            .unwrap();
        let fresh = b2
            .cluster
            .blackboard()
            .publish("flow-1", "persona", "notes", "after restart")
            .unwrap();
        assert!(fresh.id.seq > own_max, "seqs never repeat across restarts");
        b2.cluster.shutdown().await;
        drop(b2);

        cfg.join = vec![a.cluster.local_addr().to_string()];
        let b3 = start_with(cfg).await;
        wait_converged(&[&a.cluster, &b3.cluster], "flow-1", 7).await;

        a.cluster.shutdown().await;
        b3.cluster.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_one_has_a_working_blackboard() {
    tokio::time::timeout(TEST_LIMIT, async {
        let solo = start("solo", &[]).await;
        let bb = solo.cluster.blackboard();
        let empty = bb.digest("flow-1");
        let e = bb
            .publish("flow-1", "scout", "plan", "look at src/")
            .unwrap();
        assert_eq!(e.id.flow_id, "flow-1");
        assert_eq!(e.id.node, "solo");
        assert_eq!(bb.read("flow-1", None), vec![e.clone()]);
        assert_eq!(bb.read("flow-1", Some("plan")), vec![e]);
        assert_ne!(bb.digest("flow-1"), empty);
        assert_eq!(bb.all_flows(), vec!["flow-1".to_string()]);
        assert_eq!(solo.cluster.members().len(), 1);

        solo.cluster.shutdown().await;
        assert!(bb.publish("flow-1", "scout", "plan", "too late").is_err());
        assert_eq!(bb.read("flow-1", None).len(), 1);
    })
    .await
    .unwrap();
}
