//! Three control planes in one process over the in-memory transport: election, commit, leader
//! loss, epoch fencing, restart from disk, partitions, and a voter whose disk fills.

use quorum_control::{
    Command, ControlConfig, ControlError, ControlPlane, MemNet, Outcome, Rejection,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
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

/// A tmpfs of a fixed size, mounted for one test; `None` where mounting needs a root we lack.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("quorum-raft-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Tmpfs { dir })
    }

    /// Fill the filesystem to its last byte.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.dir.join("filler")).unwrap();
        let block = vec![7u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
        while f.write_all(&[7u8]).is_ok() {}
        let _ = f.sync_all();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a shut-down Raft may still hold its files open for a moment.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A voter whose Raft log cannot be written must not keep voting or leading on facts it could
/// not store: openraft shuts the node's Raft down on a storage error, and the other two, still a
/// majority, go on committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_that_cannot_write_its_log_steps_out_and_the_majority_goes_on() {
    let Some(fs) = Tmpfs::mount("16m") else {
        println!(
            "SKIP: cannot mount a tmpfs here (needs root): a voter with a full disk is not checked"
        );
        return;
    };
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let net = MemNet::new();
        let mut planes = BTreeMap::new();
        for n in names() {
            // n3 keeps its log on the small filesystem, the others on the ordinary one.
            let root = if n == "n3" {
                fs.dir.as_path()
            } else {
                dir.path()
            };
            let p = ControlPlane::start(config(&n, root), net.transport(&n))
                .await
                .unwrap();
            net.register(&p);
            planes.insert(n, p);
        }
        let net = Net { net, planes };
        net.leader().await;
        let n1 = net.get("n1").clone();
        let n3 = net.get("n3").clone();
        fs.fill();

        // Whoever leads (n3 too: it steps out and the others elect one of themselves), the
        // majority commits every fact.
        let mut accepted = None;
        for _ in 0..20 {
            match n1.propose(accept("f", "n1")).await {
                Ok(out) => {
                    accepted = Some(out);
                    break;
                }
                Err(ControlError::Unavailable(_)) => {
                    tokio::time::sleep(Duration::from_millis(250)).await
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(accepted.expect("the majority commits").is_accepted());
        let mut last = 0;
        for seq in 0..5 {
            let (out, i) = n1.propose_at(fact("f", 1, seq)).await.unwrap();
            assert!(out.is_accepted(), "{out:?}");
            last = i;
        }
        net.get("n2").wait_applied(last, WAIT).await.unwrap();
        assert_eq!(net.get("n2").review("f").unwrap().facts.len(), 5);

        // n3 could not store the entries, so it does not claim them, and it is out of the game.
        let held = n3.review("f").map_or(0, |r| r.facts.len());
        assert!(held < 5, "n3 holds {held} facts it could not have stored");
        // The storage error reaches openraft's core a moment after the failed write.
        let mut role = n3.status().role;
        for _ in 0..400 {
            if role == "shut down" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            role = n3.status().role;
        }
        assert_eq!(role, "shut down");
        assert!(n3.propose(fact("f", 1, 5)).await.is_err());
        assert_ne!(n1.leader().as_deref(), Some("n3"));
        net.shutdown().await;
    })
    .await;
}
