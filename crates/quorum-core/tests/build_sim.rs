//! Seeded simulation of the build loop (`quorum_core::fixing::build_loop`): 1 to 8 criteria,
//! a random backstop, a base with or without a test command (passing, or already failing
//! some tests) that meets some criteria, then random increments: builders that change
//! nothing, fail, or apply a change; tests that pass, fail only as the base did, fail anew, or
//! (a stubborn builder) fail the same new way again and again; a judge that finds more
//! criteria met, none, loses some (regression), or cannot rule on some. Stale results (a
//! wrong iteration, a duplicate of an earlier event, a second baseline) and results after the
//! finish are delivered too, and must change nothing. Invariants are checked on every step
//! against a model kept from the documented rules, and each run is replayed from its recorded
//! events to prove the loop decides from facts alone.
//!
//! `cargo test -p quorum-core --test build_sim` runs 500 seeds; `QUORUM_SIM_SEEDS=N` runs
//! more; a failure prints its seed and `QUORUM_SIM_SEED=N` replays exactly that one.

use quorum_core::fixing::build_loop::*;
use quorum_core::fixing::fix_loop::{EditOutcome, TestRun};
use std::collections::{BTreeMap, BTreeSet};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn violation(seed: u64, what: String) -> ! {
    panic!("build-loop simulation seed {seed} violated an invariant: {what} (replay: QUORUM_SIM_SEED={seed})")
}

fn test_run(failing: BTreeSet<String>, summary: &str) -> TestRun {
    TestRun {
        passed: failing.is_empty(),
        failing,
        summary: summary.into(),
    }
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// One seed's world: what the base fails, and how its builders and judge behave.
struct World {
    criteria: Vec<String>,
    /// Tests failing on the base (empty when it passed or there is no test command).
    base_failing: BTreeSet<String>,
    /// A builder that keeps failing the same new test.
    stubborn: bool,
    /// Percent chance that an increment meets each open criterion.
    progress: u64,
}

/// A random judgment of the tree with the increment, given the criteria met so far.
fn random_verdicts(rng: &mut Rng, w: &World, met: &BTreeSet<String>) -> Verdicts {
    let mut v = Verdicts {
        met: met.clone(),
        ..Verdicts::default()
    };
    for c in &w.criteria {
        if !met.contains(c) && rng.chance(w.progress) {
            v.met.insert(c.clone());
        }
    }
    // A regression: a criterion met before is lost.
    if !met.is_empty() && rng.chance(12) {
        let lost = met
            .iter()
            .nth(rng.below(met.len() as u64) as usize)
            .unwrap();
        v.met.remove(lost);
    }
    // An id that is not a criterion counts for nothing.
    if rng.chance(5) {
        v.met.insert("X9".into());
    }
    if rng.chance(15) {
        for _ in 0..1 + rng.below(2) {
            let c = &w.criteria[rng.below(w.criteria.len() as u64) as usize];
            v.unjudged.insert(c.clone());
            // Mostly the judge leaves what it could not rule on out of `met`.
            if rng.chance(80) {
                v.met.remove(c);
            }
        }
    }
    for c in &w.criteria {
        if !v.met.contains(c) && rng.chance(50) {
            v.reasons.insert(c.clone(), format!("{c} is not there yet"));
        }
    }
    v
}

/// A random report of increment `iteration`.
fn random_increment(
    rng: &mut Rng,
    w: &World,
    iteration: u32,
    met: &BTreeSet<String>,
) -> BuildEvent {
    let edit = match rng.below(20) {
        0 | 1 => EditOutcome::NoChange,
        2 | 3 => EditOutcome::Failed {
            reason: "the model refused".into(),
        },
        4 => EditOutcome::Conflict {
            files: vec!["src/a.rs".into()],
        },
        _ => EditOutcome::Applied {
            files: vec!["src/a.rs".into()],
            lines: 1 + rng.below(40) as u32,
        },
    };
    let applied = matches!(edit, EditOutcome::Applied { .. });
    let tests = if (!applied && rng.chance(80)) || rng.chance(15) {
        None
    } else {
        // Failing as the base did (or less), and perhaps a new failure.
        let mut failing = w.base_failing.clone();
        if rng.chance(30) {
            failing.retain(|_| rng.chance(50));
        }
        if w.stubborn && rng.chance(60) {
            failing.insert("test_same".into());
        } else if rng.chance(15) {
            failing.insert(format!("test_new{}", rng.below(3)));
        }
        Some(test_run(failing, "  some output  "))
    };
    let newly_failing = tests
        .as_ref()
        .is_some_and(|t| !t.failing.is_subset(&w.base_failing));
    let verdicts = if !applied || newly_failing || rng.chance(3) {
        None
    } else {
        Some(random_verdicts(rng, w, met))
    };
    BuildEvent::Increment {
        iteration,
        edit,
        tests,
        verdicts,
    }
}

/// What the documented rules say of an increment: the criteria it newly meets (in criteria
/// order) if it is kept, else the kind of failure and the ids that distinguish it, where the
/// rules name them (the new failing tests, the criteria lost).
fn expected_judgment(
    criteria: &[String],
    base_failing: &BTreeSet<String>,
    met: &BTreeSet<String>,
    edit: &EditOutcome,
    tests: &Option<TestRun>,
    verdicts: &Option<Verdicts>,
) -> Result<Vec<String>, (BuildFailureKind, Option<BTreeSet<String>>)> {
    match edit {
        EditOutcome::Applied { .. } => {}
        EditOutcome::NoChange => return Err((BuildFailureKind::NoChange, None)),
        EditOutcome::Failed { .. } | EditOutcome::Conflict { .. } => {
            return Err((BuildFailureKind::EditFailed, None))
        }
    }
    if let Some(t) = tests {
        let new: BTreeSet<String> = t.failing.difference(base_failing).cloned().collect();
        if !new.is_empty() {
            return Err((BuildFailureKind::TestsFailed, Some(new)));
        }
    }
    let Some(v) = verdicts else {
        return Err((BuildFailureKind::JudgeFailed, None));
    };
    let judged: BTreeSet<String> = v
        .met
        .iter()
        .filter(|c| criteria.contains(c))
        .cloned()
        .collect();
    let lost: BTreeSet<String> = met.difference(&judged).cloned().collect();
    let gained: Vec<String> = criteria
        .iter()
        .filter(|c| judged.contains(*c) && !met.contains(*c))
        .cloned()
        .collect();
    if lost.iter().any(|c| v.unjudged.contains(c)) {
        return Err((BuildFailureKind::JudgeFailed, None));
    }
    if !lost.is_empty() {
        return Err((BuildFailureKind::Regression, Some(lost)));
    }
    if gained.is_empty() {
        if !v.unjudged.is_empty() {
            return Err((BuildFailureKind::JudgeFailed, None));
        }
        return Err((BuildFailureKind::NoProgress, None));
    }
    Ok(gained)
}

/// The loop as the rules describe it, built from the events and the commands seen.
struct Model {
    seed: u64,
    criteria: Vec<String>,
    backstop: u32,
    base_failing: BTreeSet<String>,
    baseline_seen: bool,
    met: BTreeSet<String>,
    met_at: BTreeMap<String, u32>,
    last_progress: u32,
    /// Builds asked for so far.
    iterations: u32,
    /// The Build not yet kept or reset.
    outstanding: Option<u32>,
    prev: Option<BuildCommand>,
    resets_since_keep: Vec<BuildFailure>,
    /// Every open set the judge returned (the base's included), with how often.
    open_seen: BTreeMap<Vec<String>, usize>,
    returns_since_keep: usize,
    finished: Option<BuildStop>,
}

impl Model {
    fn fail(&self, what: String) -> ! {
        violation(self.seed, what)
    }

    fn open_of(&self, met: &BTreeSet<String>) -> Vec<String> {
        self.criteria
            .iter()
            .filter(|c| !met.contains(*c))
            .cloned()
            .collect()
    }

    fn open(&self) -> Vec<String> {
        self.open_of(&self.met)
    }

    /// Record an open set the judge returned; true when seen before.
    fn saw(&mut self, judged_met: &BTreeSet<String>) -> bool {
        let open = self.open_of(judged_met);
        let n = self.open_seen.entry(open).or_insert(0);
        *n += 1;
        *n > 1
    }

    fn trailing_regressions(&self) -> usize {
        self.resets_since_keep
            .iter()
            .rev()
            .take_while(|f| f.kind == BuildFailureKind::Regression)
            .count()
    }

    fn circular(&self) -> bool {
        let r = &self.resets_since_keep;
        r.len() >= CIRCULAR_AFTER
            && r[r.len() - 1].kind != BuildFailureKind::NoProgress
            && r[r.len() - CIRCULAR_AFTER..]
                .iter()
                .all(|f| *f == r[r.len() - 1])
    }

    /// What must follow a Keep (`feedback` None) or a Reset (`feedback` its reason).
    fn expected_next(&self, after_reset: Option<&str>) -> BuildCommand {
        let stop = |stop| BuildCommand::Finish { stop };
        if after_reset.is_some() {
            if self.trailing_regressions() >= REGRESSIONS_AFTER {
                return stop(BuildStop::Regressed);
            }
            if self.circular() {
                return stop(BuildStop::Circular);
            }
            if self.returns_since_keep >= OSCILLATION_AFTER.max(self.open().len()) {
                return stop(BuildStop::Oscillating);
            }
        }
        if self.open().is_empty() {
            return stop(BuildStop::Satisfied);
        }
        if self.iterations >= self.backstop {
            return stop(BuildStop::Backstop);
        }
        BuildCommand::Build {
            iteration: self.iterations + 1,
            open: self.open(),
            feedback: after_reset.map(str::to_string),
        }
    }

    /// Checks that hold of any command wherever it comes, and the bookkeeping of Builds.
    fn command(&mut self, c: &BuildCommand) {
        if let Some(stop) = self.finished {
            self.fail(format!("{c:?} after the finish ({stop:?})"));
        }
        match c {
            BuildCommand::Build {
                iteration,
                open,
                feedback,
            } => {
                if let Some(o) = self.outstanding {
                    self.fail(format!("build {iteration} while build {o} is outstanding"));
                }
                if *iteration != self.iterations + 1 {
                    self.fail(format!(
                        "build {iteration} after {} builds: iterations must be consecutive",
                        self.iterations
                    ));
                }
                if *iteration > self.backstop {
                    self.fail(format!(
                        "build {iteration} past the backstop {}",
                        self.backstop
                    ));
                }
                if *open != self.open() || open.is_empty() {
                    self.fail(format!(
                        "build {iteration} toward {open:?}, but the open criteria are {:?}",
                        self.open()
                    ));
                }
                let want = match &self.prev {
                    Some(BuildCommand::Reset { reason, .. }) => Some(reason),
                    _ => None,
                };
                if feedback.as_ref() != want {
                    self.fail(format!(
                        "build {iteration} with feedback {feedback:?} after {:?}",
                        self.prev
                    ));
                }
                self.iterations = *iteration;
                self.outstanding = Some(*iteration);
            }
            BuildCommand::Keep { iteration, .. } | BuildCommand::Reset { iteration, .. } => {
                if self.outstanding != Some(*iteration) {
                    self.fail(format!(
                        "{c:?} but the outstanding build is {:?}",
                        self.outstanding
                    ));
                }
                self.outstanding = None;
            }
            BuildCommand::Finish { stop } => {
                if let Some(o) = self.outstanding {
                    self.fail(format!("finished ({stop:?}) with build {o} outstanding"));
                }
                if (*stop == BuildStop::Satisfied) != self.open().is_empty() {
                    self.fail(format!(
                        "finished {stop:?} with {:?} still open",
                        self.open()
                    ));
                }
                let after_reset = matches!(self.prev, Some(BuildCommand::Reset { .. }));
                let why = match stop {
                    BuildStop::Satisfied => None,
                    BuildStop::Backstop => (self.iterations != self.backstop).then(|| {
                        format!(
                            "backstop after {} of {} iterations",
                            self.iterations, self.backstop
                        )
                    }),
                    BuildStop::Circular => (!after_reset || !self.circular())
                        .then(|| format!("circular after the resets {:?}", self.resets_since_keep)),
                    BuildStop::Regressed => {
                        (!after_reset || self.trailing_regressions() < REGRESSIONS_AFTER).then(
                            || format!("regressed after the resets {:?}", self.resets_since_keep),
                        )
                    }
                    BuildStop::Oscillating => (!after_reset
                        || self.returns_since_keep < OSCILLATION_AFTER.max(self.open().len()))
                    .then(|| {
                        format!(
                            "oscillating after {} returns to a seen open set",
                            self.returns_since_keep
                        )
                    }),
                };
                if let Some(why) = why {
                    self.fail(why);
                }
                self.finished = Some(*stop);
            }
        }
        self.prev = Some(c.clone());
    }

    /// Check the commands one event gave, and the machine's state after it.
    fn observe(&mut self, m: &BuildLoop, event: &BuildEvent, out: &[BuildCommand]) {
        let real = match event {
            BuildEvent::Baseline { .. } => !self.baseline_seen,
            BuildEvent::Increment { iteration, .. } => self.outstanding == Some(*iteration),
            // Gives no command (the sim sends none: what it stands for is tested in the loop).
            BuildEvent::Contents { .. } => false,
        };
        if self.finished.is_some() || !real {
            if !out.is_empty() {
                self.fail(format!(
                    "an event the loop did not ask for (finished: {:?}) gave {out:?}: {event:?}",
                    self.finished
                ));
            }
        } else {
            match event {
                BuildEvent::Baseline { verdicts, .. } => self.baseline(verdicts, out),
                BuildEvent::Increment {
                    iteration,
                    edit,
                    tests,
                    verdicts,
                } => self.increment(*iteration, edit, tests, verdicts, out),
                BuildEvent::Contents { .. } => {}
            }
        }
        self.agrees(m);
    }

    fn baseline(&mut self, verdicts: &Verdicts, out: &[BuildCommand]) {
        self.baseline_seen = true;
        self.met = verdicts
            .met
            .iter()
            .filter(|c| self.criteria.contains(c))
            .cloned()
            .collect();
        self.met_at = self.met.iter().map(|c| (c.clone(), 0)).collect();
        let met = self.met.clone();
        self.saw(&met);
        let want = self.expected_next(None);
        if out != [want.clone()] {
            self.fail(format!("the baseline gave {out:?}, expected [{want:?}]"));
        }
        self.command(&out[0]);
    }

    fn increment(
        &mut self,
        iteration: u32,
        edit: &EditOutcome,
        tests: &Option<TestRun>,
        verdicts: &Option<Verdicts>,
        out: &[BuildCommand],
    ) {
        if out.len() != 2 {
            self.fail(format!(
                "increment {iteration} gave {} commands, not a keep or reset and what follows: {out:?}",
                out.len()
            ));
        }
        let expected = expected_judgment(
            &self.criteria,
            &self.base_failing,
            &self.met,
            edit,
            tests,
            verdicts,
        );
        // The judge's open set is recorded whenever the increment got as far as being judged.
        let tests_ok = tests
            .as_ref()
            .is_none_or(|t| t.failing.is_subset(&self.base_failing));
        if let (EditOutcome::Applied { .. }, true, Some(v)) = (edit, tests_ok, verdicts) {
            let judged: BTreeSet<String> = v
                .met
                .iter()
                .filter(|c| self.criteria.contains(c))
                .cloned()
                .collect();
            if self.saw(&judged) {
                self.returns_since_keep += 1;
            }
        }
        let reset_reason = match &out[0] {
            BuildCommand::Keep {
                iteration: kept,
                newly_met,
            } => {
                // Invariant 3, straight from the rules.
                let before = &self.met;
                let why = if *kept != iteration {
                    Some(format!("kept {kept} on the report of {iteration}"))
                } else if !matches!(edit, EditOutcome::Applied { .. }) {
                    Some(format!("kept though the edit was {edit:?}"))
                } else if !tests_ok {
                    Some(format!("kept though the tests failed anew: {tests:?}"))
                } else if let Some(v) = verdicts {
                    let want: Vec<String> = self
                        .criteria
                        .iter()
                        .filter(|c| v.met.contains(*c) && !before.contains(*c))
                        .cloned()
                        .collect();
                    if let Some(lost) = before.iter().find(|c| !v.met.contains(*c)) {
                        Some(format!("kept though {lost} was lost: {v:?}"))
                    } else if newly_met.is_empty() {
                        Some("kept with nothing newly met".into())
                    } else if *newly_met != want {
                        Some(format!(
                            "kept {newly_met:?} as newly met, expected {want:?}"
                        ))
                    } else {
                        None
                    }
                } else {
                    Some("kept without verdicts".into())
                };
                if let Some(why) = why {
                    self.fail(format!("increment {iteration}: {why}"));
                }
                if let Err((kind, _)) = &expected {
                    self.fail(format!(
                        "increment {iteration} kept, but the rules say reset ({kind:?})"
                    ));
                }
                self.command(&out[0]);
                for c in newly_met {
                    self.met.insert(c.clone());
                    self.met_at.insert(c.clone(), iteration);
                }
                self.last_progress = iteration;
                self.resets_since_keep.clear();
                self.returns_since_keep = 0;
                None
            }
            BuildCommand::Reset {
                iteration: reset,
                failure,
                reason,
            } => {
                if *reset != iteration {
                    self.fail(format!("reset {reset} on the report of {iteration}"));
                }
                match &expected {
                    Ok(gained) => self.fail(format!(
                        "increment {iteration} reset ({failure:?}), but it meets {gained:?} and loses nothing"
                    )),
                    Err((kind, ids)) => {
                        if failure.kind != *kind {
                            self.fail(format!(
                                "increment {iteration} reset as {:?}, the rules say {kind:?}",
                                failure.kind
                            ));
                        }
                        if let Some(ids) = ids {
                            let named: BTreeSet<String> =
                                failure.detail.split(',').map(str::to_string).collect();
                            if named != *ids {
                                self.fail(format!(
                                    "increment {iteration} reset ({kind:?}) naming {:?}, not {ids:?}",
                                    failure.detail
                                ));
                            }
                        }
                    }
                }
                if reason.trim().is_empty() {
                    self.fail(format!("increment {iteration} reset without a reason"));
                }
                self.command(&out[0]);
                self.resets_since_keep.push(failure.clone());
                Some(reason.clone())
            }
            other => self.fail(format!(
                "increment {iteration} answered first with {other:?}, not a keep or reset"
            )),
        };
        let want = self.expected_next(reset_reason.as_deref());
        if out[1] != want {
            self.fail(format!(
                "after {:?} came {:?}, expected {want:?}",
                out[0], out[1]
            ));
        }
        self.command(&out[1]);
    }

    /// The machine's own account agrees with the model's.
    fn agrees(&self, m: &BuildLoop) {
        if *m.met() != self.met {
            self.fail(format!("met is {:?}, expected {:?}", m.met(), self.met));
        }
        if *m.met_at() != self.met_at {
            self.fail(format!(
                "met_at is {:?}, expected {:?}",
                m.met_at(),
                self.met_at
            ));
        }
        if m.last_progress() != self.last_progress {
            self.fail(format!(
                "last_progress is {}, expected {}",
                m.last_progress(),
                self.last_progress
            ));
        }
        if m.iterations() != self.iterations || m.iterations() > m.backstop() {
            self.fail(format!(
                "{} iterations (backstop {}), expected {}",
                m.iterations(),
                m.backstop(),
                self.iterations
            ));
        }
        if m.finished() != self.finished {
            self.fail(format!(
                "finished() is {:?}, expected {:?}",
                m.finished(),
                self.finished
            ));
        }
    }
}

/// An event the loop did not ask for: a wrong iteration, an earlier event again, or a second
/// baseline.
fn stale(
    rng: &mut Rng,
    w: &World,
    events: &[BuildEvent],
    outstanding: Option<u32>,
    met: &BTreeSet<String>,
) -> BuildEvent {
    match rng.below(3) {
        0 => {
            let o = outstanding.unwrap_or(0);
            let iteration = match rng.below(3) {
                0 => o + 1 + rng.below(5) as u32,
                1 if o > 0 => o - 1,
                _ => 0,
            };
            assert_ne!(Some(iteration), outstanding);
            random_increment(rng, w, iteration, met)
        }
        1 => events[rng.below(events.len() as u64) as usize].clone(),
        _ => BuildEvent::Baseline {
            tests: None,
            verdicts: Verdicts {
                met: w.criteria.iter().cloned().collect(),
                ..Verdicts::default()
            },
        },
    }
}

fn run(seed: u64) -> BuildStop {
    let mut rng = Rng(seed ^ 0x5851_F42D_4C95_7F2D);
    let n = 1 + rng.below(8) as usize;
    let criteria: Vec<String> = (1..=n).map(|k| format!("C{k}")).collect();
    let backstop = 1 + rng.below(3 * n as u64 + 3) as u32;
    // Duplicate ids count once.
    let mut asked = criteria.clone();
    if rng.chance(10) {
        asked.push(criteria[rng.below(n as u64) as usize].clone());
    }
    let base_tests = match rng.below(3) {
        0 => None,
        1 => Some(test_run(BTreeSet::new(), "ok")),
        _ => Some(test_run(
            (0..1 + rng.below(2))
                .map(|k| format!("test_base{k}"))
                .collect(),
            "2 failed",
        )),
    };
    let mut base_verdicts = Verdicts::default();
    for c in &criteria {
        if rng.chance(30) {
            base_verdicts.met.insert(c.clone());
        }
    }
    if rng.chance(10) {
        base_verdicts.met.insert("X1".into());
    }
    let world = World {
        criteria: criteria.clone(),
        base_failing: base_tests
            .as_ref()
            .map(|t| t.failing.clone())
            .unwrap_or_default(),
        stubborn: rng.chance(25),
        progress: 10 + rng.below(60),
    };

    let m = BuildLoop::new(asked.clone(), backstop);
    if m.criteria() != criteria.as_slice() || m.backstop() != backstop {
        violation(
            seed,
            format!(
                "new({asked:?}, {backstop}) has criteria {:?} and backstop {}",
                m.criteria(),
                m.backstop()
            ),
        );
    }
    let model = Model {
        seed,
        criteria: criteria.clone(),
        backstop,
        base_failing: world.base_failing.clone(),
        baseline_seen: false,
        met: BTreeSet::new(),
        met_at: BTreeMap::new(),
        last_progress: 0,
        iterations: 0,
        outstanding: None,
        prev: None,
        resets_since_keep: Vec::new(),
        open_seen: BTreeMap::new(),
        returns_since_keep: 0,
        finished: None,
    };
    let mut r = Sim {
        m,
        model,
        events: Vec::new(),
        commands: Vec::new(),
    };

    // An increment before the baseline is not asked for.
    if rng.chance(5) {
        let early = random_increment(&mut rng, &world, 1, &BTreeSet::new());
        r.feed(early);
    }
    r.feed(BuildEvent::Baseline {
        tests: base_tests,
        verdicts: base_verdicts,
    });
    let mut steps = 0;
    while r.model.finished.is_none() {
        steps += 1;
        if steps > 10_000 {
            violation(seed, "the loop did not finish in 10000 steps".into());
        }
        let Some(iteration) = r.model.outstanding else {
            violation(seed, "the loop neither builds nor finishes".into());
        };
        if rng.chance(10) {
            let e = stale(&mut rng, &world, &r.events, Some(iteration), &r.model.met);
            r.feed(e);
        }
        let e = random_increment(&mut rng, &world, iteration, &r.model.met);
        r.feed(e);
        if rng.chance(10) {
            let e = stale(
                &mut rng,
                &world,
                &r.events,
                r.model.outstanding,
                &r.model.met,
            );
            r.feed(e);
        }
    }
    // After the finish nothing is asked for: every event is ignored.
    for _ in 0..1 + rng.below(3) {
        let last = r.model.iterations;
        let e = match rng.below(3) {
            0 => random_increment(&mut rng, &world, last + 1, &r.model.met),
            1 => random_increment(&mut rng, &world, last, &r.model.met),
            _ => stale(&mut rng, &world, &r.events, None, &r.model.met),
        };
        r.feed(e);
    }
    let stop = r.model.finished.unwrap();

    // The same events, fed to a fresh loop, give the same commands and the same state.
    let mut replayed = BuildLoop::new(asked, backstop);
    let again: Vec<BuildCommand> = r
        .events
        .iter()
        .flat_map(|e| replayed.step(e.clone()))
        .collect();
    if again != r.commands {
        violation(
            seed,
            format!(
                "a replay of the recorded events decided differently:\n{again:?}\nvs\n{:?}",
                r.commands
            ),
        );
    }
    let m = &r.m;
    if replayed.met() != m.met()
        || replayed.met_at() != m.met_at()
        || replayed.last_progress() != m.last_progress()
        || replayed.finished() != m.finished()
        || replayed.iterations() != m.iterations()
    {
        violation(
            seed,
            "a replay of the recorded events ended in another state".into(),
        );
    }
    stop
}

/// One run: the machine, the model checking it, and everything fed and answered.
struct Sim {
    m: BuildLoop,
    model: Model,
    events: Vec<BuildEvent>,
    commands: Vec<BuildCommand>,
}

impl Sim {
    fn feed(&mut self, e: BuildEvent) {
        self.events.push(e.clone());
        let out = self.m.step(e.clone());
        self.model.observe(&self.m, &e, &out);
        self.commands.extend(out);
    }
}

fn seeds() -> (Vec<u64>, bool) {
    if let Some(one) = std::env::var("QUORUM_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return (vec![one], false);
    }
    let n = std::env::var("QUORUM_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    ((0..n).collect(), true)
}

#[test]
fn the_build_loop_keeps_its_invariants_under_seeded_increments() {
    let (seeds, many) = seeds();
    let mut stops: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &seed in &seeds {
        *stops.entry(run(seed).as_str()).or_default() += 1;
    }
    // The simulation is only worth its seeds if it reaches every way of stopping.
    if many && seeds.len() >= 500 {
        for stop in [
            BuildStop::Satisfied,
            BuildStop::Oscillating,
            BuildStop::Regressed,
            BuildStop::Circular,
            BuildStop::Backstop,
        ] {
            assert!(
                stops.contains_key(stop.as_str()),
                "no seed of {} stopped {}: {stops:?}",
                seeds.len(),
                stop.as_str()
            );
        }
    }
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn judged(iteration: u32, tests: BTreeSet<String>, met: &[&str]) -> BuildEvent {
    BuildEvent::Increment {
        iteration,
        edit: EditOutcome::Applied {
            files: ids(&["src/a.rs"]),
            lines: 3,
        },
        verdicts: tests.is_empty().then(|| Verdicts {
            met: set(met),
            ..Verdicts::default()
        }),
        tests: Some(test_run(tests, "")),
    }
}

fn last(c: &[BuildCommand]) -> &BuildCommand {
    c.last().expect("a command")
}

#[test]
fn a_kept_increment_clears_the_failure_and_regression_streaks() {
    let mut m = BuildLoop::new(ids(&["C1", "C2", "C3", "C4"]), 30);
    m.step(BuildEvent::Baseline {
        tests: Some(test_run(BTreeSet::new(), "")),
        verdicts: Verdicts::default(),
    });
    // Two equal failures, a keep, two more: not yet circular.
    m.step(judged(1, set(&["t"]), &[]));
    m.step(judged(2, set(&["t"]), &[]));
    assert!(
        matches!(&m.step(judged(3, set(&[]), &["C1"]))[0], BuildCommand::Keep { newly_met, .. } if *newly_met == ids(&["C1"]))
    );
    m.step(judged(4, set(&["t"]), &[]));
    let c = m.step(judged(5, set(&["t"]), &[]));
    assert!(
        matches!(
            last(&c),
            BuildCommand::Build {
                iteration: 6,
                feedback: Some(_),
                ..
            }
        ),
        "{c:?}"
    );
    assert_eq!(
        last(&m.step(judged(6, set(&["t"]), &[]))),
        &BuildCommand::Finish {
            stop: BuildStop::Circular
        }
    );

    // A regression, a keep, a regression: not two in a row.
    let mut m = BuildLoop::new(ids(&["C1", "C2", "C3", "C4"]), 30);
    m.step(BuildEvent::Baseline {
        tests: None,
        verdicts: Verdicts {
            met: set(&["C1"]),
            ..Verdicts::default()
        },
    });
    let c = m.step(judged(1, set(&[]), &["C2"]));
    assert!(
        matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::Regression)
    );
    assert!(matches!(
        &m.step(judged(2, set(&[]), &["C1", "C2"]))[0],
        BuildCommand::Keep { .. }
    ));
    let c = m.step(judged(3, set(&[]), &["C1", "C3"]));
    assert!(
        matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::Regression && failure.detail == "C2")
    );
    assert!(
        matches!(last(&c), BuildCommand::Build { iteration: 4, open, .. } if *open == ids(&["C3", "C4"])),
        "{c:?}"
    );
    assert_eq!(m.met_at()["C1"], 0);
    assert_eq!(m.met_at()["C2"], 2);
    assert_eq!(m.last_progress(), 2);
}

#[test]
fn a_zero_backstop_still_allows_one_increment_and_a_second_baseline_is_ignored() {
    let mut m = BuildLoop::new(ids(&["C1", "C2"]), 0);
    assert_eq!(m.backstop(), 1);
    let base = BuildEvent::Baseline {
        tests: None,
        verdicts: Verdicts::default(),
    };
    assert_eq!(
        m.step(base),
        vec![BuildCommand::Build {
            iteration: 1,
            open: ids(&["C1", "C2"]),
            feedback: None
        }]
    );
    // A second baseline, even one that meets everything, changes nothing.
    let again = BuildEvent::Baseline {
        tests: None,
        verdicts: Verdicts {
            met: set(&["C1", "C2"]),
            ..Verdicts::default()
        },
    };
    assert!(m.step(again).is_empty());
    assert!(m.met().is_empty());
    let c = m.step(judged(1, set(&[]), &["C2"]));
    assert_eq!(
        c,
        vec![
            BuildCommand::Keep {
                iteration: 1,
                newly_met: ids(&["C2"])
            },
            BuildCommand::Finish {
                stop: BuildStop::Backstop
            }
        ]
    );
    assert!(m.step(judged(2, set(&[]), &["C1", "C2"])).is_empty());
    assert_eq!(m.finished(), Some(BuildStop::Backstop));
}

#[test]
fn an_unjudged_criterion_blocks_a_keep_only_when_it_decides() {
    let start = || {
        let mut m = BuildLoop::new(ids(&["C1", "C2", "C3"]), 9);
        m.step(BuildEvent::Baseline {
            tests: None,
            verdicts: Verdicts {
                met: set(&["C1"]),
                ..Verdicts::default()
            },
        });
        m
    };
    let with = |met: &[&str], unjudged: &[&str]| BuildEvent::Increment {
        iteration: 1,
        edit: EditOutcome::Applied {
            files: ids(&["src/a.rs"]),
            lines: 1,
        },
        tests: None,
        verdicts: Some(Verdicts {
            met: set(met),
            unjudged: set(unjudged),
            ..Verdicts::default()
        }),
    };
    // A gain and no loss: kept, whatever the judge could not rule on.
    let c = start().step(with(&["C1", "C2"], &["C3"]));
    assert_eq!(
        c[0],
        BuildCommand::Keep {
            iteration: 1,
            newly_met: ids(&["C2"])
        }
    );
    // A met criterion the judge could not rule on is unknown, not a regression.
    let c = start().step(with(&["C2"], &["C1"]));
    assert!(
        matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::JudgeFailed),
        "{c:?}"
    );
    // No gain, no loss, something unjudged: not judged, rather than no progress.
    let c = start().step(with(&["C1"], &["C2"]));
    assert!(
        matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::JudgeFailed),
        "{c:?}"
    );
    // A known loss beside an unjudged open criterion is a regression.
    let c = start().step(with(&["C2"], &["C3"]));
    assert!(
        matches!(&c[0], BuildCommand::Reset { failure, .. } if failure.kind == BuildFailureKind::Regression && failure.detail == "C1"),
        "{c:?}"
    );
}
