//! The node's result cache for incremental reviews: opened once for the node's life, given to
//! every review it conducts (recording, and reusing when the client asked), and fed with the
//! results that reviews conducted on other nodes replicated (`ReplicatedFact::CachedResult`),
//! so a review conducted here reuses what a review anywhere in the cluster recorded.

use super::setup::NodeSetup;
use quorum_control::ControlPlane;
use quorum_runtime::context::Incremental;
use quorum_runtime::ReplicatedFact;
use quorum_store::ResultCache;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How far this node has read each review's replicated facts for cached results.
#[derive(Debug, Default)]
pub struct Cursors(Mutex<HashMap<String, usize>>);

/// What a review submitted with `cache` (`off`, `record`, `reuse`; empty = `record`) records
/// into and takes from; `None` when the node keeps no cache or the client said `--no-cache`.
pub(super) fn incremental(setup: &NodeSetup, cache: &str) -> Option<Incremental> {
    let results = setup.results.clone()?;
    match cache {
        "off" => None,
        mode => Some(Incremental {
            cache: results,
            reuse: mode == "reuse",
        }),
    }
}

/// Take every result replicated since the last call into `cache`; returns how many. Reads
/// only this node's replica of the control plane (no request leaves the node). Blocking: run
/// it off the async threads.
pub(super) fn take_replicated(
    plane: &ControlPlane,
    cache: &ResultCache,
    cursors: &Cursors,
) -> usize {
    let mut taken = 0;
    let summaries = plane.summaries();
    let Ok(mut at) = cursors.0.lock() else {
        return 0;
    };
    // Reviews the control plane no longer holds need no cursor.
    at.retain(|flow, _| summaries.iter().any(|s| &s.flow_id == flow));
    for s in summaries {
        let from = at.get(&s.flow_id).copied().unwrap_or(0);
        if from >= s.facts {
            continue;
        }
        let Some((facts, _)) = plane.facts_since(&s.flow_id, from) else {
            continue;
        };
        at.insert(s.flow_id.clone(), from + facts.len());
        for fact in facts {
            // Cheap to skip: only cached results are decoded in full.
            if fact.get("fact").and_then(|k| k.as_str()) != Some("cached_result") {
                continue;
            }
            let Ok(ReplicatedFact::CachedResult {
                key,
                identity,
                result,
                trace,
            }) = serde_json::from_value::<ReplicatedFact>(fact)
            else {
                continue;
            };
            match cache.put_task(&key, &identity, &result, &trace) {
                Ok(()) => taken += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "replicated result not taken into the result cache");
                    return taken;
                }
            }
        }
    }
    taken
}

/// Before a review that reuses results starts: take in what other nodes recorded.
pub(super) async fn catch_up(
    plane: Option<ControlPlane>,
    inc: &Option<Incremental>,
    cursors: Arc<Cursors>,
) {
    let (Some(plane), Some(inc)) = (plane, inc.as_ref().filter(|i| i.reuse)) else {
        return;
    };
    let cache = inc.cache.clone();
    let taken = tokio::task::spawn_blocking(move || take_replicated(&plane, &cache, &cursors))
        .await
        .unwrap_or(0);
    if taken > 0 {
        tracing::debug!(taken, "replicated results taken into the result cache");
    }
}
