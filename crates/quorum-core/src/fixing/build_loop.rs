//! The build loop's decisions, as a pure state machine: events in (the base's tests and
//! judgment, each increment's edit, tests and judgment), commands out (build an increment,
//! keep it, reset it, finish). No I/O and no clock, so a run replays exactly from its events.
//!
//! The rules (seed 002 §6):
//! - each increment is made by a fresh builder toward the criteria still open, and judged by
//!   an independent oracle (the conformance judge) and the project's tests — the builder
//!   never grades itself;
//! - an increment is kept only when the tests pass (no test fails that the base passed) and
//!   the judge finds at least one more criterion met and none of the met ones lost;
//! - an increment that loses a met criterion is a regression and is reset; two regressions in
//!   a row stop the loop (`regressed`);
//! - the same failure three times in a row (the same tests failing, no change, ...) stops it
//!   (`circular`); no progress is not such a failure — going round the same open criteria is
//!   oscillation's to judge;
//! - the judge returning, since the last kept increment, to open sets it had already found
//!   twice — and at least once per open criterion — is oscillation (`oscillating`): the
//!   builder goes round the same gaps;
//! - every criterion met is `satisfied`; the backstop of iterations ends any run.

use crate::fixing::fix_loop::{EditOutcome, TestRun};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// How many equal failures in a row stop the loop as circular.
pub const CIRCULAR_AFTER: usize = 3;
/// How many regressing increments in a row stop the loop.
pub const REGRESSIONS_AFTER: usize = 2;
/// How many returns to an already-seen open set, since the last kept increment, are oscillation.
pub const OSCILLATION_AFTER: usize = 2;

/// What the conformance judge said of the whole tree.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Verdicts {
    /// Criteria judged met with grounded evidence.
    pub met: BTreeSet<String>,
    /// Criteria the judge could not rule on (its call failed, or it skipped them).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unjudged: BTreeSet<String>,
    /// Why each criterion is not met, in the judge's words (for the next builder's prompt).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<String, String>,
}

/// Why an increment was reset. Two failures are "the same" when kind and detail match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BuildFailure {
    pub kind: BuildFailureKind,
    /// What distinguishes this failure (the failing tests, the criteria lost, ...).
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildFailureKind {
    /// The builder ended without changing anything.
    NoChange,
    /// The builder could not produce a change (its model failed, every edit was refused).
    EditFailed,
    /// A test failed that the base passed.
    TestsFailed,
    /// The judge could not rule on every criterion, so nothing can be kept.
    JudgeFailed,
    /// A criterion met before is not met with this increment.
    Regression,
    /// No open criterion is met with this increment.
    NoProgress,
}

impl fmt::Display for BuildFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BuildFailureKind::NoChange => "no_change",
            BuildFailureKind::EditFailed => "edit_failed",
            BuildFailureKind::TestsFailed => "tests_failed",
            BuildFailureKind::JudgeFailed => "judge_failed",
            BuildFailureKind::Regression => "regression",
            BuildFailureKind::NoProgress => "no_progress",
        })
    }
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStop {
    /// Every criterion is met.
    Satisfied,
    /// The judge kept finding the same open criteria.
    Oscillating,
    /// Increments kept breaking criteria that were met.
    Regressed,
    /// The same failure three times in a row, or a kept increment that returned a file to the
    /// content an earlier kept increment replaced (increments undoing each other).
    Circular,
    /// The iteration backstop was reached.
    Backstop,
}

impl BuildStop {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStop::Satisfied => "satisfied",
            BuildStop::Oscillating => "oscillating",
            BuildStop::Regressed => "regressed",
            BuildStop::Circular => "circular",
            BuildStop::Backstop => "backstop",
        }
    }
}

/// A file an increment changed: its content's digest before and after (None: created).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    pub path: String,
    pub before: Option<String>,
    pub after: String,
}

impl FileDigest {
    /// The digests of one change's texts.
    pub fn of(path: &str, before: Option<&str>, after: &str) -> FileDigest {
        let d = |t: &str| blake3::hash(t.as_bytes()).to_hex()[..16].to_string();
        FileDigest {
            path: path.to_string(),
            before: before.map(d),
            after: d(after),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BuildEvent {
    /// The base, before any increment: its tests (`None`: no test command) and the judge's
    /// verdicts on it.
    Baseline {
        tests: Option<TestRun>,
        verdicts: Verdicts,
    },
    /// What became of the increment the machine asked for. The driver runs the checks
    /// cheapest first and stops at the first that fails: `tests` is absent when there was no
    /// change, `verdicts` when there was none or the tests failed.
    Increment {
        iteration: u32,
        edit: EditOutcome,
        tests: Option<TestRun>,
        verdicts: Option<Verdicts>,
    },
    /// The files increment `iteration` changed, given just before its `Increment` (the driver
    /// derives it from the changes it stores with that event, so a replay gives it again).
    Contents {
        iteration: u32,
        files: Vec<FileDigest>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BuildCommand {
    /// Ask a fresh builder for increment `iteration` (1-based) toward the `open` criteria, on
    /// the base with every kept increment; `feedback` says why the last one was reset.
    Build {
        iteration: u32,
        open: Vec<String>,
        feedback: Option<String>,
    },
    /// Keep the increment: it is committed and every later increment builds on it.
    Keep {
        iteration: u32,
        newly_met: Vec<String>,
    },
    /// Undo the increment.
    Reset {
        iteration: u32,
        failure: BuildFailure,
        reason: String,
    },
    Finish {
        stop: BuildStop,
    },
}

/// The build loop. Feed it [`BuildEvent`]s in order; carry out its [`BuildCommand`]s in order.
#[derive(Debug, Clone)]
pub struct BuildLoop {
    criteria: Vec<String>,
    backstop: u32,
    baseline_failing: Option<BTreeSet<String>>,
    met: BTreeSet<String>,
    iteration: u32,
    /// The increment asked for and not yet reported.
    in_flight: Option<u32>,
    failures: Vec<BuildFailure>,
    regressions_in_a_row: usize,
    /// Every open set the judge has returned, with how often.
    open_sets: BTreeMap<Vec<String>, usize>,
    returns_since_kept: usize,
    /// Per criterion, the iteration whose kept increment met it (0: met on the base).
    met_at: BTreeMap<String, u32>,
    last_progress: u32,
    finished: Option<BuildStop>,
    /// The files of the increment in flight (`Contents`), until it is judged.
    contents: Vec<FileDigest>,
    /// Per file, its contents over the kept increments, oldest first (the base's first).
    kept_contents: BTreeMap<String, Vec<Option<String>>>,
}

impl BuildLoop {
    /// A loop toward `criteria` (ids, duplicates count once) with at most `backstop` increments.
    pub fn new(criteria: Vec<String>, backstop: u32) -> BuildLoop {
        let mut seen = BTreeSet::new();
        BuildLoop {
            criteria: criteria
                .into_iter()
                .filter(|c| seen.insert(c.clone()))
                .collect(),
            backstop: backstop.max(1),
            baseline_failing: None,
            met: BTreeSet::new(),
            iteration: 0,
            in_flight: None,
            failures: Vec::new(),
            regressions_in_a_row: 0,
            open_sets: BTreeMap::new(),
            returns_since_kept: 0,
            met_at: BTreeMap::new(),
            last_progress: 0,
            finished: None,
            contents: Vec::new(),
            kept_contents: BTreeMap::new(),
        }
    }

    /// Records the kept increment's files; true when one of them is back at a content an
    /// earlier kept increment replaced (not the one just before: that is this increment's own
    /// starting point).
    fn undoes_an_earlier_increment(&mut self) -> bool {
        let mut undone = false;
        for f in std::mem::take(&mut self.contents) {
            let history = self
                .kept_contents
                .entry(f.path)
                .or_insert_with(|| vec![f.before.clone()]);
            let after = Some(f.after);
            if history[..history.len().saturating_sub(1)].contains(&after) {
                undone = true;
            }
            history.push(after);
        }
        undone
    }

    pub fn criteria(&self) -> &[String] {
        &self.criteria
    }

    /// Criteria met by the base with the kept increments.
    pub fn met(&self) -> &BTreeSet<String> {
        &self.met
    }

    /// The iteration whose kept increment met each criterion (0: the base met it).
    pub fn met_at(&self) -> &BTreeMap<String, u32> {
        &self.met_at
    }

    /// Increments asked for so far.
    pub fn iterations(&self) -> u32 {
        self.iteration
    }

    /// The last iteration that met a new criterion (0: none did).
    pub fn last_progress(&self) -> u32 {
        self.last_progress
    }

    pub fn backstop(&self) -> u32 {
        self.backstop
    }

    pub fn finished(&self) -> Option<BuildStop> {
        self.finished
    }

    fn open(&self) -> Vec<String> {
        self.criteria
            .iter()
            .filter(|c| !self.met.contains(*c))
            .cloned()
            .collect()
    }

    fn finish(&mut self, stop: BuildStop, out: &mut Vec<BuildCommand>) {
        self.finished = Some(stop);
        self.in_flight = None;
        out.push(BuildCommand::Finish { stop });
    }

    /// Ask for the next increment, or stop if the backstop is reached.
    fn next(&mut self, feedback: Option<String>, out: &mut Vec<BuildCommand>) {
        if self.open().is_empty() {
            return self.finish(BuildStop::Satisfied, out);
        }
        if self.iteration >= self.backstop {
            return self.finish(BuildStop::Backstop, out);
        }
        self.iteration += 1;
        self.in_flight = Some(self.iteration);
        out.push(BuildCommand::Build {
            iteration: self.iteration,
            open: self.open(),
            feedback,
        });
    }

    /// Returns to a seen open set, since the last kept increment, that are oscillation: at
    /// least [`OSCILLATION_AFTER`], and one per open criterion, so a builder that works toward
    /// one criterion at a time has had a turn at each before the loop gives up on them.
    pub fn oscillation_after(&self) -> usize {
        OSCILLATION_AFTER.max(self.open().len())
    }

    /// Record an open set the judge returned; true when it had been seen before.
    fn saw_open_set(&mut self, met: &BTreeSet<String>) -> bool {
        let open: Vec<String> = self
            .criteria
            .iter()
            .filter(|c| !met.contains(*c))
            .cloned()
            .collect();
        let seen = self.open_sets.entry(open).or_insert(0);
        *seen += 1;
        *seen > 1
    }

    /// Feed one event; returns the commands to carry out, in order. Events the machine did not
    /// ask for (a stale iteration, anything after the finish) are ignored.
    pub fn step(&mut self, event: BuildEvent) -> Vec<BuildCommand> {
        let mut out = Vec::new();
        if self.finished.is_some() {
            return out;
        }
        match event {
            BuildEvent::Baseline { tests, verdicts } => {
                if self.iteration > 0 || !self.open_sets.is_empty() {
                    return out;
                }
                self.baseline_failing = tests.map(|t| t.failing);
                self.met = verdicts
                    .met
                    .iter()
                    .filter(|c| self.criteria.contains(*c))
                    .cloned()
                    .collect();
                for c in &self.met {
                    self.met_at.insert(c.clone(), 0);
                }
                let met = self.met.clone();
                self.saw_open_set(&met);
                self.next(None, &mut out);
            }
            BuildEvent::Increment {
                iteration,
                edit,
                tests,
                verdicts,
            } => {
                if self.in_flight != Some(iteration) {
                    return out;
                }
                self.in_flight = None;
                let verdict = self.judge(edit, tests, verdicts);
                if verdict.is_err() {
                    self.contents.clear();
                }
                match verdict {
                    Ok(newly_met) => {
                        self.failures.clear();
                        self.regressions_in_a_row = 0;
                        self.returns_since_kept = 0;
                        self.last_progress = iteration;
                        for c in &newly_met {
                            self.met.insert(c.clone());
                            self.met_at.insert(c.clone(), iteration);
                        }
                        out.push(BuildCommand::Keep {
                            iteration,
                            newly_met,
                        });
                        if self.undoes_an_earlier_increment() {
                            self.finish(BuildStop::Circular, &mut out);
                        } else {
                            self.next(None, &mut out);
                        }
                    }
                    Err((failure, reason)) => {
                        let regression = failure.kind == BuildFailureKind::Regression;
                        self.regressions_in_a_row = if regression {
                            self.regressions_in_a_row + 1
                        } else {
                            0
                        };
                        self.failures.push(failure.clone());
                        out.push(BuildCommand::Reset {
                            iteration,
                            failure,
                            reason: reason.clone(),
                        });
                        let tail =
                            &self.failures[self.failures.len().saturating_sub(CIRCULAR_AFTER)..];
                        if self.regressions_in_a_row >= REGRESSIONS_AFTER {
                            self.finish(BuildStop::Regressed, &mut out);
                        } else if tail.len() == CIRCULAR_AFTER
                            && tail[0].kind != BuildFailureKind::NoProgress
                            && tail.iter().all(|f| *f == tail[0])
                        {
                            self.finish(BuildStop::Circular, &mut out);
                        } else if self.returns_since_kept >= self.oscillation_after() {
                            self.finish(BuildStop::Oscillating, &mut out);
                        } else {
                            self.next(Some(reason), &mut out);
                        }
                    }
                }
            }
            BuildEvent::Contents { iteration, files } => {
                if self.in_flight == Some(iteration) {
                    self.contents = files;
                }
            }
        }
        out
    }

    /// Keep (the criteria newly met) or reset (why) one increment.
    fn judge(
        &mut self,
        edit: EditOutcome,
        tests: Option<TestRun>,
        verdicts: Option<Verdicts>,
    ) -> Result<Vec<String>, (BuildFailure, String)> {
        let fail =
            |kind, detail: String, reason: String| Err((BuildFailure { kind, detail }, reason));
        match edit {
            EditOutcome::Applied { .. } => {}
            EditOutcome::NoChange => {
                return fail(
                    BuildFailureKind::NoChange,
                    String::new(),
                    "the builder changed nothing: an increment must change the project's files"
                        .into(),
                )
            }
            EditOutcome::Failed { reason } => {
                return fail(
                    BuildFailureKind::EditFailed,
                    String::new(),
                    format!("the builder's change could not be made: {reason}"),
                )
            }
            EditOutcome::Conflict { files } => {
                return fail(
                    BuildFailureKind::EditFailed,
                    String::new(),
                    format!("the change conflicts in {}", files.join(", ")),
                )
            }
        }
        if let Some(run) = &tests {
            let newly_failing: BTreeSet<String> = match &self.baseline_failing {
                Some(base) => run.failing.difference(base).cloned().collect(),
                None => run.failing.clone(),
            };
            if !run.passed && !newly_failing.is_empty() {
                let names: Vec<String> = newly_failing.into_iter().collect();
                return fail(
                    BuildFailureKind::TestsFailed,
                    names.join(","),
                    format!(
                        "the tests failed: {}\n{}",
                        names.join(", "),
                        run.summary.trim()
                    ),
                );
            }
        }
        let Some(verdicts) = verdicts else {
            return fail(
                BuildFailureKind::JudgeFailed,
                String::new(),
                "the increment was not judged".into(),
            );
        };
        let judged_met: BTreeSet<String> = verdicts
            .met
            .iter()
            .filter(|c| self.criteria.contains(*c))
            .cloned()
            .collect();
        let returned = self.saw_open_set(&judged_met);
        if returned {
            self.returns_since_kept += 1;
        }
        let lost: Vec<String> = self.met.difference(&judged_met).cloned().collect();
        let gains = judged_met.difference(&self.met).count();
        // A criterion the judge could not rule on is unknown, not lost: nothing is kept or
        // blamed on it, unless the rest of the verdicts alone decide (a gain and no loss).
        let lost_unknown = lost.iter().any(|c| verdicts.unjudged.contains(c));
        if lost_unknown || (!verdicts.unjudged.is_empty() && lost.is_empty() && gains == 0) {
            let ids: Vec<String> = verdicts.unjudged.iter().cloned().collect();
            return fail(
                BuildFailureKind::JudgeFailed,
                ids.join(","),
                format!(
                    "the judge could not rule on {}: nothing is kept on an unknown verdict",
                    ids.join(", ")
                ),
            );
        }
        if !lost.is_empty() {
            let why: String = lost
                .iter()
                .map(|c| match verdicts.reasons.get(c) {
                    Some(r) => format!("- {c}: {r}\n"),
                    None => format!("- {c}\n"),
                })
                .collect();
            return fail(
                BuildFailureKind::Regression,
                lost.join(","),
                format!(
                    "the change broke criteria that were met before:\n{why}Keep them met while working on the open ones."
                ),
            );
        }
        let gained: Vec<String> = self
            .criteria
            .iter()
            .filter(|c| judged_met.contains(*c) && !self.met.contains(*c))
            .cloned()
            .collect();
        if gained.is_empty() {
            let why: String = self
                .open()
                .iter()
                .map(|c| match verdicts.reasons.get(c) {
                    Some(r) => format!("- {c}: {r}\n"),
                    None => format!("- {c}: not met\n"),
                })
                .collect();
            return fail(
                BuildFailureKind::NoProgress,
                String::new(),
                format!("the judge found no open criterion met after the change:\n{why}"),
            );
        }
        Ok(gained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn met(v: &[&str]) -> Verdicts {
        Verdicts {
            met: v.iter().map(|s| s.to_string()).collect(),
            ..Verdicts::default()
        }
    }

    fn applied() -> EditOutcome {
        EditOutcome::Applied {
            files: ids(&["a.py"]),
            lines: 3,
        }
    }

    fn passing() -> TestRun {
        TestRun {
            passed: true,
            ..TestRun::default()
        }
    }

    fn increment(i: u32, verdicts: &[&str]) -> BuildEvent {
        BuildEvent::Increment {
            iteration: i,
            edit: applied(),
            tests: Some(passing()),
            verdicts: Some(met(verdicts)),
        }
    }

    fn start(m: &mut BuildLoop, base: &[&str]) -> Vec<BuildCommand> {
        m.step(BuildEvent::Baseline {
            tests: Some(passing()),
            verdicts: met(base),
        })
    }

    #[test]
    fn a_kept_increment_that_undoes_an_earlier_one_stops_the_build_circular() {
        let mut m = BuildLoop::new(ids(&["C1", "C2", "C3", "C4"]), 20);
        start(&mut m, &[]);
        let contents = |i, before: &str, after: &str| BuildEvent::Contents {
            iteration: i,
            files: vec![FileDigest::of("a.py", Some(before), after)],
        };
        // A -> B (C1), B -> C (C2): each builds on the last.
        m.step(contents(1, "A", "B"));
        let c = m.step(increment(1, &["C1"]));
        assert!(
            matches!(c.last(), Some(BuildCommand::Build { iteration: 2, .. })),
            "{c:?}"
        );
        m.step(contents(2, "B", "C"));
        let c = m.step(increment(2, &["C1", "C2"]));
        assert!(
            matches!(c.last(), Some(BuildCommand::Build { iteration: 3, .. })),
            "{c:?}"
        );
        // A reset increment's contents count for nothing.
        m.step(contents(3, "C", "A"));
        let c = m.step(BuildEvent::Increment {
            iteration: 3,
            edit: EditOutcome::NoChange,
            tests: None,
            verdicts: None,
        });
        assert!(matches!(c[0], BuildCommand::Reset { .. }), "{c:?}");
        // C -> B: back to what increment 2 replaced. Kept (it met C3), and the build stops.
        m.step(contents(4, "C", "B"));
        let c = m.step(increment(4, &["C1", "C2", "C3"]));
        assert!(
            matches!(c[0], BuildCommand::Keep { iteration: 4, .. }),
            "{c:?}"
        );
        assert_eq!(
            c.last(),
            Some(&BuildCommand::Finish {
                stop: BuildStop::Circular
            })
        );
    }

    #[test]
    fn a_base_that_meets_everything_is_satisfied_without_a_builder() {
        let mut m = BuildLoop::new(ids(&["C1", "C2"]), 6);
        assert_eq!(
            start(&mut m, &["C1", "C2"]),
            vec![BuildCommand::Finish {
                stop: BuildStop::Satisfied
            }]
        );
    }

    #[test]
    fn progress_is_kept_until_satisfied() {
        let mut m = BuildLoop::new(ids(&["C1", "C2", "C3"]), 9);
        let c = start(&mut m, &["C1"]);
        assert!(
            matches!(&c[0], BuildCommand::Build { iteration: 1, open, feedback: None } if open == &ids(&["C2", "C3"]))
        );
        let c = m.step(increment(1, &["C1", "C2"]));
        assert_eq!(
            c[0],
            BuildCommand::Keep {
                iteration: 1,
                newly_met: ids(&["C2"])
            }
        );
        let c = m.step(increment(2, &["C1", "C2", "C3"]));
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[1],
            BuildCommand::Finish {
                stop: BuildStop::Satisfied
            }
        );
        assert_eq!(m.met_at()["C3"], 2);
        assert_eq!(m.last_progress(), 2);
    }

    #[test]
    fn a_regression_is_reset_and_two_in_a_row_stop() {
        let mut m = BuildLoop::new(ids(&["C1", "C2", "C3"]), 9);
        start(&mut m, &["C1"]);
        let c = m.step(increment(1, &["C2"]));
        assert!(
            matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::Regression && failure.detail == "C1")
        );
        assert!(
            matches!(&c[1], BuildCommand::Build { iteration: 2, feedback: Some(f), .. } if f.contains("C1"))
        );
        let c = m.step(increment(2, &["C3"]));
        assert_eq!(
            c.last(),
            Some(&BuildCommand::Finish {
                stop: BuildStop::Regressed
            })
        );
    }

    #[test]
    fn new_test_failures_reset_but_the_base_s_own_do_not() {
        let mut m = BuildLoop::new(ids(&["C1"]), 9);
        m.step(BuildEvent::Baseline {
            tests: Some(TestRun {
                passed: false,
                failing: ["old".to_string()].into(),
                summary: String::new(),
            }),
            verdicts: met(&[]),
        });
        let broken = |i, name: &str| BuildEvent::Increment {
            iteration: i,
            edit: applied(),
            tests: Some(TestRun {
                passed: false,
                failing: ["old".to_string(), name.to_string()].into(),
                summary: "boom".into(),
            }),
            verdicts: None,
        };
        let c = m.step(broken(1, "new"));
        assert!(
            matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::TestsFailed && failure.detail == "new")
        );
        m.step(broken(2, "new"));
        let c = m.step(broken(3, "new"));
        assert_eq!(
            c.last(),
            Some(&BuildCommand::Finish {
                stop: BuildStop::Circular
            })
        );
        // The base's own failure alone is not blamed on an increment.
        let mut m = BuildLoop::new(ids(&["C1"]), 9);
        m.step(BuildEvent::Baseline {
            tests: Some(TestRun {
                passed: false,
                failing: ["old".to_string()].into(),
                summary: String::new(),
            }),
            verdicts: met(&[]),
        });
        let c = m.step(BuildEvent::Increment {
            iteration: 1,
            edit: applied(),
            tests: Some(TestRun {
                passed: false,
                failing: ["old".to_string()].into(),
                summary: String::new(),
            }),
            verdicts: Some(met(&["C1"])),
        });
        assert!(matches!(c[0], BuildCommand::Keep { .. }));
    }

    #[test]
    fn going_round_the_same_gaps_is_oscillation() {
        let mut m = BuildLoop::new(ids(&["C1", "C2"]), 20);
        start(&mut m, &[]);
        // No progress returns to the base's open set; twice is oscillation.
        let c = m.step(increment(1, &[]));
        assert!(
            matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::NoProgress)
        );
        let c = m.step(increment(2, &[]));
        assert_eq!(
            c.last(),
            Some(&BuildCommand::Finish {
                stop: BuildStop::Oscillating
            })
        );
    }

    #[test]
    fn every_open_criterion_gets_a_turn_before_oscillation() {
        let mut m = BuildLoop::new(ids(&["C1", "C2", "C3", "C4"]), 20);
        start(&mut m, &[]);
        for i in 1..4 {
            let c = m.step(increment(i, &[]));
            assert!(
                matches!(c.last(), Some(BuildCommand::Build { .. })),
                "{c:?}"
            );
        }
        let c = m.step(increment(4, &[]));
        assert_eq!(
            c.last(),
            Some(&BuildCommand::Finish {
                stop: BuildStop::Oscillating
            })
        );
    }

    #[test]
    fn the_backstop_ends_the_run_and_stale_events_are_ignored() {
        let mut m = BuildLoop::new(ids(&["C1", "C2", "C3"]), 2);
        start(&mut m, &[]);
        assert!(m.step(increment(7, &["C1"])).is_empty());
        m.step(increment(1, &["C1"]));
        let c = m.step(increment(2, &["C1", "C2"]));
        assert_eq!(
            c.last(),
            Some(&BuildCommand::Finish {
                stop: BuildStop::Backstop
            })
        );
        assert!(m.step(increment(3, &["C1", "C2", "C3"])).is_empty());
    }

    #[test]
    fn nothing_is_kept_on_an_unjudged_criterion() {
        let mut m = BuildLoop::new(ids(&["C1", "C2"]), 9);
        start(&mut m, &["C1"]);
        let c = m.step(BuildEvent::Increment {
            iteration: 1,
            edit: applied(),
            tests: None,
            verdicts: Some(Verdicts {
                met: BTreeSet::new(),
                unjudged: ["C1".to_string(), "C2".to_string()].into(),
                reasons: BTreeMap::new(),
            }),
        });
        assert!(
            matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::JudgeFailed)
        );
    }
}
