//! `quorum fix --jobs N` against one agent, in one run: 30 scripted fix tasks (one weak hash in
//! each of 30 files), each agent answer delayed like a model's (`--agent-ms`, default 1000),
//! a scripted test command that takes `--test-ms` (default 1000), a blind verifier that
//! answers at once. Prints each run's wall time, the attempts and the ratio.
//!
//! ```sh
//! cargo build --release -p quorum-cli && cargo run --release -p quorum-cli --example bench_fix
//! cargo run --release -p quorum-cli --example bench_fix -- --jobs 3 --tasks 30 --agent-ms 2000
//! ```
//!
//! Every change is judged on the tree it would be kept into; changes that come back together,
//! to disjoint files, share one test run. So the tests' time (tasks × test-ms) is the floor of
//! one change at a time, and `--jobs` overlaps the agents with it and shares test runs.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use support::*;

struct Args {
    tasks: usize,
    jobs: u32,
    agent_ms: u64,
    test_ms: u64,
}

fn args() -> Args {
    let mut a = Args {
        tasks: 30,
        jobs: 3,
        agent_ms: 1000,
        test_ms: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        let n = || -> u64 {
            value.parse().unwrap_or_else(|_| {
                eprintln!("bench_fix: {flag} needs a number");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--tasks" => a.tasks = n() as usize,
            "--jobs" => a.jobs = n() as u32,
            "--agent-ms" => a.agent_ms = n(),
            "--test-ms" => a.test_ms = n(),
            other => {
                eprintln!("bench_fix: unknown flag {other}; use --tasks N, --jobs N, --agent-ms MS or --test-ms MS");
                std::process::exit(2);
            }
        }
    }
    a
}

/// The `quorum` binary built beside this example (`target/<profile>/quorum`).
fn quorum_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("quorum"))
        .expect("target dir");
    if !bin.is_file() {
        eprintln!(
            "bench_fix: no quorum binary at {}; build it first: cargo build --release -p quorum-cli",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

fn quorum(bin: &Path, cwd: &Path, args: &[&str]) -> (f64, i32, String) {
    let home = cwd.join(".home");
    let t = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("QUORUM_HOME", repo_root())
        .env("QUORUM_ANALYZERS__ENABLED", "false")
        .env_remove("QUORUM_DATA_DIR")
        .env_remove("RUST_LOG")
        .output()
        .expect("run quorum");
    let wall = t.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, out.status.code().unwrap_or(-1), text)
}

fn module(k: usize) -> String {
    format!("src/m{k:02}.py")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let bin = quorum_bin();
    let work = tempfile::tempdir().expect("tempdir");
    let target = work.path().join("project");
    for k in 0..a.tasks {
        let path = target.join(module(k));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            format!("import hashlib\n\n\ndef digest{k}(data):\n    return hashlib.md5(data).hexdigest()\n"),
        )
        .unwrap();
    }
    std::fs::write(
        target.join("tests.sh"),
        format!("sleep {}\necho ok\n", a.test_ms as f64 / 1000.0),
    )
    .unwrap();

    // The review: one task over every module, one confirmed finding in each.
    let files: Vec<String> = (0..a.tasks).map(module).collect();
    let findings: Vec<serde_json::Value> = (0..a.tasks)
        .map(|k| {
            json!({"title": format!("Weak hash in digest{k}"), "severity": "P1", "confidence": 0.9,
                   "category": "security/crypto", "file": module(k), "line_start": 5, "line_end": 5,
                   "symbol": format!("digest{k}"),
                   "evidence": "return hashlib.md5(data).hexdigest()",
                   "why_it_matters": "md5 is broken", "suggested_fix": "use sha256"})
        })
        .collect();
    let review = Script::new()
        .models(["scripted-model"])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(
                    &json!({"tasks": [{"id": "t1", "persona": "security_sentinel",
                    "files": files, "mandate": "Check the hashing."}]}),
                )),
        )
        .rule(
            Rule::new("sentinel")
                .when_system(["You are security_sentinel"])
                .reply(Reply::json(&json!({ "findings": findings }))),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(review).await.expect("server");
    let backend = format!("ollama={}", server.ollama_url());
    let review_out = work.path().join("review");
    let (_, code, text) = quorum(
        &bin,
        work.path(),
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            "scripted-model",
            "--out",
            review_out.to_str().unwrap(),
            "--quiet",
            "--fail-on",
            "none",
            "--max-concurrent",
            "1",
        ],
    );
    if code != 0 {
        eprintln!("bench_fix: the review failed:\n{text}");
        std::process::exit(1);
    }
    drop(server);

    // The fixes: each agent's answer comes after agent-ms, naming its own file.
    let mut fix = Script::new().models(["scripted-model"]);
    for k in 0..a.tasks {
        fix = fix.rule(
            Rule::new(format!("fix-{k}"))
                .when_system(["You fix one reported defect"])
                .when_all([format!("Weak hash in digest{k}\n")])
                .reply(Reply::delay(
                    a.agent_ms,
                    Reply::json(
                        &json!({"edits": [{"path": module(k), "old": "hashlib.md5(data)",
                        "new": "hashlib.sha256(data)"}], "summary": "sha256"}),
                    ),
                )),
        );
    }
    fix = fix.rule(
        Rule::new("blind")
            .when_system(["You are an independent reviewer"])
            .reply(Reply::json(
                &json!({"still_holds": false, "reason": "gone"}),
            )),
    );
    let server = ScriptedServer::start(fix).await.expect("server");
    let backend = format!("ollama={}", server.ollama_url());
    let report = review_out.join("report.json");
    let mut runs = Vec::new();
    for jobs in [1, a.jobs] {
        let out = work.path().join(format!("fix-{jobs}"));
        let jobs_text = jobs.to_string();
        let (wall, code, text) = quorum(
            &bin,
            work.path(),
            &[
                "fix",
                target.to_str().unwrap(),
                "--from",
                report.to_str().unwrap(),
                "--backend",
                &backend,
                "--model",
                "scripted-model",
                "--out",
                out.to_str().unwrap(),
                "--test-cmd",
                "bash tests.sh",
                "--unsandboxed",
                "--no-analyzers",
                "--jobs",
                &jobs_text,
                "--quiet",
            ],
        );
        let summary = text.lines().last().unwrap_or("").to_string();
        if code != 0 {
            eprintln!("bench_fix: --jobs {jobs} exited {code}:\n{text}");
            std::process::exit(1);
        }
        println!("--jobs {jobs:>2}: {wall:>6.1} s  {summary}");
        runs.push(wall);
    }
    println!(
        "{} tasks, agent {} ms, tests {} ms: --jobs {} takes {:.2}× the time of --jobs 1 ({:.2}× faster); one test run per change would take {:.1} s",
        a.tasks,
        a.agent_ms,
        a.test_ms,
        a.jobs,
        runs[1] / runs[0],
        runs[0] / runs[1],
        (a.tasks as f64 + 1.0) * a.test_ms as f64 / 1000.0
    );
}
