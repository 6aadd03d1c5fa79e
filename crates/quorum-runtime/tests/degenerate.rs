//! A model stuck in a loop, driven from the scripted server: streamed, its answer is cut long
//! before the output bound, the task is retried once with the reason in its prompt, and a second
//! loop stops it as a circular fix; unstreamed, the bound stops it and the report says so.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::report::Report;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::Backends;
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::time::Duration;
use support::*;

const LOOP_LINE: &str = "The query is built from user input without validation.\n";

fn plan() -> serde_json::Value {
    json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py", "src/auth.py"],
         "mandate": "Find injection and secret-handling flaws in the data and auth layers."}
    ]})
}

fn script(security: Rule) -> Script {
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan())),
        )
        .rule(security)
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

fn looping() -> Reply {
    Reply::repeat("{\"findings\": [\n", LOOP_LINE)
}

async fn review(server: &ScriptedServer, stream: bool) -> Report {
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.timeout_secs = 5;
    cfg.connect_timeout_secs = 2;
    cfg.models = vec![MODEL.to_string()];
    cfg.stream = stream;
    let backends = Backends::from_configs(&[cfg], MODEL).unwrap();
    let ctx = ContextBuilder::new(server, &fixture("code_project"))
        .backends(backends)
        .shared();
    tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

fn security_requests(server: &ScriptedServer) -> Vec<quorum_testkit::RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains("You are security_sentinel"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_is_cut_early_and_retried_once_with_the_reason() {
    let server = ScriptedServer::start(script(
        Rule::new("security")
            .when_system(["You are security_sentinel"])
            .reply(looping())
            .then(Reply::text(security_findings())),
    ))
    .await
    .unwrap();
    let report = review(&server, true).await;

    let t1 = report.tasks.iter().find(|t| t.id == "t1").unwrap();
    assert_eq!(t1.status, "completed", "{t1:?}");
    assert_eq!(t1.ended, "answered on attempt 2 after a repetition cut");
    let calls = security_requests(&server);
    assert_eq!(calls.len(), 2, "one cut attempt, one retry");
    let bound = calls[0].max_tokens.expect("a bounded call");
    // The retry tells the model what went wrong, in the guard's words.
    let retry = &calls[1].text;
    assert!(retry.contains("Previous attempt failed"), "{retry}");
    assert!(retry.contains("repeated the line"), "{retry}");
    let tokens: u64 = retry
        .split("cut after about ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no token count in {retry}"));
    assert!(tokens * 4 < bound, "cut after {tokens} of {bound} tokens");
    // The cut answer's findings never reached the report; the retry's did.
    assert!(report
        .findings
        .iter()
        .any(|f| f.title == "SQL injection in item search"));
    let md = report.to_markdown();
    assert!(md.contains("after a repetition cut"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_loops_again_is_a_circular_fix() {
    let server = ScriptedServer::start(script(
        Rule::new("security")
            .when_system(["You are security_sentinel"])
            .reply(looping()),
    ))
    .await
    .unwrap();
    let report = review(&server, true).await;

    let t1 = report.tasks.iter().find(|t| t.id == "t1").unwrap();
    assert_eq!(t1.status, "circular_fix", "{t1:?}");
    assert_eq!(t1.error_class.as_deref(), Some("circular_fix"));
    assert_eq!(t1.ended, "circular fix: repetition cut 2 times");
    assert_eq!(
        security_requests(&server).len(),
        2,
        "retried once, not three times"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstreamed_the_output_bound_is_the_last_resort() {
    let server = ScriptedServer::start(script(
        Rule::new("security")
            .when_system(["You are security_sentinel"])
            .reply(looping())
            .then(Reply::text(security_findings())),
    ))
    .await
    .unwrap();
    let report = review(&server, false).await;

    let calls = security_requests(&server);
    assert_eq!(calls[0].stream, Some(false));
    let t1 = report.tasks.iter().find(|t| t.id == "t1").unwrap();
    assert_eq!(t1.status, "completed", "{t1:?}");
    // The loop ran to the bound; the answer that followed it was read.
    assert!(
        t1.ended.ends_with("the output bound cut a response"),
        "{}",
        t1.ended
    );
    assert!(t1.tokens_out >= calls[0].max_tokens.unwrap(), "{t1:?}");
}
