//! The `quorum-scripted` binary as other tests drive it: a YAML script in, one listening line
//! out, JSON lines in the log, a clean exit on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use quorum_testkit::RecordedRequest;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const SCRIPT: &str = r#"
rules:
  - name: greet
    when: {all: [hello]}
    replies: [{text: "hi there"}]
fallback: {status: {code: 429, retry_after: 1}}
"#;

#[tokio::test]
async fn binary_serves_a_yaml_script_and_logs_jsonl() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.yaml");
        let log = dir.path().join("requests.jsonl");
        std::fs::write(&script, SCRIPT).unwrap();

        let mut child = Command::new(env!("CARGO_BIN_EXE_quorum-scripted"))
            .arg("--script")
            .arg(&script)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next_line().await.unwrap().unwrap();
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");

        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let resp = client
            .post(format!("{base}/api/chat"))
            .json(&json!({"model": "scripted-model", "messages": [{"role": "user", "content": "hello"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["message"]["content"], "hi there");

        let resp = client
            .post(format!("{base}/v1/chat/completions"))
            .json(&json!({"model": "scripted-model", "messages": [{"role": "user", "content": "other"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "1");

        let pid = child.id().unwrap().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        assert!(killed.success());
        let status = child.wait().await.unwrap();
        assert!(status.success(), "exit status {status:?}");

        let logged: Vec<RecordedRequest> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(logged.len(), 2);
        assert_eq!(logged[0].rule.as_deref(), Some("greet"));
        assert_eq!(logged[0].text, "hello");
        assert_eq!(logged[1].seq, 1);
        assert_eq!(logged[1].rule, None);
        assert_eq!(logged[1].path, "/v1/chat/completions");
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn binary_refuses_a_broken_script() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("broken.yaml");
        std::fs::write(&script, "rules: [{name: r, replies: [{txt: x}]}]").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_quorum-scripted"))
            .arg("--script")
            .arg(&script)
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("broken.yaml") && stderr.contains("txt"),
            "{stderr}"
        );
    })
    .await
    .expect("test timed out");
}
