//! The node's side of the control plane: the replicated fact sink a conductor writes through,
//! the pack copies that let a survivor rebuild a review, and the loop that takes reviews over —
//! the Raft leader reassigns the reviews of a lost conductor, and every node resumes the reviews
//! assigned to it that it is not running.

use crate::error::NodeError;
pub use crate::sink::ControlSink;
use quorum_api::ApiError;
use quorum_cluster::{Cluster, Envelope};
use quorum_control::{Command, ControlPlane, Outcome, ReviewRecord};
use quorum_core::pack::ContextPack;
use quorum_runtime::{FactSink, ReplicatedFact};
use quorum_store::{DataDir, FlowMeta};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Conductor → voter: one batch of a review's pack; the last batch carries `last: true` and the
/// receiver then stores the pack where a takeover finds it.
pub const KIND_PACK_PUT: &str = "pack_put";

/// Content bytes per pack batch: JSON escaping can double text, and the cluster frame is 16 MiB.
const PACK_BATCH_BYTES: usize = 2 << 20;

impl std::fmt::Debug for NodeControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeControl")
            .field("name", &self.name)
            .finish()
    }
}

/// The node's review service as the takeover loop needs it: whether it runs a review now, and
/// resuming one the control plane assigned here from its rebuilt store, its facts going on
/// through `sink` at the new epoch. `NodeService` is the one implementation; the control side
/// names only this, so it depends on the service no more than the service's API needs.
pub trait ReviewHost: Send + Sync {
    /// Has this process run (or is it running) the review?
    fn conducts(&self, flow_id: &str) -> bool;
    /// Resume the review from its store rebuilt from the replicated facts.
    fn resume_replicated(&self, flow_id: &str, sink: Arc<dyn FactSink>) -> Result<bool, ApiError>;
}

/// The control plane as this node uses it.
pub struct NodeControl {
    plane: ControlPlane,
    name: String,
    data: DataDir,
    /// Pack copies of reviews conducted elsewhere, one flow store each (pack only).
    replicas: DataDir,
    staging: Mutex<HashMap<String, Vec<(String, String)>>>,
    /// Reviews this node is accepting or taking over right now: the reconciler leaves them be.
    claimed: Mutex<HashSet<String>>,
    /// Takeover failures already logged, so a review that cannot be taken over here is said once.
    reported: Mutex<HashSet<(String, String)>>,
    cluster: OnceLock<Cluster>,
    service: OnceLock<Weak<dyn ReviewHost>>,
    autopilot: OnceLock<crate::autopilot::Autopilot>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl NodeControl {
    pub fn new(plane: ControlPlane, name: &str, data: DataDir) -> Arc<NodeControl> {
        let replicas = replicas_of(&data);
        Arc::new(NodeControl {
            plane,
            name: name.to_string(),
            data,
            replicas,
            staging: Mutex::new(HashMap::new()),
            claimed: Mutex::new(HashSet::new()),
            reported: Mutex::new(HashSet::new()),
            cluster: OnceLock::new(),
            service: OnceLock::new(),
            autopilot: OnceLock::new(),
        })
    }

    pub fn plane(&self) -> &ControlPlane {
        &self.plane
    }

    /// The service that resumes the reviews the control plane assigns to this node (set once,
    /// by `NodeService::set_control`).
    pub fn bind_service(&self, service: Weak<dyn ReviewHost>) {
        let _ = self.service.set(service);
    }

    /// Replace a voter lost longer than `grace` with a live learner while this node leads
    /// (set once, before [`attach`](Self::attach)).
    pub fn set_voter_grace(&self, grace: Duration) {
        let _ = self.autopilot.set(crate::autopilot::Autopilot::new(grace));
    }

    /// The control plane in one line, as this node sees it: who leads, the term, how far this
    /// replica has applied, and what the autopilot is doing.
    pub fn describe(&self) -> String {
        let st = self.plane.status();
        let mut line = format!(
            "leader {}, term {}, applied {}",
            st.leader
                .as_deref()
                .unwrap_or("none (is a majority of the voters up?)"),
            st.term,
            st.last_applied.unwrap_or(0)
        );
        match self.autopilot.get() {
            Some(a) => line.push_str(&format!(
                "; autopilot: {}",
                a.describe(self.plane.is_leader())
            )),
            None => line.push_str("; autopilot: off"),
        }
        line
    }

    /// Start the duties that need the cluster: leader reassignment, learners, reconciliation.
    pub fn attach(self: &Arc<Self>, cluster: Cluster, every: Duration) {
        let _ = self.cluster.set(cluster);
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(me) = me.upgrade() else { return };
                me.leader_duties().await;
                if let (Some(a), Some(c)) = (me.autopilot.get(), me.cluster.get()) {
                    a.step(&me.plane, c).await;
                }
                me.reconcile().await;
                me.collect_garbage().await;
            }
        });
    }

    /// Bounded by construction: the leader forgets finished reviews beyond the newest
    /// `FINISHED_REVIEWS_RETAINED` on every replica, and every node deletes pack copies of
    /// reviews the control plane no longer knows (once they are old enough that an `Accept` in
    /// flight cannot be the reason).
    async fn collect_garbage(&self) {
        let summaries = self.plane.summaries();
        if self.plane.is_leader() {
            for flow_id in to_forget(&summaries, FINISHED_REVIEWS_RETAINED) {
                match self
                    .plane
                    .propose(Command::Forget {
                        flow_id: flow_id.clone(),
                    })
                    .await
                {
                    Ok(_) => {
                        tracing::info!(flow_id = %flow_id, "finished review forgotten by the control plane")
                    }
                    Err(e) => {
                        tracing::debug!(flow_id = %flow_id, error = %e, "cannot forget yet");
                        break;
                    }
                }
            }
        }
        let known: HashSet<String> = summaries.into_iter().map(|s| s.flow_id).collect();
        let replicas = self.replicas.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let Ok(held) = replicas.list_flows() else {
                return;
            };
            let now = chrono::Utc::now().naive_utc();
            let mut deleted = 0;
            for f in held {
                if stale_replica(&f.flow_id, &known, now) {
                    match replicas.delete_flow(&f.flow_id) {
                        Ok(()) => deleted += 1,
                        Err(e) => {
                            tracing::debug!(flow_id = %f.flow_id, error = %e, "pack copy not deleted")
                        }
                    }
                }
            }
            // Their contents, unless another review's copy shares them.
            if deleted > 0 {
                match replicas.collect_blobs() {
                    Ok(c) => tracing::debug!(blobs = c.blobs, bytes = c.bytes, "pack contents collected"),
                    Err(e) => tracing::warn!(error = %e, "pack contents not collected"),
                }
            }
        })
        .await;
    }

    /// The review as the control plane has it, if it knows it.
    pub fn review(&self, flow_id: &str) -> Option<ReviewRecord> {
        self.plane.review(flow_id)
    }

    pub fn claim(&self, flow_id: &str) -> bool {
        lock(&self.claimed).insert(flow_id.to_string())
    }

    pub fn release(&self, flow_id: &str) {
        lock(&self.claimed).remove(flow_id);
    }

    /// Record a new review conducted here (epoch 1) and copy its pack to a majority of voters;
    /// returns the sink its facts go through. Fails (and the review must not start) when the
    /// control plane or a majority of voters cannot be reached.
    pub async fn accept(
        &self,
        meta: &FlowMeta,
        pack: &ContextPack,
    ) -> Result<Arc<ControlSink>, NodeError> {
        let flow_id = meta.flow_id.clone();
        self.claim(&flow_id);
        let cmd = Command::Accept {
            flow_id: flow_id.clone(),
            node: self.name.clone(),
            meta: serde_json::to_value(meta).map_err(|e| NodeError::Data(e.to_string()))?,
        };
        match self.plane.propose(cmd).await? {
            Outcome::Accepted { .. } => {}
            other => return Err(NodeError::Refused(format!("{other:?}"))),
        }
        self.replicate_pack(meta, pack).await?;
        Ok(Arc::new(
            ControlSink::new(self.plane.clone(), &flow_id, 1, 0)
                .with_cluster(self.cluster.get().cloned()),
        ))
    }

    async fn replicate_pack(&self, meta: &FlowMeta, pack: &ContextPack) -> Result<(), NodeError> {
        let voters = self.plane.voters();
        let need = voters.len() / 2 + 1;
        let mut holders = vec![self.name.clone()];
        if let Some(cluster) = self.cluster.get() {
            let batches = pack_batches(pack);
            for v in voters.iter().filter(|v| **v != self.name) {
                match push_pack(cluster, v, meta, &batches).await {
                    Ok(()) => holders.push(v.clone()),
                    Err(e) => tracing::warn!(voter = %v, error = %e, "cannot copy a pack"),
                }
            }
        }
        for h in &holders {
            let cmd = Command::PackHeld {
                flow_id: meta.flow_id.clone(),
                node: h.clone(),
            };
            self.plane.propose(cmd).await?;
        }
        let voters_holding = holders.iter().filter(|h| voters.contains(h)).count();
        if voters_holding < need {
            return Err(NodeError::PackShort {
                got: voters_holding,
                voters: voters.len(),
                need,
            });
        }
        Ok(())
    }

    /// A cluster request for the control plane or a pack copy; `None` for other kinds.
    pub async fn on_request(&self, msg: &Envelope) -> Option<Result<Envelope, String>> {
        if quorum_control::is_control_kind(&msg.kind) {
            return Some(quorum_control::handle_envelope(&self.plane, msg.clone()).await);
        }
        if msg.kind != KIND_PACK_PUT {
            return None;
        }
        Some(self.store_pack_batch(msg).await.map_err(|e| e.to_string()))
    }

    async fn store_pack_batch(&self, msg: &Envelope) -> Result<Envelope, NodeError> {
        let files: Vec<(String, String)> =
            serde_json::from_value(msg.payload.get("files").cloned().unwrap_or_default())
                .map_err(|e| NodeError::Data(format!("pack batch: {e}")))?;
        let last = msg
            .payload
            .get("last")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let flow_id = msg.flow_id.clone();
        lock(&self.staging)
            .entry(flow_id.clone())
            .or_default()
            .extend(files);
        if last {
            let meta: FlowMeta =
                serde_json::from_value(msg.payload.get("meta").cloned().unwrap_or_default())
                    .map_err(|e| NodeError::Data(format!("pack meta: {e}")))?;
            let files = lock(&self.staging).remove(&flow_id).unwrap_or_default();
            let root = PathBuf::from(&meta.target_path);
            let pack = ContextPack::from_files(root, meta.head_sha.clone(), files);
            let replicas = self.replicas.clone();
            tokio::task::spawn_blocking(move || -> Result<(), NodeError> {
                // A repeated copy (a retried submit) replaces the earlier one.
                let _ = replicas.delete_flow(&meta.flow_id);
                let store = replicas.create_flow(&meta)?;
                Ok(store.save_pack(&pack)?)
            })
            .await
            .map_err(|e| NodeError::Store(e.to_string()))??;
            tracing::info!(flow_id = %flow_id, "holding a copy of the review's pack");
        }
        Ok(Envelope {
            kind: KIND_PACK_PUT.into(),
            flow_id,
            payload: json!({ "ok": true }),
        })
    }

    /// On the Raft leader: make every live node a member (learner if not a voter), and hand the
    /// unfinished reviews of lost conductors to a live node that holds their pack.
    async fn leader_duties(&self) {
        if !self.plane.is_leader() {
            return;
        }
        let Some(cluster) = self.cluster.get() else {
            return;
        };
        let members = cluster.members();
        let alive: Vec<String> = members
            .iter()
            .filter(|m| m.alive)
            .map(|m| m.name.clone())
            .collect();
        if let Err(e) = self.plane.ensure_learners(&alive).await {
            tracing::debug!(error = %e, "cannot add learners yet");
        }
        let lost: HashSet<&str> = members
            .iter()
            .filter(|m| !m.alive)
            .map(|m| m.name.as_str())
            .collect();
        for r in self.plane.summaries() {
            let flow_id = r.flow_id.clone();
            if r.finished || !lost.contains(r.conductor.as_str()) {
                continue;
            }
            // The least loaded live node with an API that holds the pack (this node on a tie).
            let pick = members
                .iter()
                .filter(|m| m.alive && m.advert.api_addr.is_some())
                .filter(|m| r.pack_holders.contains(&m.name))
                .min_by_key(|m| {
                    (
                        m.advert.conducting.len() as u32 + m.advert.in_flight,
                        !m.is_self,
                        m.name.clone(),
                    )
                })
                .map(|m| m.name.clone());
            let Some(node) = pick else {
                if lock(&self.reported).insert((flow_id.clone(), "no pack holder".into())) {
                    tracing::warn!(flow_id = %flow_id, conductor = %r.conductor, "conductor lost and no live node holds the pack; the review waits");
                }
                continue;
            };
            let cmd = Command::Takeover {
                flow_id: flow_id.clone(),
                node: node.clone(),
                expected_epoch: r.epoch,
            };
            match self.plane.propose(cmd).await {
                Ok(Outcome::Accepted { epoch }) => {
                    tracing::warn!(flow_id = %flow_id, from = %r.conductor, to = %node, epoch, "conductor lost: review handed over")
                }
                Ok(other) => tracing::info!(flow_id = %flow_id, ?other, "takeover not applied"),
                Err(e) => {
                    tracing::warn!(flow_id = %flow_id, error = %e, "cannot hand the review over")
                }
            }
        }
    }

    /// Resume every unfinished review the control plane assigns to this node that it does not
    /// run: taken over from a lost node, or this node's own after a restart.
    async fn reconcile(&self) {
        let Some(service) = self.service.get().and_then(Weak::upgrade) else {
            return;
        };
        for r in self.plane.summaries() {
            let flow_id = r.flow_id.clone();
            if r.finished || r.conductor != self.name || service.conducts(&flow_id) {
                continue;
            }
            if !self.claim(&flow_id) {
                continue;
            }
            if let Err(e) = self.take_over(&service, &flow_id, r.epoch).await {
                if lock(&self.reported).insert((flow_id.clone(), e.to_string())) {
                    tracing::warn!(flow_id = %flow_id, error = %e, "cannot take the review over");
                }
            }
            self.release(&flow_id);
        }
    }

    async fn take_over(
        &self,
        service: &Arc<dyn ReviewHost>,
        flow_id: &str,
        epoch: u64,
    ) -> Result<(), NodeError> {
        // Without a pack copy the review cannot be rebuilt here: leave it (and its epoch) alone
        // rather than claim it and fail on every tick.
        if !self.holds_pack(flow_id).await {
            return Err(NodeError::NoPack {
                flow_id: flow_id.to_string(),
                message: "neither this node's store nor its pack copies have it".into(),
            });
        }
        // A fresh epoch of our own fences any earlier instance of this review on this node (a
        // conductor that was stopped and woke up) as well as the one we take over from.
        let cmd = Command::Takeover {
            flow_id: flow_id.to_string(),
            node: self.name.clone(),
            expected_epoch: epoch,
        };
        let (outcome, index) = self.plane.propose_at(cmd).await?;
        let Outcome::Accepted { epoch } = outcome else {
            return Err(NodeError::Refused(format!("takeover: {outcome:?}")));
        };
        self.plane
            .wait_applied(index, Duration::from_secs(10))
            .await?;
        let record = self.plane.review(flow_id).ok_or_else(|| {
            NodeError::Refused("the review vanished from the control plane".into())
        })?;
        if record.epoch != epoch || record.conductor != self.name {
            return Err(NodeError::Moved {
                flow_id: flow_id.to_string(),
                conductor: record.conductor,
                epoch: record.epoch,
            });
        }
        let next = record.facts.len() as u64;
        self.materialise(flow_id, &record).await?;
        let sink = Arc::new(
            ControlSink::new(self.plane.clone(), flow_id, epoch, next)
                .with_cluster(self.cluster.get().cloned()),
        );
        service
            .resume_replicated(flow_id, sink)
            .map_err(|e| NodeError::Resume(e.to_string()))?;
        tracing::warn!(flow_id, epoch, facts = next, "took the review over");
        Ok(())
    }

    async fn holds_pack(&self, flow_id: &str) -> bool {
        let (data, replicas, id) = (
            self.data.clone(),
            self.replicas.clone(),
            flow_id.to_string(),
        );
        tokio::task::spawn_blocking(move || {
            let has = |d: &DataDir| d.open_flow(&id).and_then(|s| s.load_pack()).is_ok();
            has(&data) || has(&replicas)
        })
        .await
        .unwrap_or(false)
    }

    /// Rebuild the review's local store from the replicated facts and a held pack copy.
    async fn materialise(&self, flow_id: &str, record: &ReviewRecord) -> Result<(), NodeError> {
        let (data, id, record) = (self.data.clone(), flow_id.to_string(), record.clone());
        tokio::task::spawn_blocking(move || rebuild_review(&data, &id, &record).map(|_| ()))
            .await
            .map_err(|e| NodeError::Store(e.to_string()))?
    }
}

/// Rebuild review `flow_id`'s store in `data` from its replicated record and a pack this node
/// holds (its own store's, or the copy under `replicas/`): the agreed facts replace whatever the
/// local store had (it may be behind, or hold facts of a fenced epoch). Blocking (sled).
pub fn rebuild_review(
    data: &DataDir,
    flow_id: &str,
    record: &ReviewRecord,
) -> Result<quorum_store::FlowStore, NodeError> {
    let meta: FlowMeta = serde_json::from_value(record.meta.clone())
        .map_err(|e| NodeError::Data(format!("review meta: {e}")))?;
    let facts: Vec<ReplicatedFact> = record
        .facts
        .iter()
        .map(|f| serde_json::from_value(f.clone()))
        .collect::<Result<_, _>>()
        .map_err(|e| NodeError::Data(format!("fact: {e}")))?;
    let replicas = replicas_of(data);
    let pack = match data.open_flow(flow_id).and_then(|s| s.load_pack()) {
        Ok(p) => p,
        Err(_) => replicas
            .open_flow(flow_id)
            .and_then(|s| s.load_pack())
            .map_err(|e| NodeError::NoPack {
                flow_id: flow_id.to_string(),
                message: e.to_string(),
            })?,
    };
    let _ = data.delete_flow(flow_id);
    let store = data.create_flow(&meta)?;
    store.save_pack(&pack)?;
    for f in &facts {
        f.apply_to(&store)?;
    }
    store.flush()?;
    Ok(store)
}

/// Where a node keeps pack copies of reviews conducted elsewhere (their contents in the node's
/// one blob store).
pub(crate) fn replicas_of(data: &DataDir) -> DataDir {
    data.replicas()
}

fn pack_batches(pack: &ContextPack) -> Vec<Vec<(String, String)>> {
    let mut out = vec![Vec::new()];
    let mut size = 0;
    for f in pack.files.values() {
        if size + f.content.len() > PACK_BATCH_BYTES && !out.last().is_some_and(Vec::is_empty) {
            out.push(Vec::new());
            size = 0;
        }
        size += f.content.len();
        if let Some(b) = out.last_mut() {
            b.push((f.path.clone(), f.content.to_string()));
        }
    }
    out
}

async fn push_pack(
    cluster: &Cluster,
    to: &str,
    meta: &FlowMeta,
    batches: &[Vec<(String, String)>],
) -> Result<(), NodeError> {
    for (i, b) in batches.iter().enumerate() {
        let last = i + 1 == batches.len();
        let mut payload = json!({ "files": b, "last": last });
        if last {
            payload["meta"] =
                serde_json::to_value(meta).map_err(|e| NodeError::Data(e.to_string()))?;
        }
        let env = Envelope {
            kind: KIND_PACK_PUT.into(),
            flow_id: meta.flow_id.clone(),
            payload,
        };
        cluster
            .request(to, env, Duration::from_secs(30))
            .await
            .map_err(|e| NodeError::Peer {
                node: to.to_string(),
                message: e.to_string(),
            })?;
    }
    Ok(())
}

/// Finished reviews whose facts the control plane keeps (GetReport from any node answers them);
/// older ones are forgotten on every replica. The conductor's own flow store keeps everything
/// until `quorum flows gc`.
pub const FINISHED_REVIEWS_RETAINED: usize = 64;

/// The finished reviews to forget so that at most `keep` remain: the oldest first (flow ids
/// begin with their start time, so they sort chronologically).
fn to_forget(summaries: &[quorum_control::state::ReviewSummary], keep: usize) -> Vec<String> {
    let mut finished: Vec<&str> = summaries
        .iter()
        .filter(|s| s.finished)
        .map(|s| s.flow_id.as_str())
        .collect();
    finished.sort();
    let excess = finished.len().saturating_sub(keep);
    finished
        .into_iter()
        .take(excess)
        .map(str::to_string)
        .collect()
}

/// A pack copy the control plane does not know, and old enough (an hour) that its review cannot
/// still be on its way to being agreed.
fn stale_replica(flow_id: &str, known: &HashSet<String>, now: chrono::NaiveDateTime) -> bool {
    if known.contains(flow_id) {
        return false;
    }
    let started = flow_id
        .get(..15)
        .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y%m%d-%H%M%S").ok());
    match started {
        Some(t) => now.signed_duration_since(t) > chrono::Duration::hours(1),
        // Not a flow id this node made: never delete what it cannot date.
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_finished_reviews_beyond_the_bound_are_forgotten() {
        let s = |id: &str, finished: bool| quorum_control::state::ReviewSummary {
            flow_id: id.into(),
            conductor: "n1".into(),
            epoch: 1,
            facts: 3,
            pack_holders: Default::default(),
            finished,
        };
        let all = vec![
            s("20261201-100000-aaaaaa", true),
            s("20261201-090000-bbbbbb", true),
            s("20261201-110000-cccccc", false),
            s("20261201-080000-dddddd", true),
        ];
        assert_eq!(
            to_forget(&all, 1),
            vec!["20261201-080000-dddddd", "20261201-090000-bbbbbb"]
        );
        assert!(to_forget(&all, 3).is_empty());
        // A running review is never forgotten, however many there are.
        assert!(!to_forget(&all, 0).contains(&"20261201-110000-cccccc".to_string()));
    }

    #[test]
    fn only_old_unknown_pack_copies_are_stale() {
        let now =
            chrono::NaiveDateTime::parse_from_str("20261201-120000", "%Y%m%d-%H%M%S").unwrap();
        let known: HashSet<String> = ["20261201-080000-aaaaaa".to_string()].into();
        assert!(
            !stale_replica("20261201-080000-aaaaaa", &known, now),
            "known"
        );
        assert!(
            stale_replica("20261201-080000-bbbbbb", &known, now),
            "old, unknown"
        );
        assert!(
            !stale_replica("20261201-115900-cccccc", &known, now),
            "too recent"
        );
        assert!(!stale_replica("my-review", &known, now), "undatable");
    }

    #[test]
    fn pack_batches_stay_under_the_batch_size() {
        let files: Vec<(String, String)> = (0..5)
            .map(|i| (format!("f{i}.txt"), "y".repeat(PACK_BATCH_BYTES / 2)))
            .collect();
        let pack = ContextPack::from_files(PathBuf::from("r"), None, files);
        let batches = pack_batches(&pack);
        assert_eq!(batches.len(), 3);
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 5);
        for b in &batches {
            assert!(b.iter().map(|(_, c)| c.len()).sum::<usize>() <= PACK_BATCH_BYTES);
        }
    }
}
