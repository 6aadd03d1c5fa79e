//! Persistence overhead and resume time, measured side by side in one run.
//!
//! Runs the same 60-task review against the scripted model server twice — once with every fact
//! written to a sled flow store, once with writes disabled — and prints the wall-time ratio;
//! then measures how long loading and replaying the stored flow (what `quorum resume` does
//! before its first model call) takes.
//!
//!     cargo run --release -p quorum-runtime --example bench_persistence

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::{Backends, FactLog, Resume, ReviewContext};
use quorum_store::{DataDir, FlowMeta};
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use support::*;

const TASKS: usize = 60;

fn script() -> Script {
    let files = ["src/db.py", "src/auth.py", "src/utils.py", "src/app.py"];
    let tasks: Vec<_> = (1..=TASKS)
        .map(|i| json!({"id": format!("t{i}"), "persona": "security_sentinel", "files": [files[i % 4]], "mandate": format!("area {i}")}))
        .collect();
    let finding = json!({"findings": [{"title": "SQL injection in item search", "severity": "P1", "confidence": 0.9,
        "category": "security/injection", "file": "src/db.py", "line_start": 53, "line_end": 53,
        "evidence": "name LIKE '%{term}%'", "why_it_matters": "x", "suggested_fix": "y"}]});
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": tasks}))),
        )
        .rule(
            Rule::new("spec")
                .when_system(["You are security_sentinel"])
                .reply(Reply::delay(20, Reply::json(&finding))),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

fn context(server: &ScriptedServer, facts: FactLog, id: &str) -> Arc<ReviewContext> {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.max_tasks = TASKS;
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.max_concurrent = 8;
    Arc::new(ReviewContext {
        review: std::sync::Arc::new(quorum_core::machine::Review {
            flow_id: id.into(),
            flow,
            catalog: Catalog::load(&repo_root().join("personas")).unwrap(),
            pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
            verifier_model: None,
            node: "bench".into(),
            max_concurrent: Some(4),
            started_at: String::new(),
            scope: Default::default(),
        }),
        backends: Backends::from_configs(&[cfg], MODEL).unwrap(),
        facts,
        remote: None,
        board: None,
        incremental: None,
    })
}

#[tokio::main]
async fn main() {
    let server = ScriptedServer::start(script()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(dir.path());

    // Warm-up (connection pool, page cache), not measured.
    quorum_runtime::run_review(context(&server, FactLog::disabled(), "warm"), None)
        .await
        .unwrap();

    let t = Instant::now();
    let r1 = quorum_runtime::run_review(context(&server, FactLog::disabled(), "nostore"), None)
        .await
        .unwrap();
    let without = t.elapsed();

    let meta = FlowMeta {
        flow_id: "stored".into(),
        flow_name: "review".into(),
        flow_yaml: String::new(),
        params: json!({}),
        target_path: String::new(),
        head_sha: None,
        started_at: String::new(),
        started_ms: 0,
        node: "bench".into(),
    };
    let t = Instant::now();
    let store = data.create_flow(&meta).unwrap();
    let ctx = context(&server, FactLog::new(store.clone()), "stored");
    store.save_pack(&ctx.pack).unwrap();
    let r2 = quorum_runtime::run_review(ctx, None).await.unwrap();
    let with = t.elapsed();
    assert_eq!(r1.findings.len(), r2.findings.len());

    let events = store.events().unwrap().len();
    let attempts = store.attempts().unwrap().len();
    drop(store);
    let t = Instant::now();
    let store = data.open_flow("stored").unwrap();
    let _pack = store.load_pack().unwrap();
    let resume = Resume::load(&store).unwrap();
    let resume_ms = t.elapsed();

    println!("review of {TASKS} specialist tasks, scripted latency 20 ms, max_concurrent 4");
    println!("  without store: {:>8.1} ms", without.as_secs_f64() * 1e3);
    println!("  with store:    {:>8.1} ms  ({events} events, {attempts} attempt records, every write flushed)", with.as_secs_f64() * 1e3);
    println!(
        "  ratio with/without: {:.3}",
        with.as_secs_f64() / without.as_secs_f64()
    );
    println!(
        "  resume preparation (open + load pack + replay {} tasks): {:.1} ms",
        resume.replay.completed.len(),
        resume_ms.as_secs_f64() * 1e3
    );
}
