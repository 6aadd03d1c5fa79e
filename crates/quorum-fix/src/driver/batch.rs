//! Judging what finished together: a change that needs no test run here (unusable, tested by
//! its node on the tree it would be kept into, or failed by its node) is judged alone; the
//! others that land cleanly on disjoint files are checked each on its own change, applied
//! together and tested in one run — kept together when it breaks nothing, else judged alone.

use super::{setup, AgentDone, Run};
use crate::judge;
use crate::merge::{self, Landed};
use crate::worktree::FileChange;
use crate::FixError;
use quorum_core::fixing::fix_loop::{AnalyzerCheck, Command, Oracles, VerifierCheck};
use quorum_runtime::agent::CallStats;
use std::collections::BTreeSet;
use std::time::Instant;

/// A change ready to be tested with others: applied to the main worktree, its change-level
/// checks passed.
struct Member {
    done: AgentDone,
    applied: Vec<FileChange>,
    analyzer: Option<AnalyzerCheck>,
    verifier: Option<VerifierCheck>,
}

impl<P: FnMut(String)> Run<'_, P> {
    /// Judge what finished together. A change that is no usable edit, conflicts, or failed
    /// its node's tests is judged alone; so is one whose node tested it on the tree it would
    /// be kept into. The others that touch disjoint files and pass the analyzers and the
    /// verifier are applied together and tested in one run: kept together when it breaks no
    /// test the base passes, else each judged alone.
    pub(super) async fn judge_ready(&mut self, ready: Vec<AgentDone>) -> Result<(), FixError> {
        let mut candidates = Vec::new();
        // Held ones are judged now, with what came back (or alone, once their wait is over):
        // a change is held once at most.
        let held_before = !self.deferred.is_empty();
        let mut ready = ready;
        ready.splice(0..0, std::mem::take(&mut self.deferred));
        self.defer_until = None;
        for done in ready {
            let usable = done.outcome.failure.is_none() && !done.changes.is_empty();
            let node_failed = done
                .remote
                .as_ref()
                .is_some_and(|r| judge::breaks_tests(r.tests.as_ref(), self.base_failing.as_ref()));
            if !usable || node_failed || self.job.tests.is_none() {
                self.judge_stale_failure_or_one(done).await?;
                continue;
            }
            // Tested by its node on the tree as it is now (asked after the ones before it
            // here were judged, which may have kept fixes): no run here.
            let node_tested_here = done
                .remote
                .as_ref()
                .is_some_and(|r| r.based_on == self.ledger.kept.len() && r.tests.is_some());
            if node_tested_here {
                self.judge_one(done).await?;
            } else {
                candidates.push(done);
            }
        }
        if candidates.len() == 1 && !held_before {
            if let Some(wait) = self.pace.wait_for_next(Instant::now()) {
                // Another attempt is due back before a run here would end: one run for both.
                self.deferred = candidates;
                self.defer_until = Some(Instant::now() + wait);
                return Ok(());
            }
        }
        if candidates.len() < 2 {
            for done in candidates {
                self.judge_one(done).await?;
            }
            return Ok(());
        }
        // The batch: changes that land cleanly on the kept fixes, each on files no other
        // member touches.
        let mut batch: Vec<(AgentDone, Vec<FileChange>)> = Vec::new();
        let mut later = Vec::new();
        let mut files: BTreeSet<String> = BTreeSet::new();
        for done in candidates {
            let disjoint = done.changes.iter().all(|c| !files.contains(&c.path));
            match merge::onto(self.worktree.files(), &done.changes) {
                Landed::Clean(applied) if disjoint => {
                    files.extend(applied.iter().map(|c| c.path.clone()));
                    batch.push((done, applied));
                }
                _ => later.push(done),
            }
        }
        if batch.len() < 2 {
            for (done, _) in batch {
                later.insert(0, done);
            }
            for done in later {
                self.judge_one(done).await?;
            }
            return Ok(());
        }
        // The change-level checks, each on its own change (no tree involved).
        let mut members: Vec<Member> = Vec::new();
        for (done, applied) in batch {
            let Some(target) = self.target(&done.finding) else {
                continue;
            };
            let mut stats = CallStats::default();
            let node_verifier = done.remote.as_ref().and_then(|r| r.verifier.clone());
            let (analyzer, verifier) = judge::change_checks(
                self.job,
                &target,
                &applied,
                &done.fixer_model,
                node_verifier,
                &mut stats,
            )
            .await;
            self.add_stats(&stats);
            if judge::checks_fail(analyzer.as_ref(), verifier.as_ref()) {
                // Failed on its own merits: judged now, nothing applied.
                let oracles = Oracles {
                    edit: judge::edit_outcome(&applied, &done.outcome),
                    tests: None,
                    analyzer,
                    verifier,
                };
                let commands = self.record(&done, oracles, &applied, None, Vec::new())?;
                self.queue.extend(commands);
                self.carry_out()?;
                continue;
            }
            members.push(Member {
                done,
                applied,
                analyzer,
                verifier,
            });
        }
        if !members.is_empty() {
            let held_back = self.test_together(members).await?;
            later.splice(0..0, held_back);
        }
        for done in later {
            self.judge_one(done).await?;
        }
        Ok(())
    }

    /// A node's failing test run stands even on an older tree (the change is discarded and
    /// tried again on the newer one); anything else is judged alone.
    async fn judge_stale_failure_or_one(&mut self, done: AgentDone) -> Result<(), FixError> {
        let stale_failure = done.remote.as_ref().is_some_and(|r| {
            r.based_on != self.ledger.kept.len()
                && judge::breaks_tests(r.tests.as_ref(), self.base_failing.as_ref())
        });
        if !stale_failure || done.outcome.failure.is_some() || done.changes.is_empty() {
            return self.judge_one(done).await;
        }
        let node = done.remote.as_ref().map(|r| r.node.clone());
        let oracles = Oracles {
            edit: judge::edit_outcome(&done.changes, &done.outcome),
            tests: done.remote.as_ref().and_then(|r| r.tests.clone()),
            analyzer: None,
            verifier: None,
        };
        let changes = done.changes.clone();
        let commands = self.record(&done, oracles, &changes, node, Vec::new())?;
        self.queue.extend(commands);
        self.carry_out()
    }

    /// Apply every member, run the tests once, and keep them all when no test the base passes
    /// fails. Returns the members to judge alone (all of them when the run broke a test).
    async fn test_together(&mut self, members: Vec<Member>) -> Result<Vec<AgentDone>, FixError> {
        for m in &members {
            self.worktree
                .apply_as_attempt(&m.applied)
                .map_err(|e| setup(&self.wt_dir, e))?;
        }
        let ids: Vec<String> = members.iter().map(|m| m.done.finding.clone()).collect();
        (self.progress)(format!(
            "{}: tested together on the tree with {} kept fix(es)",
            ids.join(", "),
            self.ledger.kept.len()
        ));
        let t0 = Instant::now();
        let run = judge::tests_here(self.job, self.worktree.root(), &self.home).await;
        self.pace.tested(t0.elapsed().as_secs_f64());
        if judge::breaks_tests(run.as_ref(), self.base_failing.as_ref()) {
            self.worktree
                .rollback()
                .map_err(|e| setup(&self.wt_dir, e))?;
            (self.progress)(format!(
                "{}: together they break a test; each is tested alone",
                ids.join(", ")
            ));
            return Ok(members.into_iter().map(|m| m.done).collect());
        }
        // Each member's verdict, from one test run; the worktree holds them all meanwhile.
        let mut kept: Vec<(String, u32, Vec<FileChange>)> = Vec::new();
        let mut all_kept = true;
        for m in members {
            let others: Vec<String> = ids
                .iter()
                .filter(|i| **i != m.done.finding)
                .cloned()
                .collect();
            let oracles = Oracles {
                edit: judge::edit_outcome(&m.applied, &m.done.outcome),
                tests: run.clone(),
                analyzer: m.analyzer,
                verifier: m.verifier,
            };
            for command in self.record(&m.done, oracles, &m.applied, None, others)? {
                match command {
                    Command::Keep { finding, attempt } => {
                        kept.push((finding, attempt, m.applied.clone()))
                    }
                    Command::Discard {
                        finding,
                        attempt,
                        class,
                        reason,
                    } => {
                        all_kept = false;
                        let line = self.ledger.discarded(&finding, attempt, class, reason);
                        (self.progress)(line);
                    }
                    other => self.queue.push_back(other),
                }
            }
        }
        if all_kept {
            self.worktree.keep();
        } else {
            // Disjoint files: the kept ones stand on their own.
            self.worktree
                .rollback()
                .map_err(|e| setup(&self.wt_dir, e))?;
            for (_, _, changes) in &kept {
                self.worktree
                    .apply_recorded(changes)
                    .map_err(|e| setup(&self.wt_dir, e))?;
            }
        }
        for (finding, attempt, changes) in kept {
            self.tree.apply(&changes);
            let line = self.ledger.kept(finding, attempt, changes);
            (self.progress)(line);
        }
        self.carry_out()?;
        Ok(Vec::new())
    }
}
