//! `quorum review` with deterministic analyzers: fake tools on a PATH the test controls (so a
//! real ruff on the machine changes nothing), the progress notes for what ran, was absent or
//! hung, the tool credited in report.json, `--no-analyzers`, and a resumed review reusing the
//! leads recorded when it started even though the tool is gone.
#![cfg(unix)]

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `quorum ARGS` with the analyzers on (the shared runner turns them off) and `bin` the whole
/// PATH, so the tools found are the fakes a test put there.
fn cmd(args: &[&str], work: &Path, bin: &Path) -> tokio::process::Command {
    let mut c = command(args, work);
    c.env("PATH", bin)
        .env("QUORUM_ANALYZERS__TIMEOUT_SECS", "1")
        .env_remove("QUORUM_ANALYZERS__ENABLED");
    c
}

fn report(out: &Path) -> Value {
    read_json(&out.join("report.json"))
}

fn credited(report: &Value, tool: &str) -> Vec<Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["reporters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["persona"] == format!("analyzer:{tool}"))
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_runs_what_is_on_path_notes_the_rest_and_credits_the_tool() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_ruff(&bin);
    // bandit hangs (with a child of its own): killed at the 1 s timeout.
    script(
        &bin,
        "bandit",
        "( while :; do :; done ) &\nwhile :; do :; done",
    );
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let target = fixture("code_project");
    let o = run(&mut cmd(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
        &bin,
    ))
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    for line in [
        "quorum: analyzer ruff: 3 hits",
        "quorum: analyzer bandit skipped: timed out after 1 s (killed)",
        "quorum: analyzer shellcheck skipped: no file it applies to",
        "quorum: analyzer eslint skipped: no file matching",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in\n{stderr}");
    }

    let sec = server
        .requests()
        .into_iter()
        .find(|r| r.system.contains("You are security_sentinel"))
        .expect("a security specialist request");
    assert!(sec.text.contains(&format!(
        "src/db.py:{PLANTED_LINE} [ruff B991] {PLANTED_MESSAGE}"
    )));

    let json = report(&out);
    let mine = credited(&json, "ruff");
    let titles: Vec<&str> = mine.iter().map(|f| f["title"].as_str().unwrap()).collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(
        titles.contains(&"SQL injection in item search"),
        "{titles:?}"
    );
    let planted = mine
        .iter()
        .find(|f| f["title"].as_str().unwrap().starts_with("B991"))
        .unwrap();
    assert_eq!(planted["verdict"], "CONFIRMED");
    assert_eq!(planted["line_start"], PLANTED_LINE);
    assert!(json["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["title"].as_str().unwrap().starts_with("B992")
            && d["reason"].as_str().unwrap().contains("out of range")));
    let runs = json["analyzers"].as_array().unwrap();
    let bandit = runs.iter().find(|r| r["name"] == "bandit").unwrap();
    assert_eq!(bandit["ran"], false);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("- ruff: 3 hits"), "{md}");
    // The SARIF run lists the finding like any other.
    let sarif = std::fs::read_to_string(out.join("report.sarif")).unwrap();
    assert!(sarif.contains("B991"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_analyzers_runs_none() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_ruff(&bin);
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let target = fixture("code_project");
    let o = run(&mut cmd(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--no-analyzers",
        ],
        work.path(),
        &bin,
    ))
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("quorum: analyzer"));
    let json = report(&out);
    assert!(json.get("analyzers").is_none());
    assert!(credited(&json, "ruff").is_empty());
    assert!(!server
        .requests()
        .iter()
        .any(|r| r.text.contains("Leads from static analyzers")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_review_reuses_the_leads_it_started_with() {
    let server = ScriptedServer::start(six_task_script(250, false))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_ruff(&bin);
    let target = work.path().join("target");
    copy_dir(&fixture("code_project"), &target);
    let data = work.path().join("data");
    let backend = format!("ollama={}", server.ollama_url());
    let mut feed = server.subscribe();
    let mut child = cmd(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--max-concurrent",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            work.path().join("out1").to_str().unwrap(),
        ],
        work.path(),
        &bin,
    )
    .spawn()
    .unwrap();
    // Kill it while the first specialist task (on src/db.py) is being answered.
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if task_of(&r).is_some() {
                break;
            }
        }
    })
    .await
    .expect("the review never reached a specialist");
    child.kill().await.unwrap();
    let before = server.requests().len();
    let flow_id = {
        let mut ids: Vec<String> = std::fs::read_dir(data.join("flows"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(ids.len(), 1);
        ids.pop().unwrap()
    };

    // Recorded with the review's scope before the first stage.
    let shown = run(&mut cmd(
        &[
            "flows",
            "show",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
        ],
        work.path(),
        &bin,
    ))
    .await;
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("analyzer:  ruff: 3 hits"),
        "{}",
        text(&shown)
    );

    // The tool is gone by the time the review resumes: the leads come from the store.
    let empty = work.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = work.path().join("out2");
    let o = run(&mut cmd(
        &[
            "resume",
            &flow_id,
            "--backend",
            &backend,
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
        &empty,
    ))
    .await;
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("quorum: analyzer"));
    let after = server.requests();
    let resumed_db_task = after[before..]
        .iter()
        .filter(|r| task_of(r).is_some())
        .find(|r| r.text.contains("<<<BEGIN UNTRUSTED src/db.py>>>"))
        .expect("a src/db.py task ran after the resume");
    assert!(
        resumed_db_task
            .text
            .contains(&format!("src/db.py:{PLANTED_LINE} [ruff B991]")),
        "the resumed prompt lost the recorded lead"
    );
    let json = report(&out);
    // The planted hit, and the one that corroborates task t1's finding on line 53.
    assert_eq!(credited(&json, "ruff").len(), 2);
    assert_eq!(
        json["analyzers"][0]["name"], "ruff",
        "the runs recorded at the start are reported"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_catalog_stops_the_review_naming_the_file() {
    let work = tempfile::tempdir().unwrap();
    let catalog = work.path().join("mine.yaml");
    std::fs::write(
        &catalog,
        "analyzers:\n  - name: lint\n    command: /opt/lint\n    format: ruff_json\n",
    )
    .unwrap();
    let target = fixture("code_project");
    let o = run(cmd(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            "ollama=http://127.0.0.1:9",
        ],
        work.path(),
        work.path(),
    )
    .env("QUORUM_ANALYZERS__CATALOG", &catalog))
    .await;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("mine.yaml") && stderr.contains("`command`"),
        "{stderr}"
    );
}
