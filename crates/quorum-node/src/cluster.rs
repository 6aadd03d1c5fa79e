//! The node in a cluster: the NodeAgent side of remote attempts (run other nodes' specialist
//! attempts with this host's backends), serving this node's packs by content hash, routing
//! results to local conductors, turning membership loss into reassignment, and the replicated
//! blackboard behind the team tools.

use crate::attempts::{Origin, RunningAttempts};
use crate::packs::{BlobCache, PackRegistry, BLOB_CACHE_BYTES};
use quorum_cluster::{Blackboard, Cluster, Envelope, MembershipEvent, MessageHandler};
use quorum_runtime::board::{Note, TeamBoard};
use quorum_runtime::remote::{self, RemoteAttempt, RemoteOutcome};
use quorum_runtime::Backends;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

pub const KIND_RUN: &str = "run_attempt";
pub const KIND_RESULT: &str = "attempt_result";
pub const KIND_FETCH: &str = "fetch_blobs";
/// Worker → origin: still working on an attempt (extends its lease).
pub const KIND_RENEW: &str = "renew_attempt";
/// Origin → worker: stop these attempts now (cancel, or fenced after a lapsed lease).
pub const KIND_CANCEL: &str = "cancel_attempts";
/// New conductor → worker (a request): which attempts of this review do you still run? From now
/// on they answer to me.
pub const KIND_CLAIM: &str = "claim_attempts";

/// How long a new conductor waits for each worker's claims, and how long a worker waits for its
/// replica of the control plane to name the claimant as the review's conductor.
pub(crate) const CLAIM_TIMEOUT: Duration = Duration::from_secs(3);

/// How often, and how far apart, a worker tries to send a finished attempt's result back before
/// giving it up: a minute, so a result finished while its conductor died is still there for the
/// node that takes the review over (and claims it) after the heartbeat deadline and an election.
const RESULT_SEND_TRIES: u32 = 240;
const RESULT_SEND_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

/// Largest batch of file contents one fetch asks for; well under the cluster's frame limit.
///
/// Small on purpose: a link carries frames in order, so a heartbeat queued behind a fetch reply
/// waits for all of it. 8 MiB on a 10 Mbit/s link is over 6 s — past the 3 s deadline, a false
/// Lost verdict; 1 MiB is under a second.
const FETCH_BATCH_BYTES: u64 = 1024 * 1024;

/// Receives cluster messages for this node.
#[derive(Debug)]
pub struct NodeAgent {
    me: Weak<NodeAgent>,
    name: String,
    backends: Backends,
    packs: Arc<PackRegistry>,
    /// Contents fetched from other nodes, by hash: a pack crosses the network once per node.
    cache: Mutex<BlobCache>,
    cluster: OnceLock<Cluster>,
    in_flight: AtomicU32,
    draining: AtomicBool,
    /// Attempts this node runs for peers at once; one more is refused (and placed elsewhere).
    capacity: u32,
    /// The attempts it runs for peers (or holds the undelivered result of), with whom each
    /// answers to: only that node may stop it, and a new conductor may claim it.
    running: RunningAttempts,
    /// The control plane's requests (Raft messages, pack copies) are routed to it.
    control: OnceLock<Arc<crate::control::NodeControl>>,
    /// This node's store: while it refuses writes the node takes no attempt.
    storage: OnceLock<Arc<quorum_runtime::StorageHealth>>,
    /// The contents this node keeps on disk (its own reviews' and its pack copies' blob
    /// stores): a content found there is not fetched from a peer again.
    blob_stores: OnceLock<Vec<quorum_store::BlobStore>>,
}

impl NodeAgent {
    pub fn new(name: &str, backends: Backends, packs: Arc<PackRegistry>) -> Arc<NodeAgent> {
        let capacity = backends
            .backends
            .iter()
            .map(|b| b.config.max_concurrent as u32)
            .sum::<u32>()
            .max(1);
        Self::with_capacity(name, backends, packs, capacity)
    }

    pub fn with_capacity(
        name: &str,
        backends: Backends,
        packs: Arc<PackRegistry>,
        capacity: u32,
    ) -> Arc<NodeAgent> {
        Arc::new_cyclic(|me| NodeAgent {
            me: me.clone(),
            name: name.to_string(),
            backends,
            packs,
            cache: Mutex::new(BlobCache::new(BLOB_CACHE_BYTES)),
            cluster: OnceLock::new(),
            in_flight: AtomicU32::new(0),
            draining: AtomicBool::new(false),
            capacity: capacity.max(1),
            running: RunningAttempts::default(),
            control: OnceLock::new(),
            storage: OnceLock::new(),
            blob_stores: OnceLock::new(),
        })
    }

    /// Look for pack contents in `data`'s blob store (its reviews' and its pack copies')
    /// before fetching them from a peer: a voter that holds a review's pack copy already has
    /// every content its attempts need.
    pub fn set_data_dir(&self, data: &quorum_store::DataDir) {
        // One store: the pack copies under `replicas/` keep their contents in the node's.
        let _ = self.blob_stores.set(vec![data.blobs()]);
    }

    /// Split `missing` into what this node's blob stores hold (added to `have` and the cache,
    /// each checked against its hash) and what must still be fetched. Reads run off the async
    /// threads.
    async fn take_from_local_stores(
        &self,
        missing: Vec<(String, u64)>,
        have: &mut BTreeMap<String, Arc<str>>,
    ) -> Vec<(String, u64)> {
        let Some(stores) = self.blob_stores.get().cloned() else {
            return missing;
        };
        if missing.is_empty() {
            return missing;
        }
        let wanted = missing.clone();
        let looked = tokio::task::spawn_blocking(move || {
            let (mut found, mut still) = (Vec::new(), Vec::new());
            for (hash, size) in wanted {
                let local = stores
                    .iter()
                    .find_map(|s| s.get(&hash, "a pack content").ok().flatten())
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                match local {
                    Some(text) => found.push((hash, Arc::<str>::from(text))),
                    None => still.push((hash, size)),
                }
            }
            (found, still)
        })
        .await;
        let Ok((found, still)) = looked else {
            return missing;
        };
        if let Ok(mut cache) = self.cache.lock() {
            for (hash, text) in &found {
                cache.insert(hash.clone(), text.clone());
            }
        }
        have.extend(found);
        still
    }

    /// Watch `storage`: while the store refuses writes, this node takes no attempt and says why.
    pub fn set_storage(&self, storage: Arc<quorum_runtime::StorageHealth>) {
        let _ = self.storage.set(storage);
    }

    /// Why this node takes no work now because of its store, if it does not.
    pub fn storage_failing(&self) -> Option<String> {
        self.storage.get().and_then(|s| s.failing())
    }

    /// Keep the advert true to the store: capacity 0 and the reason while it refuses writes,
    /// the node's capacity again once it takes them (unless the node is draining).
    pub fn advertise_storage(&self) {
        let Some(c) = self.cluster.get() else {
            return;
        };
        let failing = self.storage_failing();
        let mut advert = c.advert();
        if advert.storage == failing {
            return;
        }
        advert.capacity = if failing.is_some() || self.draining.load(Ordering::SeqCst) {
            0
        } else {
            self.capacity
        };
        advert.storage = failing;
        c.set_advert_now(advert);
    }

    /// Route the control plane's requests to `control` (set once, before peers need it).
    pub fn set_control(&self, control: Arc<crate::control::NodeControl>) {
        let _ = self.control.set(control);
    }

    /// Wire the started cluster in, and turn its membership losses into reassignments.
    pub fn attach(self: &Arc<Self>, cluster: Cluster) {
        let mut events = cluster.subscribe();
        let _ = self.cluster.set(cluster);
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(MembershipEvent::Lost(node)) => {
                        let n = quorum_runtime::conductor::notify_node_lost(&node);
                        tracing::warn!(node = %node, reviews = n, "node lost");
                    }
                    Ok(MembershipEvent::Joined(node)) | Ok(MembershipEvent::Rejoined(node)) => {
                        let n = quorum_runtime::conductor::notify_node_joined(&node);
                        tracing::info!(node = %node, reviews = n, "node joined");
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Stop taking attempts (SIGTERM); attempts already running finish. Peers hear capacity 0
    /// at once, so they stop choosing this node before they would be refused.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        if let Some(c) = self.cluster.get() {
            let mut advert = c.advert();
            advert.capacity = 0;
            advert.draining = true;
            c.set_advert_now(advert);
        }
    }

    /// Keep the advertised load true, so placement on other nodes sees it.
    fn advertise_load(&self) {
        if let Some(c) = self.cluster.get() {
            let mut advert = c.advert();
            advert.in_flight = self.in_flight();
            c.set_advert(advert);
        }
    }

    /// Take a slot for one attempt, or say why not.
    fn admit(&self) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(format!("node {} is draining", self.name));
        }
        if let Some(why) = self.storage_failing() {
            return Err(format!("node {} takes no attempt: {why}", self.name));
        }
        let taken = self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.capacity).then_some(n + 1)
            });
        match taken {
            Ok(_) => {
                self.advertise_load();
                Ok(())
            }
            Err(n) => Err(format!(
                "node {} is at capacity ({n} of {} attempts)",
                self.name, self.capacity
            )),
        }
    }

    async fn fetch(
        &self,
        cluster: &Cluster,
        req: &RemoteAttempt,
    ) -> Result<BTreeMap<String, Arc<str>>, String> {
        let mut have = BTreeMap::new();
        let mut missing: Vec<(String, u64)> = Vec::new();
        {
            let mut cache = self.cache.lock().map_err(|_| "cache lock poisoned")?;
            for m in &req.manifest {
                match cache.get(&m.hash) {
                    Some(c) => {
                        have.insert(m.hash.clone(), c.clone());
                    }
                    None => {
                        if let Some(c) = self.packs.get(&req.flow_id, &m.hash) {
                            have.insert(m.hash.clone(), c);
                        } else if !missing.iter().any(|(h, _)| h == &m.hash) {
                            missing.push((m.hash.clone(), m.size));
                        }
                    }
                }
            }
        }
        let missing = self.take_from_local_stores(missing, &mut have).await;
        for hashes in fetch_batches(missing, FETCH_BATCH_BYTES) {
            let reply = cluster
                .request(
                    &req.origin,
                    Envelope {
                        kind: KIND_FETCH.into(),
                        flow_id: req.flow_id.clone(),
                        payload: json!({ "hashes": hashes }),
                    },
                    Duration::from_secs(30),
                )
                .await
                .map_err(|e| format!("cannot fetch pack contents from {}: {e}", req.origin))?;
            let blobs: HashMap<String, String> =
                serde_json::from_value(reply.payload.get("blobs").cloned().unwrap_or_default())
                    .map_err(|e| format!("bad fetch reply from {}: {e}", req.origin))?;
            let mut cache = self.cache.lock().map_err(|_| "cache lock poisoned")?;
            for (h, text) in blobs {
                // Content addressing is verified, not trusted.
                if blake3::hash(text.as_bytes()).to_hex().as_str() != h {
                    return Err(format!(
                        "{} sent content that does not match hash {h}",
                        req.origin
                    ));
                }
                let text: Arc<str> = Arc::from(text);
                cache.insert(h.clone(), text.clone());
                have.insert(h, text);
            }
        }
        Ok(have)
    }

    async fn run_remote(self: Arc<Self>, cluster: Cluster, req: RemoteAttempt) {
        let (flow_id, attempt) = (req.flow_id.clone(), req.attempt);
        let specialist = req.verify.is_none() && req.stage.is_none();
        let origin = self.running.begin(
            &flow_id,
            attempt,
            &req.origin,
            &req.task.id,
            req.number,
            specialist,
        );
        let outcome = match self.admit() {
            Err(why) => RemoteOutcome::Err {
                class: "refused".into(),
                message: why,
            },
            Ok(()) => {
                // Renewals keep the origin's lease alive while this works; they stop with it.
                let renew = tokio::spawn(renew_loop(
                    cluster.clone(),
                    self.name.clone(),
                    origin.clone(),
                    flow_id.clone(),
                    attempt,
                    req.lease_ms,
                ));
                let agent = self.clone();
                let c = cluster.clone();
                let work = tokio::spawn(async move {
                    match agent.fetch(&c, &req).await {
                        Ok(contents) => {
                            let board: Arc<dyn TeamBoard> = Arc::new(ClusterBoard(c.blackboard()));
                            remote::run_attempt(
                                req,
                                &contents,
                                &agent.backends,
                                Some(board),
                                &agent.name,
                            )
                            .await
                        }
                        Err(e) => RemoteOutcome::Err {
                            class: "transport".into(),
                            message: e,
                        },
                    }
                });
                self.running
                    .set_abort(&flow_id, attempt, work.abort_handle());
                let joined = work.await;
                renew.abort();
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                self.advertise_load();
                match joined {
                    Ok(outcome) => outcome,
                    // Stopped by its origin: nobody waits for a result.
                    Err(e) if e.is_cancelled() => {
                        self.running.end(&flow_id, attempt);
                        return;
                    }
                    Err(e) => {
                        tracing::error!(flow = %flow_id, attempt, error = %e, "attempt worker panicked");
                        RemoteOutcome::Err {
                            class: "internal".into(),
                            message: format!("the worker on {} panicked: {e}", self.name),
                        }
                    }
                }
            }
        };
        let payload = json!({ "attempt": attempt, "outcome": outcome });
        let msg = Envelope {
            kind: KIND_RESULT.into(),
            flow_id: flow_id.clone(),
            payload,
        };
        self.send_result(&cluster, &origin, msg).await;
        self.running.end(&flow_id, attempt);
    }

    /// Send a finished attempt's result to whom it answers now (a claim may redirect it while
    /// this retries).
    async fn send_result(&self, cluster: &Cluster, origin: &Origin, msg: Envelope) {
        // A node that just joined can be asked to work before its membership knows the origin
        // by name (the origin dialled in first), and a link can be mid-reconnect: keep trying
        // for a while rather than throw a finished result away.
        let mut tries = 0u32;
        loop {
            let origin = origin.get();
            if origin == self.name {
                // Claimed by a review conducted here: delivered in this process.
                if let Some((attempt, outcome)) = result_of(&msg.payload) {
                    quorum_runtime::conductor::deliver_result(
                        &msg.flow_id,
                        attempt,
                        &self.name,
                        outcome,
                    );
                }
                return;
            }
            match cluster.send(&origin, msg.clone()).await {
                Ok(()) => return,
                Err(e) if tries + 1 >= RESULT_SEND_TRIES => {
                    // The origin's lease on this attempt lapses and it is placed elsewhere.
                    tracing::warn!(origin = %origin, error = %e, tries = tries + 1, "cannot return an attempt result");
                    return;
                }
                Err(e) => {
                    tracing::debug!(origin = %origin, error = %e, "attempt result not sent yet; retrying");
                    tries += 1;
                    tokio::time::sleep(RESULT_SEND_PAUSE).await;
                }
            }
        }
    }

    /// Stop attempts an origin no longer wants. Only the node an attempt answers to may stop it.
    fn stop_attempts(&self, from: &str, flow_id: &str, attempts: &[u64]) {
        for (a, origin) in self.running.stop(from, flow_id, attempts) {
            tracing::warn!(flow = %flow_id, attempt = a, from, %origin, "stop request from a node that is not the attempt's origin ignored");
        }
    }

    /// A review conducted here now claims what this node's own worker runs for it.
    pub(crate) async fn claim_own(&self, flow_id: &str) -> Vec<quorum_core::machine::AttemptClaim> {
        match self.claim_attempts(&self.name, flow_id).await {
            Ok(reply) => crate::attempts::claims_of(&self.name, &reply.payload),
            Err(e) => {
                tracing::info!(flow = %flow_id, error = %e, "this node's own attempts not claimed");
                Vec::new()
            }
        }
    }

    /// A conductor asks for the attempts of a review this node runs. Granted to the node the
    /// attempts already answer to (a resumed origin), or to the one the control plane names as
    /// the review's conductor (waiting a moment for this replica to learn of a takeover).
    async fn claim_attempts(&self, from: &str, flow_id: &str) -> Result<Envelope, String> {
        let origins = self.running.origins(flow_id);
        let mut allowed = !origins.is_empty() && origins.iter().all(|o| o == from);
        if !allowed && !origins.is_empty() {
            let Some(control) = self.control.get() else {
                return Err(format!(
                    "{from} does not conduct review {flow_id}: its attempts here answer to another node"
                ));
            };
            let deadline = tokio::time::Instant::now() + CLAIM_TIMEOUT;
            loop {
                let conductor = control.plane().review(flow_id).map(|r| r.conductor);
                if conductor.as_deref() == Some(from) {
                    allowed = true;
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!(
                        "{from} does not conduct review {flow_id} (the control plane names {})",
                        conductor.unwrap_or_else(|| "no one".into())
                    ));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let claims = if allowed {
            self.running.claim(flow_id, from, &self.name)
        } else {
            Vec::new()
        };
        if !claims.is_empty() {
            tracing::info!(flow = %flow_id, conductor = from, attempts = claims.len(), "attempts handed to the review's conductor");
        }
        Ok(Envelope {
            kind: KIND_CLAIM.into(),
            flow_id: flow_id.to_string(),
            payload: crate::attempts::claims_payload(&claims),
        })
    }
}

/// An attempt result's id and outcome, as `KIND_RESULT` carries them.
fn result_of(payload: &serde_json::Value) -> Option<(u64, RemoteOutcome)> {
    let attempt = payload.get("attempt")?.as_u64()?;
    let outcome = serde_json::from_value(payload.get("outcome")?.clone()).ok()?;
    Some((attempt, outcome))
}

/// Tell the origin every so often that `attempt` is still being worked on.
async fn renew_loop(
    cluster: Cluster,
    me: String,
    origin: Origin,
    flow_id: String,
    attempt: u64,
    lease_ms: u64,
) {
    if lease_ms == 0 {
        return;
    }
    let mut tick = tokio::time::interval(remote::renew_every(lease_ms));
    tick.tick().await;
    loop {
        tick.tick().await;
        let msg = Envelope {
            kind: KIND_RENEW.into(),
            flow_id: flow_id.clone(),
            payload: json!({ "attempt": attempt }),
        };
        let origin = origin.get();
        if origin == me {
            quorum_runtime::conductor::deliver_renewal(&flow_id, attempt, &me);
            continue;
        }
        if let Err(e) = cluster.send(&origin, msg).await {
            tracing::debug!(origin = %origin, error = %e, "lease renewal not sent");
        }
    }
}

#[async_trait::async_trait]
impl MessageHandler for NodeAgent {
    async fn on_message(&self, from: &str, msg: Envelope) {
        match msg.kind.as_str() {
            KIND_RUN => {
                let Some(cluster) = self.cluster.get().cloned() else {
                    return;
                };
                match serde_json::from_value::<RemoteAttempt>(msg.payload) {
                    Ok(req) => {
                        // Run on its own task: the handler must keep receiving (ordering per sender).
                        if let Some(agent) = self.me.upgrade() {
                            tokio::spawn(agent.run_remote(cluster, req));
                        }
                    }
                    Err(e) => tracing::error!(from, error = %e, "malformed attempt"),
                }
            }
            KIND_RESULT => match result_of(&msg.payload) {
                Some((attempt, outcome)) => {
                    if !quorum_runtime::conductor::deliver_result(
                        &msg.flow_id,
                        attempt,
                        from,
                        outcome,
                    ) {
                        tracing::info!(flow = %msg.flow_id, attempt, from, "result for a review not running here");
                    }
                }
                None => tracing::error!(from, "malformed attempt result"),
            },
            KIND_RENEW => {
                if let Some(attempt) = msg.payload.get("attempt").and_then(|a| a.as_u64()) {
                    quorum_runtime::conductor::deliver_renewal(&msg.flow_id, attempt, from);
                }
            }
            KIND_CANCEL => {
                let attempts: Vec<u64> = msg
                    .payload
                    .get("attempts")
                    .cloned()
                    .and_then(|a| serde_json::from_value(a).ok())
                    .unwrap_or_default();
                self.stop_attempts(from, &msg.flow_id, &attempts);
            }
            other => tracing::debug!(kind = other, from, "unhandled message"),
        }
    }

    async fn on_request(&self, from: &str, msg: Envelope) -> Result<Envelope, String> {
        if let Some(c) = self.control.get() {
            if let Some(reply) = c.on_request(&msg).await {
                return reply;
            }
        }
        match msg.kind.as_str() {
            KIND_CLAIM => self.claim_attempts(from, &msg.flow_id).await,
            KIND_FETCH => {
                let hashes: Vec<String> =
                    serde_json::from_value(msg.payload.get("hashes").cloned().unwrap_or_default())
                        .map_err(|e| format!("bad fetch request: {e}"))?;
                let mut blobs = serde_json::Map::new();
                for h in hashes {
                    match self.packs.get(&msg.flow_id, &h) {
                        Some(c) => {
                            blobs.insert(h, serde_json::Value::String(c.to_string()));
                        }
                        None => {
                            return Err(format!(
                                "no content {h} for flow {} on {}",
                                msg.flow_id, self.name
                            ))
                        }
                    }
                }
                tracing::debug!(from, n = blobs.len(), "served pack contents");
                Ok(Envelope {
                    kind: KIND_FETCH.into(),
                    flow_id: msg.flow_id,
                    payload: json!({ "blobs": blobs }),
                })
            }
            other => Err(format!("unknown request {other:?}")),
        }
    }
}

/// The replicated blackboard behind the team tools.
#[derive(Debug, Clone)]
pub struct ClusterBoard(pub Blackboard);

impl TeamBoard for ClusterBoard {
    fn publish(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<String, String> {
        // The replica writes to sled under its lock: on a multi-threaded runtime this worker
        // thread is handed over to blocking work first, so the review's other tasks keep running.
        let publish = || {
            self.0
                .publish(flow_id, author, topic, body)
                .map(|e| format!("{}/{}/{}", e.id.flow_id, e.id.node, e.id.seq))
                .map_err(|e| e.to_string())
        };
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(publish),
            _ => publish(),
        }
    }

    fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<Note> {
        self.0
            .read(flow_id, topic)
            .into_iter()
            .map(|e| Note {
                author: e.author,
                topic: e.topic,
                body: e.body,
            })
            .collect()
    }
}

/// Split the hashes to fetch into requests of at most `limit` bytes each (a larger file goes
/// alone).
fn fetch_batches(missing: Vec<(String, u64)>, limit: u64) -> Vec<Vec<String>> {
    let mut batch: Vec<String> = Vec::new();
    let mut bytes = 0u64;
    let mut batches = Vec::new();
    for (h, size) in missing {
        if !batch.is_empty() && bytes.saturating_add(size) > limit {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes = bytes.saturating_add(size);
        batch.push(h);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

#[cfg(test)]
mod fetch_tests {
    use super::*;

    #[tokio::test]
    async fn contents_a_node_stores_are_not_fetched_again() {
        let dir = tempfile::tempdir().unwrap();
        let data = quorum_store::DataDir::new(dir.path());
        // A pack copy this node keeps for a takeover, as the control plane writes it.
        let pack = quorum_core::pack::ContextPack::from_files(
            dir.path().join("target"),
            None,
            vec![("src/lib.rs".to_string(), "pub fn f() {}\n".to_string())],
        );
        let meta = quorum_store::FlowMeta {
            flow_id: "f1".into(),
            flow_name: "review".into(),
            flow_yaml: String::new(),
            params: serde_json::Value::Null,
            target_path: "/t".into(),
            head_sha: None,
            started_at: "2026-01-01T00:00:00Z".into(),
            started_ms: 0,
            node: "n1".into(),
        };
        let copies = crate::control::replicas_of(&data);
        copies.create_flow(&meta).unwrap().save_pack(&pack).unwrap();

        let mut cfg =
            quorum_llm::BackendConfig::new(quorum_llm::BackendKind::Ollama, "http://127.0.0.1:9");
        cfg.models = vec!["m".into()];
        let backends = Backends::from_configs(&[cfg], "m").unwrap();
        let agent = NodeAgent::with_capacity("n2", backends, Arc::default(), 1);
        let held = pack.files["src/lib.rs"].hash.clone();
        let elsewhere = "0".repeat(64);
        let wanted = vec![(held.clone(), 14), (elsewhere.clone(), 3)];

        // Without the stores, both are fetched.
        let mut have = BTreeMap::new();
        assert_eq!(
            agent
                .take_from_local_stores(wanted.clone(), &mut have)
                .await
                .len(),
            2
        );

        agent.set_data_dir(&data);
        let still = agent.take_from_local_stores(wanted, &mut have).await;
        assert_eq!(still, vec![(elsewhere, 3)]);
        assert_eq!(&*have[&held], "pub fn f() {}\n");
    }

    #[test]
    fn fetch_replies_stay_small_so_heartbeats_are_not_stuck_behind_them() {
        let mib = 1024 * 1024;
        let missing: Vec<(String, u64)> = (0..20).map(|i| (format!("h{i}"), mib / 4)).collect();
        let batches = fetch_batches(missing, FETCH_BATCH_BYTES);
        assert_eq!(batches.len(), 5);
        assert!(batches
            .iter()
            .all(|b| b.len() as u64 * mib / 4 <= FETCH_BATCH_BYTES));
        // A file over the limit travels alone rather than not at all.
        let big = fetch_batches(
            vec![("a".into(), 3 * mib), ("b".into(), 1)],
            FETCH_BATCH_BYTES,
        );
        assert_eq!(big, vec![vec!["a".to_string()], vec!["b".to_string()]]);
        assert!(FETCH_BATCH_BYTES <= mib);
    }
}
