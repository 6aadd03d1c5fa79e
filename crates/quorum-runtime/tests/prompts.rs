//! Prompts with nothing to copy (issue 24): every shipped prompt — every stage, every persona,
//! every flow — is rendered, and none may hold a value a model could return verbatim as its
//! answer: a concrete line number, score or confidence in an answer format, a concrete path or
//! quote where a placeholder belongs, a file path or line reference in an example. (A small
//! model copied `"line_start": 12, "line_end": 14` from the findings format onto every file.)
//! The target's own material, delimited, is the model's to quote and is not looked at.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::catalog::PersonaKind;
use quorum_core::judging::adjudication::Prior;
use quorum_core::judging::conformance::{Criterion, Spec};
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::review::finding::RawFinding;
use quorum_core::schema::{copyable_in_formats, copyable_values};
use quorum_core::task::{Classification, Task};
use quorum_runtime::stages;
use quorum_runtime::ReviewContext;
use quorum_testkit::review::{shipped_catalog, ContextBuilder};
use support::*;

fn context(flow: &str) -> ReviewContext {
    let pack = ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap();
    ContextBuilder::offline(pack).flow(flow).build()
}

fn budget_of(ctx: &ReviewContext) -> quorum_core::weaver::ContextBudget {
    quorum_core::weaver::ContextBudget {
        context_tokens: ctx.flow.parameters.context_tokens,
        output_tokens: ctx.flow.parameters.max_output_tokens,
    }
}

fn finding() -> RawFinding {
    serde_json::from_value(serde_json::json!({
        "title": "SQL built from input", "severity": "P1", "confidence": 0.8,
        "category": "security/injection", "file": "src/db.py", "line_start": 53,
        "line_end": 54, "evidence": "name LIKE '%{term}%'", "why_it_matters": "injection",
        "suggested_fix": "bind it"
    }))
    .unwrap()
}

/// Collect every copyable value of a prompt, named by where it was found: anything in the
/// instructions (system), and the answer formats of the task's own part (user), whose prose
/// rightly names the task's files and the findings it is about.
fn check(found: &mut Vec<String>, at: &str, (system, user): (String, String)) {
    for v in copyable_values(&system) {
        found.push(format!("{at} (system): {v}"));
    }
    for v in copyable_in_formats(&user) {
        found.push(format!("{at} (user): {v}"));
    }
}

#[test]
fn no_shipped_prompt_has_a_value_a_model_could_copy() {
    let flows: Vec<String> = std::fs::read_dir(repo_root().join("flows"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            (p.extension()? == "yaml").then_some(stem)
        })
        .collect();
    assert!(flows.len() >= 8, "{flows:?}");
    let catalog = shipped_catalog();
    let mut found = Vec::new();
    let classification = Classification {
        domain: "software".into(),
        languages: vec!["python".into()],
        ..Classification::default()
    };
    for flow in &flows {
        let ctx = context(flow);
        let budget = budget_of(&ctx);
        check(
            &mut found,
            &format!("{flow}: scout"),
            stages::scout_prompt(&ctx),
        );
        check(
            &mut found,
            &format!("{flow}: planner"),
            stages::planner_prompt(&ctx, &classification, &[], None),
        );
        check(
            &mut found,
            &format!("{flow}: verifier"),
            stages::verifier_prompt(&ctx, &finding(), "   53 | name LIKE"),
        );
        check(
            &mut found,
            &format!("{flow}: consultant"),
            stages::consultant_prompt_in(&ctx, &finding(), "   53 | name LIKE", budget),
        );
        check(
            &mut found,
            &format!("{flow}: synthesizer"),
            stages::synthesizer_prompt(&ctx, &Default::default(), &classification, None),
        );
        for persona in catalog.personas.values() {
            match persona.kind {
                PersonaKind::Reviewer => {
                    let task: Task = serde_json::from_value(serde_json::json!({
                        "id": "t1", "persona": persona.name, "files": ["src/db.py"],
                        "mandate": "find what is wrong", "tools": ["file_read"]
                    }))
                    .unwrap();
                    match stages::specialist_prompt(&ctx, &task, None) {
                        Ok(p) => check(&mut found, &format!("{flow}: {}", persona.name), p),
                        Err(e) => panic!("{flow}: {}: {e}", persona.name),
                    }
                }
                PersonaKind::Judge => check(
                    &mut found,
                    &format!("{flow}: judge {}", persona.name),
                    stages::panel::judge_prompt_in(&ctx, persona, &[], budget),
                ),
                PersonaKind::MetaJudge => check(
                    &mut found,
                    &format!("{flow}: meta-judge {}", persona.name),
                    stages::panel::meta_prompt_in(&ctx, persona, &[], None, budget),
                ),
            }
        }
    }
    // Every heuristic probe's question, as a probe asks it (the prompt does not vary by flow).
    let ctx = context("quick");
    for h in catalog.heuristics.values() {
        for p in &h.probes {
            let probe = quorum_core::task::Probe {
                rule: format!("{}/{}", h.name, p.id),
                question: p.question.clone(),
                title: p.title.clone(),
                severity: p.severity.clone(),
                category: p.category.clone(),
                file: "src/db.py".into(),
                line: 50,
                start: 45,
                end: 55,
            };
            match stages::probe_prompt(&ctx, &probe) {
                Ok(prompt) => check(&mut found, &format!("probe {}", probe.rule), prompt),
                Err(e) => panic!("probe {}: {e}", probe.rule),
            }
        }
    }
    // The judging stages' answer formats, once (they do not vary by flow).
    let ctx = context("conformance");
    let budget = budget_of(&ctx);
    let spec = Spec::from_text("SPEC.md", "- [ ] handlers validate input".into()).unwrap();
    check(
        &mut found,
        "criteria",
        stages::conformance::criteria_prompt_in(&ctx, &spec, budget),
    );
    let criterion: Criterion =
        serde_json::from_value(serde_json::json!({"id": "AC-1", "text": "validates input"}))
            .unwrap();
    check(
        &mut found,
        "conformance judge",
        stages::conformance::conformance_prompt_in(&ctx, &[criterion], budget),
    );
    let ctx = context("finish-review");
    let prior = Prior::from_texts(
        "prior.json",
        &std::fs::read_to_string(fixture("finish_review/prior.json")).unwrap_or_else(|_| {
            serde_json::json!({"schema_version": 1, "flow_id": "p", "findings": []}).to_string()
        }),
        None,
    )
    .ok();
    let batch = prior.map(|p| p.findings).unwrap_or_default();
    check(
        &mut found,
        "adjudicator",
        stages::adjudication::adjudication_prompt_in(&ctx, &batch, budget),
    );
    assert!(
        found.is_empty(),
        "values a model could copy as its answer:\n{}",
        found.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_that_repeats_its_prompt_is_dropped_as_a_prompt_echo() {
    use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
    use serde_json::json;
    let echo = |evidence: &str, line: u32| {
        json!({"title": "untrusted input", "severity": "P1", "confidence": 0.9,
               "category": "security/injection", "file": "src/db.py", "line_start": line,
               "line_end": line, "evidence": evidence, "why_it_matters": "w",
               "suggested_fix": "f"})
    };
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": [
                    {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py"],
                     "mandate": "find injection", "tools": []}
                ]}))),
        )
        .rule(
            Rule::new("security")
                .when_system(["You are security_sentinel"])
                .reply(Reply::json(&json!({"findings": [
                    // A clause of the persona's own example, and the format's placeholder.
                    echo("the sort column comes straight from the query string into SQL", 3),
                    echo("<the cited lines, copied exactly from the file>", 12),
                ]}))),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let ctx = ContextBuilder::new(&server, &fixture("code_project")).shared();
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .expect("review hung")
    .expect("review ran");
    let echoes: Vec<_> = report
        .dropped
        .iter()
        .filter(|d| d.removed_by == "prompt_echo")
        .collect();
    assert_eq!(echoes.len(), 2, "{:#?}", report.dropped);
    assert!(
        echoes.iter().any(|d| d.reason.contains("sort column")),
        "{echoes:?}"
    );
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
}
