//! A review conducted on another node, followed through this node's replica of its facts.

use super::flows::progress_kind;
use crate::control::NodeControl;
use quorum_api::{pb, EventStream, FINISHED_KIND};
use std::sync::Arc;

/// How often a watcher of a review conducted elsewhere looks for new replicated facts.
const REPLICA_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// A review conducted on another node, as its replicated facts tell it: the stream lives on
/// this node, so it survives the conductor's death and the takeover that follows. It ends with
/// the review (a `finished` event), or when this replica no longer knows the review.
pub(super) fn watch_replicated(control: Arc<NodeControl>, flow_id: String) -> EventStream {
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::ReviewEvent>(256);
    tokio::spawn(async move {
        let mut progress = quorum_runtime::progress::ProgressFromFacts::default();
        let (mut next_fact, mut seq) = (0usize, 0u64);
        loop {
            let Some((facts, finished)) = control.plane().facts_since(&flow_id, next_fact) else {
                return;
            };
            next_fact += facts.len();
            for fact in facts {
                let Ok(fact) = serde_json::from_value::<quorum_runtime::ReplicatedFact>(fact)
                else {
                    continue;
                };
                for p in progress.next(&fact) {
                    seq += 1;
                    let ev = pb::ReviewEvent {
                        seq,
                        kind: progress_kind(&p).to_string(),
                        json: serde_json::to_string(&p).unwrap_or_default(),
                    };
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
            }
            // The end is the control plane's `finished` mark, committed after the report fact,
            // not the FlowFinished fact before it: a client asks for the report next, and this
            // replica must have it by then.
            if finished {
                let status = progress.finished().unwrap_or_default().to_string();
                let end = pb::ReviewEvent {
                    seq: seq + 1,
                    kind: FINISHED_KIND.to_string(),
                    json: serde_json::json!({ "status": status }).to_string(),
                };
                let _ = tx.send(end).await;
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(REPLICA_POLL) => {}
                _ = tx.closed() => return,
            }
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}
