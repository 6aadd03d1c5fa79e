//! Three control planes over real `quorum_cluster` nodes on loopback: the Raft messages travel
//! as cluster requests, a leader is elected, commands commit, and losing the leader's node
//! (its cluster link cut by the transport filter) lets the others elect a new one.

use quorum_cluster::{Cluster, ClusterConfig, Envelope, MessageHandler};
use quorum_control::{
    handle_envelope, is_control_kind, ClusterTransport, Command, ControlConfig, ControlPlane,
    Outcome,
};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);
const WAIT: Duration = Duration::from_secs(30);

/// Routes control-plane kinds to the plane, and counts them so the test can see the traffic.
#[derive(Default)]
struct Handler {
    plane: OnceLock<ControlPlane>,
    control_requests: AtomicUsize,
}

#[async_trait::async_trait]
impl MessageHandler for Handler {
    async fn on_message(&self, _from: &str, _msg: Envelope) {}

    async fn on_request(&self, _from: &str, msg: Envelope) -> Result<Envelope, String> {
        if !is_control_kind(&msg.kind) {
            return Err(format!("unsupported kind {}", msg.kind));
        }
        let Some(plane) = self.plane.get() else {
            return Err("control plane not started".into());
        };
        self.control_requests.fetch_add(1, Ordering::Relaxed);
        handle_envelope(plane, msg).await
    }
}

struct Node {
    cluster: Cluster,
    plane: ControlPlane,
    handler: Arc<Handler>,
}

async fn start(name: &str, join: &[SocketAddr], root: &std::path::Path) -> Node {
    let mut cfg = ClusterConfig::new(name, "127.0.0.1:0".parse().unwrap(), "cookie");
    cfg.join = join.iter().map(|a| a.to_string()).collect();
    cfg.heartbeat_interval = Duration::from_millis(100);
    cfg.heartbeat_deadline = Duration::from_millis(600);
    cfg.reconnect_interval = Duration::from_millis(100);
    let handler = Arc::new(Handler::default());
    let cluster = Cluster::start(cfg, handler.clone()).await.unwrap();
    let transport = ClusterTransport::new();
    transport.bind(cluster.clone());
    let mut cc = ControlConfig::new(
        name,
        root.join(name),
        vec!["a".into(), "b".into(), "c".into()],
    );
    cc.heartbeat = Duration::from_millis(100);
    cc.election_timeout_min = Duration::from_millis(500);
    cc.election_timeout_max = Duration::from_millis(1000);
    cc.rpc_timeout = Duration::from_millis(800);
    let plane = ControlPlane::start(cc, Arc::new(transport)).await.unwrap();
    let _ = handler.plane.set(plane.clone());
    Node {
        cluster,
        plane,
        handler,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_over_cluster_requests_elects_commits_and_survives_the_leader() {
    tokio::time::timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let a = start("a", &[], dir.path()).await;
        let b = start("b", &[a.cluster.local_addr()], dir.path()).await;
        let c = start("c", &[a.cluster.local_addr()], dir.path()).await;
        let nodes = [&a, &b, &c];

        let leader = a.plane.wait_for_leader(WAIT).await.unwrap();
        let (out, i) = c
            .plane
            .propose_at(Command::Accept {
                flow_id: "f".into(),
                node: "c".into(),
                meta: json!({}),
            })
            .await
            .unwrap();
        assert_eq!(out, Outcome::Accepted { epoch: 1 });
        for n in nodes {
            n.plane.wait_applied(i, WAIT).await.unwrap();
            assert_eq!(n.plane.review("f").unwrap().conductor, "c");
            assert!(
                n.handler.control_requests.load(Ordering::Relaxed) > 0,
                "Raft traffic went through the cluster"
            );
        }

        // Cut the leader off at the cluster layer; the other two elect a new leader and commit.
        let old = nodes.iter().find(|n| n.plane.name() == leader).unwrap();
        let rest: Vec<&&Node> = nodes.iter().filter(|n| n.plane.name() != leader).collect();
        for r in &rest {
            r.cluster.filter().partition(&leader);
            old.cluster.filter().partition(r.plane.name());
        }
        let t = Command::Takeover {
            flow_id: "f".into(),
            node: rest[0].plane.name().into(),
            expected_epoch: 1,
        };
        assert_eq!(
            rest[0].plane.propose(t).await.unwrap(),
            Outcome::Accepted { epoch: 2 }
        );
        assert_ne!(rest[0].plane.leader().as_deref(), Some(leader.as_str()));
        for n in nodes {
            n.plane.shutdown().await;
            n.cluster.shutdown().await;
        }
    })
    .await
    .expect("test ran past its limit");
}
