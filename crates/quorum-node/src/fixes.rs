//! The fix attempts this node runs for `quorum fix` runs conducted elsewhere (the API's
//! `RunFixAttempt`): the contents they need, kept by hash and bounded; at most the node's
//! capacity at once; this node's own model; and this node's own test policy.
//!
//! Architecture invariant: whether a fix attempt may run the target's test command is this
//! node's decision alone (`quorum node --fix-tests`, sandboxed or not at all). A request can
//! ask for tests; it can neither turn them on where the node refuses them nor lift the
//! sandbox. Everything an attempt writes stays under this node's work directory for it, which
//! is removed when the attempt ends.

use crate::packs::BlobCache;
use quorum_api::{pb, ApiError};
use quorum_fix::remote::{run_shipped, ShippedAttempt, TestPolicy};
use quorum_fix::ModelRoute;
use quorum_runtime::agent::CallSpec;
use quorum_runtime::Backends;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of fix-attempt contents a node keeps between attempts (least recently used first).
pub const FIX_BLOB_CACHE_BYTES: u64 = 256 * 1024 * 1024;
/// The most files a shipped tree may list.
const MAX_TREE_FILES: usize = 200_000;
/// A fix agent's output tokens per turn (as on the conductor).
const MAX_OUTPUT_TOKENS: u32 = 2048;
/// The context window assumed when the model server does not say.
const DEFAULT_WINDOW: u32 = 8192;
/// The most files, and changed lines, a shipped attempt may ask to touch.
const MAX_BOUND_FILES: usize = 50;
const MAX_BOUND_LINES: u32 = 5_000;

/// Runs fix attempts with this node's backends.
pub struct FixWorker {
    name: String,
    backends: Backends,
    policy: TestPolicy,
    cache: Mutex<BlobCache>,
    permits: Arc<tokio::sync::Semaphore>,
    capacity: usize,
    /// Attempts admitted (running or waiting for a permit): at most twice the capacity, so
    /// the next attempt is already here when one ends and the node never waits on the
    /// conductor between two.
    admitted: Arc<std::sync::atomic::AtomicUsize>,
    work_root: PathBuf,
    seq: AtomicU64,
}

impl std::fmt::Debug for FixWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixWorker")
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl FixWorker {
    /// A worker running up to `capacity` attempts at once under `work_root`.
    pub fn new(
        name: &str,
        backends: Backends,
        policy: TestPolicy,
        capacity: usize,
        work_root: PathBuf,
    ) -> FixWorker {
        let capacity = capacity.max(1);
        // What a node killed mid-attempt left behind is nobody's now.
        let _ = std::fs::remove_dir_all(&work_root);
        FixWorker {
            name: name.to_string(),
            backends,
            policy,
            cache: Mutex::new(BlobCache::new(FIX_BLOB_CACHE_BYTES)),
            permits: Arc::new(tokio::sync::Semaphore::new(capacity)),
            capacity,
            admitted: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            work_root,
            seq: AtomicU64::new(0),
        }
    }

    /// The test policy, for the node's start-up line.
    pub fn policy(&self) -> &TestPolicy {
        &self.policy
    }

    /// Run one attempt: store the contents it carries, answer with what is still missing,
    /// else run it with this node's model and answer with what it did.
    pub async fn run(
        &self,
        req: pb::FixAttemptRequest,
    ) -> Result<pb::FixAttemptResponse, ApiError> {
        let attempt: ShippedAttempt = serde_json::from_str(&req.attempt_json)
            .map_err(|e| ApiError::InvalidArgument(format!("attempt_json: {e}")))?;
        if attempt.tree.len() > MAX_TREE_FILES {
            return Err(ApiError::InvalidArgument(format!(
                "the tree lists {} files; at most {MAX_TREE_FILES} are taken",
                attempt.tree.len()
            )));
        }
        if attempt.bounds.max_files > MAX_BOUND_FILES
            || attempt.bounds.max_changed_lines > MAX_BOUND_LINES
        {
            return Err(ApiError::InvalidArgument(format!(
                "the attempt's bounds exceed {MAX_BOUND_FILES} files or {MAX_BOUND_LINES} lines"
            )));
        }
        // Contents sent now count for this attempt even if the cache lets them go.
        let mut sent: HashMap<String, Arc<str>> = HashMap::new();
        for blob in req.blobs {
            let actual = blake3::hash(&blob.content).to_hex().to_string();
            if actual != blob.hash {
                return Err(ApiError::InvalidArgument(format!(
                    "a blob sent as {} hashes to {actual}",
                    blob.hash
                )));
            }
            let text = String::from_utf8(blob.content).map_err(|_| {
                ApiError::InvalidArgument(format!("blob {} is not UTF-8 text", blob.hash))
            })?;
            sent.insert(blob.hash, Arc::from(text));
        }
        let mut contents: HashMap<String, Arc<str>> = HashMap::new();
        let mut missing = Vec::new();
        {
            let mut cache = self
                .cache
                .lock()
                .map_err(|_| ApiError::Internal("the fix content cache is poisoned".into()))?;
            for (hash, text) in &sent {
                cache.insert(hash.clone(), text.clone());
            }
            for e in &attempt.tree {
                if contents.contains_key(&e.hash) {
                    continue;
                }
                match sent.get(&e.hash).cloned().or_else(|| cache.get(&e.hash)) {
                    Some(text) => {
                        contents.insert(e.hash.clone(), text);
                    }
                    None => missing.push(e.hash.clone()),
                }
            }
        }
        if !missing.is_empty() {
            missing.sort();
            missing.dedup();
            return Ok(pb::FixAttemptResponse {
                missing,
                result_json: String::new(),
            });
        }
        let limit = self.capacity * 2;
        self.admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .map_err(|_| {
                ApiError::Busy(format!(
                    "node {} runs {} fix attempt(s) and has {} waiting",
                    self.name, self.capacity, self.capacity
                ))
            })?;
        let _admitted = Admitted(self.admitted.clone());
        let _permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::Internal("the fix attempt permits are closed".into()))?;
        let fixer = self.fixer()?;
        let window = fixer
            .client
            .context_window(&fixer.spec.model)
            .unwrap_or(DEFAULT_WINDOW);
        let models = quorum_fix::remote::NodeModels {
            verifier: attempt
                .verify
                .then(|| self.verifier(&fixer.spec.model, attempt.verifier_model.as_deref()))
                .flatten(),
            fixer,
        };
        let limits = quorum_fix::remote::agent_limits(window, MAX_OUTPUT_TOKENS);
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let dir = self.work_root.join(format!("{}-{n}", std::process::id()));
        tracing::info!(run = %attempt.run_id, finding = %attempt.target.finding.id, attempt = attempt.attempt, model = %models.fixer.spec.model, "fix attempt started");
        let result = run_shipped(
            attempt,
            &contents,
            &models,
            limits,
            &self.policy,
            &dir,
            &self.name,
        )
        .await
        .map_err(|e| {
            ApiError::Internal(format!(
                "node {}: the fix attempt could not run: {e}",
                self.name
            ))
        })?;
        let result_json = serde_json::to_string(&result)
            .map_err(|e| ApiError::Internal(format!("the attempt's result: {e}")))?;
        Ok(pb::FixAttemptResponse {
            missing: Vec::new(),
            result_json,
        })
    }

    /// This node's blind verifier: the model the user named when this node serves it (else
    /// none: the run's own verifier judges), or a model of another family than the fixer's
    /// where one is served, else the fixer's own (a fresh call that never sees the fixer's
    /// words; the verdict then records that it is not independent).
    fn verifier(&self, fixer_model: &str, named: Option<&str>) -> Option<ModelRoute> {
        // A named model this node does not serve: no verdict here (asking for it anyway
        // would fail, and a failed verdict never keeps a fix).
        if named.is_some_and(|m| !self.backends.all_models().iter().any(|s| s == m)) {
            return None;
        }
        let (chosen, _degraded) = self
            .backends
            .select_verifier(named, &[fixer_model.to_string()])
            .ok()?;
        Some(ModelRoute {
            client: chosen.client,
            spec: CallSpec {
                model: chosen.model,
                max_tokens: MAX_OUTPUT_TOKENS,
                temperature: 0.0,
                num_ctx: None,
            },
        })
    }

    /// This node's model for fix agents.
    fn fixer(&self) -> Result<ModelRoute, ApiError> {
        let chosen = self
            .backends
            .select(quorum_core::models::TaskNeeds::new("fix"), None)
            .map_err(|e| {
                ApiError::Unavailable(format!(
                    "node {} has no model for a fix agent: {e}",
                    self.name
                ))
            })?;
        Ok(ModelRoute {
            client: chosen.client,
            spec: CallSpec {
                model: chosen.model,
                max_tokens: MAX_OUTPUT_TOKENS,
                temperature: 0.2,
                num_ctx: None,
            },
        })
    }
}

/// The test policy a node starts with: test commands only when its operator allowed them
/// (`--fix-tests`), and only sandboxed.
pub async fn test_policy(node: &str, allowed: bool) -> TestPolicy {
    if !allowed {
        return TestPolicy::Refused(format!(
            "node {node} runs no test commands (start it with --fix-tests to allow them)"
        ));
    }
    match quorum_fix::sandbox::Isolation::detect().await {
        Some(isolation) => TestPolicy::Sandboxed(isolation),
        None => TestPolicy::Refused(format!(
            "node {node} cannot sandbox test commands (bubblewrap is not installed there or cannot create namespaces)"
        )),
    }
}

/// One admitted attempt; the count goes down when it ends, however it ends (a client that
/// gives up drops the call, and with it this).
struct Admitted(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
