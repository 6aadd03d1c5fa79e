//! The order of the review's phases and what ends them early.
//!
//! Scout → planner (or an exhaustive flow's rounds) → specialists → verifier → conformance →
//! adjudicator → panel → synthesizer; a flow without a judging stage skips its phase. A failed
//! scout falls back to a facts-only classification; the planner or verifier failing for good
//! fails the review; a failed synthesizer gets the deterministic summary; specialists failing
//! make it partial. A spent budget or a cancel stops what runs, keeps what was found, judges it
//! by grounding alone and ends the review partial.

use crate::flows::flow::Role;
use crate::machine::fact::Fact;
use crate::machine::fallback::fallback_classification;
use crate::machine::grounded::ground_only;
use crate::machine::job::Job;
use crate::machine::progress::Progress;
use crate::machine::protocol::Level;
use crate::machine::review::Review;
use crate::machine::run::TaskRun;
use crate::machine::schedule::{Input, TaskKey};
use crate::machine::state::{Phase, ReviewMachine};
use crate::review::dedup::Gated;
use crate::review::finding::{Reported, Reporter};
use crate::review::judged::Judged;
use crate::task::{RejectedTask, Task};
use std::collections::BTreeSet;

impl ReviewMachine {
    /// Enter `phase`. Stage phases add their stage run to the scheduler, which starts it;
    /// `Synthesize` first passes through the judging phases the flow has and has not run.
    pub(super) fn start_phase(&mut self, phase: Phase) {
        match phase {
            Phase::Scout => {
                self.set_phase(Phase::Scout);
                self.start_stage("scout");
            }
            Phase::Plan => {
                self.set_phase(Phase::Plan);
                if self.review.flow.exhaustive.is_some() {
                    self.exhaustive_plan();
                } else {
                    self.start_stage("planner");
                }
            }
            Phase::Verify => {
                self.set_phase(Phase::Verify);
                self.add_analyzer_candidates();
                self.vote_on_passes();
                if self.found.reported.is_empty() {
                    // Nothing to judge: skip the stage entirely, no model call.
                    let gated = self.ground_only();
                    self.found.gated = Some(gated);
                    self.start_phase(Phase::Synthesize);
                } else if self.ending.budget_spent.is_some() {
                    // No more model calls: grounding alone decides, then the deterministic
                    // summary.
                    let gated = self.ground_only();
                    self.found.gated = Some(gated);
                    self.finish_with_fallback_summary();
                } else {
                    self.start_verification();
                }
            }
            Phase::Conformance | Phase::Adjudicate | Phase::Panel | Phase::Synthesize => {
                self.after_verification();
            }
            Phase::Specialists | Phase::Done => {}
        }
    }

    /// After verification: the judging phases the flow has and has not run, then the
    /// synthesizer.
    fn after_verification(&mut self) {
        let flow = &self.review.flow;
        if self.ending.budget_spent.is_some() {
            self.finish_with_fallback_summary();
        } else if flow.uses_spec() && !self.conformance.done {
            self.start_conformance();
        } else if flow.uses_prior() && !self.adjudication.done {
            self.start_adjudication();
        } else if flow.has(Role::Panel) && !self.panel.done {
            self.start_panel();
        } else {
            self.set_phase(Phase::Synthesize);
            self.start_stage("synthesizer");
        }
    }

    /// A stage run of the current phase, placed like specialist work: by load, here unless
    /// this node is the busier.
    fn start_stage(&mut self, name: &str) {
        self.emit(Progress::Stage {
            stage: name.to_string(),
        });
        let placeable = self.config.remote;
        self.add_stage_run(name, placeable);
    }

    /// The job of the current phase's stage run.
    pub(super) fn stage_job(&self) -> Job {
        match self.phase {
            Phase::Scout => Job::Scout,
            Phase::Plan => Job::Plan(self.plan.classification.clone()),
            Phase::Conformance => Job::Criteria,
            Phase::Verify => Job::Verify {
                reported: self.found.reported.clone(),
                grounding_only: self.ending.budget_spent.is_some(),
            },
            _ => Job::Synthesize {
                gated: Box::new(self.found.gated.clone().unwrap_or_default()),
                classification: self.plan.classification.clone(),
                conformance: self.merge_readiness().map(Box::new),
            },
        }
    }

    /// The analyzers' leads join the reported findings as candidates, each credited to its
    /// tool (`analyzer:<name>`), so grounding and the verifier judge them like any finding.
    /// They come after the specialists' findings, so the flow's `max_verifications` serves
    /// the specialists first; a specialist reporting the same place corroborates the tool.
    /// Among themselves they come most harmful first (`analyzer::review_order`), so whatever
    /// budget is left checks security and correctness before the rest; style hits are not
    /// candidates unless the flow asks (`lint_findings`). Derived from the recorded scope, so
    /// a resumed review adds exactly the same ones.
    fn add_analyzer_candidates(&mut self) {
        let review = self.review.clone();
        if review.scope.analyzers.leads.is_empty()
            || self.found.reported.iter().any(crate::analyzer::is_lead)
        {
            return;
        }
        let candidates = lead_candidates(&review);
        self.found
            .reported
            .extend(candidates.into_iter().map(|(r, _)| r));
    }

    /// A plan is made (by the planner or, in an exhaustive flow, by the engine): its tasks go
    /// to the scheduler — after the early lead batches, which take the places first.
    pub(super) fn planned(&mut self, tasks: Vec<Task>, rejected: Vec<RejectedTask>) {
        self.emit(Progress::Planned {
            tasks: tasks.len(),
            rejected: rejected.len(),
        });
        self.plan.rejected = rejected;
        self.set_phase(Phase::Specialists);
        self.emit(Progress::Stage {
            stage: "specialists".into(),
        });
        let keys: Vec<TaskKey> = tasks
            .into_iter()
            .map(|t| self.add_run(TaskRun::specialist(t)))
            .collect();
        // Under a wall-time budget, high-harm analyzer leads are verified while the
        // specialists work, and get the places first (`start_early_leads`).
        self.start_early_leads();
        self.add_tasks(keys);
        // A plan whose every task was rejected leaves nothing to wait for.
        self.advance();
    }

    /// A stage run failed for good. Scout and synthesizer degrade to deterministic fallbacks;
    /// the planner and verifier failing ends the review as failed.
    pub(super) fn after_final_failure(&mut self, err: String) {
        match self.phase {
            Phase::Scout => {
                self.plan.classification = fallback_classification(&self.review.pack);
                self.plan.classification_fallback = true;
                self.record(Fact::ScoutCompleted {
                    classification: self.plan.classification.clone(),
                    fallback: true,
                });
                self.start_phase(Phase::Plan);
            }
            Phase::Plan => {
                self.ending.failure = Some(format!("planning failed: {err}"));
                self.finish();
            }
            Phase::Verify => {
                self.ending.failure = Some(format!("verification failed: {err}"));
                self.finish();
            }
            Phase::Synthesize => self.finish_with_fallback_summary(),
            Phase::Conformance => {
                // The criteria stage failed for good: nothing can be judged. Not recorded, so
                // a resume asks again.
                let why = format!("the spec's criteria could not be read: {err}");
                self.note(why.clone());
                self.conformance.failure = Some(why);
                self.conformance.done = true;
                self.start_phase(Phase::Synthesize);
            }
            Phase::Specialists | Phase::Adjudicate | Phase::Panel | Phase::Done => {}
        }
    }

    /// Stop new work once the flow's token budget is spent.
    pub(super) fn check_budget(&mut self) {
        let max = self.review.flow.parameters.max_tokens;
        let used = self.usage.tokens_in + self.usage.tokens_out;
        if max > 0 && used >= max && self.ending.budget_spent.is_none() && !self.is_done() {
            self.spend_budget(format!("token budget spent ({used} of {max} tokens)"));
        }
    }

    /// Stop every attempt: unfinished tasks fail with `class`, and nothing moves the review on
    /// while they do.
    fn stop_all(&mut self, class: &str, reason: String) {
        self.halting = true;
        self.feed(
            Input::StopAll {
                class: class.into(),
                reason,
            },
            None,
        );
        self.halting = false;
    }

    /// The budget is spent: running work is cut (its model calls stopped, late outcomes
    /// fenced), what was found is kept, the review ends partial.
    pub(super) fn spend_budget(&mut self, why: String) {
        if self.ending.budget_spent.is_some() || self.is_done() {
            return;
        }
        self.log(
            Level::Warn,
            format!("flow budget spent; finishing with what was found: {why}"),
        );
        self.note(why.clone());
        self.ending.budget_spent = Some(why.clone());
        self.stop_all("budget_exhausted", why);
        match self.phase {
            // Nothing planned yet: there is nothing to keep.
            Phase::Scout | Phase::Plan => {
                self.ending.failure = Some(format!(
                    "{} before any task ran",
                    self.ending.budget_spent.clone().unwrap_or_default()
                ));
                self.finish();
            }
            Phase::Specialists => {
                self.plan.selecting = None;
                self.start_phase(Phase::Verify);
            }
            // A cut verifier: grounding alone decides, then the deterministic summary.
            Phase::Verify
            | Phase::Conformance
            | Phase::Adjudicate
            | Phase::Panel
            | Phase::Synthesize => self.finish_with_what_was_found(),
            Phase::Done => {}
        }
    }

    /// Stop the review: what runs is stopped (here and on peers), the cancellation is recorded,
    /// and the review ends partial with what was found, judged by grounding alone and
    /// summarised without a model.
    pub(super) fn cancel(&mut self, reason: String) {
        if self.is_done() || self.ending.cancelled.is_some() {
            return;
        }
        self.log(Level::Warn, format!("review cancelled: {reason}"));
        self.ending.cancelled = Some(reason.clone());
        self.ending.budget_spent = Some(reason.clone());
        self.record(Fact::Cancelled {
            reason: reason.clone(),
        });
        self.plan.selecting = None;
        self.stop_all("cancelled", reason);
        self.finish_with_what_was_found();
    }

    /// A fact could not be stored: nothing that depended on it was done, and a review that
    /// cannot record what it does must not go on. It ends failed, saying why; what was stored
    /// before stays, so a resume continues from there once the store takes writes again.
    pub(super) fn store_failed(&mut self, reason: String) {
        if self.is_done() {
            return;
        }
        // Warn, not error: the reason is the review's status reason, which the user reads
        // once (the CLI's note line, the report); this line is for a node's operator.
        self.log(
            Level::Warn,
            format!("cannot record the review's facts: {reason}"),
        );
        self.ending.failure = Some(reason.clone());
        self.plan.selecting = None;
        self.stop_all("store_failed", reason);
        self.finish();
    }

    /// End now with what was found: grounding alone judges what no verifier judged, then the
    /// deterministic summary.
    fn finish_with_what_was_found(&mut self) {
        if self.found.gated.is_none() {
            let gated = self.ground_only();
            self.found.gated = Some(gated);
        }
        self.finish_with_fallback_summary();
    }

    /// Grounding alone judges what was reported (no model call), then the gate. The verdicts
    /// are recorded like a verifier's, so a review that stops after this finishes from them
    /// when it is resumed, rather than verifying and summarising again.
    pub(super) fn ground_only(&mut self) -> Gated {
        let mut judged = ground_only(
            &self.review.pack,
            &self.review.catalog,
            self.found.reported.clone(),
        );
        judged.extend(self.found.outvoted.iter().cloned());
        self.record(Fact::VerifyCompleted {
            judged: judged.clone(),
        });
        self.gate(judged)
    }

    /// Merge and gate the verdicts and build the verification ledger from their ballots; the
    /// surviving findings go out as progress events.
    pub(super) fn gate(&mut self, judged: Vec<Judged>) -> Gated {
        let checked: Vec<Judged> = judged
            .iter()
            .filter(|j| j.ballot.is_some())
            .cloned()
            .collect();
        let fresh: BTreeSet<String> = self
            .runs
            .iter()
            .filter_map(|r| r.task.as_ref())
            .filter(|t| t.origin.as_deref() == Some(crate::flows::coverage::FRESH_EYES_ORIGIN))
            .map(|t| t.id.clone())
            .collect();
        let anchors = (!fresh.is_empty()).then(|| judged.clone());
        let mut gated = self.review.gate(judged);
        if let Some(all) = anchors {
            for list in [
                &mut gated.findings,
                &mut gated.residual,
                &mut gated.pre_existing,
            ] {
                crate::flows::coverage::mark_fresh_eyes(&self.review.flow, list, &all, &fresh);
            }
        }
        self.found.ledger = crate::review::ledger::ledger(
            &checked,
            &[&gated.findings, &gated.residual, &gated.pre_existing],
        );
        for p in finding_events(&gated.findings) {
            self.emit(p);
        }
        gated
    }
}

/// The progress events of the findings that survived the gate.
pub fn finding_events(findings: &[crate::review::finding::Finding]) -> Vec<Progress> {
    findings
        .iter()
        .map(|f| Progress::Finding {
            id: f.id.clone(),
            title: f.title.clone(),
            severity: format!("{:?}", f.severity).to_lowercase(),
            file: f.file.clone(),
            line_start: f.line_start,
            line_end: f.line_end,
            verdict: format!("{:?}", f.verdict).to_lowercase(),
            evidence: f.evidence.chars().take(400).collect(),
        })
        .collect()
}

/// The analyzers' leads as candidate findings, in the one order they are verified in
/// (`analyzer::review_order`; style only with the flow's `lint_findings`), each credited to
/// its tool, with its harm. Derived from the recorded scope alone, so the early lead round,
/// the verification round and a resumed review all see the same list with the same keys.
pub(super) fn lead_candidates(review: &Review) -> Vec<(Reported, crate::weakness::Harm)> {
    let lint = review.flow.parameters.lint_findings;
    review
        .scope
        .analyzers
        .reviewable(lint)
        .into_iter()
        .map(|lead| {
            let reported = Reported {
                task_id: lead.reporter_name(),
                reporter: Reporter {
                    persona: lead.reporter_name(),
                    // No model found it.
                    model: String::new(),
                    node: review.node.clone(),
                    carried_from: None,
                },
                finding: lead.to_finding(&review.pack),
            };
            (reported, lead.harm)
        })
        .collect()
}
