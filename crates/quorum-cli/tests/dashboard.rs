//! `quorum node --http`: the dashboard in a real headless Chromium and `/metrics` as
//! Prometheus text, against a real node process running a scripted review.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TOKEN: &str = "dash-token/+=";
const NODE: &str = "dash-node-1";

/// `quorum ARGS` sending this test's token, one with characters a URL must encode.
fn cmd(args: &[&str], work: &Path) -> tokio::process::Command {
    let mut c = command(args, work);
    c.env("QUORUM_API_TOKEN", TOKEN);
    c
}

/// A node with `--http`; returns it with its API and dashboard URLs.
async fn start_node(work: &Path, backend: &str) -> (tokio::process::Child, String, String) {
    start_node_at(work, backend, "127.0.0.1:0", "127.0.0.1:0").await
}

/// `start_node` on chosen addresses (a node restarted where it was).
async fn start_node_at(
    work: &Path,
    backend: &str,
    api: &str,
    http: &str,
) -> (tokio::process::Child, String, String) {
    let node = spawn_node(
        node_command(
            &[
                "--api",
                api,
                "--http",
                http,
                "--backend",
                backend,
                "--model",
                MODEL,
                "--name",
                NODE,
            ],
            work,
        )
        .env("QUORUM_API_TOKEN", TOKEN),
    )
    .await;
    let dash = node
        .dashboard
        .clone()
        .unwrap_or_else(|| panic!("no dashboard url in {:?}", node.banner));
    let api = node.api().to_string();
    (node.child, api, dash)
}

async fn review(api: &str, work: &Path) -> Value {
    let out = work.join("out");
    let o = run(&mut cmd(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--cluster",
            api,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work,
    ))
    .await;
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "review failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    read_json(&out.join("report.json"))
}

/// One sample of a Prometheus/OpenMetrics text exposition.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: HashMap<String, String>,
    value: f64,
}

/// A strict-enough parser of the text exposition: every line is a comment (`# HELP`, `# TYPE`,
/// `# UNIT`, `# EOF`) or `name{label="value",...} number`; anything else is an error.
fn parse_exposition(text: &str) -> Result<Vec<Sample>, String> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    let mut out = Vec::new();
    let mut saw_eof = false;
    for (i, line) in text.lines().enumerate() {
        let err = |m: &str| format!("line {}: {m}: {line:?}", i + 1);
        if saw_eof {
            return Err(err("content after # EOF"));
        }
        if let Some(c) = line.strip_prefix("# ") {
            let mut parts = c.splitn(3, ' ');
            match parts.next() {
                Some("EOF") => saw_eof = true,
                Some("HELP") | Some("TYPE") | Some("UNIT") => {
                    if !parts.next().is_some_and(name_ok) {
                        return Err(err("bad metric name in comment"));
                    }
                }
                _ => return Err(err("unknown comment")),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| err("no value"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| err("value is not a number"))?,
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, HashMap::new()),
            Some((n, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .ok_or_else(|| err("unclosed labels"))?;
                let mut labels = HashMap::new();
                let mut rest = body;
                while !rest.is_empty() {
                    let (k, v) = rest.split_once("=\"").ok_or_else(|| err("bad label"))?;
                    let end = v.find('"').ok_or_else(|| err("unterminated label value"))?;
                    if !name_ok(k) {
                        return Err(err("bad label name"));
                    }
                    labels.insert(k.to_string(), v[..end].to_string());
                    rest = v[end + 1..].strip_prefix(',').unwrap_or(&v[end + 1..]);
                }
                (n, labels)
            }
        };
        if !name_ok(name) {
            return Err(err("bad metric name"));
        }
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    if !saw_eof {
        return Err("no # EOF line".into());
    }
    Ok(out)
}

fn sum(samples: &[Sample], name: &str, label: Option<(&str, &str)>) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| label.is_none_or(|(k, v)| s.labels.get(k).map(String::as_str) == Some(v)))
        .map(|s| s.value)
        .sum()
}

/// Opens `url` and reads the raw response until it contains `needle`: what has arrived by
/// then. Panics if the response ends first.
async fn read_until(url: &str, token: &str, needle: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(
        format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "the response ended before {needle:?}: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if text.contains(needle) {
            return text.into_owned();
        }
    }
}

/// A minimal HTTP/1.1 GET over a plain TCP socket (the test needs no HTTP client crate).
async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    // Undo chunked transfer encoding when present.
    let body = if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((len, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (code, body)
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(b))
                    .find(|c| c.is_file())
            })
        })
}

/// Chromium, or `None` with a SKIP line saying what went unchecked — unless the environment
/// says it installed one (`QUORUM_REQUIRE_CHROMIUM=1`, as `.ci/run` does): then a missing
/// browser fails the test instead of skipping it.
fn chromium_or_skip(unchecked: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var("QUORUM_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "QUORUM_REQUIRE_CHROMIUM=1 but no chromium, chromium-browser or google-chrome on PATH: {unchecked}"
        );
        println!("SKIP: no chromium on PATH; {unchecked} (apt-get install chromium)");
    }
    found
}

async fn chromium_run(
    bin: &Path,
    profile: &Path,
    extra: &[String],
    url: &str,
) -> std::process::Output {
    tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(bin)
            .args([
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--window-size=1400,1100",
                // Lets the page's fetches settle before the DOM is dumped.
                "--virtual-time-budget=8000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium hung")
    .expect("cannot run chromium")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_cluster_the_dag_and_the_findings_and_metrics_count_the_review() {
    tokio::time::timeout(Duration::from_secs(300), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let backend = format!("ollama={}", server.ollama_url());
        let (mut node, api, dash) = start_node(work.path(), &backend).await;

        // Before any review: the token is required everywhere, /metrics parses.
        let (code, _) = get(&format!("{dash}metrics"), None).await;
        assert_eq!(code, 401, "/metrics without a token must be refused");
        let (code, _) = get(&format!("{dash}api/cluster?token=wrong"), None).await;
        assert_eq!(code, 401);
        let (code, _) = get(
            &format!("{dash}api/cluster?token={}", urlencode(TOKEN)),
            None,
        )
        .await;
        assert_eq!(code, 200, "the token in the query must be accepted");
        let (code, before) = get(&format!("{dash}metrics"), Some(TOKEN)).await;
        assert_eq!(code, 200);
        let before = parse_exposition(&before).unwrap();
        assert_eq!(sum(&before, "quorum_reviews_finished_total", None), 0.0);

        let report = review(&api, work.path()).await;
        let flow_id = report["flow_id"].as_str().unwrap().to_string();
        let title = report["findings"][0]["title"].as_str().unwrap().to_string();

        // /metrics counts the finished review and every model call the server saw.
        let (code, text) = get(&format!("{dash}metrics"), Some(TOKEN)).await;
        assert_eq!(code, 200);
        let samples = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(sum(&samples, "quorum_reviews_started_total", None), 1.0);
        let status = report["status"].as_str().unwrap();
        assert_eq!(
            sum(
                &samples,
                "quorum_reviews_finished_total",
                Some(("status", status))
            ),
            1.0,
            "{text}"
        );
        let calls = server.requests().len() as f64;
        assert_eq!(
            sum(&samples, "quorum_model_calls_total", None),
            calls,
            "{text}"
        );
        assert!(
            sum(
                &samples,
                "quorum_model_tokens_total",
                Some(("direction", "in"))
            ) > 0.0
        );
        assert_eq!(
            sum(&samples, "quorum_model_call_duration_seconds_count", None),
            calls
        );
        assert_eq!(
            sum(&samples, "quorum_attempts_total", Some(("role", "planner"))),
            1.0,
            "{text}"
        );
        assert!(
            sum(
                &samples,
                "quorum_placements_total",
                Some(("placement", "local"))
            ) >= 3.0
        );
        assert_eq!(
            sum(&samples, "quorum_cluster_nodes", Some(("state", "up"))),
            1.0
        );
        // Everything drained once the review ended; the gauges exist.
        for q in [
            "reviews_running",
            "tasks_pending",
            "specialists_active",
            "model_calls_in_flight",
        ] {
            assert!(
                samples.iter().any(|s| s.name == "quorum_queue_depth"
                    && s.labels.get("queue").map(String::as_str) == Some(q)),
                "no queue_depth{{queue={q:?}}}: {text}"
            );
            assert_eq!(
                sum(&samples, "quorum_queue_depth", Some(("queue", q))),
                0.0,
                "{q}"
            );
        }

        // The JSON feeds the page reads.
        let (code, body) = get(&format!("{dash}api/reviews/{flow_id}/events"), Some(TOKEN)).await;
        assert_eq!(code, 200);
        let events: Value = serde_json::from_str(&body).unwrap();
        let kinds: Vec<&str> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap())
            .collect();
        assert!(
            kinds.contains(&"finding") && kinds.last() == Some(&"finished"),
            "{kinds:?}"
        );
        // Progress events carry when they happened, for the timeline.
        let stage = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "stage")
            .unwrap();
        assert!(stage["data"]["at_ms"].as_u64().unwrap() > 0, "{stage}");

        let Some(bin) = chromium_or_skip("the dashboard was not checked in a browser") else {
            let _ = node.kill().await;
            return;
        };
        let url = format!("{dash}?token={}&flow={flow_id}", urlencode(TOKEN));
        let profile = work.path().join("chromium-profile");
        let o = chromium_run(&bin, &profile, &["--dump-dom".to_string()], &url).await;
        let dom = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "chromium failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            dom.contains(&format!("data-node=\"{NODE}\"")),
            "no node row:\n{dom}"
        );
        for t in ["t1", "t2", "t3", "scout", "planner", "verifier"] {
            assert!(
                dom.contains(&format!("data-task=\"{t}\"")),
                "no task {t}:\n{dom}"
            );
        }
        assert!(dom.contains(&title), "no finding {title:?}:\n{dom}");
        assert!(dom.contains(&flow_id));
        assert!(dom.contains("src/db.py:53-54"), "no cited lines:\n{dom}");

        let shot = work.path().join("dashboard.png");
        let o = chromium_run(
            &bin,
            &profile,
            &[format!("--screenshot={}", shot.display())],
            &url,
        )
        .await;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let png = std::fs::read(&shot).expect("no screenshot written");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
        // Kept: the temp dir is persisted so the screenshot can be looked at.
        let kept = work.keep();
        println!(
            "dashboard screenshot: {}",
            kept.join("dashboard.png").display()
        );
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_review_the_node_resumed_after_a_restart() {
    tokio::time::timeout(Duration::from_secs(300), async {
        // Every specialist answer is held until the node has died: it dies mid-review.
        let server = ScriptedServer::start(six_tasks_holding_after(0))
            .await
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let backend = format!("ollama={}", server.ollama_url());
        let (api, http) = (
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        );
        let (mut node, api_url, _) = start_node_at(work.path(), &backend, &api, &http).await;
        let review = {
            let (w, api_url) = (work.path().to_path_buf(), api_url.clone());
            tokio::spawn(async move { review(&api_url, &w).await })
        };
        // Two specialist calls in, the node dies; it comes back on the same ports and data.
        for i in 0.. {
            assert!(i < 2000, "the specialists never started");
            if server
                .requests()
                .iter()
                .filter(|r| task_of(r).is_some())
                .count()
                >= 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        node.kill().await.unwrap();
        let _ = node.wait().await;
        server.release();
        let (mut node, _, dash) = start_node_at(work.path(), &backend, &api, &http).await;
        let report = review.await.unwrap();
        let flow_id = report["flow_id"].as_str().unwrap().to_string();

        let Some(bin) = chromium_or_skip("the resumed review was not checked in a browser") else {
            let _ = node.kill().await;
            return;
        };
        let url = format!("{dash}?token={}&flow={flow_id}", urlencode(TOKEN));
        let profile = work.path().join("chromium-profile");
        let o = chromium_run(&bin, &profile, &["--dump-dom".to_string()], &url).await;
        let dom = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(dom.contains(&flow_id), "{dom}");
        assert!(
            dom.contains("status completed"),
            "not shown completed:\n{dom}"
        );
        for i in 1..=SIX_TASKS {
            assert!(
                dom.contains(&format!("data-task=\"t{i}\"")),
                "no task t{i}:\n{dom}"
            );
        }
        assert!(dom.contains("Defect in area"), "no finding:\n{dom}");
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_sends_a_running_review_s_events_as_sse_until_it_finishes() {
    tokio::time::timeout(Duration::from_secs(300), async {
        // Every specialist answer is held until the stream is asked for: the review is running
        // while the test looks at it.
        let server = ScriptedServer::start(six_tasks_holding_after(0))
            .await
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let backend = format!("ollama={}", server.ollama_url());
        let (mut node, api, dash) = start_node(work.path(), &backend).await;
        let review = {
            let (w, api) = (work.path().to_path_buf(), api.clone());
            tokio::spawn(async move { review(&api, &w).await })
        };
        // The review is running once a specialist has been asked (and held).
        for i in 0.. {
            assert!(i < 2000, "the specialists never started");
            if server.requests().iter().any(|r| task_of(r).is_some()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (_, list) = get(&format!("{dash}api/reviews"), Some(TOKEN)).await;
        let list: Value = serde_json::from_str(&list).unwrap();
        let flow_id = list["reviews"][0]["flow_id"].as_str().unwrap().to_string();
        assert_eq!(list["reviews"][0]["status"], "running", "{list}");

        // While nothing happens (every specialist held), the stream still says it is alive:
        // a heartbeat event, which the page uses to tell a quiet review from a silent node.
        let quiet = read_until(
            &format!("{dash}api/reviews/{flow_id}/stream?after=1000"),
            TOKEN,
            "event: heartbeat",
        )
        .await;
        assert!(quiet.contains(r#"{"every_ms":2000}"#), "{quiet}");

        // Skip what the page already rendered from the backlog: the first two events. The
        // specialists are let go as the stream is asked for: what it must carry is the same
        // whether it attaches while the review runs or after it ended.
        let stream = {
            let url = format!("{dash}api/reviews/{flow_id}/stream?after=2");
            tokio::spawn(async move { get(&url, Some(TOKEN)).await })
        };
        server.release();
        let (code, body) = stream.await.unwrap();
        assert_eq!(code, 200);
        let mut ids = Vec::new();
        let mut kinds = Vec::new();
        for frame in body.split("\n\n") {
            if !frame.lines().any(|l| l == "event: review") {
                continue; // a heartbeat
            }
            for line in frame.lines() {
                if let Some(id) = line.strip_prefix("id: ") {
                    ids.push(id.trim().parse::<u64>().unwrap());
                }
                if let Some(data) = line.strip_prefix("data: ") {
                    let v: Value = serde_json::from_str(data).unwrap();
                    kinds.push(v["kind"].as_str().unwrap().to_string());
                }
            }
        }
        assert_eq!(
            ids.first(),
            Some(&3),
            "events after ?after=2 start at 3: {ids:?}"
        );
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("finished"),
            "{kinds:?}"
        );
        assert_eq!(
            kinds.iter().filter(|k| *k == "finding").count(),
            SIX_TASKS,
            "{kinds:?}"
        );
        assert!(kinds.iter().any(|k| k == "task_started"));
        let report = review.await.unwrap();
        assert_eq!(report["flow_id"], flow_id.as_str());
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}
