//! A review context for tests, built in one place: the shipped flow and catalog, a pack of a
//! target, and this test's scripted model server as the only backend.
//!
//! Every runtime test used to assemble a `ReviewContext` by hand (the same dozen fields, the
//! same timeouts); [`ContextBuilder`] is that assembly with the defaults tests share and a
//! method for each thing a test changes. Behind the `review` feature, so the scripted server's
//! binary does not build the runtime.

use crate::server::ScriptedServer;
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::machine::Review;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::scope::ReviewScope;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::board::TeamBoard;
use quorum_runtime::remote::RemoteExecutor;
use quorum_runtime::{Backends, FactLog, ReviewContext};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The model the scripted server serves in these contexts.
pub const MODEL: &str = "scripted-model";

/// The workspace root: flows, personas and fixtures are read from there.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fixture target under tests/fixtures.
pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

/// A shipped flow by name (`review`, `exhaustive`, …), with the tests' 5 s call timeout.
pub fn shipped_flow(name: &str) -> Flow {
    let mut flow = Flow::load(&repo_root().join("flows").join(format!("{name}.yaml")))
        .unwrap_or_else(|e| panic!("the shipped flow {name}: {e}"));
    flow.parameters.call_timeout_secs = 5;
    flow
}

/// The shipped persona catalog.
pub fn shipped_catalog() -> Catalog {
    Catalog::load(&repo_root().join("personas")).expect("the shipped catalog")
}

/// Backends with one server of `kind` at `url` serving [`MODEL`], with short timeouts.
pub fn backends(kind: BackendKind, url: String) -> Backends {
    let mut cfg = BackendConfig::new(kind, url);
    cfg.timeout_secs = 5;
    cfg.connect_timeout_secs = 2;
    cfg.models = vec![MODEL.to_string()];
    Backends::from_configs(&[cfg], MODEL).expect("backends for the scripted server")
}

/// A unique flow id per context, so reviews in one test process never share a registry name.
fn flow_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Builds a `ReviewContext` against a scripted server. Defaults: the `review` flow with 5 s
/// calls, the shipped catalog, the Ollama API, node `test-node`, two attempts at once, no fact
/// log, no peers, no team board, a whole-tree scope.
pub struct ContextBuilder {
    flow_id: Option<String>,
    check: bool,
    flow: Flow,
    pack: ContextPack,
    catalog: Option<Catalog>,
    backends: Backends,
    node: String,
    max_concurrent: Option<usize>,
    verifier_model: Option<String>,
    facts: FactLog,
    remote: Option<Arc<dyn RemoteExecutor>>,
    board: Option<Arc<dyn TeamBoard>>,
    scope: ReviewScope,
}

impl ContextBuilder {
    /// A review of `target` (snapshotted with the default pack options) against `server`.
    pub fn new(server: &ScriptedServer, target: &Path) -> ContextBuilder {
        let pack = ContextPack::snapshot(target, &PackOptions::default())
            .unwrap_or_else(|e| panic!("snapshot of {}: {e}", target.display()));
        ContextBuilder::with_pack(server, pack)
    }

    /// A review of `pack` against `server`.
    pub fn with_pack(server: &ScriptedServer, pack: ContextPack) -> ContextBuilder {
        ContextBuilder::offline(pack).backends(backends(BackendKind::Ollama, server.ollama_url()))
    }

    /// A review of `pack` with a backend nothing listens on: for tests that never call a model.
    pub fn offline(pack: ContextPack) -> ContextBuilder {
        ContextBuilder {
            flow_id: None,
            check: false,
            flow: shipped_flow("review"),
            pack,
            catalog: None,
            backends: backends(BackendKind::Ollama, "http://127.0.0.1:9".into()),
            node: "test-node".into(),
            max_concurrent: Some(2),
            verifier_model: None,
            facts: FactLog::disabled(),
            remote: None,
            board: None,
            scope: ReviewScope::default(),
        }
    }

    /// A shipped flow by name instead of `review`.
    pub fn flow(mut self, name: &str) -> Self {
        self.flow = shipped_flow(name);
        self
    }

    /// This flow instead.
    pub fn with_flow(mut self, flow: Flow) -> Self {
        self.flow = flow;
        self
    }

    /// Change the flow's parameters or stages.
    pub fn tweak(mut self, f: impl FnOnce(&mut Flow)) -> Self {
        f(&mut self.flow);
        self
    }

    /// Check the flow's personas against the catalog when building, as a node does.
    pub fn checked(mut self) -> Self {
        self.check = true;
        self
    }

    /// This flow id instead of a unique one.
    pub fn flow_id(mut self, id: &str) -> Self {
        self.flow_id = Some(id.to_string());
        self
    }

    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// These backends instead of the scripted server's Ollama API.
    pub fn backends(mut self, backends: Backends) -> Self {
        self.backends = backends;
        self
    }

    pub fn node(mut self, node: &str) -> Self {
        self.node = node.to_string();
        self
    }

    pub fn max_concurrent(mut self, n: Option<usize>) -> Self {
        self.max_concurrent = n;
        self
    }

    pub fn verifier_model(mut self, model: Option<String>) -> Self {
        self.verifier_model = model;
        self
    }

    pub fn facts(mut self, facts: FactLog) -> Self {
        self.facts = facts;
        self
    }

    pub fn remote(mut self, remote: Option<Arc<dyn RemoteExecutor>>) -> Self {
        self.remote = remote;
        self
    }

    pub fn board(mut self, board: Option<Arc<dyn TeamBoard>>) -> Self {
        self.board = board;
        self
    }

    pub fn scope(mut self, scope: ReviewScope) -> Self {
        self.scope = scope;
        self
    }

    pub fn build(self) -> ReviewContext {
        let catalog = self.catalog.unwrap_or_else(shipped_catalog);
        if self.check {
            if let Err(e) = self.flow.check_personas(&catalog) {
                panic!("flow {} against the catalog: {e}", self.flow.name);
            }
        }
        let review = Review {
            flow_id: self.flow_id.unwrap_or_else(flow_id),
            flow: self.flow,
            catalog,
            pack: self.pack,
            verifier_model: self.verifier_model,
            node: self.node,
            max_concurrent: self.max_concurrent,
            started_at: "2026-01-01T00:00:00Z".into(),
            scope: self.scope,
        };
        ReviewContext::new(review, self.backends)
            .with_facts(self.facts)
            .with_remote(self.remote)
            .with_board(self.board)
    }

    pub fn shared(self) -> Arc<ReviewContext> {
        Arc::new(self.build())
    }
}

/// When a [`FaultyStore`] refuses writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Only the Nth write (1-based) fails: a transient error.
    FailNth(usize),
    /// Every write after the first N succeeds no more: a disk that filled up.
    FullAfter(usize),
    /// Every write after the first N fails as a read-only filesystem would.
    ReadOnlyAfter(usize),
    /// Every write reaches the store but its flush fails: written, not durable as far as the
    /// writer knows (a disk that fails on sync).
    FlushFails,
}

/// A flow store that refuses writes as a failing disk does, for tests of the storage-fault
/// path: the review must stop on the first refused fact, and resume from what was stored once
/// [`FaultyStore::heal`] lets writes through again.
#[derive(Debug)]
pub struct FaultyStore {
    inner: quorum_store::FlowStore,
    fault: std::sync::Mutex<Option<Fault>>,
    writes: AtomicU64,
}

impl FaultyStore {
    pub fn new(inner: quorum_store::FlowStore, fault: Fault) -> Arc<FaultyStore> {
        Arc::new(FaultyStore {
            inner,
            fault: std::sync::Mutex::new(Some(fault)),
            writes: AtomicU64::new(0),
        })
    }

    /// The disk is fine again: every later write goes through.
    pub fn heal(&self) {
        if let Ok(mut f) = self.fault.lock() {
            *f = None;
        }
    }

    /// Writes attempted so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
}

impl quorum_runtime::facts::FactStore for FaultyStore {
    fn write(&self, fact: &quorum_runtime::ReplicatedFact) -> Result<(), quorum_store::StoreError> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) as usize + 1;
        let fault = self.fault.lock().ok().and_then(|f| *f);
        let refuse = |code: i32| -> Result<(), quorum_store::StoreError> {
            Err(quorum_store::StoreError::Io {
                path: self.inner.path().to_path_buf(),
                source: std::io::Error::from_raw_os_error(code),
            })
        };
        const ENOSPC: i32 = 28;
        const EROFS: i32 = 30;
        const EIO: i32 = 5;
        match fault {
            Some(Fault::FailNth(k)) if n == k => refuse(ENOSPC),
            Some(Fault::FullAfter(k)) if n > k => refuse(ENOSPC),
            Some(Fault::ReadOnlyAfter(k)) if n > k => refuse(EROFS),
            Some(Fault::FlushFails) => {
                fact.apply_to(&self.inner)?;
                refuse(EIO)
            }
            _ => fact.apply_to(&self.inner),
        }
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}
