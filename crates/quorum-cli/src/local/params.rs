//! The parameters a local review runs with beyond its pack, stored in its metadata so that
//! `quorum resume` rebuilds the same review.

use quorum_llm::BackendConfig;
use std::path::PathBuf;

/// What a review runs with, beyond the pack: stored in the flow's metadata so `resume` can
/// rebuild the same review.
///
/// A review submitted to a node stores only what the client chose (`submitted: true`, model,
/// sensitivity, fail-on); everything else defaults here and is filled from this machine's
/// settings when such a review is resumed by hand.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunParams {
    pub backends: Vec<BackendConfig>,
    pub model: String,
    pub verifier_model: Option<String>,
    pub max_concurrent: Option<usize>,
    pub sensitive: bool,
    pub fail_on: String,
    pub formats: Vec<String>,
    pub out_dir: PathBuf,
    pub personas_dir: PathBuf,
    pub models: std::collections::BTreeMap<String, quorum_core::models::AgenticCard>,
    /// Accepted through a node's API (the node's settings supply what is not stored).
    pub submitted: bool,
    /// `--apply-safe-fixes DIR`: where the fixed copy of the target goes.
    pub apply_safe_fixes: Option<PathBuf>,
    /// `--verifiers` / `--verify-threshold`, applied over the stored flow again on resume.
    pub verification: quorum_core::flows::flow::Overrides,
    /// `--coverage` (or the config's `coverage`), applied over the stored flow again on
    /// resume; `None` = the flow's own mode.
    pub coverage: Option<quorum_core::flows::flow::CoverageMode>,
    /// `--events FILE`: where every progress event goes as a JSON line. Not stored: a resumed
    /// review writes where its own command says.
    #[serde(skip)]
    pub events: Option<PathBuf>,
}
