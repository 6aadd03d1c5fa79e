//! `ReviewMachine::step`: one event in, the commands it implies out.

use crate::machine::attempts::result_of;
use crate::machine::fact::{AttemptRecord, Fact};
use crate::machine::protocol::{AttemptClaim, Command, Event, Level, Timer};
use crate::machine::replay::Replay;
use crate::machine::schedule::Input;
use crate::machine::state::{Phase, ReviewMachine};

impl ReviewMachine {
    /// Take one event at `now_ms` and return what the driver must do, in order. Deterministic:
    /// the same events at the same times give the same commands. After the review ended every
    /// event is answered with nothing.
    pub fn step(&mut self, now_ms: u64, event: Event) -> Vec<Command> {
        self.now = now_ms;
        if self.is_done() {
            if let Event::StoreFailed { reason } = event {
                // The finish itself could not be stored: what the driver did not hand over is
                // handed over failed, saying why.
                self.store_failed_at_finish(reason);
            }
            return std::mem::take(&mut self.out);
        }
        match event {
            Event::Start => self.start(None),
            Event::Resume {
                replay,
                attempts,
                claims,
            } => self.start(Some((*replay, attempts, claims))),
            Event::Peers(offers) => self.sync_peers(offers),
            Event::NodeLost { node } => {
                let affected = self
                    .sched
                    .live()
                    .filter(|(_, _, p)| p.node() == Some(node.as_str()))
                    .count();
                if affected > 0 {
                    self.log(
                        Level::Warn,
                        format!("node {node} lost; reassigning its {affected} attempts"),
                    );
                    self.note(format!("node {node} lost; {affected} attempts reassigned"));
                }
                self.feed(Input::PeerLost { node }, None);
            }
            Event::NodeJoined { node } => {
                self.note(format!("node {node} joined"));
                self.feed(Input::Tick, None);
            }
            Event::Outcome {
                attempt,
                from,
                outcome,
            } => {
                let result = result_of(&outcome);
                self.feed(
                    Input::Outcome {
                        attempt,
                        from,
                        result,
                    },
                    Some(outcome),
                );
                self.check_budget();
            }
            Event::ModelChosen {
                attempt,
                model,
                replaced,
            } => self.model_chosen(attempt, model, replaced),
            Event::SendFailed { attempt } => self.feed(Input::SendFailed { attempt }, None),
            Event::Renew { attempt, from } => self.feed(Input::Renew { attempt, from }, None),
            Event::Timer(Timer::Retry { key }) => self.feed(Input::RetryDue { key }, None),
            Event::Timer(Timer::WallBudget) => {
                let secs = self.review.flow.parameters.max_wall_secs;
                self.spend_budget(format!("wall-time budget spent ({secs}s)"));
            }
            Event::Timer(Timer::LeaseTick) => {
                self.feed(Input::Tick, None);
                self.arm_lease_tick();
            }
            Event::Cancel { reason } => self.cancel(reason),
            Event::RoundFilesChosen {
                round,
                answer,
                stats,
            } => self.round_files_chosen(round, answer, stats),
            Event::StoreFailed { reason } => self.store_failed(reason),
        }
        std::mem::take(&mut self.out)
    }

    /// Begin (or, with the recorded facts, continue) the review: its timers, then the first
    /// phase it has not done.
    fn start(&mut self, resume: Option<(Replay, Vec<AttemptRecord>, Vec<AttemptClaim>)>) {
        if self.started_ms.is_some() {
            return;
        }
        self.started_ms = Some(self.now);
        let wall = self.review.flow.parameters.max_wall_secs;
        if wall > 0 {
            self.out.push(Command::After {
                ms: wall.saturating_mul(1000),
                timer: Timer::WallBudget,
            });
        }
        self.arm_lease_tick();
        if let Some((replay, attempts, claims)) = resume {
            return self.resume(replay, attempts, claims);
        }
        self.record(Fact::FlowStarted {
            flow_id: self.review.flow_id.clone(),
        });
        if self.review.pack.is_empty() {
            // Nothing to review is a completed review that says so, with no model call.
            self.log(Level::Info, "target holds no reviewable files".to_string());
            return self.finish();
        }
        self.start_phase(Phase::Scout);
    }

    /// Leases on remote attempts are checked a few times per lease.
    fn arm_lease_tick(&mut self) {
        if self.config.remote {
            self.out.push(Command::After {
                ms: (self.config.lease_ms / 4).max(50),
                timer: Timer::LeaseTick,
            });
        }
    }
}
