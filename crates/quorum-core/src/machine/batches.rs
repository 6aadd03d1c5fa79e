//! The batches of a phase in flight, by scheduler key: verification batches (with each
//! finding's verdict once known), judge batches, adjudicator batches and the panel's runs.

use crate::flows::rounds::RoundMetrics;
use crate::judging::adjudication::PriorFinding;
use crate::judging::conformance::Criterion;
use crate::machine::fact::RecordedVerdict;
use crate::machine::grounded::unverified;
use crate::machine::job::AttemptStats;
use crate::machine::schedule::TaskKey;
use crate::review::finding::Reported;
use crate::review::judged::Judged;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A verification round: each reported finding's verdict once known, and the batches still
/// to judge (by scheduler key), with the grounding notes to keep if a batch cannot run.
#[derive(Debug, Default)]
pub struct VerifyRound {
    pub judged: Vec<Option<Judged>>,
    /// Each reported finding's durable key: (task id, position among that task's findings).
    pub keys: Vec<(String, usize)>,
    pub batches: BTreeMap<TaskKey, Vec<(usize, Reported, Vec<String>)>>,
    /// Batches of analyzer leads not yet handed to the scheduler: under a wall-time budget
    /// they are released a few at a time while time is left (`ReviewMachine::release_leads`).
    pub held: VecDeque<Vec<(usize, Reported, Vec<String>)>>,
    /// The lead batches released so far, in order.
    pub lead_keys: Vec<TaskKey>,
    pub model: Option<String>,
    pub degraded: bool,
    pub stats: AttemptStats,
}

impl VerifyRound {
    pub fn new(reported: &[Reported]) -> VerifyRound {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let keys = reported
            .iter()
            .map(|r| {
                let n = seen.entry(r.task_id.as_str()).or_default();
                *n += 1;
                (r.task_id.clone(), *n - 1)
            })
            .collect();
        VerifyRound {
            judged: vec![None; reported.len()],
            keys,
            ..VerifyRound::default()
        }
    }

    /// The findings of batch `key`, if it is one of this round's.
    pub fn batch(&self, key: TaskKey) -> Option<Vec<Reported>> {
        self.batches
            .get(&key)
            .map(|b| b.iter().map(|(_, r, _)| r.clone()).collect())
    }

    /// Take a batch's verdicts; returns them keyed for the store.
    pub fn judged_batch(
        &mut self,
        key: TaskKey,
        judged: Vec<Judged>,
        model: &str,
        stats: &AttemptStats,
        degraded: bool,
    ) -> Vec<RecordedVerdict> {
        let Some(batch) = self.batches.get(&key) else {
            return Vec::new();
        };
        let mut recorded = Vec::with_capacity(batch.len());
        for ((i, _, _), j) in batch.iter().zip(judged) {
            if let Some((task_id, ordinal)) = self.keys.get(*i) {
                recorded.push(RecordedVerdict {
                    task_id: task_id.clone(),
                    ordinal: *ordinal,
                    judged: j.clone(),
                });
            }
            self.judged[*i] = Some(j);
        }
        self.stats.add_counts(stats);
        self.model.get_or_insert_with(|| model.to_string());
        self.degraded |= degraded;
        recorded
    }

    /// A batch will not be verified: its findings stay, UNVERIFIED, saying why.
    pub fn give_up(&mut self, key: TaskKey, why: &str) {
        let Some(batch) = self.batches.get(&key) else {
            return;
        };
        for (i, r, notes) in batch {
            if self.judged[*i].is_none() {
                self.judged[*i] = Some(unverified(
                    r.clone(),
                    notes.clone(),
                    format!("verification could not run: {why}"),
                ));
            }
        }
    }

    /// The held lead batches will not be released: their findings are UNVERIFIED, saying
    /// why. Returns how many findings that was.
    pub fn hold_back(&mut self, why: &str) -> usize {
        let mut n = 0;
        for (i, r, notes) in self.held.drain(..).flatten() {
            if self.judged[i].is_none() {
                self.judged[i] = Some(unverified(r, notes, why.to_string()));
                n += 1;
            }
        }
        n
    }

    pub fn progress(&self) -> (usize, usize) {
        (
            self.judged.iter().filter(|j| j.is_some()).count(),
            self.judged.len(),
        )
    }

    pub fn into_judged(mut self) -> Vec<Judged> {
        self.hold_back("not verified");
        let batches = self.batches;
        self.judged
            .into_iter()
            .enumerate()
            .filter_map(|(i, j)| {
                j.or_else(|| {
                    // Unreachable by construction (every batch ends judged or given up), but
                    // never drop a finding: keep it UNVERIFIED.
                    batches
                        .values()
                        .flatten()
                        .find(|(k, _, _)| *k == i)
                        .map(|(_, r, n)| unverified(r.clone(), n.clone(), "not verified".into()))
                })
            })
            .collect()
    }
}

/// The judge batches in flight, by scheduler key.
#[derive(Debug, Default)]
pub struct ConformanceRound {
    pub batches: BTreeMap<TaskKey, Vec<Criterion>>,
}

impl ConformanceRound {
    /// The criteria of batch `key`, if it is one of this round's.
    pub fn batch(&self, key: TaskKey) -> Option<Vec<Criterion>> {
        self.batches.get(&key).cloned()
    }
}

/// The adjudicator batches in flight, by scheduler key.
#[derive(Debug, Default)]
pub struct AdjudicationRound {
    pub batches: BTreeMap<TaskKey, Vec<PriorFinding>>,
}

impl AdjudicationRound {
    /// The prior findings of batch `key`, if it is one of this round's.
    pub fn batch(&self, key: TaskKey) -> Option<Vec<PriorFinding>> {
        self.batches.get(&key).cloned()
    }
}

/// The panel runs in flight, by scheduler key: the judges' (by judge name), then the
/// meta-judge's once the judges are done.
#[derive(Debug, Default)]
pub struct PanelRound {
    pub judges: BTreeMap<TaskKey, String>,
    pub meta: Option<(TaskKey, String)>,
}

impl PanelRound {
    /// Whether `key` is one of this panel's runs.
    pub fn has(&self, key: TaskKey) -> bool {
        self.judges.contains_key(&key) || self.meta.as_ref().is_some_and(|(k, _)| *k == key)
    }
}

/// An exhaustive round evaluated, waiting for the file selector's answer before its next
/// tasks are made.
#[derive(Debug, Clone)]
pub struct PendingRound {
    pub metrics: RoundMetrics,
    /// The hot-file rule's files, the selector's fallback.
    pub hot: Vec<String>,
}
