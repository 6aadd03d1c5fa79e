//! Memory across reviews with the `quorum` binary: a review leaves its verified findings as
//! insights in the data dir; the next review of the same target offers them to its planner,
//! delimited and with their provenance, and says so in report.json; a review of another
//! target is offered nothing; `quorum flows gc` prunes them and says how many.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::path::Path;

const EARLIER: &str = "## Insights from earlier reviews";

/// `quorum review TARGET` against `server`, its reports in `out`, quietly.
fn review_args(target: &Path, server: &ScriptedServer, out: &Path) -> Vec<String> {
    let backend = format!("ollama={}", server.ollama_url());
    [
        "review",
        target.to_str().unwrap(),
        "--backend",
        &backend,
        "--model",
        MODEL,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]
    .map(String::from)
    .to_vec()
}

/// Review `target` against a fresh scripted server; the planner's prompt and report.json.
async fn review(work: &Path, target: &Path, out: &str) -> (String, Value) {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let out = work.join(out);
    let args = review_args(target, &server, &out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = quorum(&args, work).await;
    assert_eq!(o.status.code(), Some(1), "findings at P1: {}", text(&o));
    let planner = server
        .requests()
        .into_iter()
        .find(|r| r.system.contains("You are the planner"))
        .expect("a planner request")
        .last_user;
    let json: Value = read_json(&out.join("report.json"));
    (planner, json)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_review_of_a_target_offers_its_planner_the_earlier_insights() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    copy_dir(&fixture("code_project"), &target);
    let other = work.path().join("other");
    copy_dir(&fixture("code_project"), &other);

    // First review: nothing to offer; its verified findings are kept.
    let (planner, first) = review(work.path(), &target, "out1").await;
    assert!(!planner.contains(EARLIER), "{planner}");
    let first_flow = first["flow_id"].as_str().unwrap().to_string();
    assert!(first["insights"]["offered"].as_array().unwrap().is_empty());
    let recorded = first["insights"]["recorded"].as_u64().unwrap();
    assert!(recorded > 0, "{}", first["insights"]);
    let md = std::fs::read_to_string(work.path().join("out1/report.md")).unwrap();
    assert!(md.contains(&format!(
        "{recorded} insights from this review's verified findings"
    )));

    // Second review of the same target: the planner is offered them, delimited, with the
    // first review as their provenance.
    let (planner, second) = review(work.path(), &target, "out2").await;
    let section = planner
        .split(EARLIER)
        .nth(1)
        .unwrap_or_else(|| panic!("no earlier insights in the planner's prompt:\n{planner}"));
    assert!(
        section.contains("<<<BEGIN UNTRUSTED insight I-"),
        "{section}"
    );
    assert!(
        section.contains("SQL injection in item search"),
        "{section}"
    );
    assert!(
        section.contains(&format!("from review {first_flow}")),
        "{section}"
    );
    // The fabricated finding was dropped by grounding: never remembered.
    assert!(
        !section.contains("Command injection via os.system"),
        "{section}"
    );
    let offered = second["insights"]["offered"].as_array().unwrap();
    assert!(!offered.is_empty());
    assert!(offered
        .iter()
        .all(|o| o["from_flow"] == first_flow.as_str()));
    assert!(offered
        .iter()
        .any(|o| o["title"] == "SQL injection in item search" && o["score"].as_f64() > Some(0.5)));
    let md = std::fs::read_to_string(work.path().join("out2/report.md")).unwrap();
    assert!(
        md.contains(&format!("insights from earlier reviews ({first_flow})")),
        "{md}"
    );

    // Another target shares the data dir, not the memory.
    let (planner, third) = review(work.path(), &other, "out3").await;
    assert!(!planner.contains(EARLIER), "{planner}");
    assert!(third["insights"]["offered"].as_array().unwrap().is_empty());

    // gc prunes insights older than DAYS (0: all of them) and says how many.
    let o = quorum(&["flows", "gc", "--older-than", "0"], work.path()).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let pruned: u64 = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("pruned ")?
                .strip_suffix(" insights")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no pruned count: {stdout}"));
    assert!(pruned >= recorded, "{stdout}");
    let (planner, _) = review(work.path(), &target, "out4").await;
    assert!(
        !planner.contains(EARLIER),
        "pruned insights came back:\n{planner}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_memory_neither_keeps_nor_offers() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    copy_dir(&fixture("code_project"), &target);
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    for out in ["a", "b"] {
        let out = work.path().join(out);
        let o = quorum(
            &[
                "review",
                target.to_str().unwrap(),
                "--backend",
                &backend,
                "--model",
                MODEL,
                "--out",
                out.to_str().unwrap(),
                "--quiet",
                "--no-memory",
            ],
            work.path(),
        )
        .await;
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let json: Value = read_json(&out.join("report.json"));
        assert!(json.get("insights").is_none(), "{}", json["insights"]);
    }
    assert!(server
        .requests()
        .iter()
        .all(|r| !r.text.contains("## Insights from")));
}

/// The reviews a node conducts remember too: a second `--cluster` review of the same target is
/// offered the first one's insights on the node, and `--no-memory` travels with a submission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_offers_a_submitted_review_the_insights_of_the_last_one_of_its_target() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    copy_dir(&fixture("code_project"), &target);
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let (mut node, api) = start_node(&server, work.path(), "mem-node").await;
    let submit = |out: &str, extra: &[&str]| {
        let mut args: Vec<String> = [
            "review",
            target.to_str().unwrap(),
            "--cluster",
            &api,
            "--out",
            work.path().join(out).to_str().unwrap(),
            "--quiet",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let work = work.path().to_path_buf();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = client(&args, &work).await;
            assert_eq!(o.status.code(), Some(1), "{}", text(&o));
            let json: Value = read_json(&work.join(out_name(&args)).join("report.json"));
            json
        }
    };
    let planners = |server: &ScriptedServer| -> Vec<String> {
        server
            .requests()
            .into_iter()
            .filter(|r| r.system.contains("You are the planner"))
            .map(|r| r.last_user)
            .collect()
    };
    let first = submit("c1", &[]).await;
    let first_flow = first["flow_id"].as_str().unwrap().to_string();
    assert!(
        first["insights"]["recorded"].as_u64().unwrap() > 0,
        "{}",
        first["insights"]
    );
    let second = submit("c2", &[]).await;
    let p = planners(&server);
    assert_eq!(p.len(), 2);
    assert!(!p[0].contains(EARLIER), "{}", p[0]);
    let section = p[1]
        .split(EARLIER)
        .nth(1)
        .unwrap_or_else(|| panic!("the node offered nothing:\n{}", p[1]));
    assert!(
        section.contains(&format!("from review {first_flow}")),
        "{section}"
    );
    assert!(second["insights"]["offered"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["from_flow"] == first_flow.as_str()));
    // --no-memory travels: nothing offered.
    let third = submit("c3", &["--no-memory"]).await;
    assert!(third.get("insights").is_none(), "{}", third["insights"]);
    assert!(!planners(&server)[2].contains(EARLIER));
    let _ = node.kill().await;
}

/// The `--out` directory of a review's arguments.
fn out_name(args: &[&str]) -> String {
    let i = args.iter().position(|a| *a == "--out").unwrap();
    args[i + 1].to_string()
}

/// Two local reviews on one data dir at once: the second is offered the earlier insights while
/// the first still runs (the first holds the node store only to read and, at its end, write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_review_while_the_first_runs_is_still_offered_the_earlier_insights() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let target = w.join("target");
    copy_dir(&fixture("code_project"), &target);
    let _ = review(w, &target, "earliest").await;

    // The first review: every specialist answer held, so it runs until released.
    let held = ScriptedServer::start(six_tasks_holding_after(0))
        .await
        .unwrap();
    let args = review_args(&target, &held, &w.join("first"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = command(&args, w).spawn().unwrap();
    for i in 0.. {
        assert!(i < 2400, "the first review never reached its specialists");
        if held.requests().iter().any(|r| task_of(r).is_some()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }

    let (planner, _) = review(w, &target, "second").await;
    assert!(
        planner.contains(EARLIER),
        "the second review was offered nothing while the first ran:\n{planner}"
    );

    held.release();
    let status = tokio::time::timeout(std::time::Duration::from_secs(120), first.wait())
        .await
        .expect("the first review never finished")
        .unwrap();
    assert!(matches!(status.code(), Some(0 | 1)), "{status:?}");
}
