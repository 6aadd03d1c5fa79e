//! Node identity on mutual-TLS links: certificates from a cluster CA made here with rcgen name
//! their node; a link is accepted only for the node its certificate names, a frame counts only
//! for the node whose authenticated link it came over (never for what its `from` says), and a
//! client that never finishes its TLS handshake delays nobody else's join.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use quorum_cluster::{Cluster, ClusterConfig, ClusterTls, MembershipEvent, NodeAdvert};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A cluster CA in `dir` (ca.pem) and, for each name, `NAME.pem`/`NAME.key` naming that node.
fn pki(dir: &Path, names: &[&str]) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "identity test ca");
    std::fs::write(dir.join("ca.pem"), ca.self_signed(&ca_key).unwrap().pem()).unwrap();
    let issuer = Issuer::from_params(&ca, &ca_key);
    for name in names {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, *name);
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

fn tls(dir: &Path, cert_of: &str) -> ClusterTls {
    ClusterTls::mutual(
        &dir.join(format!("{cert_of}.pem")),
        &dir.join(format!("{cert_of}.key")),
        &dir.join("ca.pem"),
    )
    .unwrap()
}

async fn start_mtls(cfg: ClusterConfig, tls: ClusterTls) -> Node {
    init_logs();
    let recorder = Arc::new(Recorder::default());
    let cluster = Cluster::start_tls(cfg, recorder.clone(), tls)
        .await
        .unwrap();
    Node { cluster, recorder }
}

fn heartbeat_json(from: &str, incarnation: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "from": from,
        "body": {
            "t": "heartbeat",
            "incarnation": incarnation,
            "advert": serde_json::to_value(NodeAdvert { name: from.into(), ..NodeAdvert::default() }).unwrap(),
            "peers": []
        }
    }))
    .unwrap()
}

/// `from` sends `to` a marker message and waits until `to` has handled it: frames `from`
/// queued for `to` before it have been processed by then (one ordered link).
async fn flush(from: &Node, to: &Node, n: u64) {
    from.cluster
        .send(to.cluster.name(), env("flush", n))
        .await
        .unwrap();
    wait_for(|| {
        to.recorder
            .received()
            .iter()
            .any(|(_, e)| e.kind == "flush" && e.payload["n"] == n)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_in_another_nodes_name_are_rejected() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        pki(dir.path(), &["a", "b", "c"]);
        let a = start_mtls(config("a", &[]), tls(dir.path(), "a")).await;
        let b = start_mtls(config("b", &[a.cluster.local_addr()]), tls(dir.path(), "b")).await;
        let c = start_mtls(config("c", &[a.cluster.local_addr()]), tls(dir.path(), "c")).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;
        assert_eq!(request_until_ok(&b.cluster, "a").await.kind, "echo_reply");
        flush(&b, &a, 0).await;
        let before = a.cluster.rejected_frames();
        let mut events = a.cluster.subscribe();

        // b, a valid member, lies: a heartbeat as c with a new incarnation (which would make a
        // see c restart), and one for a node that does not exist.
        b.cluster
            .send_raw_frame_for_test("a", heartbeat_json("c", 1));
        b.cluster
            .send_raw_frame_for_test("a", heartbeat_json("ghost", 1));
        flush(&b, &a, 1).await;

        assert_eq!(a.cluster.rejected_frames(), before + 2);
        let names: Vec<String> = a.cluster.members().into_iter().map(|m| m.name).collect();
        assert!(!names.contains(&"ghost".to_string()), "{names:?}");
        let mut seen = Vec::new();
        while let Ok(ev) = events.try_recv() {
            seen.push(ev);
        }
        assert!(
            !seen.iter().any(|e| matches!(e,
                MembershipEvent::Rejoined(n) | MembershipEvent::Lost(n) | MembershipEvent::Joined(n)
                if n == "c" || n == "ghost")),
            "{seen:?}"
        );
        // b's own frames still count.
        assert!(a
            .recorder
            .received()
            .iter()
            .any(|(from, e)| from == "b" && e.kind == "flush"));

        for n in [&a, &b, &c] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_counts_only_for_the_node_its_certificate_names() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        pki(dir.path(), &["a", "b"]);
        let a = start_mtls(config("a", &[]), tls(dir.path(), "a")).await;
        // Calls itself "x" but holds b's certificate.
        let x = start_mtls(config("x", &[a.cluster.local_addr()]), tls(dir.path(), "b")).await;
        // Its heartbeats reach a and are refused, several times over.
        wait_for(|| a.cluster.rejected_frames() >= 3).await;
        let names: Vec<String> = a.cluster.members().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["a"]);

        // The real b joins fine next to it.
        let b = start_mtls(config("b", &[a.cluster.local_addr()]), tls(dir.path(), "b")).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;
        for n in [&a, &b, &x] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_tls_client_does_not_delay_another_nodes_join() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        pki(dir.path(), &["a", "b"]);
        let a = start_mtls(config("a", &[]), tls(dir.path(), "a")).await;
        // Connects and never says hello; held open until b has joined.
        let stalled = tokio::net::TcpStream::connect(a.cluster.local_addr())
            .await
            .unwrap();
        let b = start_mtls(config("b", &[a.cluster.local_addr()]), tls(dir.path(), "b")).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;
        assert_eq!(request_until_ok(&b.cluster, "a").await.kind, "echo_reply");
        drop(stalled);
        for n in [&a, &b] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}
