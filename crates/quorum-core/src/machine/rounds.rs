//! The exhaustive flow: the engine's plan (round 1 over every file) in place of the planner,
//! and after each round the evaluation that either adds the next round's tasks or lets
//! verification start. Round decisions are recorded (`RoundCompleted`) before they are acted
//! on, so a resumed review runs the recorded next round and never re-decides (nor asks a
//! model-guided selector again: its choice is in the recorded next round).

use crate::flows::flow::Role;
use crate::flows::plan::Scope;
use crate::flows::rounds::{self, RoundMetrics, TaskOutcome};
use crate::machine::batches::PendingRound;
use crate::machine::fact::Fact;
use crate::machine::job::AttemptStats;
use crate::machine::protocol::{Command, Level, RoundFinding};
use crate::machine::run::{TaskRun, TaskState};
use crate::machine::schedule::TaskKey;
use crate::machine::state::{Phase, ReviewMachine};
use std::collections::{BTreeMap, BTreeSet};

impl ReviewMachine {
    /// Round 1: every file of the pack, batched by directory, for the flow's first lane.
    pub(super) fn exhaustive_plan(&mut self) {
        let review = self.review.clone();
        let Some(rule) = review.flow.exhaustive.as_ref() else {
            return;
        };
        let scope = Scope {
            catalog: &review.catalog,
            pack: &review.pack,
            stage_tools: &review.flow.stage(Role::Specialist).tools,
        };
        let files: Vec<String> = review.pack.files.keys().cloned().collect();
        let (tasks, rejected) = rounds::round_tasks(rule, scope, 1, &files);
        self.record(Fact::PlanCompleted {
            tasks: tasks.clone(),
            rejected: rejected.clone(),
        });
        if tasks.is_empty() {
            let why: Vec<String> = rejected
                .iter()
                .map(|r| format!("{} ({})", r.persona, r.reason))
                .collect();
            self.ending.failure = Some(format!(
                "planning failed: the exhaustive flow could make no task: {}; check the flow's \
                 exhaustive.personas against the catalog",
                why.join("; ")
            ));
            return self.finish();
        }
        self.planned(tasks, rejected);
    }

    /// The specialists are all done: evaluate the round that just ended and, unless it
    /// converged, start the next one (asking the flow's file selector first when it has one).
    /// Returns whether the review stays in the specialists' phase.
    pub(super) fn end_round(&mut self) -> bool {
        let review = self.review.clone();
        let Some(rule) = review.flow.exhaustive.as_ref() else {
            return false;
        };
        // A spent budget or a cancel ends the rounds with what was found.
        if self.ending.budget_spent.is_some() || self.ending.cancelled.is_some() {
            return false;
        }
        let round = self.plan.rounds.len() as u32 + 1;
        let mut anchors: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for r in &self.found.reported {
            anchors
                .entry(r.task_id.as_str())
                .or_default()
                .push(crate::review::dedup::anchor(&r.finding));
        }
        let round_runs = |keep: &dyn Fn(u32) -> bool| -> Vec<&TaskRun> {
            self.runs
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
            return false;
        }
        let (metrics, hot) = rounds::evaluate(rule, round, &outcomes, &earlier);
        if metrics.next && rule.select == crate::flows::flow::Select::Model {
            // The new findings of this round, as the selector sees them (first report of each
            // anchor, in report order).
            let this_ids: BTreeSet<&str> = this.iter().map(|r| r.id.as_str()).collect();
            let mut seen: BTreeSet<String> = BTreeSet::new();
            let mut new = Vec::new();
            for r in &self.found.reported {
                let a = crate::review::dedup::anchor(&r.finding);
                if this_ids.contains(r.task_id.as_str()) && !earlier.contains(&a) && seen.insert(a)
                {
                    new.push(RoundFinding {
                        severity: format!("{:?}", r.finding.severity),
                        title: r.finding.title.clone(),
                        file: r.finding.file.clone(),
                        line: r.finding.line_start,
                    });
                }
            }
            // At a round's end no specialist is running: the machine waits on this one short
            // call (bounded by call_timeout_secs) rather than scheduling it.
            self.plan.selecting = Some(round);
            self.plan.pending_round = Some(PendingRound { metrics, hot });
            self.out.push(Command::ChooseRoundFiles { round, new });
            return true;
        }
        self.next_round(round, metrics, hot)
    }

    /// The selector answered for `round`: its files (or the hot-file rule's, when it failed)
    /// make the next round.
    pub(super) fn round_files_chosen(
        &mut self,
        round: u32,
        answer: Result<Vec<String>, String>,
        stats: AttemptStats,
    ) {
        if self.plan.selecting != Some(round) || self.phase != Phase::Specialists {
            return;
        }
        self.plan.selecting = None;
        let Some(PendingRound { mut metrics, hot }) = self.plan.pending_round.take() else {
            return;
        };
        let review = self.review.clone();
        let Some(rule) = review.flow.exhaustive.as_ref() else {
            return;
        };
        if let Err(why) = &answer {
            self.log(
                Level::Warn,
                format!("round {round} selector failed; the hot-file rule decides: {why}"),
            );
        }
        self.usage.add_counts(&stats);
        metrics.tokens_in += stats.tokens_in;
        metrics.tokens_out += stats.tokens_out;
        let hot = rounds::choose_files(rule, &review.pack, &mut metrics, hot, answer);
        if !self.next_round(round, metrics, hot) {
            self.start_phase(Phase::Verify);
        }
    }

    /// Record round `round`'s evaluation and add the next round's tasks on `hot`; returns
    /// whether a next round started.
    fn next_round(&mut self, round: u32, mut metrics: RoundMetrics, hot: Vec<String>) -> bool {
        let review = self.review.clone();
        let Some(rule) = review.flow.exhaustive.as_ref() else {
            return false;
        };
        let scope = Scope {
            catalog: &review.catalog,
            pack: &review.pack,
            stage_tools: &review.flow.stage(Role::Specialist).tools,
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
        self.record(Fact::RoundCompleted {
            metrics: metrics.clone(),
            next: next.clone(),
        });
        self.log(
            Level::Info,
            format!(
                "round {round} evaluated: {} new findings, next round: {}",
                metrics.new_findings, metrics.next
            ),
        );
        self.plan.rejected.extend(refused);
        self.plan.rounds.push(metrics);
        if next.is_empty() {
            return false;
        }
        let keys: Vec<TaskKey> = next
            .into_iter()
            .map(|t| self.add_run(TaskRun::specialist(t)))
            .collect();
        self.add_tasks(keys);
        true
    }
}
