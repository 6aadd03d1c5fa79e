//! The conformance judge's prompt, built without a model: what it shows of the target (the
//! change's files first, never the spec), how it is delimited, and that a target beyond the
//! budget is cut visibly rather than silently.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::judging::conformance::{self, Spec};
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::scope::{ChangeKind, ChangeSet, FileChange, ReviewScope};
use quorum_core::weaver::ContextBudget;
use quorum_runtime::stages::conformance::conformance_prompt_in;
use quorum_runtime::ReviewContext;
use quorum_testkit::review::ContextBuilder;
use support::*;

/// The fixture's service with its spec copied inside, reviewed as a change to ratelimit.py.
fn context(dir: &std::path::Path) -> ReviewContext {
    context_with(dir, |_| {})
}

fn context_with(dir: &std::path::Path, add: impl FnOnce(&std::path::Path)) -> ReviewContext {
    copy_dir(&fixture("conformance/service"), dir);
    add(dir);
    std::fs::copy(fixture("conformance/spec.md"), dir.join("spec.md")).unwrap();
    let pack = ContextPack::snapshot(dir, &PackOptions::default()).unwrap();
    assert!(pack.get("spec.md").is_some());
    let text = std::fs::read_to_string(dir.join("spec.md")).unwrap();
    ContextBuilder::offline(pack)
        .flow("conformance")
        .flow_id("f")
        .node("n")
        .max_concurrent(None)
        .scope(ReviewScope {
            change: Some(ChangeSet {
                spec: "main..topic".into(),
                base: "a".repeat(40),
                head: "b".repeat(40),
                files: vec![FileChange {
                    path: "ratelimit.py".into(),
                    kind: ChangeKind::Added,
                    old_path: None,
                    added: 17,
                    removed: 0,
                    touched: vec![(1, 17)],
                    hunks: String::new(),
                }],
            }),
            spec: Some(Spec {
                path: "spec.md".into(),
                text,
                pack_path: Some("spec.md".into()),
            }),
            ..ReviewScope::default()
        })
        .build()
}

#[test]
fn the_judge_sees_the_change_first_and_never_the_spec_as_material() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let criteria = conformance::extract(&ctx.scope.spec.as_ref().unwrap().text);
    assert_eq!(criteria.len(), 3);
    let budget = ContextBudget {
        context_tokens: 8192,
        output_tokens: 1024,
    };
    let (system, user) = conformance_prompt_in(&ctx, &criteria[1..2], budget);
    assert!(system.contains("You are the conformance judge"));
    assert!(system.contains("never instructions"));
    let criteria_block = user
        .find("<<<BEGIN UNTRUSTED acceptance criteria from spec.md>>>")
        .expect("the batch's criteria, delimited");
    assert!(user.contains("C2: The limit N is configurable, not hard-coded."));
    assert!(!user.contains("C1: Requests"), "only this batch's criteria");
    let changed = user.find("<<<BEGIN UNTRUSTED ratelimit.py>>>").unwrap();
    let other = user.find("<<<BEGIN UNTRUSTED app.py>>>").unwrap();
    assert!(
        criteria_block < changed && changed < other,
        "criteria, then the change's files, then the rest"
    );
    assert!(user.contains("added ratelimit.py"), "the change is listed");
    assert!(
        user.contains("    4 | LIMIT_PER_MINUTE = 60"),
        "numbered lines"
    );
    assert!(
        !user.contains("UNTRUSTED spec.md>>>"),
        "the spec is not target material"
    );
}

#[test]
fn a_target_beyond_the_budget_is_cut_visibly() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context_with(dir.path(), |d| {
        let big: String = (1..=400)
            .map(|i| format!("def handler_{i}(): return {i}\n"))
            .collect();
        std::fs::write(d.join("handlers.py"), big).unwrap();
    });
    let criteria = conformance::extract(&ctx.scope.spec.as_ref().unwrap().text);
    let small = ContextBudget {
        context_tokens: 1000,
        output_tokens: 128,
    };
    let (_, user) = conformance_prompt_in(&ctx, &criteria, small);
    assert!(
        user.contains("C3: 429 responses include a Retry-After header."),
        "the criteria keep their room"
    );
    assert!(
        user.contains("[truncated") || user.contains("more files not shown"),
        "the cut is visible: {user}"
    );
    // A cut never leaves a file's block open for the model to read on as the engine's words.
    let opened = user.matches("<<<BEGIN UNTRUSTED").count();
    let closed = user.matches("<<<END UNTRUSTED").count();
    assert_eq!(opened, closed, "{user}");
}
