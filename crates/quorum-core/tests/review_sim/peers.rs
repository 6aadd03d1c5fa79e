//! What the simulated peers tell a conductor: the work they offer to take, and, to a conductor
//! that restarts, the attempts of the review they still run (what it may adopt).

use crate::sim::{NodeState, Sim};
use quorum_core::machine::{AttemptClaim, Job, PeerOffer};

impl Sim {
    /// What the live peers answer a new conductor that asks which attempts of the review they
    /// still run: every specialist attempt they hold (a paused or cut-off node does not
    /// answer). The machine adopts only those its replay shows in flight there.
    pub(crate) fn claims(&self) -> Vec<AttemptClaim> {
        let mut claims = Vec::new();
        for (name, n) in &self.nodes {
            if n.state != NodeState::Up {
                continue;
            }
            for (attempt, (job, _)) in &n.running {
                if let (Job::Specialist { .. }, Some(s)) = (job, self.started.get(attempt)) {
                    claims.push(AttemptClaim {
                        node: name.clone(),
                        attempt: *attempt,
                        task_id: s.task.clone(),
                        number: s.number,
                    });
                }
            }
        }
        claims
    }

    pub(crate) fn offers(&self) -> Vec<PeerOffer> {
        self.nodes
            .iter()
            .filter(|(_, n)| !(n.state == NodeState::Dead && n.told_lost))
            .map(|(name, n)| PeerOffer {
                node: name.clone(),
                capacity: n.capacity,
                models: vec!["llama3.1-sim".into()],
            })
            .collect()
    }
}
