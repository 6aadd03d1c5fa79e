//! Context that fits the server, and honest answers: whole reviews against a scripted server
//! with a small context window, servers refusing oversized requests, empty answers, and a
//! verifier that never answers. Assertions are on the recorded requests, not only outcomes.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::report::{Report, ReviewStatus};
use quorum_core::review::finding::Verdict;
use quorum_llm::BackendKind;
use quorum_runtime::ReviewContext;
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer, CONTEXT_WINDOW_RULE};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn context(
    server: &ScriptedServer,
    kind: BackendKind,
    tweak: impl FnOnce(&mut Flow),
) -> ReviewContext {
    let url = match kind {
        BackendKind::Ollama => server.ollama_url(),
        BackendKind::OpenAi => server.openai_url(),
    };
    ContextBuilder::new(server, &fixture("code_project"))
        .tweak(tweak)
        .backends(quorum_testkit::review::backends(kind, url))
        .build()
}

async fn review(ctx: ReviewContext) -> Report {
    tokio::time::timeout(
        Duration::from_secs(90),
        quorum_runtime::run_review(Arc::new(ctx), None),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

fn specialist(r: &RecordedRequest) -> bool {
    r.system.contains("You are security_sentinel")
}

/// Six tasks whose specialist reads file after file, six reads a turn, every turn it is offered
/// tools; when tools are withdrawn it answers one real finding.
fn greedy_script() -> Script {
    let tasks: Vec<Value> = (1..=6)
        .map(|i| {
            json!({"id": format!("t{i}"), "persona": "security_sentinel",
                   "files": ["src/db.py"], "tools": ["file_read", "file_grep"],
                   "mandate": format!("Check area number {i} for defects.")})
        })
        .collect();
    let reads: Vec<(&str, Value)> = ["src/app.py", "src/db.py", "src/auth.py", "src/utils.py"]
        .iter()
        .cycle()
        .take(6)
        .map(|p| ("file_read", json!({ "path": p })))
        .collect();
    let finding = json!({"findings": [{"title": "SQL built by string formatting",
        "severity": "P1", "confidence": 0.9, "category": "security/injection",
        "file": "src/db.py", "line_start": 53, "line_end": 54,
        "evidence": "name LIKE '%{term}%'", "why_it_matters": "injection",
        "suggested_fix": "bind parameters"}]});
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({ "tasks": tasks }))),
        )
        .rule(
            Rule::new("greedy")
                .when_system(["You are security_sentinel"])
                .when_has_tools(true)
                .reply(Reply::tools(reads)),
        )
        .rule(
            Rule::new("answer")
                .when_system(["You are security_sentinel"])
                .when_has_tools(false)
                .reply(Reply::json(&finding)),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

fn assert_all_completed(report: &Report) {
    for t in &report.tasks {
        assert_eq!(t.status, "completed", "{}: {:?}", t.id, t.error);
    }
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
}

/// The server states its window at /props (llama-server): the probe learns it, and no request
/// is ever refused — compaction, result caps and the per-turn cap keep every one inside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advertised_small_window_is_never_exceeded_by_greedy_specialists() {
    const WINDOW: u64 = 5120;
    let server = ScriptedServer::start(greedy_script().advertised_context_window(WINDOW))
        .await
        .unwrap();
    let mut ctx = context(&server, BackendKind::OpenAi, |_| {});
    ctx.backends
        .probe(&Default::default())
        .await
        .expect("probe");
    let report = review(ctx).await;
    assert_all_completed(&report);
    let reqs = server.requests();
    assert!(
        reqs.iter()
            .all(|r| r.rule.as_deref() != Some(CONTEXT_WINDOW_RULE)),
        "a request was refused for its size"
    );
    for r in &reqs {
        assert!(
            r.window_tokens() <= WINDOW,
            "request {} ({:?}) needs {} tokens",
            r.seq,
            r.rule,
            r.window_tokens()
        );
    }
    let spec: Vec<&RecordedRequest> = reqs.iter().filter(|r| specialist(r)).collect();
    assert!(
        spec.iter()
            .any(|r| r.text.contains("elided to fit the context window]")
                && r.text.contains("[earlier result of file_read src/")),
        "no request shows compaction"
    );
    // Six calls a turn, four run (the rest are answered "not run"): seven tool turns of the
    // eight, then the answer with tools withdrawn.
    for t in report
        .tasks
        .iter()
        .filter(|t| t.persona == "security_sentinel")
    {
        assert_eq!(t.tool_calls, 4 * 7, "{}", t.id);
    }
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
}

/// The server does not say its window (vLLM with a short max_model_len, Ollama): the first
/// oversized request is refused with llama-server's real 400 body, the attempt fails as
/// context_overflow and is retried with the stated window — and every later request fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unadvertised_window_is_learned_from_the_refusal_and_retried_smaller() {
    const WINDOW: u64 = 4096;
    let server = ScriptedServer::start(greedy_script().context_window(WINDOW))
        .await
        .unwrap();
    let report = review(context(&server, BackendKind::Ollama, |_| {})).await;
    assert_all_completed(&report);
    let reqs = server.requests();
    let refused: Vec<&RecordedRequest> = reqs
        .iter()
        .filter(|r| r.rule.as_deref() == Some(CONTEXT_WINDOW_RULE))
        .collect();
    assert!(
        !refused.is_empty(),
        "the flow's 8192 should not fit at first"
    );
    let num_ctx = |r: &RecordedRequest| r.body.pointer("/options/num_ctx").and_then(Value::as_u64);
    assert!(refused.iter().all(|r| num_ctx(r) == Some(8192)));
    // After the refusal every request is built for the stated window, and fits it.
    let after = refused.iter().map(|r| r.seq).max().unwrap();
    let later: Vec<&RecordedRequest> = reqs.iter().filter(|r| r.seq > after).collect();
    assert!(!later.is_empty());
    for r in &later {
        assert_eq!(num_ctx(r), Some(WINDOW), "request {}", r.seq);
        assert!(r.window_tokens() <= WINDOW, "request {}", r.seq);
        assert!(r.max_tokens.unwrap() <= WINDOW / 4);
    }
    assert!(later
        .iter()
        .any(|r| r.text.contains("elided to fit the context window]")));
}

/// What each backend answers to an oversized request; the attempt is classed
/// `context_overflow` and retried with a smaller window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backends_overflow_answer_is_retried_with_a_smaller_window() {
    // llama-server's body as a server started with -c 6144 sends it (its default 2560 slot
    // cannot hold a specialist's instructions at all; see the test above).
    let bodies = [
        (
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":7012,"n_ctx":6144}}"#,
        ),
        (
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (3000 in the messages, 2000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        ),
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        ),
        (
            500,
            r#"{"error":"prompt too long; exceeded max context length by 120 tokens"}"#,
        ),
    ];
    for (status, body) in bodies {
        let plan = json!({"tasks": [{"id": "t1", "persona": "security_sentinel",
            "files": ["src/db.py"], "tools": [], "mandate": "Check the data layer."}]});
        let script = Script::new()
            .models([MODEL])
            .rule(scout_rule())
            .rule(
                Rule::new("planner")
                    .when_system(["You are the planner"])
                    .reply(Reply::json(&plan)),
            )
            .rule(
                Rule::new("overflow")
                    .when_system(["You are security_sentinel"])
                    .reply(Reply::status_body(status, body))
                    .times(1),
            )
            .rule(
                Rule::new("sec")
                    .when_system(["You are security_sentinel"])
                    .reply(Reply::json(&json!({"findings": []}))),
            )
            .rule(synthesizer_rule());
        let server = ScriptedServer::start(script).await.unwrap();
        let report = review(context(&server, BackendKind::Ollama, |f| {
            f.parameters.min_tasks = 1
        }))
        .await;
        let t1 = report.tasks.iter().find(|t| t.id == "t1").unwrap();
        assert_eq!(t1.status, "completed", "{body}: {:?}", t1.error);
        assert_eq!(t1.attempts, 2, "{body}");
        let sec: Vec<RecordedRequest> = server.requests().into_iter().filter(specialist).collect();
        assert_eq!(sec.len(), 2, "{body}");
        assert_eq!(sec[0].rule.as_deref(), Some("overflow"));
        // The retry is built for the smaller window: Ollama is sent the smaller num_ctx, and
        // the output bound shrinks with it.
        let num_ctx = |r: &RecordedRequest| {
            r.body
                .pointer("/options/num_ctx")
                .and_then(Value::as_u64)
                .unwrap()
        };
        assert!(num_ctx(&sec[1]) < num_ctx(&sec[0]), "{body}");
        assert!(sec[1].max_tokens < sec[0].max_tokens, "{body}");
    }
}

/// An empty final answer is not "no findings": it is retried with the error in the prompt.
/// Only an explicit empty list means none, and is accepted without a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_answers_are_retried_and_explicit_empty_lists_accepted() {
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py"], "tools": [],
         "mandate": "Check the data layer."},
        {"id": "t2", "persona": "software_developer", "files": ["src/utils.py"], "tools": [],
         "mandate": "Check the helpers."},
        {"id": "t3", "persona": "test_engineer", "files": ["tests/test_app.py"], "tools": [],
         "mandate": "Check the tests."}]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("sec-empty")
                .when_system(["You are security_sentinel"])
                .when_none(["Your previous answer was empty"])
                .reply(Reply::text("")),
        )
        .rule(
            Rule::new("sec-repaired")
                .when_system(["You are security_sentinel"])
                .when_all(["Your previous answer was empty (malformed_output"])
                .reply(Reply::json(&json!({"findings": []}))),
        )
        .rule(
            Rule::new("dev")
                .when_system(["You are software_developer"])
                .reply(Reply::json(&json!({"findings": []}))),
        )
        .rule(
            Rule::new("te")
                .when_system(["You are test_engineer"])
                .reply(Reply::text("[]")),
        )
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, BackendKind::Ollama, |f| {
        f.parameters.min_tasks = 1
    }))
    .await;
    assert_all_completed(&report);
    let reqs = server.requests();
    let by = |needle: &str| -> Vec<&RecordedRequest> {
        reqs.iter().filter(|r| r.system.contains(needle)).collect()
    };
    let sec = by("You are security_sentinel");
    assert_eq!(sec.len(), 2, "the empty answer was retried once");
    assert_eq!(sec[1].rule.as_deref(), Some("sec-repaired"));
    assert_eq!(by("You are software_developer").len(), 1);
    assert_eq!(by("You are test_engineer").len(), 1);
}

/// An empty answer every time: the task fails as malformed_output after its attempts (it does
/// not "complete with nothing"), and the second attempt's prompt carries the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_specialist_that_only_answers_empty_fails_as_malformed_output() {
    let plan = json!({"tasks": [{"id": "t1", "persona": "security_sentinel",
        "files": ["src/db.py"], "tools": [], "mandate": "Check the data layer."}]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("sec")
                .when_system(["You are security_sentinel"])
                .reply(Reply::text("")),
        )
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, BackendKind::Ollama, |f| {
        f.parameters.min_tasks = 1;
        f.parameters.task_attempts = 2;
    }))
    .await;
    let t1 = report.tasks.iter().find(|t| t.id == "t1").unwrap();
    // Empty twice, with the error fed back in between: the fixes go in circles.
    assert_eq!(t1.status, "circular_fix", "{t1:?}");
    assert!(
        t1.error
            .as_deref()
            .unwrap_or_default()
            .contains("malformed output"),
        "{t1:?}"
    );
    assert_ne!(report.status, ReviewStatus::Completed);
    let retried = server
        .requests()
        .into_iter()
        .filter(specialist)
        .any(|r| r.text.contains("## Previous attempt failed") && r.text.contains("empty"));
    assert!(retried, "the second attempt's prompt lacks the error");
}

/// A verifier that answers 500 forever: the grounded findings stay in the report, UNVERIFIED,
/// with the reason in their notes; grounding-decided ones are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_a_broken_verifier_could_not_check_stay_unverified_with_the_reason() {
    let plan = json!({"tasks": [{"id": "t1", "persona": "security_sentinel",
        "files": ["src/db.py", "src/auth.py"], "tools": [], "mandate": "Check data and auth."}]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("sec")
                .when_system(["You are security_sentinel"])
                .reply(Reply::text(security_findings())),
        )
        .rule(
            Rule::new("verifier-down")
                .when_system(["You are an independent verifier"])
                .reply(Reply::status(500)),
        )
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, BackendKind::Ollama, |f| {
        f.parameters.min_tasks = 1
    }))
    .await;
    // Two grounded findings (the third quotes code that is not there and is dropped).
    assert_eq!(report.findings.len(), 2, "{:?}", report.findings);
    for f in &report.findings {
        assert_eq!(f.verdict, Verdict::Unverified, "{}", f.title);
        assert!(
            f.notes
                .iter()
                .any(|n| n.starts_with("not verified:") && n.contains("server error 500")),
            "{:?}",
            f.notes
        );
    }
    assert_eq!(report.dropped.len(), 1);
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["findings"][0]["verdict"], "UNVERIFIED");
    assert!(report.to_markdown().contains("**Note:** not verified:"));
    assert!(server
        .requests()
        .iter()
        .any(|r| r.rule.as_deref() == Some("verifier-down")));
}

/// The verifier budget counts grounded findings: findings grounding rejects do not use it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verifier_budget_counts_grounded_findings_only() {
    // The hallucinated finding comes first; with a budget of 2 both grounded ones are checked.
    let v = json!({"findings": [
        {"title": "Command injection via os.system", "severity": "P0", "confidence": 0.9,
         "category": "security/injection", "file": "src/db.py", "line_start": 10, "line_end": 12,
         "evidence": "os.system(user_input)", "why_it_matters": "rce", "suggested_fix": "remove"},
        {"title": "SQL injection in item search", "severity": "P0", "confidence": 0.95,
         "category": "security/injection", "file": "src/db.py", "line_start": 53, "line_end": 54,
         "evidence": "name LIKE '%{term}%'", "why_it_matters": "dump", "suggested_fix": "bind"},
        {"title": "Hard-coded signing key", "severity": "P1", "confidence": 0.9,
         "category": "security/secrets", "file": "src/auth.py", "line_start": 15, "line_end": 15,
         "evidence": "SECRET_KEY = \"inv-prod-7f3a9c2e51b84d06\"", "why_it_matters": "forge",
         "suggested_fix": "env"}]});
    let plan = json!({"tasks": [{"id": "t1", "persona": "security_sentinel",
        "files": ["src/db.py", "src/auth.py"], "tools": [], "mandate": "Check data and auth."}]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("sec")
                .when_system(["You are security_sentinel"])
                .reply(Reply::json(&v)),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, BackendKind::Ollama, |f| {
        f.parameters.min_tasks = 1;
        f.parameters.max_verifications = 2;
    }))
    .await;
    let verifier_calls = server
        .requests()
        .iter()
        .filter(|r| r.rule.as_deref() == Some("verifier"))
        .count();
    assert_eq!(verifier_calls, 2);
    assert_eq!(report.findings.len(), 2);
    assert!(report
        .findings
        .iter()
        .all(|f| f.verdict == Verdict::Confirmed));
}

/// llama-server's default 2560-token slot, smaller than the largest persona's whole guidance:
/// its guidance is shortened, never cut mid-way, and every task completes inside the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_servers_default_slot_reviews_with_shortened_guidance() {
    const WINDOW: u64 = 2560;
    let server = ScriptedServer::start(greedy_script().context_window(WINDOW))
        .await
        .unwrap();
    let report = review(context(&server, BackendKind::Ollama, |_| {})).await;
    assert_all_completed(&report);
    let reqs = server.requests();
    let refused = reqs
        .iter()
        .filter(|r| r.rule.as_deref() == Some(CONTEXT_WINDOW_RULE))
        .map(|r| r.seq)
        .max()
        .expect("the flow's 8192 is refused first");
    let spec: Vec<&RecordedRequest> = reqs.iter().filter(|r| specialist(r)).collect();
    assert!(!spec.is_empty());
    for r in reqs.iter().filter(|r| r.seq > refused) {
        assert!(
            r.window_tokens() <= WINDOW,
            "request {} needs {}",
            r.seq,
            r.window_tokens()
        );
    }
    assert!(spec.iter().all(|r| r
        .system
        .contains("Shortened to fit the model's context window")));
}

/// A slot smaller than even a persona's core (identity, mandate, directives, limits), which
/// is never cut. The scout's refused first request teaches the window; the specialist tasks
/// then fail at once with one line saying what to do, without sending requests the server
/// must refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_smaller_than_the_instructions_fails_fast_and_says_what_to_do() {
    let server = ScriptedServer::start(greedy_script().context_window(1792))
        .await
        .unwrap();
    let report = review(context(&server, BackendKind::Ollama, |_| {})).await;
    let reqs = server.requests();
    // The scout was refused at the flow's 8192, then fitted to the window and answered.
    assert_eq!(reqs[0].rule.as_deref(), Some(CONTEXT_WINDOW_RULE));
    let scout = report.tasks.iter().find(|t| t.id == "scout").unwrap();
    assert_eq!(scout.status, "completed", "{:?}", scout.error);
    for t in report
        .tasks
        .iter()
        .filter(|t| t.persona == "security_sentinel")
    {
        assert_eq!(t.status, "failed");
        assert_eq!(t.error_class.as_deref(), Some("config"));
        let e = t.error.as_deref().unwrap_or_default();
        // The window named is the server's, or less once an oversized planner prompt
        // (the full catalog) taught a smaller one.
        assert!(
            e.contains("context window") && e.contains("larger one"),
            "{e}"
        );
    }
    assert!(
        !reqs.iter().any(specialist),
        "no specialist request could fit"
    );
    assert_eq!(
        report.status,
        ReviewStatus::Failed,
        "{}",
        report.status_reason
    );
}

/// The quick flow (the quickstart's) with its largest persona and tools on llama-server's
/// 16k slot: the persona's guidance is shortened (and says so) so the specialist sees the whole
/// of both files it reviews. With a 4,096-token window it got the whole persona and no line of
/// its files, and could only invent findings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_flow_gives_the_material_room_before_the_guidance() {
    let finding = json!({"findings": [{"title": "SQL built by string formatting",
        "severity": "P1", "confidence": 0.9, "category": "security/injection",
        "file": "src/db.py", "line_start": 53, "line_end": 53,
        "evidence": "WHERE name LIKE '%{term}%' ORDER BY name",
        "why_it_matters": "injection", "suggested_fix": "bind parameters"}]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": [{"id": "t1",
                    "persona": "security_sentinel", "files": ["src/db.py", "src/auth.py"],
                    "tools": ["file_read", "file_grep"],
                    "mandate": "Check the queries and the tokens."}]}))),
        )
        .rule(
            Rule::new("answer")
                .when_system(["You are security_sentinel"])
                .reply(Reply::json(&finding)),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script.advertised_context_window(16384))
        .await
        .unwrap();
    let mut ctx = context(&server, BackendKind::OpenAi, |f| {
        let quick = Flow::load(&repo_root().join("flows/quick.yaml")).unwrap();
        f.parameters = quick.parameters;
        f.parameters.call_timeout_secs = 5;
    });
    ctx.backends
        .probe(&Default::default())
        .await
        .expect("probe");
    let report = review(ctx).await;
    assert_all_completed(&report);
    let reqs = server.requests();
    let first = reqs
        .iter()
        .find(|r| specialist(r))
        .expect("a specialist call");
    assert!(first.window_tokens() <= 8192, "{}", first.window_tokens());
    assert!(
        first
            .system
            .contains("Shortened to fit the model's context window"),
        "{}",
        first.system
    );
    let pack = ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap();
    for path in ["src/db.py", "src/auth.py"] {
        let f = pack.get(path).unwrap();
        // Every numbered line of the file, its last included, is in the first turn.
        let whole = pack.read_lines(path, 1, f.line_count).unwrap();
        assert!(
            first.text.contains(&whole),
            "{path} is not whole in\n{}",
            first.text
        );
    }
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
}
