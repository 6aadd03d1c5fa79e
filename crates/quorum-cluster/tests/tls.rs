//! Cluster links over TLS: nodes sharing a CA (or one self-signed certificate) mesh; a node whose
//! certificate chain does not verify, or that speaks plain TCP, is refused.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use quorum_cluster::{Cluster, ClusterConfig, ClusterTls};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

fn tls(prefix: &str) -> ClusterTls {
    ClusterTls::from_pem_files(
        &fixture(&format!("{prefix}-node.pem")),
        &fixture(&format!("{prefix}-node.key")),
        Some(&fixture(&format!("{prefix}-ca.pem"))),
        None,
    )
    .unwrap()
}

async fn start_tls(cfg: ClusterConfig, tls: ClusterTls) -> Node {
    init_logs();
    let recorder = Arc::new(Recorder::default());
    let cluster = Cluster::start_tls(cfg, recorder.clone(), tls)
        .await
        .unwrap();
    Node { cluster, recorder }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_sharing_a_ca_mesh_and_others_are_refused() {
    tokio::time::timeout(TEST_LIMIT, async {
        let a = start_tls(config("a", &[]), tls("cluster")).await;
        let b = start_tls(config("b", &[a.cluster.local_addr()]), tls("cluster")).await;
        wait_mesh(&[&a.cluster, &b.cluster], &["a", "b"]).await;
        assert_eq!(request_until_ok(&b.cluster, "a").await.kind, "echo_reply");
        let a_addr = a.cluster.local_addr().to_string();

        // Same cookie, but its roots do not vouch for a's certificate.
        let stranger = start_tls(config("stranger", &[a.cluster.local_addr()]), tls("other")).await;
        // Same cookie, no TLS at all.
        let plain = start("plain", &[a.cluster.local_addr()]).await;
        wait_for(|| {
            stranger.cluster.refused_peers().contains(&a_addr)
                && plain.cluster.refused_peers().contains(&a_addr)
        })
        .await;
        for outsider in [&stranger, &plain] {
            assert_eq!(outsider.cluster.members().len(), 1);
        }
        for n in [&a, &b] {
            let names: Vec<String> = n.cluster.members().into_iter().map(|m| m.name).collect();
            assert_eq!(names.len(), 2, "{names:?}");
        }

        for n in [&a, &b, &stranger, &plain] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_sharing_one_self_signed_certificate_mesh() {
    tokio::time::timeout(TEST_LIMIT, async {
        let shared = || {
            ClusterTls::from_pem_files(
                &fixture("self.pem"),
                &fixture("self.key"),
                None,
                Some("quorum-cluster"),
            )
            .unwrap()
        };
        let a = start_tls(config("a", &[]), shared()).await;
        let b = start_tls(config("b", &[a.cluster.local_addr()]), shared()).await;
        let c = start_tls(config("c", &[a.cluster.local_addr()]), shared()).await;
        wait_mesh(&[&a.cluster, &b.cluster, &c.cluster], &["a", "b", "c"]).await;
        c.cluster
            .blackboard()
            .publish("flow-1", "persona", "notes", "over tls")
            .unwrap();
        wait_for(|| {
            a.cluster.blackboard().read("flow-1", None).len() == 1
                && b.cluster.blackboard().read("flow-1", None).len() == 1
        })
        .await;
        for n in [&a, &b, &c] {
            n.cluster.shutdown().await;
        }
    })
    .await
    .unwrap();
}
