//! The shipped flows beyond the default review, end to end against the scripted model server:
//! comprehensive and security-audit (fixed dimensions and source-directory coverage checked in
//! Rust after planning) and document-review (a team fixed by the flow, signal-called members,
//! routing fields and the document synthesis).

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::report::{Report, ReviewStatus};
use quorum_core::review::finding::{AutofixClass, Severity};
use quorum_runtime::ReviewContext;
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn context(server: &ScriptedServer, target: &std::path::Path, flow: &str) -> Arc<ReviewContext> {
    ContextBuilder::new(server, target)
        .flow(flow)
        .checked()
        .shared()
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

fn persona_requests<'a>(reqs: &'a [RecordedRequest], persona: &str) -> Vec<&'a RecordedRequest> {
    let me = format!("You are {persona},");
    reqs.iter().filter(|r| r.system.contains(&me)).collect()
}

fn sql_injection() -> serde_json::Value {
    json!({"findings": [{"title": "SQL injection in item search", "severity": "P0", "confidence": 0.95,
        "category": "security/injection", "file": "src/db.py", "line_start": 53, "line_end": 54,
        "symbol": "search_items", "evidence": "name LIKE '%{term}%'",
        "why_it_matters": "q=' OR 1=1 -- dumps every row", "suggested_fix": "use bound parameters"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comprehensive_review_adds_a_task_for_every_dimension_the_planner_left_out() {
    // The planner covers only security and tests; the flow requires six dimensions.
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py"], "dimension": "security",
         "mandate": "Find injection in the data layer."},
        {"id": "t2", "persona": "test_engineer", "files": ["tests/test_app.py"], "dimension": "tests",
         "mandate": "Find gaps in the endpoint tests."}
    ]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .when_last_user([
                    "## Required dimensions",
                    "- correctness (required): software_developer",
                ])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("security")
                .when_system(["You are security_sentinel,"])
                .reply(Reply::json(&sql_injection())),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(
            Rule::new("consultant")
                .when_system(["You are an independent severity and confidence consultant"])
                .reply(Reply::json(&json!({"severity": "P1", "confidence": 0.8,
                    "reason": "the search term is formatted into the SQL string"}))),
        )
        .rule(
            Rule::new("judges")
                .when_system(["a judge on the review panel"])
                .reply(Reply::json(&json!({
                    "items": [{"finding": "F001", "score": 8, "reason": "the quote shows it"}],
                    "overall": 8, "reason": "grounded and actionable"}))),
        )
        .rule(
            Rule::new("meta-judge")
                .when_system(["the meta-judge of the review panel"])
                .reply(Reply::json(
                    &json!({"verdict": "accept", "summary": "The one finding holds on every axis."}),
                )),
        )
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, &fixture("code_project"), "comprehensive")).await;
    let reqs = server.requests();
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );

    let coverage = report
        .coverage
        .as_ref()
        .expect("comprehensive reports coverage");
    let dims: Vec<(&str, usize, usize)> = coverage
        .dimensions
        .iter()
        .map(|d| (d.name.as_str(), d.tasks.len(), d.findings))
        .collect();
    assert_eq!(
        dims,
        [
            ("correctness", 1, 0),
            ("security", 1, 1),
            ("performance", 1, 0),
            ("tests", 1, 0),
            ("docs", 1, 0),
            ("architecture", 1, 0)
        ]
    );
    // The four missing dimensions became tasks for their first persona, each with its reason.
    let added: Vec<(&str, &str)> = coverage
        .added
        .iter()
        .map(|a| (a.persona.as_str(), a.reason.as_str()))
        .collect();
    assert_eq!(added.len(), 4, "{added:?}");
    for (persona, dim) in [
        ("software_developer", "correctness"),
        ("performance_engineer", "performance"),
        ("tech_writer", "docs"),
        ("principal_engineer", "architecture"),
    ] {
        assert!(
            added
                .iter()
                .any(|(p, why)| *p == persona && why.contains(&format!("the {dim} dimension"))),
            "{persona} not added for {dim}: {added:?}"
        );
        // ...and ran: their prompts went to the model (the software developer also runs the
        // flow's fresh-eyes lane).
        let want = if persona == "software_developer" {
            2
        } else {
            1
        };
        assert_eq!(persona_requests(&reqs, persona).len(), want, "{persona}");
    }
    let fresh = report
        .tasks
        .iter()
        .find(|t| t.id == "fresh1")
        .expect("the comprehensive flow's fresh-eyes lane ran");
    assert_eq!(fresh.persona, "software_developer");
    assert!(persona_requests(&reqs, "software_developer")
        .iter()
        .any(|r| r.last_user.contains("Read this code as someone new to it")));
    // The docs task reads documents and configuration, not code; the correctness task code.
    let docs = persona_requests(&reqs, "tech_writer")[0];
    assert!(docs.text.contains("<<<BEGIN UNTRUSTED README.md>>>"));
    assert!(!docs.text.contains("<<<BEGIN UNTRUSTED src/db.py>>>"));
    let dev = persona_requests(&reqs, "software_developer")[0];
    assert!(dev.text.contains("<<<BEGIN UNTRUSTED src/app.py>>>"));
    // Every source directory ended in some task.
    assert!(!coverage.directories.is_empty());
    for d in &coverage.directories {
        assert!(!d.tasks.is_empty(), "{} is not covered", d.directory);
    }
    let planner = reqs
        .iter()
        .find(|r| r.system.contains("You are the planner"))
        .unwrap();
    assert!(planner
        .last_user
        .contains("- security (required): security_sentinel, web_security_tester"));
    let md = report.to_markdown();
    assert!(md.contains("### Coverage"), "{md}");
    assert!(md.contains("| security | yes | t1 | 1 |"), "{md}");
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["coverage"]["dimensions"][0]["name"], "correctness");

    // The flow's confidence consultant re-scored the verified finding, blind to the finder's
    // P0 / 0.95; its scores are the finding's, the finder's are kept beside them.
    let consults: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains("severity and confidence consultant"))
        .collect();
    assert_eq!(consults.len(), 1);
    let asked = &consults[0].last_user;
    assert!(
        asked.contains("Title: SQL injection in item search"),
        "{asked}"
    );
    for leak in ["P0", "0.95", "security_sentinel", "onfidence"] {
        assert!(
            !asked.contains(leak),
            "the consultant saw {leak:?}: {asked}"
        );
    }
    let sqli = &report.findings[0];
    assert_eq!(sqli.title, "SQL injection in item search");
    assert_eq!(
        (sqli.severity, sqli.confidence),
        (quorum_core::review::finding::Severity::P1, 0.8)
    );
    let was = sqli
        .rescored
        .as_ref()
        .expect("the finder's scores are kept");
    assert_eq!(
        (was.original_severity, was.original_confidence),
        (quorum_core::review::finding::Severity::P0, 0.95)
    );
    assert_eq!(json["findings"][0]["rescored"]["original_severity"], "P0");
    assert!(report.verification_ledger[0].rescored.is_some());

    // The flow's judge panel: 4 axes x 3 judges, one call each, after the consultant (its
    // scores are what the judges see), then the meta-judge.
    let judges: Vec<_> = reqs
        .iter()
        .filter(|r| r.system.contains("a judge on the review panel"))
        .collect();
    assert_eq!(judges.len(), 12);
    for r in &judges {
        assert!(r.last_user.contains("<<<BEGIN UNTRUSTED finding F001>>>"));
        assert!(
            r.last_user.contains("severity: P1\nconfidence: 0.80\n"),
            "{}",
            r.last_user
        );
    }
    let metas = reqs
        .iter()
        .filter(|r| r.system.contains("the meta-judge of the review panel"))
        .count();
    assert_eq!(metas, 1);
    let panel = report
        .panel
        .as_ref()
        .expect("the comprehensive flow has a panel");
    let axes: Vec<(&str, usize, f64)> = panel
        .axes
        .iter()
        .map(|a| (a.axis.as_str(), a.scores.len(), a.mean))
        .collect();
    assert_eq!(
        axes,
        [
            ("grounding", 3, 8.0),
            ("coverage", 3, 8.0),
            ("actionability", 3, 8.0),
            ("calibration", 3, 8.0)
        ]
    );
    assert!(panel.complete);
    assert_eq!(
        (panel.verdict, panel.verdict_by),
        (
            Some(quorum_core::judging::panel::Verdict::Accept),
            Some(quorum_core::judging::panel::VerdictBy::MetaJudge)
        )
    );
    assert!(md.contains("## Judge panel"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_audit_covers_every_security_dimension() {
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py", "src/auth.py"],
         "dimension": "injection", "mandate": "Trace input to the SQL sinks."}
    ]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .when_last_user([
                    "## Required dimensions",
                    "- threat_model (required): threat_modeler",
                ])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("security")
                .when_system(["You are security_sentinel,"])
                .when_last_user(["Trace input to the SQL sinks."])
                .reply(Reply::json(&sql_injection())),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let flow = Flow::load(&repo_root().join("flows/security-audit.yaml")).unwrap();
    let report = review(context(&server, &fixture("code_project"), "security-audit")).await;
    let reqs = server.requests();
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let coverage = report.coverage.as_ref().unwrap();
    assert_eq!(coverage.dimensions.len(), flow.dimensions.len());
    for d in &coverage.dimensions {
        assert_eq!(d.tasks.len(), 1, "dimension {}: {:?}", d.name, d.tasks);
    }
    assert_eq!(coverage.added.len(), flow.dimensions.len() - 1);
    // The planner's security_sentinel task is filed under injection only, so secrets_and_crypto
    // got its own task (run by the same persona, with that dimension's mandate).
    let sentinel = persona_requests(&reqs, "security_sentinel");
    assert_eq!(sentinel.len(), 2);
    assert!(sentinel
        .iter()
        .any(|r| r.last_user.contains("Find committed or logged secrets")));
    for persona in [
        "identity_access_engineer",
        "web_security_tester",
        "dependency_auditor",
        "cloud_security_auditor",
        "threat_modeler",
    ] {
        assert_eq!(persona_requests(&reqs, persona).len(), 1, "{persona}");
    }
    assert_eq!(coverage.dimensions[0].findings, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_review_fixes_the_core_team_calls_members_by_signal_and_synthesises() {
    let server = ScriptedServer::start(doc_review_script()).await.unwrap();
    let report = review(context(&server, &fixture("plan_doc"), "document-review")).await;
    let reqs = server.requests();
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );

    // Team: the always-on pair although the planner omitted them, the three members whose
    // signals the plan carries, and not scope_guardian, whose signals are absent.
    let team: Vec<(&str, Option<&str>)> = report
        .team
        .iter()
        .map(|m| (m.persona.as_str(), m.reason.as_deref()))
        .collect();
    let names: Vec<&str> = team.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        names,
        [
            "coherence",
            "design_lens",
            "feasibility",
            "product_lens",
            "security_lens"
        ]
    );
    for (p, why) in &team {
        let why = why.unwrap_or_else(|| panic!("{p} has no reason"));
        if ["coherence", "feasibility"].contains(p) {
            assert_eq!(why, "always on in this flow");
        } else {
            assert!(
                why.starts_with("conditional, called by keyword"),
                "{p}: {why}"
            );
        }
    }
    assert!(team
        .iter()
        .any(|(p, why)| *p == "design_lens" && why.unwrap().contains("\"screen\"")));
    assert!(persona_requests(&reqs, "scope_guardian").is_empty());
    let refused = &report.methodology.rejected_tasks;
    assert!(
        refused.iter().any(|r| r.id == "t1"
            && r.persona == "scope_guardian"
            && r.reason.contains("content signals are absent")),
        "{refused:?}"
    );
    // The always-on members got the document and this flow's routing rules.
    let coherence = persona_requests(&reqs, "coherence");
    assert_eq!(coherence.len(), 1);
    assert!(coherence[0]
        .text
        .contains("<<<BEGIN UNTRUSTED offline_sync_plan.md>>>"));
    assert!(coherence[0]
        .system
        .contains("## This review's additional rules"));
    assert!(coherence[0].system.contains("\"autofix_class\""));

    // Synthesis: five findings, P0 -> P3, then confidence, then document order.
    let got: Vec<(&str, Severity, Option<AutofixClass>)> = report
        .findings
        .iter()
        .map(|f| (f.title.as_str(), f.severity, f.routing.autofix_class))
        .collect();
    assert_eq!(got.len(), 5, "{got:#?}");
    // Same section and title from feasibility and security_lens: one finding, highest severity,
    // both pieces of evidence, both reporters.
    let token = &report.findings[0];
    assert_eq!(
        token.title,
        "Session token stored unencrypted on the device"
    );
    assert_eq!(token.severity, Severity::P0);
    assert!(token
        .evidence
        .contains("The session token and the customer"));
    assert!(token
        .evidence
        .contains("Encryption of the local database is deferred"));
    assert_eq!(token.reporters.len(), 2);
    assert_eq!(
        report.findings[1].title,
        "New sync-gateway service contradicts the non-goals"
    );
    // Opposite stances on 6.5 from feasibility (remove) and product_lens (keep): one combined
    // manual finding for a person, presenting both sides.
    let both = &report.findings[2];
    assert_eq!(
        both.title,
        "Reviewers disagree on 6.5 Performance targets: feasibility would remove it, product_lens would keep it"
    );
    assert_eq!(both.severity, Severity::P1);
    assert_eq!(both.routing.autofix_class, Some(AutofixClass::Manual));
    assert_eq!(both.routing.owner.as_deref(), Some("human"));
    assert!(both
        .why_it_matters
        .contains("p99 under 50 ms on 3G cannot be met"));
    assert!(both
        .why_it_matters
        .contains("The 50 ms target is the promise customers renew on"));
    assert!(!report
        .findings
        .iter()
        .any(|f| f.title == "p99 under 50 ms on 3G cannot be met"));
    // design_lens' 0.40 concern on 6.3 is corroborated by coherence there: promoted at P2.
    let promoted = &report.findings[3];
    assert_eq!(
        promoted.title,
        "Sync progress is invisible to the technician"
    );
    assert!(promoted.promoted);
    assert_eq!(promoted.severity, Severity::P2);
    assert!(promoted.confidence >= 0.55);
    let safe = &report.findings[4];
    assert_eq!(safe.routing.autofix_class, Some(AutofixClass::SafeAuto));
    assert_eq!(safe.routing.autofix.as_ref().unwrap().old, SAFE_OLD);
    assert!(report.residual_concerns.is_empty());
    let ids: Vec<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["F001", "F002", "F003", "F004", "F005"]);

    let md = report.to_markdown();
    assert!(
        md.contains("| Persona | Model | Tasks | Why on the team |"),
        "{md}"
    );
    assert!(
        md.contains("## Review team\n\n- **coherence** — always on in this flow\n"),
        "{md}"
    );
    assert!(
        md.contains("- **design_lens** — conditional, called by keyword"),
        "{md}"
    );
    assert!(md.contains("- **Route:** manual → human"));
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["findings"][4]["autofix_class"], "safe_auto");
    assert_eq!(json["findings"][4]["autofix"]["new"], SAFE_NEW);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_member_joins_only_on_its_signal() {
    // The contracts mention no screens or UI: design_lens stays out; the legal text does carry
    // security signals (personal data, encryption), so security_lens joins.
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "design_lens", "files": ["msa.txt"], "mandate": "Review the user flows."}
    ]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, &fixture("contracts"), "document-review")).await;
    let reqs = server.requests();
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let names: Vec<&str> = report.team.iter().map(|m| m.persona.as_str()).collect();
    assert!(!names.contains(&"design_lens"), "{names:?}");
    assert!(persona_requests(&reqs, "design_lens").is_empty());
    assert!(names.contains(&"coherence") && names.contains(&"feasibility"));
    assert!(names.contains(&"security_lens"), "{names:?}");
    assert!(
        report
            .methodology
            .rejected_tasks
            .iter()
            .any(|r| r.persona == "design_lens"
                && r.reason.contains("content signals are absent")
                && r.reason.contains(" of 2 needed)")),
        "{:?}",
        report.methodology.rejected_tasks
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_always_on_members_review_even_when_no_planner_task_is_valid() {
    let plan = json!({"tasks": [{"id": "t1", "persona": "chaos_monkey", "files": ["msa.txt"], "mandate": "Break it."}]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, &fixture("contracts"), "document-review")).await;
    let reqs = server.requests();
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let planner_calls = reqs
        .iter()
        .filter(|r| r.system.contains("You are the planner"))
        .count();
    assert_eq!(planner_calls, 2, "the planner is re-asked once first");
    for persona in ["coherence", "feasibility"] {
        assert_eq!(persona_requests(&reqs, persona).len(), 1, "{persona}");
    }
    assert!(report
        .methodology
        .rejected_tasks
        .iter()
        .any(|r| r.persona == "chaos_monkey"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeted_selection_prefilters_polls_each_survivor_alone_and_fails_open() {
    const POLL: &str = "You are one candidate specialist";
    let poll = |persona: &str, reply: Reply| {
        Rule::new(format!("poll-{persona}"))
            .when_system([POLL])
            .when_last_user([format!("## Candidate\n{persona}:")])
            .reply(reply)
    };
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py"], "mandate": "Find injection."},
        {"id": "t2", "persona": "performance_engineer", "files": ["src/db.py"], "mandate": "Find slow queries."}
    ]});
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(poll(
            "security_sentinel",
            Reply::json(&json!({"interested": true, "reason": "sql"})),
        ))
        .rule(poll(
            "performance_engineer",
            Reply::json(&json!({"interested": false, "reason": "tiny"})),
        ))
        // An unreadable answer (and an unreadable repair) must keep the persona: fail open.
        .rule(
            Rule::new("poll-test_engineer")
                .when_system([POLL])
                .when_all(["## Candidate\ntest_engineer:"])
                .reply(Reply::text("hmm, hard to say")),
        )
        // A poll the server refuses (500, every retry) keeps its persona too.
        .rule(poll("dependency_auditor", Reply::status(500)))
        .rule(
            Rule::new("poll-others")
                .when_system([POLL])
                .reply(Reply::json(
                    &json!({"interested": false, "reason": "not mine"}),
                )),
        )
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(context(&server, &fixture("code_project"), "targeted")).await;
    let reqs = server.requests();
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );

    let polls: Vec<&RecordedRequest> = reqs.iter().filter(|r| r.system.contains(POLL)).collect();
    let polled: std::collections::BTreeSet<String> = polls
        .iter()
        .filter_map(|r| {
            let rest = r.last_user.split("## Candidate\n").nth(1)?;
            rest.split(':').next().map(String::from)
        })
        .collect();
    for p in ["security_sentinel", "performance_engineer", "test_engineer"] {
        assert!(polled.contains(p), "{p} was not polled: {polled:?}");
    }
    // Tier 0 is free: personas whose triggers the material lacks are never polled.
    assert!(!polled.contains("clinical_research_reviewer"), "{polled:?}");
    assert!(!polled.contains("employment_counsel"), "{polled:?}");
    // Each poll stands alone: no other candidate's name, no tools, the material delimited.
    let sec = polls
        .iter()
        .find(|r| r.last_user.contains("## Candidate\nsecurity_sentinel:"))
        .unwrap();
    assert!(!sec.text.contains("performance_engineer") && !sec.text.contains("test_engineer"));
    assert!(!sec.has_tools);
    assert!(sec.text.contains("<<<BEGIN UNTRUSTED file list>>>"));
    assert_eq!(
        polls
            .iter()
            .filter(|r| r.text.contains("## Candidate\ntest_engineer:"))
            .count(),
        2,
        "the unreadable poll gets its one repair turn"
    );

    let planner = reqs
        .iter()
        .find(|r| r.system.contains("You are the planner"))
        .unwrap();
    assert!(planner.last_user.contains("- security_sentinel ["));
    assert!(planner.last_user.contains("- test_engineer ["), "fail open");
    assert!(!planner.last_user.contains("- performance_engineer ["));
    assert!(!planner.last_user.contains("- clinical_research_reviewer ["));
    assert!(report
        .methodology
        .rejected_tasks
        .iter()
        .any(|r| r.id == "t2" && r.reason.contains("not selected")));
    let ran: Vec<&str> = report
        .tasks
        .iter()
        .filter(|t| t.id.starts_with('t'))
        .map(|t| t.persona.as_str())
        .collect();
    assert_eq!(ran, ["security_sentinel"]);

    // report.json says why each candidate is on the team or not.
    let sel = report
        .selection
        .as_ref()
        .expect("the selection is reported");
    let decision = |p: &str| {
        sel.decisions
            .iter()
            .find(|d| d.persona == p)
            .unwrap_or_else(|| panic!("{p} in {:?}", sel.decisions))
    };
    use quorum_core::flows::selection::PollOutcome;
    let sec = decision("security_sentinel");
    assert_eq!(sec.poll, PollOutcome::Interested);
    assert_eq!(sec.reason.as_deref(), Some("sql"));
    assert!(sec.prefilter.starts_with("trigger "), "{}", sec.prefilter);
    let perf = decision("performance_engineer");
    assert_eq!(perf.poll, PollOutcome::Declined);
    assert_eq!(perf.reason.as_deref(), Some("tiny"));
    assert_eq!(decision("test_engineer").poll, PollOutcome::Failed);
    assert_eq!(decision("dependency_auditor").poll, PollOutcome::Failed);
    assert!(
        sel.selected.iter().any(|p| p == "dependency_auditor"),
        "a 500 fails open"
    );
    assert!(
        planner.last_user.contains("- dependency_auditor ["),
        "fail open"
    );
    assert!(!sel.selected.iter().any(|p| p == "performance_engineer"));
    assert!(sel
        .ruled_out
        .iter()
        .any(|p| p == "clinical_research_reviewer"));
    for p in &sel.selected {
        assert!(
            planner.last_user.contains(&format!("- {p} [")),
            "{p} offered"
        );
    }
    let md = report.to_markdown();
    assert!(md.contains("### Selection"), "{md}");
    assert!(md.contains("| performance_engineer | trigger "), "{md}");
}

/// A document flow's fresh-eyes lane: "the same finding" is what document synthesis merges
/// (file, section, normalised title), not a code anchor — so the lane's unique finding is
/// marked and the one coherence also reported is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_flow_s_fresh_eyes_lane_marks_what_only_it_found() {
    let lane = json!({"findings": [
        {"title": "Rollout has no rollback step", "severity": "P2", "confidence": 0.8,
         "category": "document", "file": PLAN_DOC, "line_start": 89, "line_end": 89,
         "symbol": "7. Milestones",
         "evidence": "| M4 | Rollout | after M3 | 10% of Northern region technicians, then 50%, then 100% over two weeks |",
         "why_it_matters": "a bad release reaches everyone", "suggested_fix": "add a rollback gate",
         "autofix_class": "manual", "owner": "human", "stance": "add"},
        {"title": "New sync-gateway service contradicts the non-goals", "severity": "P1",
         "confidence": 0.8, "category": "document", "file": PLAN_DOC, "line_start": 65,
         "line_end": 65, "symbol": "6.3 Sync",
         "evidence": "go through a new sync-gateway service that batches operations from many devices, deduplicates them",
         "why_it_matters": "scope creep", "suggested_fix": "reuse the job queue",
         "autofix_class": "manual", "owner": "human", "stance": "change"}
    ]});
    let mut script = Script::new().models([MODEL]).rule(
        Rule::new("fresh")
            .when_system(["You are principal_engineer"])
            .reply(Reply::json(&lane)),
    );
    for rule in doc_review_script().rules {
        script = script.rule(rule);
    }
    let server = ScriptedServer::start(script).await.unwrap();
    let ctx = context(&server, &fixture("plan_doc"), "document-review");
    let mut ctx = Arc::try_unwrap(ctx).unwrap();
    ctx.flow.fresh_eyes = Some(quorum_core::flows::flow::FreshEyes {
        persona: "principal_engineer".into(),
        mandate: "Read this plan as a newcomer and report what is wrong with it.".into(),
        kinds: vec!["doc".into()],
    });
    let report = review(Arc::new(ctx)).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let all: Vec<&quorum_core::review::finding::Finding> = report
        .findings
        .iter()
        .chain(&report.residual_concerns)
        .collect();
    let by_title = |t: &str| {
        all.iter().find(|f| f.title == t).unwrap_or_else(|| {
            panic!(
                "{t} in {:?}",
                all.iter().map(|f| &f.title).collect::<Vec<_>>()
            )
        })
    };
    assert!(by_title("Rollout has no rollback step").fresh_eyes);
    let shared = by_title("New sync-gateway service contradicts the non-goals");
    assert!(!shared.fresh_eyes, "coherence reported it too");
    assert!(shared
        .reporters
        .iter()
        .any(|r| r.persona == "principal_engineer"));
    assert_eq!(all.iter().filter(|f| f.fresh_eyes).count(), 1);
}

/// Selection instead of the planner (seed 002 §4.2, bottom-up triage): no planner call; each
/// persona the poll kept reviews the files its own triggers meet, with its own mandate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selection_instead_of_the_planner_gives_each_selected_persona_its_slice() {
    const POLL: &str = "You are one candidate specialist";
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("poll-security")
                .when_system([POLL])
                .when_last_user(["## Candidate\nsecurity_sentinel:"])
                .reply(Reply::json(
                    &json!({"interested": true, "reason": "auth code"}),
                )),
        )
        .rule(
            Rule::new("poll-others")
                .when_system([POLL])
                .reply(Reply::json(
                    &json!({"interested": false, "reason": "not mine"}),
                )),
        )
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::status(500)),
        )
        .rule(no_findings_rule())
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let ctx = context(&server, &fixture("code_project"), "targeted");
    let mut ctx = Arc::try_unwrap(ctx).unwrap();
    ctx.flow.selection.as_mut().unwrap().instead_of_planner = true;
    let report = review(Arc::new(ctx)).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let reqs = server.requests();
    assert!(
        !reqs
            .iter()
            .any(|r| r.system.contains("You are the planner")),
        "no planner call"
    );
    let sel = report.selection.as_ref().expect("selection reported");
    let tasks: Vec<&quorum_core::report::TaskReport> = report
        .tasks
        .iter()
        .filter(|t| {
            t.id.strip_prefix('s')
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    let personas: Vec<&str> = tasks.iter().map(|t| t.persona.as_str()).collect();
    assert_eq!(
        personas,
        sel.selected.iter().map(String::as_str).collect::<Vec<_>>(),
        "one task per selected persona, in catalog order"
    );
    assert!(personas.contains(&"security_sentinel"));
    // The sentinel's slice: files whose own signals meet its triggers (auth.py by its path),
    // not every file.
    let asked = reqs
        .iter()
        .find(|r| r.system.contains("You are security_sentinel"))
        .expect("the sentinel ran");
    assert!(asked.text.contains("<<<BEGIN UNTRUSTED src/auth.py>>>"));
    assert!(
        !asked.text.contains("<<<BEGIN UNTRUSTED src/utils.py>>>"),
        "utils.py carries none of its triggers"
    );
    let sentinel = catalog_mandate("security_sentinel");
    assert!(asked
        .last_user
        .contains(sentinel.trim().lines().next().unwrap()));
}

fn catalog_mandate(persona: &str) -> String {
    Catalog::load(&repo_root().join("personas"))
        .unwrap()
        .get(persona)
        .unwrap()
        .mandate
        .clone()
}
