//! The review's phases: what each stage's result means, what its failure degrades to, the
//! flow budgets, resuming from a replayed store, and assembling the report.
//!
//! Scout → planner → specialists → verifier → synthesizer. A failed scout falls back to a
//! facts-only classification; the planner or verifier failing for good fails the review; a
//! failed synthesizer gets the deterministic summary; specialists failing make it partial.
//!
//! The judging phases (conformance, finish review) live in `judging`. A conformance flow
//! judges its spec between the verifier and the synthesizer: the criteria
//! are read from the spec's form (no model) or, failing that, by the criteria stage; then judge
//! batches of `conformance_batch` criteria run like verification batches (here, never on a
//! peer), and each answer is grounded before it counts. Criteria and each batch's verdicts are
//! recorded, so a resume re-reads and re-judges nothing it has.
//!
//! A finish review adjudicates its prior report's findings there too (after conformance, when
//! a flow has both): the pre-check rules on the findings whose file is gone, adjudicator
//! batches of `adjudication_batch` findings rule on the rest, and each ruling is settled
//! against the tree before it counts and is recorded.
//!
//! A panel flow scores the surviving findings last before the synthesizer: one run per judge
//! the flow's axes and `panel_judges` pick from the catalog, each blind to the others, then one
//! meta-judge run over the aggregates. Every answer and the verdict are recorded as they come,
//! so a resume asks no judge twice. The panel fails open: judges that gave no score are listed
//! and not counted, a missing verdict is the rule's, and the review's status never changes.

use super::judging::gate_sentence;
use super::{attempt_record, ConductorMsg, ConductorState, FlowConductor, Phase};
use crate::agent::CallStats;
use crate::facts::Resume;
use crate::progress::Progress;
use crate::report::{assemble, RunFacts, TaskRun, TaskState};
use crate::stages::{self, Synthesis};
use crate::worker::JobOutcome;
use quorum_core::flows::flow::Role;
use quorum_core::judging::adjudication::{self, Adjudged};
use quorum_core::judging::conformance::{ground_judgment, Judgment};
use quorum_core::review::dedup::Gated;
use quorum_core::review::finding::{Reported, Reporter};
use quorum_core::review::judged::Judged;
use quorum_core::schedule::{Input, TaskKey};
use quorum_store::Event;
use ractor::{ActorProcessingErr, ActorRef};

impl FlowConductor {
    /// Enter `phase`: stage phases add their stage run to the scheduler, which starts it.
    pub(super) async fn start_phase(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        phase: Phase,
    ) -> Result<(), ActorProcessingErr> {
        state.phase = phase;
        let name = match phase {
            Phase::Scout => "scout",
            Phase::Plan if state.ctx.flow.exhaustive.is_some() => {
                return Box::pin(Self::exhaustive_plan(myself, state)).await;
            }
            Phase::Plan => "planner",
            Phase::Verify => {
                Self::add_analyzer_candidates(state);
                if state.reported.is_empty() {
                    // Nothing to judge: skip the stage entirely, no model call.
                    state.gated = Some(Gated::default());
                    return Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await;
                }
                if state.budget_spent.is_some() {
                    // No more model calls: grounding alone decides, then the deterministic summary.
                    state.gated = Some(Self::ground_only(state));
                    Self::finish_with_fallback_summary(myself, state).await;
                    return Ok(());
                }
                return Self::start_verification(myself, state).await;
            }
            Phase::Synthesize if state.budget_spent.is_some() => {
                Self::finish_with_fallback_summary(myself, state).await;
                return Ok(());
            }
            Phase::Synthesize if state.ctx.flow.uses_spec() && !state.conformance_done => {
                return Box::pin(Self::start_conformance(myself, state)).await;
            }
            Phase::Synthesize if state.ctx.flow.uses_prior() && !state.adjudication_done => {
                return Box::pin(Self::start_adjudication(myself, state)).await;
            }
            Phase::Synthesize if state.ctx.flow.has(Role::Panel) && !state.panel_done => {
                return Box::pin(Self::start_panel(myself, state)).await;
            }
            Phase::Synthesize => "synthesizer",
            Phase::Specialists
            | Phase::Conformance
            | Phase::Adjudicate
            | Phase::Panel
            | Phase::Done => return Ok(()),
        };
        state.emit(Progress::Stage {
            stage: name.to_string(),
        });
        let key = state.add_run(TaskRun::stage(name));
        // Stages are placed like specialist work: by load, here unless this node is busier.
        let placeable = state.ctx.remote.is_some();
        Box::pin(Self::feed(
            myself,
            state,
            Input::AddTask {
                key,
                stage: true,
                placeable,
            },
            None,
        ))
        .await
    }

    /// The analyzers' leads join the reported findings as candidates, each credited to its
    /// tool (`analyzer:<name>`), so grounding and the verifier judge them like any finding.
    /// They come after the specialists' findings, so the flow's `max_verifications` serves
    /// the specialists first; a specialist reporting the same place corroborates the tool.
    /// Derived from the recorded scope, so a resumed review adds exactly the same ones.
    fn add_analyzer_candidates(state: &mut ConductorState) {
        use quorum_core::analyzer::REPORTER_PREFIX;
        let ctx = state.ctx.clone();
        if ctx.scope.analyzers.leads.is_empty()
            || state
                .reported
                .iter()
                .any(|r| r.reporter.persona.starts_with(REPORTER_PREFIX))
        {
            return;
        }
        for lead in &ctx.scope.analyzers.leads {
            state.reported.push(Reported {
                task_id: lead.reporter_name(),
                reporter: Reporter {
                    persona: lead.reporter_name(),
                    // No model found it.
                    model: String::new(),
                    node: ctx.node.clone(),
                },
                finding: lead.to_finding(&ctx.pack),
            });
        }
    }

    /// A counted success: record it and act on what the stage produced.
    pub(super) async fn succeeded(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        run: TaskKey,
        outcome: JobOutcome,
    ) -> Result<(), ActorProcessingErr> {
        let elapsed = state.runs[run]
            .started
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(0);
        state.runs[run].duration_ms = elapsed;
        match outcome {
            JobOutcome::Scout(Ok((c, st))) => {
                Self::stage_run_succeeded(state, run, &st).await;
                state
                    .ctx
                    .facts
                    .event(Event::ScoutCompleted {
                        classification: c.clone(),
                        fallback: false,
                    })
                    .await;
                state.classification = c;
                Self::start_phase(myself, state, Phase::Plan).await?;
            }
            JobOutcome::Plan(Ok(plan)) => {
                Self::stage_run_succeeded(state, run, &plan.stage).await;
                if let Some(selection) = &plan.selection {
                    state
                        .ctx
                        .facts
                        .event(Event::SelectionRecorded {
                            selection: selection.clone(),
                        })
                        .await;
                }
                state.selection = plan.selection.clone();
                state
                    .ctx
                    .facts
                    .event(Event::PlanCompleted {
                        tasks: plan.tasks.clone(),
                        rejected: plan.rejected.clone(),
                    })
                    .await;
                Box::pin(Self::planned(myself, state, plan.tasks, plan.rejected)).await?;
            }
            JobOutcome::Specialist(Ok(out)) => {
                Self::record_success(
                    state,
                    run,
                    &out.stage.model,
                    &out.stage.stats,
                    out.iterations,
                    out.findings.clone(),
                )
                .await;
                state.ctx.backends.record(
                    &out.stage.model,
                    &state.runs[run].persona,
                    true,
                    out.stage.stats.tokens_in,
                    out.stage.stats.tokens_out,
                    elapsed,
                );
                let r = &mut state.runs[run];
                r.complete(&out.stage.model, &out.stage.stats);
                r.findings = out.findings.len();
                r.invalid_findings = out.invalid;
                let persona = r.persona.clone();
                let task_id = r.id.clone();
                state.usage.merge(&out.stage.stats);
                state.emit(Progress::TaskFinished {
                    task: task_id.clone(),
                    persona: persona.clone(),
                    ok: true,
                    findings: out.findings.len(),
                    error: None,
                    error_class: None,
                    model: out.stage.model.clone(),
                    tokens_in: out.stage.stats.tokens_in,
                    tokens_out: out.stage.stats.tokens_out,
                });
                Self::learn(state, &task_id, &persona, &out.findings);
                let reporter = Reporter {
                    persona,
                    model: out.stage.model.clone(),
                    node: state.runs[run].node.clone(),
                };
                for f in out.findings {
                    state.reported.push(Reported {
                        task_id: task_id.clone(),
                        reporter: reporter.clone(),
                        finding: f,
                    });
                }
            }
            JobOutcome::Verify(Ok(v))
                if state
                    .verify
                    .as_ref()
                    .is_some_and(|r| r.batch(run).is_some()) =>
            {
                // A batch's calls are counted with the round's when verification ends.
                state.runs[run].complete(&v.stage.model, &v.stage.stats);
                Self::record_success(state, run, &v.stage.model, &v.stage.stats, 1, Vec::new())
                    .await;
                if let Some(round) = state.verify.as_mut() {
                    let verdicts = round.judged_batch(run, v);
                    let (done, total) = round.progress();
                    // Durable per batch: a resume takes these verdicts instead of asking again.
                    state
                        .ctx
                        .facts
                        .event(Event::VerdictsRecorded { verdicts })
                        .await;
                    state.emit(Progress::Verified { done, total });
                }
            }
            JobOutcome::Verify(Ok(v)) => {
                Self::stage_run_succeeded(state, run, &v.stage).await;
                state
                    .ctx
                    .facts
                    .event(Event::VerifyCompleted {
                        judged: v.judged.clone(),
                    })
                    .await;
                state.verifier_model = Some(v.stage.model.clone());
                state.verifier_degraded = v.degraded;
                let total = v.judged.len();
                state.emit(Progress::Verified { done: total, total });
                state.gated = Some(Self::gate(state, v.judged));
                Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await?;
            }
            JobOutcome::Criteria(Ok((criteria, st))) => {
                Self::stage_run_succeeded(state, run, &st).await;
                state
                    .ctx
                    .facts
                    .event(Event::CriteriaExtracted {
                        criteria: criteria.clone(),
                        by_model: true,
                    })
                    .await;
                state.criteria = Some(criteria);
                state.criteria_by_model = true;
                Box::pin(Self::start_judging(myself, state)).await?;
            }
            JobOutcome::Conformance(Ok(out))
                if state
                    .conformance
                    .as_ref()
                    .is_some_and(|r| r.batch(run).is_some()) =>
            {
                Self::stage_run_succeeded(state, run, &out.stage).await;
                // Grounded here, on the conductor, before the verdict counts.
                let spec_path = state
                    .ctx
                    .scope
                    .spec
                    .as_ref()
                    .and_then(|s| s.pack_path.clone());
                let judgments: Vec<Judgment> = out
                    .judgments
                    .into_iter()
                    .map(|j| ground_judgment(j, &state.ctx.pack, spec_path.as_deref()))
                    .collect();
                state
                    .ctx
                    .facts
                    .event(Event::CriteriaJudged {
                        judgments: judgments.clone(),
                    })
                    .await;
                for j in judgments {
                    state.judgments.entry(j.id.clone()).or_insert(j);
                }
            }
            JobOutcome::Adjudicate(Ok(out))
                if state
                    .adjudication
                    .as_ref()
                    .is_some_and(|r| r.batch(run).is_some()) =>
            {
                Self::stage_run_succeeded(state, run, &out.stage).await;
                // Settled here, on the conductor, against the tree before the ruling counts.
                let rulings: Vec<Adjudged> = out
                    .rulings
                    .into_iter()
                    .filter_map(|a| {
                        let f = Self::prior_finding(state, &a.id)?;
                        let pre = adjudication::precheck(&f, &state.ctx.pack);
                        Some(adjudication::settle(a, &f, &pre, &state.ctx.pack))
                    })
                    .collect();
                Self::record_rulings(state, rulings).await;
            }
            JobOutcome::Judge(Ok(out)) if state.panel.as_ref().is_some_and(|r| r.has(run)) => {
                Self::stage_run_succeeded(state, run, &out.stage).await;
                // Durable as it arrives: a resume never asks this judge again.
                state
                    .ctx
                    .facts
                    .event(Event::PanelScored {
                        score: out.score.clone(),
                    })
                    .await;
                state.panel_failed.remove(&out.score.judge);
                state
                    .panel_scores
                    .entry(out.score.judge.clone())
                    .or_insert(out.score);
            }
            JobOutcome::MetaJudge(Ok(out)) if state.panel.as_ref().is_some_and(|r| r.has(run)) => {
                Self::stage_run_succeeded(state, run, &out.stage).await;
                Self::record_decision(state, out.decision).await;
            }
            JobOutcome::Synthesize(Ok((s, st))) => {
                Self::stage_run_succeeded(state, run, &st).await;
                Self::finish_with_summary(myself, state, s).await;
            }
            // The scheduler counts only successes as Succeeded; an error here is a bug.
            other => {
                tracing::error!(error = ?other.error(), "a failed outcome was counted as a success");
            }
        }
        state.emit_usage();
        Ok(())
    }

    /// A plan is made (by the planner or, in an exhaustive flow, by the engine): its tasks go
    /// to the scheduler.
    pub(super) async fn planned(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        tasks: Vec<quorum_core::task::Task>,
        rejected: Vec<quorum_core::task::RejectedTask>,
    ) -> Result<(), ActorProcessingErr> {
        state.emit(Progress::Planned {
            tasks: tasks.len(),
            rejected: rejected.len(),
        });
        state.rejected = rejected;
        state.phase = Phase::Specialists;
        state.emit(Progress::Stage {
            stage: "specialists".into(),
        });
        let keys: Vec<TaskKey> = tasks
            .into_iter()
            .map(|t| state.add_run(TaskRun::specialist(t)))
            .collect();
        Box::pin(Self::add_tasks(myself, state, keys)).await?;
        // A plan whose every task was rejected leaves nothing to wait for.
        Box::pin(Self::advance(myself, state)).await
    }

    /// A stage run (scout, planner, a verification or judge batch, the synthesizer) that
    /// succeeded: its run completed, its attempt recorded, its calls counted.
    async fn stage_run_succeeded(
        state: &mut ConductorState,
        run: TaskKey,
        stage: &stages::StageStats,
    ) {
        state.runs[run].complete(&stage.model, &stage.stats);
        Self::record_success(state, run, &stage.model, &stage.stats, 1, Vec::new()).await;
        state.usage.merge(&stage.stats);
    }

    async fn record_success(
        state: &ConductorState,
        run: usize,
        model: &str,
        stats: &CallStats,
        iterations: u32,
        findings: Vec<quorum_core::review::finding::RawFinding>,
    ) {
        let r = &state.runs[run];
        let facts = &state.ctx.facts;
        facts
            .attempt(attempt_record(
                &state.ctx, r, model, stats, iterations, None,
            ))
            .await;
        facts
            .event(Event::AttemptSucceeded {
                task_id: r.id.clone(),
                attempt: r.attempts,
                findings,
            })
            .await;
        // Specialists report their own success (with findings); stage runs end here.
        if r.task.is_none() {
            state.emit(Progress::TaskFinished {
                task: r.id.clone(),
                persona: r.persona.clone(),
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

    /// A stage run failed for good. Scout and synthesizer degrade to deterministic fallbacks;
    /// the planner and verifier failing ends the review as failed.
    pub(super) async fn after_final_failure(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        err: String,
    ) -> Result<(), ActorProcessingErr> {
        match state.phase {
            Phase::Scout => {
                state.classification = stages::fallback_classification(&state.ctx);
                state.classification_fallback = true;
                state
                    .ctx
                    .facts
                    .event(Event::ScoutCompleted {
                        classification: state.classification.clone(),
                        fallback: true,
                    })
                    .await;
                Box::pin(Self::start_phase(myself, state, Phase::Plan)).await
            }
            Phase::Plan => {
                state.failure = Some(format!("planning failed: {err}"));
                Self::finish(myself, state).await;
                Ok(())
            }
            Phase::Verify => {
                state.failure = Some(format!("verification failed: {err}"));
                Self::finish(myself, state).await;
                Ok(())
            }
            Phase::Synthesize => {
                Self::finish_with_fallback_summary(myself, state).await;
                Ok(())
            }
            Phase::Conformance => {
                // The criteria stage failed for good: nothing can be judged. Not recorded, so
                // a resume asks again.
                let why = format!("the spec's criteria could not be read: {err}");
                state.note(why.clone()).await;
                state.conformance_failure = Some(why);
                state.conformance_done = true;
                Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await
            }
            Phase::Specialists | Phase::Adjudicate | Phase::Panel | Phase::Done => Ok(()),
        }
    }

    /// Stop new work once the flow's token budget is spent.
    pub(super) async fn check_budget(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let max = state.ctx.flow.parameters.max_tokens;
        let used = state.usage.tokens_in + state.usage.tokens_out;
        if max > 0 && used >= max && state.budget_spent.is_none() && state.phase != Phase::Done {
            Self::spend_budget(
                myself,
                state,
                format!("token budget spent ({used} of {max} tokens)"),
            )
            .await?;
        }
        Ok(())
    }

    /// The budget is spent: running work is cut (its model calls stopped, late outcomes
    /// fenced), what was found is kept, the review ends partial.
    pub(super) async fn spend_budget(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        why: String,
    ) -> Result<(), ActorProcessingErr> {
        if state.budget_spent.is_some() || state.phase == Phase::Done {
            return Ok(());
        }
        tracing::warn!(reason = %why, "flow budget spent; finishing with what was found");
        state.note(why.clone()).await;
        state.budget_spent = Some(why.clone());
        let phase = state.phase;
        // Hold the phase while the stop fails what is unfinished, so no stage "fallback"
        // starts from inside it.
        state.phase = Phase::Done;
        Self::feed(
            myself,
            state,
            Input::StopAll {
                class: "budget_exhausted".into(),
                reason: why,
            },
            None,
        )
        .await?;
        state.phase = phase;
        match phase {
            // Nothing planned yet: there is nothing to keep.
            Phase::Scout | Phase::Plan => {
                state.failure = Some(format!(
                    "{} before any task ran",
                    state.budget_spent.clone().unwrap_or_default()
                ));
                Self::finish(myself, state).await;
                Ok(())
            }
            Phase::Specialists => Self::start_phase(myself, state, Phase::Verify).await,
            // A cut verifier: grounding alone decides, then the deterministic summary.
            Phase::Verify
            | Phase::Conformance
            | Phase::Adjudicate
            | Phase::Panel
            | Phase::Synthesize => {
                if state.gated.is_none() {
                    state.gated = Some(Self::ground_only(state));
                }
                Self::finish_with_fallback_summary(myself, state).await;
                Ok(())
            }
            Phase::Done => Ok(()),
        }
    }

    /// Rebuild the run from a replayed store and continue where it stopped. Completed tasks keep
    /// their recorded findings and are never re-run; the plan is never re-made; tasks that were
    /// in flight run again with their attempt numbers continuing.
    pub(super) async fn resume(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        resume: Resume,
    ) -> Result<(), ActorProcessingErr> {
        let Resume { replay, attempts } = resume;
        tracing::info!(from_seq = replay.last_seq, "resuming review");
        // Criteria read and criteria judged are kept: no criteria call or judge batch repeats.
        if let Some((criteria, by_model)) = replay.criteria.clone() {
            state.criteria = Some(criteria);
            state.criteria_by_model = by_model;
        }
        state.judgments = replay.criteria_judged.clone();
        // Prior findings ruled on are kept: no adjudicator batch repeats.
        state.adjudged = replay.adjudicated.clone();
        state.selection = replay.selection.clone();
        // Judges that answered and the panel's verdict are kept: none is asked again.
        state.panel_scores = replay.panel_scores.clone();
        state.panel_failed = replay.panel_failed.clone();
        state.panel_decision = replay.panel_decision.clone();
        state.resumed_attempts = replay.attempts.clone();
        // What each task was offered stays what it was offered.
        state.offered = replay.offered.clone();
        state
            .ctx
            .facts
            .event(Event::Resumed {
                from_seq: replay.last_seq,
            })
            .await;
        // Usage so far comes from the recorded attempts, so the final report covers the whole
        // review, not only the part after the crash.
        for a in &attempts {
            state.usage.llm_calls += a.iterations.max(1) as u64;
            state.usage.tokens_in += a.tokens_in;
            state.usage.tokens_out += a.tokens_out;
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
        if state.ctx.pack.is_empty() {
            Self::finish(myself, state).await;
            return Ok(());
        }
        let Some((classification, fallback)) = replay.classification.clone() else {
            return Self::start_phase(myself, state, Phase::Scout).await;
        };
        state.add_run(stage_run("scout", !fallback));
        state.classification = classification;
        state.classification_fallback = fallback;
        let Some((tasks, rejected)) = replay.plan.clone() else {
            return Self::start_phase(myself, state, Phase::Plan).await;
        };
        // An exhaustive flow's plan was the engine's: no planner ran.
        if state.ctx.flow.exhaustive.is_none() {
            state.add_run(stage_run("planner", true));
        }
        state.rounds = replay.rounds.clone();
        state.rejected = rejected;
        state.emit(Progress::Planned {
            tasks: tasks.len(),
            rejected: state.rejected.len(),
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
                    .unwrap_or_else(|| (String::new(), state.ctx.node.clone()));
                if let Some(a) = succeeded(&t.id) {
                    r.stats.tokens_in = a.tokens_in;
                    r.stats.tokens_out = a.tokens_out;
                }
                r.model = model.clone();
                r.node = node.clone();
                r.findings = findings.len();
                Self::learn(state, &t.id, &t.persona, findings);
                let reporter = Reporter {
                    persona: t.persona.clone(),
                    model,
                    node,
                };
                for f in findings {
                    state.reported.push(Reported {
                        task_id: t.id.clone(),
                        reporter: reporter.clone(),
                        finding: f.clone(),
                    });
                }
                state.add_run(r);
            } else if let Some(reason) = replay.abandoned.get(&t.id) {
                let class = reason.split(':').next().unwrap_or("internal").to_string();
                r.state = if class == "circular_fix" {
                    TaskState::CircularFix
                } else {
                    TaskState::Failed
                };
                r.error_classes.push(class);
                r.last_error = Some(reason.clone());
                state.add_run(r);
            } else {
                unfinished.push(state.add_run(r));
            }
        }
        state.phase = Phase::Specialists;
        state.prior_verdicts = replay.verdicts.clone();
        state.emit(Progress::Stage {
            stage: "specialists".into(),
        });
        if unfinished.is_empty() {
            if let Some(judged) = replay.judged.clone() {
                state.add_run(stage_run("verifier", true));
                state.gated = Some(Self::gate(state, judged));
                state.verifier_model = succeeded("verifier").map(|a| a.model.clone());
                if let Some((summary, action_items, fallback)) = replay.synthesis.clone() {
                    // The panel runs before the summary: whatever it recorded is all it did.
                    state.panel_done = true;
                    state.add_run(stage_run("synthesizer", !fallback));
                    state.synthesis = Some(Synthesis {
                        summary,
                        action_items,
                        fallback,
                    });
                    state.phase = Phase::Synthesize;
                    Self::finish(myself, state).await;
                    return Ok(());
                }
                return Self::start_phase(myself, state, Phase::Synthesize).await;
            }
        }
        Self::add_tasks(myself, state, unfinished).await?;
        Self::advance(myself, state).await
    }

    /// Hand runs to the scheduler as tasks (specialist tasks, verification batches), placeable
    /// on peers when the review has any.
    pub(super) async fn add_tasks(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        keys: Vec<TaskKey>,
    ) -> Result<(), ActorProcessingErr> {
        let placeable = state.ctx.remote.is_some();
        Self::add_tasks_placed(myself, state, keys, placeable).await
    }

    /// Split `items` into stage runs of at most `size` (at least 1) named `name`, or `name-1`,
    /// `name-2`, … when there are several; each run's key with its items, in order.
    pub(super) fn stage_batches<T: Clone>(
        state: &mut ConductorState,
        items: &[T],
        size: usize,
        name: &str,
    ) -> Vec<(TaskKey, Vec<T>)> {
        let chunks: Vec<&[T]> = items.chunks(size.max(1)).collect();
        let n = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(k, chunk)| {
                let run = if n == 1 {
                    name.to_string()
                } else {
                    format!("{name}-{}", k + 1)
                };
                (state.add_run(TaskRun::stage(&run)), chunk.to_vec())
            })
            .collect()
    }

    /// `add_tasks`, choosing whether the runs may go to peers.
    pub(super) async fn add_tasks_placed(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        keys: Vec<TaskKey>,
        placeable: bool,
    ) -> Result<(), ActorProcessingErr> {
        for key in keys {
            Box::pin(Self::feed(
                myself,
                state,
                Input::AddTask {
                    key,
                    stage: false,
                    placeable,
                },
                None,
            ))
            .await?;
        }
        Ok(())
    }

    /// Verification: grounding first for every finding (deterministic, here), then the
    /// grounded ones within `max_verifications` in batches of `verify_batch`, each an attempt
    /// placed like a specialist task — so a cluster verifies in parallel.
    async fn start_verification(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        state.emit(Progress::Stage {
            stage: "verifier".to_string(),
        });
        let p = &state.ctx.flow.parameters;
        let (budget, batch) = (p.max_verifications, p.verify_batch.max(1));
        let mut round = VerifyRound::new(&state.reported);
        let prior = std::mem::take(&mut state.prior_verdicts);
        // A resumed review: what finished batches judged stands, and those model-checked
        // findings already used their share of the budget.
        let mut checked = 0usize;
        for (i, key) in round.keys.iter().enumerate() {
            if let Some(j) = prior.get(key) {
                checked += usize::from(j.ballot.is_some());
                round.judged[i] = Some(j.clone());
            }
        }
        let mut ready = Vec::new();
        for (i, r) in state.reported.iter().cloned().enumerate() {
            if round.judged[i].is_some() {
                continue;
            }
            match stages::ground_one(&state.ctx, r) {
                stages::Grounded::Decided(j) => round.judged[i] = Some(j),
                stages::Grounded::Ready {
                    reported, notes, ..
                } => {
                    if checked + ready.len() < budget {
                        ready.push((i, reported, notes));
                    } else {
                        let why = format!(
                            "grounded; not model-checked: over the flow's max_verifications ({budget})"
                        );
                        round.judged[i] = Some(stages::unverified(reported, notes, why));
                    }
                }
            }
        }
        let mut keys = Vec::new();
        for (key, chunk) in Self::stage_batches(state, &ready, batch, "verifier") {
            state.runs[key].persona = "verifier".into();
            round.batches.insert(key, chunk);
            keys.push(key);
        }
        state.verify = Some(round);
        if let Some(places) = Self::independent_verifier_places(state) {
            // Straight into the scheduler, not through `feed`: a preference starts nothing, and
            // `feed` would see a verify phase with no batches yet and call it done.
            for &key in &keys {
                let input = Input::Prefer {
                    key,
                    places: places.clone(),
                };
                let started = state.sched.step(crate::facts::now_ms(), input);
                debug_assert!(started.is_empty(), "a preference started something");
            }
        }
        Box::pin(Self::add_tasks(myself, state, keys)).await?;
        // Grounding may have decided everything: nothing to wait for.
        Box::pin(Self::advance(myself, state)).await
    }

    /// The places serving a model of a family no finder used, when that is some but not all of
    /// them: verification batches prefer them (independence), and fall back to the rest rather
    /// than wait. `None` when every place — or none — would do.
    fn independent_verifier_places(
        state: &ConductorState,
    ) -> Option<Vec<quorum_core::schedule::Place>> {
        use quorum_core::models::lineage;
        use quorum_core::schedule::Place;
        let remote = state.ctx.remote.as_ref()?;
        let finders: std::collections::BTreeSet<String> = state
            .reported
            .iter()
            .map(|r| lineage(&crate::Backends::family_of(&r.reporter.model)))
            .collect();
        let independent = |models: &[String]| {
            models
                .iter()
                .any(|m| !finders.contains(&lineage(&crate::Backends::family_of(m))))
        };
        let local_models = match state.ctx.verifier_model.as_deref() {
            Some(m) if !m.trim().is_empty() => vec![m.to_string()],
            _ => state.ctx.backends.all_models(),
        };
        let mut all = vec![(Place::Local, independent(&local_models))];
        for p in remote.peers() {
            all.push((Place::Peer(p.node.clone()), independent(&p.models)));
        }
        let preferred: Vec<Place> = all
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(p, _)| p.clone())
            .collect();
        (!preferred.is_empty() && preferred.len() < all.len()).then_some(preferred)
    }

    /// Run one verification batch here or ship it to a peer.
    pub(super) async fn start_verification_batch(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        attempt: u64,
        key: TaskKey,
        place: quorum_core::schedule::Place,
        batch: Vec<Reported>,
    ) -> Result<Option<Input>, ActorProcessingErr> {
        use quorum_core::schedule::{AttemptResult, Place};
        match &place {
            Place::Local => {
                let job = crate::worker::Job::Verify {
                    reported: batch,
                    grounding_only: false,
                };
                Self::spawn_worker(myself, state, attempt, job).await?;
                Ok(None)
            }
            Place::Peer(peer) => {
                let id = state.runs[key].id.clone();
                let req = crate::remote::RemoteAttempt::verification(
                    &state.ctx,
                    attempt,
                    &id,
                    batch,
                    state.lease(),
                );
                let sent = match &state.ctx.remote {
                    Some(remote) => remote.dispatch(peer, req).await,
                    None => Err("no remote executor".to_string()),
                };
                match sent {
                    Ok(()) => Ok(None),
                    Err(e) if state.ctx.remote.is_none() => Ok(Some(Input::Outcome {
                        attempt,
                        from: place.clone(),
                        result: AttemptResult::Failure {
                            class: "internal".into(),
                            message: e,
                            retryable: false,
                        },
                    })),
                    Err(e) => {
                        tracing::warn!(node = %peer, error = %e, "cannot reach peer; placing elsewhere");
                        Ok(Some(Input::SendFailed { attempt }))
                    }
                }
            }
        }
    }

    /// Every batch has ended: the verdicts in report order, one fact, the gate, the summary.
    pub(super) async fn verification_done(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(round) = state.verify.take() else {
            return Ok(());
        };
        state.usage.merge(&round.stats);
        if round.model.is_some() {
            state.verifier_model = round.model.clone();
        }
        state.verifier_degraded = round.degraded;
        let judged = round.into_judged();
        state
            .ctx
            .facts
            .event(Event::VerifyCompleted {
                judged: judged.clone(),
            })
            .await;
        let total = judged.len();
        state.emit(Progress::Verified { done: total, total });
        state.gated = Some(Self::gate(state, judged));
        Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await
    }

    /// Record and use the deterministic summary (synthesizer failed, or no budget left), then finish.
    pub(super) async fn finish_with_fallback_summary(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) {
        let gated = state.gated.clone().unwrap_or_default();
        let s = stages::fallback_synthesis(&state.ctx, &gated);
        Self::finish_with_summary(myself, state, s).await;
    }

    /// Record the summary (model-written or fallback) as a fact, then finish.
    async fn finish_with_summary(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        s: Synthesis,
    ) {
        state
            .ctx
            .facts
            .event(Event::SynthesisCompleted {
                summary: s.summary.clone(),
                action_items: s.action_items.clone(),
                fallback: s.fallback,
            })
            .await;
        state.synthesis = Some(s);
        Self::finish(myself, state).await;
    }

    pub(super) async fn finish(myself: &ActorRef<ConductorMsg>, state: &mut ConductorState) {
        if state.phase == Phase::Done && state.done.is_none() {
            return;
        }
        state.phase = Phase::Done;
        // Nothing may outlive the review: a worker still running is stopped.
        for (_, cell) in state.workers.drain() {
            cell.kill();
        }
        let gated = state.gated.take().unwrap_or_default();
        let synthesis = state
            .synthesis
            .take()
            .unwrap_or_else(|| stages::fallback_synthesis(&state.ctx, &gated));
        let conformance = Self::merge_readiness(state);
        let mut synthesis = synthesis;
        if let (true, Some(gate)) = (synthesis.fallback, &conformance) {
            // The deterministic summary says what blocks the merge, as a model's would.
            synthesis.summary.push(' ');
            synthesis.summary.push_str(&gate_sentence(gate));
        }
        let adjudication = Self::adjudication_of(state);
        let panel = Self::panel_of(state, &gated);
        let facts = RunFacts {
            panel,
            adjudication,
            selection: state.selection.take(),
            conformance,
            conformance_failure: state.conformance_failure.take(),
            runs: std::mem::take(&mut state.runs),
            classification: state.classification.clone(),
            classification_fallback: state.classification_fallback,
            rejected: std::mem::take(&mut state.rejected),
            reported: state.reported.len(),
            gated,
            synthesis,
            verifier_model: state.verifier_model.clone(),
            verifier_degraded: state.verifier_degraded,
            usage: state.usage.clone(),
            wall_ms: state.started.elapsed().as_millis() as u64,
            failure: state.failure.take(),
            budget: state.budget_spent.clone(),
            cancelled: state.cancelled.clone(),
            ledger: std::mem::take(&mut state.ledger),
            rounds: std::mem::take(&mut state.rounds),
        };
        let report = assemble(&state.ctx, facts);
        let status = format!("{:?}", report.status).to_lowercase();
        state
            .ctx
            .facts
            .event(Event::FlowFinished {
                status: status.clone(),
                reason: report.status_reason.clone(),
            })
            .await;
        state.ctx.facts.report(report.to_json()).await;
        state.emit_usage();
        state.emit(Progress::Finished {
            status: format!("{:?}", report.status).to_lowercase(),
        });
        if let Some(tx) = state.done.take() {
            let _ = tx.send(report);
        }
        myself.stop(None);
    }
}

/// A verification round: each reported finding's verdict once known, and the batches still
/// to judge (by scheduler key), with the grounding notes to keep if a batch cannot run.
#[derive(Debug, Default)]
pub(super) struct VerifyRound {
    judged: Vec<Option<Judged>>,
    /// Each reported finding's durable key: (task id, position among that task's findings).
    keys: Vec<(String, usize)>,
    batches: std::collections::BTreeMap<TaskKey, Vec<(usize, Reported, Vec<String>)>>,
    model: Option<String>,
    degraded: bool,
    stats: CallStats,
}

impl VerifyRound {
    fn new(reported: &[Reported]) -> VerifyRound {
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
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
    pub(super) fn batch(&self, key: TaskKey) -> Option<Vec<Reported>> {
        self.batches
            .get(&key)
            .map(|b| b.iter().map(|(_, r, _)| r.clone()).collect())
    }

    /// Take a batch's verdicts; returns them keyed for the store.
    fn judged_batch(
        &mut self,
        key: TaskKey,
        v: crate::worker::VerifyOutput,
    ) -> Vec<quorum_store::RecordedVerdict> {
        let Some(batch) = self.batches.get(&key) else {
            return Vec::new();
        };
        let mut recorded = Vec::with_capacity(batch.len());
        for ((i, _, _), j) in batch.iter().zip(v.judged) {
            if let Some((task_id, ordinal)) = self.keys.get(*i) {
                recorded.push(quorum_store::RecordedVerdict {
                    task_id: task_id.clone(),
                    ordinal: *ordinal,
                    judged: j.clone(),
                });
            }
            self.judged[*i] = Some(j);
        }
        self.stats.merge(&v.stage.stats);
        self.model.get_or_insert(v.stage.model);
        self.degraded |= v.degraded;
        recorded
    }

    /// A batch will not be verified: its findings stay, UNVERIFIED, saying why.
    pub(super) fn give_up(&mut self, key: TaskKey, why: &str) {
        let Some(batch) = self.batches.get(&key) else {
            return;
        };
        for (i, r, notes) in batch {
            if self.judged[*i].is_none() {
                self.judged[*i] = Some(stages::unverified(
                    r.clone(),
                    notes.clone(),
                    format!("verification could not run: {why}"),
                ));
            }
        }
    }

    fn progress(&self) -> (usize, usize) {
        (
            self.judged.iter().filter(|j| j.is_some()).count(),
            self.judged.len(),
        )
    }

    fn into_judged(self) -> Vec<Judged> {
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
                        .map(|(_, r, n)| {
                            stages::unverified(r.clone(), n.clone(), "not verified".into())
                        })
                })
            })
            .collect()
    }
}
