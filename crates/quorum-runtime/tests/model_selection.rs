//! Model selection in a running review: scoring picks per task, the planner's unknown model is
//! replaced (and said so), the verifier prefers another family, and a sensitive review never
//! reaches a model the operator marked remote.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::models::{AgenticCard, Locality};
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::report::Report;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::{Backends, ReviewContext};
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn script(model: &str) -> Script {
    Script::new()
        .models([model])
        .rule(scout_rule())
        .rule(Rule::new("planner").when_system(["You are the planner"]).reply(Reply::json(&json!({"tasks": [
            {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py"], "mandate": "find injection", "model": "gpt-9000"},
            {"id": "t2", "persona": "software_developer", "files": ["src/utils.py"], "mandate": "find leaks"}
        ]}))))
        .rule(Rule::new("sec").when_system(["You are security_sentinel"]).reply(Reply::json(&json!({"findings": [
            {"title": "SQL injection in item search", "severity": "P0", "confidence": 0.9, "category": "security/injection",
             "file": "src/db.py", "line_start": 53, "line_end": 53, "evidence": "name LIKE '%{term}%'",
             "why_it_matters": "x", "suggested_fix": "y"}]}))))
        .rule(Rule::new("dev").when_system(["You are software_developer"]).reply(Reply::json(&json!({"findings": []}))))
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

async fn run(
    servers: &[(&ScriptedServer, &str)],
    sensitive: bool,
    operator: BTreeMap<String, AgenticCard>,
) -> Report {
    let configs: Vec<BackendConfig> = servers
        .iter()
        .map(|(s, _)| {
            let mut c = BackendConfig::new(BackendKind::OpenAi, s.openai_url());
            c.timeout_secs = 5;
            c
        })
        .collect();
    let mut backends = Backends::from_configs(&configs, "auto").unwrap();
    backends.sensitive = sensitive;
    backends.probe(&operator).await.unwrap();
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    let ctx = Arc::new(ReviewContext {
        flow_id: uuid::Uuid::new_v4().to_string(),
        flow,
        catalog: Catalog::load(&repo_root().join("personas")).unwrap(),
        pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
        backends,
        verifier_model: None,
        node: "n".into(),
        max_concurrent: Some(2),
        started_at: String::new(),
        facts: quorum_runtime::FactLog::disabled(),
        remote: None,
        board: None,
        scope: Default::default(),
    });
    tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .unwrap()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_selection_replaces_unknown_models_and_verifies_across_families() {
    let qwen = ScriptedServer::start(script("qwen2.5-coder-14b-instruct"))
        .await
        .unwrap();
    let llama = ScriptedServer::start(script("llama3.1-8b-instruct"))
        .await
        .unwrap();
    let report = run(
        &[(&qwen, "qwen"), (&llama, "llama")],
        false,
        BTreeMap::new(),
    )
    .await;

    // Specialists went to the 14B model (preference band for workstation GPUs) ...
    let t1 = report.tasks.iter().find(|t| t.id == "t1").unwrap();
    assert_eq!(t1.model, "qwen2.5-coder-14b-instruct");
    // ... replacing the planner's unknown model, which the report says.
    assert!(
        t1.notes.iter().any(|n| n.contains("gpt-9000")),
        "{:?}",
        t1.notes
    );
    // The planner saw the model list.
    let plan = qwen
        .requests()
        .into_iter()
        .chain(llama.requests())
        .find(|r| r.system.contains("You are the planner"))
        .unwrap();
    assert!(plan.text.contains("## Models") && plan.text.contains("llama3.1-8b-instruct"));
    // The verifier ran on the other family, and the report says independence held.
    assert!(llama
        .requests()
        .iter()
        .any(|r| r.system.contains("You are an independent verifier")));
    assert!(!qwen
        .requests()
        .iter()
        .any(|r| r.system.contains("You are an independent verifier")));
    assert!(
        report
            .methodology
            .verifier_note
            .contains("different model family"),
        "{}",
        report.methodology.verifier_note
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_family_only_is_reported_as_degraded() {
    let qwen = ScriptedServer::start(script("qwen2.5-coder-14b-instruct"))
        .await
        .unwrap();
    let report = run(&[(&qwen, "qwen")], false, BTreeMap::new()).await;
    assert!(
        report.methodology.verifier_note.contains("degraded"),
        "{}",
        report.methodology.verifier_note
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensitive_reviews_never_reach_remote_models() {
    let big = ScriptedServer::start(script("qwen2.5-coder-14b-instruct"))
        .await
        .unwrap();
    let small = ScriptedServer::start(script("llama3.1-8b-instruct"))
        .await
        .unwrap();
    // The operator marks the better model remote; a sensitive review must not use it at all.
    let mut operator = BTreeMap::new();
    operator.insert(
        "qwen2.5-coder-14b-instruct".to_string(),
        AgenticCard {
            locality: Some(Locality::Remote),
            ..AgenticCard::default()
        },
    );
    let report = run(&[(&big, "big"), (&small, "small")], true, operator).await;
    assert!(
        big.requests().is_empty(),
        "a remote model saw sensitive content"
    );
    assert!(!small.requests().is_empty());
    assert_eq!(
        report.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
}
