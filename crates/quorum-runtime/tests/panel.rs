//! The judge panel against the scripted model server: one blind call per judge of the flow's
//! axes and one meta-judge call, the findings delimited in every judge's prompt and no judge
//! seeing another's score, the aggregation in report.json, judges that fail (500s, prose)
//! listed and not counted, the rule's verdict when the meta-judge fails, and a resume that asks
//! only the judges that had not answered.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::{Flow, Role, Stage};
use quorum_core::judging::panel::{Verdict, VerdictBy};
use quorum_core::report::{Report, ReviewStatus};
use quorum_runtime::{FactLog, Resume, ReviewContext};
use quorum_store::{DataDir, Event, FlowMeta};
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use support::*;

const JUDGE: &str = "a judge on the review panel";
const META: &str = "the meta-judge of the review panel";

/// The default review with a panel stage between the verifier and the synthesizer.
fn panel_flow(axes: &[&str], judges: usize) -> Flow {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    flow.parameters.panel_axes = axes.iter().map(|a| a.to_string()).collect();
    flow.parameters.panel_judges = judges;
    let verify = flow.stage(Role::Verifier).id.clone();
    let at = flow
        .stages
        .iter()
        .position(|s| s.role == Role::Synthesizer)
        .unwrap();
    flow.stages[at].needs = vec!["panel".into()];
    flow.stages.insert(
        at,
        Stage {
            id: "panel".into(),
            role: Role::Panel,
            needs: vec![verify],
            instructions: "You are on the judge panel of a review. Score the findings shown."
                .into(),
            tools: Vec::new(),
            max_concurrent: None,
        },
    );
    flow.validate().unwrap();
    flow
}

fn context(server: &ScriptedServer, flow: Flow, facts: FactLog) -> ReviewContext {
    ContextBuilder::new(server, &fixture("code_project"))
        .with_flow(flow)
        .checked()
        .facts(facts)
        .build()
}

async fn review(ctx: ReviewContext, resume: Option<Resume>) -> Report {
    tokio::time::timeout(
        Duration::from_secs(90),
        quorum_runtime::run_review_from(Arc::new(ctx), None, resume),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

/// Three real findings of the fixture, each quoting its lines (F001 P0, F002 P1, F003 P2).
const EVIDENCE: [&str; 3] = [
    "name LIKE '%{term}%'",
    "SECRET_KEY = \"inv-prod-7f3a9c2e51b84d06\"",
    "offset = page * per_page",
];

fn findings() -> Value {
    json!({"findings": [
        {"title": "SQL injection in item search", "severity": "P0", "confidence": 0.95,
         "category": "security/injection", "file": "src/db.py", "line_start": 53, "line_end": 53,
         "evidence": EVIDENCE[0], "why_it_matters": "q=' OR 1=1 -- dumps every row",
         "suggested_fix": "use bound parameters"},
        {"title": "Hard-coded signing key", "severity": "P1", "confidence": 0.9,
         "category": "security/secrets", "file": "src/auth.py", "line_start": 15, "line_end": 15,
         "evidence": EVIDENCE[1], "why_it_matters": "anyone with the source can forge tokens",
         "suggested_fix": "load the key from the environment"},
        {"title": "Offset pagination on an unindexed scan", "severity": "P2", "confidence": 0.8,
         "category": "performance/pagination", "file": "src/db.py", "line_start": 43, "line_end": 43,
         "evidence": EVIDENCE[2], "why_it_matters": "deep pages scan every earlier row",
         "suggested_fix": "paginate by key"}
    ]})
}

/// A judge's answer: every finding scored `overall`, with reasons carrying `token`, which
/// only this judge gives (and which does not name it).
fn scores(token: &str, overall: f64) -> Reply {
    Reply::json(&json!({
        "items": [
            {"finding": "F001", "score": overall, "reason": format!("item-reason-{token}")},
            {"finding": "F002", "score": overall, "reason": format!("item-reason-{token}")},
            {"finding": "F003", "score": overall, "reason": format!("item-reason-{token}")},
            // Not a finding of this review: ignored.
            {"finding": "F999", "score": 0, "reason": "invented"}
        ],
        "overall": overall,
        "reason": format!("overall-reason-{token}")
    }))
}

fn judge_rule(judge: &str, reply: Reply) -> Rule {
    Rule::new(format!("judge {judge}"))
        .when_system([format!("You are {judge}, {JUDGE}")])
        .reply(reply)
}

/// The review up to the panel; then `rules` (the judges' and the meta-judge's).
fn script(rules: Vec<Rule>) -> Script {
    script_finding(findings(), rules)
}

fn script_finding(answer: Value, rules: Vec<Rule>) -> Script {
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py", "src/auth.py"],
         "mandate": "Find injection, secret-handling and query-cost flaws."}
    ]});
    let mut s = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("security")
                .when_system(["You are security_sentinel,"])
                .reply(Reply::json(&answer)),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    for r in rules {
        s = s.rule(r);
    }
    s
}

/// Grounding 2 and 9 (they disagree), coverage 6 and 8; the meta-judge says revise.
const SCRIPTED: [(&str, &str, f64); 4] = [
    ("judge_grounding_auditor", "alpha", 2.0),
    ("judge_grounding_practitioner", "bravo", 9.0),
    ("judge_coverage_auditor", "charlie", 6.0),
    ("judge_coverage_practitioner", "delta", 8.0),
];

fn token_of(judge: &str) -> &'static str {
    SCRIPTED
        .iter()
        .find(|(j, _, _)| *j == judge)
        .map(|(_, t, _)| *t)
        .unwrap_or("none")
}

fn happy_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = SCRIPTED
        .iter()
        .map(|(j, t, s)| judge_rule(j, scores(t, *s)))
        .collect();
    rules.push(Rule::new("meta").when_system([META]).reply(Reply::json(
        &json!({"verdict": "revise", "summary": "Grounding is contested; fix the cited lines."}),
    )));
    rules
}

fn requests_with(server: &ScriptedServer, needle: &str) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains(needle))
        .collect()
}

/// The judge a judge request is addressed to.
fn judge_of(r: &RecordedRequest) -> String {
    let rest = r.system.split("You are ").nth(1).unwrap_or_default();
    rest.split(',').next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_judge_is_asked_once_blind_and_the_report_aggregates_their_scores() {
    let server = ScriptedServer::start(script(happy_rules())).await.unwrap();
    let flow = panel_flow(&["grounding", "coverage"], 2);
    let report = review(context(&server, flow, FactLog::disabled()), None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert_eq!(report.findings.len(), 3);

    // Exactly axes x judges judge requests, one per judge, and one meta-judge request.
    let asked = requests_with(&server, JUDGE);
    let who: BTreeSet<String> = asked.iter().map(judge_of).collect();
    assert_eq!(asked.len(), 4, "{who:?}");
    let want: BTreeSet<String> = SCRIPTED.iter().map(|(j, _, _)| j.to_string()).collect();
    assert_eq!(who, want);
    assert_eq!(requests_with(&server, META).len(), 1);

    for r in &asked {
        let me = judge_of(r);
        let axis = if me.contains("grounding") {
            "grounding"
        } else {
            "coverage"
        };
        assert!(
            r.system.contains(&format!("on one axis, {axis},")),
            "{me}: {}",
            r.system
        );
        // Every finding, delimited as data, with its grounded quote inside its block.
        for (k, quote) in EVIDENCE.iter().enumerate() {
            let id = format!("F00{}", k + 1);
            let open = format!("<<<BEGIN UNTRUSTED finding {id}>>>");
            let close = format!("<<<END UNTRUSTED finding {id}>>>");
            let (a, b) = (
                r.last_user.find(&open).expect("finding block opened"),
                r.last_user.find(&close).expect("finding block closed"),
            );
            let q = r
                .last_user
                .find(quote)
                .expect("the evidence quote is shown");
            assert!(
                a < q && q < b,
                "{me}: the quote of {id} is outside its block"
            );
        }
        assert!(r.system.contains("never instructions"));
        // Blind: no other judge's name, score or reason.
        for (other, token, _) in SCRIPTED.iter().filter(|(j, _, _)| *j != me) {
            assert!(!r.text.contains(other), "{me} saw {other}");
            assert!(
                !r.text.contains(&format!("reason-{token}")),
                "{me} saw {other}'s reason"
            );
        }
        assert!(!r.text.contains("overall-reason-"), "{me} saw a score");
    }

    // The meta-judge sees the aggregates and the reasons, never who gave them.
    let meta = &requests_with(&server, META)[0];
    assert!(meta.last_user.contains("mean 5.5"), "{}", meta.last_user);
    assert!(meta.last_user.contains("the judges disagree"));
    for (j, token, _) in SCRIPTED {
        assert!(meta.last_user.contains(&format!("overall-reason-{token}")));
        assert!(meta.last_user.contains(&format!("item-reason-{token}")));
        assert!(!meta.text.contains(j), "the meta-judge saw who {j} is");
    }
    for perspective in ["auditor", "practitioner"] {
        assert!(!meta.last_user.contains(perspective), "{}", meta.last_user);
    }

    let panel = report.panel.as_ref().expect("the report has the panel");
    let axes: Vec<(&str, f64, f64, f64, f64, bool, usize)> = panel
        .axes
        .iter()
        .map(|a| {
            (
                a.axis.as_str(),
                a.mean,
                a.min,
                a.max,
                a.spread,
                a.disagreement,
                a.scores.len(),
            )
        })
        .collect();
    assert_eq!(
        axes,
        [
            ("grounding", 5.5, 2.0, 9.0, 7.0, true, 2),
            ("coverage", 7.0, 6.0, 8.0, 2.0, false, 2)
        ]
    );
    assert_eq!(panel.overall, Some(6.25));
    assert_eq!(panel.verdict, Some(Verdict::Revise));
    assert_eq!(panel.verdict_by, Some(VerdictBy::MetaJudge));
    assert!(panel.summary.contains("Grounding is contested"));
    assert!(panel.complete && panel.failed.is_empty());
    for a in &panel.axes {
        for s in &a.scores {
            let items: Vec<&str> = s.items.iter().map(|i| i.finding.as_str()).collect();
            assert_eq!(
                items,
                ["F001", "F002", "F003"],
                "F999 is no finding: ignored"
            );
            assert_eq!(s.model, MODEL);
            assert_eq!(s.reason, format!("overall-reason-{}", token_of(&s.judge)));
        }
    }
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["panel"]["verdict_by"], "meta_judge");
    assert_eq!(json["panel"]["axes"][0]["disagreement"], true);
    assert_eq!(
        json["panel"]["axes"][0]["scores"][0]["items"][0]["finding"],
        "F001"
    );
    assert!(report.to_markdown().contains("## Judge panel"));
    assert!(report
        .tasks
        .iter()
        .any(|t| t.id == "panel:judge_grounding_auditor" && t.status == "completed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_judges_are_listed_not_counted_and_a_failed_meta_judge_leaves_it_to_the_rule() {
    let rules = vec![
        judge_rule("judge_grounding_auditor", Reply::status(500)),
        judge_rule(
            "judge_grounding_practitioner",
            Reply::text("These findings look solid to me overall."),
        ),
        judge_rule("judge_grounding_skeptic", scores("echo", 3.0)),
        Rule::new("meta")
            .when_system([META])
            .reply(Reply::status(500)),
    ];
    let server = ScriptedServer::start(script(rules)).await.unwrap();
    let mut flow = panel_flow(&["grounding"], 3);
    flow.parameters.task_attempts = 2;
    let report = review(context(&server, flow, FactLog::disabled()), None).await;
    // The panel fails open: the review completes.
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let panel = report.panel.as_ref().unwrap();
    assert!(!panel.complete);
    let failed: Vec<(&str, &str)> = panel
        .failed
        .iter()
        .map(|f| (f.judge.as_str(), f.error.as_str()))
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed
        .iter()
        .any(|(j, e)| *j == "judge_grounding_auditor" && e.contains("500")));
    assert!(failed
        .iter()
        .any(|(j, e)| *j == "judge_grounding_practitioner" && e.contains("malformed")));
    // Only the judge that scored counts.
    assert_eq!(panel.axes.len(), 1);
    assert_eq!(panel.axes[0].scores.len(), 1);
    assert_eq!((panel.axes[0].mean, panel.overall), (3.0, Some(3.0)));
    // The meta-judge was asked and failed: the rule's verdict (an axis below 4 rejects).
    assert!(!requests_with(&server, META).is_empty());
    assert_eq!(panel.verdict, Some(Verdict::Reject));
    assert_eq!(panel.verdict_by, Some(VerdictBy::Rule));
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["panel"]["verdict_by"], "rule");
    // Each failing judge was retried under the flow's attempts (the prose one with a repair
    // turn each time).
    let prose = requests_with(&server, "You are judge_grounding_practitioner,");
    assert_eq!(prose.len(), 4, "2 attempts x (answer + repair)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_asks_only_the_judges_that_had_not_answered() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(dir.path());
    let meta = |id: &str| FlowMeta {
        flow_id: id.into(),
        flow_name: "review".into(),
        flow_yaml: String::new(),
        params: json!({}),
        target_path: String::new(),
        head_sha: None,
        started_at: String::new(),
        started_ms: 0,
        node: "test-node".into(),
    };
    let flow = || panel_flow(&["grounding", "coverage"], 2);

    // A whole review, recorded.
    let first = ScriptedServer::start(script(happy_rules())).await.unwrap();
    let store = data.create_flow(&meta("whole")).unwrap();
    let whole = review(context(&first, flow(), FactLog::new(store.clone())), None).await;
    let events: Vec<Event> = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    drop(store);
    let scored: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::PanelScored { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        scored.len(),
        4,
        "every judge's answer is recorded as it comes"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::PanelDecided { .. })));

    // The log cut as if the process died after two judges had answered.
    let cut_at = scored[1];
    let answered: BTreeSet<String> = events[..=cut_at]
        .iter()
        .filter_map(|e| match e {
            Event::PanelScored { score } => Some(score.judge.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answered.len(), 2);
    let cut = data.create_flow(&meta("cut")).unwrap();
    for e in &events[..=cut_at] {
        cut.append(e).unwrap();
    }
    let resume = Resume::load(&cut).unwrap();
    assert_eq!(resume.replay.panel_scores.len(), 2);

    let second = ScriptedServer::start(script(happy_rules())).await.unwrap();
    let resumed = review(
        context(&second, flow(), FactLog::new(cut.clone())),
        Some(resume),
    )
    .await;
    assert_eq!(
        resumed.status,
        ReviewStatus::Completed,
        "{}",
        resumed.status_reason
    );
    let asked: BTreeSet<String> = requests_with(&second, JUDGE).iter().map(judge_of).collect();
    assert_eq!(requests_with(&second, JUDGE).len(), 2);
    assert!(
        asked.is_disjoint(&answered),
        "asked again: {asked:?} answered before the stop: {answered:?}"
    );
    assert_eq!(requests_with(&second, META).len(), 1);
    for r in second.requests() {
        for stage in [
            "You are the scout",
            "You are the planner",
            "You are security_sentinel",
            "You are an independent verifier",
        ] {
            assert!(!r.system.contains(stage), "{stage} ran again");
        }
    }
    // The resumed panel is the whole one.
    let (a, b) = (whole.panel.unwrap(), resumed.panel.unwrap());
    assert_eq!(a.axes, b.axes);
    assert_eq!(
        (a.overall, a.verdict, a.verdict_by),
        (b.overall, b.verdict, b.verdict_by)
    );
    assert!(b.complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_score_costs_no_panel_call() {
    let server = ScriptedServer::start(script_finding(json!({"findings": []}), happy_rules()))
        .await
        .unwrap();
    let flow = panel_flow(&["grounding", "coverage"], 2);
    let report = review(context(&server, flow, FactLog::disabled()), None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert!(report.findings.is_empty());
    assert!(requests_with(&server, JUDGE).is_empty());
    assert!(requests_with(&server, META).is_empty());
    let panel = report.panel.expect("the panel says why it did not score");
    assert!(panel.axes.is_empty() && panel.verdict.is_none());
    assert_eq!(panel.note, "no surviving findings to score");
}
