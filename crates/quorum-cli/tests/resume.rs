//! Durable reviews: kill -9 the review process mid-flight, resume it, and check that nothing
//! finished is redone, nothing is lost, and nothing is reported twice.

mod common;

use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TASKS: usize = SIX_TASKS;

/// The six tasks, the first `done` answered at once and the rest held until the server is
/// released (after the kill): the review is killed at exactly `done` completed tasks.
/// `flaky` puts three 500s in front of the specialists.
fn script(done: usize, flaky: bool) -> Script {
    let mut s = six_tasks_holding_after(done);
    if flaky {
        s.rules.insert(
            2,
            Rule::new("flaky")
                .when_system(["You are security_sentinel"])
                .reply(Reply::status(500))
                .times(3),
        );
    }
    s
}

fn only_flow(data: &Path) -> String {
    let mut ids: Vec<String> = std::fs::read_dir(data.join("flows"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids.pop().unwrap()
}

struct Crashed {
    work: tempfile::TempDir,
    target: PathBuf,
    data: PathBuf,
    flow_id: String,
    completed_before_kill: Vec<String>,
    requests_before_kill: usize,
}

/// Start a review, kill -9 it once `after` specialist tasks have completed (the server holds
/// every later answer), then let the server answer again for the resume.
async fn review_then_kill(server: &ScriptedServer, after: usize) -> Crashed {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("target");
    copy_dir(&fixture("code_project"), &target);
    let data = work.path().join("data");
    let backend = format!("ollama={}", server.ollama_url());
    let mut feed = server.subscribe();
    let mut child = command(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--max-concurrent",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            work.path().join("out1").to_str().unwrap(),
        ],
        work.path(),
    )
    .spawn()
    .unwrap();
    // With one task at a time, the request for the (after+1)-th task means `after` finished;
    // that request is held, so nothing more finishes before the kill.
    let mut seen = std::collections::BTreeSet::new();
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if let Some(t) = task_of(&r) {
                seen.insert(t);
                if seen.len() > after {
                    break;
                }
            }
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the review never reached task {}",
        after + 1
    );
    child.kill().await.unwrap(); // SIGKILL
    let _ = child.wait().await;
    let requests_before_kill = server.requests().len();
    server.release();
    let flow_id = only_flow(&data);
    // What the store says was completed at the moment of the kill.
    let store = quorum_store::DataDir::new(&data)
        .open_flow(&flow_id)
        .unwrap();
    let replay = store.replay().unwrap();
    assert_eq!(quorum_store::status_of(&replay).to_string(), "interrupted");
    let completed_before_kill: Vec<String> = replay
        .completed
        .keys()
        .filter(|k| k.starts_with('t'))
        .cloned()
        .collect();
    drop(store);
    assert!(
        completed_before_kill.len() >= after,
        "{completed_before_kill:?}"
    );
    Crashed {
        work,
        target,
        data,
        flow_id,
        completed_before_kill,
        requests_before_kill,
    }
}

async fn resume(c: &Crashed, server: &ScriptedServer) -> (i32, Value, Vec<RecordedRequest>) {
    resume_with(c, server, &["resume", &c.flow_id]).await
}

/// Resume by running `review PATH --resume` on the same target instead of naming the flow.
async fn resume_by_review(
    c: &Crashed,
    server: &ScriptedServer,
) -> (i32, Value, Vec<RecordedRequest>) {
    resume_with(
        c,
        server,
        &["review", c.target.to_str().unwrap(), "--resume"],
    )
    .await
}

async fn resume_with(
    c: &Crashed,
    server: &ScriptedServer,
    head: &[&str],
) -> (i32, Value, Vec<RecordedRequest>) {
    let backend = format!("ollama={}", server.ollama_url());
    let out = c.work.path().join("out2");
    let mut args: Vec<&str> = head.to_vec();
    args.extend_from_slice(&[
        "--data-dir",
        c.data.to_str().unwrap(),
        "--backend",
        &backend,
        "--out",
        out.to_str().unwrap(),
    ]);
    let o = quorum(&args, c.work.path()).await;
    let code = o.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "resume failed ({code}): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = read_json(&out.join("report.json"));
    let after: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .skip(c.requests_before_kill)
        .collect();
    (code, report, after)
}

fn assert_resumed_correctly(c: &Crashed, report: &Value, after: &[RecordedRequest]) {
    // Zero requests for tasks completed before the kill; no re-plan; no second scout.
    for r in after {
        if let Some(t) = task_of(r) {
            assert!(
                !c.completed_before_kill.contains(&t),
                "completed task {t} was re-run after resume"
            );
        }
        assert!(
            !r.system.contains("You are the planner"),
            "the plan was re-made"
        );
        assert!(
            !r.system.contains("You are the scout"),
            "the scout was re-run"
        );
    }
    // Every finding, exactly once.
    assert_eq!(report["status"], "completed", "{}", report["status_reason"]);
    let titles: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    let mut unique = titles.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        titles.len(),
        "duplicated findings: {titles:?}"
    );
    assert_eq!(titles.len(), TASKS, "{titles:?}");
    // Every task is in the report, completed, once.
    let tasks: Vec<&Value> = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"].as_str().unwrap().starts_with('t'))
        .collect();
    assert_eq!(tasks.len(), TASKS);
    assert!(tasks.iter().all(|t| t["status"] == "completed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_then_resume_redoes_nothing_and_loses_nothing() {
    let server = ScriptedServer::start(script(3, false)).await.unwrap();
    let crashed = review_then_kill(&server, 3).await;

    // `flows list` sees it as interrupted; a new review of the same target says so.
    let o = quorum(
        &[
            "flows",
            "list",
            "--data-dir",
            crashed.data.to_str().unwrap(),
        ],
        crashed.work.path(),
    )
    .await;
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(
        list.contains(&crashed.flow_id) && list.contains("interrupted"),
        "{list}"
    );

    let (_, report, after) = resume(&crashed, &server).await;
    assert_resumed_correctly(&crashed, &report, &after);
    assert_eq!(report["flow_id"], crashed.flow_id.as_str());

    // Finished now; resuming again re-emits the stored report without model calls.
    let before = server.requests().len();
    let o = quorum(
        &[
            "resume",
            &crashed.flow_id,
            "--data-dir",
            crashed.data.to_str().unwrap(),
        ],
        crashed.work.path(),
    )
    .await;
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already finished"),
        "code {:?} stdout {} stderr {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(server.requests().len(), before);

    // The trace export has one line per recorded attempt.
    let trace = crashed.work.path().join("trace.jsonl");
    let o = quorum(
        &[
            "trace",
            "export",
            &crashed.flow_id,
            "--data-dir",
            crashed.data.to_str().unwrap(),
            "--out",
            trace.to_str().unwrap(),
        ],
        crashed.work.path(),
    )
    .await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= TASKS + 3, "{}", lines.len());
    assert!(lines.iter().all(|l| l["conversations"].is_array()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_a_flaky_server_then_resume() {
    let server = ScriptedServer::start(script(2, true)).await.unwrap();
    let crashed = review_then_kill(&server, 2).await;
    // This time through `review PATH --resume`, which finds the interrupted flow by target.
    let (_, report, after) = resume_by_review(&crashed, &server).await;
    assert_resumed_correctly(&crashed, &report, &after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_target_after_a_crash_does_not_change_what_is_reviewed() {
    let server = ScriptedServer::start(script(2, false)).await.unwrap();
    let crashed = review_then_kill(&server, 2).await;
    // Rewrite and delete files the remaining tasks will read.
    std::fs::write(
        crashed.target.join("src/utils.py"),
        "# rewritten after the crash\n",
    )
    .unwrap();
    std::fs::remove_file(crashed.target.join("src/auth.py")).unwrap();
    std::fs::write(crashed.target.join("src/new.py"), "print('new')\n").unwrap();
    let (_, report, after) = resume(&crashed, &server).await;
    assert_resumed_correctly(&crashed, &report, &after);
    for r in &after {
        assert!(
            !r.text.contains("rewritten after the crash"),
            "the resumed review read the changed directory"
        );
        assert!(!r.text.contains("src/new.py"));
    }
    // Findings on the deleted/rewritten files were grounded against the snapshot.
    let files: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"src/auth.py") && files.contains(&"src/utils.py"),
        "{files:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_store_is_reported_not_reset() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let flow = data.join("flows/20260101-000000-abcdef");
    std::fs::create_dir_all(flow.join("db")).unwrap();
    std::fs::write(flow.join("db/conf"), b"garbage garbage garbage").unwrap();
    std::fs::write(flow.join("db/db"), b"garbage").unwrap();
    let o = quorum(
        &[
            "resume",
            "20260101-000000-abcdef",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("corrupt") && err.contains("20260101-000000-abcdef"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(flow.join("db/db")).unwrap(),
        b"garbage",
        "the store was reset"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_cancel_stops_a_review_running_in_another_process() {
    // Every specialist answer is held (never released): the review is mid-call when the cancel
    // comes, however fast the machine.
    let server = ScriptedServer::start(six_tasks_holding_after(0))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let mut feed = server.subscribe();
    let child = command(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
    )
    .spawn()
    .unwrap();
    // Once a specialist is mid-call, cancel from another process.
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if task_of(&r).is_some() {
                return;
            }
        }
    })
    .await
    .expect("no specialist started");
    let flow_id = only_flow(&data);
    let cancel = quorum(
        &[
            "flows",
            "cancel",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    let said = String::from_utf8_lossy(&cancel.stdout).to_string();
    assert_eq!(
        cancel.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&cancel.stderr)
    );
    assert!(said.contains("cancelled"), "{said}");
    let seen = server.requests().len();
    let o = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the review did not stop")
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = read_json(&out.join("report.json"));
    assert_eq!(report["status"], "partial");
    assert!(report["status_reason"]
        .as_str()
        .unwrap()
        .contains("cancelled"));
    assert_eq!(
        server.requests().len(),
        seen,
        "a model request started after cancel"
    );
    // The stored review reads as finished (partial) and is not resumable.
    let again = quorum(
        &[
            "flows",
            "cancel",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    assert!(String::from_utf8_lossy(&again.stdout).contains("already finished"));
}
