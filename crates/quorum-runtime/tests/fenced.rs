//! A replicated fact log that refuses a fact (the review was taken over elsewhere) stops the
//! conductor: no later stage runs and nothing after the refusal reaches the local store.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Flow;
use quorum_runtime::{FactLog, FactSink, ReplicatedFact};
use quorum_store::{DataDir, Event, FlowMeta};
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::ScriptedServer;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

/// Commits every fact until the first specialist success, then refuses as a control plane does
/// for a stale epoch.
#[derive(Debug, Default)]
struct TakenOverAfterFirstTask {
    committed: Mutex<Vec<ReplicatedFact>>,
    refused: Mutex<usize>,
}

#[async_trait::async_trait]
impl FactSink for TakenOverAfterFirstTask {
    async fn commit(&self, fact: &ReplicatedFact) -> Result<(), String> {
        let mut c = self.committed.lock().unwrap();
        let done = c.iter().any(|f| {
            matches!(f, ReplicatedFact::Event { event: Event::AttemptSucceeded { task_id, .. } } if task_id.starts_with('t'))
        });
        if done {
            *self.refused.lock().unwrap() += 1;
            return Err("stale epoch 1: the review is at epoch 2, conducted by n2".into());
        }
        c.push(fact.clone());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_fact_stops_the_conductor_and_nothing_after_it_is_kept() {
    let server = ScriptedServer::start(six_task_script(50, false))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(dir.path());
    let store = data
        .create_flow(&FlowMeta {
            flow_id: "f".into(),
            flow_name: "review".into(),
            flow_yaml: String::new(),
            params: serde_json::json!({}),
            target_path: "t".into(),
            head_sha: None,
            started_at: String::new(),
            started_ms: 0,
            node: "n1".into(),
        })
        .unwrap();
    let sink = Arc::new(TakenOverAfterFirstTask::default());
    let facts = FactLog::replicated(store.clone(), sink.clone());

    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    let ctx = ContextBuilder::new(&server, &fixture("code_project"))
        .with_flow(flow)
        .flow_id("f")
        .node("n1")
        .max_concurrent(Some(1))
        .facts(facts.clone())
        .shared();
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .expect("a fenced review must end, not hang");

    assert!(result.is_err(), "a fenced conductor produces no report");
    assert!(facts.fenced());
    assert!(*sink.refused.lock().unwrap() >= 1);
    // The conductor stopped: no verifier or synthesizer call, and at most the one task that was
    // already running when the fence came ran after the first success.
    let reqs = server.requests();
    assert!(
        !reqs
            .iter()
            .any(|r| r.system.contains("You are an independent verifier")
                || r.system.contains("You are the synthesizer")),
        "no later stage ran"
    );
    let tasks: std::collections::BTreeSet<String> = reqs.iter().filter_map(task_of).collect();
    assert!(
        tasks.len() <= 2,
        "specialists kept running after the fence: {tasks:?}"
    );
    // The local store holds exactly what was committed.
    let local: Vec<ReplicatedFact> = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| ReplicatedFact::Event { event: e.event })
        .collect();
    let committed: Vec<ReplicatedFact> = sink
        .committed
        .lock()
        .unwrap()
        .iter()
        .filter(|f| matches!(f, ReplicatedFact::Event { .. }))
        .cloned()
        .collect();
    assert_eq!(local, committed);
    assert!(store.report().unwrap().is_none());
}
