//! Multi-process clusters on 127.0.0.1: real `quorum node` processes, each with its own
//! scripted model server; kill -9 and SIGSTOP for node loss and hangs.
//!
//! `QUORUM_TEST_NODE_LOG=1` prints every node's log lines (prefixed with its name) instead of
//! keeping them for the tests that read them — for diagnosing a failure, not for a full run.

mod common;

use common::*;
use quorum_api::ApiClient;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

const COOKIE: &str = "cluster-test-cookie";

struct Node {
    child: tokio::process::Child,
    cluster: String,
    api: Option<String>,
    stderr: Option<tokio::io::Lines<BufReader<tokio::process::ChildStderr>>>,
    _server: ScriptedServer,
    data: PathBuf,
}

async fn start(
    name: &str,
    work: &Path,
    join: &[&str],
    api: bool,
    cookie: &str,
    delay_ms: u64,
    capacity: usize,
) -> Node {
    let api = api.then(|| "127.0.0.1:0".to_string());
    start_at(name, work, join, api.as_deref(), cookie, delay_ms, capacity).await
}

/// `start`, with the API on a chosen address (a node restarted on the same port).
async fn start_at(
    name: &str,
    work: &Path,
    join: &[&str],
    api: Option<&str>,
    cookie: &str,
    delay_ms: u64,
    capacity: usize,
) -> Node {
    let server = ScriptedServer::start(six_task_script(delay_ms, false))
        .await
        .unwrap();
    let data = work.join(format!("data-{name}"));
    let backend = format!("ollama={}", server.ollama_url());
    let mut args: Vec<String> = vec![
        "--name".into(),
        name.into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--backend".into(),
        backend,
        "--model".into(),
        MODEL.into(),
        "--data-dir".into(),
        data.display().to_string(),
        "--heartbeat-ms".into(),
        "100".into(),
        "--deadline-ms".into(),
        "1000".into(),
    ];
    if let Some(a) = api {
        args.extend(["--api".into(), a.to_string()]);
    }
    for j in join {
        args.extend(["--join".into(), j.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = spawn_node(
        node_command(&args, work)
            .env("QUORUM_COOKIE", cookie)
            .env("QUORUM_MAX_CONCURRENT", capacity.to_string())
            .env("QUORUM_FAULTS", work.join(format!("faults-{name}")))
            .env("RUST_LOG", "warn")
            .stderr(Stdio::piped()),
    )
    .await;
    let (cluster, api) = (node.cluster().to_string(), node.api.clone());
    let mut child = node.child;
    let mut stderr = Some(BufReader::new(child.stderr.take().unwrap()).lines());
    if std::env::var_os("QUORUM_TEST_NODE_LOG").is_some() {
        let mut lines = stderr.take().unwrap();
        let tag = name.to_string();
        tokio::spawn(async move {
            while let Ok(Some(l)) = lines.next_line().await {
                eprintln!("[{tag}] {l}");
            }
        });
    }
    Node {
        child,
        cluster,
        api,
        stderr,
        _server: server,
        data,
    }
}

async fn connect(node: &Node) -> ApiClient {
    ApiClient::connect(node.api.as_ref().unwrap(), NODE_TOKEN)
        .await
        .unwrap()
}

/// Poll (bounded) until `node` sees exactly `names` alive.
async fn wait_alive(c: &ApiClient, names: &[&str]) {
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    want.sort();
    let mut last = Vec::new();
    for _ in 0..300 {
        let mut alive: Vec<String> = c
            .cluster_status()
            .await
            .unwrap()
            .into_iter()
            .filter(|n| n.alive)
            .map(|n| n.name)
            .collect();
        alive.sort();
        if alive == want {
            return;
        }
        last = alive;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cluster never reached {want:?}; last saw {last:?}");
}

/// [`review_through`] one node, which must end it with a report (exit 0 or 1).
async fn review_via(api: &str, work: &Path, out: &str) -> (i32, Value) {
    let (code, report, stderr) = review_through(api, work, out).await;
    assert!(code == 0 || code == 1, "review failed ({code}): {stderr}");
    (code, report.expect("no report written"))
}

fn anchors(r: &Value) -> Vec<String> {
    let mut v: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{}|{}", f["anchor"], f["severity"]))
        .collect();
    v.sort();
    v
}

fn specialist_nodes(r: &Value) -> Vec<String> {
    let mut v: Vec<String> = r["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"].as_str().unwrap().starts_with('t'))
        .map(|t| t["node"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Wait (bounded) until a worker's model server receives its first specialist request; the task id.
async fn first_attempt(
    feed: &mut tokio::sync::mpsc::UnboundedReceiver<quorum_testkit::RecordedRequest>,
) -> String {
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if let Some(t) = task_of(&r) {
                return t;
            }
        }
        panic!("the model server stopped");
    })
    .await
    .expect("the worker never got an attempt")
}

/// Specialist requests a node's model server has seen.
fn specialist_calls(server: &ScriptedServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| task_of(r).is_some())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_find_what_one_node_finds() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let solo = start("solo", w, &[], true, COOKIE, 150, 2).await;
    let (_, single) = review_via(solo.api.as_ref().unwrap(), w, "single").await;

    let n1 = start("n1", w, &[], true, COOKIE, 150, 2).await;
    let n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 150, 2).await;
    let n3 = start("n3", w, &[&n1.cluster], false, COOKIE, 150, 2).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2", "n3"]).await;
    let (_, clustered) = review_via(n1.api.as_ref().unwrap(), w, "three").await;
    assert_complete_once(&clustered);
    assert_eq!(anchors(&single), anchors(&clustered));
    let nodes = specialist_nodes(&clustered);
    assert!(nodes.len() >= 2, "work did not spread: {nodes:?}");
    assert!(specialist_calls(&n2._server) + specialist_calls(&n3._server) > 0);
    // Each worker used only its own model server.
    assert!(n2._server.requests().iter().all(|r| r.model == MODEL));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_a_worker_and_the_review_completes_once() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let n1 = start("n1", w, &[], true, COOKIE, 300, 1).await;
    let mut n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 3000, 2).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let mut feed = n2._server.subscribe();
    let review = {
        let w = w.to_path_buf();
        let api = n1.api.clone().unwrap();
        tokio::spawn(async move { review_via(&api, &w, "out").await })
    };
    // Once n2 is working on an attempt, kill it without warning.
    first_attempt(&mut feed).await;
    n2.child.kill().await.unwrap();
    let (_, report) = review.await.unwrap();
    assert_complete_once(&report);
    assert!(
        !specialist_nodes(&report).contains(&"n2".to_string()),
        "a task is attributed to the dead node"
    );
    wait_alive(&c, &["n1"]).await;

    // Every task result is recorded exactly once in the conductor's store.
    let mut n1 = n1;
    n1.child.kill().await.unwrap();
    let _ = n1.child.wait().await;
    let data = quorum_store::DataDir::new(&n1.data);
    let flow = data.list_flows().unwrap().into_iter().next().unwrap();
    let store = data.open_flow(&flow.flow_id).unwrap();
    let events = store.events().unwrap();
    for i in 1..=SIX_TASKS {
        let id = format!("t{i}");
        let succeeded = events.iter().filter(|e| matches!(&e.event, quorum_store::Event::AttemptSucceeded { task_id, .. } if *task_id == id)).count();
        assert_eq!(succeeded, 1, "task {id} recorded {succeeded} results");
    }
    assert!(events.iter().any(|e| matches!(&e.event, quorum_store::Event::Note { message } if message.contains("node n2 lost"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_s_late_results_are_ignored_and_a_joiner_gets_work() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // n1's one slot stays busy until n3 has joined, so work is still queued when n3 arrives
    // however slow the machine is.
    let n1 = start("n1", w, &[], true, COOKIE, 0, 1).await;
    n1._server.set_script(held_six_task_script());
    let n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 1500, 2).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let mut feed = n2._server.subscribe();
    let review = {
        let w = w.to_path_buf();
        let api = n1.api.clone().unwrap();
        tokio::spawn(async move { review_via(&api, &w, "out").await })
    };
    first_attempt(&mut feed).await;
    // Freeze n2 past the deadline: n1 declares it lost and reassigns.
    signal(&n2.child, "-STOP");
    wait_alive(&c, &["n1"]).await;
    // A new node joins mid-review and takes work.
    let n3 = start("n3", w, &[&n1.cluster], false, COOKIE, 100, 2).await;
    wait_alive(&c, &["n1", "n3"]).await;
    specialist_requests(&n3._server, 1).await;
    n1._server.release();
    // n2 wakes up and delivers its stale result.
    signal(&n2.child, "-CONT");
    let (_, report) = review.await.unwrap();
    assert_complete_once(&report);
    assert!(
        specialist_nodes(&report).contains(&"n3".to_string()),
        "the node that joined mid-review is credited with no task"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_result_frames_are_all_dropped_has_its_attempts_re_placed_by_lease() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // n2's transport filter drops every result frame it sends, from the start.
    std::fs::write(w.join("faults-n2"), "drop attempt_result\n").unwrap();
    let n1 = start("n1", w, &[], true, COOKIE, 100, 1).await;
    let n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 100, 2).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let (_, report) = review_via(n1.api.as_ref().unwrap(), w, "out").await;
    assert_complete_once(&report);
    // n2 worked (its model server was asked) but none of its results arrived: every task is
    // credited to n1, where the lapsed leases re-placed them.
    assert!(specialist_calls(&n2._server) > 0, "n2 was never given work");
    assert_eq!(specialist_nodes(&report), ["n1"]);
    // n2 stayed a member throughout: the lease, not the heartbeat deadline, re-placed them.
    wait_alive(&c, &["n1", "n2"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_the_wrong_cookie_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let n1 = start("n1", w, &[], true, COOKIE, 100, 1).await;
    let mut bad = start(
        "intruder",
        w,
        &[&n1.cluster],
        false,
        "not-the-cookie",
        100,
        1,
    )
    .await;
    let mut stderr = bad.stderr.take().unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = stderr.next_line().await {
            if line.contains("refused") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the intruder never logged a refusal");
    assert!(refused.contains(&n1.cluster), "{refused}");
    let c = connect(&n1).await;
    let names: Vec<String> = c
        .cluster_status()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert!(!names.contains(&"intruder".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_worker_its_attempt_finishes_not_lost() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let n1 = start("n1", w, &[], true, COOKIE, 300, 1).await;
    let mut n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 1500, 1).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let mut feed = n2._server.subscribe();
    let review = {
        let w = w.to_path_buf();
        let api = n1.api.clone().unwrap();
        tokio::spawn(async move { review_via(&api, &w, "out").await })
    };
    let first = first_attempt(&mut feed).await;
    // Ask n2 to leave while it is mid-attempt: it finishes that attempt, then exits cleanly.
    signal(&n2.child, "-TERM");
    let status = tokio::time::timeout(Duration::from_secs(60), n2.child.wait())
        .await
        .expect("n2 did not exit")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let (_, report) = review.await.unwrap();
    assert_complete_once(&report);
    let t = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == first.as_str())
        .unwrap();
    assert_eq!(
        t["node"], "n2",
        "the drained attempt should have been finished by n2, not redone: {t}"
    );
    assert_eq!(t["attempts"], 1, "{t}");
}

/// A free loopback port for a node that must come back on the same address.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The id of the one review `c`'s node knows, once it has one (bounded).
async fn the_flow(c: &ApiClient) -> String {
    for _ in 0..300 {
        if let Some(r) = c.list().await.unwrap().into_iter().next() {
            return r.flow_id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no review appeared");
}

/// Wait (bounded) until `server` has seen `n` specialist requests.
async fn specialist_requests(server: &ScriptedServer, n: usize) {
    for _ in 0..600 {
        if specialist_calls(server) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server never saw {n} specialist requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_the_accepting_node_restart_it_and_the_followed_review_completes_once() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let api = format!("127.0.0.1:{}", free_port());
    let mut n1 = start_at("n1", w, &[], Some(&api), COOKIE, 400, 1).await;
    let n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 400, 1).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let url = format!("http://{api}");
    let review = {
        let (w, url) = (w.to_path_buf(), url.clone());
        tokio::spawn(async move { review_through(&url, &w, "out").await })
    };
    // Two specialist tasks are done (on either node), then the conductor's node dies.
    let flow_id = the_flow(&c).await;
    for _ in 0..600 {
        if specialist_calls(&n1._server) + specialist_calls(&n2._server) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    n1.child.kill().await.unwrap();
    let _ = n1.child.wait().await;
    // It comes back on the same addresses and data: the review goes on from its facts.
    let n1 = start_at("n1", w, &[&n2.cluster], Some(&api), COOKIE, 400, 1).await;
    let (code, report, stderr) = review.await.unwrap();
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    let report = report.expect("no report written");
    assert_eq!(report["flow_id"], flow_id.as_str());
    assert_complete_once(&report);
    // Every task's success is recorded once: nothing completed before the kill ran again.
    let mut n1 = n1;
    n1.child.kill().await.unwrap();
    let _ = n1.child.wait().await;
    let data = quorum_store::DataDir::new(&n1.data);
    let store = data.open_flow(&flow_id).unwrap();
    let events = store.events().unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e.event, quorum_store::Event::Resumed { .. })));
    for i in 1..=SIX_TASKS {
        let id = format!("t{i}");
        let succeeded = events.iter().filter(|e| matches!(&e.event, quorum_store::Event::AttemptSucceeded { task_id, .. } if *task_id == id)).count();
        assert_eq!(succeeded, 1, "task {id} recorded {succeeded} results");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_through_the_api_stops_the_review_and_the_client_exits_3() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // Specialist answers are held, so the review cannot finish before the cancel arrives.
    let n1 = start("n1", w, &[], true, COOKIE, 0, 1).await;
    let n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 0, 1).await;
    n1._server.set_script(held_six_task_script());
    n2._server.set_script(held_six_task_script());
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let api = n1.api.clone().unwrap();
    let review = {
        let (w, api) = (w.to_path_buf(), api.clone());
        tokio::spawn(async move { review_through(&api, &w, "out").await })
    };
    let flow_id = the_flow(&c).await;
    specialist_requests(&n2._server, 1).await;
    let (code, out, err) =
        parts(&client(&["flows", "cancel", &flow_id, "--cluster", &api], w).await);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("cancelled"), "{out}");
    let seen = (n1._server.requests().len(), n2._server.requests().len());
    let (code, report, stderr) = review.await.unwrap();
    assert_eq!(code, 3, "{stderr}");
    let report = report.expect("no report written");
    assert_eq!(report["status"], "partial");
    assert!(
        report["status_reason"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{}",
        report["status_reason"]
    );
    // No model request started anywhere after the cancel returned.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        (n1._server.requests().len(), n2._server.requests().len()),
        seen,
        "a model request started after the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_status_shows_every_node_with_its_state_and_role() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let n1 = start("n1", w, &[], true, COOKIE, 100, 2).await;
    let _n2 = start("n2", w, &[&n1.cluster], false, COOKIE, 100, 3).await;
    let c = connect(&n1).await;
    wait_alive(&c, &["n1", "n2"]).await;
    let api = n1.api.clone().unwrap();
    let (code, out, err) = parts(
        &client(
            &["cluster", "status", "--cluster", &api, "--format", "json"],
            w,
        )
        .await,
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v}");
    for n in nodes {
        for key in [
            "name",
            "state",
            "voter",
            "leader",
            "capacity",
            "in_flight",
            "models",
            "conducting",
        ] {
            assert!(n.get(key).is_some(), "{key} missing in {n}");
        }
        assert_eq!(n["state"], "up", "{n}");
        assert_eq!(n["models"], serde_json::json!([MODEL]));
    }
    let n2 = nodes.iter().find(|n| n["name"] == "n2").unwrap();
    assert_eq!(n2["capacity"], 3);
    let (code, text, _) = parts(&client(&["cluster", "status", "--cluster", &api], w).await);
    assert_eq!(code, 0);
    assert!(text.contains("n1") && text.contains("n2"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_review_interrupted_by_kill_9_resumes_by_hand() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let mut n1 = start("n1", w, &[], true, COOKIE, 400, 1).await;
    let c = connect(&n1).await;
    let api = n1.api.clone().unwrap();
    let review = {
        let (w, api) = (w.to_path_buf(), api.clone());
        tokio::spawn(async move { review_through(&api, &w, "out").await })
    };
    let flow_id = the_flow(&c).await;
    specialist_requests(&n1._server, 2).await;
    n1.child.kill().await.unwrap();
    let _ = n1.child.wait().await;
    review.abort();
    // Another scripted server stands in for the node's model server.
    let server = ScriptedServer::start(six_task_script(0, false))
        .await
        .unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = w.join("resumed");
    let (code, stdout, stderr) = parts(
        &client(
            &[
                "resume",
                &flow_id,
                "--data-dir",
                n1.data.to_str().unwrap(),
                "--backend",
                &backend,
                "--model",
                MODEL,
                "--out",
                out.to_str().unwrap(),
                "--quiet",
            ],
            w,
        )
        .await,
    );
    assert!(
        code == 0 || code == 1,
        "resume exited {code}: {stdout}{stderr}"
    );
    let report: Value = read_json(&out.join("report.json"));
    assert_complete_once(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_with_a_taken_name_is_refused_saying_so() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let n1 = start("twin", w, &[], true, COOKIE, 100, 1).await;
    // Another workstation (its own data dir) started with the same name.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut dup = start(
        "twin",
        elsewhere.path(),
        &[&n1.cluster],
        false,
        COOKIE,
        100,
        1,
    )
    .await;
    let status = tokio::time::timeout(Duration::from_secs(30), dup.child.wait())
        .await
        .expect("the second node with the same name kept running")
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let mut stderr = dup.stderr.take().unwrap();
    let mut said = String::new();
    while let Ok(Some(line)) = stderr.next_line().await {
        said.push_str(&line);
        said.push('\n');
    }
    assert!(
        said.contains("already in the cluster") && said.contains("--name"),
        "{said}"
    );
    // The first node is untouched.
    let c = connect(&n1).await;
    wait_alive(&c, &["twin"]).await;
}

/// `--verifiers` and `--verify-threshold` travel with a submitted review and bind it on the
/// node: each grounded finding is asked of that many verifiers on the node's model server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifier_flags_travel_with_a_submitted_review() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let solo = start("solo", w, &[], true, COOKIE, 0, 2).await;
    let (code, stdout, stderr) = parts(
        &client(
            &[
                "review",
                fixture("code_project").to_str().unwrap(),
                "--cluster",
                solo.api.as_ref().unwrap(),
                "--out",
                w.join("out").to_str().unwrap(),
                "--quiet",
                "--verifiers",
                "2",
                "--verify-threshold",
                "majority",
            ],
            w,
        )
        .await,
    );
    assert!(code == 0 || code == 1, "{code}: {stdout}\n{stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(w.join("out/report.json")).unwrap()).unwrap();
    assert_complete_once(&report);
    let ledger = report["verification_ledger"].as_array().expect("a ledger");
    assert_eq!(ledger.len(), SIX_TASKS);
    assert!(ledger
        .iter()
        .all(|e| e["threshold"] == "majority" && e["votes"].as_array().unwrap().len() == 2));
    let asked = solo
        ._server
        .requests()
        .iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .count();
    assert_eq!(asked, 2 * SIX_TASKS);
}

/// A lone node goes silent (SIGSTOP) under a followed review and no other node is known: the
/// client says, within its keepalive bound, that the node stopped answering and that it keeps
/// trying, and when the node wakes it follows the review to its report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_node_gone_silent_is_reported_and_followed_again_when_it_wakes() {
    let server = ScriptedServer::start(six_tasks_holding_after(2))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (mut node, api) = start_node(&server, w, "lone").await;
    let out = w.join("out");
    let mut client = command(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--cluster",
            &api,
            "--out",
            out.to_str().unwrap(),
        ],
        w,
    );
    let mut client = client.env("QUORUM_API_TOKEN", NODE_TOKEN).spawn().unwrap();
    let mut said = BufReader::new(client.stderr.take().unwrap()).lines();
    for i in 0.. {
        assert!(i < 1200, "the review never got under way");
        if specialist_calls(&server) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(&node, "-STOP");
    let mut heard = Vec::new();
    let line = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = said.next_line().await.unwrap() {
            if line.contains("stopped answering") {
                return line;
            }
            heard.push(line);
        }
        panic!("the client ended without saying the node went silent: {heard:?}");
    })
    .await
    .expect("the client never noticed the silent node");
    assert!(
        line.contains("no other node is known") && line.contains("retrying"),
        "{line}"
    );
    signal(&node, "-CONT");
    server.release();
    let status = tokio::time::timeout(Duration::from_secs(120), client.wait())
        .await
        .expect("the client never finished")
        .unwrap();
    let code = status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "client exited {code}");
    let report: Value = read_json(&out.join("report.json"));
    assert_complete_once(&report);
    let _ = node.kill().await;
}
