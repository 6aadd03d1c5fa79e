//! Seeded deterministic simulation of a whole review: the review machine, end to end.
//!
//! A simulated cluster (the conducting node plus 1-3 peers) runs every attempt the machine
//! starts — scout, planner, specialists, verification batches, judges, synthesizer — over a
//! simulated network and clock, answering each job with generated output (findings that quote
//! the pack, verdicts, scores) or a failure (malformed output, timeouts, transport errors).
//! Faults are injected while it runs: peers killed (declared lost or never), paused and resumed
//! (their late results delivered), partitioned and healed, restarted; start frames dropped;
//! result frames delayed, duplicated and reordered; the review cancelled; budgets spent; and
//! the conductor itself killed at any command of a step and brought back by replaying the
//! facts it recorded (`Event::Resume`), as a restart or a takeover does. Flows vary by seed:
//! the default review, quick, comprehensive (consultant and judge panel), exhaustive (rounds,
//! hot-file and model-guided), conformance (a spec with and without a readable form) and
//! finish review (a prior report). Invariants are checked at every step:
//!
//! - no completed task (or finished stage) is started again, across conductor restarts;
//! - a restarted conductor adopts exactly the attempt a live worker claims and the facts show
//!   in flight there (the attempt, its number and its node), and nothing else;
//! - no result of a fenced attempt (stopped, charged, handed back, of an earlier epoch) or from
//!   the wrong node is counted;
//! - each finding is reported once: a task's findings are counted at most once, and the
//!   report's findings have distinct ids and anchors;
//! - the phases are entered in order (scout → plan → specialists → verify → conformance →
//!   adjudicate → panel → synthesize → done);
//! - the review always ends, within its bounds, with a report whose status has a reason;
//! - a panic inside the machine is reported with its seed.
//!
//! `cargo test -p quorum-core --test review_sim` runs 300 seeds; `QUORUM_SIM_SEEDS=5000` runs
//! more, and `QUORUM_SIM_SEED=N` replays exactly that one. A failure prints its seed.

use quorum_core::machine::Fact;
use std::collections::{BTreeMap, BTreeSet};

/// splitmix64: deterministic, dependency-free randomness.
#[derive(Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

mod network;
mod peers;
mod sim;
mod world;

use sim::Sim;

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
        .unwrap_or(300u64);
    (1..=n).collect()
}

#[test]
pub(crate) fn the_review_machine_keeps_its_invariants_under_seeded_faults() {
    let started = std::time::Instant::now();
    let (mut steps, mut statuses) = (0u64, BTreeMap::<String, usize>::new());
    let mut flows = BTreeMap::<String, usize>::new();
    for seed in seeds() {
        let mut sim = Sim::new(seed, false);
        let report = sim.run();
        steps += sim.steps;
        *statuses
            .entry(format!("{:?}", report.status).to_lowercase())
            .or_default() += 1;
        *flows.entry(report.flow.clone()).or_default() += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    // Printed, never asserted: the figure for the record.
    println!(
        "review simulation: {} seeds, {steps} steps in {secs:.2}s ({:.0} steps/s); statuses {statuses:?}; flows {flows:?}",
        seeds().len(),
        steps as f64 / secs.max(1e-9)
    );
    assert!(
        flows.len() > 1 || seeds().len() == 1,
        "the seeds cover the flows: {flows:?}"
    );
}

#[test]
pub(crate) fn a_seed_replays_exactly() {
    for seed in [3, 17, 42] {
        let mut a = Sim::new(seed, true);
        let ra = a.run();
        let mut b = Sim::new(seed, true);
        let rb = b.run();
        assert_eq!(a.trace, b.trace, "seed {seed}: the traces differ");
        assert_eq!(
            ra.to_json(),
            rb.to_json(),
            "seed {seed}: the reports differ"
        );
        assert!(!a.trace.is_empty());
    }
}

#[test]
pub(crate) fn the_simulation_reaches_every_phase_and_fault() {
    // The seeds must exercise what they claim to: each flow, a restart of the conductor, a
    // cancel, and every judging phase, somewhere in the first 300.
    let mut phases = BTreeSet::new();
    let mut restarts = 0;
    let mut cancelled = 0;
    let mut store_resumes = 0;
    let mut adopted = 0;
    for seed in 1..=300 {
        let mut sim = Sim::new(seed, false);
        let report = sim.run();
        restarts += (sim.incarnation > 1) as u32;
        store_resumes += sim.store_resumes;
        adopted += sim.adopted;
        cancelled += report.status_reason.starts_with("cancelled") as u32;
        for (_, f) in &sim.log {
            phases.insert(match f {
                Fact::ScoutCompleted { .. } => "scout",
                Fact::PlanCompleted { .. } => "plan",
                Fact::VerdictsRecorded { .. } | Fact::VerifyCompleted { .. } => "verify",
                Fact::CriteriaJudged { .. } => "conformance",
                Fact::PriorAdjudicated { .. } => "adjudicate",
                Fact::PanelScored { .. } => "panel",
                Fact::RoundCompleted { .. } => "rounds",
                Fact::SynthesisCompleted { .. } => "synthesize",
                Fact::Resumed { .. } => "resumed",
                // Analyzer leads handed out a batch at a time under a wall-time budget.
                Fact::AttemptStarted { task_id, .. } if task_id.starts_with("verifier-leads-") => {
                    "paced leads"
                }
                _ => continue,
            });
        }
    }
    for p in [
        "scout",
        "plan",
        "verify",
        "conformance",
        "adjudicate",
        "panel",
        "rounds",
        "synthesize",
        "resumed",
        "paced leads",
    ] {
        assert!(phases.contains(p), "no seed reached {p}: {phases:?}");
    }
    assert!(restarts > 10, "conductor restarts: {restarts}");
    assert!(cancelled > 0, "no seed was cancelled");
    assert!(store_resumes > 5, "storage faults resumed: {store_resumes}");
    // A restarted conductor adopts what live workers still run for it.
    println!("attempts adopted after a restart: {adopted}");
    assert!(adopted > 10, "attempts adopted after a restart: {adopted}");
}
