//! Attempts: feeding the scheduling core and carrying out what it decides — starting an attempt
//! (its fact, its progress, its job), stopping one, a retry's timer, and what a counted success,
//! a charged failure, a hand-back or an ignored result mean for the run.

use crate::machine::fact::{AttemptRecord, Fact};
use crate::machine::job::{AttemptOutcome, AttemptStats, Job};
use crate::machine::limits::deadline_ms;
use crate::machine::progress::Progress;
use crate::machine::protocol::{Command, Level, Metric, PeerOffer, Timer};
use crate::machine::run::{TaskRun, TaskState};
use crate::machine::schedule::{
    AttemptId, AttemptResult, Command as Sched, Input, Place, TaskKey, TaskStatus,
};
use crate::machine::state::{Phase, ReviewMachine};
use crate::memory::{self, Insight, Offered, Provenance};
use crate::review::finding::RawFinding;
use std::collections::VecDeque;

/// The team board topic the machine publishes teammates' insights under.
pub const INSIGHTS_TOPIC: &str = "insights";

fn task_state(s: TaskStatus) -> TaskState {
    match s {
        TaskStatus::Pending => TaskState::Pending,
        TaskStatus::Running => TaskState::Running,
        TaskStatus::Backoff => TaskState::Backoff,
        TaskStatus::Completed => TaskState::Completed,
        TaskStatus::Failed => TaskState::Failed,
        TaskStatus::CircularFix => TaskState::CircularFix,
        // Reported as "skipped".
        TaskStatus::Skipped => TaskState::Pending,
    }
}

/// What the scheduler needs to know of an outcome.
pub(super) fn result_of(outcome: &AttemptOutcome) -> AttemptResult {
    match outcome {
        Ok(_) => AttemptResult::Success,
        Err(f) => AttemptResult::Failure {
            class: f.class.clone(),
            message: f.message.clone(),
            retryable: f.retryable,
        },
    }
}

impl ReviewMachine {
    /// Feed the scheduler an event and carry out what it decides, then move the review on.
    /// `outcome` is the attempt's outcome when the event is that attempt's result.
    pub(super) fn feed(&mut self, input: Input, outcome: Option<AttemptOutcome>) {
        let mut queue = VecDeque::from([(input, outcome)]);
        while let Some((input, mut outcome)) = queue.pop_front() {
            for c in self.sched.step(self.now, input) {
                self.apply(c, &mut outcome);
            }
        }
        self.advance();
    }

    fn apply(&mut self, cmd: Sched, outcome: &mut Option<AttemptOutcome>) {
        match cmd {
            Sched::Start {
                attempt,
                key,
                place,
                attempt_no,
            } => self.start_attempt(attempt, key, place, attempt_no),
            Sched::Stop { attempt, place } => self.out.push(Command::Stop { attempt, place }),
            Sched::RetryAfter { key, delay_ms } => self.out.push(Command::After {
                ms: delay_ms,
                timer: Timer::Retry { key },
            }),
            Sched::Succeeded { attempt, key } => match outcome.take() {
                Some(Ok(o)) => self.succeeded(key, attempt, o),
                _ => self.log(
                    Level::Error,
                    format!("attempt {attempt}: a success without its outcome"),
                ),
            },
            Sched::Failed {
                attempt,
                key,
                class,
                message,
                terminal,
            } => self.failed(key, attempt, &class, &message, terminal),
            Sched::HandedBack {
                attempt,
                key,
                class,
                message,
            } => {
                self.out
                    .push(Command::Count(Metric::Fenced(match class.as_str() {
                        "lease_expired" => "lease_lapsed",
                        "node_lost" => "node_lost",
                        _ => "refused",
                    })));
                let r = &mut self.runs[key];
                r.handed_back += 1;
                r.state = TaskState::Pending;
                let (id, n) = (r.id.clone(), r.attempts);
                self.log(
                    Level::Warn,
                    format!("attempt {attempt} of {id} handed back ({class}); placing it again"),
                );
                self.record(Fact::AttemptFailed {
                    task_id: id,
                    attempt: n,
                    error_class: class,
                    error: message,
                });
            }
            Sched::Ignored { attempt, from, why } => {
                self.out.push(Command::Count(Metric::Fenced(
                    if why.starts_with("from a node") {
                        "wrong_node"
                    } else {
                        "late_result"
                    },
                )));
                let from = from.node().unwrap_or(&self.review.node).to_string();
                self.log(
                    Level::Info,
                    format!("result of attempt {attempt} from {from} not counted: {why}"),
                );
                self.note(format!(
                    "result of attempt {attempt} from {from} ignored: {why}"
                ));
            }
        }
    }

    /// Start: record it, say so, and hand the driver the job to run here or ship.
    fn start_attempt(&mut self, attempt: AttemptId, key: TaskKey, place: Place, attempt_no: u32) {
        let node = place
            .node()
            .map(str::to_string)
            .unwrap_or_else(|| self.review.node.clone());
        let now = self.now;
        let r = &mut self.runs[key];
        r.attempts = r.resumed_attempts + attempt_no;
        r.state = TaskState::Running;
        r.node = node.clone();
        r.started_ms.get_or_insert(now);
        let (id, persona, n) = (r.id.clone(), r.persona.clone(), r.attempts);
        // The start is a fact like any other: a driver that cannot store it (or whose control
        // plane refused it) never runs the attempt.
        self.record(Fact::AttemptStarted {
            task_id: id.clone(),
            attempt: n,
            node: node.clone(),
        });
        if self.runs[key].task.is_some() || self.found.verify.is_some() {
            self.out.push(Command::Count(Metric::Placed {
                remote: place != Place::Local,
            }));
        }
        let model = self.runs[key].model.clone();
        self.emit(Progress::TaskStarted {
            task: id,
            persona,
            attempt: n,
            node,
            model,
        });
        let job = self.job_of(key);
        let deadline_ms = deadline_ms(&self.review, &job);
        self.out.push(Command::Start {
            attempt,
            key,
            place,
            job: Box::new(job),
            deadline_ms,
        });
    }

    /// The job run `key` does now.
    fn job_of(&mut self, key: TaskKey) -> Job {
        if let Some(batch) = self.found.verify.as_ref().and_then(|v| v.batch(key)) {
            return Job::Verify {
                reported: batch,
                grounding_only: false,
            };
        }
        if let Some(criteria) = self.conformance.round.as_ref().and_then(|r| r.batch(key)) {
            return Job::Conformance { criteria };
        }
        if let Some(findings) = self.adjudication.round.as_ref().and_then(|r| r.batch(key)) {
            return Job::Adjudicate { findings };
        }
        if let Some(job) = self.panel_job(key) {
            return job;
        }
        let prior_error = self.runs[key].last_error.clone();
        let insights = self.insights_for(key);
        match self.runs[key].task.clone() {
            Some(task) => Job::Specialist {
                task,
                prior_error,
                insights,
            },
            None => self.stage_job(),
        }
    }

    /// A driver chose the model a local specialist attempt runs on.
    pub(super) fn model_chosen(&mut self, attempt: AttemptId, model: String, old: Option<String>) {
        let Some(key) = self
            .sched
            .live()
            .find(|(a, _, _)| *a == attempt)
            .map(|(_, k, _)| k)
        else {
            return;
        };
        let r = &mut self.runs[key];
        if let Some(old) = old {
            r.notes
                .push(format!("planner model {old:?} replaced by {model}"));
        }
        r.model = model;
    }

    /// The teammates' insights a specialist task's prompt carries: what it was offered
    /// before, else the review's top-k so far from other tasks, recorded before use. None
    /// for stage runs, with memory off, or while no other task left any.
    fn insights_for(&mut self, key: TaskKey) -> Vec<Offered> {
        let (Some(task), Some(mem)) = (&self.runs[key].task, &self.review.scope.memory) else {
            return Vec::new();
        };
        if let Some(offered) = self.memory.offered.get(&task.id) {
            return offered.clone();
        }
        let others: Vec<Insight> = self
            .memory
            .insights
            .iter()
            .filter(|i| i.provenance.task_id != task.id)
            .cloned()
            .collect();
        let offered = memory::top_k(&others, self.now, mem.k, mem.base_rate);
        if offered.is_empty() {
            return offered;
        }
        let task_id = task.id.clone();
        self.record(Fact::InsightsOffered {
            task_id: task_id.clone(),
            insights: offered.clone(),
        });
        self.memory.offered.insert(task_id, offered.clone());
        offered
    }

    /// A completed specialist task's grounded findings become insights for the tasks that
    /// start after it, and notes on the team board's `insights` topic, so a teammate on
    /// another node can read them too.
    pub(super) fn learn(&mut self, task_id: &str, persona: &str, findings: &[RawFinding]) {
        let Some(mem) = &self.review.scope.memory else {
            return;
        };
        if findings.is_empty() || self.memory.insights.len() >= memory::PER_REVIEW {
            return;
        }
        let provenance = Provenance {
            flow_id: self.review.flow_id.clone(),
            task_id: task_id.to_string(),
            persona: persona.to_string(),
            findings: Vec::new(),
            target: mem.repository.clone(),
            created_ms: self.now,
        };
        let room = memory::PER_REVIEW - self.memory.insights.len();
        // The same issue reported again (a later round re-reading the files) is known already.
        let learned: Vec<Insight> = memory::distill_task(
            findings,
            &self.review.pack,
            &provenance,
            &self.memory.insights,
        )
        .into_iter()
        .take(room)
        .collect();
        for i in &learned {
            self.out.push(Command::Publish {
                persona: persona.to_string(),
                topic: INSIGHTS_TOPIC.to_string(),
                body: format!("{}: {}", i.title, i.content),
            });
        }
        self.memory.insights.extend(learned);
    }

    /// The full record of one attempt, for the store (and trace export).
    pub(super) fn attempt_record(
        &self,
        key: TaskKey,
        model: &str,
        stats: &AttemptStats,
        iterations: u32,
        error: Option<(&str, &str)>,
    ) -> AttemptRecord {
        let r = &self.runs[key];
        AttemptRecord {
            task_id: r.id.clone(),
            attempt: r.attempts,
            persona: r.persona.clone(),
            model: model.to_string(),
            // The driver knows which backend serves the model.
            backend: String::new(),
            node: if r.node.is_empty() {
                self.review.node.clone()
            } else {
                r.node.clone()
            },
            prompt_hash: stats.prompt_hash.clone(),
            output: stats.output.clone(),
            iterations,
            tokens_in: stats.tokens_in,
            tokens_out: stats.tokens_out,
            started_ms: self.now.saturating_sub(r.duration_ms),
            ended_ms: self.now,
            error_class: error.map(|(c, _)| c.to_string()),
            error: error.map(|(_, m)| m.to_string()),
            transcript: serde_json::Value::Array(stats.transcript.clone()),
            reused_from: stats.reused_from.clone(),
            cache: stats.cache.clone(),
        }
    }

    /// Record an attempt charged to its task; a task that will not run again ends its stage's
    /// part in the review (fallback, failure or partial).
    fn failed(
        &mut self,
        key: TaskKey,
        attempt: AttemptId,
        class: &str,
        message: &str,
        terminal: Option<TaskStatus>,
    ) {
        let now = self.now;
        let r = &mut self.runs[key];
        r.duration_ms = r.elapsed(now);
        r.error_classes.push(class.to_string());
        r.last_error = Some(message.to_string());
        if message.contains(crate::machine::run::CUT_MARKER) {
            r.cuts += 1;
        }
        r.state = terminal.map(task_state).unwrap_or(TaskState::Backoff);
        let is_specialist = r.task.is_some();
        if is_specialist && !r.model.is_empty() {
            self.out.push(Command::LearnModel {
                model: r.model.clone(),
                persona: r.persona.clone(),
                ok: false,
                tokens_in: 0,
                tokens_out: 0,
                duration_ms: r.duration_ms,
            });
        }
        let (id, persona, model, n) = {
            let r = &self.runs[key];
            (r.id.clone(), r.persona.clone(), r.model.clone(), r.attempts)
        };
        self.log(
            Level::Warn,
            format!("attempt {n} of {id} failed ({class}): {message}"),
        );
        // attempt 0: a task the stop ended before it ran again; no attempt to record.
        if attempt != 0 {
            self.record(Fact::AttemptFailed {
                task_id: id.clone(),
                attempt: n,
                error_class: class.to_string(),
                error: message.to_string(),
            });
            let record = self.attempt_record(
                key,
                &model,
                &AttemptStats::default(),
                0,
                Some((class, message)),
            );
            self.out.push(Command::RecordAttempt(Box::new(record)));
        }
        if let Some(end) = terminal {
            let reason = match end {
                TaskStatus::CircularFix => format!(
                    "circular_fix: {class} failed the same way {} times in a row",
                    self.review.flow.parameters.circular_fix_repeats
                ),
                _ => format!("{class}: {message}"),
            };
            self.record(Fact::TaskAbandoned {
                task_id: id.clone(),
                reason,
            });
        }
        self.emit(Progress::TaskFinished {
            task: id,
            persona,
            ok: false,
            findings: 0,
            error: Some(message.to_string()),
            error_class: Some(class.to_string()),
            model,
            tokens_in: 0,
            tokens_out: 0,
        });
        if terminal.is_none() {
            return;
        }
        if let Some(v) = self.found.verify.as_mut() {
            if v.batch(key).is_some() {
                // A batch that could not be verified leaves its findings UNVERIFIED, with the
                // reason; the review goes on.
                v.give_up(key, message);
                return;
            }
        }
        if self
            .conformance
            .round
            .as_ref()
            .is_some_and(|r| r.batch(key).is_some())
        {
            // Criteria whose batch could not be judged stay unmet, not judged, with the
            // reason; nothing is recorded for them, so a resume judges them again.
            self.conformance_gave_up(key, message);
            return;
        }
        if self
            .adjudication
            .round
            .as_ref()
            .is_some_and(|r| r.batch(key).is_some())
        {
            // Prior findings whose batch could not be ruled on count as standing, not judged;
            // nothing is recorded for them, so a resume rules on them again.
            self.adjudication_gave_up(key, message);
            return;
        }
        if self.panel.round.as_ref().is_some_and(|r| r.has(key)) {
            // The panel fails open: a judge that gave no score is listed and not counted, a
            // meta-judge that gave no verdict leaves it to the rule; the review goes on.
            self.panel_gave_up(key, message);
            return;
        }
        if !is_specialist && !self.sched.stopped() {
            self.after_final_failure(message.to_string());
        }
    }

    /// Tell the scheduler which peers can take work now: new ones and changed capacities are
    /// up, peers no longer offered (draining, full, gone) are not chosen.
    pub(super) fn sync_peers(&mut self, offered: Vec<PeerOffer>) {
        let known: Vec<String> = self.sched.peers().map(str::to_string).collect();
        for node in known {
            if self.sched.peer_offer(&node).is_some() && !offered.iter().any(|p| p.node == node) {
                self.feed(Input::PeerDraining { node }, None);
            }
        }
        for p in &offered {
            let now = self.sched.peer_offer(&p.node);
            if now != Some(p.capacity) && !(p.capacity == 0 && now.is_none()) {
                let input = if p.capacity == 0 {
                    Input::PeerDraining {
                        node: p.node.clone(),
                    }
                } else {
                    Input::PeerUp {
                        node: p.node.clone(),
                        capacity: p.capacity,
                    }
                };
                self.feed(input, None);
            }
        }
        self.peers = offered;
    }

    /// Hand runs to the scheduler as tasks (specialist tasks, verification batches), placeable
    /// on peers when the review has any.
    pub(super) fn add_tasks(&mut self, keys: Vec<TaskKey>) {
        let placeable = self.config.remote;
        self.add_tasks_placed(keys, placeable);
    }

    /// `add_tasks`, choosing whether the runs may go to peers.
    pub(super) fn add_tasks_placed(&mut self, keys: Vec<TaskKey>, placeable: bool) {
        for key in keys {
            self.feed(
                Input::AddTask {
                    key,
                    stage: false,
                    placeable,
                },
                None,
            );
        }
    }

    /// Add one stage run (scout, planner, synthesizer, criteria) to the scheduler.
    pub(super) fn add_stage_run(&mut self, name: &str, placeable: bool) {
        let key = self.add_run(TaskRun::stage(name));
        self.feed(
            Input::AddTask {
                key,
                stage: true,
                placeable,
            },
            None,
        );
    }

    /// Split `items` into stage runs of at most `size` (at least 1) named `name`, or `name-1`,
    /// `name-2`, … when there are several; each run's key with its items, in order.
    pub(super) fn stage_batches<T: Clone>(
        &mut self,
        items: &[T],
        size: usize,
        name: &str,
    ) -> Vec<(TaskKey, Vec<T>)> {
        let chunks: Vec<&[T]> = items.chunks(size.max(1)).collect();
        let n = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(k, chunk)| {
                let run = if n == 1 {
                    name.to_string()
                } else {
                    format!("{name}-{}", k + 1)
                };
                (self.add_run(TaskRun::stage(&run)), chunk.to_vec())
            })
            .collect()
    }

    /// Move the review on once a phase's runs have all ended.
    pub(super) fn advance(&mut self) {
        if self.halting {
            return;
        }
        if self.phase == Phase::Specialists && self.found.verify.is_some() {
            // An early lead batch that ended makes room for the next.
            self.release_leads();
        }
        let all_done = self.sched.all_terminal(false);
        match self.phase {
            Phase::Specialists if all_done => {
                // An exhaustive flow's round may be followed by another before verification.
                if self.plan.selecting.is_some() || self.end_round() {
                    return;
                }
                self.start_phase(Phase::Verify);
            }
            Phase::Verify if self.found.verify.is_some() => {
                // A batch that ended may make room for held analyzer leads.
                self.release_leads();
                let verifying = self.phase == Phase::Verify && self.found.verify.is_some();
                if verifying && self.sched.all_terminal(false) {
                    self.verification_done();
                }
            }
            Phase::Conformance if self.conformance.round.is_some() && all_done => {
                self.conformance_finished();
            }
            Phase::Adjudicate if self.adjudication.round.is_some() && all_done => {
                self.adjudication_finished();
            }
            Phase::Panel if self.panel.round.is_some() && all_done => {
                self.panel_step();
            }
            _ => {}
        }
    }
}
