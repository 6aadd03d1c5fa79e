//! The deployment templates start a real node: the `quorum node` command line of
//! deploy/systemd/quorum-node.service (with node.env's variables) and of
//! deploy/compose/compose.yaml (with its defaults) is run as written, its /etc/quorum and
//! /run/secrets paths moved into a temporary directory holding certificates from `quorum
//! cluster init-ca` / `issue-cert`, on loopback addresses. A flag the CLI no longer has, or a
//! combination it refuses, fails here rather than on a user's workstation.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use std::collections::HashMap;
use std::path::Path;

/// `${VAR}`, `${VAR:-default}` and `$VAR` replaced from `vars` (an unset `$VAR` is empty, as
/// systemd and compose make it).
fn expand(text: &str, vars: &HashMap<&str, String>) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let braced = chars.peek() == Some(&'{');
        if braced {
            chars.next();
        }
        let mut name = String::new();
        let mut default = None;
        while let Some(&n) = chars.peek() {
            if braced && n == '}' {
                chars.next();
                break;
            }
            if braced && n == ':' {
                chars.next();
                chars.next(); // '-'
                let mut d = String::new();
                for n in chars.by_ref() {
                    if n == '}' {
                        break;
                    }
                    d.push(n);
                }
                default = Some(d);
                break;
            }
            if !(braced || n.is_ascii_alphanumeric() || n == '_') {
                break;
            }
            name.push(n);
            chars.next();
        }
        match vars.get(name.as_str()) {
            Some(v) => out.push_str(v),
            None => out.push_str(&default.unwrap_or_default()),
        }
    }
    out
}

/// Certificates, token, cookie and the node config where a template expects them, under `etc`;
/// the config's model server is `server` (the shipped one points at 127.0.0.1:11434).
async fn secrets(work: &Path, etc: &Path, name: &str, server: &ScriptedServer) {
    std::fs::create_dir_all(etc).unwrap();
    let ca = work.join("ca");
    let o = quorum(&["cluster", "init-ca", ca.to_str().unwrap()], work).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = quorum(
        &[
            "cluster",
            "issue-cert",
            name,
            "--ca",
            ca.to_str().unwrap(),
            "--host",
            "127.0.0.1",
        ],
        work,
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    for (from, to) in [
        ("ca.pem", "ca.pem"),
        (&format!("{name}.pem") as &str, "node.pem"),
        (&format!("{name}.key"), "node.key"),
    ] {
        std::fs::copy(ca.join(from), etc.join(to)).unwrap();
    }
    std::fs::write(etc.join("api-token"), NODE_TOKEN).unwrap();
    std::fs::write(etc.join("cookie"), "deploy-template-cookie").unwrap();
    let config = std::fs::read_to_string(repo_root().join("deploy/systemd/node.toml")).unwrap();
    assert!(config.contains("http://127.0.0.1:11434"), "{config}");
    std::fs::write(
        etc.join("node.toml"),
        config.replace("http://127.0.0.1:11434", &server.ollama_url()),
    )
    .unwrap();
}

/// Start `quorum ARGS` (ARGS starting with `node`) and check what its banner says.
async fn starts(args: &[String], work: &Path, name: &str) {
    assert_eq!(args.first().map(String::as_str), Some("node"), "{args:?}");
    let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let mut node = spawn_node(
        node_command(&rest, work)
            .env_remove("QUORUM_API_TOKEN")
            .env("QUORUM_DATA_DIR", work.join("data")),
    )
    .await;
    assert!(node.banner.contains(name), "{}", node.banner);
    assert!(
        node.cluster.is_some(),
        "no cluster address: {}",
        node.banner
    );
    assert!(node.api.is_some(), "no API: {}", node.banner);
    let _ = node.child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systemd_unit_s_command_line_starts_a_clustered_node_with_tls() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let etc = w.join("etc-quorum");
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    secrets(w, &etc, "ws1", &server).await;
    let unit =
        std::fs::read_to_string(repo_root().join("deploy/systemd/quorum-node.service")).unwrap();
    let exec = unit
        .split("ExecStart=")
        .nth(1)
        .expect("an ExecStart")
        .lines()
        .scan(true, |more, line| {
            let take = *more;
            *more = line.trim_end().ends_with('\\');
            take.then(|| line.trim_end().trim_end_matches('\\').to_string())
        })
        .collect::<Vec<_>>()
        .join(" ");
    // node.env's first node, on loopback.
    let env_file = std::fs::read_to_string(repo_root().join("deploy/systemd/node.env")).unwrap();
    let mut vars: HashMap<&str, String> = env_file
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().to_string()))
        .collect();
    assert_eq!(
        vars.get("QUORUM_NODE_NAME").map(String::as_str),
        Some("ws1")
    );
    assert!(
        vars.contains_key("QUORUM_VOTERS"),
        "node.env names no voters"
    );
    vars.insert("QUORUM_LISTEN", "127.0.0.1:0".into());
    let line = expand(&exec, &vars).replace("/etc/quorum/", &format!("{}/", etc.display()));
    let mut args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    assert!(args[0].ends_with("/quorum"), "{args:?}");
    args.remove(0);
    // The API on an ephemeral port rather than the unit's 7400.
    if let Some(i) = args.iter().position(|a| a == "--api") {
        args[i + 1] = "127.0.0.1:0".into();
    }
    assert!(args.contains(&"--voters".to_string()) && args.contains(&"--tls-ca".to_string()));
    starts(&args, w, "ws1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_service_s_command_line_starts_a_clustered_node_with_tls() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let etc = w.join("etc-quorum");
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    secrets(w, &etc, "ws1", &server).await;
    let compose: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/compose/compose.yaml")).unwrap(),
    )
    .unwrap();
    let command = compose["services"]["quorum"]["command"]
        .as_str()
        .expect("a command string");
    let vars: HashMap<&str, String> = HashMap::from([("LISTEN", "127.0.0.1:0".to_string())]);
    let line = expand(command, &vars)
        .replace(
            "/run/secrets/api_token",
            &etc.join("api-token").display().to_string(),
        )
        .replace(
            "/run/secrets/cookie",
            &etc.join("cookie").display().to_string(),
        )
        .replace(
            "/run/secrets/node_cert",
            &etc.join("node.pem").display().to_string(),
        )
        .replace(
            "/run/secrets/node_key",
            &etc.join("node.key").display().to_string(),
        )
        .replace("/etc/quorum/", &format!("{}/", etc.display()));
    let mut args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    if let Some(i) = args.iter().position(|a| a == "--api") {
        args[i + 1] = "127.0.0.1:0".into();
    }
    assert!(args.contains(&"--voters".to_string()) && args.contains(&"--tls-cert".to_string()));
    starts(&args, w, "ws1").await;
}
