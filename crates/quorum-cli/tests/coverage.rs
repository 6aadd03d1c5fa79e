//! `quorum review --coverage full|sampled` as a user runs it: the flag (and the config key, by
//! environment) reach the plan, the added tasks' prompts hold the files the planner left out,
//! report.json says which mode ran, bad values stop the command in one line, a resume of a
//! review killed before planning keeps the mode, and a `--cluster` review carries it to the
//! node that runs it.

mod common;

use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

/// The default flow's `full_coverage` persona.
const FULL: &str = "You are software_developer,";

/// The files whose bodies reached the added (engine) tasks' prompts.
fn added_task_files(reqs: &[RecordedRequest]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in reqs
        .iter()
        .filter(|r| r.system.contains(FULL) && r.text.contains("## Task c"))
    {
        for part in r.text.split("<<<BEGIN UNTRUSTED ").skip(1) {
            if let Some(label) = part.split(">>>").next() {
                out.insert(label.to_string());
            }
        }
    }
    out
}

fn review_args<'a>(target: &'a str, backend: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "review",
        target,
        "--backend",
        backend,
        "--model",
        MODEL,
        "--out",
        out,
        "--quiet",
    ]
}

/// Every file of the pack reviewed, in full mode.
fn assert_full(report: &Value) {
    let c = &report["coverage"];
    assert_eq!(c["mode"], "full", "{c}");
    assert_eq!(c["files_reviewed"], c["files_total"], "{c}");
    assert_eq!(c["never_reviewed_count"], 0);
    let added = c["added"].as_array().expect("added tasks");
    assert!(added
        .iter()
        .any(|a| a["reason"].as_str().unwrap().starts_with("coverage: full")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_coverage_adds_the_files_the_planner_left_out_and_sampled_adds_nothing() {
    let target = fixture("code_project");
    let t = target.to_str().unwrap();
    for mode in ["full", "sampled"] {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let out = work.path().join("out");
        let backend = format!("ollama={}", server.ollama_url());
        let mut args = review_args(t, &backend, out.to_str().unwrap());
        args.extend(["--coverage", mode]);
        let o = quorum(&args, work.path()).await;
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
        let report = read_json(&out.join("report.json"));
        let reqs = server.requests();
        if mode == "full" {
            assert_full(&report);
            // The planner gave no valid task src/app.py, README.md or the config: the added
            // tasks' prompts carry them, and not the files the plan already covers.
            let files = added_task_files(&reqs);
            for f in ["src/app.py", "README.md", "config/settings.yaml"] {
                assert!(files.contains(f), "{f} not in {files:?}");
            }
            assert!(!files.contains("src/db.py"), "{files:?}");
        } else {
            assert_eq!(report["coverage"]["mode"], "sampled");
            assert!(added_task_files(&reqs).is_empty());
            assert_ne!(
                report["coverage"]["files_reviewed"],
                report["coverage"]["files_total"]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_key_sets_the_mode_and_bad_values_exit_2_in_one_line() {
    let target = fixture("code_project");
    let t = target.to_str().unwrap();
    // QUORUM_COVERAGE=full: the env layer of the config.
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let mut cmd = command(
        &review_args(t, &backend, out.to_str().unwrap()),
        work.path(),
    );
    cmd.env("QUORUM_COVERAGE", "full");
    let o = run(&mut cmd).await;
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    assert_full(&read_json(&out.join("report.json")));
    // ... and the flag wins over it.
    let out2 = work.path().join("out2");
    let mut args = review_args(t, &backend, out2.to_str().unwrap());
    args.extend(["--coverage", "sampled"]);
    let mut cmd = command(&args, work.path());
    cmd.env("QUORUM_COVERAGE", "full");
    let o = run(&mut cmd).await;
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    assert_eq!(
        read_json(&out2.join("report.json"))["coverage"]["mode"],
        "sampled"
    );

    let before = server.requests().len();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--coverage", "most"],
            "--coverage must be full or sampled (got \"most\")",
        ),
        (
            &["--flow", "quick", "--coverage", "full"],
            "add a full_coverage block",
        ),
        (
            &["--cluster", "http://127.0.0.1:9", "--coverage", "most"],
            "--coverage must be full or sampled",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["review", t, "--backend", &backend, "--model", MODEL];
        args.extend_from_slice(flags);
        let o = quorum(&args, work.path()).await;
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(want), "{flags:?}: {err}");
    }
    let mut cmd = command(&["review", t, "--backend", &backend], work.path());
    cmd.env("QUORUM_COVERAGE", "everything");
    let o = run(&mut cmd).await;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("configuration `coverage`"));
    assert_eq!(server.requests().len(), before, "nothing ran");
}

/// Killed (-9) while its planner is asked, a `--coverage full` review resumes in full mode:
/// the mode is stored with the review, so the new plan gets the same added tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_before_planning_keeps_the_full_mode() {
    let mut held = Script::new().models([MODEL]);
    for rule in code_review_script().rules {
        if rule.name == "planner" {
            held = held.rule(
                Rule::new("planner-held")
                    .when_system(["You are the planner"])
                    .reply(Reply::held(Reply::json(&code_plan()))),
            );
        } else {
            held = held.rule(rule);
        }
    }
    let first = ScriptedServer::start(held).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let mut feed = first.subscribe();
    let backend = format!("ollama={}", first.ollama_url());
    let target = fixture("code_project");
    let mut cmd = command(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--data-dir",
            data.to_str().unwrap(),
            "--quiet",
            "--coverage",
            "full",
        ],
        work.path(),
    );
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if r.system.contains("You are the planner") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(reached, Ok(true), "the review never reached its planner");
    child.kill().await.unwrap();
    let flow_id = std::fs::read_dir(data.join("flows"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();

    let second = ScriptedServer::start(code_review_script()).await.unwrap();
    let out = work.path().join("out");
    let backend = format!("ollama={}", second.ollama_url());
    let o = quorum(
        &[
            "resume",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
            "--backend",
            &backend,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    )
    .await;
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    assert!(second
        .requests()
        .iter()
        .any(|r| r.system.contains("You are the planner")));
    assert!(!added_task_files(&second.requests()).is_empty());
    assert_full(&read_json(&out.join("report.json")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_review_carries_the_mode_to_the_node() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let (mut node, url) = start_node(&server, work.path(), "n1").await;
    let target = fixture("code_project");
    let out = work.path().join("out");
    let mut cmd = command(
        &[
            "review",
            target.to_str().unwrap(),
            "--cluster",
            &url,
            "--coverage",
            "full",
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    );
    cmd.env("QUORUM_API_TOKEN", "s3cret");
    let o = run(&mut cmd).await;
    let _ = node.kill().await;
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    assert_full(&read_json(&out.join("report.json")));
    // The node's plan had the added tasks: their prompts reached the model through it.
    let files = added_task_files(&server.requests());
    assert!(files.contains("src/app.py"), "{files:?}");
}
