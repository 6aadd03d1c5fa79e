//! Narrow probes end to end, in process: a flow with `probes:` adds one task per selected
//! (pattern match, question) pair; each asks its question in one short call with the numbered
//! lines around the match, no tools and the probe schema; a "yes" with a quote is a candidate
//! the verifier judges, a "yes" quoting what the file does not say is dropped by grounding, and
//! a "no" is nothing.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Probes;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::report::Report;
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::time::Duration;
use support::*;

const PROBE: &str = "You answer one yes/no question";

fn script() -> Script {
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": []}))),
        )
        // The weak hash: yes, quoting the line.
        .rule(
            Rule::new("probe-hash")
                .when_system([PROBE])
                .when_last_user(["Is a password hashed here"])
                .reply(Reply::json(&json!({"holds": true, "line": 20,
                    "quote": "return hashlib.sha1(password.encode(\"utf-8\")).hexdigest()",
                    "analysis": "SHA-1 is fast and unsalted"}))),
        )
        // The secret literal: yes, but quoting a line the file does not hold.
        .rule(
            Rule::new("probe-secret")
                .when_system([PROBE])
                .when_last_user(["Is a real secret"])
                .reply(Reply::json(&json!({"holds": true, "line": 15,
                    "quote": "API_TOKEN = \"made-up\"", "analysis": "a token"}))),
        )
        // Everything else: no.
        .rule(
            Rule::new("probe-no")
                .when_system([PROBE])
                .reply(Reply::json(
                    &json!({"holds": false, "line": 1, "quote": "", "analysis": "not shown"}),
                )),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_ask_narrow_questions_and_only_a_grounded_yes_becomes_a_finding() {
    let server = ScriptedServer::start(script()).await.unwrap();
    let pack = ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap();
    let ctx = ContextBuilder::with_pack(&server, pack)
        .flow("quick")
        .tweak(|f| {
            f.parameters.min_tasks = 0;
            f.probes = Some(Probes {
                max: 20,
                context_lines: 4,
                max_output_tokens: 120,
            });
        })
        .shared();
    let report: Report = tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .expect("review hung")
    .expect("review ran");

    let probes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains(PROBE))
        .collect();
    let probe_tasks: Vec<_> = report
        .tasks
        .iter()
        .filter(|t| {
            t.id.strip_prefix('p')
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .collect();
    assert!(probe_tasks.len() >= 5, "{:?}", report.tasks);
    assert_eq!(probes.len(), probe_tasks.len(), "one call per probe");
    for r in &probes {
        assert!(!r.has_tools, "a probe offers no tools");
        assert!(r.json_schema, "a probe asks for its schema");
        assert!(r.last_user.starts_with("## Question\n"), "{}", r.last_user);
        assert!(
            r.last_user.contains("<<<BEGIN UNTRUSTED src/")
                || r.last_user.contains("<<<BEGIN UNTRUSTED config/"),
            "{}",
            r.last_user
        );
        assert!(
            r.max_tokens.unwrap_or(u64::MAX) <= 120,
            "{:?}",
            r.max_tokens
        );
    }
    // The weak-hash probe showed the numbered lines around the match, and its yes survived.
    let hash = probes
        .iter()
        .find(|r| r.last_user.contains("Is a password hashed here"))
        .expect("the weak-hash probe was asked");
    assert!(
        hash.last_user.contains("   20 |     return hashlib.sha1"),
        "numbered lines: {}",
        hash.last_user
    );
    let weak = report
        .findings
        .iter()
        .find(|f| f.category == "security/weak-password-hash")
        .unwrap_or_else(|| panic!("{:?}", report.findings));
    assert_eq!(weak.file.as_deref(), Some("src/auth.py"));
    assert_eq!(weak.line_start, Some(20));
    // The yes that quoted nothing in the file was dropped by grounding, without a verifier.
    assert!(report
        .dropped
        .iter()
        .any(|d| d.title.contains("Hard-coded secret") && d.removed_by == "grounding"));
    assert!(
        !report
            .findings
            .iter()
            .any(|f| f.title.contains("Hard-coded secret")),
        "{:?}",
        report.findings
    );
    // Every other probe said no: no other finding.
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
}
