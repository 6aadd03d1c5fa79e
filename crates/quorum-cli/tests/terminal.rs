//! The terminal: the indicatif progress display in a real pseudo-terminal (util-linux
//! `script`), NO_COLOR, nothing drawn when stderr is not a terminal, and
//! `quorum flows show --watch` following a running review locally and through a node.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// `program` (the binary, or `script` running it in a pseudo-terminal) isolated in `work`,
/// sending the test node's token.
fn cmd(program: &str, work: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(program);
    isolate(&mut c, work)
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .stdin(Stdio::null());
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
        let o = quorum(
            &[
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
            ],
            work.path(),
        )
        .await;
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
        // Every specialist answer is held until the watcher has said it follows the running
        // review: it starts while the review runs, however fast the machine.
        let server = ScriptedServer::start(six_tasks_holding_after(0))
            .await
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let data = work.path().join("data");
        let mut review = command(
            &[
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
            ],
            work.path(),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let mut lines = BufReader::new(review.stderr.take().unwrap()).lines();
        let flow_id = word_after(&mut lines, "quorum: review ").await;
        // Scout, planner, then a held specialist call: the review holds its lock.
        server.wait_for_requests(3).await;

        let mut watcher = command(
            &[
                "flows",
                "show",
                &flow_id,
                "--watch",
                "--data-dir",
                data.to_str().unwrap(),
            ],
            work.path(),
        )
        .spawn()
        .unwrap();
        // It says it follows the running review (its first line), then the review goes on.
        let mut said = BufReader::new(watcher.stderr.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), said.next_line())
            .await
            .expect("the watcher said nothing")
            .unwrap()
            .unwrap_or_default();
        server.release();
        let mut rest = String::new();
        while let Some(l) = said.next_line().await.unwrap() {
            rest.push_str(&l);
            rest.push('\n');
        }
        let o = tokio::time::timeout(Duration::from_secs(120), watcher.wait_with_output())
            .await
            .expect("the watcher did not end with the review")
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = format!("{first}\n{rest}");
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
        let o = quorum(
            &[
                "flows",
                "show",
                &flow_id,
                "--watch",
                "--data-dir",
                data.to_str().unwrap(),
            ],
            work.path(),
        )
        .await;
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
        let node = spawn_node(&mut node_command(
            &[
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
            ],
            work.path(),
        ))
        .await;
        let api = node.api().to_string();
        let mut node = node.child;

        let mut review = command(
            &[
                "review",
                fixture("code_project").to_str().unwrap(),
                "--cluster",
                &api,
                "--out",
                work.path().join("out").to_str().unwrap(),
            ],
            work.path(),
        )
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let mut lines = BufReader::new(review.stderr.take().unwrap()).lines();
        let flow_id = word_after(&mut lines, "quorum: review ").await;

        let o = client(
            &["flows", "show", &flow_id, "--watch", "--cluster", &api],
            work.path(),
        )
        .await;
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(text.contains("status:    completed"), "{text}");
        assert!(text.contains("attempts 1 on watch-node"), "{text}");
        assert!(text.contains("Defect in area 1"), "{text}");
        let _ = review.wait().await;

        let o = client(
            &[
                "flows",
                "show",
                "20990101-000000-abcdef",
                "--watch",
                "--cluster",
                &api,
            ],
            work.path(),
        )
        .await;
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains("no review 20990101-000000-abcdef"));
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}
