//! The parameters a local review runs with beyond its pack, stored in its metadata so that
//! `quorum resume` rebuilds the same review.

use quorum_llm::BackendConfig;
use quorum_runtime::context::Incremental;
use quorum_store::DataDir;
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
    /// `--fail-on-unverified`: unverified leads count for `fail_on` too.
    pub fail_on_unverified: bool,
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
    /// The result cache: `off` (`--no-cache`), `record` (the default), `reuse`
    /// (`--incremental`). Stored, so a resumed review keeps its mode.
    pub cache: CacheMode,
    /// `--since` (or the last completed review, with `--incremental`): the earlier review the
    /// report is compared with. Stored, so a resumed review compares with the same one.
    pub since: Option<Box<quorum_core::report::since::Baseline>>,
    /// `--events FILE`: where every progress event goes as a JSON line. Not stored: a resumed
    /// review writes where its own command says.
    #[serde(skip)]
    pub events: Option<PathBuf>,
    /// `--explain-cache`: say per task whether it ran or took a recorded result, and why.
    #[serde(skip)]
    pub explain_cache: bool,
}

/// What a review does with the result cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Neither read nor written.
    Off,
    /// Completed results are recorded for later incremental reviews.
    #[default]
    Record,
    /// Recorded results whose key matches are taken; the others are run and recorded.
    Reuse,
}

impl CacheMode {
    /// The mode `quorum review` runs in: `--no-cache` or `[cache] enabled = false` turn it
    /// off; `--incremental`, `[cache] incremental` or the target's `.quorum.toml` reuse.
    pub fn chosen(no_cache: bool, enabled: bool, incremental: bool) -> CacheMode {
        match (no_cache || !enabled, incremental) {
            (true, _) => CacheMode::Off,
            (false, true) => CacheMode::Reuse,
            (false, false) => CacheMode::Record,
        }
    }

    /// Open the result cache for a review in this mode. A cache that cannot be opened (held
    /// by another review on this data dir) is said once and the review goes on without it.
    pub fn open(self, data: &DataDir, max_entries: usize, quiet: bool) -> Option<Incremental> {
        if self == CacheMode::Off {
            return None;
        }
        match data.open_results(max_entries) {
            Ok(cache) => Some(Incremental {
                cache: std::sync::Arc::new(cache),
                reuse: self == CacheMode::Reuse,
            }),
            Err(e) => {
                if !quiet || self == CacheMode::Reuse {
                    eprintln!(
                        "quorum: warning: the result cache is not available ({e}); this review \
                         neither reuses nor records results"
                    );
                }
                None
            }
        }
    }
}
