//! Change reviews (`--diff`) end to end through the binary against the scripted model server
//! (a repository's `.quorum.toml` and `--profile` are in `repo_config.rs`). Git fixtures are
//! committed with the `git` binary in a tempdir (quorum itself reads them through gix); every
//! assertion on prompts is made on the requests the server recorded.

mod common;

use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::time::Duration;

/// src/app.py has 30 lines; the head commit rewrites line 10 and adds src/extra.py.
fn app(head: bool) -> String {
    (1..=30)
        .map(|i| match i {
            10 if head => "query = \"SELECT * FROM t WHERE id = \" + user_id\n".to_string(),
            25 => "password = \"hunter2-old-default\"\n".to_string(),
            _ => format!("value_{i} = {i}\n"),
        })
        .collect()
}

/// A repository with a base commit (tag `base`) and a head commit on `main`, plus an
/// uncommitted edit that must not be reviewed.
fn change_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    git(r, &["init", "-q", "-b", "main"]);
    write(r, "src/app.py", &app(false));
    write(r, "src/util.py", "def helper():\n    return 1\n");
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "base"]);
    git(r, &["tag", "base"]);
    write(r, "src/app.py", &app(true));
    write(r, "src/extra.py", "def extra():\n    return 2\n");
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "head"]);
    write(r, "src/util.py", "UNCOMMITTED_WORKTREE_EDIT = 1\n");
    dir
}

/// The line the change in `change_repo` touched, and one it did not.
const CHANGED_LINE: &str = "query = \"SELECT * FROM t WHERE id = \" + user_id";
const UNTOUCHED_LINE: &str = "password = \"hunter2-old-default\"";

/// A finding on the changed line (P2).
fn on_the_change() -> Value {
    finding(
        "SQL built by concatenation",
        "P2",
        0.9,
        "src/app.py",
        10,
        CHANGED_LINE,
    )
}

/// A finding on a line the change did not touch (P0: pre-existing, it gates nothing).
fn off_the_change() -> Value {
    finding(
        "Default password in source",
        "P0",
        0.9,
        "src/app.py",
        25,
        UNTOUCHED_LINE,
    )
}

fn planner(reqs: &[RecordedRequest]) -> &RecordedRequest {
    reqs.iter()
        .find(|r| r.system.contains("You are the planner"))
        .expect("a planner request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_review_scopes_prompts_findings_sarif_and_exit_code_to_the_change() {
    let repo = change_repo();
    let tasks = json!([
        {"id": "t1", "persona": "security_sentinel", "files": ["src/app.py"],
         "mandate": "Review the query construction that changed."},
        {"id": "t2", "persona": "software_developer", "files": ["src/util.py"],
         "mandate": "Check the helpers the change relies on."}
    ]);
    let server = ScriptedServer::start(scripted_review(
        tasks,
        &[
            (
                "security_sentinel",
                json!([on_the_change(), off_the_change()]),
            ),
            ("software_developer", json!([])),
        ],
    ))
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let o = quorum(
        &[
            "review",
            repo.path().to_str().unwrap(),
            "--diff",
            "base..main",
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    )
    .await;
    // The P0 is pre-existing: only the change's P2 counts, and P2 is below --fail-on P1.
    assert_eq!(code(&o), 0, "{}", text(&o));
    let reqs = server.requests();

    let plan = planner(&reqs);
    let changed = delimited(&plan.text, "changed files").expect("the planner sees the change");
    assert!(
        changed.contains("- src/app.py: modified (+1 -1)"),
        "{changed}"
    );
    assert!(
        changed.contains("- src/extra.py: added (+2 -0)"),
        "{changed}"
    );
    assert!(!changed.contains("util.py"), "{changed}");

    let sec = specialist(&reqs, "security_sentinel");
    assert!(!sec.is_empty());
    let hunks = delimited(&sec[0].text, "diff of src/app.py").expect("its file's hunks");
    assert!(
        hunks.contains("--- a/src/app.py\n+++ b/src/app.py\n"),
        "{hunks}"
    );
    assert!(hunks.contains("-value_10 = 10\n"), "{hunks}");
    assert!(hunks.contains(&format!("+{CHANGED_LINE}")), "{hunks}");
    assert!(
        hunks.contains(" value_7 = 7\n"),
        "3 lines of context: {hunks}"
    );
    assert!(
        !hunks.contains("value_6 = 6"),
        "only 3 lines of context: {hunks}"
    );
    assert!(
        delimited(&sec[0].text, "diff of src/extra.py").is_none(),
        "another task's file: listed, not shown"
    );
    let dev = specialist(&reqs, "software_developer");
    assert!(!dev.is_empty());
    assert!(dev[0].text.contains("## Change under review"));
    assert!(dev[0].text.contains("None of this task's files changed"));
    for r in &reqs {
        assert!(
            !r.text.contains("UNCOMMITTED_WORKTREE_EDIT"),
            "the working tree is never reviewed"
        );
    }

    let json = read_json(&out.join("report.json"));
    assert_eq!(json["schema_version"], 1);
    let titles = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| f["title"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        titles(&json["findings"]),
        vec!["SQL built by concatenation"]
    );
    assert_eq!(
        titles(&json["pre_existing"]),
        vec!["Default password in source"]
    );
    let pre = &json["pre_existing"][0];
    for key in [
        "id",
        "severity",
        "confidence",
        "file",
        "line_start",
        "verdict",
        "reporters",
        "anchor",
    ] {
        assert!(pre.get(key).is_some(), "pre_existing finding lacks {key}");
    }
    let diff = &json["target"]["diff"];
    assert_eq!(diff["spec"], "base..main");
    assert_eq!(diff["files_changed"], 2);
    assert_eq!(diff["base"].as_str().unwrap().len(), 40);
    assert_eq!(json["target"]["head_sha"], diff["head"]);

    let sarif = read_json(&out.join("report.sarif"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        10
    );

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let pre_section = md
        .split("## Pre-existing findings")
        .nth(1)
        .expect("report.md has a pre-existing section");
    assert!(pre_section.contains("Default password in source"), "{md}");
    assert!(md.contains("**Change:** `base..main`"), "{md}");

    // The same change with --fail-on P2 fails on the change's own finding.
    let o = quorum(
        &[
            "review",
            repo.path().to_str().unwrap(),
            "--diff",
            "base",
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--fail-on",
            "P2",
            "--quiet",
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 1, "{}", text(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_on_a_non_repository_or_a_bad_revision_is_exit_2_and_runs_nothing() {
    let server = ScriptedServer::start(scripted_review(json!([]), &[]))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let plain = tempfile::tempdir().unwrap();
    write(plain.path(), "a.py", "x = 1\n");
    let backend = format!("ollama={}", server.ollama_url());
    let repo = change_repo();
    for (target, spec, expect) in [
        (plain.path(), "HEAD~1", "not inside a git repository"),
        (repo.path(), "no-such-rev..main", "does not resolve"),
        (repo.path(), "base...main", "three-dot"),
    ] {
        let o = quorum(
            &[
                "review",
                target.to_str().unwrap(),
                "--diff",
                spec,
                "--backend",
                &backend,
                "--model",
                MODEL,
            ],
            work.path(),
        )
        .await;
        assert_eq!(code(&o), 2, "{spec}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(expect), "{err}");
    }
    assert!(server.requests().is_empty(), "nothing was run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_change_review_reviews_the_recorded_change() {
    let repo = change_repo();
    let tasks = json!([{"id": "t1", "persona": "security_sentinel", "files": ["src/app.py"],
                        "mandate": "Review the query construction that changed."}]);
    let hanging = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({ "tasks": tasks.clone() }))),
        )
        .rule(
            Rule::new("hang")
                .when_system(["You are security_sentinel"])
                .reply(Reply::hang()),
        );
    let server = ScriptedServer::start(hanging).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let mut feed = server.subscribe();
    let mut child = command(
        &[
            "review",
            repo.path().to_str().unwrap(),
            "--diff",
            "base..main",
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if r.system.contains("You are security_sentinel") {
                break;
            }
        }
    })
    .await;
    assert!(reached.is_ok(), "the review never reached its specialist");
    child.kill().await.unwrap();
    let flow_id = std::fs::read_dir(data.join("flows"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();
    let original_head = {
        let store = quorum_store::DataDir::new(&data)
            .open_flow(&flow_id)
            .unwrap();
        let scope = store
            .replay()
            .unwrap()
            .scope
            .expect("the scope was recorded");
        let change = scope.change.expect("a change review");
        assert_eq!(change.spec, "base..main");
        change.head
    };

    // The branch moves on; the resumed review still reviews the change it started with.
    write(
        repo.path(),
        "src/app.py",
        &app(true).replace("value_20 = 20", "LATER_COMMIT = 20"),
    );
    git(repo.path(), &["commit", "-q", "-am", "later"]);
    server.set_script(scripted_review(
        tasks,
        &[("security_sentinel", json!([on_the_change()]))],
    ));
    let before = server.requests().len();
    let o = quorum(
        &[
            "resume",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let reqs = server.requests();
    let sec: Vec<&RecordedRequest> = specialist(&reqs[before..], "security_sentinel");
    assert!(!sec.is_empty(), "the unfinished task ran again");
    let hunks = delimited(&sec[0].text, "diff of src/app.py").expect("the recorded hunks");
    assert!(hunks.contains(&format!("+{CHANGED_LINE}")), "{hunks}");
    for r in &reqs[before..] {
        assert!(
            !r.text.contains("LATER_COMMIT"),
            "a later commit is not this review's change"
        );
    }
    let json = read_json(&out.join("report.json"));
    assert_eq!(json["target"]["diff"]["head"], original_head.as_str());
    assert_eq!(
        json["findings"].as_array().unwrap().len(),
        1,
        "{}",
        json["findings"]
    );
}

/// A change review sent to a node: the client snapshots the head tree and decides the change,
/// the node reviews exactly that change (its planner sees the changed files, a specialist its
/// file's hunks) and the report sets pre-existing findings apart as on one machine; the
/// profile travels too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_review_sent_to_a_node_reviews_the_clients_change() {
    let repo = change_repo();
    let tasks = json!([
        {"id": "t1", "persona": "security_sentinel", "files": ["src/app.py"],
         "mandate": "Review the query construction that changed."}
    ]);
    let server = ScriptedServer::start(scripted_review(
        tasks,
        &[(
            "security_sentinel",
            json!([on_the_change(), off_the_change()]),
        )],
    ))
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let (mut node, api) = start_node(&server, work.path(), "diff-node").await;
    let out = work.path().join("out");
    let o = client(
        &[
            "review",
            repo.path().to_str().unwrap(),
            "--diff",
            "base..main",
            "--profile",
            "assertive",
            "--cluster",
            &api,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    )
    .await;
    let _ = node.kill().await;
    // The P0 is pre-existing: only the change's P2 counts, below --fail-on P1.
    assert_eq!(code(&o), 0, "{}", text(&o));
    let reqs = server.requests();
    let changed = delimited(&planner(&reqs).text, "changed files")
        .expect("the node's planner sees the change");
    assert!(
        changed.contains("- src/app.py: modified (+1 -1)"),
        "{changed}"
    );
    let sec = specialist(&reqs, "security_sentinel");
    let hunks = delimited(&sec[0].text, "diff of src/app.py").expect("its file's hunks");
    assert!(hunks.contains(&format!("+{CHANGED_LINE}")), "{hunks}");
    for r in &reqs {
        assert!(
            !r.text.contains("UNCOMMITTED_WORKTREE_EDIT"),
            "the working tree is never reviewed"
        );
    }
    let json = read_json(&out.join("report.json"));
    assert_eq!(json["findings"][0]["title"], "SQL built by concatenation");
    assert_eq!(
        json["pre_existing"][0]["title"],
        "Default password in source"
    );
    assert_eq!(json["target"]["diff"]["spec"], "base..main");
    assert_eq!(json["methodology"]["profile"], "assertive");
}
