//! The conductor's scheduling core: a pure state machine over task attempts.
//!
//! Everything a review must get right under faults lives here — where each attempt runs
//! (placement by load), leases on remote attempts, fencing of late and forged results, retries
//! with backoff, hand-backs for placement failures (a lost or refusing node, a lapsed lease —
//! never charged to the task), circular-fix detection, and stopping (budget, cancel). It takes
//! events in and returns commands out; it does no I/O and has no clock of its own (every step is
//! given `now_ms`), so the same inputs always give the same outputs. The `FlowConductor` actor
//! drives it; `tests/schedule_sim.rs` runs it under seeded faults.
//!
//! Attempt ids carry the review's epoch in their high bits, so ids never repeat across resumes
//! or takeovers and a result from an earlier epoch can never match a live attempt.

mod protocol;

pub use protocol::{
    AttemptId, AttemptResult, Command, Input, Place, SchedulerParams, TaskKey, TaskStatus, TaskView,
};
use std::collections::{BTreeMap, VecDeque};

/// Error classes that say where an attempt ran, not how the task went: handed back, never
/// charged to the task's attempts or its circular-fix streak.
pub const PLACEMENT_CLASSES: &[&str] = &["node_lost", "refused", "lease_expired"];

/// Error classes that say the model's answer was at fault: retries carry the error back to the
/// model, so the same class again means the fixes go in circles. Infrastructure failures
/// (timeouts, transport, rate limits) are not circular: they run out the attempts instead.
pub const OUTPUT_CLASSES: &[&str] = &[
    "malformed_output",
    "schema_violation",
    "tool_error",
    "context_overflow",
];

#[derive(Debug, Clone)]
struct Live {
    key: TaskKey,
    place: Place,
    renew_by: u64,
    hard: u64,
}

#[derive(Debug, Clone)]
struct PeerView {
    capacity: usize,
    draining: bool,
    avoid_until: u64,
    live: usize,
}

/// The scheduling state of one review's attempts.
#[derive(Debug, Clone)]
pub struct Scheduler {
    params: SchedulerParams,
    epoch: u64,
    seq: u64,
    tasks: BTreeMap<TaskKey, TaskView>,
    pending: VecDeque<TaskKey>,
    live: BTreeMap<AttemptId, Live>,
    peers: BTreeMap<String, PeerView>,
    prefer: BTreeMap<TaskKey, Vec<Place>>,
    local_live: usize,
    stopped: Option<(String, String)>,
    jitter: u64,
}

impl Scheduler {
    /// `epoch` fences everything an earlier conductor of the same review started; `seed`
    /// drives the backoff jitter (so a simulation replays exactly).
    pub fn new(params: SchedulerParams, epoch: u64, seed: u64) -> Scheduler {
        Scheduler {
            params,
            epoch,
            seq: 0,
            tasks: BTreeMap::new(),
            pending: VecDeque::new(),
            live: BTreeMap::new(),
            peers: BTreeMap::new(),
            prefer: BTreeMap::new(),
            local_live: 0,
            stopped: None,
            jitter: seed | 1,
        }
    }

    pub fn params(&self) -> &SchedulerParams {
        &self.params
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The epoch an attempt id was issued in.
    pub fn epoch_of(attempt: AttemptId) -> u64 {
        attempt >> 40
    }

    pub fn task(&self, key: TaskKey) -> Option<&TaskView> {
        self.tasks.get(&key)
    }

    /// Attempts in flight: (attempt, task, place).
    pub fn live(&self) -> impl Iterator<Item = (AttemptId, TaskKey, &Place)> {
        self.live.iter().map(|(a, l)| (*a, l.key, &l.place))
    }

    /// Where a live attempt runs.
    pub fn place_of(&self, attempt: AttemptId) -> Option<&Place> {
        self.live.get(&attempt).map(|l| &l.place)
    }

    /// Peers the scheduler knows of.
    pub fn peers(&self) -> impl Iterator<Item = &str> {
        self.peers.keys().map(String::as_str)
    }

    /// A peer's capacity while it may be chosen; `None` when unknown or draining.
    pub fn peer_offer(&self, node: &str) -> Option<usize> {
        self.peers
            .get(node)
            .filter(|p| !p.draining)
            .map(|p| p.capacity)
    }

    /// Live specialist attempts per peer, for load reporting.
    pub fn peer_load(&self, node: &str) -> usize {
        self.peers.get(node).map(|p| p.live).unwrap_or(0)
    }

    /// Every task of the given kind has ended and nothing of that kind is live.
    pub fn all_terminal(&self, stage: bool) -> bool {
        let none_live = !self
            .live
            .values()
            .any(|l| self.tasks.get(&l.key).is_some_and(|t| t.stage == stage));
        none_live
            && self
                .tasks
                .values()
                .filter(|t| t.stage == stage)
                .all(|t| t.status.is_terminal())
    }

    pub fn stopped(&self) -> bool {
        self.stopped.is_some()
    }

    /// Feed one event; get the commands it calls for, in order.
    pub fn step(&mut self, now_ms: u64, input: Input) -> Vec<Command> {
        let mut out = Vec::new();
        match input {
            Input::AddTask {
                key,
                stage,
                placeable,
            } => {
                self.tasks.insert(
                    key,
                    TaskView {
                        status: TaskStatus::Pending,
                        started: 0,
                        handed_back: 0,
                        error_classes: Vec::new(),
                        last_error: None,
                        placeable,
                        stage,
                    },
                );
                if self.stopped.is_some() {
                    self.fail_unfinished(&mut out);
                } else {
                    self.pending.push_back(key);
                }
            }
            Input::Adopt { key, attempt, node } => {
                if self.tasks.contains_key(&key) {
                    return out;
                }
                let adopt = self.stopped.is_none() && !self.live.contains_key(&attempt);
                self.tasks.insert(
                    key,
                    TaskView {
                        status: if adopt {
                            TaskStatus::Running
                        } else {
                            TaskStatus::Pending
                        },
                        started: u32::from(adopt),
                        handed_back: 0,
                        error_classes: Vec::new(),
                        last_error: None,
                        placeable: true,
                        stage: false,
                    },
                );
                if self.stopped.is_some() {
                    self.fail_unfinished(&mut out);
                } else if !adopt {
                    self.pending.push_back(key);
                } else {
                    // Known to the scheduler now, given room only once it is offered.
                    let p = self.peers.entry(node.clone()).or_insert(PeerView {
                        capacity: 0,
                        draining: false,
                        avoid_until: 0,
                        live: 0,
                    });
                    p.live += 1;
                    self.live.insert(
                        attempt,
                        Live {
                            key,
                            place: Place::Peer(node),
                            renew_by: now_ms.saturating_add(self.params.lease_ms),
                            hard: now_ms
                                .saturating_add(self.params.lease_ms)
                                .saturating_add(self.params.attempt_ms),
                        },
                    );
                }
            }
            Input::Prefer { key, places } => {
                if places.is_empty() {
                    self.prefer.remove(&key);
                } else {
                    self.prefer.insert(key, places);
                }
            }
            Input::PeerUp { node, capacity } => {
                let p = self.peers.entry(node).or_insert(PeerView {
                    capacity,
                    draining: false,
                    avoid_until: 0,
                    live: 0,
                });
                p.capacity = capacity;
                p.draining = false;
            }
            Input::PeerDraining { node } => {
                if let Some(p) = self.peers.get_mut(&node) {
                    p.draining = true;
                }
            }
            Input::PeerLost { node } => {
                let lost: Vec<AttemptId> = self
                    .live
                    .iter()
                    .filter(|(_, l)| l.place.node() == Some(node.as_str()))
                    .map(|(a, _)| *a)
                    .collect();
                for attempt in lost {
                    if let Some(l) = self.take_live(attempt) {
                        out.push(Command::Stop {
                            attempt,
                            place: l.place.clone(),
                        });
                        self.fail(
                            now_ms,
                            attempt,
                            l,
                            "node_lost",
                            format!("node {node} was lost while running the attempt"),
                            true,
                            &mut out,
                        );
                    }
                }
                self.peers.remove(&node);
            }
            Input::Outcome {
                attempt,
                from,
                result,
            } => match self.live.get(&attempt) {
                None => out.push(Command::Ignored {
                    attempt,
                    from,
                    why: "not live (fenced, finished, or from an earlier epoch)",
                }),
                Some(l) if l.place != from => out.push(Command::Ignored {
                    attempt,
                    from,
                    why: "from a node the attempt is not placed on",
                }),
                Some(_) => {
                    let Some(l) = self.take_live(attempt) else {
                        return out;
                    };
                    if let Some(node) = l.place.node() {
                        if let Some(p) = self.peers.get_mut(node) {
                            match &result {
                                AttemptResult::Failure { class, .. } if class == "refused" => {
                                    p.avoid_until = now_ms + self.params.suspect_ms;
                                }
                                // A node that delivers has proved itself again.
                                _ => p.avoid_until = 0,
                            }
                        }
                    }
                    match result {
                        AttemptResult::Success => {
                            if let Some(t) = self.tasks.get_mut(&l.key) {
                                t.status = TaskStatus::Completed;
                            }
                            out.push(Command::Succeeded {
                                attempt,
                                key: l.key,
                            });
                        }
                        AttemptResult::Failure {
                            class,
                            message,
                            retryable,
                        } => self.fail(now_ms, attempt, l, &class, message, retryable, &mut out),
                    }
                }
            },
            Input::SendFailed { attempt } => {
                if let Some(l) = self.take_live(attempt) {
                    let node = l.place.node().unwrap_or_default().to_string();
                    if let Some(p) = self.peers.get_mut(&node) {
                        p.avoid_until = now_ms + self.params.suspect_ms;
                    }
                    self.fail(
                        now_ms,
                        attempt,
                        l,
                        "node_lost",
                        format!("node {node} could not be reached"),
                        true,
                        &mut out,
                    );
                }
            }
            Input::Renew { attempt, from } => {
                let lease = self.params.lease_ms;
                if let Some(l) = self.live.get_mut(&attempt) {
                    if l.place.node() == Some(from.as_str()) {
                        l.renew_by = now_ms + lease;
                    }
                }
            }
            Input::RetryDue { key } => {
                if self.stopped.is_none() {
                    if let Some(t) = self.tasks.get_mut(&key) {
                        if t.status == TaskStatus::Backoff {
                            t.status = TaskStatus::Pending;
                            // A retried task goes ahead of never-started ones.
                            self.pending.push_front(key);
                        }
                    }
                }
            }
            Input::Tick => {
                let lapsed: Vec<AttemptId> = self
                    .live
                    .iter()
                    .filter(|(_, l)| {
                        l.place != Place::Local && (now_ms >= l.renew_by || now_ms >= l.hard)
                    })
                    .map(|(a, _)| *a)
                    .collect();
                for attempt in lapsed {
                    if let Some(l) = self.take_live(attempt) {
                        let node = l.place.node().unwrap_or_default().to_string();
                        if let Some(p) = self.peers.get_mut(&node) {
                            p.avoid_until = now_ms + self.params.lapsed_avoid_ms;
                        }
                        out.push(Command::Stop {
                            attempt,
                            place: l.place.clone(),
                        });
                        self.fail(
                            now_ms,
                            attempt,
                            l,
                            "lease_expired",
                            format!(
                                "attempt lease lapsed on node {node}: no result or renewal in time"
                            ),
                            true,
                            &mut out,
                        );
                    }
                }
            }
            Input::StopAll { class, reason } => {
                if self.stopped.is_none() {
                    self.stopped = Some((class, reason));
                    self.pending.clear();
                    let live: Vec<AttemptId> = self.live.keys().copied().collect();
                    for attempt in live {
                        if let Some(l) = self.take_live(attempt) {
                            out.push(Command::Stop {
                                attempt,
                                place: l.place,
                            });
                        }
                    }
                    self.fail_unfinished(&mut out);
                }
            }
        }
        self.pump(now_ms, &mut out);
        out
    }

    /// Every task that has not ended fails with the stop's class; one that never ran is
    /// skipped, silently.
    fn fail_unfinished(&mut self, out: &mut Vec<Command>) {
        let Some((class, reason)) = self.stopped.clone() else {
            return;
        };
        for (key, t) in self.tasks.iter_mut() {
            if !t.status.is_terminal() && t.started == 0 {
                t.status = TaskStatus::Skipped;
            } else if !t.status.is_terminal() {
                t.status = TaskStatus::Failed;
                t.error_classes.push(class.clone());
                t.last_error = Some(reason.clone());
                out.push(Command::Failed {
                    attempt: 0,
                    key: *key,
                    class: class.clone(),
                    message: reason.clone(),
                    terminal: Some(TaskStatus::Failed),
                });
            }
        }
    }

    fn take_live(&mut self, attempt: AttemptId) -> Option<Live> {
        let l = self.live.remove(&attempt)?;
        match &l.place {
            Place::Local => self.local_live = self.local_live.saturating_sub(1),
            Place::Peer(n) => {
                if let Some(p) = self.peers.get_mut(n) {
                    p.live = p.live.saturating_sub(1);
                }
            }
        }
        Some(l)
    }

    #[allow(clippy::too_many_arguments)]
    fn fail(
        &mut self,
        now_ms: u64,
        attempt: AttemptId,
        l: Live,
        class: &str,
        message: String,
        retryable: bool,
        out: &mut Vec<Command>,
    ) {
        let p = &self.params;
        let Some(t) = self.tasks.get_mut(&l.key) else {
            return;
        };
        if PLACEMENT_CLASSES.contains(&class) && t.handed_back < p.max_handbacks {
            t.handed_back += 1;
            t.status = TaskStatus::Pending;
            self.pending.push_front(l.key);
            out.push(Command::HandedBack {
                attempt,
                key: l.key,
                class: class.to_string(),
                message,
            });
            return;
        }
        t.error_classes.push(class.to_string());
        t.last_error = Some(message.clone());
        let repeats = p.circular_fix_repeats.max(2) as usize;
        let n = t.error_classes.len();
        let circular = OUTPUT_CLASSES.contains(&class)
            && n >= repeats
            && t.error_classes[n - repeats..].iter().all(|c| c == class);
        let budget = if t.stage {
            p.stage_attempts
        } else {
            p.task_attempts
        };
        let terminal = if circular {
            Some(TaskStatus::CircularFix)
        } else if retryable && t.charged() < budget && self.stopped.is_none() {
            None
        } else {
            Some(TaskStatus::Failed)
        };
        match terminal {
            Some(s) => t.status = s,
            None => {
                t.status = TaskStatus::Backoff;
                let exp = p.backoff_base_ms.saturating_mul(1 << t.charged().min(6));
                self.jitter = splitmix(self.jitter);
                let jitter = self.jitter % (exp / 2 + 1);
                out.push(Command::RetryAfter {
                    key: l.key,
                    delay_ms: exp.saturating_add(jitter).min(p.backoff_cap_ms),
                });
            }
        }
        let _ = now_ms;
        out.push(Command::Failed {
            attempt,
            key: l.key,
            class: class.to_string(),
            message,
            terminal,
        });
    }

    /// Where the next attempt of `key` goes: the least-loaded place with room among its
    /// preferred places if one has room, else among all; ties go to this node, whose pack
    /// needs no transfer.
    fn choose(&self, now_ms: u64, key: TaskKey, placeable: bool) -> Option<Place> {
        let cap = self.params.local_capacity.max(1);
        let mut open: Vec<(f64, Place)> = Vec::new();
        if self.local_live < cap {
            open.push((self.local_live as f64 / cap as f64, Place::Local));
        }
        if placeable {
            for (node, p) in &self.peers {
                if p.draining || p.capacity == 0 || p.live >= p.capacity || now_ms < p.avoid_until {
                    continue;
                }
                open.push((p.live as f64 / p.capacity as f64, Place::Peer(node.clone())));
            }
        }
        let least = |among: &mut dyn Iterator<Item = &(f64, Place)>| {
            let mut best: Option<&(f64, Place)> = None;
            for c in among {
                if best.is_none_or(|(b, _)| c.0 < *b) {
                    best = Some(c);
                }
            }
            best.map(|(_, place)| place.clone())
        };
        if let Some(preferred) = self.prefer.get(&key) {
            let mut wanted = open.iter().filter(|(_, p)| preferred.contains(p));
            if let Some(place) = least(&mut wanted) {
                return Some(place);
            }
        }
        least(&mut open.iter())
    }

    fn pump(&mut self, now_ms: u64, out: &mut Vec<Command>) {
        if self.stopped.is_some() {
            return;
        }
        let mut deferred = VecDeque::new();
        while let Some(key) = self.pending.pop_front() {
            let Some(t) = self.tasks.get(&key) else {
                continue;
            };
            if t.status != TaskStatus::Pending {
                continue;
            }
            let place = self.choose(now_ms, key, t.placeable);
            let Some(place) = place else {
                // Nowhere has room: keep it (and everything behind it) queued, in order.
                deferred.push_back(key);
                deferred.extend(self.pending.drain(..));
                break;
            };
            self.seq += 1;
            let attempt = (self.epoch << 40) | self.seq;
            let Some(t) = self.tasks.get_mut(&key) else {
                continue;
            };
            t.status = TaskStatus::Running;
            t.started += 1;
            let attempt_no = t.started;
            match &place {
                Place::Local => self.local_live += 1,
                Place::Peer(n) => {
                    if let Some(p) = self.peers.get_mut(n) {
                        p.live += 1;
                    }
                }
            }
            self.live.insert(
                attempt,
                Live {
                    key,
                    place: place.clone(),
                    renew_by: now_ms.saturating_add(self.params.lease_ms),
                    hard: now_ms
                        .saturating_add(self.params.lease_ms)
                        .saturating_add(self.params.attempt_ms),
                },
            );
            out.push(Command::Start {
                attempt,
                key,
                place,
                attempt_no,
            });
        }
        self.pending = deferred;
    }
}

/// One step of splitmix64: a tiny, well-mixed generator for the backoff jitter.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched() -> Scheduler {
        Scheduler::new(
            SchedulerParams {
                local_capacity: 1,
                lease_ms: 100,
                ..SchedulerParams::default()
            },
            1,
            7,
        )
    }

    fn starts(cmds: &[Command]) -> Vec<(AttemptId, TaskKey, Place)> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::Start {
                    attempt,
                    key,
                    place,
                    ..
                } => Some((*attempt, *key, place.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn least_loaded_place_wins_and_ties_stay_local() {
        let mut s = sched();
        s.step(
            0,
            Input::PeerUp {
                node: "p".into(),
                capacity: 2,
            },
        );
        let mut placed = Vec::new();
        for key in 0..3 {
            placed.extend(starts(&s.step(
                0,
                Input::AddTask {
                    key,
                    stage: false,
                    placeable: true,
                },
            )));
        }
        let places: Vec<Place> = placed.into_iter().map(|(_, _, p)| p).collect();
        assert_eq!(
            places,
            vec![
                Place::Local,
                Place::Peer("p".into()),
                Place::Peer("p".into())
            ]
        );
    }

    #[test]
    fn a_preferred_place_wins_while_it_has_room_and_never_holds_a_task_back() {
        let mut s = Scheduler::new(
            SchedulerParams {
                local_capacity: 2,
                lease_ms: 100,
                ..SchedulerParams::default()
            },
            1,
            7,
        );
        for (node, capacity) in [("a", 2), ("b", 1)] {
            s.step(
                0,
                Input::PeerUp {
                    node: node.into(),
                    capacity,
                },
            );
        }
        let mut placed = Vec::new();
        for key in 0..3 {
            s.step(
                0,
                Input::Prefer {
                    key,
                    places: vec![Place::Peer("b".into())],
                },
            );
            placed.extend(starts(&s.step(
                0,
                Input::AddTask {
                    key,
                    stage: false,
                    placeable: true,
                },
            )));
        }
        let places: Vec<Place> = placed.into_iter().map(|(_, _, p)| p).collect();
        // b has one slot: the first task takes it although this node is idle; the rest go
        // where there is room (least loaded, ties local) instead of waiting for b.
        assert_eq!(
            places,
            vec![
                Place::Peer("b".into()),
                Place::Local,
                Place::Peer("a".into())
            ]
        );
    }

    #[test]
    fn a_draining_peer_is_never_chosen_and_a_refusal_costs_nothing() {
        let mut s = sched();
        s.step(
            0,
            Input::PeerUp {
                node: "d".into(),
                capacity: 4,
            },
        );
        let first = starts(&s.step(
            0,
            Input::AddTask {
                key: 0,
                stage: false,
                placeable: true,
            },
        ));
        let second = starts(&s.step(
            0,
            Input::AddTask {
                key: 1,
                stage: false,
                placeable: true,
            },
        ));
        assert_eq!(first[0].2, Place::Local);
        let (a, _, p) = second[0].clone();
        assert_eq!(p, Place::Peer("d".into()));
        s.step(0, Input::PeerDraining { node: "d".into() });
        let cmds = s.step(
            1,
            Input::Outcome {
                attempt: a,
                from: p,
                result: AttemptResult::Failure {
                    class: "refused".into(),
                    message: "draining".into(),
                    retryable: true,
                },
            },
        );
        assert!(cmds.iter().any(|c| matches!(c, Command::HandedBack { .. })));
        assert!(starts(&cmds).is_empty(), "re-placed on the draining node");
        assert_eq!(s.task(1).unwrap().charged(), 0);
    }

    #[test]
    fn results_count_only_from_the_placed_node_and_only_once() {
        let mut s = sched();
        s.step(
            0,
            Input::PeerUp {
                node: "p".into(),
                capacity: 1,
            },
        );
        s.step(
            0,
            Input::AddTask {
                key: 0,
                stage: false,
                placeable: true,
            },
        );
        let st = starts(&s.step(
            0,
            Input::AddTask {
                key: 1,
                stage: false,
                placeable: true,
            },
        ));
        let (a, _, p) = st[0].clone();
        let forged = s.step(
            1,
            Input::Outcome {
                attempt: a,
                from: Place::Peer("m".into()),
                result: AttemptResult::Success,
            },
        );
        assert!(matches!(forged[0], Command::Ignored { .. }));
        let ok = s.step(
            2,
            Input::Outcome {
                attempt: a,
                from: p.clone(),
                result: AttemptResult::Success,
            },
        );
        assert!(matches!(ok[0], Command::Succeeded { .. }));
        let dup = s.step(
            3,
            Input::Outcome {
                attempt: a,
                from: p,
                result: AttemptResult::Success,
            },
        );
        assert!(matches!(dup[0], Command::Ignored { .. }));
    }

    #[test]
    fn an_adopted_attempt_counts_its_result_starts_nothing_and_keeps_its_lease() {
        // Epoch 2 adopts attempt 5 of epoch 1, still running on p.
        let mut s = Scheduler::new(
            SchedulerParams {
                local_capacity: 1,
                lease_ms: 100,
                ..SchedulerParams::default()
            },
            2,
            7,
        );
        let old = (1 << 40) | 5;
        let cmds = s.step(
            0,
            Input::Adopt {
                key: 0,
                attempt: old,
                node: "p".into(),
            },
        );
        assert!(starts(&cmds).is_empty(), "{cmds:?}");
        assert_eq!(s.task(0).unwrap().status, TaskStatus::Running);
        assert_eq!(s.peer_load("p"), 1);
        // Its worker renews; the lease holds past the first deadline.
        s.step(
            80,
            Input::Renew {
                attempt: old,
                from: "p".into(),
            },
        );
        assert!(s.step(150, Input::Tick).is_empty());
        // Only p's word counts, and it completes the task with one attempt charged.
        let wrong = s.step(
            160,
            Input::Outcome {
                attempt: old,
                from: Place::Peer("q".into()),
                result: AttemptResult::Success,
            },
        );
        assert!(matches!(wrong[..], [Command::Ignored { .. }]), "{wrong:?}");
        let cmds = s.step(
            170,
            Input::Outcome {
                attempt: old,
                from: Place::Peer("p".into()),
                result: AttemptResult::Success,
            },
        );
        assert!(
            matches!(cmds[..], [Command::Succeeded { attempt, key: 0 }] if attempt == old),
            "{cmds:?}"
        );
        assert_eq!(s.task(0).unwrap().charged(), 1);

        // An adopted attempt whose worker goes silent is fenced and placed again like any other;
        // a second claim on a known task changes nothing.
        let other = (1 << 40) | 6;
        s.step(
            200,
            Input::Adopt {
                key: 1,
                attempt: other,
                node: "p".into(),
            },
        );
        assert!(s
            .step(
                200,
                Input::Adopt {
                    key: 1,
                    attempt: (1 << 40) | 7,
                    node: "q".into()
                }
            )
            .is_empty());
        let cmds = s.step(301, Input::Tick);
        assert!(cmds
            .iter()
            .any(|c| matches!(c, Command::HandedBack { attempt, class, .. } if *attempt == other && class == "lease_expired")));
        assert_eq!(starts(&cmds).len(), 1, "re-placed: {cmds:?}");
    }

    #[test]
    fn a_lapsed_lease_is_fenced_and_re_placed_elsewhere() {
        let mut s = sched();
        s.step(
            0,
            Input::PeerUp {
                node: "p".into(),
                capacity: 1,
            },
        );
        s.step(
            0,
            Input::AddTask {
                key: 0,
                stage: false,
                placeable: true,
            },
        );
        let st = starts(&s.step(
            0,
            Input::AddTask {
                key: 1,
                stage: false,
                placeable: true,
            },
        ));
        let (a, _, _) = st[0].clone();
        s.step(
            50,
            Input::Renew {
                attempt: a,
                from: "p".into(),
            },
        );
        assert!(s.step(120, Input::Tick).is_empty(), "renewed lease lapsed");
        let cmds = s.step(151, Input::Tick);
        assert!(cmds
            .iter()
            .any(|c| matches!(c, Command::Stop { attempt, .. } if *attempt == a)));
        assert!(cmds
            .iter()
            .any(|c| matches!(c, Command::HandedBack { class, .. } if class == "lease_expired")));
    }

    #[test]
    fn the_same_output_error_twice_is_circular_and_infrastructure_errors_are_not() {
        for (class, want) in [
            ("malformed_output", TaskStatus::CircularFix),
            ("timeout", TaskStatus::Failed),
        ] {
            let mut s = sched();
            let mut st = starts(&s.step(
                0,
                Input::AddTask {
                    key: 0,
                    stage: false,
                    placeable: false,
                },
            ));
            let mut now = 0;
            loop {
                let (a, _, p) = st[0].clone();
                now += 1;
                let cmds = s.step(
                    now,
                    Input::Outcome {
                        attempt: a,
                        from: p,
                        result: AttemptResult::Failure {
                            class: class.into(),
                            message: "x".into(),
                            retryable: true,
                        },
                    },
                );
                if s.task(0).unwrap().status.is_terminal() {
                    break;
                }
                assert!(cmds.iter().any(|c| matches!(c, Command::RetryAfter { .. })));
                st = starts(&s.step(now + 1, Input::RetryDue { key: 0 }));
            }
            let t = s.task(0).unwrap();
            assert_eq!(t.status, want, "{class}");
            let expected = if want == TaskStatus::CircularFix {
                2
            } else {
                3
            };
            assert_eq!(t.charged(), expected, "{class}");
        }
    }

    #[test]
    fn a_stage_goes_to_a_peer_when_this_node_is_full() {
        let mut s = sched();
        s.step(
            0,
            Input::PeerUp {
                node: "p".into(),
                capacity: 1,
            },
        );
        let first = starts(&s.step(
            0,
            Input::AddTask {
                key: 0,
                stage: false,
                placeable: true,
            },
        ));
        assert_eq!(first[0].2, Place::Local);
        let stage = starts(&s.step(
            0,
            Input::AddTask {
                key: 1,
                stage: true,
                placeable: true,
            },
        ));
        assert_eq!(stage[0].2, Place::Peer("p".into()));
        // Without peers to place on, a stage waits for room here.
        let mut alone = sched();
        alone.step(
            0,
            Input::AddTask {
                key: 0,
                stage: false,
                placeable: false,
            },
        );
        assert!(starts(&alone.step(
            0,
            Input::AddTask {
                key: 1,
                stage: true,
                placeable: false
            }
        ))
        .is_empty());
    }

    #[test]
    fn attempt_ids_carry_the_epoch() {
        let mut s = Scheduler::new(SchedulerParams::default(), 3, 1);
        let st = starts(&s.step(
            0,
            Input::AddTask {
                key: 0,
                stage: true,
                placeable: false,
            },
        ));
        assert_eq!(Scheduler::epoch_of(st[0].0), 3);
    }
}
