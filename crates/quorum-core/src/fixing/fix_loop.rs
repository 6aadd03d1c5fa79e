//! The fix loop's decisions, as a pure state machine: events in (the base's test run, each
//! attempt's oracle results), commands out (attempt this finding, keep, discard, give up,
//! finish). No I/O and no clock, so a run replays exactly from its recorded events.
//!
//! The rules (seed 000 §7, seed 002 §6):
//! - a fix is kept only when every oracle that applies passes — the fixer never grades itself;
//! - a failing fix is discarded and the finding is tried again with the failure in its prompt;
//! - the same failure three times in a row is a circular fix: the finding is reported unfixed;
//! - a fix that breaks a test the kept fixes passed is a regression, and is discarded;
//! - findings are tried in rounds; a round that ends where an earlier round (not the one just
//!   before) ended — same kept set, same open findings failing the same way — is oscillation,
//!   and the loop stops;
//! - a backstop of max(3, 3 × findings) attempts ends any run;
//! - up to `parallel` findings are attempted at once, each on the base with the fixes kept when
//!   it started; a change that no longer applies to the fixes kept since (the driver's
//!   three-way merge failed) is a conflict: the finding is tried once more on the current base
//!   (rebased), and a second conflict reports it unfixed as conflicting.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Name the test runner gives a failing run whose failing tests it could not name.
pub const UNNAMED_FAILURE: &str = "(the test command)";

/// How many equal failures in a row make a circular fix.
pub const CIRCULAR_AFTER: usize = 3;

/// What the edit step did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EditOutcome {
    /// The agent changed these files, this many lines in all.
    Applied { files: Vec<String>, lines: u32 },
    /// The agent ended without changing anything.
    NoChange,
    /// The agent could not produce a change (its model failed, or every edit was refused).
    Failed { reason: String },
    /// The change was made on an older base and does not merge with the fixes kept since:
    /// these files conflict.
    Conflict { files: Vec<String> },
}

/// One run of the project's test command.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TestRun {
    pub passed: bool,
    /// Tests that failed, by the names the runner printed ([`UNNAMED_FAILURE`] when it named none).
    pub failing: BTreeSet<String>,
    /// A few lines of the output, for the next attempt's prompt and the report.
    pub summary: String,
}

/// The analyzers re-run on the changed files.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AnalyzerCheck {
    /// The rule that led to the finding still fires on its file.
    pub rule_still_fires: bool,
    /// Hits on the changed files that were not there before (`tool/rule at file:line`).
    pub new_hits: Vec<String>,
}

/// A blind verifier's judgment of the diff.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VerifierCheck {
    pub still_holds: bool,
    pub reason: String,
    /// The model that judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the verdict is not independent of the fixer — its own model, or its family, when
    /// no other was served or the user chose it — said per attempt in the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_independent: Option<String>,
}

impl VerifierCheck {
    /// This verdict, recorded as given by `verifier` on a change `fixer` made.
    pub fn judged_by(mut self, fixer: &str, verifier: &str) -> VerifierCheck {
        self.model = Some(verifier.to_string());
        self.not_independent = dependence(fixer, verifier);
        self
    }
}

/// Why a verifier's verdict on a change is not independent of the fixer's, if it is not: the
/// same model, or two of one family (which share their training and their blind spots).
pub fn dependence(fixer: &str, verifier: &str) -> Option<String> {
    use crate::models::{family_of, lineage};
    if fixer == verifier {
        return Some(format!(
            "the verifier is the fixer's own model ({verifier})"
        ));
    }
    let family = lineage(&family_of(fixer));
    (family == lineage(&family_of(verifier))).then(|| {
        format!("the verifier ({verifier}) is of the fixer's family ({family}) as {fixer}")
    })
}

/// What the independent oracles said of one attempt. `None`: that oracle does not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Oracles {
    pub edit: EditOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyzer: Option<AnalyzerCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<VerifierCheck>,
}

/// Why an attempt was discarded. Two failures are "the same" when kind and detail match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FailureClass {
    pub kind: FailureKind,
    /// What distinguishes this failure (the failing tests, the rule, ...).
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    NoChange,
    EditFailed,
    TestsFailed,
    Regression,
    AnalyzerStillFires,
    AnalyzerNewHits,
    VerifierHolds,
    Conflict,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::NoChange => "no_change",
            FailureKind::EditFailed => "edit_failed",
            FailureKind::TestsFailed => "tests_failed",
            FailureKind::Regression => "regression",
            FailureKind::AnalyzerStillFires => "analyzer_still_fires",
            FailureKind::AnalyzerNewHits => "analyzer_new_hits",
            FailureKind::VerifierHolds => "verifier_holds",
            FailureKind::Conflict => "conflict",
        })
    }
}

/// Why a finding ended unfixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unfixed {
    /// The same failure three times in a row.
    CircularFix,
    /// The loop went back to a state it had been in.
    Oscillating,
    /// The run's attempt backstop was reached first.
    Backstop,
    /// Its change conflicted with fixes kept meanwhile, and again once rebased.
    Conflicting,
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every finding's fix was kept.
    Satisfied,
    /// Every finding was kept or given up.
    Settled,
    Oscillating,
    Backstop,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// The test command on the base, before any fix (`None`: no test command).
    Baseline { tests: Option<TestRun> },
    /// The oracles' results for an attempt the machine asked for.
    Judged {
        finding: String,
        attempt: u32,
        oracles: Oracles,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Ask the fix agent for attempt `attempt` (1-based) at `finding`, on the base with every
    /// kept fix applied; `feedback` is the last failure of this finding, for its prompt.
    Attempt {
        finding: String,
        attempt: u32,
        feedback: Option<String>,
    },
    /// Keep the attempt's change: it becomes part of the base of every later attempt.
    Keep {
        finding: String,
        attempt: u32,
    },
    /// Undo the attempt's change.
    Discard {
        finding: String,
        attempt: u32,
        class: FailureClass,
        reason: String,
    },
    GiveUp {
        finding: String,
        why: Unfixed,
    },
    Finish {
        stop: StopReason,
    },
}

/// How many conflicts give a finding up (the first is retried once, rebased).
pub const CONFLICTS_ALLOWED: usize = 1;

/// The bounds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixLimits {
    /// Attempts in all, over every finding.
    pub backstop: u32,
    /// Attempts in flight at once (at least 1), each at a different finding.
    pub parallel: u32,
}

impl FixLimits {
    /// The seed's backstop: max(3, 3 × findings), one attempt at a time.
    pub fn for_findings(n: usize) -> FixLimits {
        FixLimits {
            backstop: (3 * n as u32).max(3),
            parallel: 1,
        }
    }

    /// The same bounds with up to `n` attempts in flight.
    pub fn with_parallel(self, n: u32) -> FixLimits {
        FixLimits {
            parallel: n.max(1),
            ..self
        }
    }
}

#[derive(Debug, Clone, Default)]
struct FindingState {
    attempts: u32,
    failures: Vec<FailureClass>,
    last_reason: Option<String>,
}

/// One round's end, compared with earlier rounds' to detect oscillation.
type RoundSignature = (BTreeSet<String>, BTreeMap<String, Option<FailureClass>>);

/// The fix loop. Feed it [`Event`]s in order; carry out its [`Command`]s in order.
#[derive(Debug, Clone)]
pub struct FixLoop {
    order: Vec<String>,
    limits: FixLimits,
    baseline: Option<BTreeSet<String>>,
    baseline_run: Option<TestRun>,
    started: bool,
    states: BTreeMap<String, FindingState>,
    kept: BTreeSet<String>,
    given_up: BTreeMap<String, Unfixed>,
    /// The findings still to be tried in the current round, in order.
    round_queue: Vec<String>,
    rounds: Vec<RoundSignature>,
    /// The attempts asked for and not yet judged: finding → attempt.
    in_flight: BTreeMap<String, u32>,
    total_attempts: u32,
    finished: Option<StopReason>,
}

impl FixLoop {
    /// A loop over `findings` (ids, in the order they are to be tried). Duplicates count once.
    pub fn new(findings: Vec<String>, limits: FixLimits) -> FixLoop {
        let mut seen = BTreeSet::new();
        let order: Vec<String> = findings
            .into_iter()
            .filter(|f| seen.insert(f.clone()))
            .collect();
        FixLoop {
            states: order
                .iter()
                .map(|f| (f.clone(), FindingState::default()))
                .collect(),
            order,
            limits,
            baseline: None,
            baseline_run: None,
            started: false,
            kept: BTreeSet::new(),
            given_up: BTreeMap::new(),
            round_queue: Vec::new(),
            rounds: Vec::new(),
            in_flight: BTreeMap::new(),
            total_attempts: 0,
            finished: None,
        }
    }

    pub fn finished(&self) -> Option<StopReason> {
        self.finished
    }

    pub fn kept(&self) -> &BTreeSet<String> {
        &self.kept
    }

    pub fn given_up(&self) -> &BTreeMap<String, Unfixed> {
        &self.given_up
    }

    /// The base's test run, once recorded (`None`: not yet, or no test command).
    pub fn baseline(&self) -> Option<&TestRun> {
        self.baseline_run.as_ref()
    }

    /// The attempts asked for and not yet judged, by finding.
    pub fn in_flight(&self) -> &BTreeMap<String, u32> {
        &self.in_flight
    }

    pub fn total_attempts(&self) -> u32 {
        self.total_attempts
    }

    /// The failures recorded for `finding`, oldest first.
    pub fn failures(&self, finding: &str) -> &[FailureClass] {
        self.states
            .get(finding)
            .map(|s| s.failures.as_slice())
            .unwrap_or(&[])
    }

    /// Apply one event. Events the loop did not ask for (a second baseline, a result for an
    /// attempt not in flight, anything after the finish) change nothing and yield no command.
    pub fn step(&mut self, event: Event) -> Vec<Command> {
        if self.finished.is_some() {
            return Vec::new();
        }
        match event {
            Event::Baseline { tests } => {
                if self.started {
                    return Vec::new();
                }
                self.started = true;
                self.baseline = tests.as_ref().map(|t| t.failing.clone());
                self.baseline_run = tests;
                self.next()
            }
            Event::Judged {
                finding,
                attempt,
                oracles,
            } => {
                if self.in_flight.get(&finding) != Some(&attempt) {
                    return Vec::new();
                }
                self.in_flight.remove(&finding);
                let mut out = Vec::new();
                match self.classify(&oracles) {
                    None => {
                        self.kept.insert(finding.clone());
                        out.push(Command::Keep { finding, attempt });
                    }
                    Some((class, reason)) => {
                        let state = self.states.entry(finding.clone()).or_default();
                        state.failures.push(class.clone());
                        state.last_reason = Some(reason.clone());
                        let conflicts = state
                            .failures
                            .iter()
                            .filter(|c| c.kind == FailureKind::Conflict)
                            .count();
                        let conflicting =
                            class.kind == FailureKind::Conflict && conflicts > CONFLICTS_ALLOWED;
                        let circular = state.failures.len() >= CIRCULAR_AFTER
                            && state.failures[state.failures.len() - CIRCULAR_AFTER..]
                                .iter()
                                .all(|c| *c == class);
                        out.push(Command::Discard {
                            finding: finding.clone(),
                            attempt,
                            class,
                            reason,
                        });
                        let why = if conflicting {
                            Some(Unfixed::Conflicting)
                        } else if circular {
                            Some(Unfixed::CircularFix)
                        } else {
                            None
                        };
                        if let Some(why) = why {
                            self.given_up.insert(finding.clone(), why);
                            out.push(Command::GiveUp { finding, why });
                        }
                    }
                }
                out.extend(self.next());
                out
            }
        }
    }

    fn open(&self) -> impl Iterator<Item = &String> {
        self.order
            .iter()
            .filter(|f| !self.kept.contains(*f) && !self.given_up.contains_key(*f))
    }

    /// The next attempts (up to `parallel` in flight), or the finish. A round's end — and so
    /// the oscillation check and the next round — waits for every attempt of the round.
    fn next(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        loop {
            if self.open().next().is_none() {
                let stop = if self.given_up.is_empty() {
                    StopReason::Satisfied
                } else {
                    StopReason::Settled
                };
                return self.finish(out, stop);
            }
            if self.total_attempts >= self.limits.backstop {
                if !self.in_flight.is_empty() {
                    return out;
                }
                return self.give_up_all(out, Unfixed::Backstop, StopReason::Backstop);
            }
            self.round_queue.retain(|f| {
                !self.kept.contains(f)
                    && !self.given_up.contains_key(f)
                    && !self.in_flight.contains_key(f)
            });
            if self.round_queue.is_empty() {
                if !self.in_flight.is_empty() {
                    return out;
                }
                if self.total_attempts > 0 && self.round_ended_where_an_earlier_did() {
                    return self.give_up_all(out, Unfixed::Oscillating, StopReason::Oscillating);
                }
                self.round_queue = self.open().cloned().collect();
                continue;
            }
            if self.in_flight.len() >= self.limits.parallel.max(1) as usize {
                return out;
            }
            let finding = self.round_queue.remove(0);
            let state = self.states.entry(finding.clone()).or_default();
            state.attempts += 1;
            let attempt = state.attempts;
            let feedback = state.last_reason.clone();
            self.total_attempts += 1;
            self.in_flight.insert(finding.clone(), attempt);
            out.push(Command::Attempt {
                finding,
                attempt,
                feedback,
            });
        }
    }

    /// Record this round's end; true when it equals a round's end before the previous one.
    fn round_ended_where_an_earlier_did(&mut self) -> bool {
        let signature: RoundSignature = (
            self.kept.clone(),
            self.open()
                .map(|f| {
                    (
                        f.clone(),
                        self.states.get(f).and_then(|s| s.failures.last().cloned()),
                    )
                })
                .collect(),
        );
        let earlier = self.rounds.len().saturating_sub(1);
        let seen = self.rounds[..earlier].contains(&signature);
        self.rounds.push(signature);
        seen
    }

    fn give_up_all(
        &mut self,
        mut out: Vec<Command>,
        why: Unfixed,
        stop: StopReason,
    ) -> Vec<Command> {
        let open: Vec<String> = self.open().cloned().collect();
        for finding in open {
            self.given_up.insert(finding.clone(), why);
            out.push(Command::GiveUp { finding, why });
        }
        self.finish(out, stop)
    }

    fn finish(&mut self, mut out: Vec<Command>, stop: StopReason) -> Vec<Command> {
        self.finished = Some(stop);
        out.push(Command::Finish { stop });
        out
    }

    /// `None` when every applicable oracle passed; else the failure and a reason for the
    /// next attempt's prompt.
    fn classify(&self, o: &Oracles) -> Option<(FailureClass, String)> {
        let class = |kind, detail: String| FailureClass { kind, detail };
        match &o.edit {
            EditOutcome::NoChange => {
                return Some((
                    class(FailureKind::NoChange, String::new()),
                    "the previous answer changed nothing: describing a change does not make it. \
                     Answer with edits — each with the file's path, the exact old text copied \
                     from the file and the new text"
                        .into(),
                ))
            }
            EditOutcome::Failed { reason } => {
                return Some((
                    class(FailureKind::EditFailed, String::new()),
                    format!("the previous attempt made no usable edit: {reason}"),
                ))
            }
            EditOutcome::Conflict { files } => {
                return Some((
                    class(FailureKind::Conflict, String::new()),
                    format!(
                        "the previous change was made while other fixes were being kept, and it \
                         no longer applies to {}: the lines it changed were changed by them. \
                         Make the change again on the lines as they are now",
                        files.join(", ")
                    ),
                ))
            }
            EditOutcome::Applied { .. } => {}
        }
        if let Some(run) = &o.tests {
            let before = self.baseline.clone().unwrap_or_default();
            let broken: Vec<&String> = run.failing.difference(&before).collect();
            if !broken.is_empty() {
                let names = broken
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                let kind = if self.kept.is_empty() {
                    FailureKind::TestsFailed
                } else {
                    FailureKind::Regression
                };
                let what = if kind == FailureKind::Regression {
                    "broke tests the fixes kept so far pass"
                } else {
                    "made tests fail that pass without it"
                };
                return Some((
                    class(kind, names.clone()),
                    format!(
                        "the previous attempt {what}: {names}\n{}",
                        run.summary.trim()
                    ),
                ));
            }
        }
        if let Some(a) = &o.analyzer {
            if a.rule_still_fires {
                return Some((
                    class(FailureKind::AnalyzerStillFires, String::new()),
                    "after the previous attempt the analyzer rule that reported this finding still fires on the file"
                        .into(),
                ));
            }
            if !a.new_hits.is_empty() {
                return Some((
                    class(FailureKind::AnalyzerNewHits, a.new_hits.join("; ")),
                    format!(
                        "the previous attempt introduced new analyzer hits: {}",
                        a.new_hits.join("; ")
                    ),
                ));
            }
        }
        if let Some(v) = &o.verifier {
            if v.still_holds {
                return Some((
                    class(FailureKind::VerifierHolds, String::new()),
                    format!(
                        "an independent reviewer judged that the defect is still present after the previous attempt: {}",
                        v.reason.trim()
                    ),
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied() -> EditOutcome {
        EditOutcome::Applied {
            files: vec!["a.py".into()],
            lines: 1,
        }
    }

    fn oracles(tests_failing: &[&str], verifier_holds: bool) -> Oracles {
        Oracles {
            edit: applied(),
            tests: Some(TestRun {
                passed: tests_failing.is_empty(),
                failing: tests_failing.iter().map(|s| s.to_string()).collect(),
                summary: String::new(),
            }),
            analyzer: None,
            verifier: Some(VerifierCheck {
                still_holds: verifier_holds,
                reason: "r".into(),
                ..Default::default()
            }),
        }
    }

    fn attempt_of(cmds: &[Command]) -> (String, u32) {
        cmds.iter()
            .find_map(|c| match c {
                Command::Attempt {
                    finding, attempt, ..
                } => Some((finding.clone(), *attempt)),
                _ => None,
            })
            .expect("an attempt")
    }

    fn judged(m: &mut FixLoop, at: (String, u32), o: Oracles) -> Vec<Command> {
        m.step(Event::Judged {
            finding: at.0,
            attempt: at.1,
            oracles: o,
        })
    }

    #[test]
    fn a_fix_every_oracle_passes_is_kept_and_the_loop_is_satisfied() {
        let mut m = FixLoop::new(vec!["F1".into()], FixLimits::for_findings(1));
        let c = m.step(Event::Baseline {
            tests: Some(TestRun::default()),
        });
        let at = attempt_of(&c);
        let c = judged(&mut m, at, oracles(&[], false));
        assert_eq!(
            c[0],
            Command::Keep {
                finding: "F1".into(),
                attempt: 1
            }
        );
        assert_eq!(
            c.last(),
            Some(&Command::Finish {
                stop: StopReason::Satisfied
            })
        );
    }

    #[test]
    fn the_same_failure_three_times_is_a_circular_fix() {
        let mut m = FixLoop::new(
            vec!["F1".into()],
            FixLimits {
                backstop: 10,
                parallel: 1,
            },
        );
        let mut c = m.step(Event::Baseline {
            tests: Some(TestRun::default()),
        });
        for n in 1..=3 {
            let at = attempt_of(&c);
            assert_eq!(at.1, n);
            c = judged(&mut m, at, oracles(&["test_a"], false));
            if n > 1 {
                // the failure is carried into the next prompt
            }
        }
        assert!(c.contains(&Command::GiveUp {
            finding: "F1".into(),
            why: Unfixed::CircularFix
        }));
        assert_eq!(
            c.last(),
            Some(&Command::Finish {
                stop: StopReason::Settled
            })
        );
    }

    #[test]
    fn a_failure_is_fed_back_into_the_next_attempt() {
        let mut m = FixLoop::new(
            vec!["F1".into()],
            FixLimits {
                backstop: 10,
                parallel: 1,
            },
        );
        let c = m.step(Event::Baseline {
            tests: Some(TestRun::default()),
        });
        let c = judged(&mut m, attempt_of(&c), oracles(&["test_a"], false));
        let feedback = c.iter().find_map(|c| match c {
            Command::Attempt { feedback, .. } => feedback.clone(),
            _ => None,
        });
        assert!(feedback.unwrap().contains("test_a"));
    }

    #[test]
    fn a_test_already_failing_on_the_base_is_not_blamed_on_the_fix() {
        let mut m = FixLoop::new(vec!["F1".into()], FixLimits::for_findings(1));
        let base = TestRun {
            passed: false,
            failing: ["test_old".to_string()].into(),
            summary: String::new(),
        };
        let c = m.step(Event::Baseline { tests: Some(base) });
        let c = judged(&mut m, attempt_of(&c), oracles(&["test_old"], false));
        assert!(matches!(c[0], Command::Keep { .. }));
    }

    #[test]
    fn breaking_a_test_after_a_kept_fix_is_a_regression() {
        let mut m = FixLoop::new(vec!["F1".into(), "F2".into()], FixLimits::for_findings(2));
        let c = m.step(Event::Baseline {
            tests: Some(TestRun::default()),
        });
        let c = judged(&mut m, attempt_of(&c), oracles(&[], false));
        let c = judged(&mut m, attempt_of(&c), oracles(&["test_f1"], false));
        match &c[0] {
            Command::Discard { class, .. } => assert_eq!(class.kind, FailureKind::Regression),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_verifier_and_the_analyzer_each_veto() {
        let mut m = FixLoop::new(
            vec!["F1".into()],
            FixLimits {
                backstop: 10,
                parallel: 1,
            },
        );
        let c = m.step(Event::Baseline { tests: None });
        let c = judged(&mut m, attempt_of(&c), oracles(&[], true));
        assert!(
            matches!(&c[0], Command::Discard { class, .. } if class.kind == FailureKind::VerifierHolds)
        );
        let mut o = oracles(&[], false);
        o.analyzer = Some(AnalyzerCheck {
            rule_still_fires: true,
            new_hits: vec![],
        });
        let c = judged(&mut m, attempt_of(&c), o);
        assert!(
            matches!(&c[0], Command::Discard { class, .. } if class.kind == FailureKind::AnalyzerStillFires)
        );
    }

    #[test]
    fn returning_to_an_earlier_state_is_oscillation() {
        let mut m = FixLoop::new(
            vec!["F1".into()],
            FixLimits {
                backstop: 20,
                parallel: 1,
            },
        );
        let mut c = m.step(Event::Baseline {
            tests: Some(TestRun::default()),
        });
        // A, B, A: the third round ends where the first did.
        for failing in ["a", "b", "a"] {
            c = judged(&mut m, attempt_of(&c), oracles(&[failing], false));
        }
        assert!(
            c.contains(&Command::GiveUp {
                finding: "F1".into(),
                why: Unfixed::Oscillating
            }),
            "{c:?}"
        );
        assert_eq!(
            c.last(),
            Some(&Command::Finish {
                stop: StopReason::Oscillating
            })
        );
    }

    #[test]
    fn the_backstop_ends_the_run() {
        let mut m = FixLoop::new(
            vec!["F1".into(), "F2".into()],
            FixLimits {
                backstop: 3,
                parallel: 1,
            },
        );
        let mut c = m.step(Event::Baseline { tests: None });
        for failing in ["a", "b", "c"] {
            c = judged(&mut m, attempt_of(&c), oracles(&[failing], false));
        }
        assert_eq!(m.total_attempts(), 3);
        assert_eq!(
            c.last(),
            Some(&Command::Finish {
                stop: StopReason::Backstop
            })
        );
        assert_eq!(m.given_up().len(), 2);
    }

    #[test]
    fn unasked_results_are_ignored() {
        let mut m = FixLoop::new(vec!["F1".into()], FixLimits::for_findings(1));
        assert!(judged(&mut m, ("F1".into(), 1), oracles(&[], false)).is_empty());
        let c = m.step(Event::Baseline { tests: None });
        assert!(m.step(Event::Baseline { tests: None }).is_empty());
        assert!(judged(&mut m, ("F1".into(), 2), oracles(&[], false)).is_empty());
        assert!(matches!(
            judged(&mut m, attempt_of(&c), oracles(&[], false))[0],
            Command::Keep { .. }
        ));
    }

    fn attempts_of(cmds: &[Command]) -> Vec<(String, u32)> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::Attempt {
                    finding, attempt, ..
                } => Some((finding.clone(), *attempt)),
                _ => None,
            })
            .collect()
    }

    fn conflict() -> Oracles {
        Oracles {
            edit: EditOutcome::Conflict {
                files: vec!["a.py".into()],
            },
            tests: None,
            analyzer: None,
            verifier: None,
        }
    }

    #[test]
    fn parallel_attempts_fill_the_slots_and_a_round_waits_for_all_of_them() {
        let ids = ["F1", "F2", "F3"].map(String::from).to_vec();
        let mut m = FixLoop::new(ids, FixLimits::for_findings(3).with_parallel(2));
        let c = m.step(Event::Baseline { tests: None });
        assert_eq!(
            attempts_of(&c),
            vec![("F1".to_string(), 1), ("F2".to_string(), 1)]
        );
        // F2 fails first: F3 takes its slot; F2 waits for the next round.
        let c = judged(&mut m, ("F2".into(), 1), oracles(&["t"], false));
        assert_eq!(attempts_of(&c), vec![("F3".to_string(), 1)]);
        let c = judged(&mut m, ("F3".into(), 1), oracles(&[], false));
        assert!(
            attempts_of(&c).is_empty(),
            "the round still has F1 in flight"
        );
        let c = judged(&mut m, ("F1".into(), 1), oracles(&[], false));
        assert_eq!(attempts_of(&c), vec![("F2".to_string(), 2)]);
        assert_eq!(m.in_flight().len(), 1);
    }

    #[test]
    fn a_conflict_is_retried_once_rebased_and_a_second_gives_the_finding_up() {
        let mut m = FixLoop::new(vec!["F1".into()], FixLimits::for_findings(1));
        let c = m.step(Event::Baseline { tests: None });
        let c = judged(&mut m, attempt_of(&c), conflict());
        let Command::Discard { class, reason, .. } = &c[0] else {
            panic!("{c:?}");
        };
        assert_eq!(class.kind, FailureKind::Conflict);
        assert!(reason.contains("no longer applies"), "{reason}");
        let (finding, attempt) = attempt_of(&c);
        assert_eq!(attempt, 2);
        let c = judged(&mut m, (finding, attempt), conflict());
        assert!(c.contains(&Command::GiveUp {
            finding: "F1".into(),
            why: Unfixed::Conflicting
        }));
        assert_eq!(m.finished(), Some(StopReason::Settled));
    }
}
