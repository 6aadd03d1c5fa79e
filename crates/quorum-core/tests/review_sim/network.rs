//! The simulated world outside the conductor: what reaches it from the network and the peers
//! (held while a peer is paused or cut off, dropped, duplicated, delayed), how a stage answers
//! or fails, and the faults injected between deliveries.

use crate::sim::{Msg, NodeState, Sim};
use crate::world::{answer, world};
use quorum_core::machine::schedule::{AttemptId, Place};
use quorum_core::machine::{AttemptOutcome, Event, Failure, Job};

impl Sim {
    /// A delivery reaching the conductor: the event it is, if it still means anything.
    pub(crate) fn arrive(&mut self, msg: Msg) -> Option<Event> {
        match msg {
            Msg::Event(e) => Some(e),
            Msg::Timer(t, inc) => (inc == self.incarnation).then_some(Event::Timer(t)),
            Msg::Local(attempt, outcome, inc) => {
                (inc == self.incarnation).then_some(Event::Outcome {
                    attempt,
                    from: Place::Local,
                    outcome,
                })
            }
            Msg::PeerDone(node, attempt) => {
                let n = self.nodes.get_mut(&node)?;
                let (job, _) = n.running.remove(&attempt)?;
                let outcome = self.outcome_of(&job);
                let msg = Msg::Event(Event::Outcome {
                    attempt,
                    from: Place::Peer(node.clone()),
                    outcome,
                });
                self.send_from(&node, msg)
            }
            Msg::PeerRenew(node) => {
                let n = self.nodes.get(&node)?;
                if n.running.is_empty() || n.state == NodeState::Dead {
                    return None;
                }
                let attempts: Vec<AttemptId> = n.running.keys().copied().collect();
                self.deliver(100, Msg::PeerRenew(node.clone()));
                for a in attempts {
                    let m = Msg::Event(Event::Renew {
                        attempt: a,
                        from: node.clone(),
                    });
                    if let Some(e) = self.send_from(&node, m) {
                        self.deliver_in(30, Msg::Event(e));
                    }
                }
                None
            }
        }
    }

    /// A message from a peer: held while it is paused or cut off, sometimes duplicated,
    /// delayed or dropped on the way.
    pub(crate) fn send_from(&mut self, node: &str, msg: Msg) -> Option<Event> {
        let state = self.nodes.get(node).map(|n| n.state)?;
        match state {
            NodeState::Dead => None,
            NodeState::Paused | NodeState::Partitioned => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.held.push(msg);
                }
                None
            }
            NodeState::Up => {
                if self.rng.chance(3) {
                    return None;
                }
                if self.rng.chance(5) {
                    let again = msg.clone();
                    self.deliver_in(500, again);
                }
                match msg {
                    Msg::Event(e) => Some(e),
                    other => {
                        self.deliver(0, other);
                        None
                    }
                }
            }
        }
    }

    pub(crate) fn outcome_of(&mut self, job: &Job) -> AttemptOutcome {
        if self.rng.chance(12) {
            let class = *self.rng.pick(&[
                "malformed_output",
                "malformed_output",
                "timeout",
                "transport",
                "rate_limited",
            ]);
            return Err(Failure {
                class: class.into(),
                message: format!("simulated {class}"),
                retryable: !self.rng.chance(10),
            });
        }
        let w = world();
        Ok(answer(
            &mut self.rng,
            &w.pack,
            &w.reviewers,
            &w.catalog,
            job,
        ))
    }

    /// Faults injected between deliveries.
    pub(crate) fn faults(&mut self) {
        if self.cancel_at.is_some_and(|t| self.now >= t) {
            self.cancel_at = None;
            self.deliver(
                0,
                Msg::Event(Event::Cancel {
                    reason: "cancelled by the simulation".into(),
                }),
            );
        }
        if self.rng.chance(1) {
            // A forged result: another node claims an attempt it was never given.
            let live: Vec<(AttemptId, Place)> = self
                .started
                .iter()
                .filter(|(a, s)| s.epoch == self.epoch && !self.fenced.contains(a))
                .map(|(a, s)| (*a, s.place.clone()))
                .collect();
            if !live.is_empty() {
                let (attempt, place) = self.rng.pick(&live).clone();
                let names: Vec<String> = self.nodes.keys().cloned().collect();
                let liar = self.rng.pick(&names).clone();
                if Place::Peer(liar.clone()) != place {
                    let w = world();
                    let job = Job::Scout;
                    let outcome = Ok(answer(
                        &mut self.rng,
                        &w.pack,
                        &w.reviewers,
                        &w.catalog,
                        &job,
                    ));
                    self.deliver(
                        0,
                        Msg::Event(Event::Outcome {
                            attempt,
                            from: Place::Peer(liar),
                            outcome,
                        }),
                    );
                }
            }
        }
        if !self.rng.chance(4) {
            return;
        }
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        let node = self.rng.pick(&names).clone();
        let state = self.nodes[&node].state;
        match (state, self.rng.below(6)) {
            (NodeState::Up, 0) => {
                // Killed: its work is gone; membership may or may not notice.
                let n = self.nodes.get_mut(&node).expect("node");
                n.state = NodeState::Dead;
                n.running.clear();
                n.held.clear();
                if self.rng.chance(60) {
                    n.told_lost = true;
                    self.deliver_in(800, Msg::Event(Event::NodeLost { node }));
                }
            }
            (NodeState::Up, 1) => {
                self.nodes.get_mut(&node).expect("node").state = NodeState::Paused
            }
            (NodeState::Up, 2) => {
                let n = self.nodes.get_mut(&node).expect("node");
                n.state = NodeState::Partitioned;
                if self.rng.chance(50) {
                    n.told_lost = true;
                    self.deliver_in(800, Msg::Event(Event::NodeLost { node }));
                }
            }
            (NodeState::Paused, _) | (NodeState::Partitioned, _) => {
                // Resumed or healed: what it held arrives late.
                let n = self.nodes.get_mut(&node).expect("node");
                n.state = NodeState::Up;
                let held = std::mem::take(&mut n.held);
                let rejoin = std::mem::take(&mut n.told_lost);
                for m in held {
                    self.deliver_in(300, m);
                }
                if rejoin {
                    let offers = self.offers();
                    self.immediate.push_back(Event::Peers(offers));
                    self.immediate.push_back(Event::NodeJoined { node });
                }
            }
            (NodeState::Dead, 0) | (NodeState::Dead, 1) => {
                // Restarted on its data dir: empty, and heard of again.
                let n = self.nodes.get_mut(&node).expect("node");
                n.state = NodeState::Up;
                n.told_lost = false;
                let offers = self.offers();
                self.immediate.push_back(Event::Peers(offers));
                self.immediate.push_back(Event::NodeJoined { node });
            }
            _ => {}
        }
    }
}
