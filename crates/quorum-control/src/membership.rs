//! Changing the voters online: which voter set a request asks for (a pure check, so every
//! refusal is one line saying why), and carrying it out on the leader with openraft's joint
//! consensus — each new voter added as a learner and caught up first, each removed voter kept
//! as a learner. No home-made protocol: openraft's `change_membership` does the consensus.

use crate::error::ControlError;
use crate::network::KIND_VOTERS;
use crate::plane::ControlPlane;
use crate::raft::{node_id, NodeId};
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// How long a new voter may take to catch up before the change is refused.
const CATCH_UP: Duration = Duration::from_secs(30);

/// A request to change the voters, as forwarded to the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterChange {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// The voter set `change` asks for, or why it is refused. `voters` are today's voters. (That a
/// node to add is up is checked where the request arrives, against the cluster's live
/// members; the leader's catch-up wait is the backstop.)
pub fn plan_voters(
    voters: &BTreeSet<String>,
    change: &VoterChange,
) -> Result<BTreeSet<String>, String> {
    let mut next = voters.clone();
    for r in &change.remove {
        if !next.remove(r) {
            return Err(format!(
                "{r} is not a voter (voters: {})",
                voters.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for a in &change.add {
        if change.remove.contains(a) {
            return Err(format!("{a} is both added and removed"));
        }
        if voters.contains(a) {
            return Err(format!("{a} is already a voter"));
        }
        next.insert(a.clone());
    }
    if next == *voters {
        return Err("the voters would not change".into());
    }
    // A majority of an even group is no more tolerant than the odd one below it, and fewer
    // than three cannot lose a voter at all: 3 or 5, as --voters accepts.
    if !(next.len() == 3 || next.len() == 5) {
        return Err(format!(
            "the change would leave {} voter(s) ({}); a control plane needs 3 or 5 (replace a voter with `voters replace OLD=NEW`)",
            next.len(),
            next.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(next)
}

/// Why a change was refused (the request itself) or could not be made (the cluster now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeError {
    Refused(String),
    Unavailable(String),
}

impl ControlPlane {
    /// Answer a control-plane request from a peer: `kind` is one of
    /// [`crate::network::CONTROL_KINDS`], `body` the JSON message.
    pub async fn answer(&self, kind: &str, body: &[u8]) -> Result<Vec<u8>, String> {
        if kind != KIND_VOTERS {
            return self.handle(kind, body).await;
        }
        let change: VoterChange =
            serde_json::from_slice(body).map_err(|e| format!("malformed {kind} request: {e}"))?;
        serde_json::to_vec(&self.change_voters_here(change).await)
            .map_err(|e| format!("cannot encode the {kind} reply: {e}"))
    }

    /// Change the voters: on the leader, or forwarded to it. Returns the voters after the
    /// change, once it is committed.
    pub async fn change_voters(&self, change: VoterChange) -> Result<Vec<String>, ChangeError> {
        if self.is_leader() {
            return self.change_voters_here(change).await;
        }
        let leader = self.leader().ok_or_else(|| {
            ChangeError::Unavailable("no leader elected (is a majority of the voters up?)".into())
        })?;
        let body = serde_json::to_vec(&change)
            .map_err(|e| ChangeError::Unavailable(format!("cannot encode the change: {e}")))?;
        let reply = self
            .call_peer(&leader, KIND_VOTERS, body)
            .await
            .map_err(|e| ChangeError::Unavailable(format!("leader {leader}: {e}")))?;
        serde_json::from_slice::<Result<Vec<String>, ChangeError>>(&reply)
            .map_err(|e| ChangeError::Unavailable(format!("bad reply from {leader}: {e}")))?
    }

    /// The leader's side of [`change_voters`](Self::change_voters).
    pub(crate) async fn change_voters_here(
        &self,
        change: VoterChange,
    ) -> Result<Vec<String>, ChangeError> {
        if !self.is_leader() {
            return Err(ChangeError::Unavailable("not the leader".into()));
        }
        let status = self.status();
        let voters: BTreeSet<String> = status.voters.iter().cloned().collect();
        let next = plan_voters(&voters, &change).map_err(ChangeError::Refused)?;
        let raft = self.raft();
        // Each new voter first replicates the whole log as a learner: promoted lagging, it
        // would count towards a majority it cannot yet give.
        let deadline = Instant::now() + CATCH_UP;
        for a in &change.add {
            let added = until_no_change_in_progress(deadline, || {
                raft.add_learner(node_id(a), BasicNode::new(a), true)
            })
            .await;
            match added {
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    return Err(ChangeError::Unavailable(format!("cannot add {a}: {e}")))
                }
                None => {
                    return Err(ChangeError::Unavailable(format!(
                        "{a} did not catch up within {} s: is it running and reachable?",
                        CATCH_UP.as_secs()
                    )))
                }
            }
        }
        let ids: BTreeSet<_> = next.iter().map(|n| node_id(n)).collect();
        // retain = true: a removed voter stays a learner, so a machine that is still up keeps
        // its replica and its work, and one that comes back later rejoins as a learner.
        let deadline = Instant::now() + CATCH_UP;
        match until_no_change_in_progress(deadline, || raft.change_membership(ids.clone(), true))
            .await
        {
            Some(Ok(_)) => {
                tracing::info!(voters = ?next, "control plane voters changed");
                Ok(next.into_iter().collect())
            }
            Some(Err(e)) => Err(ChangeError::Unavailable(format!(
                "the change was not committed: {e}"
            ))),
            None => Err(ChangeError::Unavailable(
                "the change was not committed in time (is a majority of the voters up?)".into(),
            )),
        }
    }
}

/// Run a membership operation, again while an earlier membership entry (a learner the node
/// added when a peer joined) is still uncommitted: openraft allows one change at a time. `None`
/// when the deadline passed first.
async fn until_no_change_in_progress<T, F, Fut>(
    deadline: Instant,
    mut op: F,
) -> Option<Result<T, RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<
        Output = Result<T, RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>>,
    >,
{
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let result = tokio::time::timeout(left, op()).await.ok()?;
        match result {
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_),
            ))) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return Some(other),
        }
    }
}

impl From<ChangeError> for ControlError {
    fn from(e: ChangeError) -> ControlError {
        match e {
            ChangeError::Refused(m) => ControlError::Refused(m),
            ChangeError::Unavailable(m) => ControlError::Unavailable(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn change(add: &[&str], remove: &[&str]) -> VoterChange {
        VoterChange {
            add: add.iter().map(|s| s.to_string()).collect(),
            remove: remove.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_replacement_keeps_three_voters() {
        let voters = set(&["n1", "n2", "n3"]);
        assert_eq!(
            plan_voters(&voters, &change(&["n4"], &["n2"])).unwrap(),
            set(&["n1", "n3", "n4"])
        );
    }

    #[test]
    fn growing_from_three_to_five_takes_two_at_once() {
        let voters = set(&["n1", "n2", "n3"]);
        assert_eq!(
            plan_voters(&voters, &change(&["n4", "n5"], &[]))
                .unwrap()
                .len(),
            5
        );
        let e = plan_voters(&voters, &change(&["n4"], &[])).unwrap_err();
        assert!(e.contains("4 voter(s)") && e.contains("3 or 5"), "{e}");
    }

    #[test]
    fn refusals_say_why_in_one_line() {
        let voters = set(&["n1", "n2", "n3"]);
        for (c, why) in [
            (change(&[], &["n1"]), "2 voter(s)"),
            (change(&[], &["n9"]), "n9 is not a voter"),
            (change(&["n2"], &[]), "n2 is already a voter"),
            (change(&["n2"], &["n2"]), "both added and removed"),
            (change(&[], &[]), "would not change"),
        ] {
            let e = plan_voters(&voters, &c).unwrap_err();
            assert!(e.contains(why), "{c:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }
}
