//! Coming back: the machine rebuilt from a replayed log (a restart, `quorum resume`, a
//! takeover) continues where the review stopped. Completed tasks keep their recorded findings
//! and are never re-run; the plan is never re-made; tasks that were in flight run again with
//! their attempt numbers continuing; recorded verdicts, criteria, rulings, judges' scores and
//! offered insights are kept, so no model is asked twice for what a fact already holds.

use crate::machine::fact::{AttemptRecord, Fact};
use crate::machine::job::Synthesis;
use crate::machine::progress::Progress;
use crate::machine::protocol::{AttemptClaim, Level};
use crate::machine::replay::Replay;
use crate::machine::run::{TaskRun, TaskState};
use crate::machine::state::{Phase, ReviewMachine};
use crate::review::finding::{Reported, Reporter};

impl ReviewMachine {
    pub(super) fn resume(
        &mut self,
        replay: Replay,
        attempts: Vec<AttemptRecord>,
        claims: Vec<AttemptClaim>,
    ) {
        self.log(
            Level::Info,
            format!("resuming review after fact {}", replay.last_seq),
        );
        // Criteria read and criteria judged are kept: no criteria call or judge batch repeats.
        if let Some((criteria, by_model)) = replay.criteria.clone() {
            self.conformance.criteria = Some(criteria);
            self.conformance.by_model = by_model;
        }
        self.conformance.judgments = replay.criteria_judged.clone();
        // Prior findings ruled on are kept: no adjudicator batch repeats.
        self.adjudication.adjudged = replay.adjudicated.clone();
        self.plan.selection = replay.selection.clone();
        // Judges that answered and the panel's verdict are kept: none is asked again.
        self.panel.scores = replay.panel_scores.clone();
        self.panel.failed = replay.panel_failed.clone();
        self.panel.decision = replay.panel_decision.clone();
        self.plan.resumed_attempts = replay.attempts.clone();
        // What each task was offered stays what it was offered.
        self.memory.offered = replay.offered.clone();
        self.record(Fact::Resumed {
            from_seq: replay.last_seq,
        });
        // Usage so far comes from the recorded attempts, so the final report covers the whole
        // review, not only the part after the crash.
        for a in &attempts {
            self.usage.llm_calls += a.iterations.max(1) as u64;
            self.usage.tokens_in += a.tokens_in;
            self.usage.tokens_out += a.tokens_out;
        }
        let attempts_of = |id: &str| replay.attempts.get(id).copied().unwrap_or(0);
        let succeeded = |id: &str| {
            attempts
                .iter()
                .rev()
                .find(|a| a.task_id == id && a.error.is_none())
        };
        let stage_run = |name: &str, ok: bool| {
            let mut r = TaskRun::stage(name);
            r.attempts = attempts_of(name);
            r.state = if ok {
                TaskState::Completed
            } else {
                TaskState::Failed
            };
            if let Some(a) = succeeded(name) {
                r.model = a.model.clone();
                r.stats.tokens_in = a.tokens_in;
                r.stats.tokens_out = a.tokens_out;
            }
            r
        };
        if self.review.pack.is_empty() {
            return self.finish();
        }
        if let Some(reason) = replay.cancelled.clone() {
            // A cancelled review is never resumed: it ends as the cancel ended it, from the
            // facts the cancel left (the tasks done, their findings judged by grounding).
            self.ending.cancelled = Some(reason.clone());
            self.ending.budget_spent = Some(reason);
        }
        let Some((classification, fallback)) = replay.classification.clone() else {
            if self.ending.cancelled.is_some() {
                return self.resume_finished(&replay);
            }
            return self.start_phase(Phase::Scout);
        };
        self.add_run(stage_run("scout", !fallback));
        self.plan.classification = classification;
        self.plan.classification_fallback = fallback;
        let Some((tasks, rejected)) = replay.plan.clone() else {
            if self.ending.cancelled.is_some() {
                return self.resume_finished(&replay);
            }
            return self.start_phase(Phase::Plan);
        };
        // An exhaustive flow's plan was the engine's: no planner ran.
        if self.review.flow.exhaustive.is_none() {
            self.add_run(stage_run("planner", true));
        }
        self.plan.rounds = replay.rounds.clone();
        self.plan.rejected = rejected;
        self.emit(Progress::Planned {
            tasks: tasks.len(),
            rejected: self.plan.rejected.len(),
        });
        let mut unfinished = Vec::new();
        for t in tasks {
            let mut r = TaskRun::specialist(t.clone());
            r.attempts = attempts_of(&t.id);
            r.resumed_attempts = r.attempts;
            if let Some(findings) = replay.completed.get(&t.id) {
                r.state = TaskState::Completed;
                let (model, node) = succeeded(&t.id)
                    .map(|a| (a.model.clone(), a.node.clone()))
                    .unwrap_or_else(|| (String::new(), self.review.node.clone()));
                if let Some(a) = succeeded(&t.id) {
                    r.stats.tokens_in = a.tokens_in;
                    r.stats.tokens_out = a.tokens_out;
                }
                r.model = model.clone();
                r.node = node.clone();
                r.findings = findings.len();
                self.learn(&t.id, &t.persona, findings);
                let carried_from = succeeded(&t.id).and_then(|a| a.reused_from.clone());
                if let Some(a) = succeeded(&t.id) {
                    r.stats.reused_from = a.reused_from.clone();
                    r.stats.cache = a.cache.clone();
                }
                let reporter = Reporter {
                    persona: t.persona.clone(),
                    model,
                    node,
                    carried_from,
                };
                for f in findings {
                    self.found.reported.push(Reported {
                        task_id: t.id.clone(),
                        reporter: reporter.clone(),
                        finding: f.clone(),
                    });
                }
                self.add_run(r);
            } else if let Some(reason) = replay.abandoned.get(&t.id) {
                let class = reason.split(':').next().unwrap_or("internal").to_string();
                r.state = if class == "circular_fix" {
                    TaskState::CircularFix
                } else {
                    TaskState::Failed
                };
                r.error_classes.push(class);
                r.last_error = Some(reason.clone());
                self.add_run(r);
            } else {
                unfinished.push(self.add_run(r));
            }
        }
        self.set_phase(Phase::Specialists);
        self.found.prior_verdicts = replay.verdicts.clone();
        self.emit(Progress::Stage {
            stage: "specialists".into(),
        });
        if self.ending.cancelled.is_some() {
            return self.resume_finished(&replay);
        }
        if unfinished.is_empty() {
            if let Some(judged) = replay.judged.clone() {
                self.add_run(stage_run("verifier", true));
                let gated = self.gate(judged);
                self.found.gated = Some(gated);
                self.found.verifier_model = succeeded("verifier").map(|a| a.model.clone());
                if let Some((summary, action_items, fallback)) = replay.synthesis.clone() {
                    // The panel runs before the summary: whatever it recorded is all it did.
                    self.panel.done = true;
                    self.add_run(stage_run("synthesizer", !fallback));
                    self.synthesis = Some(Synthesis {
                        summary,
                        action_items,
                        fallback,
                    });
                    self.set_phase(Phase::Synthesize);
                    return self.finish();
                }
                return self.start_phase(Phase::Synthesize);
            }
        }
        let (adopted, rest): (Vec<_>, Vec<_>) = unfinished
            .into_iter()
            .map(|key| (key, self.claim_for(key, &replay, &claims)))
            .partition(|(_, claim)| claim.is_some());
        for (key, claim) in adopted {
            if let Some(claim) = claim {
                self.adopt(key, claim);
            }
        }
        self.add_tasks(rest.into_iter().map(|(key, _)| key).collect());
        self.advance();
    }

    /// The claim on an unfinished specialist task this conductor may adopt: from the node the
    /// replay shows the task's last attempt in flight on (an attempt placed on a peer; never one
    /// this node ran itself, whose worker died with the old conductor).
    fn claim_for(
        &self,
        key: crate::machine::schedule::TaskKey,
        replay: &Replay,
        claims: &[AttemptClaim],
    ) -> Option<(u32, AttemptClaim)> {
        if !self.config.remote {
            return None;
        }
        let id = &self.runs[key].id;
        let (n, node) = replay.in_flight.get(id)?;
        let claim = claims
            .iter()
            .find(|c| &c.task_id == id && &c.node == node && c.number == *n)?;
        Some((*n, claim.clone()))
    }

    /// Adopt the attempt a live worker still runs: recorded, then live in the scheduler under
    /// a fresh lease, with its attempt number kept.
    fn adopt(&mut self, key: crate::machine::schedule::TaskKey, (n, claim): (u32, AttemptClaim)) {
        let r = &mut self.runs[key];
        // The scheduler counts the adopted attempt as this conductor's first.
        r.resumed_attempts = n.saturating_sub(1);
        r.attempts = n;
        r.state = TaskState::Running;
        r.node = claim.node.clone();
        r.started_ms.get_or_insert(self.now);
        let id = r.id.clone();
        self.log(
            Level::Info,
            format!(
                "adopted attempt {n} of {id}, still running on {}",
                claim.node
            ),
        );
        self.record(Fact::AttemptAdopted {
            task_id: id,
            attempt: n,
            node: claim.node.clone(),
        });
        self.feed(
            crate::machine::schedule::Input::Adopt {
                key,
                attempt: claim.attempt,
                node: claim.node,
            },
            None,
        );
    }

    /// A review whose end was decided before the stop (a cancel): finish it from what was
    /// recorded — the verdicts if they were, else grounding's — with the recorded summary or
    /// the deterministic one. No model is asked anything.
    fn resume_finished(&mut self, replay: &Replay) {
        let gated = match replay.judged.clone() {
            Some(judged) => self.gate(judged),
            None => self.ground_only(),
        };
        self.found.gated = Some(gated);
        match replay.synthesis.clone() {
            Some((summary, action_items, fallback)) => {
                self.synthesis = Some(Synthesis {
                    summary,
                    action_items,
                    fallback,
                });
                self.finish();
            }
            None => self.finish_with_fallback_summary(),
        }
    }
}
