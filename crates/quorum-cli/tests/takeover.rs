//! No single point of failure: three voters and one learner as real `quorum node` processes
//! with `--voters`, each with its own scripted model server. The conducting node is killed -9
//! (or SIGSTOPped past the election timeout) mid-review; a survivor takes the review over from
//! the replicated facts and the followed review completes, with no completed task asked again.

mod common;

use common::voters::{
    cluster, completed_on, connect, requests_per_task, review_under_way, under_way, Node,
};
use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// WatchReview on `node` until the stream ends: the specialist tasks it saw finish and the
/// final status, if the stream carried one.
async fn watch_to_the_end(
    node: &Node,
    flow_id: &str,
) -> tokio::task::JoinHandle<(BTreeSet<String>, Option<String>)> {
    use tokio_stream::StreamExt;
    let c = connect(node).await;
    let mut events = None;
    // The learner's replica may lag the leader by a few entries.
    for _ in 0..600 {
        if let Ok(e) = c.watch(flow_id).await {
            events = Some(e);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut events = events.unwrap_or_else(|| panic!("{} never let us watch {flow_id}", node.name));
    tokio::spawn(async move {
        let mut done = BTreeSet::new();
        while let Some(Ok(ev)) = events.next().await {
            let v: Value = serde_json::from_str(&ev.json).unwrap_or_default();
            if ev.kind == quorum_api::FINISHED_KIND {
                return (done, v["status"].as_str().map(str::to_string));
            }
            if ev.kind == "task_finished" && v["ok"] == true {
                let task = v["task"].as_str().unwrap_or_default();
                if task.starts_with('t') {
                    done.insert(task.to_string());
                }
            }
        }
        (done, None)
    })
}

fn urls(nodes: &[Node]) -> String {
    nodes[..3]
        .iter()
        .map(|n| n.api.clone())
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_the_conducting_node_and_a_survivor_completes_the_review() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let mut nodes = cluster(&w).await;
    let mut follow = {
        let (urls, w) = (urls(&nodes), w.clone());
        tokio::spawn(async move { review_through(&urls, &w, "out").await })
    };
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;
    // A watcher on the learner, which never conducts: its stream outlives the conductor.
    let watcher = watch_to_the_end(&nodes[3], &flow_id).await;

    // Every attempt is one model request here, so a request after the kill is a new attempt.
    let asked_of_survivors: BTreeSet<String> = requests_per_task(&nodes[1..]).into_keys().collect();
    let before: usize = requests_per_task(&nodes[1..]).values().sum();
    let killed = std::time::Instant::now();
    nodes[0].child.kill().await.unwrap();
    let _ = nodes[0].child.wait().await;
    // The survivors' model servers answer again: what the conductor had asked of them, and
    // what the survivor that takes over asks.
    for n in &nodes[1..] {
        n.server.release();
    }
    let done_before = completed_on(&nodes[0].data, &flow_id);
    let mut first_new_attempt = None;
    for _ in 0..1200 {
        if requests_per_task(&nodes[1..]).values().sum::<usize>() > before {
            first_new_attempt = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A figure for the notes, not an assertion: heartbeat deadline 1 s, election 1-2 s.
    eprintln!(
        "takeover: conductor killed -> first new attempt on a survivor after {first_new_attempt:?}"
    );
    assert!(done_before.len() >= 2, "{done_before:?}");
    // Exactly the two tasks that could answer were done when the conductor died.
    assert_eq!(
        done_before,
        BTreeSet::from(["t1".to_string(), "t2".to_string()])
    );

    let (code, report, stderr) = follow.await.unwrap();
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    let report = report.expect("no report written");
    assert_eq!(report["flow_id"], flow_id.as_str());
    assert_complete_once(&report);
    // A survivor conducted the end of the review: the synthesizer runs on the conductor.
    let synth = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["persona"] == "synthesizer")
        .expect("a synthesizer task");
    assert!(
        ["n2", "n3"].contains(&synth["node"].as_str().unwrap()),
        "{synth}"
    );
    // The learner's watcher saw every task finish and the review end, across the takeover.
    let (finished_tasks, end) = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .expect("the watcher on the learner never ended")
        .unwrap();
    assert_eq!(end.as_deref(), Some("completed"), "{finished_tasks:?}");
    assert_eq!(finished_tasks.len(), SIX_TASKS, "{finished_tasks:?}");
    // Any surviving node answers for the finished review from the replicated facts.
    for n in &nodes[1..3] {
        let c = connect(n).await;
        let mut got = None;
        for _ in 0..600 {
            if let Ok(r) = c.report(&flow_id).await {
                got = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let r = got.unwrap_or_else(|| panic!("{} has no report", n.name));
        let v: Value = serde_json::from_str(&r.report_json).unwrap();
        assert_valid_report(&v, Path::new(&format!("{}'s API report", n.name)));
        assert_eq!(v["flow_id"], flow_id.as_str(), "{}", n.name);
        assert_eq!(v["findings"], report["findings"], "{}", n.name);
    }
    // Nothing completed before the kill was asked of a model again.
    let per_task = requests_per_task(&nodes);
    for t in &done_before {
        assert_eq!(
            per_task.get(t),
            Some(&1),
            "task {t} asked again: {per_task:?}"
        );
    }
    // Adopted, not wasted: what the survivors' workers were still asking their models for the
    // dead conductor counts for the node that took the review over — none of it is asked again.
    let in_flight: Vec<&String> = asked_of_survivors.difference(&done_before).collect();
    let re_asked: Vec<&&String> = in_flight
        .iter()
        .filter(|t| per_task.get(**t) != Some(&1))
        .collect();
    eprintln!(
        "adoption: {} specialist attempts in flight on survivors at the kill, {} re-asked",
        in_flight.len(),
        re_asked.len()
    );
    assert!(
        !in_flight.is_empty(),
        "nothing ran on a survivor: {per_task:?}"
    );
    // Under a loaded machine a claim can miss its window (the worker's replica late, its result
    // retried past the takeover): that attempt is fenced and asked again, as before adoption.
    // All of them asked again means adoption did not happen at all.
    assert!(
        re_asked.len() < in_flight.len(),
        "none adopted, all asked again: {re_asked:?} of {per_task:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_stopped_past_the_election_timeout_steps_down_when_it_wakes() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let nodes = cluster(&w).await;
    let mut follow = {
        let (urls, w) = (urls(&nodes), w.clone());
        tokio::spawn(async move { review_through(&urls, &w, "out").await })
    };
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;

    signal(&nodes[0].child, "-STOP");
    // Another node takes the review over (it says so in its cluster status).
    let c2 = connect(&nodes[1]).await;
    let mut taken = None;
    for _ in 0..1200 {
        let st = c2.cluster_status().await.unwrap();
        taken = st
            .iter()
            .find(|n| n.alive && n.name != "n1" && n.conducting.contains(&flow_id))
            .map(|n| n.name.clone());
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = taken.expect("nobody took the review over");
    // Every model server answers again — n1's own too, so that n1, woken, has a result to
    // commit and learns it was fenced — then n1 wakes.
    for n in &nodes {
        n.server.release();
    }
    signal(&nodes[0].child, "-CONT");

    let (code, report, stderr) = follow.await.unwrap();
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    let report = report.expect("no report written");
    assert_complete_once(&report);

    // Woken, n1 no longer conducts the review: asked for it, it tells the review the cluster
    // decided, from the replicated facts — every specialist task done once and the end
    // completed — not its own fenced run, which never saw the survivors' tasks finish.
    use tokio_stream::StreamExt;
    let c1 = connect(&nodes[0]).await;
    let mut told = (BTreeMap::new(), None);
    for _ in 0..600 {
        let mut done: BTreeMap<String, usize> = BTreeMap::new();
        let mut end = None;
        if let Ok(Ok(mut events)) =
            tokio::time::timeout(Duration::from_secs(5), c1.watch(&flow_id)).await
        {
            while let Ok(Some(Ok(ev))) =
                tokio::time::timeout(Duration::from_secs(5), events.next()).await
            {
                let v: Value = serde_json::from_str(&ev.json).unwrap_or_default();
                if ev.kind == quorum_api::FINISHED_KIND {
                    end = v["status"].as_str().map(str::to_string);
                    break;
                }
                let task = v["task"].as_str().unwrap_or_default();
                if ev.kind == "task_finished" && v["ok"] == true && task.starts_with('t') {
                    *done.entry(task.to_string()).or_insert(0) += 1;
                }
            }
        }
        told = (done, end);
        if told.0.len() == SIX_TASKS && told.1.as_deref() == Some("completed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        told.1.as_deref(),
        Some("completed"),
        "n1 still answers from its own run"
    );
    assert_eq!(told.0.len(), SIX_TASKS, "{:?}", told.0);
    assert!(told.0.values().all(|n| *n == 1), "{:?}", told.0);
    // Its advert stops listing the review too (adverts refresh every 500 ms).
    let mut listed = true;
    for _ in 0..600 {
        let st = c2.cluster_status().await.unwrap();
        listed = st
            .iter()
            .any(|n| n.name == "n1" && n.conducting.contains(&flow_id));
        if !listed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!listed, "n1 still advertises the review");
    assert_ne!(taken, "n1");
    let per_task = requests_per_task(&nodes);
    assert!(per_task.values().all(|n| *n <= 2), "{per_task:?}");
    assert_eq!(nodes[0].name, "n1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_isolating_the_conductor_moves_the_review_to_the_majority() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let mut nodes = cluster(&w).await;
    let mut follow = {
        let (urls, w) = (urls(&nodes), w.clone());
        tokio::spawn(async move { review_through(&urls, &w, "out").await })
    };
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;

    // The transport filter cuts n1 (the conductor) off from every peer, both ways; the API
    // stays reachable, so the client keeps talking to whichever node answers.
    let others: Vec<&str> = nodes[1..].iter().map(|n| n.name.as_str()).collect();
    std::fs::write(
        w.join("faults-n1"),
        others
            .iter()
            .map(|n| format!("partition {n}\n"))
            .collect::<String>(),
    )
    .unwrap();
    for n in &others {
        std::fs::write(w.join(format!("faults-{n}")), "partition n1\n").unwrap();
    }

    // The majority side takes the review over.
    let c2 = connect(&nodes[1]).await;
    let mut taken = None;
    for _ in 0..1200 {
        let st = c2.cluster_status().await.unwrap();
        taken = st
            .iter()
            .find(|n| n.name != "n1" && n.conducting.contains(&flow_id))
            .map(|n| n.name.clone());
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = taken.expect("the majority never took the review over");
    // Every model server answers again: the majority finishes the review, and n1, cut off,
    // gets its own attempt's result and cannot commit it.
    for n in &nodes {
        n.server.release();
    }

    let (code, report, stderr) = follow.await.unwrap();
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    let report = report.expect("no report written");
    assert_eq!(report["flow_id"], flow_id.as_str());
    assert_complete_once(&report);
    let synth = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["persona"] == "synthesizer")
        .expect("a synthesizer task");
    assert_ne!(
        synth["node"], "n1",
        "the minority side finished the review: {synth}"
    );

    // Cut off, n1 cannot know whether the voters it lost are dead or only out of reach: it
    // waits for them (and says so), and the client, told so, found the review with the
    // majority, whose side has a leader and sees n1 lost.
    assert!(
        stderr.contains("quorum: waiting for a majority of voters (up: n1; lost: n2, n3)"),
        "{stderr}"
    );
    // Healed, n1 finds its facts refused (the review moved on at a later epoch) and stops
    // conducting: its own view no longer lists the review.
    std::fs::write(w.join("faults-n1"), "").unwrap();
    for n in &others {
        std::fs::write(w.join(format!("faults-{n}")), "").unwrap();
    }
    let c1 = connect(&nodes[0]).await;
    let mut still = true;
    for _ in 0..600 {
        let st = c1.cluster_status().await.unwrap();
        still = st
            .iter()
            .any(|n| n.name == "n1" && n.conducting.contains(&flow_id));
        if !still {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !still,
        "n1 still conducts the review on its side of the partition"
    );
    assert_ne!(taken, "n1");
    // What n1 completed (committed) before the partition was never asked of a model again. Its
    // store can be read once it is gone; after the cut it could commit nothing more.
    nodes[0].child.kill().await.unwrap();
    let _ = nodes[0].child.wait().await;
    let done_before = completed_on(&nodes[0].data, &flow_id);
    assert!(
        !done_before.is_empty(),
        "nothing was done before the partition"
    );
    let per_task = requests_per_task(&nodes);
    for t in &done_before {
        assert_eq!(
            per_task.get(t),
            Some(&1),
            "task {t} asked again: {per_task:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_cluster_down_a_node_that_never_conducted_resumes_the_review_by_hand() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let mut nodes = cluster(&w).await;
    let mut follow = {
        let (urls, w) = (urls(&nodes), w.clone());
        tokio::spawn(async move { review_through(&urls, &w, "out").await })
    };
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;
    // n2 has the facts agreed so far: wait (bounded) until its replica holds two results.
    let c2 = connect(&nodes[1]).await;
    let mut seen = BTreeSet::new();
    {
        use tokio_stream::StreamExt;
        let mut events = c2.watch(&flow_id).await.unwrap();
        while let Some(Ok(ev)) = tokio::time::timeout(Duration::from_secs(60), events.next())
            .await
            .expect("n2's replica never showed two results")
        {
            let v: Value = serde_json::from_str(&ev.json).unwrap_or_default();
            if ev.kind == "task_finished" && v["ok"] == true {
                seen.insert(v["task"].as_str().unwrap_or_default().to_string());
            }
            if seen.iter().filter(|t| t.starts_with('t')).count() >= 2 {
                break;
            }
        }
    }
    // Everything stops at once.
    let before_kill = requests_per_task(&nodes[1..2]);
    for n in &mut nodes {
        n.child.kill().await.unwrap();
        let _ = n.child.wait().await;
    }
    follow.abort();
    assert!(
        quorum_store::DataDir::new(&nodes[1].data)
            .open_flow(&flow_id)
            .is_err(),
        "n2 conducted the review, so this would not test a node that never did"
    );

    // n2's model server stands in for the cluster's: it answers everything now.
    nodes[1].server.release();
    let out = w.join("resumed");
    let o = quorum(
        &[
            "resume",
            &flow_id,
            "--data-dir",
            nodes[1].data.to_str().unwrap(),
            "--backend",
            &format!("ollama={}", nodes[1].server.ollama_url()),
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &w,
    )
    .await;
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{stderr}"
    );
    assert!(
        stderr.contains("rebuilt from this node's replica"),
        "{stderr}"
    );
    let report: Value = read_json(&out.join("report.json"));
    assert_eq!(report["flow_id"], flow_id.as_str());
    assert_complete_once(&report);
    // What the replica had recorded as done was not asked again: the resume used only n2's
    // model server, and it saw no new request for those tasks.
    let after = requests_per_task(&nodes[1..2]);
    for t in seen.iter().filter(|t| t.starts_with('t')) {
        assert_eq!(
            after.get(t),
            before_kill.get(t),
            "task {t} asked again on resume: {before_kill:?} -> {after:?}"
        );
    }
}

/// The conductor is SIGSTOPped and stays stopped: no reset ever reaches the client, whose
/// stream from it just goes quiet. The client notices (its pings go unanswered), follows the
/// review on a node it only learned from the cluster's status at submit time, gets the report
/// while the conductor is still frozen, and shows each task's end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_given_only_the_frozen_conductor_follows_the_review_elsewhere_to_its_report() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let nodes = cluster(&w).await;
    let out = w.join("out");
    let events = w.join("events.jsonl");
    let mut follow = {
        let (n1, w, out, events) = (nodes[0].api.clone(), w.clone(), out.clone(), events.clone());
        tokio::spawn(async move {
            let o = client(
                &[
                    "review",
                    fixture("code_project").to_str().unwrap(),
                    "--cluster",
                    &n1,
                    "--out",
                    out.to_str().unwrap(),
                    "--events",
                    events.to_str().unwrap(),
                ],
                &w,
            )
            .await;
            let report = std::fs::read_to_string(out.join("report.json"))
                .ok()
                .map(|s| serde_json::from_str(&s).unwrap());
            (code(&o), report, stderr(&o))
        })
    };
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;

    signal(&nodes[0].child, "-STOP");
    let frozen = std::time::Instant::now();
    for n in &nodes {
        n.server.release();
    }
    let (code, report, stderr) = follow.await.unwrap();
    let took = frozen.elapsed();
    // Still frozen: the report came from the survivors alone.
    signal(&nodes[0].child, "-CONT");
    eprintln!("report {took:?} after the conductor froze");
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    assert_complete_once(&report.expect("no report written"));
    assert!(
        stderr.contains(&format!("following review {flow_id} on "))
            && stderr.contains("(listed by the cluster at submit time)")
            && stderr.contains(&format!(
                "{} stopped answering",
                nodes[0].api.trim_end_matches('/')
            )),
        "the client did not say where it followed the review: {stderr}"
    );

    // The event log: every specialist task's successful end exactly once, although two nodes
    // each told the review from its start.
    let mut finished: BTreeMap<String, usize> = BTreeMap::new();
    for line in std::fs::read_to_string(&events).unwrap().lines() {
        let v: Value = serde_json::from_str(line).expect("an event log line is JSON");
        if v["event"] == "task_finished" && v["ok"] == true {
            let task = v["task"].as_str().unwrap_or_default();
            if task.starts_with('t') {
                *finished.entry(task.to_string()).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(finished.len(), SIX_TASKS, "{finished:?}");
    assert!(finished.values().all(|n| *n == 1), "{finished:?}");
}

/// The same silent conductor, followed by the two other long-lived readers a user holds: a
/// `flows show --watch` and an MCP agent's review. Both were given only the conductor's URL;
/// both end with the report while it is still frozen, and the agent's progress counts each
/// task once although two nodes told it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_and_an_mcp_follower_leave_a_frozen_conductor_the_same_way() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let nodes = cluster(&w).await;
    let n1 = nodes[0].api.clone();
    let mut agent = common::mcp::spawn_mcp(&w, &["--cluster", &n1]).await;
    agent.initialize().await;
    let started = agent
        .tool(
            "review_start",
            serde_json::json!({"path": fixture("code_project").to_str().unwrap()}),
        )
        .await
        .unwrap();
    let flow_id = started["flow_id"].as_str().unwrap().to_string();
    let _ = under_way(&nodes, 2).await;
    let events = w.join("watched.jsonl");
    let watcher = {
        let (n1, w, id, events) = (n1.clone(), w.clone(), flow_id.clone(), events.clone());
        tokio::spawn(async move {
            let events = events.to_str().unwrap();
            client(
                &[
                    "flows",
                    "show",
                    &id,
                    "--watch",
                    "--cluster",
                    &n1,
                    "--events",
                    events,
                ],
                &w,
            )
            .await
        })
    };
    // The watcher is following n1 before n1 freezes: it has written the tasks done so far.
    let mut following = false;
    for _ in 0..1200 {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        if log.matches(r#""event":"task_finished""#).count() >= 2 {
            following = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(following, "the watcher never followed the review");

    signal(&nodes[0].child, "-STOP");
    for n in &nodes {
        n.server.release();
    }
    let watched = watcher.await.unwrap();
    let status = agent.until_done(&flow_id).await;
    signal(&nodes[0].child, "-CONT");

    let (code, out, err) = parts(&watched);
    assert_eq!(code, 0, "the watcher failed: {err}");
    assert!(out.contains("status:    completed"), "{out}");
    assert!(
        err.contains(&format!("following review {flow_id} on "))
            && err.contains("(listed by the cluster at submit time)"),
        "the watcher did not say where it followed the review: {err}"
    );
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(
        status["tasks_done"], SIX_TASKS,
        "each task's end counted once across the switch: {status}"
    );
    let _ = agent.child.kill().await;
}

/// With two of the three voters killed, the conductor cannot commit a fact: the review waits,
/// its client and its watchers say for whom ("waiting for a majority of voters (up: n1; lost:
/// n2, n3)"), and it goes on by itself, to a complete report, once one voter is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_that_lost_its_majority_waits_says_so_and_goes_on_when_a_voter_returns() {
    use tokio_stream::StreamExt;
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let mut nodes = cluster(&w).await;
    let out = w.join("out");
    let mut follow = {
        let (n1, w, out) = (nodes[0].api.clone(), w.clone(), out.clone());
        tokio::spawn(async move {
            let o = client(
                &[
                    "review",
                    fixture("code_project").to_str().unwrap(),
                    "--cluster",
                    &n1,
                    "--out",
                    out.to_str().unwrap(),
                ],
                &w,
            )
            .await;
            let report = std::fs::read_to_string(out.join("report.json"))
                .ok()
                .map(|s| serde_json::from_str::<Value>(&s).unwrap());
            (code(&o), report, stderr(&o))
        })
    };
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;
    let mut events = connect(&nodes[0]).await.watch(&flow_id).await.unwrap();

    // Two voters die: n1 is alone with the learner, and no fact can be committed.
    for i in [1, 2] {
        nodes[i].child.kill().await.unwrap();
        let _ = nodes[i].child.wait().await;
    }
    nodes[0].server.release();
    nodes[3].server.release();
    let waiting = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(Ok(ev)) = events.next().await {
            if ev.kind == "waiting" {
                let v: Value = serde_json::from_str(&ev.json).unwrap();
                if let Some(why) = v["reason"].as_str() {
                    return why.to_string();
                }
            }
        }
        panic!("the review's stream ended without saying it waits");
    })
    .await
    .expect("the review never said it waits for its voters");
    assert!(
        waiting.contains("waiting for a majority of voters (up: n1; lost: n2, n3)"),
        "{waiting}"
    );

    // One voter back on its data dir: a majority again, and the review goes on by itself.
    let n2 = common::voters::start("n2", &w, &[&nodes[0].cluster]).await;
    n2.server.release();
    let (code, report, stderr) = tokio::time::timeout(Duration::from_secs(240), follow)
        .await
        .expect("the review never finished after its majority came back")
        .unwrap();
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    assert_complete_once(&report.expect("no report written"));
    assert!(
        stderr.contains("quorum: waiting for a majority of voters (up: n1; lost: n2, n3)")
            && stderr.contains("quorum: a majority of voters is back; the review goes on"),
        "the client did not say the review waited, then went on: {stderr}"
    );
    drop(n2);
}
