//! The control-plane handle a node holds: propose commands (forwarded to the leader when this
//! node is not it), read reviews from the local replica, see who leads, and bootstrap the voter
//! set.

use crate::error::ControlError;
use crate::network::{
    Network, Transport, TransportError, KIND_APPEND, KIND_FORWARD, KIND_PING, KIND_SNAPSHOT,
    KIND_VOTE,
};
use crate::raft::{node_id, NodeId, TypeConfig};
use crate::state::{Command, Outcome, ReviewRecord, Reviews};
use crate::store::{self, StateMachineStore};
use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Config, Raft, ServerState, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The largest command accepted for proposal (4 MiB serialised): one entry must always fit in
/// one append request under [`crate::network::MAX_RPC_BYTES`].
pub const MAX_COMMAND_BYTES: usize = 4 << 20;

/// How a node's control plane is set up.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// This node's cluster name.
    pub name: String,
    /// Where this node's log, vote and state machine live (a sled database directory).
    pub dir: PathBuf,
    /// The voter names, the same list on every node (3 or 5). Nodes not in it become learners.
    pub voters: Vec<String>,
    pub heartbeat: Duration,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// How long one Raft RPC may take.
    pub rpc_timeout: Duration,
    /// How long [`ControlPlane::propose`] keeps trying to reach a leader before it gives up.
    pub propose_timeout: Duration,
    /// Build a snapshot (and purge the log before it) every this many applied entries.
    pub snapshot_every: u64,
    /// How many entries before a snapshot are kept in the log (a follower further behind is sent
    /// the snapshot instead).
    pub keep_after_snapshot: u64,
}

impl ControlConfig {
    pub fn new(name: impl Into<String>, dir: impl Into<PathBuf>, voters: Vec<String>) -> Self {
        ControlConfig {
            name: name.into(),
            dir: dir.into(),
            voters,
            heartbeat: Duration::from_millis(200),
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            rpc_timeout: Duration::from_millis(1500),
            propose_timeout: Duration::from_secs(10),
            snapshot_every: 2000,
            keep_after_snapshot: 100,
        }
    }

    /// Is takeover possible with this voter list? Fewer than three voters cannot survive the
    /// loss of one, so the node runs without a control plane.
    pub fn takeover_available(voters: &[String]) -> bool {
        voters.len() >= 3
    }

    fn raft_config(&self) -> Result<Config, ControlError> {
        let cfg = Config {
            cluster_name: "quorum".to_string(),
            heartbeat_interval: self.heartbeat.as_millis() as u64,
            election_timeout_min: self.election_timeout_min.as_millis() as u64,
            election_timeout_max: self.election_timeout_max.as_millis() as u64,
            install_snapshot_timeout: self.rpc_timeout.as_millis().max(1) as u64 * 4,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            // Keep JSON snapshot chunks (bytes as numbers: up to 4x) well under a frame.
            snapshot_max_chunk_size: 1 << 20,
            max_in_snapshot_log_to_keep: self.keep_after_snapshot,
            max_payload_entries: 64,
            ..Default::default()
        };
        cfg.validate()
            .map_err(|e| ControlError::Config(e.to_string()))
    }
}

/// One node's view of the control plane, for `quorum cluster status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlStatus {
    pub name: String,
    /// leader, follower, candidate or learner.
    pub role: String,
    pub leader: Option<String>,
    pub voters: Vec<String>,
    pub learners: Vec<String>,
    pub term: u64,
    pub last_applied: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Ping {
    initialized: bool,
}

/// A running control-plane member. Cheap to clone.
#[derive(Clone)]
pub struct ControlPlane {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("name", &self.inner.name)
            .finish()
    }
}

struct Inner {
    name: String,
    id: NodeId,
    cfg: ControlConfig,
    raft: Raft<TypeConfig>,
    sm: StateMachineStore,
    transport: Arc<dyn Transport>,
    closed: AtomicBool,
}

impl ControlPlane {
    /// Open this node's store and start its Raft member. The voter with the smallest name
    /// initialises the cluster once every voter answers (and none is initialised yet).
    pub async fn start(
        cfg: ControlConfig,
        transport: Arc<dyn Transport>,
    ) -> Result<ControlPlane, ControlError> {
        let mut voters = cfg.voters.clone();
        voters.sort();
        voters.dedup();
        if voters.len() != cfg.voters.len() || !(voters.len() == 3 || voters.len() == 5) {
            return Err(ControlError::Config(format!(
                "--voters needs 3 or 5 distinct node names, got {:?}",
                cfg.voters
            )));
        }
        let raft_cfg = Arc::new(cfg.raft_config()?);
        let (log, sm) = store::open(&cfg.dir)?;
        let id = node_id(&cfg.name);
        let raft = Raft::new(
            id,
            raft_cfg,
            Network {
                transport: transport.clone(),
            },
            log,
            sm.clone(),
        )
        .await
        .map_err(|e| ControlError::Stopped(e.to_string()))?;
        let plane = ControlPlane {
            inner: Arc::new(Inner {
                name: cfg.name.clone(),
                id,
                cfg,
                raft,
                sm,
                transport,
                closed: AtomicBool::new(false),
            }),
        };
        if voters.first() == Some(&plane.inner.name) {
            let p = plane.clone();
            tokio::spawn(async move { p.bootstrap(voters).await });
        }
        Ok(plane)
    }

    async fn bootstrap(&self, voters: Vec<String>) {
        let inner = &self.inner;
        let pause = inner.cfg.heartbeat;
        while !inner.closed.load(Ordering::Relaxed) {
            match inner.raft.is_initialized().await {
                Ok(true) | Err(_) => return,
                Ok(false) => {}
            }
            let mut all_up = true;
            let mut any_initialized = false;
            for v in voters.iter().filter(|v| **v != inner.name) {
                match self.call(v, KIND_PING, b"{}".to_vec()).await {
                    Ok(reply) => {
                        let ping: Option<Ping> = serde_json::from_slice(&reply).ok();
                        any_initialized |= ping.is_some_and(|p| p.initialized);
                    }
                    Err(_) => all_up = false,
                }
            }
            if any_initialized {
                // This node lost its store and rejoins a running cluster: the leader will
                // replicate the log to it; initialising again would fork the membership.
                tracing::warn!(node = %inner.name, "control plane already initialised elsewhere; waiting to be caught up");
                return;
            }
            if all_up {
                let members: BTreeMap<NodeId, BasicNode> = voters
                    .iter()
                    .map(|v| (node_id(v), BasicNode::new(v)))
                    .collect();
                match inner.raft.initialize(members).await {
                    Ok(()) => {
                        tracing::info!(node = %inner.name, ?voters, "control plane initialised");
                        return;
                    }
                    Err(RaftError::APIError(InitializeError::NotAllowed(_))) => return,
                    Err(e) => tracing::warn!(error = %e, "cannot initialise the control plane yet"),
                }
            }
            tokio::time::sleep(pause).await;
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(crate) fn raft(&self) -> &Raft<TypeConfig> {
        &self.inner.raft
    }

    /// A request to a peer's control plane that may take long (a voter change waits for the new
    /// voter to catch up): bounded by a minute, not by the RPC timeout.
    pub(crate) async fn call_peer(
        &self,
        target: &str,
        kind: &str,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, TransportError> {
        self.inner
            .transport
            .call(target, kind, body, Duration::from_secs(75))
            .await
    }

    async fn call(
        &self,
        target: &str,
        kind: &str,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, TransportError> {
        self.inner
            .transport
            .call(target, kind, body, self.inner.cfg.rpc_timeout)
            .await
    }

    /// Commit `cmd` on a majority and return what it did. Forwards to the leader when this node
    /// is not it; keeps trying (a new leader being elected) until the propose timeout. A command
    /// that timed out may still commit later: every command is safe to retry.
    pub async fn propose(&self, cmd: Command) -> Result<Outcome, ControlError> {
        self.propose_at(cmd).await.map(|(outcome, _)| outcome)
    }

    /// [`propose`](Self::propose), also returning the log index the command committed at (to
    /// wait for another replica with [`wait_applied`](Self::wait_applied)).
    pub async fn propose_at(&self, cmd: Command) -> Result<(Outcome, u64), ControlError> {
        let body = serde_json::to_vec(&cmd).map_err(|e| ControlError::Encode(e.to_string()))?;
        if body.len() > MAX_COMMAND_BYTES {
            return Err(ControlError::TooLarge {
                bytes: body.len(),
                max: MAX_COMMAND_BYTES,
            });
        }
        let inner = &self.inner;
        let deadline = Instant::now() + inner.cfg.propose_timeout;
        let mut last = String::from("no leader elected");
        loop {
            if inner.closed.load(Ordering::Relaxed) {
                return Err(ControlError::Stopped(
                    "the control plane is shut down".into(),
                ));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Unavailable(last));
            }
            match tokio::time::timeout(left, inner.raft.client_write(cmd.clone())).await {
                Err(_) => last = "no majority acknowledged the command in time".into(),
                Ok(Ok(resp)) => return Ok((resp.data, resp.log_id.index)),
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                    match f.leader_node {
                        Some(leader) if leader.addr != inner.name => {
                            match self.call(&leader.addr, KIND_FORWARD, body.clone()).await {
                                Ok(reply) => {
                                    match serde_json::from_slice::<Result<(Outcome, u64), String>>(
                                        &reply,
                                    ) {
                                        Ok(Ok(done)) => return Ok(done),
                                        Ok(Err(e)) => last = format!("leader {}: {e}", leader.addr),
                                        Err(e) => {
                                            last = format!("bad reply from {}: {e}", leader.addr)
                                        }
                                    }
                                }
                                Err(e) => last = e.to_string(),
                            }
                        }
                        _ => last = "no leader elected".into(),
                    }
                    // Wait for the next leader change or a short pause, whichever comes first.
                    let mut m = inner.raft.metrics();
                    let pause = inner.cfg.heartbeat.min(left);
                    let _ = tokio::time::timeout(pause, m.changed()).await;
                }
                Ok(Err(RaftError::APIError(e))) => last = e.to_string(),
                Ok(Err(RaftError::Fatal(e))) => return Err(ControlError::Stopped(e.to_string())),
            }
        }
    }

    /// One review's record as this node's replica has it (it may lag the leader by the entries
    /// not yet replicated here; a proposal's outcome is always current).
    pub fn review(&self, flow_id: &str) -> Option<ReviewRecord> {
        self.inner.sm.review(flow_id)
    }

    /// One review's facts from index `from` on, and whether it is finished, from this replica.
    pub fn facts_since(
        &self,
        flow_id: &str,
        from: usize,
    ) -> Option<(Vec<serde_json::Value>, bool)> {
        self.inner.sm.facts_since(flow_id, from)
    }

    /// Every review in this node's replica, without facts.
    pub fn summaries(&self) -> Vec<crate::state::ReviewSummary> {
        self.inner.sm.summaries()
    }

    /// Every review in this node's replica.
    pub fn reviews(&self) -> Reviews {
        self.inner.sm.reviews()
    }

    pub fn is_leader(&self) -> bool {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.inner.id)
    }

    /// The leader's name, if one is known.
    pub fn leader(&self) -> Option<String> {
        self.status().leader
    }

    pub fn voters(&self) -> Vec<String> {
        self.status().voters
    }

    pub fn status(&self) -> ControlStatus {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let name_of = |id: &NodeId| membership.get_node(id).map(|n| n.addr.clone());
        let voters: BTreeSet<String> = membership.voter_ids().filter_map(|i| name_of(&i)).collect();
        let learners: BTreeSet<String> = membership
            .learner_ids()
            .filter_map(|i| name_of(&i))
            .collect();
        let role = match m.state {
            ServerState::Leader => "leader",
            ServerState::Follower => "follower",
            ServerState::Candidate => "candidate",
            ServerState::Learner => "learner",
            ServerState::Shutdown => "shut down",
        };
        ControlStatus {
            name: self.inner.name.clone(),
            role: role.to_string(),
            leader: m.current_leader.as_ref().and_then(name_of),
            voters: voters.into_iter().collect(),
            learners: learners.into_iter().collect(),
            term: m.current_term,
            last_applied: m.last_applied.map(|l| l.index),
        }
    }

    /// On the leader: each member's last replicated log index, by name (empty elsewhere).
    pub fn replication_matched(&self) -> BTreeMap<String, u64> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let Some(replication) = &m.replication else {
            return BTreeMap::new();
        };
        replication
            .iter()
            .filter_map(|(id, log)| {
                let name = membership.get_node(id)?.addr.clone();
                Some((name, log.map_or(0, |l| l.index)))
            })
            .collect()
    }

    /// Wait until some node is known to lead (and this node has applied its log up to it), at
    /// most `timeout`. Returns the leader's name.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<String, ControlError> {
        let mut m = self.inner.raft.metrics();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, m.changed()).await.is_err() {
                return Err(ControlError::Unavailable(
                    "no leader elected in time".into(),
                ));
            }
        }
    }

    /// Wait until this node's replica has applied at least `index`, at most `timeout`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), ControlError> {
        self.inner
            .raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "replica caught up")
            .await
            .map(|_| ())
            .map_err(|e| ControlError::Unavailable(e.to_string()))
    }

    /// On the leader, add every named node that is not yet a member as a learner (it replicates
    /// the log but does not vote). Elsewhere, do nothing: the leader will.
    pub async fn ensure_learners(&self, names: &[String]) -> Result<(), ControlError> {
        if !self.is_leader() {
            return Ok(());
        }
        let known: BTreeSet<String> = {
            let s = self.status();
            s.voters.into_iter().chain(s.learners).collect()
        };
        for n in names.iter().filter(|n| !known.contains(*n)) {
            match self
                .inner
                .raft
                .add_learner(node_id(n), BasicNode::new(n), false)
                .await
            {
                Ok(_) => tracing::info!(learner = %n, "added to the control plane as a learner"),
                Err(e) => return Err(ControlError::Unavailable(e.to_string())),
            }
        }
        Ok(())
    }

    /// Answer one of openraft's requests from a peer (append, vote, snapshot), a forwarded
    /// command or a ping; `body` is the JSON message. Peers' requests arrive through
    /// [`answer`](Self::answer), which also takes voter changes.
    pub async fn handle(&self, kind: &str, body: &[u8]) -> Result<Vec<u8>, String> {
        let raft = &self.inner.raft;
        let bad = |e: serde_json::Error| format!("malformed {kind} request: {e}");
        let out = match kind {
            KIND_APPEND => {
                let req = serde_json::from_slice(body).map_err(bad)?;
                serde_json::to_vec(&raft.append_entries(req).await)
            }
            KIND_VOTE => {
                let req = serde_json::from_slice(body).map_err(bad)?;
                serde_json::to_vec(&raft.vote(req).await)
            }
            KIND_SNAPSHOT => {
                let req = serde_json::from_slice(body).map_err(bad)?;
                serde_json::to_vec(&raft.install_snapshot(req).await)
            }
            KIND_FORWARD => {
                let cmd: Command = serde_json::from_slice(body).map_err(bad)?;
                let r: Result<(Outcome, u64), String> = if self.is_leader() {
                    let t = self.inner.cfg.propose_timeout;
                    match tokio::time::timeout(t, raft.client_write(cmd)).await {
                        Ok(Ok(resp)) => Ok((resp.data, resp.log_id.index)),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err("no majority acknowledged the command in time".into()),
                    }
                } else {
                    Err("not the leader".into())
                };
                serde_json::to_vec(&r)
            }
            KIND_PING => {
                let initialized = raft.is_initialized().await.unwrap_or(false);
                serde_json::to_vec(&Ping { initialized })
            }
            other => return Err(format!("unknown control-plane request kind {other}")),
        };
        out.map_err(|e| format!("cannot encode the {kind} reply: {e}"))
    }

    /// Stop this member (its store stays on disk for a restart).
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(error = %e, "control plane did not shut down cleanly");
        }
    }
}
