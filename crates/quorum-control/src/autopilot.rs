//! Autopilot: what the Raft leader does about a voter that stays lost — a pure decision (the
//! voters, how long each has been silent, the live learners and how far each has replicated
//! in, one step out), so the rule is tested without a cluster. The node's leader loop carries
//! a `Replace` out with [`ControlPlane::change_voters`](crate::ControlPlane::change_voters).

use std::collections::BTreeMap;

/// A member as the autopilot sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Milliseconds since it was last heard from; `None` while it is up.
    pub lost_for_ms: Option<u64>,
    /// It said it is leaving (SIGTERM): never promoted.
    pub draining: bool,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every voter is up.
    Idle,
    /// A voter is lost, but not for `grace` yet.
    Waiting { voter: String, left_ms: u64 },
    /// A voter has been lost past `grace`: `learner` (the live one that has replicated the
    /// most) takes its place.
    Replace { voter: String, learner: String },
    /// A voter has been lost past `grace` and no live learner can take its place.
    NoCandidate { voter: String },
}

/// The step for these voters and members. `matched` is each learner's last replicated log
/// index as the leader sees it (a learner missing from it has replicated nothing yet). One
/// voter at a time, the longest-lost first.
pub fn decide(
    voters: &[String],
    members: &BTreeMap<String, Seen>,
    matched: &BTreeMap<String, u64>,
    grace_ms: u64,
) -> Step {
    let lost = voters
        .iter()
        .filter_map(|v| {
            // A voter never heard from at all counts as lost from the start of this view.
            let seen = members.get(v).map_or(Some(u64::MAX), |s| s.lost_for_ms);
            seen.map(|ms| (v, ms))
        })
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)));
    let Some((voter, lost_ms)) = lost else {
        return Step::Idle;
    };
    if lost_ms < grace_ms {
        return Step::Waiting {
            voter: voter.clone(),
            left_ms: grace_ms - lost_ms,
        };
    }
    let candidate = members
        .iter()
        .filter(|(name, s)| s.lost_for_ms.is_none() && !s.draining && !voters.contains(name))
        .max_by(|a, b| {
            let ma = matched.get(a.0).copied().unwrap_or(0);
            let mb = matched.get(b.0).copied().unwrap_or(0);
            ma.cmp(&mb).then_with(|| b.0.cmp(a.0))
        });
    match candidate {
        Some((learner, _)) => Step::Replace {
            voter: voter.clone(),
            learner: learner.clone(),
        },
        None => Step::NoCandidate {
            voter: voter.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up() -> Seen {
        Seen {
            lost_for_ms: None,
            draining: false,
        }
    }

    fn lost(ms: u64) -> Seen {
        Seen {
            lost_for_ms: Some(ms),
            draining: false,
        }
    }

    fn voters() -> Vec<String> {
        ["n1", "n2", "n3"].map(String::from).to_vec()
    }

    fn members(entries: &[(&str, Seen)]) -> BTreeMap<String, Seen> {
        entries
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect()
    }

    #[test]
    fn all_voters_up_is_idle() {
        let m = members(&[("n1", up()), ("n2", up()), ("n3", up()), ("n4", up())]);
        assert_eq!(decide(&voters(), &m, &BTreeMap::new(), 1000), Step::Idle);
    }

    #[test]
    fn a_voter_lost_within_the_grace_is_waited_for() {
        let m = members(&[("n1", up()), ("n2", lost(400)), ("n3", up()), ("n4", up())]);
        assert_eq!(
            decide(&voters(), &m, &BTreeMap::new(), 1000),
            Step::Waiting {
                voter: "n2".into(),
                left_ms: 600
            }
        );
    }

    #[test]
    fn past_the_grace_the_most_replicated_live_learner_replaces_it() {
        let m = members(&[
            ("n1", up()),
            ("n2", lost(5000)),
            ("n3", up()),
            ("n4", up()),
            ("n5", up()),
            ("n6", lost(10)),
            (
                "n7",
                Seen {
                    lost_for_ms: None,
                    draining: true,
                },
            ),
        ]);
        let matched = BTreeMap::from([
            ("n4".to_string(), 10),
            ("n5".to_string(), 12),
            ("n6".to_string(), 99),
            ("n7".to_string(), 99),
        ]);
        assert_eq!(
            decide(&voters(), &m, &matched, 1000),
            Step::Replace {
                voter: "n2".into(),
                learner: "n5".into()
            }
        );
    }

    #[test]
    fn without_a_live_learner_it_says_so() {
        let m = members(&[("n1", up()), ("n2", lost(5000)), ("n3", up())]);
        assert_eq!(
            decide(&voters(), &m, &BTreeMap::new(), 1000),
            Step::NoCandidate { voter: "n2".into() }
        );
    }

    #[test]
    fn the_longest_lost_voter_goes_first_and_an_unseen_one_is_lost() {
        let m = members(&[("n1", up()), ("n2", lost(2000)), ("n4", up())]);
        assert_eq!(
            decide(&voters(), &m, &BTreeMap::new(), 1000),
            Step::Replace {
                voter: "n3".into(),
                learner: "n4".into()
            }
        );
    }
}
