//! The conductor's judging phases: a conformance flow's criteria and judge batches, and a
//! finish review's pre-check and adjudicator batches. Both run between the verifier and the
//! synthesizer, on the conductor only (the spec and the prior report are the conductor's), and
//! record every verdict before it counts, so a resume judges nothing twice.

use super::{ConductorMsg, ConductorState, FlowConductor, Phase};
use crate::progress::Progress;
use crate::report::TaskRun;
use quorum_core::judging::adjudication::{self, Adjudged, Adjudication, PriorFinding};
use quorum_core::judging::conformance::{self, Criterion, Judgment, MergeReadiness};
use quorum_core::schedule::{Input, TaskKey};
use quorum_store::Event;
use ractor::{ActorProcessingErr, ActorRef};

impl FlowConductor {
    /// Conformance: read the spec's criteria (from its form, else one criteria-stage call),
    /// then judge them.
    pub(super) async fn start_conformance(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        state.phase = Phase::Conformance;
        if state.criteria.is_none() {
            let Some(spec) = state.ctx.scope.spec.clone() else {
                let why = "this flow judges a spec and the review has none (--spec FILE)";
                state.note(why.to_string()).await;
                state.conformance_failure = Some(why.to_string());
                state.criteria = Some(Vec::new());
                return Box::pin(Self::start_judging(myself, state)).await;
            };
            let found = conformance::extract(&spec.text);
            if found.is_empty() {
                // Nothing in the spec's form: the flow's criteria stage reads it.
                state.emit(Progress::Stage {
                    stage: "criteria".to_string(),
                });
                let key = state.add_run(TaskRun::stage("criteria"));
                return Box::pin(Self::feed(
                    myself,
                    state,
                    Input::AddTask {
                        key,
                        stage: true,
                        placeable: false,
                    },
                    None,
                ))
                .await;
            }
            state
                .ctx
                .facts
                .event(Event::CriteriaExtracted {
                    criteria: found.clone(),
                    by_model: false,
                })
                .await;
            state.criteria = Some(found);
        }
        Box::pin(Self::start_judging(myself, state)).await
    }

    /// Judge the criteria not judged yet in batches of `conformance_batch`, each an attempt
    /// run on this node.
    pub(super) async fn start_judging(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let todo: Vec<Criterion> = state
            .criteria
            .iter()
            .flatten()
            .filter(|c| !state.judgments.contains_key(&c.id))
            .cloned()
            .collect();
        if todo.is_empty() {
            return Box::pin(Self::conformance_finished(myself, state)).await;
        }
        state.emit(Progress::Stage {
            stage: "conformance".to_string(),
        });
        let size = state.ctx.flow.parameters.conformance_batch.max(1);
        let mut round = ConformanceRound::default();
        let mut keys = Vec::new();
        for (key, chunk) in Self::stage_batches(state, &todo, size, "conformance") {
            round.batches.insert(key, chunk);
            keys.push(key);
        }
        state.conformance = Some(round);
        // Kept on the conductor: grounding the rulings needs this node's pack and store.
        Box::pin(Self::add_tasks_placed(myself, state, keys, false)).await
    }

    /// A judge batch will not run again: its criteria are unmet and not judged.
    pub(super) fn conformance_gave_up(state: &mut ConductorState, key: TaskKey, why: &str) {
        let Some(batch) = state.conformance.as_ref().and_then(|r| r.batch(key)) else {
            return;
        };
        for c in batch {
            state.judgments.entry(c.id.clone()).or_insert_with(|| {
                Judgment::not_judged(&c.id, format!("the judge could not run: {why}"))
            });
        }
    }

    /// Every judge batch has ended: on to the synthesizer.
    pub(super) async fn conformance_finished(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        state.conformance = None;
        state.conformance_done = true;
        Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await
    }

    /// The merge gate of a conformance flow from what is known now. A review that ended before
    /// the criteria were read (budget, cancel) lists the spec's deterministic criteria, unjudged.
    pub(super) fn merge_readiness(state: &ConductorState) -> Option<MergeReadiness> {
        if !state.ctx.flow.uses_spec() {
            return None;
        }
        let spec = state.ctx.scope.spec.as_ref();
        let criteria = state.criteria.clone().unwrap_or_else(|| {
            spec.map(|s| conformance::extract(&s.text))
                .unwrap_or_default()
        });
        let mut m = MergeReadiness::build(
            spec.map(|s| s.path.as_str()).unwrap_or(""),
            state.criteria_by_model,
            &criteria,
            &state.judgments,
        );
        if let Some(why) = &state.conformance_failure {
            m.close(why);
        }
        Some(m)
    }
}

/// One sentence on a conformance gate for a summary written without a model.
pub(super) fn gate_sentence(gate: &MergeReadiness) -> String {
    if gate.ready {
        return format!(
            "Merge gate: ready, all {} acceptance criteria met.",
            gate.criteria.len()
        );
    }
    let blocking: Vec<String> = gate
        .criteria
        .iter()
        .filter(|c| c.status != conformance::CriterionStatus::Met)
        .map(|c| format!("{} {}", c.id, c.status.as_str()))
        .collect();
    if blocking.is_empty() {
        format!("Merge gate: not ready ({}).", gate.note)
    } else {
        format!("Merge gate: not ready — {}.", blocking.join(", "))
    }
}

impl FlowConductor {
    pub(super) fn prior_finding(state: &ConductorState, id: &str) -> Option<PriorFinding> {
        state
            .ctx
            .scope
            .prior
            .as_ref()?
            .findings
            .iter()
            .find(|f| f.id == id)
            .cloned()
    }

    /// Record settled rulings (a resume keeps them) and count them; a finding's first ruling
    /// wins.
    pub(super) async fn record_rulings(state: &mut ConductorState, rulings: Vec<Adjudged>) {
        if rulings.is_empty() {
            return;
        }
        state
            .ctx
            .facts
            .event(Event::PriorAdjudicated {
                rulings: rulings.clone(),
            })
            .await;
        for a in rulings {
            state.adjudged.entry(a.id.clone()).or_insert(a);
        }
    }

    /// Finish review: the pre-check rules on what it can decide alone (the file is gone), then
    /// adjudicator batches rule on the rest, each an attempt run on this node.
    pub(super) async fn start_adjudication(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        state.phase = Phase::Adjudicate;
        let Some(prior) = state.ctx.scope.prior.clone() else {
            // Refused by the CLI before the review starts; a review without one rules on
            // nothing, and every finding it has is new.
            state
                .note("this flow adjudicates a prior report and the review has none (--prior REPORT.json)".to_string())
                .await;
            return Box::pin(Self::adjudication_finished(myself, state)).await;
        };
        let mut decided = Vec::new();
        let mut todo: Vec<PriorFinding> = Vec::new();
        for f in prior
            .findings
            .iter()
            .filter(|f| !state.adjudged.contains_key(&f.id))
        {
            match Adjudged::by_precheck(f, &adjudication::precheck(f, &state.ctx.pack)) {
                Some(a) => decided.push(a),
                None => todo.push(f.clone()),
            }
        }
        Self::record_rulings(state, decided).await;
        if todo.is_empty() {
            return Box::pin(Self::adjudication_finished(myself, state)).await;
        }
        state.emit(Progress::Stage {
            stage: "adjudicator".to_string(),
        });
        let size = state.ctx.flow.parameters.adjudication_batch.max(1);
        let mut round = AdjudicationRound::default();
        let mut keys = Vec::new();
        for (key, chunk) in Self::stage_batches(state, &todo, size, "adjudicator") {
            round.batches.insert(key, chunk);
            keys.push(key);
        }
        state.adjudication = Some(round);
        // Kept on the conductor: grounding the rulings needs this node's pack and store.
        Box::pin(Self::add_tasks_placed(myself, state, keys, false)).await
    }

    /// An adjudicator batch will not run again: its findings stand, not judged.
    pub(super) fn adjudication_gave_up(state: &mut ConductorState, key: TaskKey, why: &str) {
        let Some(batch) = state.adjudication.as_ref().and_then(|r| r.batch(key)) else {
            return;
        };
        for f in batch {
            state.adjudged.entry(f.id.clone()).or_insert_with(|| {
                Adjudged::not_judged(&f, format!("the adjudicator could not run: {why}"))
            });
        }
    }

    /// Every adjudicator batch has ended: on to the synthesizer.
    pub(super) async fn adjudication_finished(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        state.adjudication = None;
        state.adjudication_done = true;
        Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await
    }

    /// The finish review's rulings as known now. A review that ended before adjudicating
    /// (budget, cancel) still gets the pre-check's rulings; the rest are not judged.
    pub(super) fn adjudication_of(state: &ConductorState) -> Option<Adjudication> {
        if !state.ctx.flow.uses_prior() {
            return None;
        }
        let prior = state.ctx.scope.prior.as_ref()?;
        let mut rulings = state.adjudged.clone();
        for f in &prior.findings {
            if !rulings.contains_key(&f.id) {
                let pre = adjudication::precheck(f, &state.ctx.pack);
                if let Some(a) = Adjudged::by_precheck(f, &pre) {
                    rulings.insert(f.id.clone(), a);
                }
            }
        }
        Some(Adjudication::build(prior, &rulings))
    }
}

/// The adjudicator batches in flight, by scheduler key.
#[derive(Debug, Default)]
pub(super) struct AdjudicationRound {
    batches: std::collections::BTreeMap<TaskKey, Vec<PriorFinding>>,
}

impl AdjudicationRound {
    /// The prior findings of batch `key`, if it is one of this round's.
    pub(super) fn batch(&self, key: TaskKey) -> Option<Vec<PriorFinding>> {
        self.batches.get(&key).cloned()
    }
}

/// The judge batches in flight, by scheduler key.
#[derive(Debug, Default)]
pub(super) struct ConformanceRound {
    batches: std::collections::BTreeMap<TaskKey, Vec<Criterion>>,
}

impl ConformanceRound {
    /// The criteria of batch `key`, if it is one of this round's.
    pub(super) fn batch(&self, key: TaskKey) -> Option<Vec<Criterion>> {
        self.batches.get(&key).cloned()
    }
}
