//! `quorum personas list|show|check`: the persona catalog the settings point at.

use crate::args::PersonasCommand;
use crate::exit::ExitCode;
use crate::settings;
use crate::setup::{load_catalog, load_settings};
use anyhow::Result;
use quorum_core::flows::flow::Flow;
use std::path::Path;

pub fn personas(command: PersonasCommand, config: Option<&Path>) -> Result<ExitCode> {
    let settings = load_settings(config)?;
    let dir = settings::data_dir(&settings.personas_dir, "personas")?;
    let catalog = load_catalog(&dir)?;
    match command {
        PersonasCommand::List => {
            let width = catalog.personas.keys().map(|k| k.len()).max().unwrap_or(0);
            for p in catalog.personas.values() {
                let domain = if p.is_reviewer() {
                    p.domain.clone()
                } else {
                    p.kind.as_str().to_string()
                };
                println!("{:width$}  {:<10}  {}", p.name, domain, p.summary.trim());
            }
        }
        PersonasCommand::Show { name } => {
            let p = catalog
                .get(&name)
                .map_err(|e| anyhow::anyhow!("{e}; see `quorum personas list`"))?;
            println!("{}", quorum_core::weaver::persona_prefix(p, &catalog));
            println!("## Tools\n{}", p.tools.join(", "));
            println!(
                "\n## Models\nplanning: {}\nexecution: {}",
                p.models.planning, p.models.execution
            );
        }
        PersonasCommand::Check => {
            let mut domains: std::collections::BTreeMap<&str, usize> = Default::default();
            for p in catalog.reviewers() {
                *domains.entry(p.domain.as_str()).or_default() += 1;
            }
            let panel = catalog.judge_panel();
            println!(
                "ok: {} personas ({} reviewers, {} judges on {} axes, meta-judges: {}), {} heuristics in {}",
                catalog.personas.len(),
                catalog.reviewers().count(),
                panel.judges(),
                panel.axes.len(),
                panel.meta.len(),
                catalog.heuristics.len(),
                dir.display()
            );
            let by_domain: Vec<String> = domains.iter().map(|(d, n)| format!("{d} {n}")).collect();
            println!("reviewers by domain: {}", by_domain.join(", "));
            let flows_dir = settings::data_dir(&settings.flows_dir, "flows")?;
            let flows = check_flows(&flows_dir, &catalog)?;
            println!(
                "ok: {} flows in {}: {}",
                flows.len(),
                flows_dir.display(),
                flows.join(", ")
            );
        }
    }
    Ok(ExitCode::Clean)
}

/// Every flow file in `dir` parsed and checked against the catalog (the personas its team
/// names, a panel's judges), in name order; the first bad one is the error, naming its file.
fn check_flows(dir: &Path, catalog: &quorum_core::catalog::Catalog) -> Result<Vec<String>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read flows directory {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut names = Vec::with_capacity(files.len());
    for path in files {
        let yaml = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read flow {}: {e}", path.display()))?;
        // A flow error names its file and field itself.
        let flow = Flow::parse(&yaml, &path).map_err(|e| anyhow::anyhow!("invalid flow: {e}"))?;
        flow.check_personas(catalog)
            .map_err(|e| anyhow::anyhow!("invalid flow: {e}; see `quorum personas list`"))?;
        names.push(flow.name);
    }
    Ok(names)
}
