//! The leader's autopilot: a voter lost longer than the grace period is replaced by the live
//! learner that has replicated the most, through the same online change as `quorum cluster
//! voters replace` (openraft's joint consensus). The rule is `quorum_control::autopilot::decide`;
//! this room only gathers what it needs and carries a step out, saying each new state once.

use quorum_cluster::Cluster;
use quorum_control::autopilot::{decide, Seen, Step};
use quorum_control::{ChangeError, ControlPlane, VoterChange};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The autopilot of one node (it acts only while the node leads).
pub struct Autopilot {
    grace: Duration,
    /// When a voter missing from the membership view was first noticed missing.
    absent_since: Mutex<HashMap<String, Instant>>,
    /// The last step said (and when), so a state is logged once, not every tick, and
    /// `cluster status` can show it.
    said: Mutex<Option<(Step, Instant)>>,
}

impl Autopilot {
    pub fn new(grace: Duration) -> Autopilot {
        Autopilot {
            grace,
            absent_since: Mutex::new(HashMap::new()),
            said: Mutex::new(None),
        }
    }

    /// What the autopilot is doing, in a few words (for `quorum cluster status`).
    pub fn describe(&self, leads: bool) -> String {
        if !leads {
            return format!("grace {} s, acts on the leader", self.grace.as_secs());
        }
        let said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        match &*said {
            None | Some((Step::Idle, _)) | Some((Step::Replace { .. }, _)) => {
                format!("every voter up (grace {} s)", self.grace.as_secs())
            }
            Some((Step::Waiting { voter, left_ms }, at)) => {
                let left = Duration::from_millis(*left_ms).saturating_sub(at.elapsed());
                format!(
                    "voter {voter} lost; replacing it in {} s unless it comes back",
                    left.as_secs()
                )
            }
            Some((Step::NoCandidate { voter }, _)) => format!(
                "voter {voter} lost past the grace; no live learner can replace it: start another node"
            ),
        }
    }

    /// One look at the cluster; replaces a voter when the rule says so.
    pub async fn step(&self, plane: &ControlPlane, cluster: &Cluster) {
        if !plane.is_leader() {
            return;
        }
        let status = plane.status();
        let mut members: BTreeMap<String, Seen> = cluster
            .members()
            .into_iter()
            .map(|m| {
                let seen = Seen {
                    lost_for_ms: (!m.alive).then_some(m.last_seen_ms_ago),
                    draining: m.advert.draining,
                };
                (m.name, seen)
            })
            .collect();
        {
            let mut absent = self.absent_since.lock().unwrap_or_else(|p| p.into_inner());
            absent.retain(|name, _| !members.contains_key(name));
            let unseen: Vec<String> = status
                .voters
                .iter()
                .filter(|v| !members.contains_key(*v))
                .cloned()
                .collect();
            for v in unseen {
                let since = *absent.entry(v.clone()).or_insert_with(Instant::now);
                members.insert(
                    v,
                    Seen {
                        lost_for_ms: Some(since.elapsed().as_millis() as u64),
                        draining: false,
                    },
                );
            }
        }
        let step = decide(
            &status.voters,
            &members,
            &plane.replication_matched(),
            self.grace.as_millis() as u64,
        );
        self.say(&step);
        if let Step::Replace { voter, learner } = step {
            let change = VoterChange {
                add: vec![learner.clone()],
                remove: vec![voter.clone()],
            };
            match plane.change_voters(change).await {
                Ok(voters) => tracing::warn!(
                    lost = %voter, promoted = %learner, voters = ?voters,
                    "autopilot: replaced a voter lost past the grace period"
                ),
                Err(ChangeError::Refused(why) | ChangeError::Unavailable(why)) => {
                    tracing::warn!(lost = %voter, candidate = %learner, error = %why, "autopilot: cannot replace the lost voter yet")
                }
            }
        }
    }

    fn say(&self, step: &Step) {
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        let same_state = match (&*said, step) {
            (Some((Step::Waiting { voter: a, .. }, _)), Step::Waiting { voter: b, .. }) => a == b,
            (Some((prev, _)), now) => prev == now,
            (None, _) => false,
        };
        if same_state {
            return;
        }
        match step {
            Step::Idle => {}
            Step::Waiting { voter, left_ms } => tracing::warn!(
                lost = %voter,
                "autopilot: voter lost; replacing it in {} s unless it comes back",
                left_ms / 1000
            ),
            Step::NoCandidate { voter } => tracing::warn!(
                lost = %voter,
                "autopilot: voter lost past the grace period and no live learner can replace it: start another node"
            ),
            Step::Replace { .. } => {}
        }
        *said = Some((step.clone(), Instant::now()));
    }
}
