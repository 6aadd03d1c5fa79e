//! Deterministic analyzers end to end, in process: a fake tool on a PATH the test controls
//! (never the machine's, so an installed ruff changes nothing), its hits as leads in the
//! specialist's recorded prompt and as candidate findings in the verifier's, credited to the
//! tool in the report; a hit off the end of its file dropped by grounding; an absent tool
//! noted; a hanging tool killed at its timeout while the review still completes.
#![cfg(unix)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::analyzer::{AnalyzerCatalog, Leads};
use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::report::{Report, ReviewStatus};
use quorum_core::review::finding::Verdict;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::analyzers::{run_all, RunOptions};
use quorum_runtime::{Backends, ReviewContext};
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::ScriptedServer;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn context(server: &ScriptedServer, leads: Leads) -> Arc<ReviewContext> {
    context_with(server, leads, |_| {})
}

fn context_with(
    server: &ScriptedServer,
    leads: Leads,
    tweak: impl FnOnce(&mut Flow),
) -> Arc<ReviewContext> {
    let scope = quorum_core::scope::ReviewScope {
        analyzers: leads,
        ..Default::default()
    };
    ContextBuilder::with_pack(server, pack())
        .tweak(tweak)
        .scope(scope)
        .shared()
}

fn pack() -> ContextPack {
    ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap()
}

async fn analyze(catalog: &AnalyzerCatalog, bin: &Path, timeout: Duration) -> Leads {
    let opts = RunOptions {
        timeout,
        path: Some(bin.as_os_str().to_owned()),
        ..RunOptions::default()
    };
    tokio::time::timeout(Duration::from_secs(60), run_all(catalog, &pack(), &opts))
        .await
        .expect("the analyzers hung")
}

async fn review(ctx: Arc<ReviewContext>) -> Report {
    tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fake_analyzers_hits_reach_the_prompts_and_are_verified_like_findings() {
    let bin = tempfile::tempdir().unwrap();
    fake_ruff(bin.path());
    let leads = analyze(
        &AnalyzerCatalog::shipped().unwrap(),
        bin.path(),
        Duration::from_secs(30),
    )
    .await;

    // Only the fake ran: the shipped catalog's other tools are absent from this PATH, or have
    // nothing to look at, and say so.
    let run = |name: &str| leads.runs.iter().find(|r| r.name == name).unwrap();
    assert!(run("ruff").ran, "{:?}", run("ruff"));
    assert_eq!(run("ruff").hits, 3);
    assert!(!run("bandit").ran);
    assert_eq!(
        run("bandit").skipped_reason.as_deref(),
        Some("bandit is not on PATH")
    );
    assert!(run("semgrep")
        .skipped_reason
        .as_deref()
        .unwrap()
        .contains(".semgrep.yml"));
    assert_eq!(leads.leads.len(), 3);
    assert_eq!(
        leads.leads[0].file, "src/db.py",
        "made relative to the copy"
    );

    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let report = review(context(&server, leads)).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let reqs = server.requests();

    // The planner was told which files were flagged.
    let planner = reqs
        .iter()
        .find(|r| r.system.contains("You are the planner"))
        .unwrap();
    assert!(
        planner
            .text
            .contains("- src/db.py: 3 leads (ruff B991, ruff B992, ruff B993)"),
        "{}",
        planner.text
    );

    // The lead reached the prompt of the specialist whose files it touches, delimited as data.
    let sec = reqs
        .iter()
        .find(|r| r.system.contains("You are security_sentinel"))
        .expect("a security specialist request");
    assert!(
        sec.text.contains("## Leads from static analyzers"),
        "{}",
        sec.text
    );
    let listed = format!("- src/db.py:{PLANTED_LINE} [ruff B991] {PLANTED_MESSAGE}");
    let block = sec
        .text
        .split("<<<BEGIN UNTRUSTED analyzer leads>>>")
        .nth(1)
        .and_then(|rest| rest.split("<<<END UNTRUSTED analyzer leads>>>").next())
        .expect("the leads are delimited as untrusted content");
    assert!(block.contains(&listed), "{block}");
    // ... and not into a specialist that does not have that file.
    let dev = reqs
        .iter()
        .find(|r| r.system.contains("You are software_developer"))
        .expect("a developer request");
    assert!(!dev.text.contains("Leads from static analyzers"));

    // The candidate reached the verifier with its cited code, and nothing naming the tool.
    let verifier: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .collect();
    let judged = verifier
        .iter()
        .find(|r| r.text.contains("B991") && r.text.contains(PLANTED_TEXT))
        .expect("the candidate finding reached the verifier");
    assert!(!judged.text.contains("analyzer:") && !judged.text.contains("ruff"));
    // The tool's words are delimited as data there too.
    let claim = judged
        .text
        .split("<<<BEGIN UNTRUSTED claim>>>")
        .nth(1)
        .and_then(|rest| rest.split("<<<END UNTRUSTED claim>>>").next())
        .expect("the claim is delimited");
    assert!(claim.contains(PLANTED_MESSAGE), "{claim}");
    assert!(
        !verifier.iter().any(|r| r.text.contains("B992")),
        "the hit off the end of the file never reached a model"
    );

    // Verified and credited to the tool in the report; the impossible line was dropped.
    let f = report
        .findings
        .iter()
        .find(|f| f.title.starts_with("B991"))
        .expect("the planted hit survived as a finding");
    assert_eq!(f.verdict, Verdict::Confirmed);
    assert_eq!(f.file.as_deref(), Some("src/db.py"));
    assert_eq!(f.line_start, Some(PLANTED_LINE));
    assert_eq!(f.reporters.len(), 1);
    assert_eq!(f.reporters[0].persona, "analyzer:ruff");
    let dropped = report
        .dropped
        .iter()
        .find(|d| d.title.starts_with("B992"))
        .expect("the hit past the end of the file was dropped");
    assert_eq!(dropped.verdict, Some(Verdict::Hallucinated));
    assert!(
        dropped.reason.contains("out of range"),
        "{}",
        dropped.reason
    );
    // A hit inside a specialist's finding corroborates it instead of repeating it.
    let sql = report
        .findings
        .iter()
        .find(|f| f.title == "SQL injection in item search")
        .expect("the specialist's finding stands");
    let who: Vec<&str> = sql.reporters.iter().map(|r| r.persona.as_str()).collect();
    assert_eq!(who, ["analyzer:ruff", "security_sentinel"]);
    assert!(!report.findings.iter().any(|f| f.title.starts_with("B993")));
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let runs = json["analyzers"].as_array().expect("an analyzers section");
    let ruff = runs.iter().find(|r| r["name"] == "ruff").unwrap();
    assert_eq!(ruff["ran"], true);
    assert_eq!(ruff["hits"], 3);
    let bandit = runs.iter().find(|r| r["name"] == "bandit").unwrap();
    assert_eq!(bandit["ran"], false);
    assert_eq!(bandit["skipped_reason"], "bandit is not on PATH");
    assert!(report.to_markdown().contains("### Analyzers"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_analyzer_is_killed_at_its_timeout_and_the_review_completes() {
    let bin = tempfile::tempdir().unwrap();
    // It starts a child of its own too: the whole process group goes at the timeout.
    script(
        bin.path(),
        "hang",
        "( while :; do :; done ) &\nwhile :; do :; done",
    );
    fake_ruff(bin.path());
    let catalog = AnalyzerCatalog::parse(
        "analyzers:\n  - name: stuck\n    command: hang\n    files: [\"*.py\"]\n    format: ruff_json\n\
         \x20 - name: ruff\n    command: ruff\n    files: [\"*.py\"]\n    format: ruff_json\n",
        Path::new("test catalog"),
    )
    .unwrap();
    let leads = analyze(&catalog, bin.path(), Duration::from_millis(300)).await;
    let stuck = &leads.runs[0];
    assert!(!stuck.ran);
    assert!(
        stuck
            .skipped_reason
            .as_deref()
            .unwrap()
            .starts_with("timed out after 0.3 s (killed)"),
        "{stuck:?}"
    );
    assert!(leads.runs[1].ran, "the next tool still ran");

    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let report = review(context(&server, leads)).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert_eq!(report.analyzers[0].name, "stuck");
    assert!(report.analyzers[0].skipped_reason.is_some());
    assert!(report.findings.iter().any(|f| f.title.starts_with("B991")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_output_or_a_failing_tool_is_noted_not_fatal() {
    let bin = tempfile::tempdir().unwrap();
    script(bin.path(), "prose", "echo 'All checks passed!'");
    script(
        bin.path(),
        "broken",
        "echo 'error: unknown flag --x' >&2\nexit 2",
    );
    let catalog = AnalyzerCatalog::parse(
        "analyzers:\n  - name: prose\n    command: prose\n    format: bandit_json\n\
         \x20 - name: broken\n    command: broken\n    format: ruff_json\n",
        Path::new("test catalog"),
    )
    .unwrap();
    let leads = analyze(&catalog, bin.path(), Duration::from_secs(30)).await;
    let why = |i: usize| leads.runs[i].skipped_reason.clone().unwrap();
    assert!(
        why(0).starts_with("its output could not be read"),
        "{}",
        why(0)
    );
    assert_eq!(why(1), "it exited with status 2: error: unknown flag --x");
    assert!(leads.leads.is_empty());
}

/// A lead on `file` at `line`, as the conducting node recorded it.
fn lead(file: &str, line: u32, rule: &str) -> quorum_core::analyzer::Lead {
    quorum_core::analyzer::Lead {
        tool: "ruff".into(),
        file: file.into(),
        line,
        end_line: None,
        rule: rule.into(),
        message: format!("planted {rule}"),
        severity: quorum_core::review::finding::Severity::P2,
        category: "lint".into(),
        confidence: 0.6,
        harm: Default::default(),
        cwe: None,
        weakness: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leads_travel_with_a_remote_attempt_to_a_worker_without_the_tools() {
    let origin = ScriptedServer::start(code_review_script()).await.unwrap();
    let worker = ScriptedServer::start(code_review_script()).await.unwrap();
    let leads = Leads {
        runs: Vec::new(),
        leads: vec![
            lead("src/db.py", PLANTED_LINE, "B991"),
            lead("src/app.py", 3, "B993"),
        ],
    };
    let ctx = context(&origin, leads);
    let task = quorum_core::task::Task {
        id: "t1".into(),
        persona: "security_sentinel".into(),
        files: vec!["src/db.py".into(), "src/auth.py".into()],
        mandate: "Find injection and secret-handling flaws in the data and auth layers.".into(),
        tools: vec!["file_read".into()],
        verification: String::new(),
        model: None,
        dimension: None,
        origin: None,
        probe: None,
        pass: None,
    };
    let req = quorum_runtime::remote::RemoteAttempt::build(
        &ctx,
        ctx.backends.sensitive,
        1,
        &task,
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    // Only the task's own files' leads travel.
    let rules: Vec<&str> = req
        .scope
        .analyzers
        .leads
        .iter()
        .map(|l| l.rule.as_str())
        .collect();
    assert_eq!(rules, ["B991"]);
    // Through the wire form, as a peer receives it.
    let req: quorum_runtime::remote::RemoteAttempt =
        serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
    let contents = ctx
        .pack
        .files
        .values()
        .map(|f| (f.hash.clone(), f.content.to_arc()))
        .collect();
    let mut cfg = BackendConfig::new(BackendKind::Ollama, worker.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.timeout_secs = 5;
    let backends = Backends::from_configs(&[cfg], MODEL).unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::remote::run_attempt(req, &contents, &backends, None, "worker"),
    )
    .await
    .expect("the remote attempt hung");
    assert!(
        matches!(outcome, quorum_runtime::remote::RemoteOutcome::Ok(_)),
        "{outcome:?}"
    );
    let prompt = worker
        .requests()
        .into_iter()
        .find(|r| r.system.contains("You are security_sentinel"))
        .expect("the worker ran the specialist");
    assert!(prompt.text.contains(&format!(
        "- src/db.py:{PLANTED_LINE} [ruff B991] planted B991"
    )));
    assert!(!prompt.text.contains("B993"));
    assert!(
        origin.requests().is_empty(),
        "the origin's model was not asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_runs_in_a_copy_with_a_cleared_environment() {
    let bin = tempfile::tempdir().unwrap();
    // Prints its hit only when it runs where it should: the copy as its directory and HOME,
    // the test's own environment (cargo sets CARGO_MANIFEST_DIR for it) gone, the entry's
    // fallback value set. Then it scribbles on the file it was given.
    script(
        bin.path(),
        "picky",
        "if [ -z \"$CARGO_MANIFEST_DIR\" ] && [ \"$HOME\" = \"$PWD\" ] && [ -f src/db.py ] \
         && [ \"$EXTRA\" = \"fallback-value\" ] && [ -z \"$http_proxy$HTTPS_PROXY\" ]; then\n\
         printf '%s' \"[{\\\"code\\\": \\\"E1\\\", \\\"filename\\\": \\\"$PWD/src/db.py\\\", \
         \\\"location\\\": {\\\"row\\\": 9}, \\\"message\\\": \\\"ok\\\"}]\"\nelse\n\
         printf '%s' '[]'\nfi\nprintf 'tampered' > src/db.py",
    );
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let catalog = AnalyzerCatalog::parse(
        "analyzers:\n  - name: picky\n    command: picky\n    format: ruff_json\n    \
         env: [\"EXTRA=fallback-value\"]\n",
        Path::new("test catalog"),
    )
    .unwrap();
    let leads = analyze(&catalog, bin.path(), Duration::from_secs(30)).await;
    assert_eq!(leads.runs[0].hits, 1, "{:?}", leads.runs[0]);
    assert_eq!(leads.leads[0].rule, "E1");
    let original = std::fs::read_to_string(fixture("code_project").join("src/db.py")).unwrap();
    assert!(
        original.contains("def search_items"),
        "the tree under review was touched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_harm_hit_no_model_checked_is_reported_apart_not_as_a_finding() {
    let bin = tempfile::tempdir().unwrap();
    fake_ruff(bin.path());
    let leads = analyze(
        &AnalyzerCatalog::shipped().unwrap(),
        bin.path(),
        Duration::from_secs(30),
    )
    .await;
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    // No verification budget at all: grounding alone decides.
    let report = review(context_with(&server, leads, |f| {
        f.parameters.max_verifications = 0
    }))
    .await;
    assert!(
        !report.findings.iter().any(|f| f.title.starts_with("B991")),
        "an unchecked tool hit is not a finding"
    );
    // A correctness lead (bugbear's prefix) is never dropped unreported: it is listed apart.
    let u = report
        .unverified_leads
        .iter()
        .find(|u| u.title.starts_with("B991"))
        .expect("the unchecked hit is reported as an unverified lead");
    assert_eq!(u.verdict, Verdict::Unverified);
    assert!(u.id.starts_with('U'), "{}", u.id);
    assert!(!report.dropped.iter().any(|d| d.title.starts_with("B991")));
    // A specialist's grounded claim stays, marked UNVERIFIED.
    assert!(report
        .findings
        .iter()
        .any(|f| f.title == "SQL injection in item search" && f.verdict == Verdict::Unverified));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_past_the_cap_stops_the_tool() {
    let bin = tempfile::tempdir().unwrap();
    script(
        bin.path(),
        "chatty",
        "while :; do printf '[[[[[[[[[['; done",
    );
    let catalog = AnalyzerCatalog::parse(
        "analyzers:\n  - name: chatty\n    command: chatty\n    format: ruff_json\n",
        Path::new("test catalog"),
    )
    .unwrap();
    let opts = RunOptions {
        timeout: Duration::from_secs(60),
        path: Some(bin.path().as_os_str().to_owned()),
        max_output_bytes: 4096,
    };
    let leads = tokio::time::timeout(Duration::from_secs(60), run_all(&catalog, &pack(), &opts))
        .await
        .expect("an endless printer was not stopped at the cap");
    assert_eq!(
        leads.runs[0].skipped_reason.as_deref(),
        Some("its output was larger than 4096 bytes (stopped)")
    );
}
