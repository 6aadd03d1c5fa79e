//! `quorum node --api` and `quorum review --cluster`: a real node process, a real client
//! process, the scripted model server behind the node; token checks at the edge.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `quorum ARGS` sending `token` as the API token, or none at all.
fn cmd(args: &[&str], work: &Path, token: Option<&str>) -> tokio::process::Command {
    let mut c = command(args, work);
    if let Some(t) = token {
        c.env("QUORUM_API_TOKEN", t);
    }
    c
}

/// Start node n1 (its API on an ephemeral port, its data dir the default one under `work`, so a
/// `quorum flows show` there reads it) and return it with its API URL.
async fn start_node(work: &Path, backend: &str) -> (tokio::process::Child, String) {
    start_node_with(work, backend, |_| {}).await
}

/// [`start_node`] with the node's command adjusted first (its PATH, its environment).
async fn start_node_with(
    work: &Path,
    backend: &str,
    adjust: impl FnOnce(&mut tokio::process::Command),
) -> (tokio::process::Child, String) {
    let mut c = node_command(
        &[
            "--api",
            "127.0.0.1:0",
            "--backend",
            backend,
            "--model",
            MODEL,
            "--name",
            "n1",
        ],
        work,
    );
    adjust(&mut c);
    let node = spawn_node(&mut c).await;
    let api = node.api().to_string();
    (node.child, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_through_a_node_matches_a_local_review() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let (mut node, url) = start_node(work.path(), &backend).await;
    let target = fixture("code_project");

    let out = work.path().join("remote");
    let o = client(
        &[
            "review",
            target.to_str().unwrap(),
            "--cluster",
            &url,
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let remote: Value = read_json(&out.join("report.json"));
    assert!(out.join("report.sarif").is_file() && out.join("report.md").is_file());

    // The same review, locally: the same findings.
    let local_out = work.path().join("local");
    let o = quorum(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            local_out.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    let local: Value = read_json(&local_out.join("report.json"));
    let key = |r: &Value| -> Vec<String> {
        let mut v: Vec<String> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| format!("{}|{}", f["anchor"], f["severity"]))
            .collect();
        v.sort();
        v
    };
    assert_eq!(key(&remote), key(&local));
    assert_eq!(
        remote["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["node"] == "n1")
            .count(),
        remote["tasks"].as_array().unwrap().len()
    );
    // The node kept out the secret file even though the client never sent it anyway.
    assert!(!server
        .requests()
        .iter()
        .any(|r| r.text.contains("dev-4e1f9a7c2b8d43f0a6c5e2d1b7f8c9a0")));

    // No token, or a wrong one: refused at the edge, exit 2, nothing started.
    let before = server.requests().len();
    for token in [None, Some("wrong")] {
        let o = run(&mut cmd(
            &["review", target.to_str().unwrap(), "--cluster", &url],
            work.path(),
            token,
        ))
        .await;
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(server.requests().len(), before);

    // SIGTERM: the node stops cleanly and keeps what it learned about its models.
    let pid = node.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = tokio::time::timeout(Duration::from_secs(30), node.wait())
        .await
        .expect("node did not stop")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let data = quorum_store::DataDir::new(work.path().join(".home/data/quorum"));
    let learned: Value = data
        .open_node()
        .unwrap()
        .get("model_runtime")
        .unwrap()
        .expect("nothing learned was kept");
    assert!(
        learned[MODEL]["security_sentinel"]["successes"]
            .as_u64()
            .unwrap()
            >= 1,
        "{learned}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_bad_setups() {
    let work = tempfile::tempdir().unwrap();
    // No token.
    let o = run(&mut cmd(
        &[
            "node",
            "--api",
            "127.0.0.1:0",
            "--backend",
            "ollama=http://127.0.0.1:9",
        ],
        work.path(),
        None,
    ))
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("QUORUM_API_TOKEN"));
    // Non-loopback without TLS.
    let o = run(&mut cmd(
        &[
            "node",
            "--api",
            "0.0.0.0:0",
            "--backend",
            "ollama=http://127.0.0.1:9",
        ],
        work.path(),
        Some("t"),
    ))
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--insecure"));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_accepting_node_runs_its_analyzers_and_the_client_can_turn_them_off() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_ruff(&bin);
    let backend = format!("ollama={}", server.ollama_url());
    // The node has the tool (on a PATH holding nothing else); the client has none.
    let (mut node, url) = start_node_with(work.path(), &backend, |c| {
        c.env("PATH", &bin).env("QUORUM_ANALYZERS__ENABLED", "true");
    })
    .await;
    let target = fixture("code_project");
    let review = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "review",
            target.to_str().unwrap(),
            "--cluster",
            &url,
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut c = cmd(&args, work.path(), Some(NODE_TOKEN));
        async move { run(&mut c).await }
    };
    let credited = |report: &Value| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["reporters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["persona"] == "analyzer:ruff")
            })
            .count()
    };

    let out = work.path().join("with");
    let o = review(&out, &[]).await;
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = read_json(&out.join("report.json"));
    // The planted hit, and the one inside the specialists' SQL injection finding.
    assert_eq!(credited(&report), 2, "{}", report["findings"]);
    assert!(report["analyzers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "ruff" && r["ran"] == true));
    let sec = server
        .requests()
        .into_iter()
        .find(|r| r.system.contains("You are security_sentinel"))
        .unwrap();
    assert!(sec
        .text
        .contains(&format!("src/db.py:{PLANTED_LINE} [ruff B991]")));
    // Recorded with the review's facts on the node (what a takeover or resume replays).
    let flow_id = report["flow_id"].as_str().unwrap();
    let shown = quorum(&["flows", "show", flow_id], work.path()).await;
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("analyzer:  ruff: 3 hits"),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );

    let before = server.requests().len();
    let out = work.path().join("without");
    let o = review(&out, &["--no-analyzers"]).await;
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = read_json(&out.join("report.json"));
    assert_eq!(credited(&report), 0);
    assert!(report.get("analyzers").is_none());
    assert!(!server.requests()[before..]
        .iter()
        .any(|r| r.text.contains("Leads from static analyzers")));
    node.kill().await.unwrap();
}
