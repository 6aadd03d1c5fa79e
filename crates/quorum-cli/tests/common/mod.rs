//! What the CLI tests that need a running `quorum node` share: starting one on an ephemeral API
//! port, isolated from the user's config, with a scripted model server as its backend.

#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The API token every test node and client use.
pub const NODE_TOKEN: &str = "s3cret";

/// Start `quorum node --name NAME` with `backend` (an Ollama URL) and `model`, its data dir
/// under `work`; returns the process (killed on drop) and the API URL it printed.
pub async fn start_node(
    bin: &str,
    repo_root: &Path,
    work: &Path,
    name: &str,
    backend: &str,
    model: &str,
) -> (tokio::process::Child, String) {
    let home = work.join(".home");
    let mut node = tokio::process::Command::new(bin)
        .args([
            "node",
            "--api",
            "127.0.0.1:0",
            "--name",
            name,
            "--model",
            model,
            "--backend",
            &format!("ollama={backend}"),
            "--data-dir",
            work.join(format!("{name}-data")).to_str().unwrap(),
        ])
        .current_dir(work)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        // Tools on this machine's PATH (ruff, bandit...) must not change what is reviewed.
        .env("QUORUM_ANALYZERS__ENABLED", "false")
        .env("QUORUM_HOME", repo_root)
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let line = tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(node.stdout.take().unwrap())
            .lines()
            .next_line(),
    )
    .await
    .expect("node did not start")
    .unwrap()
    .expect("node printed nothing");
    let url = line
        .split("api on ")
        .nth(1)
        .expect("no api url")
        .trim()
        .to_string();
    (node, url)
}
