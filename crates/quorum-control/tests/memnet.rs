//! Three control planes in one process over the in-memory transport: election, commit, leader
//! loss, epoch fencing, restart from disk and partitions.

use quorum_control::{
    Command, ControlConfig, ControlError, ControlPlane, MemNet, Outcome, Rejection,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(20);

fn names() -> Vec<String> {
    vec!["n1".into(), "n2".into(), "n3".into()]
}

fn config(name: &str, root: &Path) -> ControlConfig {
    let mut c = ControlConfig::new(name, root.join(name), names());
    c.heartbeat = Duration::from_millis(50);
    c.election_timeout_min = Duration::from_millis(300);
    c.election_timeout_max = Duration::from_millis(600);
    c.rpc_timeout = Duration::from_millis(500);
    c.propose_timeout = Duration::from_secs(10);
    c
}

struct Net {
    net: Arc<MemNet>,
    planes: BTreeMap<String, ControlPlane>,
}

impl Net {
    async fn start(root: &Path, tweak: impl Fn(&mut ControlConfig)) -> Net {
        let net = MemNet::new();
        let mut planes = BTreeMap::new();
        for n in names() {
            let mut cfg = config(&n, root);
            tweak(&mut cfg);
            let p = ControlPlane::start(cfg, net.transport(&n)).await.unwrap();
            net.register(&p);
            planes.insert(n, p);
        }
        Net { net, planes }
    }

    fn get(&self, n: &str) -> &ControlPlane {
        &self.planes[n]
    }

    async fn leader(&self) -> String {
        self.planes
            .values()
            .next()
            .unwrap()
            .wait_for_leader(WAIT)
            .await
            .unwrap()
    }

    async fn kill(&mut self, n: &str) {
        self.net.unregister(n);
        if let Some(p) = self.planes.remove(n) {
            p.shutdown().await;
        }
    }

    async fn shutdown(self) {
        for p in self.planes.values() {
            p.shutdown().await;
        }
    }
}

fn accept(flow: &str, node: &str) -> Command {
    Command::Accept {
        flow_id: flow.into(),
        node: node.into(),
        meta: json!({ "target": "x" }),
    }
}

fn fact(flow: &str, epoch: u64, seq: u64) -> Command {
    Command::AppendFact {
        flow_id: flow.into(),
        epoch,
        seq,
        fact: json!({ "seq": seq }),
    }
}

async fn within<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test ran past its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_is_elected_and_commands_reach_every_replica() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let net = Net::start(dir.path(), |_| {}).await;
        let leader = net.leader().await;
        assert!(names().contains(&leader));
        // Proposed on a follower: forwarded to the leader.
        let follower = names().into_iter().find(|n| *n != leader).unwrap();
        let (out, index) = net
            .get(&follower)
            .propose_at(accept("f1", &follower))
            .await
            .unwrap();
        assert_eq!(out, Outcome::Accepted { epoch: 1 });
        for p in net.planes.values() {
            p.wait_applied(index, WAIT).await.unwrap();
            let r = p.review("f1").expect("replicated");
            assert_eq!((r.conductor.as_str(), r.epoch), (follower.as_str(), 1));
            let status = p.status();
            assert_eq!(status.voters, names());
            assert_eq!(status.leader.as_deref(), Some(leader.as_str()));
        }
        assert!(net.get(&leader).is_leader());
        assert!(!net.get(&follower).is_leader());
        net.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_leader_dies_a_new_leader_commits_and_a_stale_epoch_is_fenced() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let mut net = Net::start(dir.path(), |_| {}).await;
        let old = net.leader().await;
        let p = net.get(&old).clone();
        assert!(p.propose(accept("f", &old)).await.unwrap().is_accepted());
        assert!(p.propose(fact("f", 1, 0)).await.unwrap().is_accepted());
        net.kill(&old).await;

        let survivor = net.planes.keys().next().unwrap().clone();
        let s = net.get(&survivor).clone();
        let t = Command::Takeover {
            flow_id: "f".into(),
            node: survivor.clone(),
            expected_epoch: 1,
        };
        assert_eq!(s.propose(t).await.unwrap(), Outcome::Accepted { epoch: 2 });
        // The proposal only committed because the two survivors elected one of themselves.
        assert_ne!(s.leader().unwrap(), old);

        // The old conductor's epoch is fenced; the new one's facts land after the replicated ones.
        let stale = s.propose(fact("f", 1, 1)).await.unwrap();
        assert!(matches!(
            stale,
            Outcome::Rejected(Rejection::StaleEpoch {
                given: 1,
                current: 2,
                ..
            })
        ));
        let (outcome, index) = s.propose_at(fact("f", 2, 1)).await.unwrap();
        assert!(outcome.is_accepted());
        // The survivor may be a follower: its replica applies the entry a moment after the
        // leader committed it.
        s.wait_applied(index, Duration::from_secs(10))
            .await
            .unwrap();
        let r = s.review("f").unwrap();
        assert_eq!(r.facts, vec![json!({"seq": 0}), json!({"seq": 1})]);
        assert_eq!(r.conductor, survivor);
        let sum = s.summaries();
        assert_eq!(sum.len(), 1);
        assert_eq!((sum[0].epoch, sum[0].facts), (2, 2));
        assert_eq!(sum[0].conductor, survivor);
        net.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_catches_up_from_its_store_and_a_snapshot() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        // Snapshot often and keep no log behind it, so the restarted node can only catch up
        // through a snapshot install.
        let tweak = |c: &mut ControlConfig| {
            c.snapshot_every = 5;
            c.keep_after_snapshot = 0;
        };
        let mut net = Net::start(dir.path(), tweak).await;
        let leader = net.leader().await;
        let down = names().into_iter().find(|n| *n != leader).unwrap();
        let lp = net.get(&leader).clone();
        assert!(lp
            .propose(accept("f", &leader))
            .await
            .unwrap()
            .is_accepted());
        let (_, i) = lp.propose_at(fact("f", 1, 0)).await.unwrap();
        net.get(&down).wait_applied(i, WAIT).await.unwrap();
        net.kill(&down).await;

        let mut last = 0;
        for seq in 1..30 {
            let (out, i) = lp.propose_at(fact("f", 1, seq)).await.unwrap();
            assert!(out.is_accepted(), "{out:?}");
            last = i;
        }

        // Restart from the same directory: it has its old entries and is sent the rest.
        let mut cfg = config(&down, dir.path());
        tweak(&mut cfg);
        let back = ControlPlane::start(cfg, net.net.transport(&down))
            .await
            .unwrap();
        assert!(back.review("f").is_some(), "the old state comes from disk");
        net.net.register(&back);
        back.wait_applied(last, WAIT).await.unwrap();
        let r = back.review("f").unwrap();
        assert_eq!(r.facts.len(), 30);
        assert_eq!(r.facts[29], json!({"seq": 29}));
        net.planes.insert(down, back);
        net.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_minority_cannot_commit_and_the_majority_can() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let net = Net::start(dir.path(), |c| c.propose_timeout = Duration::from_secs(2)).await;
        let leader = net.leader().await;
        let lp = net.get(&leader).clone();
        assert!(lp
            .propose(accept("f", &leader))
            .await
            .unwrap()
            .is_accepted());

        net.net.partition(&leader);
        let cut_off = lp.propose(fact("f", 1, 0)).await;
        assert!(
            matches!(cut_off, Err(ControlError::Unavailable(_))),
            "{cut_off:?}"
        );

        let other = names().into_iter().find(|n| *n != leader).unwrap();
        let op = net.get(&other).clone();
        // The majority elects a leader among itself and commits at the current epoch.
        let t = Command::Takeover {
            flow_id: "f".into(),
            node: other.clone(),
            expected_epoch: 1,
        };
        assert_eq!(op.propose(t).await.unwrap(), Outcome::Accepted { epoch: 2 });
        let new = op.leader().unwrap();
        assert_ne!(new, leader);
        let (_, i) = op.propose_at(fact("f", 2, 0)).await.unwrap();

        // Healed, the old leader follows and holds what the majority decided, and none of the
        // facts it tried to add alone.
        net.net.heal(&leader);
        lp.wait_applied(i, WAIT).await.unwrap();
        let r = lp.review("f").unwrap();
        assert_eq!((r.epoch, r.conductor.as_str()), (2, other.as_str()));
        assert_eq!(r.facts, vec![json!({"seq": 0})]);
        assert!(!lp.is_leader());
        net.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_voter_list_that_cannot_survive_a_loss_is_refused() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let net = MemNet::new();
        for voters in [
            vec!["a".to_string()],
            vec!["a".into(), "b".into()],
            vec!["a".into(), "a".into(), "b".into()],
        ] {
            assert!(!ControlConfig::takeover_available(&voters) || voters.len() == 3);
            let cfg = ControlConfig::new("a", dir.path().join("a"), voters);
            let r = ControlPlane::start(cfg, net.transport("a")).await;
            assert!(matches!(r, Err(ControlError::Config(_))));
        }
    })
    .await;
}
