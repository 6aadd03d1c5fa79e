//! `quorum bench quality`: review a corpus with ground truth and print how good the review was.
//!
//! The review is an ordinary local review (same flows, backends, analyzers and reports);
//! scoring is `quorum_core::bench`, deterministic over the written report. Two kinds of ground
//! truth: a corpus directory's `corpus.yaml` (answers at line level), or with `--expected` an
//! external benchmark's expected results for the files of the directory reviewed, scored at
//! file and class level for the review and, from the same run, for the leads its analyzers
//! gave before any model saw them.
use crate::args::QualityArgs;
use crate::args::ReviewArgs;
use crate::exit::ExitCode;
use crate::local::prepare::{prepare_review, LocalReview, Prepared};
use anyhow::{bail, Context, Result};
use quorum_core::bench::{score, score_labelled, Corpus, Labels};
use quorum_core::report::Report;
use std::path::{Path, PathBuf};

pub async fn quality(args: QualityArgs) -> Result<ExitCode> {
    match args.expected.clone() {
        Some(expected) => labelled(args, &expected).await,
        None => answer_key(args).await,
    }
}

/// The local review of `target` the bench scores: the reports it needs, never failing on
/// findings, nothing remembered or reused from earlier runs.
async fn prepare(args: &QualityArgs, target: PathBuf) -> Result<LocalReview> {
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
    match prepare_review(&review).await? {
        Prepared::Run(l) => Ok(l),
        Prepared::Resume(_) => bail!("internal: the bench asked for a fresh review"),
    }
}

/// Run the review to its end and read the report it wrote: the report, its directory, the wall
/// time.
async fn review(local: LocalReview, quiet: bool) -> Result<(Report, PathBuf, f64)> {
    let out_dir = local.outputs().0.to_path_buf();
    let started = std::time::Instant::now();
    local.run_silently(quiet).await?;
    let wall = started.elapsed().as_secs_f64();
    let path = out_dir.join("report.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the review wrote no report at {}", path.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a report", path.display()))?;
    Ok((report, out_dir, wall))
}

async fn answer_key(args: QualityArgs) -> Result<ExitCode> {
    let (corpus, target) = Corpus::load(&args.corpus)?;
    let local = prepare(&args, target).await?;
    let (report, out_dir, wall) = review(local, args.quiet).await?;
    let s = score(&corpus, &report);
    let json = serde_json::to_value(&s)?;
    finish(&args, &report, &out_dir, wall, json, &s.to_text())
}

/// `--expected FILE`: the whole `--corpus` directory reviewed, the labels' rows matched to its
/// files, the report's findings and the analyzers' raw leads scored by the same rule.
async fn labelled(args: QualityArgs, expected: &Path) -> Result<ExitCode> {
    let labels = Labels::load(expected)?;
    let dir = &args.corpus;
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: with --expected, --corpus is the directory to review",
            dir.display()
        );
    }
    // Before a review is created: the labels must name some file there, each unambiguously.
    let on_disk = files_under(dir);
    let found = labels.resolve(on_disk.iter().map(String::as_str))?;
    if found.rows.is_empty() {
        bail!(
            "none of the {} files {} labels is in {}: copy (some of) the benchmark's files there, keeping their names",
            labels.rows.len(),
            labels.path,
            dir.display()
        );
    }
    let local = prepare(&args, dir.clone()).await?;
    // What the review reviews and what its analyzers found, as recorded with its scope: the
    // same tools, catalog and rule pack, run once.
    let (resolved, leads) = {
        let r = &local.ctx.review;
        let resolved = labels.resolve(r.pack.files.keys().map(String::as_str))?;
        (resolved, r.scope.analyzers.clone())
    };
    let (report, out_dir, wall) = review(local, args.quiet).await?;
    let s = score_labelled(&labels.path, &resolved, &report, &leads.leads);
    let runs: Vec<String> = leads.runs.iter().map(|r| r.describe()).collect();
    let mut json = serde_json::to_value(&s)?;
    if let Some(o) = json.as_object_mut() {
        o.insert("analyzer_runs".into(), serde_json::to_value(&runs)?);
    }
    let text = format!(
        "analyzers: {}\n{}",
        if runs.is_empty() {
            "none ran ([analyzers] enabled = false, or nothing to review)".to_string()
        } else {
            runs.join("; ")
        },
        s.to_text()
    );
    finish(&args, &report, &out_dir, wall, json, &text)
}

/// Every file under `dir`, relative and `/`-separated, hidden directories left out: what the
/// labels are checked against before the review takes its snapshot.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                if !e.file_name().to_string_lossy().starts_with('.') {
                    todo.push(path);
                }
            } else if kind.is_file() {
                if let Ok(rel) = path.strip_prefix(dir) {
                    let parts: Vec<String> = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    out.push(parts.join("/"));
                }
            }
        }
    }
    out.sort();
    out
}

/// Add the review's facts to the score, save it as bench-quality.json beside the reports and
/// print it.
fn finish(
    args: &QualityArgs,
    report: &Report,
    out_dir: &Path,
    wall: f64,
    mut json: serde_json::Value,
    text: &str,
) -> Result<ExitCode> {
    let status = format!("{:?}", report.status).to_lowercase();
    if let Some(o) = json.as_object_mut() {
        o.insert("flow".into(), report.flow.clone().into());
        o.insert("status".into(), status.clone().into());
        o.insert("wall_secs".into(), wall.into());
        o.insert(
            "models".into(),
            serde_json::to_value(models_of(report)).unwrap_or_default(),
        );
    }
    let saved = out_dir.join("bench-quality.json");
    std::fs::write(&saved, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("cannot write {}", saved.display()))?;
    if args.format == "json" {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!(
            "review {} ({status}, flow {}, models {}, {wall:.0} s)\n{text}",
            report.flow_id,
            report.flow,
            models_of(report).join(","),
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
