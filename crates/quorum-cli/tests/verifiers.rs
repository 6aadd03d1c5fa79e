//! `quorum review --verifiers N --verify-threshold T`: the flags reach the flow (counted on
//! the scripted server's recorded requests and in report.json's verification ledger), and bad
//! values stop the command with exit 2 and one line before anything runs.

mod common;

use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

fn verifier_calls(server: &ScriptedServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifier_flags_reach_the_flow() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let target = fixture("code_project");
    let o = quorum(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--verifiers",
            "3",
            "--verify-threshold",
            "unanimous",
        ],
        work.path(),
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // Five grounded findings, three verifier calls each.
    assert_eq!(verifier_calls(&server), 15);
    let json: Value = read_json(&out.join("report.json"));
    let ledger = json["verification_ledger"].as_array().expect("a ledger");
    assert_eq!(ledger.len(), 5);
    for e in ledger {
        assert_eq!(e["threshold"], "unanimous");
        assert_eq!(e["votes"].as_array().unwrap().len(), 3);
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("up to 3 verifiers each"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_verifier_flags_exit_2_with_one_line_and_run_nothing() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let target = fixture("code_project");
    let cases: [(&[&str], &str); 4] = [
        (
            &["--verifiers", "0"],
            "--verifiers must be between 1 and 9 (got 0)",
        ),
        (
            &["--verifiers", "10"],
            "--verifiers must be between 1 and 9 (got 10)",
        ),
        (
            &["--verify-threshold", "most"],
            "--verify-threshold must be any, majority or unanimous (got \"most\")",
        ),
        (
            &[
                "--cluster",
                "http://127.0.0.1:9",
                "--verify-threshold",
                "most",
            ],
            "--verify-threshold must be any, majority or unanimous",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec![
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
        ];
        args.extend_from_slice(flags);
        let o = quorum(&args, work.path()).await;
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(want), "{flags:?}: {err}");
    }
    assert!(
        server.requests().is_empty(),
        "a model was asked before the flags were checked"
    );
}

/// A review killed (-9) while its verifiers are being asked resumes with the same
/// `--verifiers` and `--verify-threshold`: they are stored with the review, not re-read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_keeps_the_verifier_flags_of_the_interrupted_review() {
    const VERIFIER: &str = "You are an independent verifier";
    // The first server never answers a verifier: the review is stuck verifying when killed.
    let mut stuck = Script::new().models([MODEL]);
    for rule in six_task_script(0, false).rules {
        if rule.name == "verifier" {
            stuck = stuck.rule(Rule::new("verifier-held").when_system([VERIFIER]).reply(
                Reply::held(Reply::json(&serde_json::json!({
                    "verdict": "CONFIRMED", "reason": "late"
                }))),
            ));
        } else {
            stuck = stuck.rule(rule);
        }
    }
    let first = ScriptedServer::start(stuck).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let mut feed = first.subscribe();
    let mut child = command(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--backend",
            &format!("ollama={}", first.ollama_url()),
            "--model",
            MODEL,
            "--data-dir",
            data.to_str().unwrap(),
            "--quiet",
            "--verifiers",
            "2",
            "--verify-threshold",
            "majority",
        ],
        work.path(),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if r.system.contains(VERIFIER) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(reached, Ok(true), "the review never reached its verifiers");
    child.kill().await.unwrap(); // SIGKILL
    let flow_id = std::fs::read_dir(data.join("flows"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();

    let second = ScriptedServer::start(six_task_script(0, false))
        .await
        .unwrap();
    let out = work.path().join("out");
    let o = quorum(
        &[
            "resume",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
            "--backend",
            &format!("ollama={}", second.ollama_url()),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
    )
    .await;
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    // No batch was counted before the kill: all six findings are asked again, twice each.
    assert_eq!(verifier_calls(&second), 2 * SIX_TASKS);
    let json: Value = read_json(&out.join("report.json"));
    let ledger = json["verification_ledger"].as_array().expect("a ledger");
    assert_eq!(ledger.len(), SIX_TASKS);
    assert!(ledger
        .iter()
        .all(|e| e["threshold"] == "majority" && e["votes"].as_array().unwrap().len() == 2));
}
