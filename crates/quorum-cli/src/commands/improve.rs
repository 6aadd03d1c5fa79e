//! `quorum fix PATH --flow FLOW`: self-improvement in cycles (seed 000 §7). Each cycle reviews
//! the tree with the flow, fixes what the review confirmed (every fix made in a private worktree
//! and kept only when the oracles accept it), and hands the fixed tree to the next cycle, until
//! a cycle keeps fewer fixes than the flow's `improve.min_kept` or its `cycles` ran. The kept
//! fixes of every cycle end up on one branch (or one patched copy) of the target, in order.

use super::fix::{
    bounds, fix_job, fix_models, test_command, test_oracle, tests_line, write_outputs, RunShape,
};
use crate::args::{FixArgs, ReviewArgs};
use crate::exit::{incomplete, ExitCode};
use crate::local::drive::drive;
use crate::local::prepare::{prepare_review, Prepared};
use crate::setup::{data_dir, load_settings};
use anyhow::{bail, Context, Result};
use quorum_core::fixing::cycles::{identity, CrossCycle, Identity};
use quorum_core::fixing::fix_loop::{StopReason, Unfixed};
use quorum_core::fixing::fix_report::{
    CycleEntry, CyclesStop, FixEntry, FixReport, FixStatus, FixUsage, FIX_REPORT_SCHEMA_VERSION,
};
use quorum_core::fixing::select::{select, Selection};
use quorum_core::flows::flow::{Flow, Improve};
use quorum_core::pack::ContextPack;
use quorum_core::report::Report;
use quorum_core::review::finding::Severity;
use quorum_fix::journal::{Fact, Journal, StoredChange, JOURNAL_FILE};
use quorum_fix::worktree::FileChange;
use quorum_fix::KeptFix;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::Write as _;
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

fn add_usage(total: &mut FixUsage, run: &FixUsage) {
    total.attempts += run.attempts;
    total.llm_calls += run.llm_calls;
    total.tokens_in += run.tokens_in;
    total.tokens_out += run.tokens_out;
    total.wall_ms += run.wall_ms;
}

/// The run's identity in its output directory, written before the first cycle.
const RUN_FILE: &str = "improve.json";
/// A finished cycle's facts, in its own directory, written (synced) before the next cycle starts.
const CYCLE_FILE: &str = "cycle.json";

#[derive(Debug, Serialize, Deserialize)]
struct RunRecord {
    fix_id: String,
    target: String,
    flow: String,
    /// A digest of the target's snapshot: a resume must start from the same tree.
    base: String,
}

/// A kept fix as a cycle record stores it.
#[derive(Debug, Serialize, Deserialize)]
struct KeptRecord {
    finding_id: String,
    title: String,
    /// The fixed finding's identity across cycles (absent in records of older runs).
    #[serde(default)]
    identity: Option<Identity>,
    changes: Vec<StoredChange>,
    oracles: Vec<String>,
}

/// Everything a finished cycle contributes to the run.
#[derive(Debug, Serialize, Deserialize)]
struct CycleRecord {
    entry: CycleEntry,
    fixes: Vec<FixEntry>,
    kept: Vec<KeptRecord>,
    usage: FixUsage,
    baseline_failing: Vec<String>,
    /// The findings this cycle gave up, so later cycles do not try them again.
    given_up: Vec<Identity>,
    /// Why the run ends with this cycle (absent: the next cycle runs).
    ended: Option<CyclesStop>,
}

/// Write `body` to `path` so that a reader (a resume after a kill) sees all of it or nothing:
/// a synced temporary file renamed over it, and the directory synced.
fn write_durably(path: &Path, body: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

fn read_record<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is damaged: pass another --out for a new run",
            path.display()
        )
    })
}

/// The oracle names a kept fix's commit message uses, as the driver spells them.
fn oracle_name(name: &str) -> &'static str {
    match name {
        "tests" => "tests",
        "analyzer" => "analyzer",
        "blind verifier" => "blind verifier",
        _ => "an oracle",
    }
}

/// The run so far: what every finished cycle contributed.
#[derive(Default)]
struct Progress {
    kept: Vec<KeptFix>,
    entries: Vec<FixEntry>,
    cycles: Vec<CycleEntry>,
    usage: FixUsage,
    given_up: BTreeSet<Identity>,
    /// What the cycles fixed, and each changed file's contents after each.
    cross: CrossCycle,
    baseline_failing: Option<Vec<String>>,
    last_stop: Option<StopReason>,
}

impl Progress {
    fn absorb(&mut self, record: &CycleRecord) {
        self.given_up.extend(record.given_up.iter().cloned());
        self.entries.extend(record.fixes.iter().cloned());
        undone_by(&mut self.cross, record.entry.cycle, &record.kept);
        for k in &record.kept {
            self.kept.push(KeptFix {
                finding_id: k.finding_id.clone(),
                title: k.title.clone(),
                changes: k.changes.iter().map(FileChange::from).collect(),
                oracles: k.oracles.iter().map(|o| oracle_name(o)).collect(),
            });
        }
        add_usage(&mut self.usage, &record.usage);
        if self.baseline_failing.is_none() && record.entry.stop.is_some() {
            self.baseline_failing = Some(record.baseline_failing.clone());
        }
        if record.entry.stop.is_some() {
            self.last_stop = record.entry.stop;
        }
        self.cycles.push(record.entry.clone());
    }
}

/// Feeds a cycle's kept fixes to `cross`: the findings they fixed, and the files they left,
/// each file found back at an earlier cycle's content returned.
fn undone_by(
    cross: &mut CrossCycle,
    cycle: u32,
    kept: &[KeptRecord],
) -> Vec<quorum_core::fixing::cycles::Returned> {
    let mut back = Vec::new();
    for k in kept {
        if let Some(id) = &k.identity {
            cross.kept(cycle, id.clone());
        }
        for c in &k.changes {
            let c = FileChange::from(c);
            back.extend(cross.changed(cycle, &c.path, c.before.as_deref(), &c.after));
        }
    }
    back
}

pub async fn improve(args: FixArgs, flow_name: &str) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    crate::client::set_api_keepalive(settings.api.keepalive());
    let root = super::fix::target_root(&args.path, "the directory to improve")?;
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
    let (test_cmd, isolation) = test_oracle(
        args.test_cmd.as_deref(),
        args.unsandboxed,
        args.trust_repo_config,
        &root,
    )
    .await?;
    super::fix::require_an_oracle(&args, test_cmd.as_deref(), &settings)?;
    let (base_pack, _) = crate::target::snapshot(&root, &settings, None, None)?;
    let base_digest = super::fix::pack_digest(&base_pack);

    // A new run, or the interrupted one in --out.
    let resuming = args.resume;
    let (fix_id, out_dir) = if resuming {
        let out_dir = args.out.clone().expect("--resume requires --out");
        let run_path = out_dir.join(RUN_FILE);
        if !run_path.exists() {
            bail!(
                "--resume: {} holds no self-improvement run ({RUN_FILE} is missing)",
                out_dir.display()
            );
        }
        let run: RunRecord = read_record(&run_path)?;
        if out_dir.join("fix-report.json").exists() {
            bail!(
                "the self-improvement run {} in {} has finished; pass another --out for a new one",
                run.fix_id,
                out_dir.display()
            );
        }
        if run.target != root.display().to_string() {
            bail!(
                "the run {} in {} was of {}, not {}",
                run.fix_id,
                out_dir.display(),
                run.target,
                root.display()
            );
        }
        if run.base != base_digest {
            bail!(
                "the target changed since the run {} started, so its kept fixes cannot be re-applied; start a new run with another --out",
                run.fix_id
            );
        }
        if run.flow != flow.name {
            bail!(
                "the run {} was started with flow {}, not {}: resume it with --flow {}",
                run.fix_id,
                run.flow,
                flow.name,
                run.flow
            );
        }
        (run.fix_id, out_dir.canonicalize()?)
    } else {
        let fix_id = super::fix::new_fix_id();
        let out_dir = args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("quorum-out").join(&fix_id));
        if out_dir.join(RUN_FILE).exists() {
            bail!(
                "{} holds a self-improvement run: continue it with --resume, or pass another --out",
                out_dir.display()
            );
        }
        if out_dir.join(JOURNAL_FILE).exists() || out_dir.join("fix-report.json").exists() {
            bail!(
                "{} already holds a fix run: pass another --out",
                out_dir.display()
            );
        }
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("cannot create the output directory {}", out_dir.display()))?;
        let out_dir = out_dir.canonicalize()?;
        let record = RunRecord {
            fix_id: fix_id.clone(),
            target: root.display().to_string(),
            flow: flow.name.clone(),
            base: base_digest.clone(),
        };
        write_durably(
            &out_dir.join(RUN_FILE),
            &serde_json::to_string_pretty(&record)?,
        )?;
        (fix_id, out_dir)
    };
    let (parallel, remote) = super::fix::fix_places(&args, args.quiet).await?;
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
        .context("cannot create a temporary directory for the fix worktrees")?;
    let quiet = args.quiet;
    let say = |line: String| {
        if !quiet {
            eprintln!("quorum: {line}");
        }
    };
    say(format!(
        "{} {} with flow {}: at most {} cycle(s), each fixing confirmed {:?}-or-higher findings with {}; tests: {}",
        if resuming { "resuming the improvement of" } else { "improving" },
        root.display(),
        flow.name,
        plan.cycles,
        min_severity,
        models.fixer_model,
        tests_line(&root, test_cmd.as_deref(), isolation.as_ref())
    ));

    let mut progress = Progress::default();
    let mut first_flow_id = String::new();
    let mut ended = CyclesStop::MaxCycles;
    for cycle in 1..=plan.cycles {
        let cycle_dir = out_dir.join(format!("cycle-{cycle}"));
        let record_path = cycle_dir.join(CYCLE_FILE);
        if resuming && record_path.exists() {
            let record: CycleRecord = read_record(&record_path)?;
            say(format!(
                "cycle {cycle}: finished before the interruption ({} fix(es) kept); not redone",
                record.entry.kept
            ));
            if cycle == 1 {
                first_flow_id = record.entry.review_flow_id.clone();
            }
            progress.absorb(&record);
            if let Some(end) = record.ended {
                ended = end;
                break;
            }
            continue;
        }
        std::fs::create_dir_all(&cycle_dir)
            .with_context(|| format!("cannot create {}", cycle_dir.display()))?;
        // The tree this cycle reviews: the target, then the target with every fix kept so far
        // (kept under the output directory, so an interrupted review of it can be resumed).
        let (tree, pack) = if cycle == 1 {
            (root.clone(), base_pack.clone())
        } else {
            let tree = cycle_dir.join("tree");
            materialize(&tree, &base_pack, &progress.kept)?;
            let tree = tree.canonicalize()?;
            let (pack, _) = crate::target::snapshot(&tree, &settings, None, None)?;
            (tree, pack)
        };
        let review_dir = cycle_dir.join("review");
        let report_path = review_dir.join("report.json");
        if resuming && report_path.exists() {
            say(format!(
                "cycle {cycle}: its review finished before the interruption"
            ));
        } else {
            say(format!(
                "cycle {cycle}/{}: reviewing {}",
                plan.cycles,
                if cycle == 1 {
                    "the target".to_string()
                } else {
                    format!(
                        "the target with the {} fix(es) kept so far",
                        progress.kept.len()
                    )
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
                resume: resuming,
                // A later cycle reviews a copy of the target: nothing to remember about it.
                no_memory: cycle > 1,
                ..Default::default()
            };
            match prepare_review(&review_args).await? {
                Prepared::Run(l) => {
                    drive(&l.data, l.ctx, None, &l.params, Some(&review_dir), quiet).await?;
                }
                Prepared::Resume(r) => {
                    say(format!("cycle {cycle}: continuing its interrupted review"));
                    super::resume::resume(r).await?;
                }
            }
        }
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
        let journal_path = cycle_dir.join(JOURNAL_FILE);
        let replay = if resuming && journal_path.exists() {
            Journal::read(&journal_path).map_err(|e| anyhow::anyhow!("{e}"))?
        } else {
            Vec::new()
        };
        let selection = match replay.first() {
            Some(Fact::Started { findings, .. }) => Selection::Ids(findings.clone()),
            _ => Selection::AtLeast(min_severity),
        };
        let mut targets = select(&report, &selection).map_err(|e| anyhow::anyhow!("{e}"))?;
        // Found again after an earlier cycle fixed it: a later change undid that fix.
        let mut circled: Vec<FixEntry> = Vec::new();
        if replay.is_empty() {
            targets.retain(|t| {
                let file = t.finding.file.as_deref().unwrap_or("");
                let id = identity(file, &t.finding.title, &t.finding.evidence);
                if let Some(earlier) = progress.cross.fixed_in(&id) {
                    say(format!(
                        "cycle {cycle}: {} ({}) was fixed in cycle {earlier} and is found again: a later change undid it; stopped as a circular fix",
                        t.finding.id, t.finding.title
                    ));
                    circled.push(FixEntry {
                        finding_id: t.finding.id.clone(),
                        title: t.finding.title.clone(),
                        file: file.to_string(),
                        status: FixStatus::Unfixed,
                        cycle: Some(cycle),
                        unfixed_because: Some(Unfixed::CircularFix),
                        fixed_in_cycle: Some(earlier),
                        commit: None,
                        files: Vec::new(),
                        attempts: Vec::new(),
                    });
                    return false;
                }
                let again = progress.given_up.contains(&id);
                if again {
                    say(format!(
                        "cycle {cycle}: not trying {} again ({} in {file} was given up in an earlier cycle)",
                        t.finding.id, t.finding.title
                    ));
                }
                pack.get(file).is_some() && !again
            });
        }
        let found = targets.len();
        let mut entry = CycleEntry {
            cycle,
            review: report_path.display().to_string(),
            review_flow_id: report.flow_id.clone(),
            found,
            kept: 0,
            stop: None,
        };
        if targets.is_empty() {
            say(format!("cycle {cycle}: nothing left to fix"));
            let record = CycleRecord {
                entry,
                fixes: circled,
                kept: Vec::new(),
                usage: FixUsage::default(),
                baseline_failing: Vec::new(),
                given_up: Vec::new(),
                ended: Some(CyclesStop::NothingToFix),
            };
            write_durably(&record_path, &serde_json::to_string_pretty(&record)?)?;
            progress.absorb(&record);
            ended = CyclesStop::NothingToFix;
            break;
        }
        say(format!(
            "cycle {cycle}: fixing {found} confirmed finding(s)"
        ));
        let mut journal = Journal::open(&journal_path)
            .with_context(|| format!("cannot write the fix journal in {}", cycle_dir.display()))?;
        if replay.is_empty() {
            journal
                .append(&Fact::Started {
                    fix_id: format!("{fix_id}-c{cycle}"),
                    target: tree.display().to_string(),
                    source_report: report_path.display().to_string(),
                    findings: targets.iter().map(|t| t.finding.id.clone()).collect(),
                    base: super::fix::pack_digest(&pack),
                })
                .with_context(|| {
                    format!("cannot write the fix journal in {}", cycle_dir.display())
                })?;
        }
        let identities: std::collections::BTreeMap<String, Identity> = targets
            .iter()
            .map(|t| {
                let f = &t.finding;
                let file = f.file.as_deref().unwrap_or("");
                (f.id.clone(), identity(file, &f.title, &f.evidence))
            })
            .collect();
        let job = fix_job(
            &format!("{fix_id}-c{cycle}"),
            &models,
            targets,
            pack.clone(),
            work.path().join(format!("fix-{cycle}")),
            RunShape {
                tests: test_command(&test_cmd, &isolation, args.test_timeout),
                analyzers: analyzers.clone(),
                bounds: edit_bounds,
                parallel,
                remote: remote.clone(),
            },
        );
        let run = quorum_fix::run(job, &mut journal, replay, |line| {
            say(format!("cycle {cycle}: {line}"))
        })
        .await
        .map_err(|e| incomplete(format!("cycle {cycle}'s fix run failed: {e}")))?;
        let kept_now = run.kept.len();
        entry.kept = kept_now;
        entry.stop = Some(run.stop);
        say(format!("cycle {cycle}: kept {kept_now} of {found} fix(es)"));
        let kept_records: Vec<KeptRecord> = run
            .kept
            .iter()
            .map(|k| KeptRecord {
                finding_id: format!("c{cycle}/{}", k.finding_id),
                title: k.title.clone(),
                identity: identities.get(&k.finding_id).cloned(),
                changes: k.changes.iter().map(StoredChange::from).collect(),
                oracles: k.oracles.iter().map(|o| o.to_string()).collect(),
            })
            .collect();
        // Kept changes that undo an earlier cycle's: the run stops, saying which cycles.
        let back = undone_by(&mut progress.cross.clone(), cycle, &kept_records);
        for b in &back {
            say(format!("cycle {cycle}: {}", b.describe()));
        }
        let ends = if !back.is_empty() {
            Some(CyclesStop::Circular)
        } else if (kept_now as u32) < plan.min_kept {
            Some(CyclesStop::BelowThreshold)
        } else if cycle == plan.cycles {
            Some(CyclesStop::MaxCycles)
        } else {
            None
        };
        let given_up = run
            .entries
            .iter()
            .filter(|e| e.status == FixStatus::Unfixed)
            .filter_map(|e| identities.get(&e.finding_id).cloned())
            .collect();
        let record = CycleRecord {
            entry,
            given_up,
            fixes: circled
                .into_iter()
                .chain(run.entries.into_iter().map(|mut e| {
                    e.cycle = Some(cycle);
                    e
                }))
                .collect(),
            kept: kept_records,
            usage: run.usage,
            baseline_failing: run
                .baseline
                .as_ref()
                .map(|b| b.failing.iter().cloned().collect())
                .unwrap_or_default(),
            ended: ends,
        };
        // The cycle's facts are stored before the next cycle builds on them.
        write_durably(&record_path, &serde_json::to_string_pretty(&record)?)?;
        journal
            .append(&Fact::Finished)
            .with_context(|| format!("cannot write the fix journal in {}", cycle_dir.display()))?;
        progress.absorb(&record);
        if let Some(end) = ends {
            ended = end;
            break;
        }
    }

    let Progress {
        kept,
        entries,
        cycles,
        usage,
        baseline_failing,
        last_stop,
        ..
    } = progress;
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
        baseline_failing: baseline_failing.unwrap_or_default(),
        stop: last_stop.unwrap_or(StopReason::Satisfied),
        fixes: entries,
        usage,
        cycles,
        cycles_stop: Some(ended),
    };
    write_outputs(&root, &base_pack, &out_dir, &kept, &mut fix_report)?;
    // The cycles' trees were copies of the target, kept only for a resume.
    for c in &fix_report.cycles {
        let _ = std::fs::remove_dir_all(out_dir.join(format!("cycle-{}", c.cycle)).join("tree"));
    }
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
