//! Placing a run's attempts: each waiting attempt to a node with room (shipped as data) or a
//! slot here (a worktree brought up to the fixes kept so far); and settling what comes back —
//! a place freed, a handed-back attempt waiting to be placed again.

use super::{setup, AgentDone, HandBack, RemoteDone, Run, Running, Slot};
use crate::agent;
use crate::placement::Place;
use crate::remote::{PlacementError, ShippedAttempt, ShippedTests};
use crate::worktree::{FileChange, Worktree};
use crate::FixError;
use quorum_runtime::agent::CallStats;
use std::time::Instant;

impl<P: FnMut(String)> Run<'_, P> {
    /// Nodes that joined the cluster since the run started take attempts from now on.
    pub(super) fn join_new_nodes(&mut self) {
        let Some(remote) = &self.job.remote else {
            return;
        };
        for name in self.placement.add_nodes(remote.nodes()) {
            (self.progress)(format!("{name} joined this run"));
        }
    }

    /// Start what waits where there is room: a node, else (with `here`) a slot here brought up
    /// to the fixes kept so far. Without `here` — while changes wait to be judged — an agent
    /// here would start on a tree about to change, so only nodes are given work.
    pub(super) fn place(&mut self, running: &mut Running, here: bool) -> Result<(), FixError> {
        let job = self.job;
        while !self.waiting.is_empty() {
            let Some(place) = self.placement.take(Instant::now(), here) else {
                break;
            };
            let (finding, attempt, feedback) = self.waiting.pop_front().expect("not empty");
            let Some(target) = job
                .targets
                .iter()
                .find(|t| t.finding.id == finding)
                .cloned()
            else {
                self.placement.release(&place);
                continue;
            };
            self.pace.started(&finding, attempt, Instant::now());
            match place {
                Place::Node(node) => {
                    (self.progress)(format!(
                        "{finding}: attempt {attempt} on {node} — {}",
                        target.finding.title
                    ));
                    let Some(workers) = job.remote.clone() else {
                        self.placement.release(&Place::Node(node));
                        continue;
                    };
                    let shipped = ShippedAttempt {
                        run_id: job.run_id.clone(),
                        target,
                        attempt,
                        feedback: feedback.clone(),
                        bounds: job.bounds,
                        tree: self.tree.manifest(),
                        tests: job.tests.as_ref().map(|t| ShippedTests {
                            command: t.command.clone(),
                            timeout_secs: t.timeout.as_secs(),
                            max_output: t.max_output,
                            base_failing: self.base_failing.clone().unwrap_or_default(),
                        }),
                        verify: job.verifier.is_some(),
                        verifier_model: job.verifier_model.clone(),
                    };
                    let (contents, based_on) = (self.tree.contents(), self.ledger.kept.len());
                    running.spawn(async move {
                        match workers.run(&node, shipped, contents).await {
                            Ok(r) => Ok(AgentDone {
                                place: Place::Node(node.clone()),
                                slot: None,
                                finding,
                                attempt,
                                outcome: r.outcome,
                                fixer_model: r.model.clone(),
                                changes: r.changes.iter().map(FileChange::from).collect(),
                                stats: r.stats,
                                rollback: Ok(()),
                                remote: Some(RemoteDone {
                                    node: r.node,
                                    tests: r.tests,
                                    tests_not_run: r.tests_not_run,
                                    verifier: r.verifier,
                                    based_on,
                                }),
                            }),
                            Err(error) => Err(HandBack {
                                node,
                                error,
                                finding,
                                attempt,
                                feedback,
                            }),
                        }
                    });
                }
                Place::Local(index) => {
                    let mut slot = match self.slots[index].take() {
                        Some(slot) => slot,
                        None => {
                            let dir = job.work_dir.join(format!("agent-{index}"));
                            let _ = std::fs::remove_dir_all(&dir);
                            Slot {
                                worktree: Worktree::materialize(&job.pack, dir.clone(), job.bounds)
                                    .map_err(|e| setup(&dir, e))?,
                                synced: 0,
                            }
                        }
                    };
                    for kept in &self.ledger.kept[slot.synced..] {
                        slot.worktree
                            .apply_recorded(&kept.changes)
                            .map_err(|e| setup(slot.worktree.root(), e))?;
                    }
                    slot.synced = self.ledger.kept.len();
                    (self.progress)(format!(
                        "{finding}: attempt {attempt} — {}",
                        target.finding.title
                    ));
                    let fixer = job.fixer.clone();
                    let limits = job.loop_limits;
                    running.spawn(async move {
                        let mut stats = CallStats::default();
                        let outcome = agent::attempt(
                            &fixer.client,
                            &fixer.spec,
                            limits,
                            &target,
                            &mut slot.worktree,
                            feedback.as_deref(),
                            &mut stats,
                        )
                        .await;
                        let changes = slot.worktree.changes();
                        let rollback = slot.worktree.rollback();
                        Ok(AgentDone {
                            place: Place::Local(index),
                            slot: Some(slot),
                            finding,
                            attempt,
                            outcome,
                            fixer_model: fixer.spec.model.clone(),
                            changes,
                            stats,
                            rollback,
                            remote: None,
                        })
                    });
                }
            }
        }
        Ok(())
    }

    /// A finished attempt's place is free again; a handed-back one waits to be placed again.
    /// Returns the attempts to judge.
    pub(super) fn settle(
        &mut self,
        r: Result<AgentDone, HandBack>,
    ) -> Result<Option<AgentDone>, FixError> {
        let mut done = match r {
            Ok(done) => done,
            Err(back) => {
                self.pace.forget(&back.finding, back.attempt);
                self.placement.release(&Place::Node(back.node.clone()));
                let what = match &back.error {
                    PlacementError::Lost(why) => {
                        self.placement.lose(&back.node);
                        format!(
                            "{} is lost ({why}); it takes no more of this run",
                            back.node
                        )
                    }
                    PlacementError::Busy(why) => {
                        self.placement.pause(&back.node, Instant::now());
                        format!("{} is busy ({why})", back.node)
                    }
                };
                (self.progress)(format!(
                    "{}: attempt {} handed back: {what}; placed again",
                    back.finding, back.attempt
                ));
                self.waiting
                    .push_front((back.finding, back.attempt, back.feedback));
                return Ok(None);
            }
        };
        self.placement.release(&done.place);
        self.pace
            .finished(&done.finding, done.attempt, Instant::now());
        if let Some(slot) = done.slot.take() {
            if let Err(e) = std::mem::replace(&mut done.rollback, Ok(())) {
                return Err(setup(slot.worktree.root(), e));
            }
            if let Place::Local(index) = done.place {
                self.slots[index] = Some(slot);
            }
        }
        self.stats.llm_calls += done.stats.llm_calls;
        self.stats.tokens_in += done.stats.tokens_in;
        self.stats.tokens_out += done.stats.tokens_out;
        if let Some(r) = &done.remote {
            if let Some(why) = &r.tests_not_run {
                if self.told_no_tests.insert(r.node.clone()) {
                    (self.progress)(format!("{why}; its attempts' tests run here"));
                }
            }
        }
        Ok(Some(done))
    }
}
