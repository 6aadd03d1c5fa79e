//! `quorum fix --jobs N` against one agent, and `quorum fix --cluster` on N nodes against one
//! node, in one run: 30 scripted fix tasks (one weak hash in each of 30 files), each agent
//! answer delayed like a model's (`--agent-ms`, default 1000), a scripted test command that
//! takes `--test-ms` (default 1000), a blind verifier that answers at once. The nodes are real
//! `quorum node` processes on loopback, each with its own scripted model server, running one
//! attempt at a time and the tests (`--fix-tests`; sandboxed, so `--nodes 0` where no sandbox
//! works). Prints each run's wall time and the ratios.
//!
//! ```sh
//! cargo build --release -p quorum-cli && cargo run --release -p quorum-cli --example bench_fix
//! cargo run --release -p quorum-cli --example bench_fix -- --jobs 3 --nodes 3 --tasks 30 --agent-ms 2000
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
    nodes: usize,
    agent_ms: u64,
    test_ms: u64,
}

fn args() -> Args {
    let mut a = Args {
        tasks: 30,
        jobs: 3,
        nodes: 3,
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
            "--nodes" => a.nodes = n() as usize,
            "--agent-ms" => a.agent_ms = n(),
            "--test-ms" => a.test_ms = n(),
            other => {
                eprintln!("bench_fix: unknown flag {other}; use --tasks N, --jobs N, --nodes N, --agent-ms MS or --test-ms MS");
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

const TOKEN: &str = "bench-token";

fn quorum(bin: &Path, cwd: &Path, args: &[&str]) -> (f64, i32, String) {
    let home = cwd.join(".home");
    let t = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env("QUORUM_API_TOKEN", TOKEN)
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

/// One timed `quorum fix` of `target` from `report` into `out` with the fix script's model,
/// the scripted tests and `extra` (where its agents run).
fn fix_run(
    bin: &Path,
    cwd: &Path,
    [target, report, out]: [&Path; 3],
    backend: &str,
    extra: &[&str],
) -> (f64, i32, String) {
    let mut args = vec![
        "fix",
        target.to_str().unwrap(),
        "--from",
        report.to_str().unwrap(),
        "--backend",
        backend,
        "--model",
        "scripted-model",
        "--out",
        out.to_str().unwrap(),
        "--test-cmd",
        "bash tests.sh",
        "--unsandboxed",
        "--no-analyzers",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    quorum(bin, cwd, &args)
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
        let (wall, code, text) = fix_run(
            &bin,
            work.path(),
            [&target, &report, &out],
            &backend,
            &["--jobs", &jobs_text],
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
    if a.nodes == 0 {
        return;
    }
    let mut walls = Vec::new();
    for n in [1, a.nodes] {
        let cluster = start_nodes(&bin, work.path(), n, &backend).await;
        let out = work.path().join(format!("fix-nodes-{n}"));
        let (wall, code, text) = fix_run(
            &bin,
            work.path(),
            [&target, &report, &out],
            &backend,
            &["--cluster", &cluster.api],
        );
        drop(cluster);
        if code != 0 {
            eprintln!("bench_fix: --cluster with {n} node(s) exited {code}:\n{text}");
            std::process::exit(1);
        }
        let summary = text.lines().last().unwrap_or("").to_string();
        println!("{n:>2} node(s): {wall:>6.1} s  {summary}");
        walls.push(wall);
    }
    println!(
        "{} tasks on nodes running one attempt and its tests at a time: {} nodes take {:.2}× the time of 1 ({:.2}× faster)",
        a.tasks,
        a.nodes,
        walls[1] / walls[0],
        walls[0] / walls[1]
    );
}

/// Nodes started for one run: killed when dropped.
struct Nodes {
    children: Vec<std::process::Child>,
    /// The first node's API.
    api: String,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `n` `quorum node`s joined in one cluster on loopback, each serving the fix script's model
/// (`backend`), one attempt at a time, allowed to run the tests; returns once the first sees
/// them all.
async fn start_nodes(bin: &Path, work: &Path, n: usize, backend: &str) -> Nodes {
    use std::io::BufRead;
    let cookie = format!("bench-{}", std::process::id());
    let mut nodes = Nodes {
        children: Vec::new(),
        api: String::new(),
    };
    let mut join: Option<String> = None;
    for i in 0..n {
        let name = format!("bench{n}-{i}");
        let home = work.join(format!(".home-{name}"));
        let data = work.join(format!("data-{name}"));
        let mut cmd = Command::new(bin);
        cmd.args([
            "node",
            "--name",
            &name,
            "--listen",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
            "--backend",
            backend,
            "--model",
            "scripted-model",
            "--fix-tests",
            "--data-dir",
            data.to_str().unwrap(),
        ])
        .current_dir(work)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("QUORUM_HOME", repo_root())
        .env("QUORUM_API_TOKEN", TOKEN)
        .env("QUORUM_COOKIE", &cookie)
        .env("QUORUM_MAX_CONCURRENT", "1")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
        if let Some(j) = &join {
            cmd.args(["--join", j]);
        }
        let mut child = cmd.spawn().expect("quorum node");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the node's first line");
        let field = |key: &str| {
            line.split(key)
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .map(str::to_string)
        };
        let (Some(api), Some(cluster)) = (field("api on "), field("cluster on ")) else {
            eprintln!("bench_fix: node {name} did not start: {line}");
            std::process::exit(1);
        };
        if i == 0 {
            nodes.api = api;
            join = Some(cluster);
        }
        nodes.children.push(child);
    }
    let client = quorum_api::ApiClient::connect(&nodes.api, TOKEN)
        .await
        .expect("the first node's API");
    for _ in 0..600 {
        let up = client
            .cluster_status()
            .await
            .map(|s| {
                s.iter()
                    .filter(|m| m.alive && !m.api_url.is_empty())
                    .count()
            })
            .unwrap_or(0);
        if up == n {
            return nodes;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    eprintln!("bench_fix: the {n} nodes never all saw each other");
    std::process::exit(1);
}
