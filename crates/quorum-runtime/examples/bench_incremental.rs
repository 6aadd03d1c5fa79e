//! Incremental reviews measured side by side in one run (issue #22's benchmark).
//!
//! A generated tree of 60 one-file directories is reviewed in full coverage (the planner's
//! tasks, then a batch per directory they leave out: 60 specialist tasks, one file each, 20 ms
//! a call): cold with the result cache off and on (recording), alternating, three times each;
//! then one file is changed and the tree reviewed again with `--incremental` semantics
//! (reuse). Prints model calls and wall time of the re-review over the cold review, and the
//! cold review's wall time with the cache on over off.
//!
//!     cargo run --release -p quorum-runtime --example bench_incremental

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::context::Incremental;
use quorum_runtime::{Backends, FactLog, ReviewContext};
use quorum_store::DataDir;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const TASKS: usize = 60;
const REPS: usize = 5;

fn module(n: usize, shift: usize) -> String {
    let mut lines: Vec<String> = (0..shift).map(|k| format!("# added {k}")).collect();
    for k in 1..=200 {
        lines.push(if k == 10 {
            format!("    eval(user_input_{n})")
        } else {
            format!("def f{n}_{k}(): return {k}")
        });
    }
    lines.join("\n") + "\n"
}

fn path(n: usize) -> String {
    format!("d{n}/f{n}.py")
}

fn tree(root: &Path) {
    for n in 1..=TASKS {
        std::fs::create_dir_all(root.join(format!("d{n}"))).unwrap();
        std::fs::write(root.join(path(n)), module(n, 0)).unwrap();
    }
}

fn script() -> Script {
    let tasks: Vec<_> = (1..=TASKS)
        .map(|n| {
            json!({"id": format!("t{n}"), "persona": "security_sentinel",
                   "files": [path(n)], "mandate": format!("Check module {n}.")})
        })
        .collect();
    let mut s = Script::new().models([MODEL]).rule(scout_rule()).rule(
        Rule::new("planner")
            .when_system(["You are the planner"])
            .reply(Reply::json(&json!({ "tasks": tasks }))),
    );
    for n in 1..=TASKS {
        let finding = json!({"findings": [{"title": format!("eval of input {n}"), "severity": "P1",
            "confidence": 0.9, "category": "security/injection", "file": path(n),
            "line_start": 10, "line_end": 10, "evidence": format!("eval(user_input_{n})"),
            "why_it_matters": "code execution", "suggested_fix": "remove it"}]});
        // Whichever persona's task holds the file (the planner's or a coverage batch).
        s = s.rule(
            Rule::new(format!("f{n}"))
                .when_system(["## Output format (required)"])
                .when_all([format!("## Files\n{}\n", path(n))])
                .reply(Reply::delay(20, Reply::json(&finding))),
        );
    }
    s.rule(verifier_confirms()).rule(synthesizer_rule())
}

fn context(
    server: &ScriptedServer,
    target: &Path,
    id: &str,
    incremental: Option<Incremental>,
) -> Arc<ReviewContext> {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.max_tasks = TASKS;
    flow.set_coverage(quorum_core::flows::flow::CoverageMode::Full)
        .unwrap();
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.max_concurrent = 8;
    Arc::new(ReviewContext {
        review: Arc::new(quorum_core::machine::Review {
            flow_id: id.into(),
            flow,
            catalog: Catalog::load(&repo_root().join("personas")).unwrap(),
            pack: ContextPack::snapshot(target, &PackOptions::default()).unwrap(),
            verifier_model: None,
            node: "bench".into(),
            max_concurrent: Some(8),
            started_at: String::new(),
            scope: Default::default(),
        }),
        backends: Backends::from_configs(&[cfg], MODEL).unwrap(),
        facts: FactLog::disabled(),
        remote: None,
        board: None,
        incremental,
    })
}

fn specialist_calls(server: &ScriptedServer, from: usize) -> usize {
    server.requests()[from..]
        .iter()
        .filter(|r| r.system.contains("## Output format (required)"))
        .count()
}

/// One review: its wall time, model calls and surviving findings.
async fn review(
    server: &ScriptedServer,
    target: &Path,
    id: &str,
    inc: Option<Incremental>,
) -> (Duration, usize, usize, usize) {
    let before = server.requests().len();
    let started = Instant::now();
    let report = quorum_runtime::run_review_from(context(server, target, id, inc), None, None)
        .await
        .expect("review ran");
    let wall = started.elapsed();
    (
        wall,
        server.requests().len() - before,
        specialist_calls(server, before),
        report.findings.len(),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let server = ScriptedServer::start(script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("tree");
    tree(&target);

    // Cold reviews, cache off and on (a fresh cache each time), alternating.
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut cold_calls, mut cold_specialists) = (0, 0);
    let mut cache = None;
    for rep in 0..REPS {
        let (wall, calls, specialists, _) =
            review(&server, &target, &format!("off-{rep}"), None).await;
        off.push(wall);
        (cold_calls, cold_specialists) = (calls, specialists);
        let data = DataDir::new(work.path().join(format!("data-{rep}")));
        let inc = Incremental {
            cache: Arc::new(data.open_results(20_000).unwrap()),
            reuse: true,
        };
        let (wall, _, _, findings) =
            review(&server, &target, &format!("on-{rep}"), Some(inc.clone())).await;
        assert_eq!(findings, TASKS);
        on.push(wall);
        cache = Some(inc);
    }
    let (off, on) = (median(off), median(on));

    // One file changed, reviewed again reusing what the last cold review recorded.
    std::fs::write(target.join(path(7)), module(7, 1)).unwrap();
    let (again, calls, specialists, findings) = review(&server, &target, "again", cache).await;
    assert_eq!(
        findings, TASKS,
        "every finding survives, carried or re-found"
    );

    println!("incremental review bench ({TASKS} specialist tasks, 20 ms a call, median of {REPS})");
    println!(
        "  cold review, result cache off: {:>7.0} ms, {cold_calls} model calls",
        off.as_secs_f64() * 1e3
    );
    println!(
        "  cold review, result cache on:  {:>7.0} ms  (on/off {:.3})",
        on.as_secs_f64() * 1e3,
        on.as_secs_f64() / off.as_secs_f64()
    );
    println!(
        "  one file changed, --incremental: {:>5.0} ms, {calls} model calls",
        again.as_secs_f64() * 1e3
    );
    println!(
        "  re-review / cold: model calls {calls}/{cold_calls} = {:.3}, specialist calls \
         {specialists}/{cold_specialists} = {:.3}, wall {:.3}",
        calls as f64 / cold_calls as f64,
        specialists as f64 / cold_specialists as f64,
        again.as_secs_f64() / off.as_secs_f64()
    );
}
