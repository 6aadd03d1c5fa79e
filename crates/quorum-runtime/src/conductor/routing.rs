//! Routing to a review's conductor in this process, by its registry name: a peer's result or
//! renewal, a cancel, and the cluster's membership news (a node lost or joined).

use crate::conductor::msg::ConductorMsg;
use crate::remote::{conductor_name, RemoteOutcome};

/// Hand a remote attempt's outcome, as sent by `node`, to the review's conductor in this
/// process. Returns false when no such review runs here (it finished, or this is not its
/// origin). The conductor accepts it only from the node the attempt was placed on.
pub fn deliver_result(flow_id: &str, attempt: u64, node: &str, outcome: RemoteOutcome) -> bool {
    let Some(conductor) = conductor_of(flow_id) else {
        return false;
    };
    conductor
        .send_message(ConductorMsg::RemoteOutcome {
            attempt,
            node: node.to_string(),
            outcome: Box::new(outcome.into_job_outcome()),
        })
        .is_ok()
}

/// A worker on `node` is still working on `attempt`: extend its lease.
pub fn deliver_renewal(flow_id: &str, attempt: u64, node: &str) -> bool {
    let Some(conductor) = conductor_of(flow_id) else {
        return false;
    };
    conductor
        .send_message(ConductorMsg::Renew {
            attempt,
            node: node.to_string(),
        })
        .is_ok()
}

/// Cancel the review `flow_id` conducted in this process: every live attempt stops, no model
/// call starts after this returns, and the review ends partial saying why. Returns false when
/// no such review runs here.
pub async fn cancel_review(flow_id: &str, reason: &str) -> bool {
    let Some(conductor) = conductor_of(flow_id) else {
        return false;
    };
    let reason = reason.to_string();
    ractor::call_t!(
        conductor,
        |reply| ConductorMsg::Cancel { reason, reply },
        10_000
    )
    .is_ok()
}

fn conductor_of(flow_id: &str) -> Option<ractor::ActorRef<ConductorMsg>> {
    ractor::registry::where_is(conductor_name(flow_id)).map(Into::into)
}

/// Tell every conductor in this process that a peer is gone.
pub fn notify_node_lost(node: &str) -> usize {
    notify_all(|| ConductorMsg::NodeLost(node.to_string()))
}

/// Tell every conductor in this process that a peer joined, so queued work can go to it now.
pub fn notify_node_joined(node: &str) -> usize {
    notify_all(|| ConductorMsg::NodeJoined(node.to_string()))
}

fn notify_all(msg: impl Fn() -> ConductorMsg) -> usize {
    let prefix = conductor_name("");
    let mut n = 0;
    for name in ractor::registry::registered() {
        if !name.starts_with(&prefix) {
            continue;
        }
        if let Some(cell) = ractor::registry::where_is(name) {
            let conductor: ractor::ActorRef<ConductorMsg> = cell.into();
            if conductor.send_message(msg()).is_ok() {
                n += 1;
            }
        }
    }
    n
}
