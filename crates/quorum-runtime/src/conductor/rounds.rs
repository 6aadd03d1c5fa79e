//! The exhaustive flow in the conductor: the engine's plan (round 1 over every file) in place
//! of the planner, and after each round the evaluation that either adds the next round's
//! tasks or lets verification start. Round decisions are recorded (`RoundCompleted`) before
//! they are acted on, so a resumed review runs the recorded next round and never re-decides
//! (nor asks a model-guided selector again: its choice is in the recorded next round).

use super::{ConductorMsg, ConductorState, FlowConductor};
use crate::report::{TaskRun, TaskState};
use quorum_core::flows::flow::{Role, Select};
use quorum_core::flows::plan::Scope;
use quorum_core::flows::rounds::{self, TaskOutcome};
use quorum_core::schedule::TaskKey;
use quorum_store::Event;
use ractor::{ActorProcessingErr, ActorRef};
use std::collections::{BTreeMap, BTreeSet};

impl FlowConductor {
    /// Round 1: every file of the pack, batched by directory, for the flow's first lane.
    pub(super) async fn exhaustive_plan(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        let ctx = state.ctx.clone();
        let Some(rule) = ctx.flow.exhaustive.as_ref() else {
            return Ok(());
        };
        let scope = Scope {
            catalog: &ctx.catalog,
            pack: &ctx.pack,
            stage_tools: &ctx.flow.stage(Role::Specialist).tools,
        };
        let files: Vec<String> = ctx.pack.files.keys().cloned().collect();
        let (tasks, rejected) = rounds::round_tasks(rule, scope, 1, &files);
        state
            .ctx
            .facts
            .event(Event::PlanCompleted {
                tasks: tasks.clone(),
                rejected: rejected.clone(),
            })
            .await;
        if tasks.is_empty() {
            let why: Vec<String> = rejected
                .iter()
                .map(|r| format!("{} ({})", r.persona, r.reason))
                .collect();
            state.failure = Some(format!(
                "planning failed: the exhaustive flow could make no task: {}; check the flow's \
                 exhaustive.personas against the catalog",
                why.join("; ")
            ));
            Self::finish(myself, state).await;
            return Ok(());
        }
        Self::planned(myself, state, tasks, rejected).await
    }

    /// The specialists are all done: evaluate the round that just ended and, unless it
    /// converged, start the next one. Returns whether a round was started.
    pub(super) async fn end_round(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
    ) -> Result<bool, ActorProcessingErr> {
        let ctx = state.ctx.clone();
        let Some(rule) = ctx.flow.exhaustive.as_ref() else {
            return Ok(false);
        };
        // A spent budget or a cancel ends the rounds with what was found.
        if state.budget_spent.is_some() || state.cancelled.is_some() {
            return Ok(false);
        }
        let round = state.rounds.len() as u32 + 1;
        let mut anchors: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for r in &state.reported {
            anchors
                .entry(r.task_id.as_str())
                .or_default()
                .push(quorum_core::review::dedup::anchor(&r.finding));
        }
        let round_runs = |keep: &dyn Fn(u32) -> bool| -> Vec<&TaskRun> {
            state
                .runs
                .iter()
                .filter(|r| r.task.as_ref().and_then(rounds::round_of).is_some_and(keep))
                .collect()
        };
        let earlier: BTreeSet<String> = round_runs(&|k| k < round)
            .into_iter()
            .filter_map(|r| anchors.get(r.id.as_str()))
            .flatten()
            .cloned()
            .collect();
        let this = round_runs(&|k| k == round);
        let outcomes: Vec<TaskOutcome<'_>> = this
            .iter()
            .filter_map(|r| {
                Some(TaskOutcome {
                    task: r.task.as_ref()?,
                    completed: r.state == TaskState::Completed,
                    anchors: anchors.get(r.id.as_str()).cloned().unwrap_or_default(),
                    tokens_in: r.stats.tokens_in,
                    tokens_out: r.stats.tokens_out,
                })
            })
            .collect();
        if outcomes.is_empty() {
            // This round was evaluated before (a resume) or never had a task.
            return Ok(false);
        }
        let (mut metrics, mut hot) = rounds::evaluate(rule, round, &outcomes, &earlier);
        if metrics.next && rule.select == Select::Model {
            // The new findings of this round, as the selector sees them (first report of each
            // anchor, in report order).
            let this_ids: BTreeSet<&str> = this.iter().map(|r| r.id.as_str()).collect();
            let mut seen: BTreeSet<String> = BTreeSet::new();
            let mut severities: Vec<String> = Vec::new();
            let mut fresh: Vec<&quorum_core::review::finding::RawFinding> = Vec::new();
            for r in &state.reported {
                let a = quorum_core::review::dedup::anchor(&r.finding);
                if this_ids.contains(r.task_id.as_str()) && !earlier.contains(&a) && seen.insert(a)
                {
                    severities.push(format!("{:?}", r.finding.severity));
                    fresh.push(&r.finding);
                }
            }
            let new: Vec<rounds::NewFinding<'_>> = fresh
                .iter()
                .zip(&severities)
                .map(|(f, sev)| rounds::NewFinding {
                    severity: sev.as_str(),
                    title: f.title.as_str(),
                    file: f.file.as_deref(),
                    line: f.line_start,
                })
                .collect();
            // At a round's end no specialist is running: the conductor waits on this one
            // short call (bounded by call_timeout_secs) rather than scheduling it.
            let (answer, stats) = crate::stages::select_round_files(&ctx, rule, round, &new).await;
            if let Err(why) = &answer {
                tracing::warn!(round, error = %why, "round selector failed; the hot-file rule decides");
            }
            state.usage.merge(&stats);
            metrics.tokens_in += stats.tokens_in;
            metrics.tokens_out += stats.tokens_out;
            hot = rounds::choose_files(rule, &ctx.pack, &mut metrics, hot, answer);
        }
        let scope = Scope {
            catalog: &ctx.catalog,
            pack: &ctx.pack,
            stage_tools: &ctx.flow.stage(Role::Specialist).tools,
        };
        let (next, refused) = if hot.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            rounds::round_tasks(rule, scope, round + 1, &hot)
        };
        if metrics.next && next.is_empty() {
            metrics.next = false;
            metrics
                .decision
                .push_str("; but no task could be made for it, so the rounds end here");
        }
        state
            .ctx
            .facts
            .event(Event::RoundCompleted {
                metrics: metrics.clone(),
                next: next.clone(),
            })
            .await;
        tracing::info!(
            round,
            new = metrics.new_findings,
            next = metrics.next,
            "round evaluated"
        );
        state.rejected.extend(refused);
        state.rounds.push(metrics);
        if next.is_empty() {
            return Ok(false);
        }
        let keys: Vec<TaskKey> = next
            .into_iter()
            .map(|t| state.add_run(TaskRun::specialist(t)))
            .collect();
        Self::add_tasks(myself, state, keys).await?;
        Ok(true)
    }
}
