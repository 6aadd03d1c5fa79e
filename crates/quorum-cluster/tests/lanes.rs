//! A node's send queues under load, with real nodes on 127.0.0.1: heartbeats overtake bulk
//! replies on a slow link (so a busy peer is not declared lost), and a peer that does not keep
//! up gets a clear refusal instead of an ever-growing queue.

mod common;

use common::*;
use quorum_cluster::{lanes::Limits, MembershipEvent};
use std::time::Duration;

const KIB: u64 = 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_overtake_bulk_replies_on_a_slow_link() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;
        let mut events = b.cluster.subscribe();
        // a's wire to b carries 2 MiB/s: the ten 512 KiB replies below are 2.5 s of it, four
        // times b's 600 ms heartbeat deadline. Sent in arrival order, a's heartbeats would
        // wait behind them and b would declare a lost.
        a.cluster.filter().bandwidth("b", 2048 * KIB);
        let mut asks = Vec::new();
        for i in 0..10u64 {
            let c = b.cluster.clone();
            asks.push(tokio::spawn(async move {
                let mut e = env("bulk", i);
                e.payload = serde_json::json!({ "n": 512 * KIB });
                c.request("a", e, Duration::from_secs(30)).await
            }));
        }
        for ask in asks {
            let reply = ask.await.unwrap().expect("every bulk reply arrives");
            assert_eq!(reply.payload["blob"].as_str().unwrap().len(), 512 * 1024);
        }
        let mut lost = Vec::new();
        while let Ok(ev) = events.try_recv() {
            if matches!(ev, MembershipEvent::Lost(_)) {
                lost.push(ev);
            }
        }
        assert!(lost.is_empty(), "a busy link is not a dead peer: {lost:?}");
        assert!(alive_names(&b.cluster).contains(&"a".to_string()));
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_does_not_keep_up_gets_a_clear_refusal_not_a_growing_queue() {
    tokio::time::timeout(TEST_LIMIT, async {
        let mut cfg = config("a", &[]);
        cfg.send_queue = Limits {
            bulk_bytes: 1 << 20,
            ..Limits::default()
        };
        let a = start_with(cfg).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;
        // 2 MiB/s: each 400 KiB message holds the wire for 200 ms, and they are sent faster
        // than that.
        a.cluster.filter().bandwidth("b", 2048 * KIB);
        let big = |n| {
            let mut e = env("note", n);
            e.payload = serde_json::json!({ "blob": "y".repeat(400 * 1024) });
            e
        };
        let mut refused = None;
        for n in 0..8 {
            if let Err(e) = a.cluster.send("b", big(n)).await {
                refused = Some((n, e.to_string()));
                break;
            }
        }
        let (n, msg) = refused.expect("the queue refuses past its bound");
        assert!(n >= 2, "a first frames are queued: refused at {n}");
        assert!(
            msg.contains("send queue to b is full") && msg.contains("not keeping up"),
            "{msg}"
        );
        // Heartbeats still go: b does not lose a while a's bulk lane is full.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(alive_names(&b.cluster).contains(&"a".to_string()));
    })
    .await
    .expect("test timed out");
}
