//! `quorum cluster init-ca` and `issue-cert` as a user runs them: the files they write, the
//! refusals, and a node that starts with the certificate they issued.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;

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
    let node = spawn_node(
        node_command(
            &[
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
            ],
            w,
        )
        .env("QUORUM_COOKIE", "certs-test-cookie")
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::piped()),
    )
    .await;
    assert!(node.banner.contains("cluster on "), "{}", node.banner);
    let mut child = node.child;
    child.kill().await.unwrap();
}
