//! `quorum cluster init-ca` and `issue-cert` as a user runs them: the files they write, the
//! refusals, and a node that starts with the certificate they issued.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_testkit::ScriptedServer;
use std::path::Path;
use std::process::Output;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_quorum");

async fn quorum(args: &[&str], cwd: &Path) -> Output {
    let home = cwd.join(".home");
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(BIN)
            .args(args)
            .current_dir(cwd)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("QUORUM_HOME", repo_root())
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("quorum did not exit in time")
    .expect("quorum ran")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_and_a_node_certificate_are_written_refused_when_wrong_and_start_a_node() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let ca = w.join("ca");
    let ca_s = ca.to_str().unwrap();

    let o = quorum(&["cluster", "init-ca", ca_s], w).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ca_pem = std::fs::read_to_string(ca.join("ca.pem")).unwrap();
    assert!(ca_pem.contains("BEGIN CERTIFICATE"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(ca.join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the CA key is readable by others: {mode:o}"
        );
    }
    // Never overwritten: a second init-ca is refused in one line.
    let o = quorum(&["cluster", "init-ca", ca_s], w).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("must not exist yet"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));

    let o = quorum(&["cluster", "issue-cert", "n1", "--ca", ca_s], w).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--tls-cert"));
    assert!(std::fs::read_to_string(ca.join("n1.pem"))
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    assert!(ca.join("n1.key").is_file());

    // Bad input: a name that cannot be a DNS name, a directory with no CA.
    let o = quorum(&["cluster", "issue-cert", "bad name", "--ca", ca_s], w).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid node name"), "{}", stderr(&o));
    let empty = w.join("no-ca");
    let o = quorum(
        &[
            "cluster",
            "issue-cert",
            "n2",
            "--ca",
            empty.to_str().unwrap(),
        ],
        w,
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("quorum cluster init-ca"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));

    // The issued certificate is one a node starts its cluster links with.
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let home = w.join(".home");
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "node",
            "--name",
            "n1",
            "--listen",
            "127.0.0.1:0",
            "--backend",
            &format!("ollama={}", server.ollama_url()),
            "--model",
            MODEL,
            "--data-dir",
            w.join("data").to_str().unwrap(),
            "--tls-cert",
            ca.join("n1.pem").to_str().unwrap(),
            "--tls-key",
            ca.join("n1.key").to_str().unwrap(),
            "--tls-ca",
            ca.join("ca.pem").to_str().unwrap(),
        ])
        .current_dir(w)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("QUORUM_HOME", repo_root())
        .env("QUORUM_COOKIE", "certs-test-cookie")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the node did not start")
        .unwrap();
    let line = match line {
        Some(l) => l,
        None => {
            let out = child.wait_with_output().await.unwrap();
            panic!("the node exited: {}", String::from_utf8_lossy(&out.stderr));
        }
    };
    assert!(line.contains("cluster on "), "{line}");
    child.kill().await.unwrap();
}
