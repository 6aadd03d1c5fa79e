//! `quorum fix PATH --flow FLOW`: self-improvement in cycles (seed 000 §7). Each cycle reviews
//! the tree with the flow, fixes what the review confirmed (every fix made in a private worktree
//! and kept only when the oracles accept it), and hands the fixed tree to the next cycle, until
//! a cycle keeps fewer fixes than the flow's `improve.min_kept` or its `cycles` ran. The kept
//! fixes of every cycle end up on one branch (or one patched copy) of the target, in order.

use super::fix::{
    bounds, fix_job, fix_models, test_command, test_oracle, tests_line, write_outputs,
};
use crate::args::{FixArgs, ReviewArgs};
use crate::exit::{incomplete, ExitCode};
use crate::local::drive::drive;
use crate::local::prepare::{prepare_review, Prepared};
use crate::setup::{data_dir, load_settings};
use anyhow::{bail, Context, Result};
use quorum_core::fixing::fix_loop::StopReason;
use quorum_core::fixing::fix_report::{
    CycleEntry, CyclesStop, FixEntry, FixReport, FixStatus, FixUsage, FIX_REPORT_SCHEMA_VERSION,
};
use quorum_core::fixing::select::{select, Selection};
use quorum_core::flows::flow::{Flow, Improve};
use quorum_core::pack::ContextPack;
use quorum_core::report::Report;
use quorum_core::review::finding::Severity;
use quorum_fix::journal::{Fact, Journal, JOURNAL_FILE};
use quorum_fix::KeptFix;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The flow named by `--flow`, which must have an `improve:` block.
fn improving_flow(name: &str, settings: &crate::settings::Settings) -> Result<(PathBuf, Flow)> {
    let flows_dir = crate::settings::data_dir(&settings.flows_dir, "flows")?;
    let path = Flow::locate(name, &flows_dir).map_err(|e| anyhow::anyhow!("invalid flow: {e}"))?;
    let yaml = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read flow {}", path.display()))?;
    let flow = Flow::parse(&yaml, &path).map_err(|e| anyhow::anyhow!("invalid flow: {e}"))?;
    if flow.improve.is_none() {
        bail!(
            "flow {} has no improve block, so it does not fix: review with it (`quorum review PATH --flow {name}`) and fix its report with `quorum fix PATH --from REPORT.json`, or use --flow self-improve",
            flow.name
        );
    }
    Ok((path, flow))
}

/// A directory holding `pack`'s files with `kept`'s changes applied: the next cycle's tree.
fn materialize(dir: &Path, pack: &ContextPack, kept: &[KeptFix]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (path, f) in &pack.files {
        quorum_fix::worktree::write_confined(dir, path, &f.content)?;
    }
    let squashed =
        quorum_fix::patch::squash(&kept.iter().map(|k| k.changes.clone()).collect::<Vec<_>>());
    for c in &squashed {
        quorum_fix::worktree::write_confined(dir, &c.path, &c.after)?;
    }
    Ok(())
}

/// A finding's identity across cycles: its file and title (each review numbers afresh and
/// lines move as fixes land).
fn identity(file: &str, title: &str) -> (String, String) {
    (file.to_string(), title.trim().to_lowercase())
}

fn add_usage(total: &mut FixUsage, run: &FixUsage) {
    total.attempts += run.attempts;
    total.llm_calls += run.llm_calls;
    total.tokens_in += run.tokens_in;
    total.tokens_out += run.tokens_out;
    total.wall_ms += run.wall_ms;
}

pub async fn improve(args: FixArgs, flow_name: &str) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    let target = &args.path;
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory to improve",
            target.display()
        );
    }
    let root = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let (flow_path, flow) = improving_flow(flow_name, &settings)?;
    let plan: Improve = flow.improve.clone().expect("checked by improving_flow");
    let min_severity = match args.min_severity.as_deref() {
        Some(text) => Severity::parse_lenient(text)
            .with_context(|| format!("--min-severity {text:?}: use P0, P1, P2 or P3"))?,
        None => Severity::parse_lenient(&plan.min_severity).unwrap_or(Severity::P2),
    };
    if args.max_files == Some(0) || args.max_lines == Some(0) {
        bail!("--max-files and --max-lines must be at least 1");
    }
    let edit_bounds = bounds(&args, Some(&plan));
    let (test_cmd, isolation) = test_oracle(&args, &root).await?;
    let fix_id = super::fix::new_fix_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("quorum-out").join(&fix_id));
    if out_dir.join(JOURNAL_FILE).exists() || out_dir.join("fix-report.json").exists() {
        bail!(
            "{} already holds a fix run: pass another --out",
            out_dir.display()
        );
    }
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create the output directory {}", out_dir.display()))?;
    let out_dir = out_dir.canonicalize()?;
    let models = fix_models(&args, &settings).await?;
    let data = data_dir(&args.backend.common, &settings);
    let analyzers = if args.no_analyzers {
        None
    } else {
        settings.analyzers.setup(data.root())?
    };
    let work = tempfile::Builder::new()
        .prefix("quorum-improve-")
        .tempdir()
        .context("cannot create a temporary directory for the cycles' trees")?;
    let (base_pack, _) = crate::target::snapshot(&root, &settings, None, None)?;
    let quiet = args.quiet;
    let say = |line: String| {
        if !quiet {
            eprintln!("quorum: {line}");
        }
    };
    say(format!(
        "improving {} with flow {}: at most {} cycle(s), each fixing confirmed {:?}-or-higher findings with {}; tests: {}",
        root.display(),
        flow.name,
        plan.cycles,
        min_severity,
        models.fixer_model,
        tests_line(&root, test_cmd.as_deref(), isolation.as_ref())
    ));

    let mut kept: Vec<KeptFix> = Vec::new();
    let mut entries: Vec<FixEntry> = Vec::new();
    let mut cycles: Vec<CycleEntry> = Vec::new();
    let mut usage = FixUsage::default();
    let mut given_up: BTreeSet<(String, String)> = BTreeSet::new();
    let mut baseline_failing: Vec<String> = Vec::new();
    let mut last_stop = StopReason::Satisfied;
    let mut first_flow_id = String::new();
    let mut tree = root.clone();
    let mut pack = base_pack.clone();
    let mut ended = CyclesStop::MaxCycles;
    for cycle in 1..=plan.cycles {
        let cycle_dir = out_dir.join(format!("cycle-{cycle}"));
        let review_dir = cycle_dir.join("review");
        say(format!(
            "cycle {cycle}/{}: reviewing {}",
            plan.cycles,
            if cycle == 1 {
                "the target".to_string()
            } else {
                format!("the target with the {} fix(es) kept so far", kept.len())
            }
        ));
        let review_args = ReviewArgs {
            improving: true,
            path: tree.clone(),
            backend: args.backend.clone(),
            flow: Some(flow_path.display().to_string()),
            out: Some(review_dir.clone()),
            fail_on: Some("none".into()),
            format: Some(vec!["md".into(), "json".into()]),
            quiet,
            // A later cycle reviews a temporary tree: nothing to remember about it.
            no_memory: cycle > 1,
            ..Default::default()
        };
        match prepare_review(&review_args).await? {
            Prepared::Run(l) => {
                drive(&l.data, l.ctx, None, &l.params, Some(&review_dir), quiet).await?;
            }
            Prepared::Resume(_) => bail!(
                "an interrupted review of {} with flow {} is waiting: finish it with `quorum review {} --flow {} --resume`, then run quorum fix --from its report",
                tree.display(),
                flow.name,
                tree.display(),
                flow_name
            ),
        }
        let report_path = review_dir.join("report.json");
        let text = std::fs::read_to_string(&report_path).map_err(|e| {
            incomplete(format!(
                "cycle {cycle}'s review wrote no report ({}: {e}); see the lines above",
                report_path.display()
            ))
        })?;
        let report: Report = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a quorum report", report_path.display()))?;
        if cycle == 1 {
            first_flow_id = report.flow_id.clone();
        }
        let mut targets = select(&report, &Selection::AtLeast(min_severity))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        targets.retain(|t| {
            let file = t.finding.file.as_deref().unwrap_or("");
            let again = given_up.contains(&identity(file, &t.finding.title));
            if again {
                say(format!(
                    "cycle {cycle}: not trying {} again ({} in {file} was given up in an earlier cycle)",
                    t.finding.id, t.finding.title
                ));
            }
            pack.get(file).is_some() && !again
        });
        let found = targets.len();
        if targets.is_empty() {
            say(format!("cycle {cycle}: nothing left to fix"));
            cycles.push(CycleEntry {
                cycle,
                review: report_path.display().to_string(),
                review_flow_id: report.flow_id.clone(),
                found: 0,
                kept: 0,
                stop: None,
            });
            ended = CyclesStop::NothingToFix;
            break;
        }
        say(format!(
            "cycle {cycle}: fixing {found} confirmed finding(s)"
        ));
        let mut journal = Journal::open(&cycle_dir.join(JOURNAL_FILE))
            .with_context(|| format!("cannot write the fix journal in {}", cycle_dir.display()))?;
        journal
            .append(&Fact::Started {
                fix_id: format!("{fix_id}-c{cycle}"),
                target: tree.display().to_string(),
                source_report: report_path.display().to_string(),
                findings: targets.iter().map(|t| t.finding.id.clone()).collect(),
                base: String::new(),
            })
            .with_context(|| format!("cannot write the fix journal in {}", cycle_dir.display()))?;
        let job = fix_job(
            &models,
            targets,
            pack.clone(),
            work.path().join(format!("fix-{cycle}")),
            test_command(&test_cmd, &isolation, args.test_timeout),
            analyzers.clone(),
            edit_bounds,
        );
        let run = quorum_fix::run(job, &mut journal, Vec::new(), |line| {
            say(format!("cycle {cycle}: {line}"))
        })
        .await
        .map_err(|e| incomplete(format!("cycle {cycle}'s fix run failed: {e}")))?;
        journal
            .append(&Fact::Finished)
            .with_context(|| format!("cannot write the fix journal in {}", cycle_dir.display()))?;
        if cycle == 1 {
            baseline_failing = run
                .baseline
                .as_ref()
                .map(|b| b.failing.iter().cloned().collect())
                .unwrap_or_default();
        }
        add_usage(&mut usage, &run.usage);
        last_stop = run.stop;
        let kept_now = run.kept.len();
        for mut e in run.entries {
            if e.status == FixStatus::Unfixed {
                given_up.insert(identity(&e.file, &e.title));
            }
            e.cycle = Some(cycle);
            entries.push(e);
        }
        for mut k in run.kept {
            k.finding_id = format!("c{cycle}/{}", k.finding_id);
            kept.push(k);
        }
        cycles.push(CycleEntry {
            cycle,
            review: report_path.display().to_string(),
            review_flow_id: report.flow_id.clone(),
            found,
            kept: kept_now,
            stop: Some(run.stop),
        });
        say(format!("cycle {cycle}: kept {kept_now} of {found} fix(es)"));
        if (kept_now as u32) < plan.min_kept {
            ended = CyclesStop::BelowThreshold;
            break;
        }
        if cycle == plan.cycles {
            break;
        }
        // The next cycle reviews the target with every fix kept so far.
        let next = work.path().join(format!("tree-{}", cycle + 1));
        materialize(&next, &base_pack, &kept)?;
        let (next_pack, _) = crate::target::snapshot(&next, &settings, None, None)?;
        tree = next;
        pack = next_pack;
    }

    let mut fix_report = FixReport {
        schema_version: FIX_REPORT_SCHEMA_VERSION,
        fix_id: fix_id.clone(),
        source_report: cycles.first().map(|c| c.review.clone()).unwrap_or_default(),
        source_flow_id: first_flow_id,
        target: root.display().to_string(),
        base_commit: None,
        branch: None,
        patched_copy: None,
        test_command: test_cmd.clone(),
        sandbox: isolation
            .as_ref()
            .map(quorum_fix::sandbox::Isolation::describe)
            .unwrap_or_else(|| "no test command".into()),
        baseline_failing,
        stop: last_stop,
        fixes: entries,
        usage,
        cycles,
        cycles_stop: Some(ended),
    };
    write_outputs(&root, &base_pack, &out_dir, &kept, &mut fix_report)?;
    let place = match (&fix_report.branch, &fix_report.patched_copy) {
        (Some(b), _) => format!("; branch {b}"),
        (None, Some(c)) => format!("; patched copy {c}"),
        _ => String::new(),
    };
    let unfixed = fix_report
        .fixes
        .iter()
        .filter(|f| f.status == FixStatus::Unfixed)
        .count();
    println!(
        "quorum: {} cycle(s): fixed {} finding(s), {unfixed} left unfixed{place}; {}",
        fix_report.cycles.len(),
        fix_report.kept(),
        out_dir.join("fix-report.md").display()
    );
    Ok(if unfixed == 0 {
        ExitCode::Clean
    } else {
        ExitCode::Findings
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_is_the_same_across_cycles_by_file_and_title() {
        assert_eq!(
            identity("app.py", "Weak hash "),
            identity("app.py", "weak hash")
        );
        assert_ne!(identity("a.py", "x"), identity("b.py", "x"));
    }
}
