//! Layered configuration: shipped defaults < user config < ./quorum.toml < --config < env < flags.

use anyhow::{anyhow, Context, Result};
use quorum_core::pack::PackOptions;
use quorum_core::review::finding::Severity;
use quorum_core::scope::Profile;
use quorum_llm::BackendConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The shipped defaults, compiled in so the binary works from any directory.
pub const DEFAULT_TOML: &str = include_str!("../../../config/default.toml");

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub default_model: String,
    #[serde(default)]
    pub verifier_model: String,
    pub flow: String,
    pub fail_on: String,
    pub formats: Vec<String>,
    #[serde(default)]
    pub personas_dir: String,
    #[serde(default)]
    pub flows_dir: String,
    #[serde(default)]
    pub max_concurrent: usize,
    #[serde(default)]
    pub node_name: String,
    #[serde(default)]
    pub data_dir: String,
    pub pack: PackOptions,
    #[serde(default)]
    pub backends: Vec<BackendConfig>,
    /// Only local models may see reviewed content (loopback/private hosts).
    #[serde(default)]
    pub sensitive: bool,
    /// Peers' attempts may use this node's `locality = remote` (paid) models.
    #[serde(default)]
    pub allow_peers_remote_backends: bool,
    /// Review profile: default | chill | assertive (a repository's `.quorum.toml` and
    /// `--profile` win over it).
    #[serde(default)]
    pub profile: String,
    /// Coverage mode: full | sampled; empty = the flow's `parameters.coverage`, else sampled
    /// (`--coverage` wins over both).
    #[serde(default)]
    pub coverage: String,
    /// Operator (agentic) model cards, by model name: `[models."qwen2.5-coder:14b"]`.
    #[serde(default)]
    pub models: std::collections::BTreeMap<String, quorum_core::models::AgenticCard>,
    /// The deterministic analyzers run before the scout (`[analyzers]`).
    #[serde(default)]
    pub analyzers: AnalyzerSettings,
    /// Working memory within and across reviews (`[memory]`).
    #[serde(default)]
    pub memory: MemorySettings,
    /// How this machine's clients talk to a node's API (`[api]`).
    #[serde(default)]
    pub api: ApiSettings,
    /// The result cache of incremental reviews (`[cache]`).
    #[serde(default)]
    pub cache: CacheSettings,
}

/// `[cache]`: completed results kept for incremental reviews.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct CacheSettings {
    /// Record completed results at all (`--no-cache` turns it off for one review).
    pub enabled: bool,
    /// Every review of this machine reuses recorded results, as with `--incremental`.
    pub incremental: bool,
    /// Entries kept (task results, their traces and verifier votes), oldest evicted first.
    pub max_entries: usize,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            enabled: true,
            incremental: false,
            max_entries: quorum_store::results::DEFAULT_MAX_ENTRIES,
        }
    }
}

/// `[api]`: how a client (`review --cluster`, `flows show --watch --cluster`, `mcp --cluster`)
/// notices a node that went silent without closing its connection.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ApiSettings {
    /// Ping the connection this often (ms), busy or idle.
    pub keepalive_ms: u64,
    /// Declare the connection dead when a ping is unanswered this long (ms); the review is
    /// then followed on another node.
    pub keepalive_timeout_ms: u64,
}

impl Default for ApiSettings {
    fn default() -> Self {
        let k = quorum_api::Keepalive::default();
        ApiSettings {
            keepalive_ms: k.interval.as_millis() as u64,
            keepalive_timeout_ms: k.timeout.as_millis() as u64,
        }
    }
}

impl ApiSettings {
    pub fn keepalive(&self) -> quorum_api::Keepalive {
        quorum_api::Keepalive::new(
            std::time::Duration::from_millis(self.keepalive_ms),
            std::time::Duration::from_millis(self.keepalive_timeout_ms),
        )
    }
}

/// `[memory]`: teammates' insights within a review, earlier reviews' insights for the planner.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct MemorySettings {
    pub enabled: bool,
    /// Insights offered per prompt.
    pub k: usize,
    /// Decay per hour (seed 001 §6.1), slowed by importance.
    pub base_rate: f64,
    /// `quorum flows gc` drops insights scoring below this.
    pub prune_below: f64,
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            enabled: true,
            k: 5,
            base_rate: quorum_core::memory::BASE_RATE,
            prune_below: 0.05,
        }
    }
}

impl MemorySettings {
    fn check(&self) -> Result<()> {
        if !(self.base_rate.is_finite() && self.base_rate >= 0.0) {
            anyhow::bail!(
                "configuration: memory.base_rate must be a number >= 0 (the seed's is 0.001)"
            );
        }
        if !self.prune_below.is_finite() {
            anyhow::bail!("configuration: memory.prune_below must be a number (e.g. 0.05)");
        }
        if self.k > 50 {
            anyhow::bail!("configuration: memory.k must be at most 50 (insights per prompt)");
        }
        Ok(())
    }
}

/// `[analyzers]`: whether the catalog's tools run, how long each may take, which catalog.
#[derive(Debug, Clone, Deserialize)]
pub struct AnalyzerSettings {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "sixty")]
    pub timeout_secs: u64,
    /// A catalog file instead of the shipped config/analyzers.yaml ("" = the shipped one).
    #[serde(default)]
    pub catalog: String,
}

fn yes() -> bool {
    true
}
fn sixty() -> u64 {
    60
}

impl Default for AnalyzerSettings {
    fn default() -> Self {
        AnalyzerSettings {
            enabled: true,
            timeout_secs: 60,
            catalog: String::new(),
        }
    }
}

impl AnalyzerSettings {
    /// The analyzers to run, or `None` when they are turned off. quorum's rule pack is written
    /// under `data_root` (once per pack version) and named `{rules}` in the catalog.
    pub fn setup(
        &self,
        data_root: &Path,
    ) -> Result<Option<quorum_runtime::analyzers::AnalyzerSetup>> {
        if !self.enabled {
            return Ok(None);
        }
        let mut catalog = self.catalog()?;
        let uses_pack = catalog.analyzers.iter().any(|a| {
            a.args
                .iter()
                .any(|arg| arg.contains(quorum_core::analyzer::RULES_PLACEHOLDER))
        });
        if uses_pack {
            // Without the pack, the analyzers that need it are skipped with that reason.
            match crate::rule_pack::write_rule_pack(data_root) {
                Ok(dir) => catalog = catalog.with_rules_dir(&dir),
                Err(e) => tracing::warn!(error = %e, "cannot write quorum's rule pack"),
            }
        }
        Ok(Some(quorum_runtime::analyzers::AnalyzerSetup {
            catalog,
            options: quorum_runtime::analyzers::RunOptions {
                timeout: std::time::Duration::from_secs(self.timeout_secs.max(1)),
                ..Default::default()
            },
        }))
    }

    /// The catalog in force: the named file, else the shipped one.
    pub fn catalog(&self) -> Result<quorum_core::analyzer::AnalyzerCatalog> {
        let c = if self.catalog.trim().is_empty() {
            quorum_core::analyzer::AnalyzerCatalog::shipped()
        } else {
            quorum_core::analyzer::AnalyzerCatalog::load(Path::new(self.catalog.trim()))
        };
        c.map_err(|e| anyhow::anyhow!("{e}; fix it, or run with --no-analyzers"))
    }
}

/// Where settings were read from, for `--help`-style diagnostics and errors.
pub fn user_config_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("quorum").join("config.toml"))
}

impl Settings {
    /// Load every layer except flags. `explicit` is --config (must exist); `cwd` is where
    /// ./quorum.toml is looked for.
    pub fn load(explicit: Option<&Path>, cwd: &Path) -> Result<Settings> {
        use config::{Config, Environment, File, FileFormat};
        let mut b = Config::builder().add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml));
        if let Some(p) = user_config_path() {
            b = b.add_source(File::from(p).format(FileFormat::Toml).required(false));
        }
        b = b.add_source(
            File::from(cwd.join("quorum.toml"))
                .format(FileFormat::Toml)
                .required(false),
        );
        if let Some(p) = explicit {
            if !p.is_file() {
                anyhow::bail!("config file {} does not exist", p.display());
            }
            b = b.add_source(File::from(p).format(FileFormat::Toml).required(true));
        }
        b = b.add_source(
            Environment::with_prefix("QUORUM")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true)
                .list_separator(",")
                .with_list_parse_key("formats")
                .with_list_parse_key("pack.exclude"),
        );
        let cfg = b.build().context("invalid configuration")?;
        let s: Settings = cfg
            .try_deserialize()
            .context("invalid configuration (check the field named above)")?;
        s.fail_on_severity()?;
        parse_profile(&s.profile, "configuration: profile")?;
        s.coverage_mode(None)?;
        check_formats(&s.formats, "configuration `formats`")?;
        s.memory.check()?;
        if s.cache.max_entries == 0 {
            anyhow::bail!(
                "configuration: cache.max_entries must be at least 1 (or set cache.enabled = false)"
            );
        }
        Ok(s)
    }

    /// The coverage mode chosen by `--coverage` (`flag`), else by this configuration; `None`
    /// leaves the flow's own.
    pub fn coverage_mode(
        &self,
        flag: Option<&str>,
    ) -> Result<Option<quorum_core::flows::flow::CoverageMode>> {
        use quorum_core::flows::flow::CoverageMode;
        if let Some(f) = flag {
            return CoverageMode::parse_for(f, "--coverage")
                .map(Some)
                .map_err(|e| anyhow::anyhow!(e));
        }
        if self.coverage.trim().is_empty() {
            return Ok(None);
        }
        CoverageMode::parse_for(&self.coverage, "configuration `coverage`")
            .map(Some)
            .map_err(|e| anyhow::anyhow!(e))
    }

    /// `None` means "never fail on findings".
    pub fn fail_on_severity(&self) -> Result<Option<Severity>> {
        parse_fail_on(&self.fail_on)
    }
}

/// Every name in `formats` must be a report format; `what` names where they came from.
pub fn check_formats(formats: &[String], what: &str) -> Result<()> {
    for f in formats {
        if quorum_core::report::report_format(f).is_none() {
            anyhow::bail!(
                "unknown report format {f:?} in {what}: use {} (comma-separated)",
                quorum_core::report::report_format_names()
            );
        }
    }
    Ok(())
}

/// Parse a profile name from a flag or a config key.
pub fn parse_profile(value: &str, what: &str) -> Result<Profile> {
    Profile::parse(value).ok_or_else(|| anyhow!("invalid {what} {value:?}: use {}", Profile::NAMES))
}

pub fn parse_fail_on(s: &str) -> Result<Option<Severity>> {
    match s.trim().to_ascii_uppercase().as_str() {
        "NONE" => Ok(None),
        "P0" => Ok(Some(Severity::P0)),
        "P1" => Ok(Some(Severity::P1)),
        "P2" => Ok(Some(Severity::P2)),
        "P3" => Ok(Some(Severity::P3)),
        other => anyhow::bail!("invalid --fail-on {other:?}: use P0, P1, P2, P3 or none"),
    }
}

/// Find a data directory (personas/ or flows/): the configured one, $QUORUM_HOME/NAME, ./NAME,
/// next to the executable (and ../share/quorum/NAME), then the source tree it was built from.
pub fn data_dir(configured: &str, name: &str) -> Result<PathBuf> {
    if !configured.trim().is_empty() {
        let p = PathBuf::from(configured);
        if p.is_dir() {
            return Ok(p);
        }
        anyhow::bail!("{name} directory {} does not exist", p.display());
    }
    let mut candidates = Vec::new();
    if let Some(home) = std::env::var_os("QUORUM_HOME") {
        candidates.push(PathBuf::from(home).join(name));
    }
    candidates.push(PathBuf::from(name));
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join(name));
            candidates.push(dir.join("../share/quorum").join(name));
            candidates.push(dir.join("../..").join(name));
        }
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(name),
    );
    candidates.into_iter().find(|p| p.is_dir()).ok_or_else(|| {
        anyhow::anyhow!(
            "cannot find the {name}/ directory: set {name}_dir in the config or QUORUM_HOME"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_defaults_parse() {
        let dir = tempfile::tempdir().unwrap();
        let s = Settings::load(None, dir.path()).unwrap();
        assert_eq!(s.flow, "review");
        assert_eq!(s.fail_on_severity().unwrap(), Some(Severity::P1));
        assert_eq!(s.pack.max_file_bytes, 1024 * 1024);
        assert_eq!(s.backends.len(), 1);
        assert!(s.memory.enabled);
        assert_eq!(s.memory.k, 5);
        assert_eq!(s.memory.base_rate, 0.001);
    }

    #[test]
    fn memory_settings_layer_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("quorum.toml"),
            "[memory]\nenabled = false\nk = 2\n",
        )
        .unwrap();
        let s = Settings::load(None, dir.path()).unwrap();
        assert!(!s.memory.enabled);
        assert_eq!(s.memory.k, 2);
        assert_eq!(s.memory.prune_below, 0.05, "untouched keys keep defaults");
        std::fs::write(dir.path().join("quorum.toml"), "[memory]\nbase_rate = -1\n").unwrap();
        let e = Settings::load(None, dir.path()).unwrap_err().to_string();
        assert!(e.contains("memory.base_rate"), "{e}");
    }

    #[test]
    fn project_file_and_explicit_file_layer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("quorum.toml"),
            "fail_on = \"P2\"\nflow = \"x\"\n",
        )
        .unwrap();
        let explicit = dir.path().join("extra.toml");
        std::fs::write(&explicit, "flow = \"y\"\n[pack]\nmax_file_bytes = 10\n").unwrap();
        let s = Settings::load(Some(&explicit), dir.path()).unwrap();
        assert_eq!(s.fail_on, "P2");
        assert_eq!(s.flow, "y");
        assert_eq!(s.pack.max_file_bytes, 10);
        assert!(
            s.pack.exclude_secrets,
            "untouched nested keys keep defaults"
        );
    }

    #[test]
    fn formats_accept_every_report_format() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("quorum.toml"),
            "formats = [\"md\", \"rdjson\", \"gitlab\"]\n",
        )
        .unwrap();
        let s = Settings::load(None, dir.path()).unwrap();
        assert_eq!(s.formats, ["md", "rdjson", "gitlab"]);
        std::fs::write(dir.path().join("quorum.toml"), "formats = [\"pdf\"]\n").unwrap();
        let e = Settings::load(None, dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("\"pdf\"") && e.contains("md, json, sarif, rdjson, gitlab"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("quorum.toml"), "fail_on = \"P9\"\n").unwrap();
        assert!(Settings::load(None, dir.path()).is_err());
        let missing = dir.path().join("nope.toml");
        let dir2 = tempfile::tempdir().unwrap();
        let e = Settings::load(Some(&missing), dir2.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}
