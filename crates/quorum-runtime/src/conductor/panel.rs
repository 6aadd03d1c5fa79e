//! The judge panel's phase: which judges run, one run per judge and then the meta-judge's,
//! what each answer (or failure) records, and the panel as the report shows it.
//!
//! Judges are chosen from the catalog by kind and axis (`Catalog::judge_panel`), the flow's
//! `panel_axes` in order and per axis its first `panel_judges` by name: the engine names no
//! persona. Runs stay on this node (they score this node's gated findings) and are retried by
//! the scheduler under the flow's attempts like conformance batches.

use super::{ConductorMsg, ConductorState, FlowConductor, Phase};
use crate::progress::Progress;
use crate::report::{TaskRun, TaskState};
use crate::worker::Job;
use quorum_core::judging::panel::{self, Decision, JudgeFailure, JudgeScore, PanelReport};
use quorum_core::review::dedup::Gated;
use quorum_core::schedule::TaskKey;
use quorum_store::Event;
use ractor::{ActorProcessingErr, ActorRef};
use std::collections::BTreeMap;

/// The panel runs in flight, by scheduler key: the judges' (by judge name), then the
/// meta-judge's once the judges are done.
#[derive(Debug, Default)]
pub(super) struct PanelRound {
    judges: BTreeMap<TaskKey, String>,
    meta: Option<(TaskKey, String)>,
}

impl PanelRound {
    /// Whether `key` is one of this panel's runs.
    pub(super) fn has(&self, key: TaskKey) -> bool {
        self.judges.contains_key(&key) || self.meta.as_ref().is_some_and(|(k, _)| *k == key)
    }
}

/// The run id of a panel call.
fn run_id(persona: &str) -> String {
    format!("panel:{persona}")
}

impl FlowConductor {
    /// The judges a panel flow asks, in report order: per axis of the flow, the catalog's
    /// first `panel_judges` judges of that axis by name.
    fn panel_roster(state: &ConductorState) -> Vec<String> {
        let ctx = &state.ctx;
        let panel = ctx.catalog.judge_panel();
        let n = ctx.flow.parameters.panel_judges;
        ctx.flow
            .parameters
            .panel_axes
            .iter()
            .flat_map(|a| {
                panel
                    .axes
                    .get(a.as_str())
                    .into_iter()
                    .flatten()
                    .take(n)
                    .map(|p| p.name.clone())
            })
            .collect()
    }

    fn panel_findings(state: &ConductorState) -> Vec<quorum_core::review::finding::Finding> {
        state
            .gated
            .as_ref()
            .map(|g| g.findings.clone())
            .unwrap_or_default()
    }

    fn panel_scores_in_order(state: &ConductorState) -> Vec<JudgeScore> {
        Self::panel_roster(state)
            .iter()
            .filter_map(|n| state.panel_scores.get(n).cloned())
            .collect()
    }

    /// A new run for a panel call by `persona`, its attempt numbers continuing a resumed
    /// review's.
    fn panel_run(state: &mut ConductorState, persona: &str) -> TaskKey {
        let id = run_id(persona);
        let mut r = TaskRun::stage(&id);
        r.persona = persona.to_string();
        r.resumed_attempts = state.resumed_attempts.get(&id).copied().unwrap_or(0);
        r.attempts = r.resumed_attempts;
        state.add_run(r)
    }

    /// The panel: the judges not recorded yet, each a run here; none when the verdict was
    /// recorded before a resume, or when nothing survived to be scored.
    pub(super) async fn start_panel(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        state.phase = Phase::Panel;
        if state.panel_decision.is_some() {
            return Box::pin(Self::panel_finished(myself, state)).await;
        }
        if Self::panel_findings(state).is_empty() {
            // Scoring nothing would cost a call per judge and say nothing.
            state.panel_done = true;
            return Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await;
        }
        state.emit(Progress::Stage {
            stage: "panel".to_string(),
        });
        let mut round = PanelRound::default();
        let mut keys = Vec::new();
        for name in Self::panel_roster(state) {
            if let Some(done) = state.panel_scores.get(&name).cloned() {
                // Answered before the stop: shown as the run it was, never asked again.
                let key = Self::panel_run(state, &name);
                let r = &mut state.runs[key];
                r.state = TaskState::Completed;
                r.model = done.model;
                continue;
            }
            // A judge that failed before a resume gets its chance again.
            state.panel_failed.remove(&name);
            let key = Self::panel_run(state, &name);
            round.judges.insert(key, name);
            keys.push(key);
        }
        state.panel = Some(round);
        if keys.is_empty() {
            return Box::pin(Self::panel_step(myself, state)).await;
        }
        Box::pin(Self::add_tasks_placed(myself, state, keys, false)).await
    }

    /// The job of panel run `key`, if it is one.
    pub(super) fn panel_job(state: &ConductorState, key: TaskKey) -> Option<Job> {
        let round = state.panel.as_ref()?;
        if let Some(judge) = round.judges.get(&key) {
            return Some(Job::Judge {
                judge: judge.clone(),
                findings: Self::panel_findings(state),
            });
        }
        let (k, meta) = round.meta.as_ref()?;
        if *k != key {
            return None;
        }
        let (axes, overall) = panel::aggregate(
            &state.ctx.flow.parameters.panel_axes,
            &Self::panel_scores_in_order(state),
        );
        Some(Job::MetaJudge {
            meta: meta.clone(),
            axes,
            overall,
        })
    }

    /// A panel run will not run again: a judge's failure is recorded (a resume asks it
    /// again), a meta-judge's leaves the verdict to the rule.
    pub(super) async fn panel_gave_up(state: &mut ConductorState, key: TaskKey, why: &str) {
        let Some(round) = state.panel.as_ref() else {
            return;
        };
        if let Some(judge) = round.judges.get(&key).cloned() {
            state
                .ctx
                .facts
                .event(Event::PanelJudgeFailed {
                    judge: judge.clone(),
                    error: why.to_string(),
                })
                .await;
            state.panel_failed.insert(judge, why.to_string());
            return;
        }
        state
            .note(format!(
                "the meta-judge gave no verdict ({why}); the panel's verdict is the rule's"
            ))
            .await;
    }

    /// Record the panel's verdict (a resume runs no panel call after it).
    pub(super) async fn record_decision(state: &mut ConductorState, decision: Decision) {
        if state.panel_decision.is_some() {
            return;
        }
        state
            .ctx
            .facts
            .event(Event::PanelDecided {
                decision: decision.clone(),
            })
            .await;
        state.panel_decision = Some(decision);
    }

    /// Every run of the panel so far has ended: after the judges, the meta-judge (when some
    /// judge scored and the catalog has one); after it, on to the synthesizer.
    pub(super) async fn panel_step(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let meta_ran = state.panel.as_ref().is_some_and(|r| r.meta.is_some());
        let meta = state
            .ctx
            .catalog
            .judge_panel()
            .meta
            .first()
            .map(|p| p.name.clone());
        match meta {
            Some(meta)
                if !meta_ran
                    && state.panel_decision.is_none()
                    && !state.panel_scores.is_empty() =>
            {
                let key = Self::panel_run(state, &meta);
                if let Some(round) = state.panel.as_mut() {
                    round.meta = Some((key, meta));
                }
                Box::pin(Self::add_tasks_placed(myself, state, vec![key], false)).await
            }
            _ => Box::pin(Self::panel_finished(myself, state)).await,
        }
    }

    /// The panel is over: without the meta-judge's verdict the rule gives one (recorded
    /// too); then the synthesizer.
    async fn panel_finished(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        if state.panel_decision.is_none() {
            let (axes, _) = panel::aggregate(
                &state.ctx.flow.parameters.panel_axes,
                &Self::panel_scores_in_order(state),
            );
            if let Some(d) = panel::rule_verdict(&axes) {
                Self::record_decision(state, d).await;
            }
        }
        state.panel = None;
        state.panel_done = true;
        Box::pin(Self::start_phase(myself, state, Phase::Synthesize)).await
    }

    /// The panel as the report shows it, from what is known now; None for a flow without
    /// one, or when the review ended before the panel's turn.
    pub(super) fn panel_of(state: &ConductorState, gated: &Gated) -> Option<PanelReport> {
        if !state.ctx.flow.has(quorum_core::flows::flow::Role::Panel) {
            return None;
        }
        let started = state.panel_done
            || state.panel.is_some()
            || !state.panel_scores.is_empty()
            || state.panel_decision.is_some();
        if !started {
            return None;
        }
        if gated.findings.is_empty() && state.panel_scores.is_empty() {
            return Some(PanelReport::skipped("no surviving findings to score"));
        }
        let roster = Self::panel_roster(state);
        let scores = Self::panel_scores_in_order(state);
        let failed: Vec<JudgeFailure> = roster
            .iter()
            .filter(|n| !state.panel_scores.contains_key(*n))
            .map(|n| JudgeFailure {
                judge: n.clone(),
                error: state.panel_failed.get(n).cloned().unwrap_or_else(|| {
                    "not run: the review ended before this judge answered".to_string()
                }),
            })
            .collect();
        Some(PanelReport::build(
            &state.ctx.flow.parameters.panel_axes,
            roster.len(),
            &scores,
            failed,
            state.panel_decision.clone(),
        ))
    }
}
