//! What every CLI test file shares, so that each says only what it tests: THE runner of the
//! `quorum` binary (`quorum(args, cwd)`, with `command` for a test that spawns, kills or adjusts
//! the process first), the node starter (`start_node` for the plain one-node case, `spawn_node`
//! for any `quorum node` command line), readers of a finished command's output, and the
//! workspace's scripted reviews (`tests/support`, re-exported).
//!
//! Every process a test starts is isolated the same way (`isolate`): its own home, config and
//! data dir under the test's directory, the repository's personas and flows, no analyzer found
//! on this machine's PATH, no log or trace settings of the caller's shell.

#![allow(dead_code)]

#[path = "../../../../tests/support/mod.rs"]
pub mod support;

pub use support::*;

pub mod fixing;
pub mod mcp;
pub mod voters;

use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_quorum");

/// The API token test nodes serve with and their clients send.
pub const NODE_TOKEN: &str = "s3cret";

/// How long a command may run before the test calls it hung: far past any review here, so only
/// a hang reaches it; it bounds a failing run, it decides nothing.
pub const HUNG: Duration = Duration::from_secs(240);

/// How long a node may take to print the line that says it serves.
const NODE_START: Duration = Duration::from_secs(60);

/// Isolate `cmd` (the binary, or a program that runs it) in `cwd`: home, config and data dir
/// under `cwd/.home`, the repository's personas and flows, analyzers off (tools on this
/// machine's PATH must not change what is reviewed), and no token, log, trace, colour,
/// coverage or data-dir setting inherited from the caller. A test wanting one sets it after.
pub fn isolate<'a>(cmd: &'a mut Command, cwd: &Path) -> &'a mut Command {
    let home = cwd.join(".home");
    cmd.current_dir(cwd)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("QUORUM_HOME", repo_root())
        .env("QUORUM_ANALYZERS__ENABLED", "false")
        .env_remove("QUORUM_API_TOKEN")
        .env_remove("QUORUM_DATA_DIR")
        .env_remove("QUORUM_COVERAGE")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("NO_COLOR")
        .kill_on_drop(true)
}

/// `quorum ARGS` in `cwd`, isolated, stdout and stderr piped, stdin closed; not started.
pub fn command(args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    isolate(&mut cmd, cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Run `cmd` to its end and collect its output (a hang fails the test after [`HUNG`]).
pub async fn run(cmd: &mut Command) -> Output {
    tokio::time::timeout(HUNG, cmd.output())
        .await
        .expect("quorum did not exit in time")
        .expect("quorum ran")
}

/// THE runner: `quorum ARGS` in `cwd`, isolated, to its end.
pub async fn quorum(args: &[&str], cwd: &Path) -> Output {
    run(&mut command(args, cwd)).await
}

/// `quorum ARGS` as a client of a test node (it sends [`NODE_TOKEN`]).
pub async fn client(args: &[&str], cwd: &Path) -> Output {
    run(command(args, cwd).env("QUORUM_API_TOKEN", NODE_TOKEN)).await
}

/// `quorum review` of the code fixture through a node's API (`--cluster URLS`, several nodes
/// comma-separated), its reports in `work/OUT`: the exit code, report.json if it was written,
/// and what it said on stderr.
pub async fn review_through(urls: &str, work: &Path, out: &str) -> (i32, Option<Value>, String) {
    let out = work.join(out);
    let o = client(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--cluster",
            urls,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work,
    )
    .await;
    let report = std::fs::read_to_string(out.join("report.json"))
        .ok()
        .map(|s| serde_json::from_str(&s).unwrap());
    (code(&o), report, stderr(&o))
}

/// The exit code, stdout and stderr of a finished command.
pub fn parts(o: &Output) -> (i32, String, String) {
    (code(o), stdout(o), stderr(o))
}

/// The exit code (-1 when a signal ended the process).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Both streams, labelled: what an assertion message shows.
pub fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

/// A started `quorum node`: the process (killed on drop) and what the line it printed once it
/// served says — its API, cluster and dashboard addresses, where it serves them.
pub struct Node {
    pub child: Child,
    /// The whole line, for a test that checks more of it.
    pub banner: String,
    pub api: Option<String>,
    pub cluster: Option<String>,
    pub dashboard: Option<String>,
}

impl Node {
    /// The API URL; the node must serve one.
    pub fn api(&self) -> &str {
        self.api
            .as_deref()
            .unwrap_or_else(|| panic!("the node serves no API: {}", self.banner))
    }

    /// The cluster address peers join; the node must listen for peers.
    pub fn cluster(&self) -> &str {
        self.cluster
            .as_deref()
            .unwrap_or_else(|| panic!("the node listens for no peers: {}", self.banner))
    }

    /// Send `sig` (`-STOP`, `-CONT`, `-TERM`, ...) to the node; it must still run.
    pub fn signal(&self, sig: &str) {
        signal(&self.child, sig);
    }
}

/// Send `sig` (`-STOP`, `-CONT`, `-TERM`, ...) to `child` with `kill`; it must still run.
pub fn signal(child: &Child, sig: &str) {
    let pid = child.id().expect("the process exited").to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} failed");
}

/// `quorum node ARGS` in `work`, isolated, serving with [`NODE_TOKEN`]; not started. Its
/// stderr goes to the test's, unless the test says otherwise.
pub fn node_command(args: &[&str], work: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("node").args(args);
    isolate(&mut cmd, work)
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    cmd
}

/// THE node starter: spawn `cmd` (a [`node_command`], adjusted as the test needs) and wait for
/// the line the node prints once it serves; the node and the addresses that line names.
pub async fn spawn_node(cmd: &mut Command) -> Node {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("quorum node ran");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let line = tokio::time::timeout(NODE_START, lines.next_line())
        .await
        .expect("node did not start")
        .unwrap();
    let Some(banner) = line else {
        // It exited: what it said on stderr, when the test kept that.
        let out = child.wait_with_output().await.unwrap();
        panic!("the node exited: {}", String::from_utf8_lossy(&out.stderr));
    };
    let field = |key: &str| {
        banner
            .split(key)
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .map(str::to_string)
    };
    Node {
        api: field("api on "),
        cluster: field("cluster on "),
        dashboard: field("dashboard on "),
        banner,
        child,
    }
}

/// A one-node setup: `quorum node --name NAME` with its API on an ephemeral port, `server`
/// serving [`MODEL`] as its backend, its data dir `work/NAME-data`; the process and its API URL.
pub async fn start_node(server: &ScriptedServer, work: &Path, name: &str) -> (Child, String) {
    let data = work.join(format!("{name}-data"));
    let node = spawn_node(&mut node_command(
        &[
            "--api",
            "127.0.0.1:0",
            "--name",
            name,
            "--model",
            MODEL,
            "--backend",
            &format!("ollama={}", server.ollama_url()),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        work,
    ))
    .await;
    let api = node.api().to_string();
    (node.child, api)
}

/// Write `content` to `root/rel`, creating the directories on the way.
pub fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// A JSON file the test expects to be there (report.json, merge-readiness.json, ...).
/// A JSON file the CLI wrote. A report.json is also validated against the shipped report schema
/// (`tests/schemas/report.schema.json`), closed to unknown fields, so every report a CLI test
/// reads is checked against the contract.
pub fn read_json(path: &Path) -> Value {
    let body = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&body).unwrap();
    if path.file_name().is_some_and(|n| n == "report.json") {
        assert_valid_report(&doc, path);
    }
    doc
}

/// Fails with every violation when `report` does not satisfy the shipped report.json schema.
pub fn assert_valid_report(report: &Value, from: &Path) {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let shipped = repo_root().join("tests/schemas/report.schema.json");
        let text = std::fs::read_to_string(&shipped)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", shipped.display()));
        let mut schema: Value = serde_json::from_str(&text).unwrap();
        close_objects(&mut schema);
        jsonschema::validator_for(&schema).unwrap()
    });
    let errs: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errs.is_empty(),
        "{} does not match report.schema.json: {errs:#?}",
        from.display()
    );
}

/// `additionalProperties: false` wherever properties are listed.
fn close_objects(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(close_objects);
        }
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// One finding as a specialist answers it.
pub fn finding(title: &str, sev: &str, conf: f64, file: &str, line: u32, evidence: &str) -> Value {
    json!({"title": title, "severity": sev, "confidence": conf, "category": "security/test",
           "file": file, "line_start": line, "line_end": line, "evidence": evidence,
           "why_it_matters": "it matters", "suggested_fix": "fix it"})
}

/// A review as a script: scout, planner (the given tasks), each persona answering with its
/// findings, the verifier confirming, the synthesizer summarising.
pub fn scripted_review(tasks: Value, answers: &[(&str, Value)]) -> Script {
    let mut s = Script::new().models([MODEL]).rule(scout_rule()).rule(
        Rule::new("planner")
            .when_system(["You are the planner"])
            .reply(Reply::json(&json!({ "tasks": tasks }))),
    );
    for (persona, findings) in answers {
        s = s.rule(
            Rule::new(*persona)
                .when_system([format!("You are {persona}")])
                .reply(Reply::json(&json!({ "findings": findings }))),
        );
    }
    s.rule(verifier_confirms()).rule(synthesizer_rule())
}

/// The requests a persona's specialist made.
pub fn specialist<'a>(reqs: &'a [RecordedRequest], persona: &str) -> Vec<&'a RecordedRequest> {
    let who = format!("You are {persona}");
    reqs.iter().filter(|r| r.system.contains(&who)).collect()
}

/// The content between `<<<BEGIN UNTRUSTED label>>>` and its end marker in a prompt.
pub fn delimited<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("<<<BEGIN UNTRUSTED {label}>>>\n");
    let end = format!("\n<<<END UNTRUSTED {label}>>>");
    let start = text.find(&begin)? + begin.len();
    let len = text[start..].find(&end)?;
    Some(&text[start..start + len])
}

/// A report of the six-task script completed once: every task completed, each finding
/// reported once (no two share an anchor), six of them.
pub fn assert_complete_once(r: &Value) {
    assert_eq!(r["status"], "completed", "{}", r["status_reason"]);
    let tasks: Vec<&Value> = r["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"].as_str().unwrap().starts_with('t'))
        .collect();
    assert_eq!(tasks.len(), SIX_TASKS);
    assert!(
        tasks.iter().all(|t| t["status"] == "completed"),
        "{tasks:?}"
    );
    let mut anchors: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["anchor"].to_string())
        .collect();
    anchors.sort();
    let n = anchors.len();
    anchors.dedup();
    assert_eq!(anchors.len(), n, "duplicated findings");
    assert_eq!(n, SIX_TASKS, "{anchors:?}");
}

/// The six-task script of `tests/support` in which only the first `done` specialist tasks
/// (t1..) answer at once and every later one is held until the server is released: a review
/// stops at exactly "`done` tasks completed, the rest asked and unanswered", however fast or
/// slow the machine, and goes on when the test says so.
pub fn six_tasks_holding_after(done: usize) -> Script {
    let mut s = six_task_script(0, false);
    for rule in &mut s.rules {
        let held = rule
            .name
            .strip_prefix('t')
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n > done);
        if held {
            rule.replies = rule.replies.drain(..).map(Reply::held).collect();
        }
    }
    s
}

/// `git ARGS` in `dir` with a fixed identity and no user or system config (the tests that build
/// repositories as fixtures).
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs (the test needs the git binary to build its fixture)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
