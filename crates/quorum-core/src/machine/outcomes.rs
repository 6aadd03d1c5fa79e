//! What each stage's counted answer means: the facts it records and where the review goes next.
//!
//! Only an outcome the scheduler counted reaches here (its attempt was live, from the node it
//! was placed on, at this epoch). Every answer is recorded before it is acted on.

use crate::judging::adjudication::{self, Adjudged, PriorFinding};
use crate::judging::conformance::{ground_judgment, Judgment};
use crate::judging::named_code::require_named_code;
use crate::machine::fact::Fact;
use crate::machine::job::{AttemptStats, ModelUse, Outcome};
use crate::machine::progress::Progress;
use crate::machine::protocol::{Command, Level};
use crate::machine::schedule::{AttemptId, TaskKey};
use crate::machine::state::{Phase, ReviewMachine};
use crate::review::finding::{RawFinding, Reported, Reporter};

impl ReviewMachine {
    /// A counted success: record it and act on what the stage produced.
    pub(super) fn succeeded(&mut self, run: TaskKey, attempt: AttemptId, outcome: Outcome) {
        let now = self.now;
        let elapsed = self.runs[run].elapsed(now);
        self.runs[run].duration_ms = elapsed;
        match outcome {
            Outcome::Scout { classification, by } => {
                self.stage_run_succeeded(run, &by);
                self.record(Fact::ScoutCompleted {
                    classification: classification.clone(),
                    fallback: false,
                });
                self.plan.classification = classification;
                self.start_phase(Phase::Plan);
            }
            Outcome::Plan {
                tasks,
                rejected,
                selection,
                by,
            } => {
                self.stage_run_succeeded(run, &by);
                if let Some(selection) = &selection {
                    self.record(Fact::SelectionRecorded {
                        selection: selection.clone(),
                    });
                }
                self.plan.selection = selection;
                self.record(Fact::PlanCompleted {
                    tasks: tasks.clone(),
                    rejected: rejected.clone(),
                });
                self.planned(tasks, rejected);
            }
            Outcome::Specialist {
                findings,
                invalid,
                iterations,
                by,
            } => self.specialist_succeeded(run, findings, invalid, iterations, by, elapsed),
            Outcome::Verify {
                judged,
                degraded,
                by,
            } if self
                .found
                .verify
                .as_ref()
                .is_some_and(|r| r.batch(run).is_some()) =>
            {
                // A batch's calls are counted with the round's when verification ends.
                self.runs[run].complete(&by.model, &by.stats);
                self.record_success(run, &by.model, &by.stats, 1, Vec::new());
                if let Some(round) = self.found.verify.as_mut() {
                    let verdicts = round.judged_batch(run, judged, &by.model, &by.stats, degraded);
                    let (done, total) = round.progress();
                    // Durable per batch: a resume takes these verdicts instead of asking again.
                    self.record(Fact::VerdictsRecorded { verdicts });
                    self.emit(Progress::Verified { done, total });
                }
            }
            Outcome::Verify {
                judged,
                degraded,
                by,
            } => {
                self.stage_run_succeeded(run, &by);
                self.record(Fact::VerifyCompleted {
                    judged: judged.clone(),
                });
                self.found.verifier_model = Some(by.model.clone());
                self.found.verifier_degraded = degraded;
                let total = judged.len();
                self.emit(Progress::Verified { done: total, total });
                let gated = self.gate(judged);
                self.found.gated = Some(gated);
                self.start_phase(Phase::Synthesize);
            }
            Outcome::Criteria { criteria, by } => {
                self.stage_run_succeeded(run, &by);
                self.record(Fact::CriteriaExtracted {
                    criteria: criteria.clone(),
                    by_model: true,
                });
                self.conformance.criteria = Some(criteria);
                self.conformance.by_model = true;
                self.start_judging();
            }
            Outcome::Conformance { judgments, by }
                if self
                    .conformance
                    .round
                    .as_ref()
                    .is_some_and(|r| r.batch(run).is_some()) =>
            {
                self.stage_run_succeeded(run, &by);
                // Grounded here, on the conductor, before the verdict counts.
                let review = self.review.clone();
                let spec_path = review.scope.spec.as_ref().and_then(|s| s.pack_path.clone());
                let criteria = self.conformance.criteria.clone().unwrap_or_default();
                let judgments: Vec<Judgment> = judgments
                    .into_iter()
                    .map(|j| ground_judgment(j, &review.pack, spec_path.as_deref()))
                    .map(|j| match criteria.iter().find(|c| c.id == j.id) {
                        Some(c) => {
                            require_named_code(j, &c.text, &review.pack, spec_path.as_deref())
                        }
                        None => j,
                    })
                    .collect();
                self.record(Fact::CriteriaJudged {
                    judgments: judgments.clone(),
                });
                for j in judgments {
                    self.conformance.judgments.entry(j.id.clone()).or_insert(j);
                }
            }
            Outcome::Adjudicate { rulings, by }
                if self
                    .adjudication
                    .round
                    .as_ref()
                    .is_some_and(|r| r.batch(run).is_some()) =>
            {
                self.stage_run_succeeded(run, &by);
                // Settled here, on the conductor, against the tree before the ruling counts.
                let review = self.review.clone();
                let rulings: Vec<Adjudged> = rulings
                    .into_iter()
                    .filter_map(|a| {
                        let f: PriorFinding = self.prior_finding(&a.id)?;
                        let pre = adjudication::precheck(&f, &review.pack);
                        Some(adjudication::settle(a, &f, &pre, &review.pack))
                    })
                    .collect();
                self.record_rulings(rulings);
            }
            Outcome::Judge { score, by }
                if self.panel.round.as_ref().is_some_and(|r| r.has(run)) =>
            {
                self.stage_run_succeeded(run, &by);
                // Durable as it arrives: a resume never asks this judge again.
                self.record(Fact::PanelScored {
                    score: score.clone(),
                });
                self.panel.failed.remove(&score.judge);
                self.panel
                    .scores
                    .entry(score.judge.clone())
                    .or_insert(score);
            }
            Outcome::MetaJudge { decision, by }
                if self.panel.round.as_ref().is_some_and(|r| r.has(run)) =>
            {
                self.stage_run_succeeded(run, &by);
                self.record_decision(decision);
            }
            Outcome::Synthesize { synthesis, by } => {
                self.stage_run_succeeded(run, &by);
                self.finish_with_summary(synthesis);
            }
            // The scheduler counts only a run's own kind of answer as a success; anything else
            // is a driver's bug, reported and left uncounted.
            _ => self.log(
                Level::Error,
                format!("attempt {attempt}: an answer run {run} does not expect was counted"),
            ),
        }
        if !self.is_done() {
            self.emit_usage();
        }
    }

    fn specialist_succeeded(
        &mut self,
        run: TaskKey,
        findings: Vec<RawFinding>,
        invalid: usize,
        iterations: u32,
        by: ModelUse,
        elapsed: u64,
    ) {
        self.record_success(run, &by.model, &by.stats, iterations, findings.clone());
        self.out.push(Command::LearnModel {
            model: by.model.clone(),
            persona: self.runs[run].persona.clone(),
            ok: true,
            tokens_in: by.stats.tokens_in,
            tokens_out: by.stats.tokens_out,
            duration_ms: elapsed,
        });
        let r = &mut self.runs[run];
        r.complete(&by.model, &by.stats);
        r.findings = findings.len();
        r.invalid_findings = invalid;
        let persona = r.persona.clone();
        let task_id = r.id.clone();
        let node = r.node.clone();
        self.usage.add_counts(&by.stats);
        self.emit(Progress::TaskFinished {
            task: task_id.clone(),
            persona: persona.clone(),
            ok: true,
            findings: findings.len(),
            error: None,
            error_class: None,
            model: by.model.clone(),
            tokens_in: by.stats.tokens_in,
            tokens_out: by.stats.tokens_out,
        });
        self.learn(&task_id, &persona, &findings);
        let reporter = Reporter {
            persona,
            model: by.model,
            node,
            carried_from: by.stats.reused_from.clone(),
        };
        for f in findings {
            self.found.reported.push(Reported {
                task_id: task_id.clone(),
                reporter: reporter.clone(),
                finding: f,
            });
        }
    }

    /// A stage run (scout, planner, a verification or judge batch, the synthesizer) that
    /// succeeded: its run completed, its attempt recorded, its calls counted.
    fn stage_run_succeeded(&mut self, run: TaskKey, by: &ModelUse) {
        self.runs[run].complete(&by.model, &by.stats);
        self.record_success(run, &by.model, &by.stats, 1, Vec::new());
        self.usage.add_counts(&by.stats);
    }

    fn record_success(
        &mut self,
        run: TaskKey,
        model: &str,
        stats: &AttemptStats,
        iterations: u32,
        findings: Vec<RawFinding>,
    ) {
        let record = self.attempt_record(run, model, stats, iterations, None);
        self.out.push(Command::RecordAttempt(Box::new(record)));
        let r = &self.runs[run];
        let (id, persona, n, is_stage) = (
            r.id.clone(),
            r.persona.clone(),
            r.attempts,
            r.task.is_none(),
        );
        self.record(Fact::AttemptSucceeded {
            task_id: id.clone(),
            attempt: n,
            findings,
        });
        // Specialists report their own success (with findings); stage runs end here.
        if is_stage {
            self.emit(Progress::TaskFinished {
                task: id,
                persona,
                ok: true,
                findings: 0,
                error: None,
                error_class: None,
                model: model.to_string(),
                tokens_in: stats.tokens_in,
                tokens_out: stats.tokens_out,
            });
        }
    }
}
