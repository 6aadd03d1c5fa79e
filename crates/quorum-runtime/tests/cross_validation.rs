//! Verification depth against the scripted model server: N verifier calls per grounded
//! finding, each blind to the finder and to the other verifiers, their votes combined by the
//! flow's threshold, the verification ledger in report.json, spreading the votes over models, a
//! resume that never asks about a finding a finished batch already judged, the confidence
//! consultant and the fresh-eyes lane.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Flow;
use quorum_core::report::{Report, ReviewStatus};
use quorum_core::review::finding::Verdict;
use quorum_core::review::vote::Threshold;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::{Backends, FactLog, Resume, ReviewContext};
use quorum_store::{DataDir, Event, FlowMeta};
use quorum_testkit::review::ContextBuilder;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use support::*;

const VERIFIER: &str = "You are an independent verifier";

/// The grounded findings of `code_review_script` (the invented os.system one is dropped by
/// grounding before any model sees it).
const GROUNDED: [&str; 5] = [
    "SQL injection in item search",
    "Hard-coded signing key",
    "Unsynchronised global request counter",
    "Settings file handle never closed",
    "Request counter is not thread-safe",
];

fn context(
    server: &ScriptedServer,
    facts: FactLog,
    tweak: impl FnOnce(&mut Flow),
) -> ReviewContext {
    ContextBuilder::new(server, &fixture("code_project"))
        .tweak(tweak)
        .facts(facts)
        .build()
}

async fn review(ctx: ReviewContext, resume: Option<Resume>) -> Report {
    tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review_from(Arc::new(ctx), None, resume),
    )
    .await
    .expect("review hung")
    .expect("review ran")
}

fn verifier_requests(server: &ScriptedServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains(VERIFIER))
        .collect()
}

/// Which grounded finding a verifier prompt asks about.
fn claim_of(r: &RecordedRequest) -> &'static str {
    GROUNDED
        .into_iter()
        .find(|t| r.last_user.contains(&format!("Title: {t}\n")))
        .unwrap_or_else(|| panic!("verifier prompt about no known finding: {}", r.last_user))
}

fn verdict(v: &str, reason: &str) -> Reply {
    Reply::json(&json!({"verdict": v, "reason": reason}))
}

/// `code_review_script` with its verifier rule replaced by `rules` (then a CONFIRMED default).
fn script_with_verifiers(rules: Vec<Rule>) -> Script {
    let base = code_review_script();
    let mut script = Script::new().models([MODEL]);
    for rule in base.rules {
        if rule.name == "verifier" {
            for r in &rules {
                script = script.rule(r.clone());
            }
        }
        script = script.rule(rule);
    }
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_grounded_finding_is_asked_of_n_blind_verifiers() {
    // Every verifier answers with a reason no other prompt may contain.
    let replies: Vec<Reply> = (0..32)
        .map(|k| verdict("CONFIRMED", &format!("vote-reason-{k}: the lines show it")))
        .collect();
    let mut rule = Rule::new("blind").when_system([VERIFIER]);
    for r in replies {
        rule = rule.reply(r);
    }
    let server = ScriptedServer::start(script_with_verifiers(vec![rule]))
        .await
        .unwrap();
    let report = review(
        context(&server, FactLog::disabled(), |f| {
            f.parameters.verifiers = 3;
            f.parameters.verify_threshold = Threshold::Majority;
        }),
        None,
    )
    .await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );

    // N requests per grounded finding, none for the finding grounding dropped.
    let asked = verifier_requests(&server);
    let mut per_claim: BTreeMap<&str, Vec<&RecordedRequest>> = BTreeMap::new();
    for r in &asked {
        per_claim.entry(claim_of(r)).or_default().push(r);
    }
    assert_eq!(asked.len(), 3 * GROUNDED.len(), "{:?}", per_claim.keys());
    for t in GROUNDED {
        assert_eq!(per_claim[t].len(), 3, "{t}");
        // The same question to each verifier: no verifier is told what another said.
        let texts: BTreeSet<&str> = per_claim[t].iter().map(|r| r.text.as_str()).collect();
        assert_eq!(
            texts.len(),
            1,
            "{t}: the verifiers were not asked the same question"
        );
    }
    // Blind to the finder (persona, confidence, severity) and to the other verifiers.
    for r in &asked {
        for persona in ["security_sentinel", "software_developer", "test_engineer"] {
            assert!(!r.text.contains(persona), "verifier prompt names {persona}");
        }
        for leak in [
            "confidence",
            "Confidence",
            "0.95",
            "0.45",
            "Severity",
            "severity",
        ] {
            assert!(
                !r.text.contains(leak),
                "verifier prompt leaks {leak:?}: {}",
                r.text
            );
        }
        for sev in ["P0", "P1", "P2", "P3"] {
            assert!(!r.last_user.contains(sev), "verifier prompt leaks {sev}");
        }
        assert!(
            !r.text.contains("vote-reason-"),
            "a verifier saw another verifier's answer"
        );
    }

    // The ledger: one entry per model-checked finding, three votes each, ids resolved.
    let ledger = &report.verification_ledger;
    assert_eq!(ledger.len(), GROUNDED.len());
    for e in ledger {
        assert_eq!(e.threshold, Threshold::Majority);
        assert_eq!(e.outcome, Verdict::Confirmed);
        let names: Vec<&str> = e.votes.iter().map(|v| v.verifier.as_str()).collect();
        assert_eq!(names, ["v1", "v2", "v3"]);
        assert!(e.votes.iter().all(|v| v.model == MODEL
            && v.verdict == Some(Verdict::Confirmed)
            && v.reason.starts_with("vote-reason-")));
        let digests: BTreeSet<&str> = e.votes.iter().map(|v| v.prompt_digest.as_str()).collect();
        assert_eq!(digests.len(), 1, "one question, one digest");
        assert_eq!(digests.iter().next().unwrap().len(), 12);
    }
    let sqli = ledger
        .iter()
        .find(|e| e.title == "SQL injection in item search")
        .unwrap();
    assert_eq!(sqli.finding.as_deref(), Some("F001"));
    assert_eq!(sqli.task, "t1");
    let leak = ledger
        .iter()
        .find(|e| e.title == "Settings file handle never closed")
        .unwrap();
    assert!(
        leak.finding
            .as_deref()
            .is_some_and(|id| id.starts_with('R')),
        "a residual concern keeps its R id: {:?}",
        leak.finding
    );

    // report.json: the new field beside every existing one, in the shape documented.
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let entry = &json["verification_ledger"][0];
    for key in [
        "finding",
        "votes",
        "threshold",
        "outcome",
        "title",
        "file",
        "task",
    ] {
        assert!(
            entry.get(key).is_some(),
            "ledger entry lacks {key}: {entry}"
        );
    }
    for key in ["verifier", "model", "verdict", "reason", "prompt_digest"] {
        assert!(entry["votes"][0].get(key).is_some(), "vote lacks {key}");
    }
    assert_eq!(entry["threshold"], "majority");
    for key in ["findings", "dropped", "tasks", "usage", "methodology"] {
        assert!(json.get(key).is_some(), "report.json lost {key}");
    }
    let md = report.to_markdown();
    assert!(
        md.contains("**Cross-validation:** 5 findings model-checked, up to 3 verifiers each"),
        "{md}"
    );
    // One model served every vote: the report says they were not independent opinions.
    assert!(
        report
            .methodology
            .verifier_note
            .contains("repeated draws rather than independent opinions"),
        "{}",
        report.methodology.verifier_note
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn votes_combine_by_threshold_and_failures_are_no_votes() {
    // Matched on the whole conversation, so a repair turn after an unreadable answer is
    // answered by the same rule.
    let on = |title: &str| {
        Rule::new(title)
            .when_system([VERIFIER])
            .when_regex(format!("Title: {title}\n"))
    };
    let rules = vec![
        // C, H, H under majority: dropped.
        on("SQL injection in item search")
            .reply(verdict("CONFIRMED", "line 53 formats the term into SQL"))
            .reply(verdict("HALLUCINATED", "the query is parameterised"))
            .reply(verdict("HALLUCINATED", "no SQL is built here")),
        // C, P, H: kept as PLAUSIBLE.
        on("Hard-coded signing key")
            .reply(verdict("CONFIRMED", "the key is a literal"))
            .reply(verdict("PLAUSIBLE", "may be a test key"))
            .reply(verdict("HALLUCINATED", "it is read from the environment")),
        // Never a readable verdict: no votes at all, UNVERIFIED with the reason.
        on("Settings file handle never closed").reply(Reply::text("I would rather not say.")),
    ];
    let server = ScriptedServer::start(script_with_verifiers(rules))
        .await
        .unwrap();
    let report = review(
        context(&server, FactLog::disabled(), |f| {
            f.parameters.verifiers = 3;
            f.parameters.verify_threshold = Threshold::Majority;
        }),
        None,
    )
    .await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );

    let dropped = report
        .dropped
        .iter()
        .find(|d| d.title == "SQL injection in item search")
        .expect("C,H,H under majority is dropped");
    assert_eq!(dropped.verdict, Some(Verdict::Hallucinated));
    assert!(
        dropped
            .reason
            .starts_with("2 of 3 votes rejected it (majority threshold): "),
        "{}",
        dropped.reason
    );
    assert!(!report
        .findings
        .iter()
        .any(|f| f.title == "SQL injection in item search"));

    let key = report
        .findings
        .iter()
        .find(|f| f.title == "Hard-coded signing key")
        .expect("C,P,H under majority is kept");
    assert_eq!(key.verdict, Verdict::Plausible);

    let leak = report
        .residual_concerns
        .iter()
        .find(|f| f.title == "Settings file handle never closed")
        .expect("an unanswered finding stays");
    assert_eq!(leak.verdict, Verdict::Unverified);
    assert!(
        leak.notes
            .iter()
            .any(|n| n.starts_with("not verified: no verifier gave a verdict (3 asked)")),
        "{:?}",
        leak.notes
    );

    let entry = |t: &str| {
        report
            .verification_ledger
            .iter()
            .find(|e| e.title == t)
            .unwrap()
    };
    let sqli = entry("SQL injection in item search");
    assert_eq!(sqli.outcome, Verdict::Hallucinated);
    assert_eq!(sqli.finding, None, "a dropped finding has no report id");
    let mut votes: Vec<Option<Verdict>> = sqli.votes.iter().map(|v| v.verdict).collect();
    votes.sort_by_key(|v| format!("{v:?}"));
    assert_eq!(
        votes,
        [
            Some(Verdict::Confirmed),
            Some(Verdict::Hallucinated),
            Some(Verdict::Hallucinated)
        ]
    );
    assert_eq!(entry("Hard-coded signing key").outcome, Verdict::Plausible);
    let none = entry("Settings file handle never closed");
    assert_eq!(none.outcome, Verdict::Unverified);
    assert!(none
        .votes
        .iter()
        .all(|v| v.verdict.is_none() && !v.reason.is_empty()));
    let md = report.to_markdown();
    assert!(
        md.contains("SQL injection in item search: ") && md.contains(" → HALLUCINATED"),
        "the split decision is listed: {md}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_verifier_by_default_is_one_call_per_finding() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let report = review(context(&server, FactLog::disabled(), |_| {}), None).await;
    assert_eq!(verifier_requests(&server).len(), GROUNDED.len());
    assert_eq!(report.verification_ledger.len(), GROUNDED.len());
    for e in &report.verification_ledger {
        assert_eq!(e.threshold, Threshold::Any);
        assert_eq!(e.votes.len(), 1);
    }
    // A single verifier's reason is reported as it was before cross-validation existed.
    assert!(report
        .findings
        .iter()
        .all(|f| f.verdict == Verdict::Confirmed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn votes_spread_over_the_models_there_are() {
    let models = ["qwen2.5-coder:7b", "llama3.1:8b", "mistral:7b"];
    let mut script = code_review_script();
    script.models = models.iter().map(|m| m.to_string()).collect();
    let server = ScriptedServer::start(script).await.unwrap();
    let mut cfg = BackendConfig::new(BackendKind::OpenAi, server.openai_url());
    cfg.timeout_secs = 5;
    let mut backends = Backends::from_configs(&[cfg], "auto").unwrap();
    backends.probe(&BTreeMap::new()).await.unwrap();
    let mut ctx = context(&server, FactLog::disabled(), |f| f.parameters.verifiers = 3);
    ctx.backends = backends;
    let report = review(ctx, None).await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let asked = verifier_requests(&server);
    assert_eq!(asked.len(), 3 * GROUNDED.len());
    let used: BTreeSet<&str> = asked.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(used.len(), 3, "votes not spread over the models: {used:?}");
    for e in &report.verification_ledger {
        let m: BTreeSet<&str> = e.votes.iter().map(|v| v.model.as_str()).collect();
        assert_eq!(m.len(), 3, "{}: {m:?}", e.title);
    }
    assert_eq!(report.methodology.verifier_models.len(), 3);
    assert!(!report.methodology.verifier_note.contains("repeated draws"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_never_asks_about_a_finding_a_finished_batch_judged() {
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
    let tweak = |f: &mut Flow| {
        f.parameters.verifiers = 2;
        f.parameters.verify_batch = 2;
    };

    // A whole review, recorded.
    let first = ScriptedServer::start(code_review_script()).await.unwrap();
    let store = data.create_flow(&meta("whole")).unwrap();
    let whole = review(context(&first, FactLog::new(store.clone()), tweak), None).await;
    let events: Vec<Event> = store
        .events()
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    drop(store);

    // The same log cut as if the process died after the first batch was counted.
    let batch = events
        .iter()
        .position(|e| matches!(e, Event::VerdictsRecorded { .. }))
        .expect("a batch's verdicts are recorded as it is counted");
    let Event::VerdictsRecorded { verdicts } = &events[batch] else {
        unreachable!()
    };
    let judged: BTreeSet<String> = verdicts
        .iter()
        .map(|v| v.judged.reported.finding.title.clone())
        .collect();
    assert_eq!(judged.len(), 2, "verify_batch is 2");
    let cut = data.create_flow(&meta("cut")).unwrap();
    for e in &events[..=batch] {
        cut.append(e).unwrap();
    }
    let resume = Resume::load(&cut).unwrap();
    assert!(resume.replay.judged.is_none());
    assert_eq!(resume.replay.verdicts.len(), 2);

    let second = ScriptedServer::start(code_review_script()).await.unwrap();
    let resumed = review(
        context(&second, FactLog::new(cut.clone()), tweak),
        Some(resume),
    )
    .await;
    assert_eq!(
        resumed.status,
        ReviewStatus::Completed,
        "{}",
        resumed.status_reason
    );
    let asked = verifier_requests(&second);
    for r in &asked {
        assert!(
            !judged.contains(claim_of(r)),
            "asked again about {}, judged before the stop",
            claim_of(r)
        );
    }
    assert_eq!(asked.len(), 2 * (GROUNDED.len() - 2));
    // Nothing else ran again: no specialist, no planner.
    for r in second.requests() {
        for stage in [
            "You are the scout",
            "You are the planner",
            "You are security_sentinel",
            "You are software_developer",
            "You are test_engineer",
        ] {
            assert!(!r.system.contains(stage), "{stage} ran again");
        }
    }
    // The resumed report is the whole one: same findings, a full ledger.
    let titles = |r: &Report| {
        r.findings
            .iter()
            .map(|f| (f.id.clone(), f.title.clone(), f.verdict))
            .collect::<Vec<_>>()
    };
    assert_eq!(titles(&resumed), titles(&whole));
    assert_eq!(resumed.verification_ledger.len(), GROUNDED.len());
    assert!(resumed
        .verification_ledger
        .iter()
        .all(|e| e.votes.len() == 2));
}

/// A flow's confidence consultant: one blind call per kept finding, its scores used from then
/// on (the gate included), the finder's kept in `rescored`, and never a finding dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consultant_rescores_blind_and_never_drops() {
    const CONSULTANT: &str = "You rate problems yourself";
    let consult = |title: &str| {
        Rule::new(format!("consult {title}"))
            .when_system([CONSULTANT])
            .when_regex(format!("Title: {title}\n"))
    };
    let rules = vec![
        // Lowered below the gate: the key becomes a residual concern, still reported.
        consult("Hard-coded signing key").reply(Reply::json(
            &json!({"severity": "P3", "confidence": 0.2, "reason": "looks like a test key"}),
        )),
        // Unreadable: the finder's scores stand.
        consult("SQL injection in item search").reply(Reply::text("It is bad.")),
        Rule::new("consult")
            .when_system([CONSULTANT])
            .reply(Reply::json(
                &json!({"severity": "P2", "confidence": 0.9, "reason": "real"}),
            )),
    ];
    let server = ScriptedServer::start(script_with_verifiers(rules))
        .await
        .unwrap();
    let flow_with_consultant = |f: &mut Flow| {
        let stage = quorum_core::flows::flow::Stage {
            id: "consult".into(),
            role: quorum_core::flows::flow::Role::Consultant,
            needs: vec!["verify".into()],
            instructions: format!("{CONSULTANT}."),
            tools: Vec::new(),
            max_concurrent: None,
        };
        f.stages.insert(f.stages.len() - 1, stage);
        f.validate().unwrap();
    };
    let report = review(
        context(&server, FactLog::disabled(), flow_with_consultant),
        None,
    )
    .await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let asked: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains(CONSULTANT))
        .collect();
    // Every verified finding consulted once (the unreadable one also got its repair turn).
    let titles: BTreeSet<&str> = asked.iter().map(|r| claim_of_text(&r.text)).collect();
    assert_eq!(titles.len(), GROUNDED.len(), "{titles:?}");
    for r in &asked {
        for leak in [
            "P0",
            "P1",
            "0.95",
            "0.9,",
            "onfidence: 0",
            "security_sentinel",
        ] {
            assert!(!r.last_user.contains(leak), "consultant saw {leak:?}");
        }
    }
    let all: Vec<&quorum_core::review::finding::Finding> = report
        .findings
        .iter()
        .chain(&report.residual_concerns)
        .collect();
    assert_eq!(all.len(), 4, "no finding dropped (the race pair merges)");
    let key = report
        .residual_concerns
        .iter()
        .find(|f| f.title == "Hard-coded signing key")
        .expect("lowered below the gate by the consultant, kept as residual");
    assert_eq!(key.severity, quorum_core::review::finding::Severity::P3);
    let was = key.rescored.as_ref().unwrap();
    assert_eq!(
        was.original_severity,
        quorum_core::review::finding::Severity::P1
    );
    assert_eq!(was.original_confidence, 0.9);
    let sqli = report
        .findings
        .iter()
        .find(|f| f.title == "SQL injection in item search")
        .unwrap();
    assert_eq!(
        (sqli.severity, sqli.confidence, sqli.rescored.is_none()),
        (quorum_core::review::finding::Severity::P0, 0.95, true)
    );
    assert!(sqli
        .notes
        .iter()
        .any(|n| n.starts_with("not re-scored, the finder's scores stand")));
}

fn claim_of_text(text: &str) -> &'static str {
    GROUNDED
        .into_iter()
        .find(|t| text.contains(&format!("Title: {t}\n")))
        .unwrap_or("?")
}

/// The fresh-eyes lane: one more task that sees the material with the flow's neutral mandate,
/// never a planner's mandate, checker hint or the team blackboard; what only it found is
/// marked `fresh_eyes`, what another task also found is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fresh_eyes_lane_sees_only_the_material_and_marks_what_only_it_found() {
    const MANDATE: &str = "Read this material as a newcomer and report what is wrong with it.";
    let fresh_findings = json!({"findings": [
        {"title": "Export directory defaults to a system path", "severity": "P2", "confidence": 0.8,
         "category": "reliability/config", "file": "src/app.py", "line_start": 14, "line_end": 14,
         "symbol": "EXPORT_DIR", "evidence": "EXPORT_DIR = settings.get(\"export_dir\", \"/var/lib/inventory/exports\")",
         "why_it_matters": "fails without root", "suggested_fix": "default under the data dir"},
        {"title": "Search builds SQL from the term", "severity": "P0", "confidence": 0.9,
         "category": "security/injection", "file": "src/db.py", "line_start": 53, "line_end": 54,
         "symbol": "search_items", "evidence": "name LIKE '%{term}%'",
         "why_it_matters": "injection", "suggested_fix": "bind it"}
    ]});
    let mut script = Script::new().models([MODEL]).rule(
        Rule::new("fresh")
            .when_system(["You are principal_engineer"])
            .reply(Reply::json(&fresh_findings)),
    );
    for rule in code_review_script().rules {
        script = script.rule(rule);
    }
    let server = ScriptedServer::start(script).await.unwrap();
    let report = review(
        context(&server, FactLog::disabled(), |f| {
            f.fresh_eyes = Some(quorum_core::flows::flow::FreshEyes {
                persona: "principal_engineer".into(),
                mandate: MANDATE.into(),
                kinds: vec!["code".into()],
            });
        }),
        None,
    )
    .await;
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let lane: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains("You are principal_engineer"))
        .collect();
    assert_eq!(lane.len(), 1);
    let asked = &lane[0];
    assert!(asked.last_user.contains(MANDATE));
    for planner_text in [
        "Find injection and secret-handling flaws",
        "Check resource handling and shared state",
        "Find gaps in the tests",
        "A checker will verify findings by",
    ] {
        assert!(
            !asked.text.contains(planner_text),
            "the fresh-eyes task saw the plan: {planner_text:?}"
        );
    }
    assert!(
        !asked.tool_names.iter().any(|t| t.starts_with("team_bb")),
        "{:?}",
        asked.tool_names
    );
    assert!(asked.text.contains("<<<BEGIN UNTRUSTED src/app.py>>>"));
    let task = report
        .tasks
        .iter()
        .find(|t| t.persona == "principal_engineer")
        .expect("the lane ran as a task");
    assert_eq!(task.id, "fresh1");

    let export = report
        .findings
        .iter()
        .find(|f| f.title == "Export directory defaults to a system path")
        .expect("the lane's unique finding survives");
    assert!(export.fresh_eyes);
    let sqli = report
        .findings
        .iter()
        .find(|f| f.anchor == "src/db.py#search_items")
        .unwrap();
    assert!(!sqli.fresh_eyes, "t1 found it too");
    assert!(report
        .findings
        .iter()
        .chain(&report.residual_concerns)
        .filter(|f| f.fresh_eyes)
        .all(|f| f.title == export.title));
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let marked: Vec<&serde_json::Value> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("fresh_eyes").is_some())
        .collect();
    assert_eq!(marked.len(), 1, "only true is written");
    assert!(report.to_markdown().contains("**Fresh eyes:**"));
}
