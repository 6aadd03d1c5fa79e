//! `quorum build PATH --spec SPEC`: increments toward a spec's acceptance criteria, each made
//! by a fresh builder in a private worktree and kept only when the tests pass and the
//! conformance judge finds more criteria met; delivered as a branch (git targets) or a patched
//! copy, with `build.patch` and the build report. Each finished run's facts go to the build
//! history, from which later runs learn their backstop.

use crate::args::BuildArgs;
use crate::commands::fix::{
    check_interrupted, deliver_commits, pack_digest, target_root, test_command, test_oracle,
    tests_line, Interrupted,
};
use crate::exit::{incomplete, ExitCode};
use crate::setup::{backend_configs, data_dir, load_settings, node_name, ready_backends};
use anyhow::{bail, Context, Result};
use quorum_core::fixing::build_history::{self, choose_backstop, Backstop, BuildRunFacts};
use quorum_core::fixing::build_loop::BuildStop;
use quorum_core::fixing::build_report::{BuildCriterion, BuildReport, BUILD_REPORT_SCHEMA_VERSION};
use quorum_core::fixing::edit::EditBounds;
use quorum_core::flows::flow::Flow;
use quorum_core::judging::conformance::{self, CriterionStatus};
use quorum_core::weaver::ContextBudget;
use quorum_fix::build::BUILD_JOURNAL_FILE;
use quorum_fix::conformance_judge::JudgeSetup;
use quorum_fix::journal::Journal;
use quorum_fix::sandbox::Isolation;
use quorum_fix::{BuildFact, BuildJob, ModelRoute};
use quorum_runtime::agent::{CallSpec, LoopLimits};
use std::path::{Path, PathBuf};

/// Output tokens of one builder turn.
const MAX_OUTPUT_TOKENS: u32 = 4096;
/// Context window assumed when the server does not say.
const DEFAULT_WINDOW: u32 = 8192;
/// The build history's file in the data directory.
const HISTORY_FILE: &str = "build-history.jsonl";

fn new_build_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!("build-{now}-{}", &rand[..6])
}

/// The flow whose conformance stage the judge borrows (instructions, batch, window).
fn judge_flow(settings: &crate::settings::Settings) -> Result<Flow> {
    let flows_dir = crate::settings::data_dir(&settings.flows_dir, "flows")?;
    let path = Flow::locate("conformance", &flows_dir)
        .map_err(|e| anyhow::anyhow!("quorum build judges with the conformance flow: {e}"))?;
    let yaml = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read flow {}", path.display()))?;
    Flow::parse(&yaml, &path).map_err(|e| anyhow::anyhow!("invalid flow: {e}"))
}

/// An interrupted build in `out_dir`: its journal's records, checked against this command.
fn interrupted(args: &BuildArgs, out_dir: &Path, root: &Path) -> Result<Option<Vec<BuildFact>>> {
    let path = out_dir.join(BUILD_JOURNAL_FILE);
    if args.out.is_none() || !path.exists() {
        if args.resume {
            bail!(
                "--resume: {} holds no build ({BUILD_JOURNAL_FILE} is missing)",
                out_dir.display()
            );
        }
        return Ok(None);
    }
    let facts: Vec<BuildFact> = Journal::read_records(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let Some(BuildFact::Started {
        build_id, target, ..
    }) = facts.first()
    else {
        bail!(
            "{} is not a build journal: pass another --out",
            path.display()
        );
    };
    check_interrupted(
        &Interrupted {
            run: "build",
            id: build_id,
            target,
            finished: facts.iter().any(|f| matches!(f, BuildFact::Finished)),
        },
        args.resume,
        out_dir,
        root,
    )?;
    Ok(Some(facts))
}

pub async fn build(args: BuildArgs) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    let root = target_root(&args.path, "the project to build in")?;
    let spec = crate::target::read_spec_file(&args.spec)?;
    let criteria = conformance::extract(&spec.text);
    if criteria.is_empty() {
        bail!(
            "the spec {} has no acceptance criteria in a form quorum reads: write them as a markdown checklist (- [ ] ...), numbered or identified requirements (1., REQ-1:), or MUST/SHALL lines",
            spec.path
        );
    }
    if args.max_files == 0 || args.max_lines == 0 {
        bail!("--max-files and --max-lines must be at least 1");
    }
    let out_arg = args.out.clone().unwrap_or_default();
    let replay = interrupted(&args, &out_arg, &root)?;

    let (pack, _scope) = crate::target::snapshot(&root, &settings, None, None)?;
    let spec = crate::target::place_spec(spec, &root, &pack);
    let base = pack_digest(&pack);
    let spec_digest = quorum_core::reuse::content_digest(&spec.text);
    let (build_id, recorded_backstop) = match replay.as_ref().and_then(|f| f.first()) {
        Some(BuildFact::Started {
            build_id,
            base: was,
            spec_digest: spec_was,
            backstop,
            ..
        }) => {
            if was != &base {
                bail!("the target changed since the build {build_id} started, so its kept increments cannot be re-applied; start a new build with another --out");
            }
            if spec_was != &spec_digest {
                bail!("the spec changed since the build {build_id} started; start a new build with another --out");
            }
            (build_id.clone(), Some(*backstop))
        }
        _ => (new_build_id(), None),
    };

    let (test_cmd, isolation) = test_oracle(
        args.test_cmd.as_deref(),
        args.unsandboxed,
        args.trust_repo_config,
        &root,
    )
    .await?;

    // The builder, and a judge apart from it.
    let configs = backend_configs(&args.backend, &settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend ollama=http://127.0.0.1:11434 (or openai=URL/v1), or add [[backends]] to the config");
    }
    let model = args
        .backend
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let node = node_name(&settings);
    let backends = ready_backends(&configs, &model, &settings.models, false, &node).await?;
    let builder = backends
        .select(quorum_core::models::TaskNeeds::new("build"), None)
        .map_err(|e| incomplete(format!("no model for the builder: {e}")))?;
    let explicit = args
        .judge_model
        .clone()
        .or_else(|| Some(settings.verifier_model.clone()))
        .filter(|m| !m.trim().is_empty());
    let (judge, _) = backends
        .select_verifier(explicit.as_deref(), std::slice::from_ref(&builder.model))
        .map_err(|e| {
            incomplete(format!(
                "no model for the conformance judge: {e} (pass --judge-model)"
            ))
        })?;
    let window = builder
        .client
        .context_window(&builder.model)
        .unwrap_or(DEFAULT_WINDOW);
    let builder_model = builder.model.clone();
    let judge_model = judge.model.clone();

    let data = data_dir(&args.backend.common, &settings);
    let history_path = data.root().join(HISTORY_FILE);
    let history = std::fs::read_to_string(&history_path)
        .map(|t| build_history::parse_history(&t))
        .unwrap_or_default();
    let backstop = match recorded_backstop {
        Some(n) => Backstop {
            iterations: n,
            source: build_history::BackstopSource::Recorded,
        },
        None => choose_backstop(&history, criteria.len(), args.max_iterations),
    };

    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("quorum-out").join(&build_id));
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create the output directory {}", out_dir.display()))?;
    let out_dir = out_dir.canonicalize()?;
    let work = tempfile::Builder::new()
        .prefix("quorum-build-")
        .tempdir()
        .context("cannot create a temporary directory for the worktree")?;
    let quiet = args.quiet;
    if !quiet {
        eprintln!(
            "quorum: building toward {} criteria of {} with {}, judged by {}; tests: {}; backstop: {}",
            criteria.len(),
            spec.path,
            builder_model,
            judge_model,
            tests_line(&root, test_cmd.as_deref(), isolation.as_ref()),
            backstop.describe(criteria.len())
        );
    }
    let mut journal = Journal::open(&out_dir.join(BUILD_JOURNAL_FILE))
        .with_context(|| format!("cannot write the build journal in {}", out_dir.display()))?;
    if replay.is_none() {
        journal
            .append_record(&BuildFact::Started {
                build_id: build_id.clone(),
                target: root.display().to_string(),
                spec: spec.path.clone(),
                spec_digest: spec_digest.clone(),
                base: base.clone(),
                criteria: criteria.clone(),
                backstop: backstop.iterations,
            })
            .with_context(|| format!("cannot write the build journal in {}", out_dir.display()))?;
    }
    let job = BuildJob {
        pack: pack.clone(),
        criteria: criteria.clone(),
        work_dir: work.path().to_path_buf(),
        builder: ModelRoute {
            client: builder.client,
            spec: CallSpec {
                model: builder_model.clone(),
                max_tokens: MAX_OUTPUT_TOKENS.min(window / 2),
                temperature: 0.2,
                num_ctx: None,
            },
        },
        loop_limits: LoopLimits {
            max_iterations: 8,
            budget: ContextBudget {
                context_tokens: window,
                output_tokens: MAX_OUTPUT_TOKENS.min(window / 2),
            },
            max_tool_calls_per_turn: 4,
            max_tool_result_tokens: 2_000,
        },
        judge: JudgeSetup {
            backends: backends.clone(),
            flow: judge_flow(&settings)?,
            spec: spec.clone(),
            model: judge_model.clone(),
            node,
        },
        tests: test_command(&test_cmd, &isolation, args.test_timeout),
        bounds: EditBounds {
            max_files: args.max_files,
            max_changed_lines: args.max_lines,
        },
        backstop: backstop.iterations,
        // About half the window, at ~3 characters a token, is the project's files.
        material_chars: (window.saturating_sub(MAX_OUTPUT_TOKENS.min(window / 2)) as usize) * 3 / 2,
    };
    let run = quorum_fix::run_build(job, &mut journal, replay.unwrap_or_default(), |line| {
        if !quiet {
            eprintln!("quorum: {line}");
        }
    })
    .await
    .map_err(|e| incomplete(format!("the build failed: {e}")))?;

    // Deliver the kept increments, then the report and the history.
    let squashed = quorum_fix::patch::squash(
        &run.kept
            .iter()
            .map(|k| k.changes.clone())
            .collect::<Vec<_>>(),
    );
    let patch_path = out_dir.join("build.patch");
    std::fs::write(&patch_path, quorum_fix::patch::unified(&squashed))
        .with_context(|| format!("cannot write {}", patch_path.display()))?;
    let mut report = BuildReport {
        schema_version: BUILD_REPORT_SCHEMA_VERSION,
        build_id: build_id.clone(),
        target: root.display().to_string(),
        spec: spec.path.clone(),
        base_commit: None,
        branch: None,
        patched_copy: None,
        builder_model: builder_model.clone(),
        judge_model: judge_model.clone(),
        test_command: test_cmd.clone(),
        sandbox: isolation
            .as_ref()
            .map(Isolation::describe)
            .unwrap_or_else(|| "no test command".into()),
        baseline_failing: run
            .baseline
            .as_ref()
            .map(|b| b.failing.iter().cloned().collect())
            .unwrap_or_default(),
        backstop: backstop.clone(),
        stop: run.stop,
        satisfied: run.stop == BuildStop::Satisfied,
        criteria: criteria
            .iter()
            .map(|c| {
                let judged = run.judgments.iter().find(|j| j.id == c.id);
                let met = judged.is_some_and(|j| j.judged && j.status == CriterionStatus::Met);
                BuildCriterion {
                    id: c.id.clone(),
                    text: c.text.clone(),
                    met,
                    met_at: run.met_at.get(&c.id).copied().filter(|_| met),
                    reason: judged
                        .filter(|_| !met)
                        .map(|j| j.reason.clone())
                        .unwrap_or_default(),
                }
            })
            .collect(),
        iterations: run.iterations.clone(),
        usage: run.usage.clone(),
    };
    if !run.kept.is_empty() {
        let commits = run
            .kept
            .iter()
            .map(|k| {
                (
                    format!(
                        "quorum build: increment {} meets {}\n\n{}\n\nKept after {} and the conformance judge ({judge_model}) found {} met.\n",
                        k.iteration,
                        k.newly_met.join(", "),
                        if k.summary.is_empty() { "(the builder gave no summary)" } else { &k.summary },
                        if test_cmd.is_some() { "the tests passed" } else { "no test command ran" },
                        k.newly_met.join(", ")
                    ),
                    k.changes.clone(),
                )
            })
            .collect();
        let delivered = deliver_commits(
            &root,
            &pack,
            &out_dir,
            &format!("quorum/{build_id}"),
            commits,
            &squashed,
            "build.patch",
        )?;
        for (k, id) in run.kept.iter().zip(&delivered.commits) {
            if let Some(e) = report
                .iterations
                .iter_mut()
                .find(|e| e.iteration == k.iteration)
            {
                e.commit = Some(id.clone());
            }
        }
        report.base_commit = delivered.base_commit;
        report.branch = delivered.branch;
        report.patched_copy = delivered.patched_copy;
    }
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(out_dir.join("build-report.json"), json + "\n")?;
    std::fs::write(out_dir.join("build-report.md"), report.to_markdown())?;
    if args.keep_worktree {
        let _ = std::fs::rename(work.path().join("worktree"), out_dir.join("worktree"));
    }
    record_history(
        &history_path,
        history,
        BuildRunFacts {
            build_id: build_id.clone(),
            criteria: criteria.len(),
            met: report.met(),
            met_on_base: run.met_on_base,
            iterations: run.usage.attempts,
            last_progress: run.last_progress,
            stop: run.stop,
            backstop: backstop.iterations,
            tokens_in: run.usage.tokens_in,
            tokens_out: run.usage.tokens_out,
            wall_ms: run.usage.wall_ms,
        },
    );

    let place = match (&report.branch, &report.patched_copy) {
        (Some(b), _) => format!("; branch {b}"),
        (None, Some(c)) => format!("; patched copy {c}"),
        _ => String::new(),
    };
    println!(
        "quorum: {} of {} criteria met ({}) after {} increment(s), {} kept{place}; {}",
        report.met(),
        report.criteria.len(),
        run.stop.as_str(),
        run.usage.attempts,
        report.kept(),
        out_dir.join("build-report.md").display()
    );
    Ok(if report.satisfied {
        ExitCode::Clean
    } else {
        ExitCode::Findings
    })
}

/// Add a finished run to the history (temp file and rename, so a kill leaves the old one).
/// A history that cannot be written costs the learning, not the build: it is said, not fatal.
fn record_history(path: &Path, history: Vec<BuildRunFacts>, run: BuildRunFacts) {
    let text = build_history::with_run(history, run);
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        eprintln!(
            "quorum: note: cannot record this build in {}: {e} (later builds will not learn from it)",
            path.display()
        );
    }
}
