//! FlowConductor: the actor that drives one review's [`ReviewMachine`].
//!
//! Every decision — phase order, what each stage's answer means, placement, leases, fencing,
//! retries, circular fix, budgets, cancel, status — is the machine's (quorum-core, a pure state
//! machine a seeded simulation runs end to end). This actor turns messages into events, feeds
//! them to the machine, and carries out the commands it returns, in order: it stores each fact
//! before anything after it is done, runs jobs in supervised workers or ships them to peers,
//! keeps timers, emits progress, and hands over the report.

use crate::conductor::dispatch::{self, Spawned};
use crate::conductor::msg::ConductorMsg;
use crate::conductor::reuse;
use crate::context::SharedContext;
use crate::facts::{now_ms, FactError, Resume};
use crate::progress::ProgressSender;
use crate::remote::RemoteSlot;
use quorum_core::flows::rounds::NewFinding;
use quorum_core::machine::schedule::{AttemptId, Place};
use quorum_core::machine::{
    Command, Event, Failure, Job, Level, MachineConfig, Metric, Outcome, PeerOffer, ReviewMachine,
    RoundFinding, Timer,
};
use quorum_core::report::Report;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::sync::oneshot;

pub struct FlowConductor;

pub struct ConductorArgs {
    pub ctx: SharedContext,
    pub done: oneshot::Sender<Report>,
    pub progress: Option<ProgressSender>,
    /// Continue from a replayed store instead of starting fresh.
    pub resume: Option<Resume>,
}

pub struct ConductorState {
    ctx: SharedContext,
    machine: ReviewMachine,
    done: Option<oneshot::Sender<Report>>,
    progress: Option<ProgressSender>,
    resume: Option<Resume>,
    /// Live local workers by attempt, so a stop can kill them mid-call, and back.
    workers: HashMap<AttemptId, ActorCell>,
    actors: HashMap<ActorId, AttemptId>,
    /// Specialist attempts keyed for the result cache, until their outcome is recorded.
    keyed: HashMap<AttemptId, reuse::Keyed>,
    /// The store refused a fact and the machine was told: what it asks after that (stop,
    /// finish) is done whether or not its facts are stored.
    store_failed: bool,
}

/// What carrying out one command led to.
enum Next {
    Go,
    /// Feed this event to the machine after the step's other commands.
    Tell(Event),
    /// A fact was not stored: skip the rest of the step (it depended on the fact) and tell
    /// the machine.
    Refused(Event),
    /// The review is over (finished, or this node no longer conducts it).
    Stopped,
}

fn peer_offers(slots: Vec<RemoteSlot>) -> Vec<PeerOffer> {
    slots
        .into_iter()
        .map(|s| PeerOffer {
            node: s.node,
            capacity: s.capacity,
            models: s.models,
        })
        .collect()
}

impl FlowConductor {
    /// Feed the machine `event` and carry out what it decides, and what that leads to.
    async fn feed(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        event: Event,
    ) -> Result<(), ActorProcessingErr> {
        let mut events = VecDeque::from([event]);
        while let Some(event) = events.pop_front() {
            for cmd in state.machine.step(now_ms(), event) {
                match Self::execute(myself, state, cmd).await? {
                    Next::Go => {}
                    Next::Tell(e) => events.push_back(e),
                    Next::Refused(e) => {
                        events.push_back(e);
                        break;
                    }
                    Next::Stopped => return Ok(()),
                }
            }
        }
        Ok(())
    }

    /// Store a fact; a refusal by the control plane means another node conducts the review
    /// now, and this one stops.
    fn stored(
        state: &mut ConductorState,
        result: Result<(), FactError>,
    ) -> Result<Next, ActorProcessingErr> {
        match result {
            Ok(()) => Ok(Next::Go),
            Err(FactError::Fenced(why)) => {
                Err(format!("fenced: another node conducts this review now ({why})").into())
            }
            Err(FactError::Store(_)) if state.store_failed => Ok(Next::Go),
            Err(FactError::Store(why)) => {
                state.store_failed = true;
                Ok(Next::Refused(Event::StoreFailed { reason: why }))
            }
        }
    }

    async fn execute(
        myself: &ActorRef<ConductorMsg>,
        state: &mut ConductorState,
        cmd: Command,
    ) -> Result<Next, ActorProcessingErr> {
        let ctx = state.ctx.clone();
        match cmd {
            Command::Record(fact) => Self::stored(state, ctx.facts.event(fact).await),
            Command::RecordAttempt(mut record) => {
                if record.backend.is_empty() {
                    record.backend = ctx
                        .backends
                        .route(&record.model)
                        .map(|c| c.backend().url().to_string())
                        .unwrap_or_default();
                }
                Self::stored(state, ctx.facts.attempt(*record).await)
            }
            Command::RecordReport(json) => Self::stored(state, ctx.facts.report(json).await),
            Command::Start {
                attempt,
                key,
                place,
                job,
                deadline_ms,
            } => {
                if let Some(reused) = Self::take_recorded(state, attempt, &place, &job).await {
                    return Ok(Next::Tell(reused));
                }
                match place {
                    Place::Local => {
                        let deadline = Duration::from_millis(deadline_ms);
                        match dispatch::run_here(myself, &ctx, attempt, *job, deadline).await? {
                            Ok(Spawned { cell, told }) => {
                                state.actors.insert(cell.get_id(), attempt);
                                state.workers.insert(attempt, cell);
                                Ok(told.map(Next::Tell).unwrap_or(Next::Go))
                            }
                            Err(event) => Ok(Next::Tell(event)),
                        }
                    }
                    Place::Peer(peer) => {
                        let run = &state.machine.runs()[key];
                        let (run_id, number) = (run.id.clone(), run.attempts);
                        let sent =
                            dispatch::ship(&ctx, &peer, attempt, &run_id, number, *job).await;
                        Ok(sent.map(Next::Tell).unwrap_or(Next::Go))
                    }
                }
            }
            Command::Stop { attempt, place } => {
                Self::forget(state, attempt, true);
                state.keyed.remove(&attempt);
                if let Place::Peer(node) = &place {
                    dispatch::stop_on_peer(&ctx, node, attempt).await;
                }
                Ok(Next::Go)
            }
            Command::After { ms, timer } => {
                myself.send_after(Duration::from_millis(ms), move || {
                    ConductorMsg::Timer(timer)
                });
                Ok(Next::Go)
            }
            Command::Emit(p) => {
                crate::obs::observe(&ctx.flow_id, &p);
                if let Some(tx) = &state.progress {
                    let _ = tx.send(p);
                }
                Ok(Next::Go)
            }
            Command::Publish {
                persona,
                topic,
                body,
            } => {
                if let Some(board) = &ctx.board {
                    if let Err(e) = board.publish(&ctx.flow_id, &persona, &topic, &body) {
                        tracing::debug!(error = %e, "insight not published on the team board");
                    }
                }
                Ok(Next::Go)
            }
            Command::LearnModel {
                model,
                persona,
                ok,
                tokens_in,
                tokens_out,
                duration_ms,
            } => {
                ctx.backends
                    .record(&model, &persona, ok, tokens_in, tokens_out, duration_ms);
                Ok(Next::Go)
            }
            Command::Count(Metric::Placed { remote }) => {
                quorum_metrics::placed(remote);
                Ok(Next::Go)
            }
            Command::Count(Metric::Fenced(why)) => {
                quorum_metrics::fenced(why);
                Ok(Next::Go)
            }
            Command::Log(level, message) => {
                match level {
                    Level::Info => tracing::info!(flow = %ctx.flow_id, "{message}"),
                    Level::Warn => tracing::warn!(flow = %ctx.flow_id, "{message}"),
                    Level::Error => tracing::error!(flow = %ctx.flow_id, "{message}"),
                }
                Ok(Next::Go)
            }
            Command::ChooseRoundFiles { round, new } => {
                Self::choose_round_files(myself, &ctx, round, new);
                Ok(Next::Go)
            }
            Command::Finish(report) => {
                // Nothing may outlive the review: a worker still running is stopped.
                for (_, cell) in state.workers.drain() {
                    cell.kill();
                }
                state.actors.clear();
                if let Some(tx) = state.done.take() {
                    let _ = tx.send(*report);
                }
                myself.stop(None);
                Ok(Next::Stopped)
            }
        }
    }

    /// The exhaustive flow's file selector: one short call at a round's end, off the actor so
    /// a cancel is still heard; its answer comes back as a message.
    fn choose_round_files(
        myself: &ActorRef<ConductorMsg>,
        ctx: &SharedContext,
        round: u32,
        new: Vec<RoundFinding>,
    ) {
        let (me, ctx) = (myself.clone(), ctx.clone());
        tokio::spawn(async move {
            let Some(rule) = ctx.flow.exhaustive.as_ref() else {
                return;
            };
            let new: Vec<NewFinding<'_>> = new
                .iter()
                .map(|f| NewFinding {
                    severity: f.severity.as_str(),
                    title: f.title.as_str(),
                    file: f.file.as_deref(),
                    line: f.line,
                })
                .collect();
            let (answer, stats) = crate::stages::select_round_files(&ctx, rule, round, &new).await;
            let _ = me.send_message(ConductorMsg::RoundFiles {
                round,
                answer,
                stats: Box::new(stats.to_attempt_stats()),
            });
        });
    }

    /// Key a first specialist attempt for the result cache and, in an incremental review, the
    /// outcome of a recorded result it may take instead of running: `Some(event)` to feed.
    async fn take_recorded(
        state: &mut ConductorState,
        attempt: AttemptId,
        place: &Place,
        job: &Job,
    ) -> Option<Event> {
        let ctx = state.ctx.clone();
        let inc = ctx.incremental.clone()?;
        let Job::Specialist {
            task,
            prior_error: None,
            ..
        } = job
        else {
            return None;
        };
        let task = task.clone();
        // Rendering the prompt reads the snapshot, and the cache is a database: off the actor.
        let looked = tokio::task::spawn_blocking(move || {
            let mut keyed = reuse::key(&ctx, &task).ok()?;
            if inc.reuse {
                match reuse::decide(&ctx, &inc, &keyed) {
                    quorum_core::reuse::Decision::Reuse(found) => {
                        return Some((keyed, Some(*found)))
                    }
                    quorum_core::reuse::Decision::Run { why } => keyed.why = Some(why),
                }
            }
            Some((keyed, None))
        })
        .await
        .ok()
        .flatten()?;
        match looked {
            (keyed, Some(found)) => {
                tracing::debug!(task = %keyed.task.id, from = %found.flow_id, "recorded result reused");
                Some(Event::Outcome {
                    attempt,
                    from: place.clone(),
                    outcome: Ok(reuse::reused_outcome(found)),
                })
            }
            (keyed, None) => {
                state.keyed.insert(attempt, keyed);
                None
            }
        }
    }

    /// A keyed attempt's outcome: an incremental review says why it ran, and a success is
    /// recorded under its key (a cache that refuses it costs reuse later, never this review).
    async fn record_result(
        state: &mut ConductorState,
        attempt: AttemptId,
        outcome: &mut Result<Outcome, Failure>,
    ) {
        let Some(keyed) = state.keyed.remove(&attempt) else {
            return;
        };
        let Ok(Outcome::Specialist {
            findings,
            invalid,
            iterations,
            by,
        }) = outcome
        else {
            return;
        };
        if let Some(why) = &keyed.why {
            by.stats.cache = Some(format!("ran: {why}"));
        }
        let ctx = state.ctx.clone();
        let Some(inc) = ctx.incremental.clone() else {
            return;
        };
        let Some((result, trace)) =
            reuse::result_of(&ctx, &keyed, findings, *invalid, *iterations, by)
        else {
            return;
        };
        // In a cluster the result is replicated, so a review conducted on any node finds it.
        if ctx.facts.is_replicated() {
            let (key, identity) = (keyed.key.clone(), keyed.identity.clone());
            let replicated = ctx
                .facts
                .cached_result(key, identity, result.clone(), trace.clone())
                .await;
            if let Err(e) = replicated {
                tracing::warn!(error = ?e, "recorded result not replicated");
            }
        }
        // Not awaited: the cache is a shortcut for later reviews, not a fact of this one, so
        // the review goes on while the write is flushed.
        tokio::task::spawn_blocking(move || {
            if let Err(e) = inc
                .cache
                .put_task(&keyed.key, &keyed.identity, &result, &trace)
            {
                tracing::warn!(error = %e, "result not recorded in the result cache");
            }
        });
    }

    /// A local worker is done or stopped: no longer tracked (killed when `kill`).
    fn forget(state: &mut ConductorState, attempt: AttemptId, kill: bool) {
        if let Some(cell) = state.workers.remove(&attempt) {
            state.actors.remove(&cell.get_id());
            if kill {
                cell.kill();
            }
        }
    }

    /// The peers that can take work now, for the machine.
    fn peers(state: &ConductorState) -> Option<Event> {
        let remote = state.ctx.remote.as_ref()?;
        Some(Event::Peers(peer_offers(remote.peers())))
    }
}

#[ractor::async_trait]
impl Actor for FlowConductor {
    type Msg = ConductorMsg;
    type State = ConductorState;
    type Arguments = ConductorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ConductorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_message(ConductorMsg::Start)?;
        // The epoch is where this conductor's part of the log begins: it grows with every
        // resume, so attempt ids of an earlier incarnation never match a live one.
        let epoch = args
            .resume
            .as_ref()
            .map(|r| r.replay.last_seq + 1)
            .unwrap_or(1)
            & 0xFF_FFFF;
        let ctx = args.ctx;
        let local_models = match ctx.verifier_model.as_deref() {
            Some(m) if !m.trim().is_empty() => vec![m.to_string()],
            _ => ctx.backends.all_models(),
        };
        let config = MachineConfig {
            epoch,
            seed: rand::random(),
            lease_ms: ctx
                .remote
                .as_ref()
                .map(|r| r.lease())
                .unwrap_or(Duration::from_secs(10))
                .as_millis() as u64,
            remote: ctx.remote.is_some(),
            local_models,
        };
        Ok(ConductorState {
            machine: ReviewMachine::new(ctx.review.clone(), config),
            ctx,
            done: Some(args.done),
            progress: args.progress,
            resume: args.resume,
            workers: HashMap::new(),
            actors: HashMap::new(),
            keyed: HashMap::new(),
            store_failed: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: ConductorMsg,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        // [raft hook] A review taken over elsewhere refuses this node's facts: stop conducting.
        if state.ctx.facts.fenced() {
            return Err("fenced: another node conducts this review now".into());
        }
        let event = match msg {
            ConductorMsg::Start => {
                if let Some(peers) = Self::peers(state) {
                    Self::feed(&myself, state, peers).await?;
                }
                match state.resume.take() {
                    Some(Resume { replay, attempts }) => {
                        // What live workers still run for this review: adopted, not re-asked.
                        let claims = match &state.ctx.remote {
                            Some(remote) => remote.claim(&state.ctx.review.flow_id).await,
                            None => Vec::new(),
                        };
                        if !claims.is_empty() {
                            tracing::info!(flow = %state.ctx.review.flow_id, claims = claims.len(), "live workers claim attempts of this review");
                        }
                        Event::Resume {
                            replay: Box::new(replay),
                            attempts,
                            claims,
                        }
                    }
                    None => Event::Start,
                }
            }
            ConductorMsg::Timer(timer) => {
                if timer == Timer::LeaseTick {
                    if let Some(peers) = Self::peers(state) {
                        Self::feed(&myself, state, peers).await?;
                    }
                }
                Event::Timer(timer)
            }
            ConductorMsg::Outcome { attempt, outcome } => {
                Self::forget(state, attempt, false);
                let mut outcome = outcome.into_outcome();
                Self::record_result(state, attempt, &mut outcome).await;
                Event::Outcome {
                    attempt,
                    from: Place::Local,
                    outcome,
                }
            }
            ConductorMsg::RemoteOutcome {
                attempt,
                node,
                outcome,
            } => {
                let mut outcome = outcome.into_outcome();
                Self::record_result(state, attempt, &mut outcome).await;
                Event::Outcome {
                    attempt,
                    from: Place::Peer(node),
                    outcome,
                }
            }
            ConductorMsg::Renew { attempt, node } => Event::Renew {
                attempt,
                from: node,
            },
            ConductorMsg::NodeLost(node) => Event::NodeLost { node },
            ConductorMsg::NodeJoined(node) => {
                if let Some(peers) = Self::peers(state) {
                    Self::feed(&myself, state, peers).await?;
                }
                Event::NodeJoined { node }
            }
            ConductorMsg::Cancel { reason, reply } => {
                Self::feed(&myself, state, Event::Cancel { reason }).await?;
                let _ = reply.send(());
                return Ok(());
            }
            ConductorMsg::RoundFiles {
                round,
                answer,
                stats,
            } => Event::RoundFilesChosen {
                round,
                answer,
                stats: *stats,
            },
        };
        Self::feed(&myself, state, event).await
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        evt: SupervisionEvent,
        state: &mut ConductorState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, why) = evt {
            let Some(attempt) = state.actors.remove(&cell.get_id()) else {
                return Ok(());
            };
            state.workers.remove(&attempt);
            if state.machine.is_done() {
                return Ok(());
            }
            tracing::error!(attempt, error = %why, "task actor failed");
            let event = Event::Outcome {
                attempt,
                from: Place::Local,
                outcome: Err(Failure {
                    class: "internal".into(),
                    message: format!("internal: task actor failed: {why}"),
                    retryable: true,
                }),
            };
            Self::feed(&myself, state, event).await?;
        }
        Ok(())
    }
}
