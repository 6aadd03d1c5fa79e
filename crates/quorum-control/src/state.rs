//! The replicated state machine's data and its commands, as pure functions: what a committed
//! command does to the reviews is decided here and nowhere else, so every replica agrees.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What the cluster agrees about one review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRecord {
    /// The node that conducts the review now.
    pub conductor: String,
    /// Bumped by every takeover; facts are accepted only at the current epoch.
    pub epoch: u64,
    /// What the accepting node said about the review (the submit request, as JSON).
    pub meta: serde_json::Value,
    /// Every fact committed for the review, in order.
    pub facts: Vec<serde_json::Value>,
    /// Nodes known to hold every blob of the review's pack.
    pub pack_holders: BTreeSet<String>,
    pub finished: bool,
}

/// A review's record without its facts: what the takeover loop reads on every tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewSummary {
    pub flow_id: String,
    pub conductor: String,
    pub epoch: u64,
    pub facts: usize,
    pub pack_holders: BTreeSet<String>,
    pub finished: bool,
}

/// A change to the control plane's state. Every command is a compare-and-set on the review's
/// epoch (or its absence), so a retry after a lost reply never applies twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// `node` accepted a new review; it conducts it at epoch 1.
    Accept {
        flow_id: String,
        node: String,
        meta: serde_json::Value,
    },
    /// `node` takes the review over from a conductor at `expected_epoch`.
    Takeover {
        flow_id: String,
        node: String,
        expected_epoch: u64,
    },
    /// The conductor at `epoch` records the fact at position `seq` (the number of facts it has
    /// seen before this one).
    AppendFact {
        flow_id: String,
        epoch: u64,
        seq: u64,
        fact: serde_json::Value,
    },
    /// `node` holds every blob of the review's pack.
    PackHeld { flow_id: String, node: String },
    /// The conductor at `epoch` finished the review.
    Finish { flow_id: String, epoch: u64 },
    /// Drop the review's record (garbage collection after it is finished and reported).
    Forget { flow_id: String },
}

impl Command {
    pub fn flow_id(&self) -> &str {
        match self {
            Command::Accept { flow_id, .. }
            | Command::Takeover { flow_id, .. }
            | Command::AppendFact { flow_id, .. }
            | Command::PackHeld { flow_id, .. }
            | Command::Finish { flow_id, .. }
            | Command::Forget { flow_id } => flow_id,
        }
    }
}

/// Why a command was not applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Rejection {
    #[error("no review {0} is known to the control plane")]
    UnknownReview(String),
    #[error("review is already conducted by {conductor} at epoch {epoch}")]
    AlreadyAccepted { conductor: String, epoch: u64 },
    /// The fencing rejection: the caller's epoch is not the review's current one.
    #[error("stale epoch {given}: the review is at epoch {current}, conducted by {conductor}")]
    StaleEpoch {
        given: u64,
        current: u64,
        conductor: String,
    },
    #[error("review is finished")]
    Finished,
    #[error("fact out of order: {given} given, {expected} expected")]
    OutOfOrder { given: u64, expected: u64 },
}

/// What a committed command did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Applied (or found already applied); `epoch` is the review's epoch afterwards.
    Accepted {
        epoch: u64,
    },
    Rejected(Rejection),
    /// A Raft-internal entry (blank or membership) with no application effect.
    #[default]
    Noop,
}

impl Outcome {
    pub fn is_accepted(&self) -> bool {
        matches!(self, Outcome::Accepted { .. })
    }
}

/// Every review the control plane knows about.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reviews {
    pub reviews: BTreeMap<String, ReviewRecord>,
}

impl Reviews {
    /// Apply one committed command. Deterministic: it reads nothing but `self` and `cmd`.
    pub fn apply(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::Accept {
                flow_id,
                node,
                meta,
            } => match self.reviews.get(flow_id) {
                // The same accept, retried after a lost reply.
                Some(r) if r.epoch == 1 && &r.conductor == node => Outcome::Accepted { epoch: 1 },
                Some(r) => Outcome::Rejected(Rejection::AlreadyAccepted {
                    conductor: r.conductor.clone(),
                    epoch: r.epoch,
                }),
                None => {
                    self.reviews.insert(
                        flow_id.clone(),
                        ReviewRecord {
                            conductor: node.clone(),
                            epoch: 1,
                            meta: meta.clone(),
                            facts: Vec::new(),
                            pack_holders: BTreeSet::new(),
                            finished: false,
                        },
                    );
                    Outcome::Accepted { epoch: 1 }
                }
            },
            Command::Takeover {
                flow_id,
                node,
                expected_epoch,
            } => {
                let Some(r) = self.reviews.get_mut(flow_id) else {
                    return Outcome::Rejected(Rejection::UnknownReview(flow_id.clone()));
                };
                if r.epoch == expected_epoch + 1 && &r.conductor == node {
                    return Outcome::Accepted { epoch: r.epoch };
                }
                if r.finished {
                    return Outcome::Rejected(Rejection::Finished);
                }
                if r.epoch != *expected_epoch {
                    return Outcome::Rejected(Rejection::StaleEpoch {
                        given: *expected_epoch,
                        current: r.epoch,
                        conductor: r.conductor.clone(),
                    });
                }
                r.epoch += 1;
                r.conductor = node.clone();
                Outcome::Accepted { epoch: r.epoch }
            }
            Command::AppendFact {
                flow_id,
                epoch,
                seq,
                fact,
            } => {
                let Some(r) = self.reviews.get_mut(flow_id) else {
                    return Outcome::Rejected(Rejection::UnknownReview(flow_id.clone()));
                };
                if r.epoch != *epoch {
                    return Outcome::Rejected(Rejection::StaleEpoch {
                        given: *epoch,
                        current: r.epoch,
                        conductor: r.conductor.clone(),
                    });
                }
                let len = r.facts.len() as u64;
                if *seq < len && r.facts.get(*seq as usize) == Some(fact) {
                    // The same fact, retried after a lost reply.
                    return Outcome::Accepted { epoch: r.epoch };
                }
                if r.finished {
                    return Outcome::Rejected(Rejection::Finished);
                }
                if *seq != len {
                    return Outcome::Rejected(Rejection::OutOfOrder {
                        given: *seq,
                        expected: len,
                    });
                }
                r.facts.push(fact.clone());
                Outcome::Accepted { epoch: r.epoch }
            }
            Command::PackHeld { flow_id, node } => {
                let Some(r) = self.reviews.get_mut(flow_id) else {
                    return Outcome::Rejected(Rejection::UnknownReview(flow_id.clone()));
                };
                r.pack_holders.insert(node.clone());
                Outcome::Accepted { epoch: r.epoch }
            }
            Command::Finish { flow_id, epoch } => {
                let Some(r) = self.reviews.get_mut(flow_id) else {
                    return Outcome::Rejected(Rejection::UnknownReview(flow_id.clone()));
                };
                if r.epoch != *epoch {
                    return Outcome::Rejected(Rejection::StaleEpoch {
                        given: *epoch,
                        current: r.epoch,
                        conductor: r.conductor.clone(),
                    });
                }
                r.finished = true;
                Outcome::Accepted { epoch: r.epoch }
            }
            Command::Forget { flow_id } => match self.reviews.remove(flow_id) {
                Some(r) => Outcome::Accepted { epoch: r.epoch },
                // Forgetting twice is the same as forgetting once.
                None => Outcome::Accepted { epoch: 0 },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn accept(r: &mut Reviews, node: &str) -> Outcome {
        r.apply(&Command::Accept {
            flow_id: "f".into(),
            node: node.into(),
            meta: json!({}),
        })
    }

    fn fact(r: &mut Reviews, epoch: u64, seq: u64, v: u64) -> Outcome {
        r.apply(&Command::AppendFact {
            flow_id: "f".into(),
            epoch,
            seq,
            fact: json!({ "n": v }),
        })
    }

    #[test]
    fn accept_is_idempotent_for_its_node_and_exclusive_for_others() {
        let mut r = Reviews::default();
        assert_eq!(accept(&mut r, "a"), Outcome::Accepted { epoch: 1 });
        assert_eq!(accept(&mut r, "a"), Outcome::Accepted { epoch: 1 });
        assert!(matches!(
            accept(&mut r, "b"),
            Outcome::Rejected(Rejection::AlreadyAccepted { .. })
        ));
    }

    #[test]
    fn takeover_fences_the_old_conductor() {
        let mut r = Reviews::default();
        accept(&mut r, "a");
        assert!(fact(&mut r, 1, 0, 0).is_accepted());
        let t = Command::Takeover {
            flow_id: "f".into(),
            node: "b".into(),
            expected_epoch: 1,
        };
        assert_eq!(r.apply(&t), Outcome::Accepted { epoch: 2 });
        // A retried takeover by the same node is the same takeover.
        assert_eq!(r.apply(&t), Outcome::Accepted { epoch: 2 });
        // A second node racing on the old epoch loses.
        let c = Command::Takeover {
            flow_id: "f".into(),
            node: "c".into(),
            expected_epoch: 1,
        };
        assert!(matches!(
            r.apply(&c),
            Outcome::Rejected(Rejection::StaleEpoch { current: 2, .. })
        ));
        assert!(matches!(
            fact(&mut r, 1, 1, 1),
            Outcome::Rejected(Rejection::StaleEpoch {
                given: 1,
                current: 2,
                ..
            })
        ));
        assert!(fact(&mut r, 2, 1, 1).is_accepted());
        assert_eq!(r.reviews["f"].facts.len(), 2);
        assert_eq!(r.reviews["f"].conductor, "b");
    }

    #[test]
    fn facts_are_exactly_once_and_in_order() {
        let mut r = Reviews::default();
        accept(&mut r, "a");
        assert!(fact(&mut r, 1, 0, 10).is_accepted());
        assert!(fact(&mut r, 1, 0, 10).is_accepted());
        assert!(matches!(
            fact(&mut r, 1, 0, 11),
            Outcome::Rejected(Rejection::OutOfOrder { .. })
        ));
        assert!(matches!(
            fact(&mut r, 1, 5, 11),
            Outcome::Rejected(Rejection::OutOfOrder { expected: 1, .. })
        ));
        assert_eq!(r.reviews["f"].facts, vec![json!({"n": 10})]);
    }

    #[test]
    fn finish_needs_the_current_epoch_and_closes_the_review() {
        let mut r = Reviews::default();
        accept(&mut r, "a");
        let stale = Command::Finish {
            flow_id: "f".into(),
            epoch: 7,
        };
        assert!(!r.apply(&stale).is_accepted());
        let fin = Command::Finish {
            flow_id: "f".into(),
            epoch: 1,
        };
        assert!(r.apply(&fin).is_accepted());
        assert_eq!(
            fact(&mut r, 1, 0, 1),
            Outcome::Rejected(Rejection::Finished)
        );
        let t = Command::Takeover {
            flow_id: "f".into(),
            node: "b".into(),
            expected_epoch: 1,
        };
        assert_eq!(r.apply(&t), Outcome::Rejected(Rejection::Finished));
        let forget = Command::Forget {
            flow_id: "f".into(),
        };
        assert!(r.apply(&forget).is_accepted());
        assert!(r.apply(&forget).is_accepted());
        assert!(r.reviews.is_empty());
    }

    #[test]
    fn pack_holders_accumulate() {
        let mut r = Reviews::default();
        accept(&mut r, "a");
        for n in ["a", "b", "a"] {
            let c = Command::PackHeld {
                flow_id: "f".into(),
                node: n.into(),
            };
            assert!(r.apply(&c).is_accepted());
        }
        assert_eq!(r.reviews["f"].pack_holders.len(), 2);
    }
}
