//! The judging phases: a conformance flow's criteria and judge batches, and a finish review's
//! pre-check and adjudicator batches. Both run between the verifier and the synthesizer, on
//! the conducting node only (the spec and the prior report are its own), and record every
//! verdict before it counts, so a resume judges nothing twice.

use crate::judging::adjudication::{self, Adjudged, Adjudication, PriorFinding};
use crate::judging::conformance::{self, Criterion, Judgment, MergeReadiness};
use crate::machine::batches::{AdjudicationRound, ConformanceRound};
use crate::machine::fact::Fact;
use crate::machine::progress::Progress;
use crate::machine::run::TaskRun;
use crate::machine::schedule::{Input, TaskKey};
use crate::machine::state::{Phase, ReviewMachine};

impl ReviewMachine {
    /// Conformance: read the spec's criteria (from its form, else one criteria-stage call),
    /// then judge them.
    pub(super) fn start_conformance(&mut self) {
        self.set_phase(Phase::Conformance);
        if self.conformance.criteria.is_none() {
            let Some(spec) = self.review.scope.spec.clone() else {
                let why = "this flow judges a spec and the review has none (--spec FILE)";
                self.note(why.to_string());
                self.conformance.failure = Some(why.to_string());
                self.conformance.criteria = Some(Vec::new());
                return self.start_judging();
            };
            let found = conformance::extract(&spec.text);
            if found.is_empty() {
                // Nothing in the spec's form: the flow's criteria stage reads it.
                self.emit(Progress::Stage {
                    stage: "criteria".to_string(),
                });
                let key = self.add_run(TaskRun::stage("criteria"));
                return self.feed(
                    Input::AddTask {
                        key,
                        stage: true,
                        placeable: false,
                    },
                    None,
                );
            }
            self.record(Fact::CriteriaExtracted {
                criteria: found.clone(),
                by_model: false,
            });
            self.conformance.criteria = Some(found);
        }
        self.start_judging();
    }

    /// Judge the criteria not judged yet in batches of `conformance_batch`, each an attempt
    /// run on this node.
    pub(super) fn start_judging(&mut self) {
        let todo: Vec<Criterion> = self
            .conformance
            .criteria
            .iter()
            .flatten()
            .filter(|c| !self.conformance.judgments.contains_key(&c.id))
            .cloned()
            .collect();
        if todo.is_empty() {
            return self.conformance_finished();
        }
        self.emit(Progress::Stage {
            stage: "conformance".to_string(),
        });
        let size = self.review.flow.parameters.conformance_batch.max(1);
        let mut round = ConformanceRound::default();
        let mut keys = Vec::new();
        for (key, chunk) in self.stage_batches(&todo, size, "conformance") {
            round.batches.insert(key, chunk);
            keys.push(key);
        }
        self.conformance.round = Some(round);
        // Kept on the conductor: grounding the rulings needs this node's pack and store.
        self.add_tasks_placed(keys, false);
    }

    /// A judge batch will not run again: its criteria are unmet and not judged.
    pub(super) fn conformance_gave_up(&mut self, key: TaskKey, why: &str) {
        let Some(batch) = self.conformance.round.as_ref().and_then(|r| r.batch(key)) else {
            return;
        };
        for c in batch {
            self.conformance
                .judgments
                .entry(c.id.clone())
                .or_insert_with(|| {
                    Judgment::not_judged(&c.id, format!("the judge could not run: {why}"))
                });
        }
    }

    /// Every judge batch has ended: on to the synthesizer.
    pub(super) fn conformance_finished(&mut self) {
        self.conformance.round = None;
        self.conformance.done = true;
        self.start_phase(Phase::Synthesize);
    }

    /// The merge gate of a conformance flow from what is known now. A review that ended before
    /// the criteria were read (budget, cancel) lists the spec's deterministic criteria, unjudged.
    pub(super) fn merge_readiness(&self) -> Option<MergeReadiness> {
        if !self.review.flow.uses_spec() {
            return None;
        }
        let spec = self.review.scope.spec.as_ref();
        let criteria = self.conformance.criteria.clone().unwrap_or_else(|| {
            spec.map(|s| conformance::extract(&s.text))
                .unwrap_or_default()
        });
        let mut m = MergeReadiness::build(
            spec.map(|s| s.path.as_str()).unwrap_or(""),
            self.conformance.by_model,
            &criteria,
            &self.conformance.judgments,
        );
        if let Some(why) = &self.conformance.failure {
            m.close(why);
        }
        Some(m)
    }

    pub(super) fn prior_finding(&self, id: &str) -> Option<PriorFinding> {
        self.review
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
    pub(super) fn record_rulings(&mut self, rulings: Vec<Adjudged>) {
        if rulings.is_empty() {
            return;
        }
        self.record(Fact::PriorAdjudicated {
            rulings: rulings.clone(),
        });
        for a in rulings {
            self.adjudication.adjudged.entry(a.id.clone()).or_insert(a);
        }
    }

    /// Finish review: the pre-check rules on what it can decide alone (the file is gone), then
    /// adjudicator batches rule on the rest, each an attempt run on this node.
    pub(super) fn start_adjudication(&mut self) {
        self.set_phase(Phase::Adjudicate);
        let Some(prior) = self.review.scope.prior.clone() else {
            // Refused by the CLI before the review starts; a review without one rules on
            // nothing, and every finding it has is new.
            self.note(
                "this flow adjudicates a prior report and the review has none (--prior REPORT.json)"
                    .to_string(),
            );
            return self.adjudication_finished();
        };
        let mut decided = Vec::new();
        let mut todo: Vec<PriorFinding> = Vec::new();
        for f in prior
            .findings
            .iter()
            .filter(|f| !self.adjudication.adjudged.contains_key(&f.id))
        {
            match Adjudged::by_precheck(f, &adjudication::precheck(f, &self.review.pack)) {
                Some(a) => decided.push(a),
                None => todo.push(f.clone()),
            }
        }
        self.record_rulings(decided);
        if todo.is_empty() {
            return self.adjudication_finished();
        }
        self.emit(Progress::Stage {
            stage: "adjudicator".to_string(),
        });
        let size = self.review.flow.parameters.adjudication_batch.max(1);
        let mut round = AdjudicationRound::default();
        let mut keys = Vec::new();
        for (key, chunk) in self.stage_batches(&todo, size, "adjudicator") {
            round.batches.insert(key, chunk);
            keys.push(key);
        }
        self.adjudication.round = Some(round);
        // Kept on the conductor: grounding the rulings needs this node's pack and store.
        self.add_tasks_placed(keys, false);
    }

    /// An adjudicator batch will not run again: its findings stand, not judged.
    pub(super) fn adjudication_gave_up(&mut self, key: TaskKey, why: &str) {
        let Some(batch) = self.adjudication.round.as_ref().and_then(|r| r.batch(key)) else {
            return;
        };
        for f in batch {
            self.adjudication
                .adjudged
                .entry(f.id.clone())
                .or_insert_with(|| {
                    Adjudged::not_judged(&f, format!("the adjudicator could not run: {why}"))
                });
        }
    }

    /// Every adjudicator batch has ended: on to the synthesizer.
    pub(super) fn adjudication_finished(&mut self) {
        self.adjudication.round = None;
        self.adjudication.done = true;
        self.start_phase(Phase::Synthesize);
    }

    /// The finish review's rulings as known now. A review that ended before adjudicating
    /// (budget, cancel) still gets the pre-check's rulings; the rest are not judged.
    pub(super) fn adjudication_of(&self) -> Option<Adjudication> {
        if !self.review.flow.uses_prior() {
            return None;
        }
        let prior = self.review.scope.prior.as_ref()?;
        let mut rulings = self.adjudication.adjudged.clone();
        for f in &prior.findings {
            if !rulings.contains_key(&f.id) {
                let pre = adjudication::precheck(f, &self.review.pack);
                if let Some(a) = Adjudged::by_precheck(f, &pre) {
                    rulings.insert(f.id.clone(), a);
                }
            }
        }
        Some(Adjudication::build(prior, &rulings))
    }
}
