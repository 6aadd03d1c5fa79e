//! `--coverage full|sampled` on the default flow against the scripted model server: the planner
//! covers two files of a generated tree; in full mode the engine batches every other file into
//! tasks for the flow's `full_coverage` persona (their prompts hold every body) and coverage
//! says every file was reviewed; sampled adds nothing; a resume runs the recorded plan and adds
//! nothing twice.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::coverage::FULL_ORIGIN_PREFIX;
use quorum_core::flows::flow::CoverageMode;
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

const DIRS: usize = 6;
const PER_DIR: usize = 7;
/// The only files the planner gives a task.
const PLANNED: [&str; 2] = ["pkg00/m00.py", "pkg00/m01.py"];

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

/// The planner names one security task on two files; every specialist finds nothing.
fn script() -> Script {
    let plan = json!({"tasks": [{"id": "t1", "persona": "security_sentinel", "files": PLANNED,
        "mandate": "Look for unchecked input in the first handlers."}]});
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(no_findings_rule())
        .rule(synthesizer_rule())
}

fn meta(id: &str) -> FlowMeta {
    FlowMeta {
        flow_id: id.into(),
        flow_name: "review".into(),
        flow_yaml: String::new(),
        params: json!({}),
        target_path: String::new(),
        head_sha: None,
        started_at: String::new(),
        started_ms: 0,
        node: "test-node".into(),
    }
}

fn context(
    server: &ScriptedServer,
    target: &std::path::Path,
    facts: FactLog,
    mode: Option<CoverageMode>,
) -> ReviewContext {
    ContextBuilder::new(server, target)
        .tweak(|f| {
            if let Some(m) = mode {
                f.set_coverage(m).unwrap();
            }
        })
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

/// The files whose bodies reached a prompt of `persona`, by their delimiter labels.
fn files_in_prompts(server: &ScriptedServer, persona: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in server
        .requests()
        .iter()
        .filter(|r| r.system.contains(&format!("You are {persona},")))
    {
        for part in r.text.split("<<<BEGIN UNTRUSTED ").skip(1) {
            if let Some(label) = part.split(">>>").next() {
                if label.ends_with(".py") {
                    out.insert(label.to_string());
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_coverage_gives_every_file_the_plan_left_out_to_the_flows_persona() {
    let target = tempfile::tempdir().unwrap();
    let paths = generate_tree(target.path());
    let server = ScriptedServer::start(script()).await.unwrap();
    let ctx = context(
        &server,
        target.path(),
        FactLog::disabled(),
        Some(CoverageMode::Full),
    );
    let persona = ctx.flow.full_coverage_rule().unwrap().persona;
    assert_ne!(persona, "security_sentinel", "the test tells the two apart");
    let report = review(ctx, None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    // The planner's task ran as planned, on its two files.
    assert_eq!(
        files_in_prompts(&server, "security_sentinel"),
        PLANNED.iter().map(|s| s.to_string()).collect()
    );
    // The added tasks' prompts together hold every other file, and only those.
    let others: BTreeSet<String> = paths
        .iter()
        .filter(|p| !PLANNED.contains(&p.as_str()))
        .cloned()
        .collect();
    assert_eq!(files_in_prompts(&server, &persona), others);
    let c = report.coverage.as_ref().expect("coverage");
    assert_eq!(c.mode, CoverageMode::Full);
    assert_eq!(
        (c.files_reviewed, c.files_total),
        (paths.len(), paths.len())
    );
    assert_eq!(c.never_reviewed_count, 0);
    assert!(!c.added.is_empty());
    assert!(c
        .added
        .iter()
        .all(|a| a.persona == persona && a.reason.starts_with(FULL_ORIGIN_PREFIX)));
    assert!(report.to_json().contains("\"mode\": \"full\""));
    assert!(report.to_markdown().contains("**Coverage mode:** full"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampled_coverage_runs_the_planners_tasks_only() {
    let target = tempfile::tempdir().unwrap();
    let paths = generate_tree(target.path());
    let server = ScriptedServer::start(script()).await.unwrap();
    // No mode set: the default flow's own, sampled.
    let ctx = context(&server, target.path(), FactLog::disabled(), None);
    let persona = ctx.flow.full_coverage_rule().unwrap().persona;
    let report = review(ctx, None).await;
    assert_eq!(report.status, ReviewStatus::Completed);
    assert!(files_in_prompts(&server, &persona).is_empty());
    let c = report.coverage.as_ref().unwrap();
    assert_eq!(c.mode, CoverageMode::Sampled);
    assert_eq!((c.files_reviewed, c.files_total), (2, paths.len()));
    assert!(c.added.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_runs_the_recorded_full_plan_and_adds_no_task_twice() {
    let target = tempfile::tempdir().unwrap();
    let paths = generate_tree(target.path());
    let data_dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(data_dir.path());
    let first = ScriptedServer::start(script()).await.unwrap();
    let store = data.create_flow(&meta("whole")).unwrap();
    let whole = review(
        context(
            &first,
            target.path(),
            FactLog::new(store.clone()),
            Some(CoverageMode::Full),
        ),
        None,
    )
    .await;
    let events: Vec<Event> = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    // The log cut as if the process died right after the plan was recorded.
    let cut_at = events
        .iter()
        .position(|e| matches!(e, Event::PlanCompleted { .. }))
        .expect("the plan is recorded");
    let Event::PlanCompleted { tasks: planned, .. } = &events[cut_at] else {
        unreachable!()
    };
    assert!(planned.iter().any(|t| t
        .origin
        .as_deref()
        .is_some_and(|o| o.starts_with(FULL_ORIGIN_PREFIX))));
    let cut = data.create_flow(&meta("cut")).unwrap();
    for e in &events[..=cut_at] {
        cut.append(e).unwrap();
    }
    let second = ScriptedServer::start(script()).await.unwrap();
    let resumed = review(
        context(
            &second,
            target.path(),
            FactLog::new(cut.clone()),
            Some(CoverageMode::Full),
        ),
        Some(Resume::load(&cut).unwrap()),
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
            .any(|r| r.system.contains("You are the planner")),
        "the recorded plan is used, not a new one"
    );
    // Each recorded task ran once: as many specialist calls as planned tasks, no more.
    let specialist_calls = reqs
        .iter()
        .filter(|r| r.system.contains("## Output format (required)"))
        .filter(|r| r.text.contains("## Task "))
        .count();
    assert_eq!(specialist_calls, planned.len());
    let c = resumed.coverage.as_ref().unwrap();
    assert_eq!(c.added, whole.coverage.as_ref().unwrap().added);
    assert_eq!(c.files_reviewed, paths.len());
    let recorded_plans = cut
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.event, Event::PlanCompleted { .. }))
        .count();
    assert_eq!(recorded_plans, 1, "planned once");
}
