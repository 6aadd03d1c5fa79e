//! `quorum models list`: the configured backends probed, and their model cards as a table or
//! JSON.

use crate::args::BackendArgs;
use crate::exit::{incomplete, ExitCode};
use crate::setup::{backend_configs, load_settings, node_name};
use anyhow::{bail, Result};
use quorum_runtime::Backends;

pub async fn models_list(args: BackendArgs, format: &str) -> Result<ExitCode> {
    let settings = load_settings(args.common.config.as_deref())?;
    let configs = backend_configs(&args, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend KIND=URL or add [[backends]] to the config");
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let mut backends =
        Backends::from_configs(&configs, &model).map_err(|e| anyhow::anyhow!("{e}"))?;
    backends.node = node_name(&settings);
    backends.probe(&settings.models).await.map_err(|e| {
        incomplete(format!(
            "no backend reachable: {e}; start the model server or pass --backend KIND=URL"
        ))
    })?;
    let cards = backends.cards();
    if format == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(&cards).unwrap_or_default()
        );
        return Ok(ExitCode::Clean);
    }
    println!(
        "{:<34} {:<10} {:>7} {:<8} {:>7} {:<6} {:<6} {:<9} {:<6} {:<7}",
        "model",
        "family",
        "params",
        "quant",
        "context",
        "tools",
        "json",
        "reasoning",
        "speed",
        "local"
    );
    let tier = |t: Option<quorum_core::models::Tier>| {
        t.map(|t| t.to_string()).unwrap_or_else(|| "-".into())
    };
    for c in &cards {
        println!(
            "{:<34} {:<10} {:>7} {:<8} {:>7} {:<6} {:<6} {:<9} {:<6} {:<7}",
            c.name,
            c.family(),
            c.vendor
                .parameter_count
                .map(|p| format!("{p:.1}B"))
                .unwrap_or_else(|| "-".into()),
            c.vendor.quantization.as_deref().unwrap_or("-"),
            c.vendor
                .context_length
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            tier(c.agentic.tool_use),
            tier(c.agentic.json_compliance),
            tier(c.agentic.reasoning),
            tier(c.agentic.speed_tier),
            c.agentic
                .locality
                .map(|l| l.to_string())
                .unwrap_or_else(|| "-".into()),
        );
    }
    Ok(ExitCode::Clean)
}
