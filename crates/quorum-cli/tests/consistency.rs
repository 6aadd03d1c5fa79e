//! Self-consistency passes with the `quorum` binary: a flow with `consistency: {passes: 3}`
//! asks the planned task three times, each pass with the task's files in its own order and at
//! the flow's temperature; what two passes found is kept once (verified once), and what one
//! pass alone found is dropped with `removed_by: consistency`.

mod common;

use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const FILES: [&str; 3] = ["src/a.py", "src/b.py", "src/c.py"];

fn module(defect_line: u32, defect: &str) -> String {
    (1..=20)
        .map(|k| {
            if k == defect_line {
                defect.to_string()
            } else {
                format!("def helper_{k}(): return {k}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn script() -> Script {
    let shared = finding(
        "Code execution through eval",
        "P1",
        0.9,
        "src/a.py",
        10,
        "eval(user_input)",
    );
    // Pass 2 cites the same defect a line off, as small models do.
    let shared_shifted = finding(
        "Untrusted input evaluated",
        "P1",
        0.9,
        "src/a.py",
        11,
        "eval(user_input)",
    );
    let lone = finding(
        "Unsafe deserialisation",
        "P1",
        0.9,
        "src/c.py",
        5,
        "pickle.loads(data)",
    );
    Script::new()
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": [{
                    "id": "t1", "persona": "security_sentinel", "files": FILES,
                    "mandate": "Check the modules for code execution flaws."}]}))),
        )
        .rule(
            Rule::new("pass-3")
                .when_system(["You are security_sentinel"])
                .when_all(["## Task t1.p3\n"])
                .reply(Reply::json(&json!({"findings": [shared.clone(), lone]}))),
        )
        .rule(
            Rule::new("pass-2")
                .when_system(["You are security_sentinel"])
                .when_all(["## Task t1.p2\n"])
                .reply(Reply::json(&json!({"findings": [shared_shifted]}))),
        )
        .rule(
            Rule::new("pass-1")
                .when_system(["You are security_sentinel"])
                .when_all(["## Task t1\n"])
                .reply(Reply::json(&json!({"findings": [shared]}))),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

/// The files a specialist request lists under "## Files", in order.
fn files_listed(r: &RecordedRequest) -> Vec<String> {
    let at = r.text.find("\n## Files\n").expect("a files section") + "\n## Files\n".len();
    r.text[at..]
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_passes_keep_what_two_found_once_and_drop_what_one_found_alone() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    write(&target, "src/a.py", &module(10, "    eval(user_input)"));
    write(&target, "src/b.py", &module(0, ""));
    write(&target, "src/c.py", &module(5, "    pickle.loads(data)"));
    // The quick flow without its probes, with three passes.
    let quick = std::fs::read_to_string(repo_root().join("flows/quick.yaml")).unwrap();
    let quick = &quick[..quick.find("\nprobes:").expect("quick has probes")];
    let flow = work.path().join("three-passes.yaml");
    std::fs::write(
        &flow,
        format!("{quick}\nconsistency:\n  passes: 3\n  temperature: 0.7\n"),
    )
    .unwrap();

    let server = ScriptedServer::start(script()).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("out");
    let o = quorum(
        &[
            "review",
            target.to_str().unwrap(),
            "--flow",
            flow.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--fail-on",
            "none",
        ],
        work.path(),
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let requests = server.requests();

    // Three passes, each asked once, each reading the same files in its own order, sampled at
    // the flow's temperature.
    let passes: Vec<&RecordedRequest> = requests.iter().filter(|r| task_of(r).is_some()).collect();
    let asked: Vec<String> = passes.iter().filter_map(|r| task_of(r)).collect();
    assert_eq!(
        asked.iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            &"t1".to_string(),
            &"t1.p2".to_string(),
            &"t1.p3".to_string()
        ]),
        "{asked:?}"
    );
    assert_eq!(asked.len(), 3, "{asked:?}");
    let orders: BTreeSet<Vec<String>> = passes.iter().map(|r| files_listed(r)).collect();
    for order in &orders {
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, FILES, "every pass reads the task's files");
    }
    assert!(orders.len() > 1, "the passes read in one order: {orders:?}");
    let first = passes.iter().find(|r| task_of(r).as_deref() == Some("t1"));
    assert_eq!(
        files_listed(first.unwrap()),
        FILES,
        "pass 1 keeps the plan's order"
    );
    for r in &passes {
        let t = r.body["options"]["temperature"]
            .as_f64()
            .or_else(|| r.body["temperature"].as_f64())
            .unwrap_or_else(|| panic!("no temperature: {}", r.body));
        assert!((t - 0.7).abs() < 1e-6, "{t}");
    }

    // Two passes found the eval (a line apart): one finding, verified once. One pass alone
    // found the pickle: dropped, saying why.
    let report = read_json(&out.join("report.json"));
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["file"], "src/a.py");
    assert_eq!(findings[0]["title"], "Code execution through eval");
    let verified = requests
        .iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .count();
    assert_eq!(verified, 1, "the duplicate is not verified again");
    let dropped: Vec<&Value> = report["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["removed_by"] == "consistency")
        .collect();
    assert_eq!(dropped.len(), 1, "{}", report["dropped"]);
    assert_eq!(dropped[0]["title"], "Unsafe deserialisation");
    let reason = dropped[0]["reason"].as_str().unwrap();
    assert!(reason.contains("1 of 3 passes of task t1"), "{reason}");
    assert!(reason.contains("at least 2"), "{reason}");
}
