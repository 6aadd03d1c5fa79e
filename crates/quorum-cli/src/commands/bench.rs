//! `quorum bench quality`: review a corpus with an answer key and print how good the review was.
//!
//! The review is an ordinary local review of the corpus's target (same flows, backends and
//! reports); scoring is `quorum_core::bench`, deterministic over the written report.
use crate::args::QualityArgs;
use crate::args::ReviewArgs;
use crate::exit::ExitCode;
use crate::local::prepare::{prepare_review, Prepared};
use anyhow::{bail, Context, Result};
use quorum_core::bench::{score, Corpus};
use quorum_core::report::Report;

pub async fn quality(args: QualityArgs) -> Result<ExitCode> {
    let (corpus, target) = Corpus::load(&args.corpus)?;
    let review = ReviewArgs {
        path: target,
        backend: args.backend.clone(),
        flow: args.flow.clone(),
        out: args.out.clone(),
        format: Some(vec!["json".into(), "md".into()]),
        // The bench scores findings; it never fails on them.
        fail_on: Some("none".into()),
        max_concurrent: args.max_concurrent,
        quiet: args.quiet,
        // A score must not depend on what earlier runs on this machine remembered.
        no_memory: true,
        // Nor on results recorded by earlier runs.
        no_cache: true,
        ..ReviewArgs::default()
    };
    let local = match prepare_review(&review).await? {
        Prepared::Run(l) => l,
        Prepared::Resume(_) => bail!("internal: the bench asked for a fresh review"),
    };
    let out_dir = local.outputs().0.to_path_buf();
    let started = std::time::Instant::now();
    local.run_silently(args.quiet).await?;
    let wall = started.elapsed();
    let path = out_dir.join("report.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the review wrote no report at {}", path.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a report", path.display()))?;
    let s = score(&corpus, &report);
    let mut json = serde_json::to_value(&s)?;
    if let Some(o) = json.as_object_mut() {
        o.insert("flow".into(), report.flow.clone().into());
        o.insert(
            "status".into(),
            format!("{:?}", report.status).to_lowercase().into(),
        );
        o.insert("wall_secs".into(), wall.as_secs_f64().into());
        o.insert(
            "models".into(),
            serde_json::to_value(models_of(&report)).unwrap_or_default(),
        );
    }
    let saved = out_dir.join("bench-quality.json");
    std::fs::write(&saved, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", saved.display()))?;
    if args.format == "json" {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!(
            "review {} ({}, flow {}, models {}, {:.0} s)\n{}",
            report.flow_id,
            format!("{:?}", report.status).to_lowercase(),
            report.flow,
            models_of(&report).join(","),
            wall.as_secs_f64(),
            s.to_text()
        );
        println!("scored: {}", saved.display());
    }
    Ok(ExitCode::Clean)
}

/// The models that did the review's tasks.
fn models_of(report: &Report) -> Vec<String> {
    let mut m: Vec<String> = report
        .tasks
        .iter()
        .map(|t| t.model.clone())
        .filter(|m| !m.is_empty())
        .collect();
    m.sort();
    m.dedup();
    m
}
