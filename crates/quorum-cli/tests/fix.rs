//! `quorum fix PATH --from REPORT.json` with the binary, a scripted model server and scripted
//! test commands: a review's findings fixed in a private worktree, a fix kept only when the
//! tests and a blind verifier accept it, a regression discarded and retried with the failure
//! in the prompt until it is a circular fix, writes outside the worktree refused, the kept fix
//! delivered as a branch (git) or a patched copy (not git), and a test command that reaches
//! for the network cut off by the sandbox.

mod common;

use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::path::Path;

const APP: &str = "import hashlib


def digest(data):
    return hashlib.md5(data).hexdigest()


def check(token, expected):
    return token == expected
";

/// The project's "test suite": names each test the way `cargo test` prints it.
const TESTS: &str = r#"fail=0
if grep -q "def digest" app.py; then echo "test tests::digest ... ok"; else echo "test tests::digest ... FAILED"; fail=1; fi
if grep -q "def check" app.py; then echo "test tests::check ... ok"; else echo "test tests::check ... FAILED"; fail=1; fi
exit $fail
"#;

const FIXER: &str = "You fix one reported defect";
const BLIND: &str = "You are an independent reviewer";

fn project(root: &Path) {
    write(root, "app.py", APP);
    write(root, "tests.sh", TESTS);
}

/// The review that produces the report: one task, two confirmed findings.
fn review_script() -> Script {
    scripted_review(
        json!([{"id": "t1", "persona": "security_sentinel", "files": ["app.py"],
                "mandate": "Check the hashing and the token comparison."}]),
        &[(
            "security_sentinel",
            json!([
                finding(
                    "Weak hash for integrity",
                    "P1",
                    0.9,
                    "app.py",
                    5,
                    "return hashlib.md5(data).hexdigest()"
                ),
                finding(
                    "Token compared in non-constant time",
                    "P1",
                    0.9,
                    "app.py",
                    9,
                    "return token == expected"
                ),
            ]),
        )],
    )
}

/// Review `target` with the scripted server; the report.json path.
async fn reviewed(target: &Path, work: &Path) -> std::path::PathBuf {
    reviewed_by(target, work, review_script()).await
}

/// Review `target` with `script`; the report.json path.
async fn reviewed_by(target: &Path, work: &Path, script: Script) -> std::path::PathBuf {
    let server = ScriptedServer::start(script).await.unwrap();
    let out = work.join("review");
    let backend = format!("ollama={}", server.ollama_url());
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
            "--fail-on",
            "none",
        ],
        work,
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    out.join("report.json")
}

fn id_of(report: &Value, title: &str) -> String {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["title"] == title)
        .unwrap_or_else(|| panic!("no finding {title:?} in {report}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn fixer_requests(reqs: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    reqs.iter().filter(|r| r.system.contains(FIXER)).collect()
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_fix_is_kept_on_a_branch_and_a_regression_circles_until_given_up() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let head_before = git_out(&target, &["rev-parse", "HEAD"]);
    let report_path = reviewed(&target, work.path()).await;
    let report = read_json(&report_path);
    let weak = id_of(&report, "Weak hash for integrity");
    let timing = id_of(&report, "Token compared in non-constant time");

    let script = Script::new()
        .models([MODEL])
        // The hash fix: one exact edit, then done.
        .rule(
            Rule::new("fix-hash-edit")
                .when_system([FIXER])
                .when_all(["Weak hash for integrity"])
                .turn(0)
                .reply(Reply::tool("edit_file", json!({"path": "app.py", "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}))),
        )
        .rule(
            Rule::new("fix-hash-done")
                .when_system([FIXER])
                .when_all(["Weak hash for integrity"])
                .reply(Reply::json(&json!({"done": true, "summary": "FIXER-SAYS-SHA256"}))),
        )
        // The timing fix renames digest(): the test the kept hash fix passed now fails.
        .rule(
            Rule::new("fix-timing-edit")
                .when_system([FIXER])
                .when_all(["Token compared in non-constant time"])
                .turn(0)
                .reply(Reply::tool("edit_file", json!({"path": "app.py",
                    "old": "def digest(data):", "new": "def hashed(data):"}))),
        )
        .rule(
            Rule::new("fix-timing-done")
                .when_system([FIXER])
                .when_all(["Token compared in non-constant time"])
                .reply(Reply::json(&json!({"done": true, "summary": "renamed"}))),
        )
        .rule(
            Rule::new("blind-verifier")
                .when_system([BLIND])
                .reply(Reply::json(&json!({"still_holds": false, "reason": "sha256 replaces md5"}))),
        );
    let server = ScriptedServer::start(script).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("fix-out");
    let o = quorum(
        &[
            "fix",
            target.to_str().unwrap(),
            "--from",
            report_path.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--test-cmd",
            "bash tests.sh",
            "--unsandboxed",
        ],
        work.path(),
    )
    .await;
    // One of two findings is left unfixed: exit 1, as a review with findings left.
    assert_eq!(code(&o), 1, "{}", text(&o));
    let fr = read_json(&out.join("fix-report.json"));
    let entry = |id: &str| {
        fr["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["finding_id"] == id)
            .unwrap()
            .clone()
    };
    let kept = entry(&weak);
    assert_eq!(kept["status"], "kept", "{fr}");
    assert_eq!(kept["attempts"].as_array().unwrap().len(), 1);
    assert!(kept["attempts"][0]["oracles"]["tests"]["passed"]
        .as_bool()
        .unwrap());
    let given_up = entry(&timing);
    assert_eq!(given_up["status"], "unfixed");
    assert_eq!(given_up["unfixed_because"], "circular_fix");
    let attempts = given_up["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{given_up}");
    for a in attempts {
        assert_eq!(a["failure"]["kind"], "regression", "{a}");
        assert_eq!(a["failure"]["detail"], "tests::digest");
    }
    assert_eq!(fr["stop"], "settled");

    // The second and third attempts were told why the one before was discarded.
    let reqs = server.requests();
    let timing_first_turns: Vec<&RecordedRequest> = fixer_requests(&reqs)
        .into_iter()
        .filter(|r| {
            r.text.contains("Token compared in non-constant time")
                && r.body["messages"].as_array().unwrap().len() == 2
        })
        .collect();
    assert_eq!(timing_first_turns.len(), 3);
    assert!(!timing_first_turns[0]
        .text
        .contains("previous attempt was discarded"));
    for r in &timing_first_turns[1..] {
        let why = delimited(&r.text, "discarded attempt").expect("the failure in the prompt");
        assert!(why.contains("tests::digest"), "{why}");
    }
    // The fixer sees the finding delimited, and the file's numbered lines around it.
    let first = fixer_requests(&reqs)[0];
    let finding = delimited(&first.text, "finding").expect("the finding, delimited");
    assert!(
        finding.contains("app.py") && finding.contains("lines: 5-5"),
        "{finding}"
    );
    // ... why the review's verifiers confirmed it (report.json's verification ledger) ...
    let because = delimited(&first.text, "verifier reasons").expect("the verifier's reason");
    assert_eq!(because, "- the cited lines show it\n");
    let lines = delimited(&first.text, "app.py").expect("the file's lines, delimited");
    assert!(
        lines.contains("    5      return hashlib.md5(data).hexdigest()"),
        "{lines}"
    );
    // The blind verifier saw the diff, not what the fixer said about it.
    let blind: Vec<&RecordedRequest> = reqs.iter().filter(|r| r.system.contains(BLIND)).collect();
    // Asked once: the regressions failed their tests, so no model was asked to judge them.
    assert_eq!(blind.len(), 1);
    for r in &blind {
        assert!(!r.text.contains("FIXER-SAYS-SHA256"));
        let diff = delimited(&r.text, "diff").expect("the diff, delimited");
        assert!(
            diff.contains("+    return hashlib.sha256(data).hexdigest()"),
            "{diff}"
        );
    }

    // The kept fix is one commit on a new branch; the user's checkout is untouched.
    let branch = fr["branch"].as_str().expect("a branch").to_string();
    assert!(branch.starts_with("quorum/fix-"), "{branch}");
    assert_eq!(git_out(&target, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git_out(&target, &["status", "--porcelain"]), "");
    assert_eq!(std::fs::read_to_string(target.join("app.py")).unwrap(), APP);
    let log = git_out(
        &target,
        &["log", "--format=%s", &format!("{head_before}..{branch}")],
    );
    assert_eq!(log, format!("quorum fix {weak}: Weak hash for integrity"));
    let body = git_out(&target, &["log", "-1", "--format=%b", &branch]);
    assert!(body.contains("tests, blind verifier"), "{body}");
    let fixed = git_out(&target, &["show", &format!("{branch}:app.py")]);
    assert!(
        fixed.contains("hashlib.sha256(data)") && fixed.contains("def digest"),
        "{fixed}"
    );
    assert_eq!(
        kept["commit"].as_str().unwrap(),
        git_out(&target, &["rev-parse", &branch])
    );
    // fixes.patch applies to the checkout and gives the same file.
    let patch = std::fs::read_to_string(out.join("fixes.patch")).unwrap();
    assert!(patch.contains("-    return hashlib.md5(data).hexdigest()\n+    return hashlib.sha256(data).hexdigest()"), "{patch}");
    git(
        &target,
        &[
            "apply",
            "--check",
            out.join("fixes.patch").to_str().unwrap(),
        ],
    );
    let md = std::fs::read_to_string(out.join("fix-report.md")).unwrap();
    assert!(md.contains("**1 of 2 fixed**"), "{md}");
    assert!(md.contains("circular fix"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_worktree_are_refused_and_a_plain_directory_gets_a_patched_copy() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    write(&target, ".env", "API_KEY=do-not-touch\n");
    let report_path = reviewed(&target, work.path()).await;
    let report = read_json(&report_path);
    let weak = id_of(&report, "Weak hash for integrity");

    let script = Script::new()
        .models([MODEL])
        .rule(
            Rule::new("escape")
                .when_system([FIXER])
                .turn(0)
                .reply(Reply::tools([
                    ("write_file", json!({"path": "../escaped.py", "content": "x = 1\n"})),
                    ("edit_file", json!({"path": "/etc/hostname", "old": "a", "new": "b"})),
                    ("edit_file", json!({"path": ".env", "old": "do-not-touch", "new": "stolen"})),
                    ("run_shell", json!({"cmd": "curl example.com"})),
                ])),
        )
        .rule(
            Rule::new("then-fix")
                .when_system([FIXER])
                .turn(1)
                .reply(Reply::tool("edit_file", json!({"path": "app.py", "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}))),
        )
        .rule(
            Rule::new("done")
                .when_system([FIXER])
                .reply(Reply::json(&json!({"done": true, "summary": "sha256"}))),
        );
    let server = ScriptedServer::start(script).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("fix-out");
    let o = quorum(
        &[
            "fix",
            target.to_str().unwrap(),
            "--from",
            report_path.to_str().unwrap(),
            "--findings",
            &weak,
            "--no-verifier",
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(!work.path().join("escaped.py").exists());
    assert_eq!(
        std::fs::read_to_string(target.join(".env")).unwrap(),
        "API_KEY=do-not-touch\n"
    );
    // Each refusal went back to the model as a tool error it can read.
    let second = server
        .requests()
        .into_iter()
        .find(|r| r.system.contains(FIXER) && r.body["messages"].as_array().unwrap().len() > 2)
        .expect("the turn after the tool calls");
    for said in [
        "outside the worktree",
        "is a secrets file",
        "unknown tool \"run_shell\"",
    ] {
        assert!(second.text.contains(said), "{said} not in {}", second.text);
    }
    let fr = read_json(&out.join("fix-report.json"));
    assert_eq!(fr["fixes"][0]["status"], "kept", "{fr}");
    assert!(fr.get("branch").is_none());
    // Not a git repository: the patched copy, the original untouched, no test command.
    let copy = Path::new(fr["patched_copy"].as_str().unwrap());
    assert!(std::fs::read_to_string(copy.join("app.py"))
        .unwrap()
        .contains("hashlib.sha256(data)"));
    assert!(copy.join("tests.sh").exists());
    assert!(!copy.join(".env").exists(), "a secrets file was copied");
    assert_eq!(std::fs::read_to_string(target.join("app.py")).unwrap(), APP);
    assert!(fr.get("test_command").is_none());
    assert!(stderr(&o).contains("tests: none"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_command_that_reaches_for_the_network_is_cut_off_by_the_sandbox() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // The "tests" phone home first; they pass only if the connection was made.
    write(
        &target,
        "phone.sh",
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected\n"),
    );
    let report_path = reviewed(&target, work.path()).await;
    let report = read_json(&report_path);
    let weak = id_of(&report, "Weak hash for integrity");
    let script = Script::new().models([MODEL]).rule(
        Rule::new("no-change")
            .when_system([FIXER])
            .reply(Reply::json(&json!({"done": true, "summary": "nothing"}))),
    );
    let server = ScriptedServer::start(script).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("fix-out");
    let o = quorum(
        &[
            "fix",
            target.to_str().unwrap(),
            "--from",
            report_path.to_str().unwrap(),
            "--findings",
            &weak,
            "--no-verifier",
            "--test-cmd",
            "bash phone.sh",
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    if code(&o) == 2 {
        // This machine has neither bubblewrap nor user namespaces: quorum must refuse, not run
        // the tests unisolated.
        assert!(
            stderr(&o).contains("cannot sandbox the test command"),
            "{}",
            text(&o)
        );
        assert!(
            listener.accept().is_err(),
            "the test command ran without a sandbox"
        );
        return;
    }
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        listener.accept().is_err(),
        "the sandboxed test command reached the network"
    );
    let fr = read_json(&out.join("fix-report.json"));
    assert!(
        fr["sandbox"].as_str().unwrap().starts_with("sandboxed"),
        "{fr}"
    );
    assert_eq!(fr["baseline_failing"], json!(["(the test command)"]));
    // The agent changed nothing three times: a circular fix, never kept.
    assert_eq!(fr["fixes"][0]["unfixed_because"], "circular_fix");
    assert_eq!(
        fr["fixes"][0]["attempts"][0]["oracles"]["edit"]["kind"],
        "no_change"
    );
}

/// An analyzer stand-in: rule H1 fires on every line mentioning md5, in ruff's JSON.
fn fake_weakhash(bin: &Path) {
    script(
        bin,
        "weakhash",
        r#"PATH=/usr/bin:/bin
out="["; sep=""
for f in "$@"; do
  case $f in /*) p=$f;; *) p=$PWD/$f;; esac
  for n in $(grep -n 'md5' "$f" | cut -d: -f1); do
    out="$out$sep{\"code\": \"H1\", \"filename\": \"$p\", \"location\": {\"row\": $n, \"column\": 1}, \"end_location\": {\"row\": $n, \"column\": 5}, \"message\": \"weak hash md5\", \"fix\": null, \"url\": null}"
    sep=", "
  done
done
echo "$out]""#,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_the_analyzer_still_flags_is_discarded_and_the_next_one_kept() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_weakhash(&bin);
    let catalog = work.path().join("analyzers.yaml");
    std::fs::write(
        &catalog,
        "analyzers:\n  - name: weakhash\n    command: weakhash\n    args: [\"{files}\"]\n    files: [\"*.py\"]\n    format: ruff_json\n    category: security\n    confidence: 0.9\n    severity:\n      default: P1\n",
    )
    .unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let with_analyzer = |args: &[&str]| {
        let mut c = command(args, work.path());
        c.env("PATH", &path)
            .env("QUORUM_ANALYZERS__CATALOG", &catalog)
            .env_remove("QUORUM_ANALYZERS__ENABLED");
        c
    };
    // The review: the specialist finds nothing; the analyzer's lead is confirmed.
    let server = ScriptedServer::start(scripted_review(
        json!([{"id": "t1", "persona": "security_sentinel", "files": ["app.py"], "mandate": "Check hashing."}]),
        &[("security_sentinel", json!([]))],
    ))
    .await
    .unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let review_out = work.path().join("review");
    let o = run(&mut with_analyzer(&[
        "review",
        target.to_str().unwrap(),
        "--backend",
        &backend,
        "--model",
        MODEL,
        "--out",
        review_out.to_str().unwrap(),
        "--quiet",
        "--fail-on",
        "none",
    ]))
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let report_path = review_out.join("report.json");
    let report = read_json(&report_path);
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["reporters"][0]["persona"] == "analyzer:weakhash")
        .unwrap_or_else(|| panic!("the analyzer's finding in {report}"))
        .clone();

    let discarded = "previous attempt was discarded";
    let script = Script::new()
        .models([MODEL])
        // First attempt: silences nothing — the analyzer still sees md5.
        .rule(
            Rule::new("first")
                .when_system([FIXER])
                .when_none([discarded])
                .turn(0)
                .reply(Reply::tool("edit_file", json!({"path": "app.py", "old": "hashlib.md5(data)",
                    "new": "hashlib.md5(data, usedforsecurity=False)"}))),
        )
        .rule(
            Rule::new("second")
                .when_system([FIXER])
                .when_all([discarded])
                .turn(0)
                .reply(Reply::tool("edit_file", json!({"path": "app.py", "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}))),
        )
        .rule(
            Rule::new("done")
                .when_system([FIXER])
                .reply(Reply::json(&json!({"done": true, "summary": "changed the hash"}))),
        );
    let server = ScriptedServer::start(script).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("fix-out");
    let o = run(&mut with_analyzer(&[
        "fix",
        target.to_str().unwrap(),
        "--from",
        report_path.to_str().unwrap(),
        "--findings",
        finding["id"].as_str().unwrap(),
        "--no-verifier",
        "--backend",
        &backend,
        "--model",
        MODEL,
        "--out",
        out.to_str().unwrap(),
    ]))
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let fr = read_json(&out.join("fix-report.json"));
    let attempts = fr["fixes"][0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{fr}");
    assert_eq!(attempts[0]["failure"]["kind"], "analyzer_still_fires");
    assert_eq!(attempts[1]["kept"], true);
    assert_eq!(
        attempts[1]["oracles"]["analyzer"]["rule_still_fires"],
        false
    );
    assert_eq!(attempts[1]["oracles"]["analyzer"]["new_hits"], json!([]));
    // The fixer was told which rule reported it, and why the first attempt was discarded.
    let reqs = server.requests();
    let second = reqs
        .iter()
        .find(|r| r.system.contains(FIXER) && r.text.contains(discarded))
        .expect("a second attempt");
    assert!(delimited(&second.text, "finding")
        .unwrap()
        .contains("reported by analyzer weakhash, rule H1"));
    assert!(delimited(&second.text, "discarded attempt")
        .unwrap()
        .contains("analyzer rule"));
    let copy = Path::new(fr["patched_copy"].as_str().unwrap());
    assert!(std::fs::read_to_string(copy.join("app.py"))
        .unwrap()
        .contains("hashlib.sha256(data)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_loop_a_resumed_run_never_redoes_a_kept_fix() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let report_path = reviewed(&target, work.path()).await;
    let report = read_json(&report_path);
    let weak = id_of(&report, "Weak hash for integrity");
    let timing = id_of(&report, "Token compared in non-constant time");
    // Every run of the tests leaves a line here (an absolute path: the environment is cleared).
    let runs = work.path().join("test-runs");
    let test_cmd = format!("echo run >> {}; bash tests.sh", runs.display());
    let test_runs = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let hash_fix = |s: Script| {
        s.rule(
            Rule::new("fix-hash-edit")
                .when_system([FIXER])
                .when_all(["Weak hash for integrity"])
                .turn(0)
                .reply(Reply::tool("edit_file", json!({"path": "app.py", "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}))),
        )
        .rule(
            Rule::new("fix-hash-done")
                .when_system([FIXER])
                .when_all(["Weak hash for integrity"])
                .reply(Reply::json(&json!({"done": true, "summary": "sha256"}))),
        )
        .rule(
            Rule::new("blind-verifier")
                .when_system([BLIND])
                .reply(Reply::json(&json!({"still_holds": false, "reason": "fixed"}))),
        )
    };
    // The first run: the hash fix is kept, then the timing fix's agent is never answered.
    let first = ScriptedServer::start(
        hash_fix(Script::new().models([MODEL])).rule(
            Rule::new("timing-held")
                .when_system([FIXER])
                .when_all(["Token compared in non-constant time"])
                .reply(Reply::hang()),
        ),
    )
    .await
    .unwrap();
    let mut seen = first.subscribe();
    let out = work.path().join("fix-out");
    let args = |backend: &str| -> Vec<String> {
        [
            "fix",
            target.to_str().unwrap(),
            "--from",
            report_path.to_str().unwrap(),
            "--backend",
            backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--test-cmd",
            &test_cmd,
            "--unsandboxed",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let backend = format!("ollama={}", first.ollama_url());
    let first_args = args(&backend);
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let mut child = command(&first_args, work.path()).spawn().unwrap();
    loop {
        let r = tokio::time::timeout(HUNG, seen.recv())
            .await
            .expect("the timing attempt is asked")
            .unwrap();
        if r.system.contains(FIXER) && r.text.contains("Token compared in non-constant time") {
            break;
        }
    }
    child.kill().await.unwrap();
    // The base and the kept hash fix each ran the tests once.
    assert_eq!(test_runs(), 2);

    // Without --resume the interrupted run is named, not overwritten.
    let o = quorum(&first_args, work.path()).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        stderr(&o).contains("continue it with --resume"),
        "{}",
        stderr(&o)
    );

    // The resumed run: only the timing finding is asked again, and this time it is fixed.
    let second = ScriptedServer::start(
        hash_fix(Script::new().models([MODEL]))
            .rule(
                Rule::new("timing-edit")
                    .when_system([FIXER])
                    .when_all(["Token compared in non-constant time"])
                    .turn(0)
                    .reply(Reply::tool("edit_file", json!({"path": "app.py",
                        "old": "return token == expected", "new": "return hmac.compare_digest(token, expected)"}))),
            )
            .rule(
                Rule::new("timing-done")
                    .when_system([FIXER])
                    .reply(Reply::json(&json!({"done": true, "summary": "compare_digest"}))),
            ),
    )
    .await
    .unwrap();
    let backend = format!("ollama={}", second.ollama_url());
    let mut resume_args = args(&backend);
    resume_args.push("--resume".into());
    let resume_args: Vec<&str> = resume_args.iter().map(String::as_str).collect();
    let o = quorum(&resume_args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        stderr(&o).contains("resumed: 1 fix(es) kept before the interruption"),
        "{}",
        stderr(&o)
    );
    let asked: Vec<RecordedRequest> = second
        .requests()
        .into_iter()
        .filter(|r| r.system.contains(FIXER))
        .collect();
    assert!(!asked.is_empty());
    assert!(
        asked
            .iter()
            .all(|r| !r.text.contains("Weak hash for integrity")),
        "the kept fix was redone"
    );
    // The base's tests were recorded: only the timing fix ran them again.
    assert_eq!(test_runs(), 3);
    let fr = read_json(&out.join("fix-report.json"));
    assert!(
        fr["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["status"] == "kept"),
        "{fr}"
    );
    // Both fixes on the branch, in the order they were kept, the second on top of the first.
    let branch = fr["branch"].as_str().unwrap();
    let log = git_out(&target, &["log", "--format=%s", "-2", branch]);
    assert_eq!(log, format!("quorum fix {timing}: Token compared in non-constant time\nquorum fix {weak}: Weak hash for integrity"));
    let fixed = git_out(&target, &["show", &format!("{branch}:app.py")]);
    assert!(
        fixed.contains("hashlib.sha256(data)") && fixed.contains("hmac.compare_digest"),
        "{fixed}"
    );
}

/// `quorum fix PATH --flow self-improve`: review, fix, review the fixed tree, in cycles. The
/// scripted specialist answers from what the file holds, so each cycle's review sees the
/// fixes of the cycles before it: cycle 1 finds the weak hash, cycle 2 (on the hashed tree)
/// the timing comparison, cycle 3 nothing — the run ends with both fixes on one branch. A flow
/// whose threshold the first cycle misses stops after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_improvement_cycles_build_on_the_fixes_before_them_until_nothing_is_left() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let head_before = git_out(&target, &["rev-parse", "HEAD"]);
    let server = ScriptedServer::start(improve_script(false)).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("improve-out");
    let run = |flow: String, out: std::path::PathBuf| {
        let backend = backend.clone();
        let target = target.clone();
        let cwd = work.path().to_path_buf();
        async move {
            quorum(
                &[
                    "fix",
                    target.to_str().unwrap(),
                    "--flow",
                    &flow,
                    "--backend",
                    &backend,
                    "--model",
                    MODEL,
                    "--out",
                    out.to_str().unwrap(),
                    "--test-cmd",
                    "bash tests.sh",
                    "--unsandboxed",
                ],
                &cwd,
            )
            .await
        }
    };
    let o = run("self-improve".into(), out.clone()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));

    let fr = read_json(&out.join("fix-report.json"));
    let cycles = fr["cycles"].as_array().unwrap();
    assert_eq!(cycles.len(), 3, "{fr}");
    assert_eq!(
        cycles
            .iter()
            .map(|c| c["kept"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 1, 0]
    );
    assert_eq!(fr["cycles_stop"], "nothing_to_fix");
    let fixes = fr["fixes"].as_array().unwrap();
    assert_eq!(
        fixes
            .iter()
            .map(|f| (
                f["cycle"].as_u64().unwrap(),
                f["title"].as_str().unwrap(),
                f["status"].as_str().unwrap()
            ))
            .collect::<Vec<_>>(),
        vec![
            (1, "Weak hash for integrity", "kept"),
            (2, "Token compared in non-constant time", "kept")
        ]
    );
    // Each cycle's review is kept, and the second was of the tree with the first fix.
    assert!(out.join("cycle-1/review/report.json").is_file());
    let second = read_json(&out.join("cycle-2/review/report.json"));
    assert_eq!(
        second["findings"][0]["title"],
        "Token compared in non-constant time"
    );
    let reqs = server.requests();
    let timing_fix = fixer_requests(&reqs)
        .into_iter()
        .find(|r| r.text.contains("Token compared in non-constant time"))
        .expect("the timing finding was fixed");
    let lines = delimited(&timing_fix.text, "app.py").expect("the file's lines");
    assert!(lines.contains("hashlib.sha256(data)"), "{lines}");

    // One branch, one commit per kept fix in cycle order; the checkout is untouched.
    let branch = fr["branch"].as_str().unwrap().to_string();
    assert_eq!(git_out(&target, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git_out(&target, &["status", "--porcelain"]), "");
    let log = git_out(
        &target,
        &["log", "--format=%s", &format!("{head_before}..{branch}")],
    );
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        vec![
            "quorum fix c2/F001: Token compared in non-constant time",
            "quorum fix c1/F001: Weak hash for integrity"
        ],
        "{log}"
    );
    let fixed = git_out(&target, &["show", &format!("{branch}:app.py")]);
    assert!(
        fixed.contains("hashlib.sha256(data)")
            && fixed.contains("hmac.compare_digest(token, expected)"),
        "{fixed}"
    );
    let patch = std::fs::read_to_string(out.join("fixes.patch")).unwrap();
    assert!(
        patch.contains("+import hmac")
            && patch.contains("+    return hashlib.sha256(data).hexdigest()"),
        "{patch}"
    );
    let md = std::fs::read_to_string(out.join("fix-report.md")).unwrap();
    assert!(
        md.contains("3 review-and-fix cycle(s)") && md.contains("c2/F001"),
        "{md}"
    );

    // A flow that asks two kept fixes of a cycle stops after the first.
    let flow = std::fs::read_to_string(repo_root().join("flows/self-improve.yaml"))
        .unwrap()
        .replace("min_kept: 1 ", "min_kept: 2 ");
    assert!(flow.contains("min_kept: 2"));
    let strict = work.path().join("strict.yaml");
    std::fs::write(&strict, flow).unwrap();
    let out2 = work.path().join("strict-out");
    let o = run(strict.display().to_string(), out2.clone()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let fr = read_json(&out2.join("fix-report.json"));
    assert_eq!(fr["cycles"].as_array().unwrap().len(), 1, "{fr}");
    assert_eq!(fr["cycles_stop"], "below_threshold");

    // A review cannot run the flow by itself: it says how to run it.
    let o = quorum(
        &[
            "review",
            target.to_str().unwrap(),
            "--flow",
            "self-improve",
            "--backend",
            &backend,
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(stderr(&o).contains("--flow self-improve"), "{}", stderr(&o));
    // Nor does a node, which has no target to fix: it refuses before any model call.
    let (mut node, url) = start_node(&server, work.path(), "n1").await;
    let before = server.requests().len();
    let o = client(
        &[
            "review",
            target.to_str().unwrap(),
            "--flow",
            "self-improve",
            "--cluster",
            &url,
            "--quiet",
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        stderr(&o).contains("quorum fix PATH --flow self-improve"),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.requests().len(), before);
    node.kill().await.unwrap();
}

/// The self-improvement script: the specialist reports what the tree it reads still holds (the
/// weak hash, then the timing comparison, then nothing), the fixer fixes each, the verifiers
/// agree. `hold_timing`: the timing fix is never answered (a run to kill).
fn improve_script(hold_timing: bool) -> Script {
    let sentinel = "You are security_sentinel";
    let hash = finding(
        "Weak hash for integrity",
        "P1",
        0.9,
        "app.py",
        5,
        "return hashlib.md5(data).hexdigest()",
    );
    let timing = finding(
        "Token compared in non-constant time",
        "P1",
        0.9,
        "app.py",
        9,
        "return token == expected",
    );
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(Rule::new("planner").when_system(["You are the planner"]).reply(Reply::json(
            &json!({"tasks": [{"id": "t1", "persona": "security_sentinel", "files": ["app.py"],
                    "mandate": "Check the hashing and the token comparison."}]}),
        )))
        // The specialist reads the file, then reports what the tree still holds.
        .rule(
            Rule::new("read")
                .when_system([sentinel])
                .turn(0)
                .reply(Reply::tool("file_read", json!({"path": "app.py"}))),
        )
        .rule(
            Rule::new("clean")
                .when_system([sentinel])
                .when_all([
                    "return hashlib.sha256(data).hexdigest()",
                    "return hmac.compare_digest(token, expected)",
                ])
                .reply(Reply::json(&json!({"findings": []}))),
        )
        .rule(
            Rule::new("timing")
                .when_system([sentinel])
                .when_all(["return hashlib.sha256(data).hexdigest()"])
                .reply(Reply::json(&json!({"findings": [timing.clone()]}))),
        )
        .rule(
            Rule::new("hash")
                .when_system([sentinel])
                .reply(Reply::json(&json!({"findings": [hash.clone()]}))),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
        .rule(
            Rule::new("fix-hash")
                .when_system([FIXER])
                .when_all(["Weak hash for integrity"])
                .reply(Reply::json(&json!({"edits": [{"path": "app.py",
                    "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}],
                    "summary": "sha256"}))),
        )
        .rule(if hold_timing {
            Rule::new("timing-held")
                .when_system([FIXER])
                .when_all(["Token compared in non-constant time"])
                .reply(Reply::hang())
        } else {
            Rule::new("fix-timing")
                .when_system([FIXER])
                .when_all(["Token compared in non-constant time"])
                .reply(Reply::json(&json!({"edits": [
                    {"path": "app.py", "old": "import hashlib\n", "new": "import hashlib\nimport hmac\n"},
                    {"path": "app.py", "old": "return token == expected",
                     "new": "return hmac.compare_digest(token, expected)"}],
                    "summary": "constant time"})))
        })
        .rule(
            Rule::new("blind-verifier")
                .when_system([BLIND])
                .reply(Reply::json(&json!({"still_holds": false, "reason": "gone"}))),
        )
}

/// A self-improvement run killed (kill -9) in cycle 2's fix loop resumes with --resume: cycle
/// 1 (its review and its kept fix) is not redone, cycle 2's finished review is not asked
/// again, and the branch holds both fixes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_self_improvement_run_resumes_without_redoing_a_cycle() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let head_before = git_out(&target, &["rev-parse", "HEAD"]);
    let out = work.path().join("improve-out");
    let args = |backend: &str, resume: bool| -> Vec<String> {
        let mut a: Vec<String> = [
            "fix",
            target.to_str().unwrap(),
            "--flow",
            "self-improve",
            "--backend",
            backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--test-cmd",
            "bash tests.sh",
            "--unsandboxed",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let first = ScriptedServer::start(improve_script(true)).await.unwrap();
    let mut seen = first.subscribe();
    let first_args = args(&format!("ollama={}", first.ollama_url()), false);
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let mut child = command(&first_args, work.path()).spawn().unwrap();
    loop {
        let r = tokio::time::timeout(HUNG, seen.recv())
            .await
            .expect("cycle 2's timing fix is asked")
            .unwrap();
        if r.system.contains(FIXER) && r.text.contains("Token compared in non-constant time") {
            break;
        }
    }
    child.kill().await.unwrap();
    assert!(out.join("cycle-1/cycle.json").is_file());
    assert!(!out.join("cycle-2/cycle.json").exists());

    // Without --resume the interrupted run is named, not overwritten.
    let o = quorum(&first_args, work.path()).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        stderr(&o).contains("continue it with --resume"),
        "{}",
        stderr(&o)
    );

    let second = ScriptedServer::start(improve_script(false)).await.unwrap();
    let resume_args = args(&format!("ollama={}", second.ollama_url()), true);
    let resume_args: Vec<&str> = resume_args.iter().map(String::as_str).collect();
    let o = quorum(&resume_args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        stderr(&o)
            .contains("cycle 1: finished before the interruption (1 fix(es) kept); not redone"),
        "{}",
        stderr(&o)
    );
    let reqs = second.requests();
    // Cycle 1 is not redone: its fix is not asked again, and no review reads the md5 tree.
    assert!(fixer_requests(&reqs)
        .iter()
        .all(|r| !r.text.contains("Weak hash for integrity")));
    let reviews = reqs
        .iter()
        .filter(|r| r.system.contains("You are the planner"))
        .count();
    assert_eq!(reviews, 1, "only cycle 3's review is new");
    let fr = read_json(&out.join("fix-report.json"));
    assert_eq!(fr["cycles"].as_array().unwrap().len(), 3, "{fr}");
    assert_eq!(fr["cycles_stop"], "nothing_to_fix");
    let branch = fr["branch"].as_str().unwrap().to_string();
    let log = git_out(
        &target,
        &["log", "--format=%s", &format!("{head_before}..{branch}")],
    );
    assert_eq!(log.lines().count(), 2, "{log}");
    let fixed = git_out(&target, &["show", &format!("{branch}:app.py")]);
    assert!(
        fixed.contains("hashlib.sha256(data)") && fixed.contains("hmac.compare_digest"),
        "{fixed}"
    );
    // The cycles' copies of the target are gone once the run has finished.
    assert!(!out.join("cycle-2/tree").exists());
}

/// `--jobs 3`: three fix agents work at once, each on the fixes kept when it started. The hash
/// fix lands first; the timing fix, made on the unfixed base, merges cleanly onto it (other
/// lines) and is judged on the merged tree; the digest-length fix changed the hash fix's line,
/// so it conflicts, is tried once more on the current tree (rebased) and is kept then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_fixes_merge_and_a_conflicting_one_is_rebased_once() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let head_before = git_out(&target, &["rev-parse", "HEAD"]);
    let mut length = finding(
        "Digest length not bounded",
        "P1",
        0.9,
        "app.py",
        5,
        "return hashlib.md5(data).hexdigest()",
    );
    length["symbol"] = json!("digest");
    let review = scripted_review(
        json!([{"id": "t1", "persona": "security_sentinel", "files": ["app.py"],
                "mandate": "Check the hashing and the token comparison."}]),
        &[(
            "security_sentinel",
            json!([
                finding(
                    "Weak hash for integrity",
                    "P1",
                    0.9,
                    "app.py",
                    5,
                    "return hashlib.md5(data).hexdigest()"
                ),
                finding(
                    "Token compared in non-constant time",
                    "P1",
                    0.9,
                    "app.py",
                    9,
                    "return token == expected"
                ),
                length,
            ]),
        )],
    );
    let report_path = reviewed_by(&target, work.path(), review).await;
    assert_eq!(
        read_json(&report_path)["findings"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let edits = |edits: Value| Reply::json(&json!({"edits": edits, "summary": "done"}));
    let script = Script::new()
        .models([MODEL])
        .rule(
            Rule::new("fix-hash")
                .when_system([FIXER])
                .when_all(["Weak hash for integrity"])
                .reply(edits(json!([{"path": "app.py", "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}]))),
        )
        // Held until the hash fix is being judged, so both start from the unfixed base.
        .rule(
            Rule::new("fix-timing")
                .when_system([FIXER])
                .when_all(["Token compared in non-constant time"])
                .reply(Reply::held(edits(json!([
                    {"path": "app.py", "old": "import hashlib\n", "new": "import hashlib\nimport hmac\n"},
                    {"path": "app.py", "old": "return token == expected", "new": "return hmac.compare_digest(token, expected)"}
                ])))),
        )
        .rule(
            Rule::new("fix-length-rebased")
                .when_system([FIXER])
                .when_all(["Digest length not bounded", "no longer applies"])
                .reply(edits(json!([{"path": "app.py", "old": ".hexdigest()", "new": ".hexdigest()[:32]"}]))),
        )
        .rule(
            Rule::new("fix-length")
                .when_system([FIXER])
                .when_all(["Digest length not bounded"])
                .reply(Reply::held(edits(json!([{"path": "app.py", "old": ".hexdigest()", "new": ".hexdigest()[:32]"}])))),
        )
        .rule(
            Rule::new("blind-verifier")
                .when_system([BLIND])
                .reply(Reply::json(&json!({"still_holds": false, "reason": "gone"}))),
        );
    let server = ScriptedServer::start(script).await.unwrap();
    let mut seen = server.subscribe();
    let out = work.path().join("fix-out");
    let backend = format!("ollama={}", server.ollama_url());
    let args = [
        "fix",
        target.to_str().unwrap(),
        "--from",
        report_path.to_str().unwrap(),
        "--backend",
        &backend,
        "--model",
        MODEL,
        "--out",
        out.to_str().unwrap(),
        "--test-cmd",
        "bash tests.sh",
        "--unsandboxed",
        "--jobs",
        "3",
    ];
    let child = command(&args, work.path()).spawn().unwrap();
    // All three agents are asked before any fix is judged: they work at once.
    let mut asked = std::collections::BTreeSet::new();
    loop {
        let r = tokio::time::timeout(HUNG, seen.recv())
            .await
            .expect("the agents and the hash fix's verifier are asked")
            .unwrap();
        if r.system.contains(FIXER) {
            for t in ["Weak hash", "Token compared", "Digest length"] {
                if r.text.contains(t) {
                    asked.insert(t);
                }
            }
        }
        if r.system.contains(BLIND) {
            assert_eq!(
                asked.len(),
                3,
                "the blind verifier came before all three agents: {asked:?}"
            );
            break;
        }
    }
    server.release();
    let o = tokio::time::timeout(HUNG, child.wait_with_output())
        .await
        .expect("the fix run ends")
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));

    let fr = read_json(&out.join("fix-report.json"));
    let by_title = |t: &str| -> Value {
        fr["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["title"] == t)
            .unwrap_or_else(|| panic!("{t} in {fr}"))
            .clone()
    };
    let timing = by_title("Token compared in non-constant time");
    assert_eq!(timing["status"], "kept", "{timing}");
    assert_eq!(
        timing["attempts"].as_array().unwrap().len(),
        1,
        "merged cleanly: {timing}"
    );
    // Judged on the merged tree: the tests ran with both changes.
    assert!(timing["attempts"][0]["oracles"]["tests"]["passed"]
        .as_bool()
        .unwrap());
    let length = by_title("Digest length not bounded");
    assert_eq!(length["status"], "kept", "{length}");
    assert_eq!(
        length["attempts"][0]["failure"]["kind"], "conflict",
        "{length}"
    );
    assert_eq!(length["attempts"][1]["kept"], true, "{length}");
    // The rebased attempt saw the kept hash fix in its lines.
    let reqs = server.requests();
    let rebased = fixer_requests(&reqs)
        .into_iter()
        .find(|r| {
            r.text.contains("Digest length not bounded") && r.text.contains("no longer applies")
        })
        .expect("the rebased attempt");
    let lines = delimited(&rebased.text, "app.py").expect("the file's lines");
    assert!(lines.contains("hashlib.sha256(data)"), "{lines}");

    let branch = fr["branch"].as_str().unwrap().to_string();
    let log = git_out(
        &target,
        &["log", "--format=%s", &format!("{head_before}..{branch}")],
    );
    assert_eq!(log.lines().count(), 3, "{log}");
    let fixed = git_out(&target, &["show", &format!("{branch}:app.py")]);
    assert!(
        fixed.contains("return hashlib.sha256(data).hexdigest()[:32]")
            && fixed.contains("import hmac")
            && fixed.contains("hmac.compare_digest(token, expected)"),
        "{fixed}"
    );
    assert_eq!(git_out(&target, &["rev-parse", "HEAD"]), head_before);
}

/// `--jobs 2` killed (kill -9) after one agent's fix was kept while the other agent was still
/// at work: the resume re-applies the kept fix without asking for it again, and asks the
/// attempt that was in flight again, on the tree with the kept fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_parallel_run_asks_again_every_attempt_in_flight() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let report_path = reviewed(&target, work.path()).await;
    let weak = id_of(&read_json(&report_path), "Weak hash for integrity");
    let edits = |edits: Value| Reply::json(&json!({"edits": edits, "summary": "done"}));
    let timing_edits = json!([
        {"path": "app.py", "old": "import hashlib\n", "new": "import hashlib\nimport hmac\n"},
        {"path": "app.py", "old": "return token == expected", "new": "return hmac.compare_digest(token, expected)"}
    ]);
    let script = |hold: bool| {
        let timing = edits(timing_edits.clone());
        Script::new()
            .models([MODEL])
            .rule(
                Rule::new("fix-hash")
                    .when_system([FIXER])
                    .when_all(["Weak hash for integrity"])
                    .reply(edits(json!([{"path": "app.py", "old": "hashlib.md5(data)", "new": "hashlib.sha256(data)"}]))),
            )
            .rule(
                Rule::new("fix-timing")
                    .when_system([FIXER])
                    .when_all(["Token compared in non-constant time"])
                    .reply(if hold { Reply::hang() } else { timing }),
            )
            .rule(
                Rule::new("blind-verifier")
                    .when_system([BLIND])
                    .reply(Reply::json(&json!({"still_holds": false, "reason": "gone"}))),
            )
    };
    let out = work.path().join("fix-out");
    let args = |backend: &str, resume: bool| -> Vec<String> {
        let mut a: Vec<String> = [
            "fix",
            target.to_str().unwrap(),
            "--from",
            report_path.to_str().unwrap(),
            "--backend",
            backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--test-cmd",
            "bash tests.sh",
            "--unsandboxed",
            "--jobs",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let first = ScriptedServer::start(script(true)).await.unwrap();
    let first_args = args(&format!("ollama={}", first.ollama_url()), false);
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let mut child = command(&first_args, work.path()).spawn().unwrap();
    // The hash fix is kept (its result journalled) while the timing agent hangs.
    let journal = out.join("fix-journal.jsonl");
    let deadline = std::time::Instant::now() + HUNG;
    loop {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        if text
            .lines()
            .any(|l| l.contains("\"Judged\"") && l.contains(&format!("\"{weak}\"")))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the hash fix was never judged: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(first.requests().iter().any(
        |r| r.system.contains(FIXER) && r.text.contains("Token compared in non-constant time")
    ));
    child.kill().await.unwrap();

    let second = ScriptedServer::start(script(false)).await.unwrap();
    let resume_args = args(&format!("ollama={}", second.ollama_url()), true);
    let resume_args: Vec<&str> = resume_args.iter().map(String::as_str).collect();
    let o = quorum(&resume_args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let reqs = second.requests();
    assert!(fixer_requests(&reqs)
        .iter()
        .all(|r| !r.text.contains("Weak hash for integrity")));
    let timing = fixer_requests(&reqs)
        .into_iter()
        .find(|r| r.text.contains("Token compared in non-constant time"))
        .expect("the timing attempt is asked again");
    // Asked again on the tree with the kept fix.
    let lines = delimited(&timing.text, "app.py").expect("the file's lines");
    assert!(lines.contains("hashlib.sha256(data)"), "{lines}");
    let fr = read_json(&out.join("fix-report.json"));
    assert_eq!(
        fr["fixes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["status"] == "kept")
            .count(),
        2,
        "{fr}"
    );
}
