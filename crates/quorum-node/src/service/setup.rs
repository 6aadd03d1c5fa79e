//! What the node runs reviews with (`NodeSetup`) and its memory across them (`NodeMemory`):
//! the insights a submitted review is offered and those a finished one leaves.

use quorum_core::report::Report;
use quorum_runtime::Backends;
use quorum_store::DataDir;
use std::path::PathBuf;
use std::sync::Arc;

/// What the node runs reviews with.
#[derive(Debug, Clone)]
pub struct NodeSetup {
    pub name: String,
    pub data: DataDir,
    /// Probed backends; each review gets a copy with its own model pin and sensitivity.
    pub backends: Backends,
    pub personas_dir: PathBuf,
    pub flows_dir: PathBuf,
    pub default_flow: String,
    pub max_concurrent: Option<usize>,
    /// Address peers and clients see, for ClusterStatus.
    pub advertised_addr: String,
    /// The team blackboard reviews on this node share (replicated when clustered).
    pub board: Arc<dyn quorum_runtime::board::TeamBoard>,
    /// Peers that can run specialist attempts (None = this node alone).
    pub remote: Option<Arc<dyn quorum_runtime::remote::RemoteExecutor>>,
    /// Packs of reviews conducted here, served to peers by content hash.
    pub packs: Arc<crate::packs::PackRegistry>,
    /// The deterministic analyzers this node runs on the reviews it accepts (None = off).
    /// Their leads travel with each attempt, so workers need none of the tools.
    pub analyzers: Option<quorum_runtime::analyzers::AnalyzerSetup>,
    /// Memory across the reviews this node conducts (None = off): where insights are kept and
    /// how many are offered.
    pub memory: Option<NodeMemory>,
    /// Whether this node's store takes writes: its reviews' fact logs report to it, and while
    /// it refuses them the node takes no new review.
    pub storage: Arc<quorum_runtime::StorageHealth>,
    /// The result cache of incremental reviews (None = `[cache] enabled = false`, or it could
    /// not be opened): every review here records into it; one submitted with `--incremental`
    /// takes from it, including what reviews conducted on other nodes replicated.
    pub results: Option<Arc<quorum_store::ResultCache>>,
}

/// A node's memory across reviews: the node database insights are kept in, and the `[memory]`
/// parameters. A review submitted for a target is offered the insights of earlier reviews of
/// the same target (the client's path), and its own surviving findings are kept when it ends.
#[derive(Clone)]
pub struct NodeMemory {
    pub store: Arc<quorum_store::NodeStore>,
    pub k: usize,
    pub base_rate: f64,
}

impl std::fmt::Debug for NodeMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMemory")
            .field("k", &self.k)
            .field("base_rate", &self.base_rate)
            .finish_non_exhaustive()
    }
}

impl NodeMemory {
    /// The memory a submitted review starts with; an unreadable store costs the offer, never
    /// the review.
    pub(super) async fn offer(&self, target: &str) -> quorum_core::scope::MemoryScope {
        let repository = format!("path:{target}");
        let (store, repo, k, rate) = (
            self.store.clone(),
            repository.clone(),
            self.k,
            self.base_rate,
        );
        let offered = tokio::task::spawn_blocking(move || {
            store.offer_insights(&repo, quorum_runtime::facts::now_ms(), k, rate)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "earlier reviews' insights not offered");
            Vec::new()
        });
        quorum_core::scope::MemoryScope {
            repository,
            k,
            base_rate: rate,
            offered,
        }
    }

    /// Keep a finished review's surviving findings as insights for the next review of its
    /// target (the same distillation its report counted).
    pub(super) async fn keep(&self, memory: &quorum_core::scope::MemoryScope, report: &Report) {
        let now = quorum_runtime::facts::now_ms();
        let learned = quorum_core::memory::distill_report(report, &memory.repository, now);
        if learned.is_empty() {
            return;
        }
        let (store, repo, rate) = (
            self.store.clone(),
            memory.repository.clone(),
            memory.base_rate,
        );
        let kept =
            tokio::task::spawn_blocking(move || store.record_insights(&repo, learned, now, rate))
                .await;
        match kept {
            Ok(Ok(n)) => {
                tracing::info!(insights = n, repository = %memory.repository, "insights kept for the next review of this target")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "this review's insights not kept"),
            Err(e) => tracing::warn!(error = %e, "this review's insights not kept"),
        }
    }
}
