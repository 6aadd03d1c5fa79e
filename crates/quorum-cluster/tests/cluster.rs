//! Membership, messaging and failure detection across real nodes on 127.0.0.1.

mod common;

use std::time::Duration;

use common::*;
use quorum_cluster::{ClusterError, MembershipEvent, NodeAdvert};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_form_a_full_mesh_through_gossip() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        // c knows only a; it must learn b from a's gossip and dial it.
        let c = start("c", &[a.cluster.local_addr()]).await;
        assert_ne!(a.cluster.local_addr().port(), 0);
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;

        let members = c.cluster.members();
        assert_eq!(members[0].name, "c");
        assert!(members[0].is_self && members[0].alive);
        let b_seen = members.iter().find(|m| m.name == "b").unwrap();
        assert_eq!(
            b_seen.advert.cluster_addr,
            b.cluster.local_addr().to_string()
        );
        // c talks to b directly, not only through a.
        assert_eq!(request_until_ok(&c.cluster, "b").await.kind, "echo_reply");

        // Adverts travel with heartbeats; a change other than load is an event.
        let mut events = a.cluster.subscribe();
        b.cluster.set_advert(NodeAdvert {
            models: vec!["qwen".into()],
            capacity: 2,
            ..NodeAdvert::default()
        });
        wait_event(&mut events, MembershipEvent::AdvertChanged("b".into())).await;
        let seen = a
            .cluster
            .members()
            .into_iter()
            .find(|m| m.name == "b")
            .unwrap();
        assert_eq!(seen.advert.models, vec!["qwen".to_string()]);
        assert_eq!(seen.advert.name, "b");

        for n in [&a, &b, &c] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_and_request_between_nodes() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;

        // Order per sender is kept, including through a delaying filter.
        a.cluster.filter().delay("b", Duration::from_millis(30));
        for n in 0..50 {
            a.cluster.send("b", env("note", n)).await.unwrap();
        }
        wait_for(|| b.recorder.received().len() == 50).await;
        let got: Vec<u64> = b
            .recorder
            .received()
            .iter()
            .map(|(from, e)| {
                assert_eq!(from, "a");
                e.payload["n"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        a.cluster.filter().clear();

        // A dropped kind never arrives: the next message, sent after it, does.
        a.cluster.filter().drop_kinds(&["lossy"]);
        a.cluster.send("b", env("lossy", 100)).await.unwrap();
        a.cluster.send("b", env("after", 101)).await.unwrap();
        wait_for(|| b.recorder.received().len() == 51).await;
        assert_eq!(b.recorder.received()[50].1.kind, "after");
        a.cluster.filter().clear();

        // Too big for one frame: refused here, and the link keeps working.
        let mut huge = env("huge", 0);
        huge.payload = serde_json::json!("x".repeat(quorum_cluster::MAX_FRAME_BYTES));
        assert!(matches!(
            a.cluster.send("b", huge).await,
            Err(ClusterError::Transport(_))
        ));

        let reply = a
            .cluster
            .request("b", env("echo", 7), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply.kind, "echo_reply");
        assert_eq!(reply.payload["n"], 7);

        let err = a
            .cluster
            .request("b", env("other", 0), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err, ClusterError::Remote("unsupported kind other".into()));

        // Unknown nodes fail at once, not after the timeout.
        let err = a
            .cluster
            .request("nobody", env("echo", 0), Duration::from_secs(3600))
            .await
            .unwrap_err();
        assert_eq!(err, ClusterError::UnknownNode("nobody".into()));
        let err = a.cluster.send("nobody", env("x", 0)).await.unwrap_err();
        assert_eq!(err, ClusterError::UnknownNode("nobody".into()));

        let err = a
            .cluster
            .request("b", env("hang", 0), Duration::from_millis(200))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ClusterError::Timeout {
                node: "b".into(),
                ms: 200
            }
        );

        // To self: delivered locally.
        a.cluster.send("a", env("self", 1)).await.unwrap();
        wait_for(|| a.recorder.received().len() == 1).await;
        assert_eq!(a.recorder.received()[0].0, "a");
        let reply = a
            .cluster
            .request("a", env("echo", 2), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply.payload["n"], 2);

        a.cluster.shutdown().await;
        b.cluster.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_node_is_lost_then_rejoins_after_heal() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        let c = start("c", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;
        let mut a_events = a.cluster.subscribe();
        let mut b_events = b.cluster.subscribe();
        let mut c_events = c.cluster.subscribe();

        // A request in flight to c fails as soon as c is declared lost, not at its timeout.
        let waiting = {
            let a = a.cluster.clone();
            tokio::spawn(async move {
                a.request("c", env("hang", 0), Duration::from_secs(3600))
                    .await
            })
        };
        c.cluster.filter().partition("a");
        c.cluster.filter().partition("b");
        let mut a_seen = wait_event(&mut a_events, MembershipEvent::Lost("c".into())).await;
        wait_event(&mut b_events, MembershipEvent::Lost("c".into())).await;
        wait_event(&mut c_events, MembershipEvent::Lost("a".into())).await;
        assert_eq!(
            waiting.await.unwrap().unwrap_err(),
            ClusterError::NodeLost("c".into())
        );
        assert_eq!(alive_names(&a.cluster), vec!["a", "b"]);
        assert_eq!(
            a.cluster.send("c", env("x", 0)).await.unwrap_err(),
            ClusterError::NodeLost("c".into())
        );
        assert_eq!(
            a.cluster
                .request("c", env("echo", 0), Duration::from_secs(3600))
                .await
                .unwrap_err(),
            ClusterError::NodeLost("c".into())
        );

        c.cluster.filter().heal("a");
        c.cluster.filter().heal("b");
        a_seen.extend(wait_event(&mut a_events, MembershipEvent::Rejoined("c".into())).await);
        wait_event(&mut b_events, MembershipEvent::Rejoined("c".into())).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;
        assert_eq!(request_until_ok(&a.cluster, "c").await.kind, "echo_reply");

        // One loss, one Lost event, however many deadline checks ran while c was silent.
        let count = |ev: MembershipEvent| a_seen.iter().filter(|e| **e == ev).count();
        assert_eq!(count(MembershipEvent::Lost("c".into())), 1);
        assert_eq!(count(MembershipEvent::Rejoined("c".into())), 1);

        for n in [&a, &b, &c] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_is_lost_and_a_restart_on_its_address_rejoins() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        let c = start("c", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;
        let mut a_events = a.cluster.subscribe();
        let mut c_events = c.cluster.subscribe();

        // Graceful: shutdown tells the others.
        let b_addr = b.cluster.local_addr();
        b.cluster.shutdown().await;
        drop(b);
        wait_event(&mut a_events, MembershipEvent::Lost("b".into())).await;
        wait_event(&mut c_events, MembershipEvent::Lost("b".into())).await;

        // Same name and address, no join list: the others redial it by themselves.
        let mut cfg = config("b", &[]);
        cfg.listen = b_addr;
        let b2 = start_with(cfg).await;
        wait_event(&mut a_events, MembershipEvent::Rejoined("b".into())).await;
        wait_event(&mut c_events, MembershipEvent::Rejoined("b".into())).await;
        wait_mesh(&[&a.cluster, &b2.cluster, &c.cluster], &["a", "b", "c"]).await;
        send_until_ok(&a.cluster, "b", env("hello", 1)).await;
        wait_for(|| b2.recorder.received().len() == 1).await;
        assert_eq!(request_until_ok(&b2.cluster, "a").await.kind, "echo_reply");

        // Abrupt: dropping the last handle stops the node without a goodbye.
        drop(c);
        wait_event(&mut a_events, MembershipEvent::Lost("c".into())).await;
        wait_for(|| alive_names(&a.cluster) == ["a", "b"]).await;

        a.cluster.shutdown().await;
        b2.cluster.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_the_wrong_cookie_is_refused() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let b = start("b", &[a.cluster.local_addr()]).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;

        let mut cfg = config("intruder", &[a.cluster.local_addr()]);
        cfg.cookie = "not-the-cookie".into();
        let d = start_with(cfg).await;
        // Refusal is reported once the handshake failed and a later round still had no link.
        let a_addr = a.cluster.local_addr().to_string();
        wait_for(|| d.cluster.refused_peers().contains(&a_addr)).await;

        assert_eq!(alive_names(&d.cluster), vec!["intruder"]);
        assert_eq!(d.cluster.members().len(), 1);
        for n in [&a, &b] {
            assert!(n.cluster.members().iter().all(|m| m.name != "intruder"));
        }
        assert_eq!(
            d.cluster.send("a", env("x", 0)).await.unwrap_err(),
            ClusterError::UnknownNode("a".into())
        );

        for n in [&a, &b, &d] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_a_taken_address_is_a_bind_error() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        let mut cfg = config("b", &[]);
        cfg.listen = a.cluster.local_addr();
        let err = quorum_cluster::Cluster::start(cfg, std::sync::Arc::new(Recorder::default()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClusterError::Bind { addr, .. } if addr == a.cluster.local_addr()),
            "{err}"
        );
        a.cluster.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_authenticates_is_closed() {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start("a", &[]).await;
        // Connects and says nothing, like a stopped process or a port scanner.
        let mut silent = tokio::net::TcpStream::connect(a.cluster.local_addr())
            .await
            .unwrap();
        let mut buf = [0u8; 64];
        loop {
            match silent.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        assert_eq!(a.cluster.members().len(), 1);
        a.cluster.shutdown().await;
    })
    .await
    .unwrap();
}
