//! The exhaustive flow end to end against the scripted model server: a generated tree of 2,000
//! files is read in directory batches (every file's body in some specialist prompt), the rounds
//! converge once a round adds too few new findings, and coverage, rounds and the store's round
//! events say so.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Flow;
use quorum_core::report::{Report, ReviewStatus};
use quorum_runtime::{FactLog, Resume, ReviewContext};
use quorum_store::{DataDir, Event, FlowMeta};
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use support::*;

const DIRS: usize = 50;
const PER_DIR: usize = 40;

/// `DIRS` directories of `PER_DIR` small Python files each.
fn generate_tree(root: &std::path::Path) -> Vec<String> {
    let mut paths = Vec::new();
    for d in 0..DIRS {
        let dir = root.join(format!("pkg{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..PER_DIR {
            let n = d * PER_DIR + f;
            std::fs::write(
                dir.join(format!("m{f:02}.py")),
                format!("def handler_{n}(x):\n    return x + {n}\n"),
            )
            .unwrap();
            paths.push(format!("pkg{d:02}/m{f:02}.py"));
        }
    }
    paths
}

fn finding(file: &str, n: usize) -> serde_json::Value {
    json!({"title": format!("Unchecked input in handler_{n}"), "severity": "P2",
        "confidence": 0.9, "category": "correctness/validation", "file": file,
        "line_start": 2, "line_end": 2, "symbol": format!("handler_{n}"),
        "evidence": format!("return x + {n}"), "why_it_matters": "x is never validated",
        "suggested_fix": "validate x"})
}

/// Round 1 (the first lane): the first batch reports two problems, every other batch none.
/// Round 2 (the second lane) re-reads that batch and reports the same two: no new finding,
/// under the threshold of 2, so the rounds stop there and no third lane is asked.
fn script() -> Script {
    let two = json!({"findings": [finding("pkg00/m00.py", 0), finding("pkg00/m01.py", 1)]});
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("round1-hit")
                .when_system(["You are software_developer,"])
                .when_last_user(["## Task r1b1\n"])
                .reply(Reply::json(&two)),
        )
        .rule(
            Rule::new("round2-same")
                .when_system(["You are security_sentinel,"])
                .reply(Reply::json(&two)),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

fn meta(id: &str) -> FlowMeta {
    FlowMeta {
        flow_id: id.into(),
        flow_name: "exhaustive".into(),
        flow_yaml: String::new(),
        params: json!({}),
        target_path: String::new(),
        head_sha: None,
        started_at: String::new(),
        started_ms: 0,
        node: "test-node".into(),
    }
}

fn context(server: &ScriptedServer, target: &std::path::Path, facts: FactLog) -> ReviewContext {
    let flow = Flow::load(&repo_root().join("flows/exhaustive.yaml")).unwrap();
    context_with(server, target, facts, flow)
}

fn context_with(
    server: &ScriptedServer,
    target: &std::path::Path,
    facts: FactLog,
    flow: Flow,
) -> ReviewContext {
    ContextBuilder::new(server, target)
        .with_flow(flow)
        .tweak(|f| f.parameters.call_timeout_secs = 5)
        .checked()
        .max_concurrent(Some(4))
        .facts(facts)
        .build()
}

async fn review(ctx: ReviewContext, resume: Option<Resume>) -> Report {
    tokio::time::timeout(
        Duration::from_secs(120),
        quorum_runtime::run_review_from(Arc::new(ctx), None, resume),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaustive_flow_reads_all_2000_files_and_converges_when_a_round_adds_nothing_new() {
    let target = tempfile::tempdir().unwrap();
    let paths = generate_tree(target.path());
    let server = ScriptedServer::start(script()).await.unwrap();

    let data_dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(data_dir.path());
    let store = data.create_flow(&meta("whole")).unwrap();
    let ctx = context(&server, target.path(), FactLog::new(store.clone()));
    let rule = ctx.flow.exhaustive.clone().expect("the flow is exhaustive");
    assert_eq!(rule.threshold, 2, "the seed's default threshold");
    assert_eq!(ctx.pack.len(), DIRS * PER_DIR);
    let report = review(ctx, None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );

    let reqs = server.requests();
    // The engine planned: no planner call.
    assert!(!reqs
        .iter()
        .any(|r| r.system.contains("You are the planner")));
    // Every file's numbered body was in some round-1 prompt, delimited as data.
    let lane1: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains("You are software_developer,"))
        .collect();
    assert_eq!(lane1.len(), DIRS, "one batch per directory of {PER_DIR}");
    let mut in_prompts = BTreeSet::new();
    for r in &lane1 {
        for part in r.text.split("<<<BEGIN UNTRUSTED ").skip(1) {
            if let Some(label) = part.split(">>>").next() {
                in_prompts.insert(label.to_string());
            }
        }
    }
    for p in &paths {
        assert!(in_prompts.contains(p), "{p} was in no specialist prompt");
    }
    // Round 2 re-read only the batch that found something, with the second lane.
    let lane2: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains("You are security_sentinel,"))
        .collect();
    assert_eq!(lane2.len(), 1);
    assert!(lane2[0].text.contains("## Task r2b1\n"));
    assert!(lane2[0].text.contains("<<<BEGIN UNTRUSTED pkg00/m39.py>>>"));
    assert!(!lane2[0].text.contains("<<<BEGIN UNTRUSTED pkg01/"));
    assert!(!reqs
        .iter()
        .any(|r| r.system.contains(&format!("You are {},", rule.personas[2]))));

    // Coverage proves every file was read.
    let c = report.coverage.as_ref().expect("coverage");
    assert_eq!(c.files_total, DIRS * PER_DIR);
    assert_eq!(c.files_reviewed, DIRS * PER_DIR);
    assert_eq!(c.never_reviewed_count, 0);
    assert!(c.never_reviewed.is_empty());
    assert_eq!(
        c.by_persona.get("software_developer"),
        Some(&(DIRS * PER_DIR))
    );
    assert_eq!(c.by_persona.get("security_sentinel"), Some(&PER_DIR));

    // The rounds, and why they stopped.
    assert_eq!(report.rounds.len(), 2, "{:?}", report.rounds);
    let (r1, r2) = (&report.rounds[0], &report.rounds[1]);
    assert_eq!(
        (r1.round, r1.tasks, r1.completed, r1.files),
        (1, DIRS, DIRS, DIRS * PER_DIR)
    );
    assert_eq!((r1.findings, r1.new_findings, r1.previous_total), (2, 2, 0));
    assert!(r1.next, "{}", r1.decision);
    assert_eq!((r2.round, r2.tasks, r2.files), (2, 1, PER_DIR));
    assert_eq!((r2.findings, r2.new_findings, r2.previous_total), (2, 0, 2));
    assert!(!r2.next);
    assert!(r2.decision.starts_with("converged"), "{}", r2.decision);
    // Reduce: the two lanes' reports are one finding each, by anchor.
    assert_eq!(report.findings.len(), 2, "{:?}", report.findings);
    let md = report.to_markdown();
    assert!(md.contains("### Rounds"), "{md}");
    assert!(md.contains("**Files reviewed:** 2000 of 2000"), "{md}");
    let json = report.to_json();
    assert!(json.contains("\"rounds\""), "report.json has the rounds");

    // Each round is a fact in the store; a replay carries the next round's tasks as planned.
    let rounds: Vec<_> = store
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::RoundCompleted { metrics, next } => Some((metrics, next)),
            _ => None,
        })
        .collect();
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds[0].1.len(), 1, "round 1 recorded round 2's task");
    assert!(rounds[1].1.is_empty());
    let replay = Resume::load(&store).unwrap().replay;
    assert_eq!(replay.rounds, report.rounds);
    let planned = &replay.plan.as_ref().unwrap().0;
    assert_eq!(planned.len(), DIRS + 1);
    assert!(planned.iter().any(|t| t.id == "r2b1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_round_runs_the_recorded_next_round_and_never_repeats_the_first() {
    let target = tempfile::tempdir().unwrap();
    generate_tree(target.path());
    let data_dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(data_dir.path());
    let first = ScriptedServer::start(script()).await.unwrap();
    let store = data.create_flow(&meta("whole")).unwrap();
    let whole = review(
        context(&first, target.path(), FactLog::new(store.clone())),
        None,
    )
    .await;
    let events: Vec<Event> = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    drop(store);

    // The log cut as if the process died right after round 1 was evaluated.
    let cut_at = events
        .iter()
        .position(|e| matches!(e, Event::RoundCompleted { .. }))
        .expect("round 1 is recorded");
    let cut = data.create_flow(&meta("cut")).unwrap();
    for e in &events[..=cut_at] {
        cut.append(e).unwrap();
    }
    let resume = Resume::load(&cut).unwrap();
    assert_eq!(resume.replay.rounds.len(), 1);
    assert!(!resume.replay.completed.contains_key("r2b1"));

    let second = ScriptedServer::start(script()).await.unwrap();
    let resumed = review(
        context(&second, target.path(), FactLog::new(cut.clone())),
        Some(resume),
    )
    .await;
    assert_eq!(
        resumed.status,
        ReviewStatus::Completed,
        "{}",
        resumed.status_reason
    );
    let reqs = second.requests();
    assert!(
        !reqs
            .iter()
            .any(|r| r.system.contains("You are software_developer,")),
        "round 1 ran again"
    );
    let lane2: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains("You are security_sentinel,"))
        .collect();
    assert_eq!(lane2.len(), 1, "the recorded round 2 ran once");
    assert_eq!(resumed.rounds, whole.rounds);
    assert_eq!(resumed.coverage, whole.coverage);
    let recorded = cut
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.event, Event::RoundCompleted { .. }))
        .count();
    assert_eq!(recorded, 2, "round 1 was not evaluated again");
}

// ---- model-guided round selection (`select: model`) ----

const SELECTOR: &str = "You steer an exhaustive review";

/// The shipped exhaustive flow with the model naming the next round's files (at most 3).
fn model_guided_flow() -> Flow {
    let text = std::fs::read_to_string(repo_root().join("flows/exhaustive.yaml")).unwrap();
    let text = text
        .replacen("  select: hot\n", "  select: model\n", 1)
        .replacen("  select_max_files: 40\n", "  select_max_files: 3\n", 1);
    assert!(text.contains("select: model") && text.contains("select_max_files: 3"));
    let flow = Flow::parse(&text, std::path::Path::new("exhaustive-model.yaml")).unwrap();
    assert_eq!(
        flow.exhaustive.as_ref().unwrap().select,
        quorum_core::flows::flow::Select::Model
    );
    flow
}

/// `script()` with the selector answering `reply` (the first rule, so nothing else takes it).
fn guided_script(reply: Reply) -> Script {
    let mut s = Script::new().rule(Rule::new("selector").when_system([SELECTOR]).reply(reply));
    for r in script().rules {
        s = s.rule(r);
    }
    s.models([MODEL])
}

async fn guided_review(reply: Reply) -> (ScriptedServer, Report, Vec<Event>) {
    let target = tempfile::tempdir().unwrap();
    generate_tree(target.path());
    let server = ScriptedServer::start(guided_script(reply)).await.unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    let store = DataDir::new(data_dir.path())
        .create_flow(&meta("guided"))
        .unwrap();
    let ctx = context_with(
        &server,
        target.path(),
        FactLog::new(store.clone()),
        model_guided_flow(),
    );
    let report = review(ctx, None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let events = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    (server, report, events)
}

fn lane2_files(server: &ScriptedServer) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for r in server
        .requests()
        .iter()
        .filter(|r| r.system.contains("You are security_sentinel,"))
    {
        for part in r.text.split("<<<BEGIN UNTRUSTED ").skip(1) {
            if let Some(label) = part.split(">>>").next() {
                if label.ends_with(".py") {
                    files.insert(label.to_string());
                }
            }
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_guided_round_re_reads_exactly_the_valid_files_the_selector_named() {
    let answer = json!({"files": ["pkg07/m01.py", "no/such/file.py", "../../etc/passwd",
        "pkg03/m05.py", "pkg07/m01.py"], "reason": "callers of the flagged handlers"});
    let (server, report, events) = guided_review(Reply::json(&answer)).await;
    let reqs = server.requests();
    // One selector call, after round 1 only (round 2 converged), on the planner's tier.
    let sel: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains(SELECTOR))
        .collect();
    assert_eq!(sel.len(), 1, "one selection per round that continues");
    assert!(sel[0].json_schema, "a structured call");
    // Its prompt carries round 1's new findings and the directory summary, both delimited.
    let findings = sel[0]
        .text
        .split("<<<BEGIN UNTRUSTED new findings>>>")
        .nth(1)
        .and_then(|r| r.split("<<<END UNTRUSTED new findings>>>").next())
        .expect("the findings are delimited");
    assert!(
        findings.contains("pkg00/m00.py:2: Unchecked input in handler_0"),
        "{findings}"
    );
    assert!(findings.contains("pkg00/m01.py:2: Unchecked input in handler_1"));
    assert!(sel[0]
        .text
        .contains("<<<BEGIN UNTRUSTED directory summary>>>"));
    assert!(sel[0].text.contains("- pkg49/ (40 files)"));
    // Round 2 re-read exactly the named files of the pack: not the hot batch (pkg00/), not the
    // unknown path, not the one outside the pack.
    let read = lane2_files(&server);
    let want: BTreeSet<String> = ["pkg03/m05.py", "pkg07/m01.py"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(read, want);
    let r1 = &report.rounds[0];
    assert_eq!(r1.selected_by, "model", "{}", r1.selector);
    assert!(
        r1.selector.contains("2 not in the review dropped"),
        "{}",
        r1.selector
    );
    assert!(
        r1.decision.contains("re-reads 2 file(s)"),
        "{}",
        r1.decision
    );
    assert_eq!(report.rounds[1].files, 2);
    assert!(report
        .to_markdown()
        .contains("model: selector named 5 path(s)"));
    // The choice was recorded with round 1 (its next tasks) before round 2 ran.
    let (metrics, next) = events
        .iter()
        .find_map(|e| match e {
            Event::RoundCompleted { metrics, next } if metrics.round == 1 => Some((metrics, next)),
            _ => None,
        })
        .expect("round 1 recorded");
    assert_eq!(metrics.selected_by, "model");
    let planned: BTreeSet<String> = next.iter().flat_map(|t| t.files.clone()).collect();
    assert_eq!(planned, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_fails_or_answers_prose_leaves_the_choice_to_the_hot_files() {
    for (what, reply) in [
        ("500", Reply::status(500)),
        (
            "prose",
            Reply::text("You should look at pkg03 next, it seems risky."),
        ),
        (
            "nothing valid",
            Reply::json(&json!({"files": ["elsewhere/x.py"]})),
        ),
    ] {
        let (server, report, _) = guided_review(reply).await;
        assert!(
            server
                .requests()
                .iter()
                .any(|r| r.system.contains(SELECTOR)),
            "{what}: the selector was asked"
        );
        // The hot rule: round 2 re-reads round 1's finding batch, pkg00/, and only it.
        let read = lane2_files(&server);
        assert_eq!(read.len(), PER_DIR, "{what}: {read:?}");
        assert!(read.iter().all(|f| f.starts_with("pkg00/")), "{what}");
        let r1 = &report.rounds[0];
        assert_eq!(r1.selected_by, "hot", "{what}");
        assert!(
            r1.selector.contains("the hot-file rule decided"),
            "{what}: {}",
            r1.selector
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_model_guided_round_runs_the_recorded_choice_without_asking_again() {
    let answer = json!({"files": ["pkg03/m05.py"]});
    let (_, whole, events) = guided_review(Reply::json(&answer)).await;
    let cut_at = events
        .iter()
        .position(|e| matches!(e, Event::RoundCompleted { .. }))
        .expect("round 1 is recorded");
    let target = tempfile::tempdir().unwrap();
    generate_tree(target.path());
    let data_dir = tempfile::tempdir().unwrap();
    let cut = DataDir::new(data_dir.path())
        .create_flow(&meta("cut"))
        .unwrap();
    for e in &events[..=cut_at] {
        cut.append(e).unwrap();
    }
    let resume = Resume::load(&cut).unwrap();
    // A selector that would now name another file: it must not be asked.
    let other = json!({"files": ["pkg09/m09.py"]});
    let second = ScriptedServer::start(guided_script(Reply::json(&other)))
        .await
        .unwrap();
    let ctx = context_with(
        &second,
        target.path(),
        FactLog::new(cut.clone()),
        model_guided_flow(),
    );
    let resumed = review(ctx, Some(resume)).await;
    assert_eq!(resumed.status, ReviewStatus::Completed);
    assert!(!second
        .requests()
        .iter()
        .any(|r| r.system.contains(SELECTOR)));
    assert_eq!(
        lane2_files(&second),
        ["pkg03/m05.py".to_string()].into_iter().collect()
    );
    assert_eq!(resumed.rounds, whole.rounds);
}
