//! Storage faults against a whole review (issue 27): a store that refuses a fact stops the
//! review before anything that depends on it happens; the review ends failed, saying which data
//! dir and what to do, once; and a resume after the disk is fine completes it from what was
//! stored, asking no model again for a task recorded as done.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::report::{Report, ReviewStatus};
use quorum_runtime::{FactLog, Resume};
use quorum_store::{DataDir, Event, FlowMeta, FlowStore};
use quorum_testkit::review::{ContextBuilder, Fault, FaultyStore};
use quorum_testkit::ScriptedServer;
use std::time::Duration;
use support::*;

fn flow_store(dir: &std::path::Path, flow_id: &str) -> FlowStore {
    DataDir::new(dir)
        .create_flow(&FlowMeta {
            flow_id: flow_id.into(),
            flow_name: "review".into(),
            flow_yaml: String::new(),
            params: serde_json::json!({}),
            target_path: "code_project".into(),
            head_sha: None,
            started_at: String::new(),
            started_ms: 0,
            node: "test-node".into(),
        })
        .unwrap()
}

async fn run(
    server: &ScriptedServer,
    flow_id: &str,
    facts: FactLog,
    resume: Option<Resume>,
) -> Report {
    let ctx = ContextBuilder::new(server, &fixture("code_project"))
        .flow_id(flow_id)
        .max_concurrent(Some(1))
        .facts(facts)
        .shared();
    tokio::time::timeout(
        Duration::from_secs(90),
        quorum_runtime::run_review_from(ctx, None, resume),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

/// Specialist prompts per persona, in order.
fn asked(server: &ScriptedServer, persona: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.system.contains(&format!("You are {persona}")) && r.turn == 0)
        .count()
}

fn completed_tasks(store: &FlowStore) -> Vec<String> {
    store
        .replay()
        .unwrap()
        .completed
        .keys()
        .filter(|t| t.starts_with('t'))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_ends_the_review_failed_and_a_resume_completes_it_without_asking_again() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = flow_store(dir.path(), "full-disk");
    // Room for the start, the scout, the plan and the first task or two, then the disk is full.
    let faulty = FaultyStore::new(store.clone(), Fault::FullAfter(14));
    let report = run(
        &server,
        "full-disk",
        FactLog::with_store(faulty.clone()),
        None,
    )
    .await;
    assert_eq!(
        report.status,
        ReviewStatus::Failed,
        "{}",
        report.status_reason
    );
    let data = dir.path().display().to_string();
    assert!(
        report
            .status_reason
            .contains(&format!("the data dir {data} is out of space"))
            && report.status_reason.contains("quorum resume full-disk"),
        "{}",
        report.status_reason
    );
    // The facts stored are a consistent prefix: the log never says finished, so the review
    // is interrupted, never corrupt, and resumable.
    assert_eq!(
        quorum_store::status_of(&store.replay().unwrap()).to_string(),
        "interrupted"
    );
    let done_before = completed_tasks(&store);
    let asked_before: Vec<(String, usize)> =
        ["security_sentinel", "software_developer", "test_engineer"]
            .iter()
            .map(|p| (p.to_string(), asked(&server, p)))
            .collect();

    // Space freed: the resume finishes the review from the facts.
    faulty.heal();
    let resume = Resume::load(&store).unwrap();
    let report = run(
        &server,
        "full-disk",
        FactLog::new(store.clone()),
        Some(resume),
    )
    .await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    // No task recorded as done before the fault asked its model again.
    let plan = code_plan();
    for t in &done_before {
        let persona = plan["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == t.as_str())
            .and_then(|x| x["persona"].as_str())
            .unwrap()
            .to_string();
        let before = asked_before
            .iter()
            .find(|(p, _)| *p == persona)
            .map(|(_, n)| *n)
            .unwrap_or(0);
        assert_eq!(
            asked(&server, &persona),
            before,
            "{t} ({persona}) was recorded as done and asked again"
        );
    }
    assert!(report
        .findings
        .iter()
        .any(|f| f.title == "SQL injection in item search"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_not_stored_is_never_acted_on() {
    // The very first attempt's start cannot be stored: the scout never reaches a model.
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = flow_store(dir.path(), "no-start");
    // Fact 1 is FlowStarted; fact 2 is the scout's AttemptStarted.
    let faulty = FaultyStore::new(store.clone(), Fault::FailNth(2));
    let report = run(&server, "no-start", FactLog::with_store(faulty), None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Failed,
        "{}",
        report.status_reason
    );
    assert!(
        server.requests().is_empty(),
        "a model was asked after its start was refused"
    );
    let events: Vec<Event> = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::AttemptStarted { .. })),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_store_and_a_failing_flush_each_stop_the_review_with_their_own_words() {
    for (fault, words) in [
        (
            Fault::ReadOnlyAfter(6),
            ["is read-only", "make it writable"],
        ),
        (Fault::FlushFails, ["is failing", "check the disk"]),
    ] {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = flow_store(dir.path(), "ro");
        let faulty = FaultyStore::new(store, fault);
        let report = run(&server, "ro", FactLog::with_store(faulty.clone()), None).await;
        assert_eq!(
            report.status,
            ReviewStatus::Failed,
            "{fault:?}: {}",
            report.status_reason
        );
        assert!(
            words.iter().all(|w| report.status_reason.contains(w)),
            "{fault:?}: {}",
            report.status_reason
        );
        // One refused fact stops the review: it does not go on writing (and failing) for long.
        assert!(
            faulty.writes() < 40,
            "{fault:?}: {} writes",
            faulty.writes()
        );
    }
}
