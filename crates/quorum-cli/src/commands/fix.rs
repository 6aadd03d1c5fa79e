//! `quorum fix PATH --from REPORT.json`: the review's findings fixed in a private worktree,
//! each fix kept only when the independent oracles accept it, and the kept fixes delivered as
//! a branch (git targets), `fixes.patch`, a patched copy (other targets) and the fix report.

use crate::args::FixArgs;
use crate::exit::{incomplete, ExitCode};
use crate::setup::{backend_configs, data_dir, load_settings, node_name, ready_backends};
use anyhow::{bail, Context, Result};
use quorum_core::fixing::edit::EditBounds;
use quorum_core::fixing::fix_report::{FixReport, FIX_REPORT_SCHEMA_VERSION};
use quorum_core::fixing::select::{select, FixTarget, Selection};
use quorum_core::pack::ContextPack;
use quorum_core::report::Report;
use quorum_core::review::finding::Severity;
use quorum_fix::journal::{Fact, Journal, JOURNAL_FILE};
use quorum_fix::sandbox::{Isolation, TestCommand};
use quorum_fix::worktree::FileChange;
use quorum_fix::{FixJob, KeptFix, ModelRoute};
use quorum_runtime::agent::CallSpec;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Output tokens of one fixer or verifier turn.
const MAX_OUTPUT_TOKENS: u32 = 2048;
/// Context window assumed when the server does not say.
const DEFAULT_WINDOW: u32 = 8192;
/// Most files, and changed lines, one fix may touch unless the flags or the flow say otherwise.
const DEFAULT_MAX_FILES: usize = 3;
const DEFAULT_MAX_LINES: u32 = 60;

mod consent;

pub(crate) fn new_fix_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!("fix-{now}-{}", &rand[..6])
}

/// A digest of what the snapshot holds (every path and content hash): a resume must start
/// from the same base as the run it continues.
pub(crate) fn pack_digest(pack: &ContextPack) -> String {
    let listing: String = pack
        .files
        .values()
        .map(|f| format!("{}\0{}\n", f.path, f.hash))
        .collect();
    quorum_core::reuse::content_digest(&listing)
}

/// The test command a project's files suggest.
pub fn detect_test_command(root: &Path) -> Option<&'static str> {
    let has = |f: &str| root.join(f).is_file();
    if has("Cargo.toml") {
        Some("cargo test")
    } else if has("go.mod") {
        Some("go test ./...")
    } else if has("package.json") {
        Some("npm test")
    } else if has("pyproject.toml") || has("pytest.ini") || has("setup.cfg") || has("setup.py") {
        Some("python3 -m pytest -q")
    } else {
        None
    }
}

/// The test command (the user's, `auto`'s, or `[fix] test`'s) and the sandbox it runs in: the
/// test oracle runs the project's own code, so only a command the user gave or configured, and
/// never unsandboxed unless asked.
pub(crate) async fn test_oracle(
    test_cmd: Option<&str>,
    unsandboxed: bool,
    trust_repo_config: bool,
    root: &Path,
) -> Result<(Option<String>, Option<Isolation>)> {
    let repo_config = crate::target::repo_config_on_disk(root)?;
    let test_cmd = match test_cmd.map(str::trim) {
        Some("auto") => Some(detect_test_command(root).map(String::from).with_context(|| {
            format!("--test-cmd auto: no Cargo.toml, go.mod, package.json or pyproject.toml in {}; pass the command", root.display())
        })?),
        Some("") => bail!("--test-cmd is empty: pass the project's test command"),
        Some(c) => Some(c.to_string()),
        // A command the reviewed tree chose runs only with the user's consent.
        None => match repo_config.as_ref().and_then(|c| c.fix_test.clone()) {
            Some(c) => match consent::repo_command(&c, ".quorum.toml [fix] test", trust_repo_config)? {
                consent::Consent::Given => Some(c),
                consent::Consent::Declined => None,
            },
            None => None,
        },
    };
    let isolation = match &test_cmd {
        None => None,
        Some(_) if unsandboxed => Some(Isolation::None),
        Some(_) => Some(
            Isolation::detect()
                .await
                .context(quorum_fix::sandbox::NO_SANDBOX)?,
        ),
    };

    Ok((test_cmd, isolation))
}

/// A fix is kept only when an oracle other than the fixer accepts it: a run with none (no
/// verifier, no test command, no analyzers) would keep every edit unjudged, so it is refused.
pub(crate) fn require_an_oracle(
    args: &FixArgs,
    test_cmd: Option<&str>,
    settings: &crate::settings::Settings,
) -> Result<()> {
    if args.no_verifier && test_cmd.is_none() && (args.no_analyzers || !settings.analyzers.enabled)
    {
        bail!("--no-verifier with no test command and no analyzers leaves nothing to judge a fix by: drop --no-verifier, pass --test-cmd CMD, or turn the analyzers on");
    }
    Ok(())
}

/// The fix agent's model and the blind verifier's (another family where one is served).
pub(crate) struct FixModels {
    pub fixer: ModelRoute,
    pub fixer_model: String,
    pub window: u32,
    pub verifier: Option<ModelRoute>,
    /// The verifier model the user named (`--verifier-model` or the config's), for nodes.
    pub verifier_named: Option<String>,
}

pub(crate) async fn fix_models(
    args: &FixArgs,
    settings: &crate::settings::Settings,
) -> Result<FixModels> {
    let configs = backend_configs(&args.backend, settings)?;
    if configs.is_empty() {
        bail!("no backend configured: pass --backend ollama=http://127.0.0.1:11434 (or openai=URL/v1), or add [[backends]] to the config");
    }
    let model = args
        .backend
        .model
        .clone()
        .unwrap_or_else(|| settings.default_model.clone());
    let backends = ready_backends(
        &configs,
        &model,
        &settings.models,
        false,
        &node_name(settings),
    )
    .await?;
    let fixer = backends
        .select(quorum_core::models::TaskNeeds::new("fix"), None)
        .map_err(|e| incomplete(format!("no model for the fix agent: {e}")))?;
    let route = |client: quorum_llm::LlmClient, model: String, temperature: f32| {
        let window = client.context_window(&model).unwrap_or(DEFAULT_WINDOW);
        (
            ModelRoute {
                client,
                spec: CallSpec {
                    model,
                    max_tokens: MAX_OUTPUT_TOKENS,
                    temperature,
                    num_ctx: None,
                },
            },
            window,
        )
    };
    let explicit = args
        .verifier_model
        .clone()
        .or_else(|| Some(settings.verifier_model.clone()))
        .filter(|m| !m.trim().is_empty());
    let verifier = if args.no_verifier {
        None
    } else {
        let (chosen, _) = backends
            .select_verifier(explicit.as_deref(), std::slice::from_ref(&fixer.model))
            .map_err(|e| {
                incomplete(format!(
                    "no model for the blind verifier: {e} (or pass --no-verifier)"
                ))
            })?;
        if let Some(why) = quorum_core::fixing::fix_loop::dependence(&fixer.model, &chosen.model) {
            eprintln!(
                "quorum: note: the blind verifier is not independent here: {why}; each attempt's record says so (pass --verifier-model with a model of another family)"
            );
        }
        Some(route(chosen.client, chosen.model, 0.0).0)
    };
    let fixer_model = fixer.model.clone();
    let (fixer, window) = route(fixer.client, fixer.model, 0.2);

    Ok(FixModels {
        fixer,
        fixer_model,
        window,
        verifier,
        verifier_named: explicit.filter(|_| !args.no_verifier),
    })
}

/// How a fix run's tests will run, for its first line.
pub(crate) fn tests_line(
    root: &Path,
    test_cmd: Option<&str>,
    isolation: Option<&Isolation>,
) -> String {
    match (test_cmd, isolation) {
        (Some(c), Some(i)) => format!("`{c}` ({})", i.describe()),
        _ => match detect_test_command(root) {
            Some(d) => format!("none (pass --test-cmd auto to run `{d}`)"),
            None => "none (pass --test-cmd CMD)".into(),
        },
    }
}

/// The test oracle's command as the sandbox runs it.
pub(crate) fn test_command(
    test_cmd: &Option<String>,
    isolation: &Option<Isolation>,
    timeout_secs: u64,
) -> Option<TestCommand> {
    test_cmd.clone().map(|command| TestCommand {
        command,
        isolation: isolation.clone().unwrap_or(Isolation::None),
        timeout: Duration::from_secs(timeout_secs.max(1)),
        max_output: 64 * 1024,
        limits: quorum_fix::sandbox::Limits::default(),
    })
}

/// A fix's bounds: the flags, else the flow's `improve` block, else 3 files and 60 lines.
pub(crate) fn bounds(
    args: &FixArgs,
    flow: Option<&quorum_core::flows::flow::Improve>,
) -> EditBounds {
    EditBounds {
        max_files: args
            .max_files
            .or(flow.map(|f| f.max_files))
            .unwrap_or(DEFAULT_MAX_FILES),
        max_changed_lines: args
            .max_lines
            .or(flow.map(|f| f.max_lines))
            .unwrap_or(DEFAULT_MAX_LINES),
    }
}

/// How every fix run of one command runs: its checks, bounds and agents at once.
#[derive(Clone)]
pub(crate) struct RunShape {
    pub tests: Option<TestCommand>,
    pub analyzers: Option<quorum_runtime::analyzers::AnalyzerSetup>,
    pub bounds: EditBounds,
    /// Agents on this machine.
    pub parallel: u32,
    /// The cluster's nodes (`--cluster`).
    pub remote: Option<std::sync::Arc<dyn quorum_fix::remote::FixWorkers>>,
}

/// Where a command's fix attempts run: agents on this machine (`--jobs`; 1 by default, 0 with
/// `--cluster`) and the cluster's nodes, connected now so a bad URL or token fails before any
/// model call.
pub(crate) async fn fix_places(
    args: &FixArgs,
    quiet: bool,
) -> Result<(
    u32,
    Option<std::sync::Arc<dyn quorum_fix::remote::FixWorkers>>,
)> {
    if args.cluster.is_empty() {
        let jobs = args.jobs.unwrap_or(1);
        if jobs == 0 {
            bail!("--jobs 0 leaves no place to run fix agents: pass --jobs 1 or more, or --cluster URL");
        }
        return Ok((jobs, None));
    }
    let token = crate::client::api_token(args.token_file.as_deref())?;
    let nodes = crate::fix_cluster::ClusterFixers::connect(&args.cluster, &token).await?;
    if !quiet {
        eprintln!("quorum: fix attempts go to {}", nodes.describe());
    }
    Ok((args.jobs.unwrap_or(0), Some(std::sync::Arc::new(nodes))))
}

/// One fix run's job.
pub(crate) fn fix_job(
    run_id: &str,
    models: &FixModels,
    targets: Vec<FixTarget>,
    pack: ContextPack,
    work_dir: PathBuf,
    shape: RunShape,
) -> FixJob {
    FixJob {
        targets,
        pack,
        work_dir,
        fixer: models.fixer.clone(),
        loop_limits: quorum_fix::remote::agent_limits(models.window, MAX_OUTPUT_TOKENS),
        verifier: models.verifier.clone(),
        verifier_model: models.verifier_named.clone(),
        tests: shape.tests,
        analyzers: shape.analyzers,
        bounds: shape.bounds,
        parallel: shape.parallel,
        remote: shape.remote,
        run_id: run_id.to_string(),
    }
}

/// An interrupted run's journal found in the output directory: what its first record says.
pub(crate) struct Interrupted<'a> {
    /// "fix run" or "build", for the messages.
    pub run: &'a str,
    pub id: &'a str,
    /// The target the run was started on.
    pub target: &'a str,
    pub finished: bool,
}

/// Whether this command may continue the interrupted run in `out_dir`: not finished, asked
/// for with --resume, and of the same target; otherwise one line saying what to do.
pub(crate) fn check_interrupted(
    found: &Interrupted<'_>,
    resume: bool,
    out_dir: &Path,
    root: &Path,
) -> Result<()> {
    let Interrupted {
        run, id, target, ..
    } = found;
    if found.finished {
        bail!(
            "the {run} {id} in {} has finished; pass another --out for a new one",
            out_dir.display()
        );
    }
    if !resume {
        bail!(
            "{} holds the interrupted {run} {id}: continue it with --resume, or pass another --out",
            out_dir.display()
        );
    }
    if *target != root.display().to_string() {
        bail!(
            "the {run} {id} in {} was of {target}, not {}",
            out_dir.display(),
            root.display()
        );
    }
    Ok(())
}

/// The target directory, resolved; `what` names it in the error ("pass {what}").
pub(crate) fn target_root(target: &Path, what: &str) -> Result<PathBuf> {
    if !target.is_dir() {
        bail!("{} is not a directory: pass {what}", target.display());
    }
    target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))
}

pub async fn fix(args: FixArgs) -> Result<ExitCode> {
    let Some(from) = args.from.clone() else {
        bail!("quorum fix needs --from REPORT.json (the review to fix), or --flow FLOW to review and fix in cycles");
    };
    let settings = load_settings(args.backend.common.config.as_deref())?;
    let root = target_root(&args.path, "the directory the review was of")?;
    crate::client::set_api_keepalive(settings.api.keepalive());
    let text = std::fs::read_to_string(&from)
        .with_context(|| format!("cannot read --from {}", from.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("--from {} is not a quorum report.json", from.display()))?;
    // The output directory, and an interrupted run's journal in it.
    let out_dir = args.out.clone().unwrap_or_default();
    let journal_path = out_dir.join(JOURNAL_FILE);
    let replay = if args.out.is_some() && journal_path.exists() {
        let facts = Journal::read(&journal_path).map_err(|e| anyhow::anyhow!("{e}"))?;
        let Some(Fact::Started {
            fix_id,
            target,
            findings,
            ..
        }) = facts.first().cloned()
        else {
            bail!(
                "{} is not a fix journal: pass another --out",
                journal_path.display()
            );
        };
        check_interrupted(
            &Interrupted {
                run: "fix run",
                id: &fix_id,
                target: &target,
                finished: facts.iter().any(|f| matches!(f, Fact::Finished)),
            },
            args.resume,
            &out_dir,
            &root,
        )?;
        Some((fix_id, findings, facts))
    } else {
        if args.resume {
            bail!(
                "--resume: {} holds no fix run ({} is missing)",
                out_dir.display(),
                JOURNAL_FILE
            );
        }
        None
    };
    let selection = if let Some((_, findings, _)) = &replay {
        Selection::Ids(findings.clone())
    } else if !args.findings.is_empty() {
        Selection::Ids(args.findings.iter().map(|s| s.trim().to_string()).collect())
    } else {
        let text = args.min_severity.as_deref().unwrap_or("P2");
        Selection::AtLeast(
            Severity::parse_lenient(text)
                .with_context(|| format!("--min-severity {text:?}: use P0, P1, P2 or P3"))?,
        )
    };
    let mut targets = select(&report, &selection).map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.max_files == Some(0) || args.max_lines == Some(0) {
        bail!("--max-files and --max-lines must be at least 1");
    }

    let (test_cmd, isolation) = test_oracle(
        args.test_cmd.as_deref(),
        args.unsandboxed,
        args.trust_repo_config,
        &root,
    )
    .await?;
    require_an_oracle(&args, test_cmd.as_deref(), &settings)?;

    let (pack, _scope) = crate::target::snapshot(&root, &settings, None, None)?;
    let base_digest = pack_digest(&pack);
    if let Some((fix_id, _, facts)) = &replay {
        let recorded = facts.iter().find_map(|f| match f {
            Fact::Started { base, .. } => Some(base.clone()),
            _ => None,
        });
        if recorded.as_deref() != Some(base_digest.as_str()) {
            bail!(
                "the target changed since the fix run {fix_id} started, so its kept fixes cannot be re-applied; start a new run with another --out"
            );
        }
    }
    targets.retain(|t| {
        let file = t.finding.file.as_deref().unwrap_or("");
        let present = pack.get(file).is_some();
        if !present {
            eprintln!(
                "quorum: skipping {}: {file} is not in the target any more (removed, or excluded from the snapshot)",
                t.finding.id
            );
        }
        present
    });
    if targets.is_empty() {
        println!(
            "quorum: nothing to fix: {} has no {} finding whose file is in the target (pass --findings ID,... to pick others)",
            from.display(),
            match &selection {
                Selection::AtLeast(s) => format!("confirmed {s:?}-or-higher"),
                Selection::Ids(_) => "selected".into(),
            }
        );
        return Ok(ExitCode::Clean);
    }
    if let (Some(was), Some(now)) = (&report.target.head_sha, &pack.head_sha) {
        if was != now {
            eprintln!(
                "quorum: note: the report was made at {}, the target is now at {}; fixes start from what is there now",
                &was[..was.len().min(12)],
                &now[..now.len().min(12)]
            );
        }
    }

    // The cluster first: a bad URL or token is told before any model is probed.
    let (parallel, remote) = fix_places(&args, args.quiet).await?;
    let models = fix_models(&args, &settings).await?;

    let data = data_dir(&args.backend.common, &settings);
    let analyzers = if args.no_analyzers {
        None
    } else {
        settings.analyzers.setup(data.root())?
    };
    let (fix_id, replay) = match replay {
        Some((fix_id, _, facts)) => (fix_id, facts),
        None => (new_fix_id(), Vec::new()),
    };
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("quorum-out").join(&fix_id));
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create the output directory {}", out_dir.display()))?;
    let out_dir = out_dir.canonicalize()?;
    if out_dir.starts_with(&root) && args.out.is_some() {
        eprintln!(
            "quorum: note: the output directory is inside the target; it is not part of any fix"
        );
    }
    let work = tempfile::Builder::new()
        .prefix("quorum-fix-")
        .tempdir()
        .context("cannot create a temporary directory for the worktree")?;
    let quiet = args.quiet;
    if !quiet {
        eprintln!(
            "quorum: fixing {} finding(s) from {} with {}; tests: {}",
            targets.len(),
            from.display(),
            models.fixer_model,
            tests_line(&root, test_cmd.as_deref(), isolation.as_ref())
        );
    }
    let job = fix_job(
        &fix_id,
        &models,
        targets.clone(),
        pack.clone(),
        work.path().to_path_buf(),
        RunShape {
            tests: test_command(&test_cmd, &isolation, args.test_timeout),
            analyzers,
            bounds: bounds(&args, None),
            parallel,
            remote,
        },
    );
    let mut journal = Journal::open(&out_dir.join(JOURNAL_FILE))
        .with_context(|| format!("cannot write the fix journal in {}", out_dir.display()))?;
    if replay.is_empty() {
        journal
            .append(&Fact::Started {
                fix_id: fix_id.clone(),
                target: root.display().to_string(),
                source_report: from.display().to_string(),
                findings: targets.iter().map(|t| t.finding.id.clone()).collect(),
                base: base_digest.clone(),
            })
            .with_context(|| format!("cannot write the fix journal in {}", out_dir.display()))?;
    }
    let run = quorum_fix::run(job, &mut journal, replay, |line| {
        if !quiet {
            eprintln!("quorum: {line}");
        }
    })
    .await
    .map_err(|e| incomplete(format!("the fix run failed: {e}")))?;

    let mut fix_report = FixReport {
        schema_version: FIX_REPORT_SCHEMA_VERSION,
        fix_id: fix_id.clone(),
        source_report: from.display().to_string(),
        source_flow_id: report.flow_id.clone(),
        target: root.display().to_string(),
        base_commit: None,
        branch: None,
        patched_copy: None,
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
        stop: run.stop,
        fixes: run.entries,
        usage: run.usage,
        cycles: Vec::new(),
        cycles_stop: None,
    };
    write_outputs(&root, &pack, &out_dir, &run.kept, &mut fix_report)?;
    if args.keep_worktree {
        let kept_at = out_dir.join("worktree");
        let _ = std::fs::rename(work.path().join("worktree"), &kept_at);
    }
    let kept = fix_report.kept();
    let total = fix_report.fixes.len();
    let place = match (&fix_report.branch, &fix_report.patched_copy) {
        (Some(b), _) => format!("; branch {b}"),
        (None, Some(c)) => format!("; patched copy {c}"),
        _ => String::new(),
    };
    println!(
        "quorum: fixed {kept} of {total} finding(s) in {} attempt(s){place}; {}",
        fix_report.usage.attempts,
        out_dir.join("fix-report.md").display()
    );
    Ok(if kept == total {
        ExitCode::Clean
    } else {
        ExitCode::Findings
    })
}

/// Write `fixes.patch`, deliver the kept fixes (a branch or a patched copy of `pack`'s
/// target), and write `fix-report.json` and `fix-report.md`.
pub(crate) fn write_outputs(
    root: &Path,
    pack: &ContextPack,
    out_dir: &Path,
    kept: &[KeptFix],
    report: &mut FixReport,
) -> Result<()> {
    let squashed =
        quorum_fix::patch::squash(&kept.iter().map(|k| k.changes.clone()).collect::<Vec<_>>());
    let patch_path = out_dir.join("fixes.patch");
    std::fs::write(&patch_path, quorum_fix::patch::unified(&squashed))
        .with_context(|| format!("cannot write {}", patch_path.display()))?;
    if !kept.is_empty() {
        let fix_id = report.fix_id.clone();
        deliver(root, pack, out_dir, &fix_id, kept, &squashed, report)?;
    }
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(out_dir.join("fix-report.json"), json + "\n")?;
    std::fs::write(out_dir.join("fix-report.md"), report.to_markdown())?;
    Ok(())
}

/// Deliver the kept fixes: a branch when the target is a clean git checkout of the touched
/// files, else a patched copy of the target.
fn deliver(
    root: &Path,
    pack: &ContextPack,
    out_dir: &Path,
    fix_id: &str,
    kept: &[KeptFix],
    squashed: &[FileChange],
    report: &mut FixReport,
) -> Result<()> {
    let commits: Vec<(String, Vec<FileChange>)> = kept
        .iter()
        .map(|k| {
            (
                format!(
                    "quorum fix {}: {}\n\nFinding {} of the review; kept after passing: {}.\n",
                    k.finding_id,
                    k.title,
                    k.finding_id,
                    if k.oracles.is_empty() {
                        "no oracle applied".to_string()
                    } else {
                        k.oracles.join(", ")
                    }
                ),
                k.changes.clone(),
            )
        })
        .collect();
    let delivered = deliver_commits(
        root,
        pack,
        out_dir,
        &format!("quorum/{fix_id}"),
        commits,
        squashed,
        "fixes.patch",
    )?;
    for (k, id) in kept.iter().zip(delivered.commits) {
        if let Some(e) = report.fixes.iter_mut().find(|e| e.label() == k.finding_id) {
            e.commit = Some(id);
        }
    }
    report.base_commit = delivered.base_commit;
    report.branch = delivered.branch;
    report.patched_copy = delivered.patched_copy;
    Ok(())
}

/// Where kept changes went.
#[derive(Debug, Default)]
pub(crate) struct Delivered {
    pub base_commit: Option<String>,
    pub branch: Option<String>,
    /// The commit of each of the changes, in order (a branch only).
    pub commits: Vec<String>,
    pub patched_copy: Option<String>,
}

/// Deliver kept changes (a commit message and the files of each, in order; `squashed`: all of
/// them as one change): on `branch` when the target is a git checkout whose touched files are
/// as HEAD has them, else as a patched copy of the target in `out_dir`. `patch_name` is the
/// patch file in `out_dir` the user is pointed to when no branch can be written.
pub(crate) fn deliver_commits(
    root: &Path,
    pack: &ContextPack,
    out_dir: &Path,
    branch: &str,
    commits: Vec<(String, Vec<FileChange>)>,
    squashed: &[FileChange],
    patch_name: &str,
) -> Result<Delivered> {
    let mut delivered = Delivered::default();
    match quorum_git::Repo::discover(root) {
        Ok(repo) => {
            let head = repo.head_commit_id().map_err(|e| anyhow::anyhow!("{e}"))?;
            delivered.base_commit = Some(head.to_string());
            // A change is committed on HEAD's tree, so the files it touched must be as HEAD has them.
            let dirty: Vec<&str> = squashed
                .iter()
                .filter(|c| {
                    let at_head = repo.read_at(head, &c.path).ok().flatten();
                    at_head.as_deref() != c.before.as_deref().map(str::as_bytes)
                })
                .map(|c| c.path.as_str())
                .collect();
            if !dirty.is_empty() {
                eprintln!(
                    "quorum: note: {} differ(s) from HEAD (uncommitted changes), so no branch was written; apply {} instead",
                    dirty.join(", "),
                    out_dir.join(patch_name).display()
                );
                return Ok(delivered);
            }
            let commits: Vec<quorum_git::FixCommit> = commits
                .into_iter()
                .map(|(message, changes)| quorum_git::FixCommit {
                    message,
                    files: changes
                        .into_iter()
                        .map(|c| (c.path, c.after.into_bytes()))
                        .collect(),
                })
                .collect();
            delivered.commits = repo
                .write_branch(head, branch, &commits)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            delivered.branch = Some(branch.to_string());
        }
        Err(_) => {
            let copy = out_dir.join("patched");
            std::fs::create_dir_all(&copy)
                .with_context(|| format!("cannot create {}", copy.display()))?;
            for (path, f) in &pack.files {
                quorum_fix::worktree::write_confined(&copy, path, &f.content)?;
            }
            for c in squashed {
                quorum_fix::worktree::write_confined(&copy, &c.path, &c.after)?;
            }
            delivered.patched_copy = Some(copy.display().to_string());
        }
    }
    Ok(delivered)
}
