//! Driving a local review (new or resumed) to its end: the progress display, a cancel asked
//! for from another process, ctrl-c, the learned model stats and insights kept, the fixed copy
//! and the reports written, and the exit code.

use super::params::RunParams;
use crate::exit::{incomplete, ExitCode};
use crate::outcome::{exit_for, print_outcome, write_reports_or_say};
use crate::settings;
use crate::setup::{RuntimeLayer, RUNTIME_KEY};
use anyhow::Result;
use quorum_runtime::{Resume, ReviewContext};
use quorum_store::DataDir;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

/// Run (or continue) a review to its end, or until ctrl-c, and write its reports.
pub async fn drive(
    data: &DataDir,
    ctx: Arc<ReviewContext>,
    resume: Option<Resume>,
    params: &RunParams,
    out: Option<&Path>,
    quiet: bool,
) -> Result<ExitCode> {
    drive_with(data, ctx, resume, params, out, quiet, true).await
}

/// `drive`, saying the outcome on stdout or not (a caller with output of its own there).
pub async fn drive_with(
    data: &DataDir,
    ctx: Arc<ReviewContext>,
    resume: Option<Resume>,
    params: &RunParams,
    out: Option<&Path>,
    quiet: bool,
    say_outcome: bool,
) -> Result<ExitCode> {
    let flow_id = ctx.flow_id.clone();
    // The runtime layer of the model cards is learned across reviews on this machine. The
    // node store is opened only to read it here and to write it back at the end: held for the
    // review's life, it would lock out a second review on the same data dir meanwhile.
    let learned = {
        let d = data.clone();
        tokio::task::spawn_blocking(move || d.open_node()?.get::<RuntimeLayer>(RUNTIME_KEY))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
    };
    match learned {
        Ok(Some(learned)) => ctx.backends.apply_runtime(&learned),
        Ok(None) => {}
        Err(e) => {
            tracing::debug!(error = %e, "node store unavailable; learned model stats not applied")
        }
    }
    let backends = ctx.backends.clone();
    let ctx_memory = ctx.scope.memory.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let draw = !quiet && std::io::stderr().is_terminal();
    let pack = params.apply_safe_fixes.as_ref().map(|_| ctx.pack.clone());
    let since_pack = params.since.as_ref().map(|_| ctx.pack.clone());
    let hint = crate::progress::Hint::from_backends(&ctx.backends, ctx.max_concurrent());
    let events = match &params.events {
        Some(path) => Some(crate::progress::EventLog::create(path)?),
        None => None,
    };
    let renderer = tokio::spawn(crate::progress::render_full(rx, draw, hint, events));
    let results = ctx.incremental.as_ref().map(|i| i.cache.clone());
    let run = quorum_runtime::run_review_from(ctx, Some(tx), resume);
    // `quorum flows cancel` from another process leaves a request beside the store.
    let cancel_watch = {
        let data = data.clone();
        let id = flow_id.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
            loop {
                tick.tick().await;
                let (d, i) = (data.clone(), id.clone());
                let asked = tokio::task::spawn_blocking(move || d.cancel_requested(&i))
                    .await
                    .ok()
                    .flatten();
                if let Some(reason) = asked {
                    let reason = if reason.trim().is_empty() {
                        "cancelled with quorum flows cancel".to_string()
                    } else {
                        reason.trim().to_string()
                    };
                    quorum_runtime::conductor::cancel_review(&id, &reason).await;
                    break;
                }
            }
        })
    };
    let report = tokio::select! {
        r = run => { cancel_watch.abort(); r },
        _ = tokio::signal::ctrl_c() => {
            renderer.abort();
            // Every fact so far is already durable; the flow reads as interrupted.
            return Err(incomplete(format!("interrupted; continue with `quorum resume {flow_id}`")));
        }
    };
    let _ = renderer.await;
    // The results this review recorded, written once at its end (each write was not).
    if let Some(cache) = results {
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || cache.flush()).await {
            eprintln!("quorum: warning: recorded results not saved ({e}); the next review runs those tasks again");
        }
    }
    let node_store = {
        let d = data.clone();
        tokio::task::spawn_blocking(move || d.open_node())
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
    };
    let node_store = match node_store {
        Ok(ns) => Some(ns),
        Err(e) => {
            tracing::warn!(error = %e, "node store unavailable; runtime model stats and insights not kept");
            if ctx_memory.is_some() {
                eprintln!("quorum: warning: this review's insights not kept ({e})");
            }
            None
        }
    };
    if let Some(ns) = &node_store {
        if let Err(e) = ns.put(RUNTIME_KEY, &backends.runtime_snapshot()) {
            tracing::warn!(error = %e, "cannot persist runtime model stats");
        }
    }
    let mut report = report.map_err(|e| incomplete(format!("review could not run: {e}")))?;
    if let (Some(memory), Some(ns)) = (&ctx_memory, &node_store) {
        // The same distillation the report counted in `insights.recorded`.
        let now = quorum_runtime::facts::now_ms();
        let learned = quorum_core::memory::distill_report(&report, &memory.repository, now);
        let n = learned.len();
        if n > 0 {
            match ns.record_insights(&memory.repository, learned, now, memory.base_rate) {
                Ok(_) if !quiet => {
                    eprintln!("quorum: kept {n} insights for the next review of this target")
                }
                Ok(_) => {}
                Err(e) => eprintln!("quorum: warning: this review's insights not kept ({e})"),
            }
        }
    }
    let out_dir = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| params.out_dir.clone());
    if let (Some(baseline), Some(pack)) = (&params.since, &since_pack) {
        report.compare_since(baseline, pack);
    }
    if let (Some(dir), Some(pack)) = (&params.apply_safe_fixes, &pack) {
        report.safe_fixes = crate::fixes::write_fixed_copy(pack, &report.findings, dir)?;
    }
    write_reports_or_say(&report, &out_dir, &params.formats)?;
    if say_outcome {
        print_outcome(&report, &out_dir, &params.formats);
    }
    if params.explain_cache {
        explain_cache(&report, params.cache);
    }
    let fail_on = settings::parse_fail_on(&params.fail_on)?;
    Ok(exit_for(&report, fail_on, params.fail_on_unverified))
}

/// `--explain-cache`: per task, whether it ran or took a recorded result, and why (stderr: the
/// outcome lines on stdout stay what scripts read).
pub(crate) fn explain_cache(report: &quorum_core::report::Report, mode: super::params::CacheMode) {
    let lines = report.cache_explanation();
    if lines.is_empty() {
        let why = match mode {
            super::params::CacheMode::Reuse => {
                "no specialist task was keyed (none ran, or no model here could take one)"
            }
            super::params::CacheMode::Record => {
                "this review did not reuse results: pass --incremental"
            }
            super::params::CacheMode::Off => {
                "the result cache was off (--no-cache, or [cache] enabled = false)"
            }
        };
        eprintln!("quorum: cache: {why}");
        return;
    }
    for l in lines {
        eprintln!("quorum: cache: {l}");
    }
}
