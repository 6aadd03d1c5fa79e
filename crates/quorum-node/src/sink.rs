//! The replicated fact sink a conductor writes through (`ControlSink`): each fact committed on
//! a majority of the control plane's voters as `AppendFact` at the conductor's epoch before it
//! is written locally — waiting, and telling the review's watchers who is up and who is lost,
//! while no majority answers.

use crate::error::NodeError;
use quorum_cluster::Cluster;
use quorum_control::{Command, ControlPlane, Outcome};
use quorum_runtime::{FactSink, ReplicatedFact};
use serde_json::json;
use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a conductor waits for a majority of voters to come back before its review stops.
/// Long: a voter machine rebooting, or a switch replaced, should not cost the review.
pub const MAJORITY_WAIT: Duration = Duration::from_secs(3600);

/// Commits a conductor's facts as `AppendFact` at its epoch, in order. With no majority of the
/// voters up it waits — saying so to the review's watchers, naming the voters up and lost —
/// and goes on by itself when a majority is back (a retried fact finds itself applied).
pub struct ControlSink {
    plane: ControlPlane,
    flow_id: String,
    epoch: u64,
    /// The number of facts the control plane holds for the review: the next fact's position.
    next: tokio::sync::Mutex<u64>,
    /// Which voters are up, for the waiting notice.
    cluster: Option<Cluster>,
    waiting: OnceLock<quorum_runtime::facts::WaitingNotice>,
}

impl std::fmt::Debug for ControlSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlSink")
            .field("flow_id", &self.flow_id)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl ControlSink {
    pub fn new(plane: ControlPlane, flow_id: &str, epoch: u64, next: u64) -> Self {
        ControlSink {
            plane,
            flow_id: flow_id.to_string(),
            epoch,
            next: tokio::sync::Mutex::new(next),
            cluster: None,
            waiting: OnceLock::new(),
        }
    }

    /// Name the voters up and lost, from this cluster's membership, when it waits.
    pub fn with_cluster(mut self, cluster: Option<Cluster>) -> Self {
        self.cluster = cluster;
        self
    }

    /// "waiting for a majority of voters (up: n1; lost: n2, n3)".
    fn waiting_for(&self, why: &str) -> String {
        let voters = self.plane.voters();
        let alive: HashSet<String> = match &self.cluster {
            Some(c) => c.alive_members().into_iter().map(|m| m.name).collect(),
            None => HashSet::from([self.plane.name().to_string()]),
        };
        let (up, lost): (Vec<String>, Vec<String>) =
            voters.into_iter().partition(|v| alive.contains(v));
        let list = |l: &[String]| {
            if l.is_empty() {
                "none".to_string()
            } else {
                l.join(", ")
            }
        };
        format!(
            "waiting for a majority of voters (up: {}; lost: {}): {why}; the review goes on by itself when they are back",
            list(&up),
            list(&lost)
        )
    }

    fn tell(&self, notice: Option<String>) {
        if let Some(tell) = self.waiting.get() {
            tell(notice);
        }
    }

    /// Propose `cmd`, waiting (at most [`MAJORITY_WAIT`]) while no majority acknowledges it.
    async fn propose_waiting(&self, cmd: Command) -> Result<Outcome, String> {
        let started = std::time::Instant::now();
        let mut told: Option<String> = None;
        loop {
            match self.plane.propose(cmd.clone()).await {
                Ok(outcome) => {
                    if told.is_some() {
                        tracing::warn!(flow = %self.flow_id, "a majority of voters is back; the review goes on");
                        self.tell(None);
                    }
                    return Ok(outcome);
                }
                Err(quorum_control::ControlError::Unavailable(why))
                    if started.elapsed() < MAJORITY_WAIT =>
                {
                    let notice = self.waiting_for(&why);
                    if told.as_deref() != Some(notice.as_str()) {
                        tracing::warn!(flow = %self.flow_id, "{notice}");
                        self.tell(Some(notice.clone()));
                        told = Some(notice);
                    }
                    // propose itself waited its timeout; a short pause keeps a plane that
                    // answers at once (shut down, no leader) from spinning.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

#[async_trait::async_trait]
impl FactSink for ControlSink {
    async fn commit(&self, fact: &ReplicatedFact) -> Result<(), String> {
        let value = replicable(fact).map_err(|e| e.to_string())?;
        let mut next = self.next.lock().await;
        let cmd = Command::AppendFact {
            flow_id: self.flow_id.clone(),
            epoch: self.epoch,
            seq: *next,
            fact: value,
        };
        match self.propose_waiting(cmd).await? {
            Outcome::Accepted { .. } => *next += 1,
            Outcome::Rejected(r) => return Err(r.to_string()),
            Outcome::Noop => return Err("the control plane did not apply the fact".into()),
        }
        if let ReplicatedFact::Report { .. } = fact {
            let fin = Command::Finish {
                flow_id: self.flow_id.clone(),
                epoch: self.epoch,
            };
            match self.propose_waiting(fin).await? {
                o if o.is_accepted() => {}
                o => return Err(format!("cannot finish the review: {o:?}")),
            }
        }
        Ok(())
    }

    fn on_waiting(&self, tell: quorum_runtime::facts::WaitingNotice) {
        let _ = self.waiting.set(tell);
    }
}

/// Room left in a command for everything but the fact.
const FACT_LIMIT: usize = quorum_control::MAX_COMMAND_BYTES - (64 << 10);

/// The fact as it is replicated. An attempt's transcript (kept for trace export, never read by
/// resume) is left out when it would push the fact past the control plane's command limit; the
/// conducting node's own store keeps it whole.
fn replicable(fact: &ReplicatedFact) -> Result<serde_json::Value, NodeError> {
    let encode = |f: &ReplicatedFact| {
        let v = serde_json::to_value(f)
            .map_err(|e| NodeError::Data(format!("cannot encode a fact: {e}")))?;
        let n = serde_json::to_vec(&v)
            .map(|b| b.len())
            .unwrap_or(usize::MAX);
        Ok::<_, NodeError>((v, n))
    };
    let (value, size) = encode(fact)?;
    if size <= FACT_LIMIT {
        return Ok(value);
    }
    if let ReplicatedFact::Attempt { record } = fact {
        let mut slim = record.clone();
        slim.transcript = json!({ "omitted": format!("a {size}-byte fact exceeds the control plane's limit; the transcript is kept on the node that ran the attempt") });
        let (value, size) = encode(&ReplicatedFact::Attempt { record: slim })?;
        if size <= FACT_LIMIT {
            return Ok(value);
        }
    }
    Err(NodeError::Data(format!(
        "a fact of {size} bytes exceeds the control plane's limit of {FACT_LIMIT} bytes"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_transcript_is_left_out_of_the_replicated_fact() {
        let record = quorum_store::AttemptRecord {
            task_id: "t1".into(),
            attempt: 1,
            persona: "p".into(),
            model: "m".into(),
            backend: "b".into(),
            node: "n1".into(),
            prompt_hash: String::new(),
            output: "the answer".into(),
            iterations: 1,
            tokens_in: 0,
            tokens_out: 0,
            started_ms: 0,
            ended_ms: 0,
            error_class: None,
            error: None,
            transcript: json!(["x".repeat(FACT_LIMIT)]),
            reused_from: None,
            cache: None,
        };
        let big = ReplicatedFact::Attempt { record };
        let v = replicable(&big).unwrap();
        assert_eq!(v["record"]["output"], "the answer");
        assert!(v["record"]["transcript"]["omitted"].is_string());
        let small = ReplicatedFact::Report { json: "{}".into() };
        assert_eq!(
            replicable(&small).unwrap(),
            serde_json::to_value(&small).unwrap()
        );
        let huge = ReplicatedFact::Report {
            json: "x".repeat(FACT_LIMIT + 1),
        };
        assert!(replicable(&huge).is_err());
    }
}
