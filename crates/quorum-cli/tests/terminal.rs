//! The terminal: the indicatif progress display in a real pseudo-terminal (util-linux
//! `script`), NO_COLOR, nothing drawn when stderr is not a terminal, and
//! `quorum flows show --watch` following a running review locally and through a node.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_testkit::ScriptedServer;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_quorum");
const TOKEN: &str = "terminal-test-token";

fn cmd(program: &str, work: &Path) -> tokio::process::Command {
    let home = work.join(".home");
    let mut c = tokio::process::Command::new(program);
    c.current_dir(work)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        // Tools on this machine's PATH (ruff, bandit...) must not change what is reviewed.
        .env("QUORUM_ANALYZERS__ENABLED", "false")
        .env("QUORUM_HOME", repo_root())
        .env("QUORUM_API_TOKEN", TOKEN)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

fn has_sgr(s: &str) -> bool {
    // Select Graphic Rendition: ESC [ digits/semicolons m — colours and bold.
    let b = s.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == 0x1b && b.get(i + 1) == Some(&b'[') && {
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';') {
                j += 1;
            }
            j > i + 2 && b.get(j) == Some(&b'm')
        }
    })
}

/// `quorum review` in a pseudo-terminal; returns what the terminal showed.
async fn review_in_a_tty(work: &Path, backend: &str, out: &str, no_color: bool) -> String {
    let line = format!(
        "{BIN} review {} --backend {backend} --model {MODEL} --out {} --data-dir {}",
        fixture("code_project").display(),
        work.join(out).display(),
        work.join("data").display()
    );
    let mut c = cmd("script", work);
    c.args(["-qec", &line, "/dev/null"])
        .env("TERM", "xterm-256color")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if no_color {
        c.env("NO_COLOR", "1");
    }
    let o = tokio::time::timeout(Duration::from_secs(120), c.output())
        .await
        .expect("review hung")
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "review failed: {shown}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_display_draws_stages_in_a_terminal_honours_no_color_and_stays_off_a_pipe() {
    tokio::time::timeout(Duration::from_secs(300), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let backend = format!("ollama={}", server.ollama_url());

        // Not a terminal: not a single control sequence or carriage return on stderr.
        let o = cmd(BIN, work.path())
            .args([
                "review",
                fixture("code_project").to_str().unwrap(),
                "--backend",
                &backend,
                "--model",
                MODEL,
                "--out",
                work.path().join("piped").to_str().unwrap(),
                "--data-dir",
                work.path().join("data").to_str().unwrap(),
            ])
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(matches!(o.status.code(), Some(0) | Some(1)), "{err}");
        assert!(
            !err.contains('\x1b') && !err.contains('\r'),
            "drawn on a pipe: {err:?}"
        );

        if std::process::Command::new("script")
            .arg("--version")
            .output()
            .is_err()
        {
            println!("SKIP: no util-linux `script`; the terminal display was not checked in a pty");
            return;
        }
        let plain = review_in_a_tty(work.path(), &backend, "tty-plain", true).await;
        for want in [
            "quorum",
            "scout",
            "planner",
            "specialists",
            "3/3 tasks",
            "verifier",
            "synthesizer",
            "findings",
        ] {
            assert!(
                plain.contains(want),
                "no {want:?} in the display: {plain:?}"
            );
        }
        assert!(
            plain.contains("\x1b[2K"),
            "indicatif redraws lines in place: {plain:?}"
        );
        assert!(!has_sgr(&plain), "NO_COLOR drew colours: {plain:?}");

        let colored = review_in_a_tty(work.path(), &backend, "tty-color", false).await;
        assert!(colored.contains("specialists") && colored.contains("3/3 tasks"));
        assert!(
            has_sgr(&colored),
            "no colours without NO_COLOR: {colored:?}"
        );
    })
    .await
    .expect("test timed out");
}

/// Read `stream` line by line until one contains `marker`; returns the word after it.
async fn word_after(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
    marker: &str,
) -> String {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("nothing printed")
            .unwrap()
            .unwrap_or_else(|| panic!("ended before {marker:?}"));
        if let Some(rest) = line.split(marker).nth(1) {
            return rest.split_whitespace().next().unwrap().to_string();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_show_watch_follows_a_running_local_review_to_its_end() {
    tokio::time::timeout(Duration::from_secs(240), async {
        // Slow specialists: the review is surely still running when the watcher starts.
        let server = ScriptedServer::start(six_task_script(1500, false))
            .await
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let data = work.path().join("data");
        let mut review = cmd(BIN, work.path())
            .args([
                "review",
                fixture("code_project").to_str().unwrap(),
                "--backend",
                &format!("ollama={}", server.ollama_url()),
                "--model",
                MODEL,
                "--out",
                work.path().join("out").to_str().unwrap(),
                "--data-dir",
                data.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(review.stderr.take().unwrap()).lines();
        let flow_id = word_after(&mut lines, "quorum: review ").await;
        // Scout, planner, then a specialist call that takes 1.5 s: the review holds its lock.
        server.wait_for_requests(3).await;

        let o = cmd(BIN, work.path())
            .args([
                "flows",
                "show",
                &flow_id,
                "--watch",
                "--data-dir",
                data.to_str().unwrap(),
            ])
            .output()
            .await
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(
            err.contains(&format!("review {flow_id} (review of ")),
            "{err}"
        );
        assert!(err.contains("is running"), "{err}");
        assert!(out.contains("status:    completed"), "{out}");
        assert!(out.contains(&format!("flow id:   {flow_id}")), "{out}");
        // The watcher ended because the review did.
        let status = tokio::time::timeout(Duration::from_secs(60), review.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(status.code(), Some(0) | Some(1)));

        // A stored review: --watch just shows it.
        let o = cmd(BIN, work.path())
            .args([
                "flows",
                "show",
                &flow_id,
                "--watch",
                "--data-dir",
                data.to_str().unwrap(),
            ])
            .output()
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&o.stdout).contains("status:    completed"));
        assert!(!String::from_utf8_lossy(&o.stderr).contains("is running"));
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_show_watch_with_cluster_follows_the_review_through_the_node() {
    tokio::time::timeout(Duration::from_secs(240), async {
        let server = ScriptedServer::start(six_task_script(500, false))
            .await
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let mut node = cmd(BIN, work.path())
            .args([
                "node",
                "--api",
                "127.0.0.1:0",
                "--name",
                "watch-node",
                "--model",
                MODEL,
                "--backend",
                &format!("ollama={}", server.ollama_url()),
                "--data-dir",
                work.path().join("node-data").to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(node.stdout.take().unwrap()).lines();
        let line = out
            .next_line()
            .await
            .unwrap()
            .expect("node printed nothing");
        let api = line.split("api on ").nth(1).unwrap().trim().to_string();

        let mut review = cmd(BIN, work.path())
            .args([
                "review",
                fixture("code_project").to_str().unwrap(),
                "--cluster",
                &api,
                "--out",
                work.path().join("out").to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(review.stderr.take().unwrap()).lines();
        let flow_id = word_after(&mut lines, "quorum: review ").await;

        let o = cmd(BIN, work.path())
            .args(["flows", "show", &flow_id, "--watch", "--cluster", &api])
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(text.contains("status:    completed"), "{text}");
        assert!(text.contains("attempts 1 on watch-node"), "{text}");
        assert!(text.contains("Defect in area 1"), "{text}");
        let _ = review.wait().await;

        let o = cmd(BIN, work.path())
            .args([
                "flows",
                "show",
                "20990101-000000-abcdef",
                "--watch",
                "--cluster",
                &api,
            ])
            .output()
            .await
            .unwrap();
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains("no review 20990101-000000-abcdef"));
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}
