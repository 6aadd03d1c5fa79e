//! Seeded deterministic simulation of the conductor's scheduling core.
//!
//! A simulated cluster (this node plus 1-3 peers) runs the attempts the scheduler starts, over a
//! simulated network and clock, while faults are injected: peers killed (detected by membership
//! or not at all), paused and resumed (their late results delivered), drained, restarted;
//! result frames dropped, duplicated, delayed and reordered; results forged by other nodes;
//! the review cancelled. Invariants are checked at every step:
//!
//! - no completed task is started again;
//! - no result of a fenced attempt, a forged sender or a duplicate frame is counted;
//! - every task is counted completed at most once;
//! - no attempt is placed on a node that is draining or known lost, or beyond its capacity;
//! - the review always ends — every task terminal — within its bounds, and no task is charged
//!   more attempts than the flow allows.
//!
//! `cargo test -p quorum-core --test schedule_sim` runs 300 seeds. `QUORUM_SIM_SEEDS=5000` runs
//! more; a failure prints its seed, and `QUORUM_SIM_SEED=N` replays exactly that one.

use quorum_core::machine::schedule::{
    AttemptId, AttemptResult, Command, Input, Place, Scheduler, SchedulerParams, TaskKey,
    TaskStatus,
};
use std::collections::{BTreeMap, BTreeSet};

/// splitmix64: deterministic, dependency-free randomness.
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
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum PeerState {
    Up,
    /// Frozen: holds its results and sends no renewals until resumed.
    Paused,
    Draining,
    Dead,
}

struct SimPeer {
    state: PeerState,
    capacity: usize,
    /// Whether the scheduler has been told (PeerLost delivered) that this peer died.
    told_lost: bool,
    /// Results held while paused: delivered late on resume.
    held: Vec<(AttemptId, AttemptResult)>,
    /// Attempts running here, with when they finish.
    running: BTreeMap<AttemptId, u64>,
}

/// A message in flight to the scheduler.
struct Delivery {
    at: u64,
    /// Tie-breaker that reorders same-time deliveries.
    order: u64,
    input: Input,
}

struct Sim {
    seed: u64,
    rng: Rng,
    now: u64,
    sched: Scheduler,
    peers: BTreeMap<String, SimPeer>,
    queue: Vec<Delivery>,
    tasks: usize,
    params: SchedulerParams,
    /// attempt -> (task, place) for every attempt ever started.
    started: BTreeMap<AttemptId, (TaskKey, Place)>,
    /// Attempts that were stopped, handed back or failed: never to be counted afterwards.
    fenced: BTreeSet<AttemptId>,
    completed: BTreeMap<TaskKey, AttemptId>,
    /// The input being processed, to check who a counted result came from.
    current: Option<Input>,
    stopped: bool,
    /// When the user cancels, in the seeds that do (early, so a cancel never rescues a review
    /// that would otherwise hang).
    cancel_at: Option<u64>,
    /// Half the seeds never kill a node, so nothing but leases can recover a lost result.
    kills: bool,
    steps: u64,
}

fn violation(seed: u64, what: String) -> ! {
    panic!("schedule simulation seed {seed} violated an invariant: {what} (replay: QUORUM_SIM_SEED={seed})")
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xD1B5_4A32_D192_ED03);
        let params = SchedulerParams {
            task_attempts: 1 + rng.below(3) as u32,
            stage_attempts: 2,
            circular_fix_repeats: 2,
            local_capacity: 1 + rng.below(3) as usize,
            lease_ms: 400,
            attempt_ms: 5_000,
            suspect_ms: 300,
            lapsed_avoid_ms: 2_000,
            max_handbacks: 16,
            backoff_base_ms: 50,
            backoff_cap_ms: 1_000,
        };
        let mut sched = Scheduler::new(params.clone(), 1 + rng.below(5), rng.next());
        let mut peers = BTreeMap::new();
        let n_peers = 1 + rng.below(3);
        for i in 0..n_peers {
            let name = format!("p{i}");
            let capacity = 1 + rng.below(3) as usize;
            sched.step(
                0,
                Input::PeerUp {
                    node: name.clone(),
                    capacity,
                },
            );
            peers.insert(
                name,
                SimPeer {
                    state: PeerState::Up,
                    capacity,
                    told_lost: false,
                    held: Vec::new(),
                    running: BTreeMap::new(),
                },
            );
        }
        let tasks = 3 + rng.below(10) as usize;
        let cancel_at = rng.chance(10).then(|| rng.below(3_000));
        let kills = rng.chance(50);
        Sim {
            seed,
            rng,
            now: 0,
            sched,
            peers,
            queue: Vec::new(),
            tasks,
            params,
            started: BTreeMap::new(),
            fenced: BTreeSet::new(),
            completed: BTreeMap::new(),
            current: None,
            stopped: false,
            cancel_at,
            kills,
            steps: 0,
        }
    }

    fn deliver_at(&mut self, at: u64, input: Input) {
        let order = self.rng.next();
        self.queue.push(Delivery { at, order, input });
    }

    fn random_result(&mut self) -> AttemptResult {
        if self.rng.chance(65) {
            return AttemptResult::Success;
        }
        let (class, retryable) = match self.rng.below(5) {
            0 => ("malformed_output", true),
            1 => ("timeout", true),
            2 => ("transport", true),
            3 => ("rate_limited", true),
            _ => ("schema_violation", false),
        };
        AttemptResult::Failure {
            class: class.into(),
            message: format!("simulated {class}"),
            retryable,
        }
    }

    /// Feed one input and act on every command, checking invariants.
    fn feed(&mut self, input: Input) {
        self.steps += 1;
        if let Input::PeerLost { node } = &input {
            if let Some(p) = self.peers.get_mut(node) {
                if p.state == PeerState::Dead {
                    p.told_lost = true;
                }
            }
        }
        self.current = Some(input.clone());
        let cmds = self.sched.step(self.now, input);
        for c in cmds {
            self.act(c);
        }
        self.current = None;
    }

    fn act(&mut self, c: Command) {
        let seed = self.seed;
        match c {
            Command::Start {
                attempt,
                key,
                place,
                ..
            } => {
                if self.stopped {
                    violation(seed, format!("attempt {attempt} started after stop"));
                }
                if self.completed.contains_key(&key) {
                    violation(seed, format!("completed task {key} started again"));
                }
                if self.started.contains_key(&attempt) {
                    violation(seed, format!("attempt id {attempt} reused"));
                }
                self.started.insert(attempt, (key, place.clone()));
                let duration = 10 + self.rng.below(600);
                match &place {
                    Place::Local => {
                        let r = self.random_result();
                        self.deliver_at(
                            self.now + duration,
                            Input::Outcome {
                                attempt,
                                from: Place::Local,
                                result: r,
                            },
                        );
                    }
                    Place::Peer(node) => {
                        let node = node.clone();
                        let Some(p) = self.peers.get(&node) else {
                            violation(seed, format!("placed on unknown peer {node}"));
                        };
                        if p.state == PeerState::Draining {
                            violation(seed, format!("attempt {attempt} placed on draining {node}"));
                        }
                        if p.state == PeerState::Dead && p.told_lost {
                            violation(seed, format!("attempt {attempt} placed on lost {node}"));
                        }
                        if self.sched.peer_load(&node) > p.capacity {
                            violation(seed, format!("{node} over capacity"));
                        }
                        match p.state {
                            // The frame goes nowhere; only a lease or membership can tell.
                            PeerState::Dead => {}
                            _ => {
                                if let Some(p) = self.peers.get_mut(&node) {
                                    p.running.insert(attempt, self.now + duration);
                                }
                            }
                        }
                    }
                }
            }
            Command::Succeeded { attempt, key } => {
                let Some((k, place)) = self.started.get(&attempt).cloned() else {
                    violation(
                        seed,
                        format!("success counted for unknown attempt {attempt}"),
                    );
                };
                if k != key {
                    violation(
                        seed,
                        format!("attempt {attempt} counted for the wrong task"),
                    );
                }
                if self.fenced.contains(&attempt) {
                    violation(seed, format!("result of fenced attempt {attempt} counted"));
                }
                match &self.current {
                    Some(Input::Outcome { from, .. }) if *from == place => {}
                    other => violation(
                        seed,
                        format!("attempt {attempt} counted from {other:?}, placed at {place:?}"),
                    ),
                }
                if let Some(prev) = self.completed.insert(key, attempt) {
                    violation(
                        seed,
                        format!("task {key} completed twice ({prev}, {attempt})"),
                    );
                }
                self.fenced.insert(attempt);
            }
            Command::Failed { attempt, key, .. } => {
                if self.completed.contains_key(&key) && attempt != 0 {
                    violation(seed, format!("completed task {key} failed afterwards"));
                }
                self.fenced.insert(attempt);
            }
            Command::HandedBack { attempt, .. } => {
                self.fenced.insert(attempt);
            }
            Command::Stop { attempt, place } => {
                self.fenced.insert(attempt);
                if let Some(node) = place.node() {
                    if let Some(p) = self.peers.get_mut(node) {
                        p.running.remove(&attempt);
                    }
                }
            }
            Command::RetryAfter { key, delay_ms } => {
                self.deliver_at(self.now + delay_ms, Input::RetryDue { key });
            }
            Command::Ignored { .. } => {}
        }
    }

    /// Peers finish work, renew leases, and deliver (or lose) results.
    fn run_peers(&mut self) {
        let names: Vec<String> = self.peers.keys().cloned().collect();
        for name in names {
            let state = self.peers[&name].state;
            if matches!(state, PeerState::Dead | PeerState::Paused) {
                continue;
            }
            let running: Vec<(AttemptId, u64)> = self.peers[&name]
                .running
                .iter()
                .map(|(a, t)| (*a, *t))
                .collect();
            for (attempt, done_at) in running {
                if done_at <= self.now {
                    if let Some(p) = self.peers.get_mut(&name) {
                        p.running.remove(&attempt);
                    }
                    let result = self.random_result();
                    if self.rng.chance(8) {
                        continue; // the result frame is dropped
                    }
                    let delay = self.rng.below(150);
                    let copies = if self.rng.chance(5) { 2 } else { 1 };
                    for _ in 0..copies {
                        self.deliver_at(
                            self.now + delay,
                            Input::Outcome {
                                attempt,
                                from: Place::Peer(name.clone()),
                                result: result.clone(),
                            },
                        );
                    }
                } else if self.rng.chance(40) {
                    // Renewals, some of them lost.
                    let at = self.now + self.rng.below(50);
                    if !self.rng.chance(10) {
                        self.deliver_at(
                            at,
                            Input::Renew {
                                attempt,
                                from: name.clone(),
                            },
                        );
                    }
                }
            }
        }
    }

    fn inject_fault(&mut self) {
        let names: Vec<String> = self.peers.keys().cloned().collect();
        let Some(name) = names
            .get(self.rng.below(names.len() as u64) as usize)
            .cloned()
        else {
            return;
        };
        match self.rng.below(100) {
            // Kill -9: its work vanishes; membership notices, or never does.
            0..=2 if self.kills => {
                let detect = self.rng.chance(60);
                let delay = 50 + self.rng.below(400);
                if let Some(p) = self.peers.get_mut(&name) {
                    if p.state != PeerState::Dead {
                        p.state = PeerState::Dead;
                        p.running.clear();
                        p.held.clear();
                    }
                }
                if detect {
                    self.deliver_at(self.now + delay, Input::PeerLost { node: name });
                }
            }
            // SIGSTOP: no renewals, results held.
            3..=5 => {
                if let Some(p) = self.peers.get_mut(&name) {
                    if p.state == PeerState::Up {
                        p.state = PeerState::Paused;
                    }
                }
            }
            // SIGCONT: the held (late) results arrive.
            6..=9 => {
                let held = match self.peers.get_mut(&name) {
                    Some(p) if p.state == PeerState::Paused => {
                        p.state = PeerState::Up;
                        std::mem::take(&mut p.held)
                    }
                    _ => Vec::new(),
                };
                for (attempt, result) in held {
                    self.deliver_at(
                        self.now + 1,
                        Input::Outcome {
                            attempt,
                            from: Place::Peer(name.clone()),
                            result,
                        },
                    );
                }
            }
            // SIGTERM: drain.
            10 => {
                if let Some(p) = self.peers.get_mut(&name) {
                    if p.state == PeerState::Up {
                        p.state = PeerState::Draining;
                    }
                }
                self.feed(Input::PeerDraining { node: name });
            }
            // A dead node restarts and rejoins.
            11..=12 => {
                let capacity = 1 + self.rng.below(3) as usize;
                let back = match self.peers.get_mut(&name) {
                    Some(p) if p.state == PeerState::Dead && p.told_lost => {
                        p.state = PeerState::Up;
                        p.told_lost = false;
                        p.capacity = capacity;
                        true
                    }
                    _ => false,
                };
                if back {
                    self.feed(Input::PeerUp {
                        node: name,
                        capacity,
                    });
                }
            }
            // Another node forges a success for some live attempt.
            13..=16 => {
                let live: Vec<AttemptId> = self.sched.live().map(|(a, _, _)| a).collect();
                if let Some(a) = live.get(self.rng.below(live.len() as u64) as usize) {
                    let forger = format!("p{}", self.rng.below(4));
                    let from = Place::Peer(forger);
                    if self.sched.place_of(*a) != Some(&from) {
                        self.feed(Input::Outcome {
                            attempt: *a,
                            from,
                            result: AttemptResult::Success,
                        });
                    }
                }
            }
            _ => {}
        }
    }

    fn run(mut self) -> u64 {
        for key in 0..self.tasks {
            // Some tasks prefer a peer (as verification prefers another model family), which
            // may be the one that dies: a preference must never hold a task back.
            if self.rng.chance(30) {
                let peer = format!("p{}", self.rng.below(self.peers.len() as u64));
                self.feed(Input::Prefer {
                    key,
                    places: vec![Place::Peer(peer)],
                });
            }
            self.feed(Input::AddTask {
                key,
                stage: false,
                placeable: true,
            });
        }
        let max_steps = 50_000;
        while !self.sched.all_terminal(false) {
            if self.steps > max_steps || self.now > 600_000 {
                violation(
                    self.seed,
                    format!(
                        "the review did not end (t={} ms, {} steps, live {:?})",
                        self.now,
                        self.steps,
                        self.sched.live().collect::<Vec<_>>()
                    ),
                );
            }
            self.now += 1 + self.rng.below(40);
            if self.cancel_at.is_some_and(|t| self.now >= t) && !self.stopped {
                self.feed(Input::StopAll {
                    class: "cancelled".into(),
                    reason: "cancelled in the simulation".into(),
                });
                self.stopped = true;
            }
            if self.rng.chance(25) {
                self.inject_fault();
            }
            // A paused peer keeps results it finishes.
            let paused: Vec<String> = self
                .peers
                .iter()
                .filter(|(_, p)| p.state == PeerState::Paused)
                .map(|(n, _)| n.clone())
                .collect();
            for name in paused {
                let now = self.now;
                let done: Vec<AttemptId> = self.peers[&name]
                    .running
                    .iter()
                    .filter(|(_, t)| **t <= now)
                    .map(|(a, _)| *a)
                    .collect();
                for a in done {
                    let r = self.random_result();
                    if let Some(p) = self.peers.get_mut(&name) {
                        p.running.remove(&a);
                        p.held.push((a, r));
                    }
                }
            }
            self.run_peers();
            // Deliver what is due, in a seeded order among equals (reordering).
            self.queue.sort_by_key(|d| (d.at, d.order));
            let due: Vec<Delivery> = {
                let split = self.queue.partition_point(|d| d.at <= self.now);
                self.queue.drain(..split).collect()
            };
            for d in due {
                self.feed(d.input);
            }
            self.feed(Input::Tick);
        }
        // The end: every task terminal, charged within bounds, completed ones counted once.
        for key in 0..self.tasks {
            let t = self.sched.task(key).expect("task vanished");
            if !t.status.is_terminal() {
                violation(self.seed, format!("task {key} ended {:?}", t.status));
            }
            if t.charged() > self.params.task_attempts {
                violation(
                    self.seed,
                    format!("task {key} charged {} attempts", t.charged()),
                );
            }
            if (t.status == TaskStatus::Completed) != self.completed.contains_key(&key) {
                violation(self.seed, format!("task {key} status and count disagree"));
            }
        }
        self.steps
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(one) = std::env::var("QUORUM_SIM_SEED") {
        return vec![one
            .trim()
            .parse()
            .expect("QUORUM_SIM_SEED must be a number")];
    }
    let n = std::env::var("QUORUM_SIM_SEEDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(300);
    (0..n).collect()
}

#[test]
fn the_scheduler_keeps_its_invariants_under_seeded_faults() {
    let mut total = 0;
    for seed in seeds() {
        total += Sim::new(seed).run();
    }
    assert!(total > 0);
}

#[test]
fn a_seed_replays_exactly() {
    let a = Sim::new(42).run();
    let b = Sim::new(42).run();
    assert_eq!(a, b, "the same seed took a different path");
}
