//! The judge panel's phase: which judges run, one run per judge and then the meta-judge's,
//! what each answer (or failure) records, and the panel as the report shows it.
//!
//! Judges are chosen from the catalog by kind and axis (`Catalog::judge_panel`), the flow's
//! `panel_axes` in order and per axis its first `panel_judges` by name: the engine names no
//! persona. Runs stay on the conducting node (they score its gated findings) and are retried by
//! the scheduler under the flow's attempts like conformance batches. The panel fails open:
//! judges that gave no score are listed and not counted, a missing verdict is the rule's, and
//! the review's status never changes.

use crate::judging::panel::{self, Decision, JudgeFailure, JudgeScore, PanelReport};
use crate::machine::batches::PanelRound;
use crate::machine::fact::Fact;
use crate::machine::job::Job;
use crate::machine::progress::Progress;
use crate::machine::run::TaskRun;
use crate::machine::run::TaskState;
use crate::machine::schedule::TaskKey;
use crate::machine::state::{Phase, ReviewMachine};
use crate::review::dedup::Gated;
use crate::review::finding::Finding;

/// The run id of a panel call.
fn run_id(persona: &str) -> String {
    format!("panel:{persona}")
}

impl ReviewMachine {
    /// The judges a panel flow asks, in report order: per axis of the flow, the catalog's
    /// first `panel_judges` judges of that axis by name.
    fn panel_roster(&self) -> Vec<String> {
        let review = &self.review;
        let panel = review.catalog.judge_panel();
        let n = review.flow.parameters.panel_judges;
        review
            .flow
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

    fn panel_findings(&self) -> Vec<Finding> {
        self.found
            .gated
            .as_ref()
            .map(|g| g.findings.clone())
            .unwrap_or_default()
    }

    fn panel_scores_in_order(&self) -> Vec<JudgeScore> {
        self.panel_roster()
            .iter()
            .filter_map(|n| self.panel.scores.get(n).cloned())
            .collect()
    }

    /// A new run for a panel call by `persona`, its attempt numbers continuing a resumed
    /// review's.
    fn panel_run(&mut self, persona: &str) -> TaskKey {
        let id = run_id(persona);
        let mut r = TaskRun::stage(&id);
        r.persona = persona.to_string();
        r.resumed_attempts = self.plan.resumed_attempts.get(&id).copied().unwrap_or(0);
        r.attempts = r.resumed_attempts;
        self.add_run(r)
    }

    /// The panel: the judges not recorded yet, each a run here; none when the verdict was
    /// recorded before a resume, or when nothing survived to be scored.
    pub(super) fn start_panel(&mut self) {
        self.set_phase(Phase::Panel);
        if self.panel.decision.is_some() {
            return self.panel_finished();
        }
        if self.panel_findings().is_empty() {
            // Scoring nothing would cost a call per judge and say nothing.
            self.panel.done = true;
            return self.start_phase(Phase::Synthesize);
        }
        self.emit(Progress::Stage {
            stage: "panel".to_string(),
        });
        let mut round = PanelRound::default();
        let mut keys = Vec::new();
        for name in self.panel_roster() {
            if let Some(done) = self.panel.scores.get(&name).cloned() {
                // Answered before the stop: shown as the run it was, never asked again.
                let key = self.panel_run(&name);
                let r = &mut self.runs[key];
                r.state = TaskState::Completed;
                r.model = done.model;
                continue;
            }
            // A judge that failed before a resume gets its chance again.
            self.panel.failed.remove(&name);
            let key = self.panel_run(&name);
            round.judges.insert(key, name);
            keys.push(key);
        }
        self.panel.round = Some(round);
        if keys.is_empty() {
            return self.panel_step();
        }
        self.add_tasks_placed(keys, false);
    }

    /// The job of panel run `key`, if it is one.
    pub(super) fn panel_job(&self, key: TaskKey) -> Option<Job> {
        let round = self.panel.round.as_ref()?;
        if let Some(judge) = round.judges.get(&key) {
            return Some(Job::Judge {
                judge: judge.clone(),
                findings: self.panel_findings(),
            });
        }
        let (k, meta) = round.meta.as_ref()?;
        if *k != key {
            return None;
        }
        let (axes, overall) = panel::aggregate(
            &self.review.flow.parameters.panel_axes,
            &self.panel_scores_in_order(),
        );
        Some(Job::MetaJudge {
            meta: meta.clone(),
            axes,
            overall,
        })
    }

    /// A panel run will not run again: a judge's failure is recorded (a resume asks it
    /// again), a meta-judge's leaves the verdict to the rule.
    pub(super) fn panel_gave_up(&mut self, key: TaskKey, why: &str) {
        let Some(round) = self.panel.round.as_ref() else {
            return;
        };
        if let Some(judge) = round.judges.get(&key).cloned() {
            self.record(Fact::PanelJudgeFailed {
                judge: judge.clone(),
                error: why.to_string(),
            });
            self.panel.failed.insert(judge, why.to_string());
            return;
        }
        self.note(format!(
            "the meta-judge gave no verdict ({why}); the panel's verdict is the rule's"
        ));
    }

    /// Record the panel's verdict (a resume runs no panel call after it).
    pub(super) fn record_decision(&mut self, decision: Decision) {
        if self.panel.decision.is_some() {
            return;
        }
        self.record(Fact::PanelDecided {
            decision: decision.clone(),
        });
        self.panel.decision = Some(decision);
    }

    /// Every run of the panel so far has ended: after the judges, the meta-judge (when some
    /// judge scored and the catalog has one); after it, on to the synthesizer.
    pub(super) fn panel_step(&mut self) {
        let meta_ran = self.panel.round.as_ref().is_some_and(|r| r.meta.is_some());
        let meta = self
            .review
            .catalog
            .judge_panel()
            .meta
            .first()
            .map(|p| p.name.clone());
        match meta {
            Some(meta)
                if !meta_ran && self.panel.decision.is_none() && !self.panel.scores.is_empty() =>
            {
                let key = self.panel_run(&meta);
                if let Some(round) = self.panel.round.as_mut() {
                    round.meta = Some((key, meta));
                }
                self.add_tasks_placed(vec![key], false);
            }
            _ => self.panel_finished(),
        }
    }

    /// The panel is over: without the meta-judge's verdict the rule gives one (recorded
    /// too); then the synthesizer.
    fn panel_finished(&mut self) {
        if self.panel.decision.is_none() {
            let (axes, _) = panel::aggregate(
                &self.review.flow.parameters.panel_axes,
                &self.panel_scores_in_order(),
            );
            if let Some(d) = panel::rule_verdict(&axes) {
                self.record_decision(d);
            }
        }
        self.panel.round = None;
        self.panel.done = true;
        self.start_phase(Phase::Synthesize);
    }

    /// The panel as the report shows it, from what is known now; None for a flow without
    /// one, or when the review ended before the panel's turn.
    pub(super) fn panel_of(&self, gated: &Gated) -> Option<PanelReport> {
        if !self.review.flow.has(crate::flows::flow::Role::Panel) {
            return None;
        }
        let started = self.panel.done
            || self.panel.round.is_some()
            || !self.panel.scores.is_empty()
            || self.panel.decision.is_some();
        if !started {
            return None;
        }
        if gated.findings.is_empty() && self.panel.scores.is_empty() {
            return Some(PanelReport::skipped("no surviving findings to score"));
        }
        let roster = self.panel_roster();
        let scores = self.panel_scores_in_order();
        let failed: Vec<JudgeFailure> = roster
            .iter()
            .filter(|n| !self.panel.scores.contains_key(*n))
            .map(|n| JudgeFailure {
                judge: n.clone(),
                error: self.panel.failed.get(n).cloned().unwrap_or_else(|| {
                    "not run: the review ended before this judge answered".to_string()
                }),
            })
            .collect();
        Some(PanelReport::build(
            &self.review.flow.parameters.panel_axes,
            roster.len(),
            &scores,
            failed,
            self.panel.decision.clone(),
        ))
    }
}
