//! Working memory within a review, against the scripted model server: a specialist task that
//! starts after a teammate finished carries the teammate's grounded findings as delimited
//! insights (never a fabricated one), the first task carries none, the choice is recorded,
//! and an exhaustive round-2 task carries round 1's insights.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::report::{Report, ReviewStatus};
use quorum_core::scope::{MemoryScope, ReviewScope};
use quorum_runtime::{FactLog, ReviewContext};
use quorum_store::{DataDir, Event, FlowMeta};
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::*;

const HEADING: &str = "## Insights from teammates";

fn memory_scope() -> ReviewScope {
    ReviewScope {
        memory: Some(Box::new(MemoryScope {
            repository: "path:/test".into(),
            k: 5,
            base_rate: quorum_core::memory::BASE_RATE,
            offered: Vec::new(),
        })),
        ..Default::default()
    }
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
    flow: &str,
    target: &std::path::Path,
    facts: FactLog,
    scope: ReviewScope,
) -> ReviewContext {
    ContextBuilder::new(server, target)
        .flow(flow.trim_end_matches(".yaml"))
        .facts(facts)
        .scope(scope)
        // One at a time: each task starts after the one before it finished.
        .max_concurrent(Some(1))
        .board(Some(
            Arc::new(quorum_runtime::board::MemoryBoard::default()),
        ))
        .build()
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

/// The first request of the specialist whose system prompt names `persona`.
fn first_prompt<'a>(
    reqs: &'a [quorum_testkit::RecordedRequest],
    persona: &str,
) -> &'a quorum_testkit::RecordedRequest {
    reqs.iter()
        .find(|r| r.system.contains(&format!("You are {persona}")))
        .unwrap_or_else(|| panic!("no request for {persona}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_task_carries_its_teammates_grounded_findings_as_delimited_insights() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(data_dir.path());
    let store = data.create_flow(&meta("with-memory")).unwrap();
    let ctx = Arc::new(context(
        &server,
        "review.yaml",
        &fixture("code_project"),
        FactLog::new(store.clone()),
        memory_scope(),
    ));
    let board = ctx.board.clone().unwrap();
    let flow_id = ctx.flow_id.clone();
    let report = review(ctx).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let reqs = server.requests();

    // t1 (security) ran first: nothing to offer it.
    let first = first_prompt(&reqs, "security_sentinel");
    assert!(!first.text.contains(HEADING), "{}", first.last_user);
    // t2 (developer) started after t1 finished: t1's grounded findings, delimited.
    let second = first_prompt(&reqs, "software_developer");
    assert!(second.seq > first.seq);
    let user = &second.last_user;
    let section = user
        .split(HEADING)
        .nth(1)
        .unwrap_or_else(|| panic!("no insights section in t2's prompt:\n{user}"));
    assert!(
        section.contains("<<<BEGIN UNTRUSTED insight I-"),
        "{section}"
    );
    assert!(
        section.contains("SQL injection in item search"),
        "{section}"
    );
    assert!(section.contains("Hard-coded signing key"), "{section}");
    assert!(
        section.contains(
            "security_sentinel found security/injection in src/db.py:53-54 (P0, grounded)"
        ),
        "{section}"
    );
    assert!(
        section.contains(&format!("from review {flow_id} (task t1")),
        "{section}"
    );
    // The fabricated finding (its evidence is not in the file) never became memory.
    assert!(!user.contains("Command injection via os.system"), "{user}");
    // t3 sees both teammates' insights.
    let third = first_prompt(&reqs, "test_engineer");
    assert!(third.last_user.contains("SQL injection in item search"));
    assert!(third
        .last_user
        .contains("Settings file handle never closed"));
    // Memory is data, never the whole prompt: the verifier and synthesizer get none.
    assert!(reqs
        .iter()
        .filter(|r| r.system.contains("You are an independent verifier")
            || r.system.contains("You are the synthesizer"))
        .all(|r| !r.text.contains(HEADING)));

    // Recorded before use, so a resume offers the same; published on the team board.
    let offered: Vec<(String, Vec<String>)> = store
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::InsightsOffered { task_id, insights } => Some((
                task_id,
                insights.into_iter().map(|o| o.insight.title).collect(),
            )),
            _ => None,
        })
        .collect();
    let tasks: Vec<&str> = offered.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tasks, ["t2", "t3"], "{offered:?}");
    assert!(offered[0]
        .1
        .contains(&"SQL injection in item search".to_string()));
    let notes = board.read(&flow_id, Some("insights"));
    assert!(
        notes
            .iter()
            .any(|n| n.body.starts_with("SQL injection in item search: ")),
        "{notes:?}"
    );
    // The report leaves this review's verified findings for the next one.
    let insights = report.insights.expect("report.insights");
    assert!(insights.offered.is_empty());
    assert!(insights.recorded > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_memory_no_prompt_carries_insights() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let ctx = Arc::new(context(
        &server,
        "review.yaml",
        &fixture("code_project"),
        FactLog::disabled(),
        ReviewScope::default(),
    ));
    let report = review(ctx).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert!(server.requests().iter().all(|r| !r.text.contains(HEADING)));
    assert!(report.insights.is_none());
}

fn finding(file: &str, n: usize) -> serde_json::Value {
    json!({"title": format!("Unchecked input in handler_{n}"), "severity": "P2",
        "confidence": 0.9, "category": "correctness/validation", "file": file,
        "line_start": 2, "line_end": 2, "symbol": format!("handler_{n}"),
        "evidence": format!("return x + {n}"), "why_it_matters": "x is never validated",
        "suggested_fix": "validate x"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhaustive_round_two_task_carries_round_ones_insights() {
    let target = tempfile::tempdir().unwrap();
    let dir = target.path().join("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..2 {
        std::fs::write(
            dir.join(format!("m{n}.py")),
            format!("def handler_{n}(x):\n    return x + {n}\n"),
        )
        .unwrap();
    }
    // Round 1 reports two problems (delta 2, the threshold): round 2 re-reads with the next
    // lane, which reports them again and the rounds end.
    let two = json!({"findings": [finding("pkg/m0.py", 0), finding("pkg/m1.py", 1)]});
    // Round 2 reports those two again and two new ones (delta 2 again): a third lane reads.
    let first_line = |file: &str, n: usize| {
        json!({"title": format!("Untyped parameter in handler_{n}"), "severity": "P3",
            "confidence": 0.8, "category": "maintainability/typing", "file": file,
            "line_start": 1, "line_end": 1, "evidence": format!("def handler_{n}(x):"),
            "why_it_matters": "callers cannot tell", "suggested_fix": "annotate x"})
    };
    let round2 = json!({"findings": [finding("pkg/m0.py", 0), finding("pkg/m1.py", 1),
        first_line("pkg/m0.py", 0), first_line("pkg/m1.py", 1)]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("round1")
                .when_system(["You are software_developer,"])
                .reply(Reply::json(&two)),
        )
        .rule(
            Rule::new("round2")
                .when_system(["You are security_sentinel,"])
                .reply(Reply::json(&round2)),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let ctx = context(
        &server,
        "exhaustive.yaml",
        target.path(),
        FactLog::disabled(),
        memory_scope(),
    );
    let report = review(Arc::new(ctx)).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert_eq!(report.rounds.len(), 3, "{:?}", report.rounds);
    let reqs = server.requests();
    let round1 = first_prompt(&reqs, "software_developer,");
    assert!(!round1.text.contains(HEADING));
    let round2 = first_prompt(&reqs, "security_sentinel,");
    assert!(
        round2.last_user.contains("## Task r2"),
        "{}",
        round2.last_user
    );
    let section = round2
        .last_user
        .split(HEADING)
        .nth(1)
        .unwrap_or_else(|| panic!("no insights in round 2:\n{}", round2.last_user));
    assert!(
        section.contains("Unchecked input in handler_0"),
        "{section}"
    );
    assert!(section.contains("software_developer found correctness/validation in pkg/m0.py:2"));
    assert_eq!(
        section.matches("<<<BEGIN UNTRUSTED insight").count(),
        2,
        "{section}"
    );

    // Round 3 gets round 1's two and round 2's two new ones; the two round 2 reported again
    // are known already and not listed twice.
    let round3 = first_prompt(&reqs, "principal_engineer,");
    let section = round3
        .last_user
        .split(HEADING)
        .nth(1)
        .unwrap_or_else(|| panic!("no insights in round 3:\n{}", round3.last_user));
    assert_eq!(
        section.matches("<<<BEGIN UNTRUSTED insight").count(),
        4,
        "{section}"
    );
    assert_eq!(
        section.matches("Unchecked input in handler_0\n").count(),
        1,
        "{section}"
    );
    assert!(
        section.contains("Untyped parameter in handler_1"),
        "{section}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_task_is_offered_what_was_recorded_not_a_new_choice() {
    use quorum_core::memory::{Insight, Kind, Offered, Provenance};
    use quorum_core::task::{Classification, Task};
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(data_dir.path());
    let store = data.create_flow(&meta("resumed")).unwrap();
    let task = |id: &str, persona: &str, file: &str| Task {
        id: id.into(),
        persona: persona.into(),
        files: vec![file.into()],
        mandate: "Look for defects.".into(),
        tools: vec!["file_read".into()],
        verification: String::new(),
        model: None,
        dimension: None,
        origin: None,
        probe: None,
        pass: None,
    };
    // Before the stop: t1 completed (no findings, so nothing to learn from it now), and t2's
    // first attempt was offered one insight; then the process died.
    let recorded = Offered {
        insight: Insight {
            id: "I-recorded".into(),
            title: "Recorded before the stop".into(),
            content: "security_sentinel found x in src/db.py:53 (P0, grounded)".into(),
            tags: vec!["x".into()],
            confidence: 0.9,
            kind: Kind::Insight,
            importance: 0.72,
            provenance: Provenance {
                flow_id: "resumed".into(),
                task_id: "t1".into(),
                persona: "security_sentinel".into(),
                findings: vec!["t1#0".into()],
                target: "path:/test".into(),
                created_ms: 1,
            },
            access_count: 0,
        },
        score: 0.72,
    };
    for e in [
        Event::ScoutCompleted {
            classification: Classification {
                domain: "software".into(),
                ..Default::default()
            },
            fallback: false,
        },
        Event::PlanCompleted {
            tasks: vec![
                task("t1", "security_sentinel", "src/db.py"),
                task("t2", "software_developer", "src/utils.py"),
            ],
            rejected: Vec::new(),
        },
        Event::AttemptStarted {
            task_id: "t1".into(),
            attempt: 1,
            node: "test-node".into(),
        },
        Event::AttemptSucceeded {
            task_id: "t1".into(),
            attempt: 1,
            findings: Vec::new(),
        },
        Event::InsightsOffered {
            task_id: "t2".into(),
            insights: vec![recorded],
        },
        Event::AttemptStarted {
            task_id: "t2".into(),
            attempt: 1,
            node: "test-node".into(),
        },
    ] {
        store.append(&e).unwrap();
    }
    let resume = quorum_runtime::Resume::load(&store).unwrap();
    let ctx = context(
        &server,
        "review.yaml",
        &fixture("code_project"),
        FactLog::new(store.clone()),
        memory_scope(),
    );
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review_from(Arc::new(ctx), None, Some(resume)),
    )
    .await
    .expect("review hung")
    .expect("review ran");
    assert_ne!(
        report.status,
        ReviewStatus::Failed,
        "{}",
        report.status_reason
    );
    let reqs = server.requests();
    assert!(
        reqs.iter()
            .all(|r| !r.system.contains("You are security_sentinel")),
        "t1 ran again"
    );
    let t2 = first_prompt(&reqs, "software_developer");
    assert!(t2.last_user.contains(HEADING), "{}", t2.last_user);
    assert!(
        t2.last_user.contains("Recorded before the stop"),
        "{}",
        t2.last_user
    );
    // Recorded once: the resume did not decide again.
    let offers = store
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.event, Event::InsightsOffered { .. }))
        .count();
    assert_eq!(offers, 1);
}
