//! Seeded simulation of the fix loop (`quorum_core::fixing::fix_loop`): random findings,
//! random oracle results (tests that pass, fail, or fail the same way again; analyzer hits;
//! verifier vetoes; agents that change nothing; changes that conflict with fixes kept while
//! they were made), up to three attempts in flight judged in random order, results delivered
//! late, twice, or for attempts never asked. Invariants are checked on every step, and each run is replayed from its
//! recorded events to prove the loop decides from facts alone.
//!
//! `cargo test -p quorum-core --test fix_sim` runs 500 seeds; `QUORUM_SIM_SEEDS=N` runs more;
//! a failure prints its seed and `QUORUM_SIM_SEED=N` replays exactly that one.

use quorum_core::fixing::fix_loop::*;
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
    panic!("fix-loop simulation seed {seed} violated an invariant: {what} (replay: QUORUM_SIM_SEED={seed})")
}

/// A random oracle result.
fn random_oracles(rng: &mut Rng, stubborn: bool, parallel: bool) -> Oracles {
    let edit = match rng.below(10) {
        0 if parallel && rng.chance(50) => EditOutcome::Conflict {
            files: vec!["a.py".into()],
        },
        0 => EditOutcome::NoChange,
        1 => EditOutcome::Failed {
            reason: "refused".into(),
        },
        _ => EditOutcome::Applied {
            files: vec!["a.py".into()],
            lines: 2,
        },
    };
    // A stubborn finding keeps failing the same test; others fail at random.
    let failing: BTreeSet<String> = if stubborn && rng.chance(80) {
        ["test_same".to_string()].into()
    } else if rng.chance(35) {
        [format!("test_{}", rng.below(3))].into()
    } else {
        BTreeSet::new()
    };
    let tests = rng.chance(80).then(|| TestRun {
        passed: failing.is_empty(),
        failing: failing.clone(),
        summary: String::new(),
    });
    let analyzer = rng.chance(40).then(|| AnalyzerCheck {
        rule_still_fires: rng.chance(20),
        new_hits: if rng.chance(10) {
            vec!["ruff/S1 at a.py:3".into()]
        } else {
            vec![]
        },
    });
    let verifier = rng.chance(70).then(|| VerifierCheck {
        still_holds: rng.chance(25),
        reason: "r".into(),
        ..Default::default()
    });
    Oracles {
        edit,
        tests,
        analyzer,
        verifier,
    }
}

fn run(seed: u64) {
    let mut rng = Rng(seed ^ 0xA076_1D64_78BD_642F);
    let n = 1 + rng.below(6) as usize;
    let findings: Vec<String> = (1..=n).map(|k| format!("F{k}")).collect();
    let stubborn: BTreeSet<String> = findings
        .iter()
        .filter(|_| rng.chance(30))
        .cloned()
        .collect();
    let limits = if rng.chance(30) {
        FixLimits {
            backstop: 1 + rng.below(4) as u32,
            parallel: 1,
        }
    } else {
        FixLimits::for_findings(n)
    }
    .with_parallel(1 + rng.below(3) as u32);
    let parallel = limits.parallel > 1;
    let mut m = FixLoop::new(findings.clone(), limits);
    let mut events = Vec::new();
    let mut commands = Vec::new();
    let mut feed = |m: &mut FixLoop, e: Event, events: &mut Vec<Event>| {
        events.push(e.clone());
        let out = m.step(e);
        commands.extend(out.iter().cloned());
        out
    };
    // No test command in some runs; a test already failing on the base in others.
    let baseline = match rng.below(3) {
        0 => None,
        1 => Some(TestRun::default()),
        _ => Some(TestRun {
            passed: false,
            failing: ["test_0".to_string()].into(),
            summary: String::new(),
        }),
    };
    let baseline_failing = baseline
        .as_ref()
        .map(|t| t.failing.clone())
        .unwrap_or_default();
    let mut out = feed(&mut m, Event::Baseline { tests: baseline }, &mut events);
    let mut terminal: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut failures: BTreeMap<String, Vec<FailureClass>> = BTreeMap::new();
    let mut pending_pass: Option<bool> = None;
    let mut attempts = 0u32;
    let mut finished = false;
    let mut in_flight: Vec<(String, u32)> = Vec::new();
    for _step in 0..10_000 {
        for c in &out {
            if finished {
                violation(seed, format!("a command after the finish: {c:?}"));
            }
            match c {
                Command::Attempt {
                    finding, attempt, ..
                } => {
                    if terminal.contains_key(finding) {
                        violation(seed, format!("{finding} attempted after it ended"));
                    }
                    if in_flight.iter().any(|(f, _)| f == finding) {
                        violation(seed, format!("{finding} in flight twice"));
                    }
                    attempts += 1;
                    if attempts > limits.backstop {
                        violation(
                            seed,
                            format!("attempt {attempts} past the backstop {}", limits.backstop),
                        );
                    }
                    in_flight.push((finding.clone(), *attempt));
                    if in_flight.len() > limits.parallel as usize {
                        violation(
                            seed,
                            format!(
                                "{} attempts in flight, over {}",
                                in_flight.len(),
                                limits.parallel
                            ),
                        );
                    }
                }
                Command::Keep { finding, .. } => {
                    if pending_pass != Some(true) {
                        violation(seed, format!("{finding} kept though an oracle failed"));
                    }
                    if terminal.insert(finding.clone(), "kept").is_some() {
                        violation(seed, format!("{finding} ended twice"));
                    }
                }
                Command::Discard { finding, class, .. } => {
                    if pending_pass != Some(false) {
                        violation(
                            seed,
                            format!("{finding} discarded though every oracle passed"),
                        );
                    }
                    let blames_tests = matches!(
                        class.kind,
                        FailureKind::TestsFailed | FailureKind::Regression
                    );
                    if blames_tests
                        && class
                            .detail
                            .split(", ")
                            .any(|t| baseline_failing.contains(t))
                    {
                        violation(
                            seed,
                            format!("{finding} blamed for a test failing on the base"),
                        );
                    }
                    failures
                        .entry(finding.clone())
                        .or_default()
                        .push(class.clone());
                }
                Command::GiveUp { finding, why } => {
                    if *why == Unfixed::Conflicting {
                        let conflicts = failures[finding]
                            .iter()
                            .filter(|c| c.kind == FailureKind::Conflict)
                            .count();
                        if conflicts <= CONFLICTS_ALLOWED {
                            violation(
                                seed,
                                format!(
                                    "{finding} called conflicting after {conflicts} conflict(s)"
                                ),
                            );
                        }
                    }
                    if in_flight.iter().any(|(f, _)| f == finding) {
                        violation(seed, format!("{finding} given up while in flight"));
                    }
                    if *why == Unfixed::CircularFix {
                        let f = &failures[finding];
                        if f.len() < CIRCULAR_AFTER
                            || f[f.len() - CIRCULAR_AFTER..]
                                .iter()
                                .any(|c| c != f.last().unwrap())
                        {
                            violation(seed, format!("{finding} called circular after {f:?}"));
                        }
                    }
                    if terminal.insert(finding.clone(), "unfixed").is_some() {
                        violation(seed, format!("{finding} ended twice"));
                    }
                }
                Command::Finish { stop } => {
                    finished = true;
                    if !in_flight.is_empty() {
                        violation(seed, format!("finished with {in_flight:?} in flight"));
                    }
                    if terminal.len() != n {
                        violation(
                            seed,
                            format!(
                                "finished ({stop:?}) with {} of {n} findings ended",
                                terminal.len()
                            ),
                        );
                    }
                    if *stop == StopReason::Satisfied && terminal.values().any(|t| *t != "kept") {
                        violation(seed, "satisfied with an unfixed finding".into());
                    }
                }
            }
        }
        if finished {
            break;
        }
        if in_flight.is_empty() {
            violation(seed, "the loop neither attempts nor finishes".into());
        }
        // The attempts in flight finish in any order.
        let (finding, attempt) = in_flight.remove(rng.below(in_flight.len() as u64) as usize);
        // Noise first: a result for an attempt never asked, and a duplicate of an old one.
        if rng.chance(10) {
            let stray = feed(
                &mut m,
                Event::Judged {
                    finding: finding.clone(),
                    attempt: attempt + 7,
                    oracles: random_oracles(&mut rng, false, parallel),
                },
                &mut events,
            );
            if !stray.is_empty() {
                violation(seed, format!("a stray result changed the loop: {stray:?}"));
            }
        }
        let oracles = random_oracles(&mut rng, stubborn.contains(&finding), parallel);
        // Whether every oracle passed; a test failing on the base does not count against the fix.
        let effective = {
            let tests_ok = oracles
                .tests
                .as_ref()
                .is_none_or(|t| t.failing.is_subset(&baseline_failing));
            let applied = matches!(oracles.edit, EditOutcome::Applied { .. });
            let analyzer_ok = oracles
                .analyzer
                .as_ref()
                .is_none_or(|a| !a.rule_still_fires && a.new_hits.is_empty());
            let verifier_ok = oracles.verifier.as_ref().is_none_or(|v| !v.still_holds);
            applied && tests_ok && analyzer_ok && verifier_ok
        };
        pending_pass = Some(effective);
        out = feed(
            &mut m,
            Event::Judged {
                finding: finding.clone(),
                attempt,
                oracles: oracles.clone(),
            },
            &mut events,
        );
        if rng.chance(10) {
            let dup = feed(
                &mut m,
                Event::Judged {
                    finding,
                    attempt,
                    oracles,
                },
                &mut events,
            );
            if !dup.is_empty() {
                violation(
                    seed,
                    format!("a duplicated result changed the loop: {dup:?}"),
                );
            }
        }
    }
    if !finished {
        violation(seed, "the loop did not finish".into());
    }
    // The same events, fed to a fresh loop, give the same commands.
    let mut replayed = FixLoop::new(findings, limits);
    let again: Vec<Command> = events.into_iter().flat_map(|e| replayed.step(e)).collect();
    if again != commands {
        violation(
            seed,
            "a replay of the recorded events decided differently".into(),
        );
    }
}

fn seeds() -> Vec<u64> {
    if let Some(one) = std::env::var("QUORUM_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![one];
    }
    let n = std::env::var("QUORUM_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    (0..n).collect()
}

#[test]
fn the_fix_loop_keeps_its_invariants_under_seeded_results() {
    for seed in seeds() {
        run(seed);
    }
}
