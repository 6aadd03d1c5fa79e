//! A peer's attempt runs under this node's policy, not the peer's: the request's `sensitive`
//! only tightens the worker's own, and remote (paid) models serve peers only when the operator
//! set `allow_peers_remote_backends`. The worker here is `remote::run_attempt` with two scripted
//! servers, one of them marked remote by an operator card; the recorded requests say which
//! model saw the content.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Flow;
use quorum_core::models::{AgenticCard, Locality};
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::task::Task;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::remote::{self, RemoteAttempt, RemoteOutcome};
use quorum_runtime::Backends;
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::*;

const PAID: &str = "qwen2.5-coder-14b-instruct";
const LOCAL: &str = "llama3.1-8b-instruct";

fn script(model: &str) -> Script {
    Script::new().models([model]).rule(
        Rule::new("sec")
            .when_system(["You are security_sentinel"])
            .reply(Reply::json(&json!({"findings": []}))),
    )
}

struct Worker {
    paid: ScriptedServer,
    local: ScriptedServer,
    backends: Backends,
}

/// A worker node with a better model the operator marked remote, and a local one.
async fn worker(default_model: &str, sensitive: bool, allow_remote: bool) -> Worker {
    let paid = ScriptedServer::start(script(PAID)).await.unwrap();
    let local = ScriptedServer::start(script(LOCAL)).await.unwrap();
    let configs: Vec<BackendConfig> = [&paid, &local]
        .iter()
        .map(|s| {
            let mut c = BackendConfig::new(BackendKind::OpenAi, s.openai_url());
            c.timeout_secs = 5;
            c
        })
        .collect();
    let mut backends = Backends::from_configs(&configs, default_model).unwrap();
    let mut operator = BTreeMap::new();
    operator.insert(
        PAID.to_string(),
        AgenticCard {
            locality: Some(Locality::Remote),
            ..AgenticCard::default()
        },
    );
    backends.probe(&operator).await.unwrap();
    backends.sensitive = sensitive;
    backends.allow_peers_remote_backends = allow_remote;
    Worker {
        paid,
        local,
        backends,
    }
}

/// The attempt a peer ships, claiming `sensitive`.
fn attempt(sensitive: bool) -> RemoteAttempt {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    let backends = Backends {
        sensitive,
        ..Backends::default()
    };
    let ctx = ContextBuilder::offline(
        ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
    )
    .with_flow(flow)
    .node("peer")
    .max_concurrent(Some(1))
    .backends(backends)
    .build();
    let task = Task {
        id: "t1".into(),
        persona: "security_sentinel".into(),
        files: vec!["src/db.py".into()],
        mandate: "find injection".into(),
        tools: vec![],
        verification: String::new(),
        model: None,
        dimension: None,
        origin: None,
        probe: None,
        pass: None,
    };
    RemoteAttempt::build(
        &ctx,
        ctx.backends.sensitive,
        1,
        &task,
        None,
        Duration::from_secs(10),
    )
    .unwrap()
}

async fn run(w: &Worker, req: RemoteAttempt) -> RemoteOutcome {
    let pack = ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap();
    let contents: BTreeMap<String, Arc<str>> = pack
        .files
        .values()
        .map(|f| (f.hash.clone(), f.content.to_arc()))
        .collect();
    tokio::time::timeout(
        Duration::from_secs(30),
        remote::run_attempt(req, &contents, &w.backends, None, "worker"),
    )
    .await
    .expect("attempt hung")
}

fn ok(o: &RemoteOutcome) {
    assert!(matches!(o, RemoteOutcome::Ok(_)), "{o:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_cannot_spend_paid_backends_by_default() {
    let w = worker("auto", false, false).await;
    ok(&run(&w, attempt(false)).await);
    assert!(
        w.paid.requests().is_empty(),
        "a peer's attempt reached the paid model"
    );
    assert!(!w.local.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_can_let_peers_use_paid_backends() {
    // The same worker with the key set: scoring prefers the paid 14B model, which shows the
    // test above fails if the default stops holding.
    let w = worker("auto", false, true).await;
    ok(&run(&w, attempt(false)).await);
    assert!(!w.paid.requests().is_empty());
    assert!(w.local.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_can_tighten_sensitive_but_never_lower_it() {
    // The peer asks for sensitive: local only, even where paid backends are allowed.
    let w = worker("auto", false, true).await;
    ok(&run(&w, attempt(true)).await);
    assert!(
        w.paid.requests().is_empty(),
        "the peer's sensitive was ignored"
    );

    // The worker's operator set sensitive; the peer says not sensitive: the node's floor holds.
    let w = worker("auto", true, true).await;
    ok(&run(&w, attempt(false)).await);
    assert!(
        w.paid.requests().is_empty(),
        "a peer lowered the node's sensitive"
    );
    assert!(!w.local.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_paid_model_is_refused_for_a_peer_not_called() {
    let w = worker(PAID, false, false).await;
    let out = run(&w, attempt(false)).await;
    match out {
        RemoteOutcome::Err { message, .. } => {
            assert!(message.contains("remote model"), "{message}")
        }
        other => panic!("a pinned paid model ran a peer's attempt: {other:?}"),
    }
    assert!(w.paid.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_flow_with_overflowing_parameters_is_refused_before_any_call() {
    let w = worker("auto", false, true).await;
    let mut req = attempt(false);
    req.flow.parameters.call_timeout_secs = u64::MAX;
    match run(&w, req).await {
        RemoteOutcome::Err { class, message } => {
            assert_eq!(class, "config");
            assert!(
                message.contains("parameters.call_timeout_secs"),
                "{message}"
            );
        }
        other => panic!("an invalid flow from a peer ran: {other:?}"),
    }
    assert!(w.paid.requests().is_empty() && w.local.requests().is_empty());
}
