//! What a fix run needs (`FixJob`: the findings, the snapshot, the models, the checks and the
//! places to run agents) and what it gives back (`FixRun`, each `KeptFix` in order): the low
//! floor the driver, the oracles, the ledger and the remote seam all stand on.

pub use crate::agent::ModelRoute;
use crate::remote::FixWorkers;
use crate::sandbox::TestCommand;
use crate::worktree::FileChange;
use quorum_core::fixing::edit::EditBounds;
use quorum_core::fixing::fix_loop::{StopReason, TestRun};
use quorum_core::fixing::fix_report::{FixEntry, FixUsage};
use quorum_core::fixing::select::FixTarget;
use quorum_core::pack::ContextPack;
use quorum_runtime::agent::LoopLimits;
use quorum_runtime::analyzers::AnalyzerSetup;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything a run needs.
pub struct FixJob {
    pub targets: Vec<FixTarget>,
    pub pack: ContextPack,
    /// The run's own directory: the worktree and the tests' HOME are made inside it.
    pub work_dir: PathBuf,
    pub fixer: ModelRoute,
    pub loop_limits: LoopLimits,
    /// None: no blind verifier (`--no-verifier`).
    pub verifier: Option<ModelRoute>,
    /// The verifier model the user named (`--verifier-model`), which nodes use too.
    pub verifier_model: Option<String>,
    pub tests: Option<TestCommand>,
    pub analyzers: Option<AnalyzerSetup>,
    pub bounds: EditBounds,
    /// Fix agents at work at once on this machine, each in its own worktree (0: only on the
    /// cluster's nodes, while one can take attempts).
    pub parallel: u32,
    /// The cluster's nodes that take fix attempts (None: this machine alone).
    pub remote: Option<Arc<dyn FixWorkers>>,
    /// The run's id, for the nodes' logs.
    pub run_id: String,
}

/// A kept fix, in the order it was kept.
#[derive(Debug, Clone)]
pub struct KeptFix {
    pub finding_id: String,
    pub title: String,
    pub changes: Vec<FileChange>,
    pub oracles: Vec<&'static str>,
}

/// What a run did.
pub struct FixRun {
    pub stop: StopReason,
    pub entries: Vec<FixEntry>,
    pub kept: Vec<KeptFix>,
    pub baseline: Option<TestRun>,
    pub usage: FixUsage,
}
