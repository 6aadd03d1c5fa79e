//! The attempts this node runs for other nodes' conductors: whom each one answers to, stopping
//! one at its conductor's word, and handing them to a conductor that took the review over.
//!
//! An attempt answers to its origin: renewals and its result go there, and only the origin may
//! stop it. When the origin dies mid-review, the conductor that takes the review over (or the
//! origin itself, resumed) claims the attempts of that review this node still runs — or
//! finished and could not deliver yet — and from then on they answer to it. Its machine adopts
//! those its replicated facts show in flight here, so their answers count and are not asked
//! again.

use quorum_core::machine::AttemptClaim;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Whom an attempt answers to now: shared by its renewal loop and its result sender, so a claim
/// redirects both.
#[derive(Debug, Clone)]
pub struct Origin(Arc<Mutex<String>>);

impl Origin {
    pub fn new(node: &str) -> Origin {
        Origin(Arc::new(Mutex::new(node.to_string())))
    }

    pub fn get(&self) -> String {
        self.0.lock().map(|o| o.clone()).unwrap_or_default()
    }

    fn set(&self, node: &str) {
        if let Ok(mut o) = self.0.lock() {
            *o = node.to_string();
        }
    }
}

/// What a worker knows of one attempt it runs.
#[derive(Debug)]
struct Entry {
    origin: Origin,
    task_id: String,
    number: u32,
    /// A specialist task (not a verification batch or a stage run): the only kind a new
    /// conductor adopts.
    specialist: bool,
    abort: Option<tokio::task::AbortHandle>,
}

/// The attempts a node runs (or holds the undelivered result of), by (flow, attempt id).
/// Bounded by the node's capacity plus the results still being delivered.
#[derive(Debug, Default)]
pub struct RunningAttempts {
    entries: Mutex<HashMap<(String, u64), Entry>>,
}

impl RunningAttempts {
    /// Register an attempt as it starts; its origin handle, for the renewal loop and the sender.
    pub fn begin(
        &self,
        flow_id: &str,
        attempt: u64,
        origin: &str,
        task_id: &str,
        number: u32,
        specialist: bool,
    ) -> Origin {
        let o = Origin::new(origin);
        if let Ok(mut e) = self.entries.lock() {
            e.insert(
                (flow_id.to_string(), attempt),
                Entry {
                    origin: o.clone(),
                    task_id: task_id.to_string(),
                    number,
                    specialist,
                    abort: None,
                },
            );
        }
        o
    }

    /// The running work, so its origin can stop it.
    pub fn set_abort(&self, flow_id: &str, attempt: u64, abort: tokio::task::AbortHandle) {
        if let Ok(mut e) = self.entries.lock() {
            if let Some(entry) = e.get_mut(&(flow_id.to_string(), attempt)) {
                entry.abort = Some(abort);
            }
        }
    }

    /// The attempt's result was delivered (or given up on): forget it.
    pub fn end(&self, flow_id: &str, attempt: u64) {
        if let Ok(mut e) = self.entries.lock() {
            e.remove(&(flow_id.to_string(), attempt));
        }
    }

    /// Stop these attempts, if `from` is the node they answer to now. Returns what was refused
    /// (attempt, its origin), for the log.
    pub fn stop(&self, from: &str, flow_id: &str, attempts: &[u64]) -> Vec<(u64, String)> {
        let mut refused = Vec::new();
        if let Ok(e) = self.entries.lock() {
            for a in attempts {
                let Some(entry) = e.get(&(flow_id.to_string(), *a)) else {
                    continue;
                };
                let origin = entry.origin.get();
                if origin == from {
                    if let Some(h) = &entry.abort {
                        h.abort();
                    }
                } else {
                    refused.push((*a, origin));
                }
            }
        }
        refused
    }

    /// `conductor` conducts `flow_id` now: every specialist attempt of that review answers to it
    /// from here on; what it may adopt. (The caller checked it may claim them.)
    pub fn claim(&self, flow_id: &str, conductor: &str, me: &str) -> Vec<AttemptClaim> {
        let mut claims = Vec::new();
        if let Ok(e) = self.entries.lock() {
            for ((flow, attempt), entry) in e.iter() {
                if flow != flow_id || !entry.specialist {
                    continue;
                }
                entry.origin.set(conductor);
                claims.push(AttemptClaim {
                    node: me.to_string(),
                    attempt: *attempt,
                    task_id: entry.task_id.clone(),
                    number: entry.number,
                });
            }
        }
        claims.sort_by_key(|c| c.attempt);
        claims
    }

    /// The nodes the attempts of `flow_id` answer to now.
    pub fn origins(&self, flow_id: &str) -> Vec<String> {
        self.entries
            .lock()
            .map(|e| {
                e.iter()
                    .filter(|((f, _), _)| f == flow_id)
                    .map(|(_, entry)| entry.origin.get())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A worker's claims as its reply carries them.
pub fn claims_payload(claims: &[AttemptClaim]) -> serde_json::Value {
    let attempts: Vec<serde_json::Value> = claims
        .iter()
        .map(|c| serde_json::json!({ "attempt": c.attempt, "task_id": c.task_id, "number": c.number }))
        .collect();
    serde_json::json!({ "attempts": attempts })
}

/// The claims in worker `node`'s reply (anything malformed is left out).
pub fn claims_of(node: &str, payload: &serde_json::Value) -> Vec<AttemptClaim> {
    let Some(list) = payload.get("attempts").and_then(|a| a.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|c| {
            Some(AttemptClaim {
                node: node.to_string(),
                attempt: c.get("attempt")?.as_u64()?,
                task_id: c.get("task_id")?.as_str()?.to_string(),
                number: u32::try_from(c.get("number")?.as_u64()?).ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_redirects_the_specialist_attempts_of_that_review_and_moves_who_may_stop_them() {
        let r = RunningAttempts::default();
        let o1 = r.begin("f", 1, "n1", "t1", 1, true);
        let o2 = r.begin("f", 2, "n1", "verify-1", 1, false);
        let o3 = r.begin("g", 3, "n1", "t1", 2, true);
        let claims = r.claim("f", "n3", "n2");
        assert_eq!(
            claims,
            vec![AttemptClaim {
                node: "n2".into(),
                attempt: 1,
                task_id: "t1".into(),
                number: 1
            }]
        );
        assert_eq!(
            (o1.get(), o2.get(), o3.get()),
            ("n3".into(), "n1".into(), "n1".into())
        );
        // The old origin may no longer stop it; the new one may.
        assert_eq!(r.stop("n1", "f", &[1]), vec![(1, "n3".to_string())]);
        assert!(r.stop("n3", "f", &[1]).is_empty());
        r.end("f", 1);
        assert!(r.claim("f", "n3", "n2").is_empty());
        // The wire form round-trips; a malformed entry is dropped.
        let payload = claims_payload(&claims);
        assert_eq!(claims_of("n2", &payload), claims);
        let bad = serde_json::json!({ "attempts": [{ "attempt": "x" }] });
        assert!(claims_of("n2", &bad).is_empty());
    }
}
