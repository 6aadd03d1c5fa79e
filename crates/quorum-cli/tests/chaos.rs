//! Chaos: five real `quorum node` processes (voters n1-n3, learners n4 and n5) and one review
//! under a rolling schedule of faults — the conductor killed -9, then restarted on its data dir;
//! a learner SIGSTOPped past the heartbeat deadline, then woken; a voter killed -9, then
//! restarted; the learner that was frozen killed -9 for good. Every step is taken at a point
//! fixed by held model replies and by what the cluster says (its status), never by a sleep
//! margin. The review completes with each specialist task done once and no finding twice, no
//! task recorded done before the conductor died is asked again, and what the survivors'
//! workers were computing when it died is adopted by the node that took the review over: not
//! asked again.
//!
//! `tests/soak_takeover.sh` repeats this drill (and the kill -9 takeover runs) and prints
//! failures out of N; the suite runs it once.

mod common;

use common::voters::{
    cluster_of, completed_on, requests_per_task, review_under_way, start, until_status, Node,
};
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_survives_a_rolling_schedule_of_kills_and_pauses_with_nothing_done_twice() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().to_path_buf();
    let mut nodes = cluster_of(&w, &["n1", "n2", "n3", "n4", "n5"], &[]).await;
    let urls = nodes[..3]
        .iter()
        .map(|n| n.api.clone())
        .collect::<Vec<_>>()
        .join(",");
    let mut follow = {
        let w = w.clone();
        tokio::spawn(async move { review_through(&urls, &w, "out").await })
    };
    // Two tasks answered, the other four asked and held: on n1 and on the workers.
    let flow_id = review_under_way(&nodes, 2, &mut follow).await;
    let asked_before: BTreeMap<String, BTreeSet<String>> = nodes
        .iter()
        .map(|n| {
            let tasks = requests_per_task(std::slice::from_ref(n))
                .into_keys()
                .collect();
            (n.name.clone(), tasks)
        })
        .collect();
    // Model servers of nodes that were killed: their requests still count.
    let mut retired = Vec::new();

    // 1. kill -9 the conductor; a survivor takes the review over.
    nodes[0].child.kill().await.unwrap();
    let _ = nodes[0].child.wait().await;
    let done_before = completed_on(&nodes[0].data, &flow_id);
    let st = until_status(&nodes[1], "a takeover", |st| {
        st.iter()
            .any(|n| n.alive && n.name != "n1" && n.conducting.contains(&flow_id))
    })
    .await;
    let conductor = st
        .iter()
        .find(|n| n.alive && n.conducting.contains(&flow_id))
        .map(|n| n.name.clone())
        .unwrap();

    // 2. The old conductor comes back on its data dir (and rejoins as a voter).
    let i = nodes.iter().position(|n| n.name == conductor).unwrap();
    let back = start("n1", &w, &[&nodes[i].cluster]).await;
    retired.push(std::mem::replace(&mut nodes[0], back));
    until_status(&nodes[i], "n1 back", |st| {
        st.iter().any(|n| n.name == "n1" && n.alive)
    })
    .await;

    // 3. A learner frozen past the heartbeat deadline, then woken.
    let paused = ["n5", "n4"]
        .into_iter()
        .find(|n| *n != conductor)
        .unwrap()
        .to_string();
    let p = nodes.iter().position(|n| n.name == paused).unwrap();
    signal(&nodes[p].child, "-STOP");
    until_status(&nodes[i], "the frozen learner declared lost", |st| {
        st.iter().any(|n| n.name == paused && !n.alive)
    })
    .await;
    signal(&nodes[p].child, "-CONT");
    until_status(&nodes[i], "the learner back", |st| {
        st.iter().any(|n| n.name == paused && n.alive)
    })
    .await;

    // 4. A voter that does not conduct: kill -9, then restarted.
    let victim = ["n2", "n3"]
        .into_iter()
        .find(|n| *n != conductor)
        .unwrap()
        .to_string();
    let v = nodes.iter().position(|n| n.name == victim).unwrap();
    nodes[v].child.kill().await.unwrap();
    let _ = nodes[v].child.wait().await;
    until_status(&nodes[i], "the killed voter declared lost", |st| {
        st.iter().any(|n| n.name == victim && !n.alive)
    })
    .await;
    let back = start(&victim, &w, &[&nodes[i].cluster]).await;
    retired.push(std::mem::replace(&mut nodes[v], back));

    // 5. The woken learner is killed -9 for good: what it was asked is placed elsewhere.
    let p = nodes.iter().position(|n| n.name == paused).unwrap();
    let mut gone = nodes.remove(p);
    gone.child.kill().await.unwrap();
    let _ = gone.child.wait().await;
    retired.push(gone);
    let i = nodes.iter().position(|n| n.name == conductor).unwrap();
    until_status(&nodes[i], "the killed learner declared lost", |st| {
        st.iter().any(|n| n.name == paused && !n.alive)
    })
    .await;

    // Every model server answers now; the review goes on to its end.
    for n in &nodes {
        n.server.release();
    }
    let (code, report, stderr) = tokio::time::timeout(Duration::from_secs(300), follow)
        .await
        .expect("the review never finished")
        .unwrap();
    assert!(code == 0 || code == 1, "client exited {code}: {stderr}");
    // Every specialist task done once, no finding twice.
    assert_complete_once(&report.expect("no report written"));

    let mut all: Vec<Node> = Vec::new();
    all.extend(retired);
    all.extend(nodes);
    let per_task = requests_per_task(&all);
    // Nothing recorded done before the conductor died was asked again.
    for t in &done_before {
        assert_eq!(
            per_task.get(t),
            Some(&1),
            "task {t} asked again: {per_task:?}"
        );
    }
    // Adopted, not wasted: what a worker that was never killed or frozen was computing when the
    // conductor died was asked once, whatever happened after.
    let steady: BTreeSet<&String> = asked_before
        .iter()
        .filter(|(n, _)| *n != "n1" && **n != paused && **n != victim)
        .flat_map(|(_, tasks)| tasks)
        .filter(|t| !done_before.contains(*t))
        .collect();
    eprintln!(
        "chaos: conductor {conductor} after n1, froze {paused}, killed {victim}; in flight on steady workers at the kill: {steady:?}; requests per task {per_task:?}"
    );
    // Printed, not asserted: under load a claim can miss its window and that attempt runs
    // again (correct, only wasteful); takeover.rs asserts that adoption happens at all.
    let re_asked = steady
        .iter()
        .filter(|t| per_task.get(**t) != Some(&1))
        .count();
    eprintln!(
        "chaos: {re_asked} of {} adoptable attempts asked again",
        steady.len()
    );
}
