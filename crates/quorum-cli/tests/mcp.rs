//! `quorum mcp`: a real process spoken to in JSON-RPC over its stdin/stdout, running a review
//! against the scripted model server.

mod common;

use common::mcp::*;
use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cluster_the_review_runs_on_the_node_and_is_read_back_through_its_api() {
    tokio::time::timeout(Duration::from_secs(180), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let (mut node, api) = start_node(&server, work.path(), "mcp-node").await;

        // No backend here: everything runs on the node.
        let mut s = spawn_mcp(work.path(), &["--cluster", &api]).await;
        s.initialize().await;
        let started = s
            .tool(
                "review_start",
                json!({"path": fixture("code_project").to_str().unwrap()}),
            )
            .await
            .unwrap();
        let flow_id = started["flow_id"].as_str().unwrap().to_string();
        let status = s.until_done(&flow_id).await;
        assert_eq!(status["status"], "completed", "{status}");
        assert_eq!(
            status["tasks_done"], 3,
            "progress should have come over WatchReview: {status}"
        );
        let all = s
            .tool("review_findings", json!({"flow_id": flow_id}))
            .await
            .unwrap();
        assert!(
            all["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["title"] == "SQL injection in item search"),
            "{all}"
        );
        assert!(server
            .requests()
            .iter()
            .any(|r| r.system.contains("You are security_sentinel")));
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_starts_a_review_follows_it_and_reads_its_findings_over_mcp() {
    tokio::time::timeout(Duration::from_secs(180), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let mut s = spawn_mcp(
            work.path(),
            &[
                "--backend",
                &format!("ollama={}", server.ollama_url()),
                "--model",
                MODEL,
                "--data-dir",
                work.path().join("data").to_str().unwrap(),
            ],
        )
        .await;
        let init = s
            .call(
                "initialize",
                json!({"protocolVersion": "2025-03-26", "capabilities": {},
                       "clientInfo": {"name": "test-agent", "version": "1"}}),
            )
            .await;
        assert_eq!(init["result"]["serverInfo"]["name"], "quorum", "{init}");
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;

        let tools = s.call("tools/list", json!({})).await;
        let mut names: Vec<&str> = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "finding_explain",
                "review_findings",
                "review_start",
                "review_status"
            ]
        );
        let start_schema = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "review_start")
            .unwrap()["inputSchema"]
            .clone();
        assert_eq!(start_schema["required"], json!(["path"]), "{start_schema}");

        // Bad input is one clear error, not a crash.
        let err = s
            .tool(
                "review_start",
                json!({"path": work.path().join("nope").to_str().unwrap()}),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");

        let target = fixture("code_project");
        let started = s
            .tool("review_start", json!({"path": target.to_str().unwrap()}))
            .await
            .unwrap();
        let flow_id = started["flow_id"].as_str().unwrap().to_string();

        // Follow it: each answer is a snapshot; the review ends on its own.
        let mut status;
        let mut polls = 0;
        loop {
            status = s
                .tool("review_status", json!({"flow_id": flow_id}))
                .await
                .unwrap();
            if status["status"] != "running" {
                break;
            }
            polls += 1;
            assert!(polls < 2000, "the review never ended: {status}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(status["status"], "completed", "{status}");
        assert_eq!(status["tasks_total"], 3, "{status}");
        assert_eq!(status["tasks_done"], 3, "{status}");
        assert!(status["tokens_in"].as_u64().unwrap() > 0);

        let all = s
            .tool("review_findings", json!({"flow_id": flow_id}))
            .await
            .unwrap();
        let titles: Vec<&str> = all["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["title"].as_str().unwrap())
            .collect();
        assert!(titles.contains(&"SQL injection in item search"), "{all}");
        assert!(titles.len() >= 2, "{all}");
        let p0 = s
            .tool(
                "review_findings",
                json!({"flow_id": flow_id, "min_severity": "P0"}),
            )
            .await
            .unwrap();
        let p0 = p0["findings"].as_array().unwrap();
        assert!(!p0.is_empty() && p0.len() < titles.len());
        assert!(p0.iter().all(|f| f["severity"] == "P0"), "{p0:?}");

        let sqli = all["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["title"] == "SQL injection in item search")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let explained = s
            .tool(
                "finding_explain",
                json!({"flow_id": flow_id, "finding_id": sqli}),
            )
            .await
            .unwrap();
        assert_eq!(explained["file"], "src/db.py");
        assert_eq!(explained["suggested_fix"], "use bound parameters");
        let cited = explained["cited_lines"].as_str().unwrap();
        assert!(
            cited.contains("<<<BEGIN UNTRUSTED src/db.py:53-54>>>"),
            "{cited}"
        );
        assert!(cited.contains("   53 | "), "{cited}");
        assert!(cited.contains("LIKE"), "{cited}");
        assert_eq!(explained["reporters"][0]["persona"], "security_sentinel");

        let err = s
            .tool(
                "finding_explain",
                json!({"flow_id": flow_id, "finding_id": "F999"}),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no finding F999"), "{err}");

        // The review really ran against the model server, through this process.
        let reqs = server.requests();
        assert!(reqs
            .iter()
            .any(|r| r.system.contains("You are the planner")));
        assert!(reqs
            .iter()
            .any(|r| r.system.contains("You are security_sentinel")));
        // Its reports were written like a `quorum review`'s.
        let out = work.path().join("quorum-out").join(&flow_id);
        assert!(
            out.join("report.json").is_file(),
            "no report in {}",
            out.display()
        );

        drop(s.stdin);
        let status = tokio::time::timeout(Duration::from_secs(30), s.child.wait())
            .await
            .expect("quorum mcp did not exit when stdin closed")
            .unwrap();
        assert!(status.success());
    })
    .await
    .expect("test timed out");
}

/// The conformance fixture's review: one developer task that finds nothing, then the judge:
/// C1 met with a grounded quote, C2 and C3 unmet.
fn conformance_script() -> quorum_testkit::Script {
    use quorum_testkit::{Reply, Rule, Script};
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": [
                    {"id": "t1", "persona": "software_developer", "files": ["app.py", "ratelimit.py"],
                     "mandate": "Check the limiter and the endpoint for correctness bugs."}
                ]}))),
        )
        .rule(
            Rule::new("developer")
                .when_system(["You are software_developer"])
                .reply(Reply::json(&json!({"findings": []}))),
        )
        .rule(
            Rule::new("judge")
                .when_system(["You are the conformance judge"])
                .reply(Reply::json(&json!({"judgments": [
                    {"id": "C1", "status": "met", "reason": "429 beyond the limit",
                     "evidence": [{"file": "app.py", "line_start": 13, "line_end": 13,
                                   "quote": "return jsonify(error=\"rate limited\"), 429"}]},
                    {"id": "C2", "status": "unmet", "reason": "hard-coded", "evidence": []},
                    {"id": "C3", "status": "unmet", "reason": "no Retry-After", "evidence": []}
                ]}))),
        )
        .rule(synthesizer_rule())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_a_conformance_review_on_a_cluster_with_its_spec() {
    tokio::time::timeout(Duration::from_secs(180), async {
        let server = ScriptedServer::start(conformance_script()).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let (mut node, api) = start_node(&server, work.path(), "mcp-node").await;
        let mut s = spawn_mcp(work.path(), &["--cluster", &api]).await;
        s.initialize().await;
        let target = fixture("conformance/service");

        // Without its spec the node refuses the review, saying what to pass.
        let err = s
            .tool(
                "review_start",
                json!({"path": target.to_str().unwrap(), "flow": "conformance"}),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("pass --spec FILE"), "{err}");

        let started = s
            .tool(
                "review_start",
                json!({"path": target.to_str().unwrap(), "flow": "conformance",
                       "spec": fixture("conformance/spec.md").to_str().unwrap()}),
            )
            .await
            .unwrap();
        let flow_id = started["flow_id"].as_str().unwrap().to_string();
        let status = s.until_done(&flow_id).await;
        assert_eq!(status["status"], "completed", "{status}");
        assert_eq!(
            status["conformance"],
            json!({"ready": false, "met": 1, "unmet": 2, "divergent": 0, "criteria": 3}),
            "{status}"
        );
        let judged: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.system.contains("You are the conformance judge"))
            .collect();
        assert_eq!(judged.len(), 1, "one batch of three criteria");
        assert!(judged[0]
            .text
            .contains("Requests beyond N per minute per API key receive HTTP 429."));
        let _ = node.kill().await;
    })
    .await
    .expect("test timed out");
}
