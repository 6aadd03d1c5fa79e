//! What every command starts from: the layered settings, the data dir reviews are stored in,
//! the persona catalog, the configured backends probed into model cards, this node's name, and
//! the runtime layer of the cards learned across runs.

use crate::args::{BackendArgs, CommonArgs};
use crate::exit::incomplete;
use crate::settings::Settings;
use anyhow::{bail, Context, Result};
use quorum_core::catalog::Catalog;
use quorum_llm::BackendConfig;
use quorum_runtime::Backends;
use quorum_store::DataDir;
use std::path::{Path, PathBuf};

fn cwd() -> Result<PathBuf> {
    std::env::current_dir().context("cannot read the current directory")
}

pub fn load_settings(config: Option<&Path>) -> Result<Settings> {
    Settings::load(config, &cwd()?)
}

pub fn load_catalog(dir: &Path) -> Result<Catalog> {
    Catalog::load(dir).map_err(|e| anyhow::anyhow!("invalid persona catalog: {e}"))
}

pub fn backend_configs(args: &BackendArgs, settings: &Settings) -> Result<Vec<BackendConfig>> {
    if args.backends.is_empty() {
        return Ok(settings.backends.clone());
    }
    args.backends
        .iter()
        .map(|b| {
            b.parse::<BackendConfig>().map_err(|e| {
                anyhow::anyhow!(
                    "invalid --backend: {e} (example: --backend openai=http://127.0.0.1:8080/v1)"
                )
            })
        })
        .collect()
}

pub fn node_name(settings: &Settings) -> String {
    if !settings.node_name.trim().is_empty() {
        return settings.node_name.trim().to_string();
    }
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "local".into())
}

/// Probe backends and build model cards. Unreachable backends are exit 3: nothing is wrong
/// with the input, the world is not ready.
pub async fn ready_backends(
    configs: &[BackendConfig],
    model: &str,
    operator: &std::collections::BTreeMap<String, quorum_core::models::AgenticCard>,
    sensitive: bool,
    node: &str,
) -> Result<Backends> {
    let mut backends =
        Backends::from_configs(configs, model).map_err(|e| anyhow::anyhow!("{e}"))?;
    backends.sensitive = sensitive;
    backends.node = node.to_string();
    backends.probe(operator).await.map_err(|e| {
        incomplete(format!(
            "no backend reachable: {e}; start the model server, or point quorum at one with --backend ollama=URL or --backend openai=URL/v1"
        ))
    })?;
    let cards = backends.cards();
    if backends.is_auto() {
        if cards.is_empty() {
            bail!("the backend serves no model; pull one or pass --model NAME");
        }
        if sensitive
            && !cards
                .iter()
                .any(|c| c.agentic.locality != Some(quorum_core::models::Locality::Remote))
        {
            bail!("--sensitive: every configured model is remote; add a local backend");
        }
    } else if sensitive {
        let remote = cards.iter().any(|c| {
            c.name == backends.default_model
                && c.agentic.locality == Some(quorum_core::models::Locality::Remote)
        });
        if remote {
            bail!(
                "--sensitive: model {} is served by a remote host; use a local model",
                backends.default_model
            );
        }
    }
    Ok(backends)
}

pub fn data_dir(common: &CommonArgs, settings: &Settings) -> DataDir {
    match (&common.data_dir, settings.data_dir.trim()) {
        (Some(d), _) => DataDir::new(d),
        (None, d) if !d.is_empty() => DataDir::new(d),
        _ => DataDir::new(DataDir::default_location()),
    }
}

pub type RuntimeLayer = std::collections::BTreeMap<
    String,
    std::collections::BTreeMap<String, quorum_core::models::RuntimeStats>,
>;
pub const RUNTIME_KEY: &str = "model_runtime";
