//! `quorum fix PATH --from REPORT.json` with the binary, a scripted model server and scripted
//! test commands: a review's findings fixed in a private worktree, a fix kept only when the
//! tests and a blind verifier accept it, a regression discarded and retried with the failure
//! in the prompt until it is a circular fix, writes outside the worktree refused, the kept fix
//! delivered as a branch (git) or a patched copy (not git), and a test command that reaches
//! for the network cut off by the sandbox. Cycles (`--flow`) are in fix_cycles.rs, parallel
//! agents (`--jobs`) in fix_parallel.rs.

mod common;

use common::fixing::*;
use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::json;
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_fix_is_kept_on_a_branch_and_a_regression_circles_until_given_up() {
    let work = tempfile::tempdir().unwrap();
    let (target, head_before) = git_project(work.path());
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
        )
        .rule(
            Rule::new("blind-verifier")
                .when_system([BLIND])
                .reply(Reply::json(&json!({"still_holds": false, "reason": "sha256 replaces md5"}))),
        );
    let server = ScriptedServer::start(script).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("fix-out");
    // No verifier, no test command, no analyzers (the runner turns them off): nothing could
    // judge a fix, so the run is refused before any model call.
    let fix = |extra: &'static [&'static str]| {
        fix_one(
            &target,
            &report_path,
            &weak,
            &backend,
            &out,
            extra,
            work.path(),
        )
    };
    let o = fix(&["--no-verifier"]).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        stderr(&o).contains("leaves nothing to judge a fix by"),
        "{}",
        text(&o)
    );
    assert!(server.requests().iter().all(|r| !r.system.contains(FIXER)));

    let o = fix(&[]).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    // The only model served verified the fixer's own change: said, per attempt.
    assert!(
        stderr(&o).contains("the blind verifier is not independent here"),
        "{}",
        text(&o)
    );
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
    let verdict = &fr["fixes"][0]["attempts"][0]["oracles"]["verifier"];
    assert_eq!(verdict["model"], MODEL, "{verdict}");
    assert!(
        verdict["not_independent"]
            .as_str()
            .unwrap()
            .contains("the fixer's own model"),
        "{verdict}"
    );
    let md = std::fs::read_to_string(out.join("fix-report.md")).unwrap();
    assert!(md.contains("verifier not independent"), "{md}");
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
    let (target, _) = git_project(work.path());
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

/// A test command the reviewed tree's `.quorum.toml` names is the repository's choice, not the
/// user's: without a terminal to ask at it is refused (exit 2, the line naming the flag that
/// allows it) before any model call, and `--trust-repo-config` runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_command_the_repository_chose_runs_only_with_consent() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    project(&target);
    write(&target, ".quorum.toml", "[fix]\ntest = \"bash tests.sh\"\n");
    let report_path = reviewed(&target, work.path()).await;
    let weak = id_of(&read_json(&report_path), "Weak hash for integrity");
    let script = Script::new().models([MODEL]).rule(
        Rule::new("nothing")
            .when_system([FIXER])
            .reply(Reply::json(&json!({"done": true, "summary": "nothing"}))),
    );
    let server = ScriptedServer::start(script).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("fix-out");
    let fix = |extra: &'static [&'static str]| {
        fix_one(
            &target,
            &report_path,
            &weak,
            &backend,
            &out,
            extra,
            work.path(),
        )
    };
    let o = fix(&["--no-verifier"]).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    let said = stderr(&o);
    assert!(
        said.contains("`bash tests.sh`") && said.contains("--trust-repo-config"),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
    assert!(!out.join("fix-report.json").exists());
    assert!(
        !server.requests().iter().any(|r| r.system.contains(FIXER)),
        "a model was asked before the refusal"
    );

    let o = fix(&["--no-verifier", "--trust-repo-config", "--unsandboxed"]).await;
    assert!(matches!(code(&o), 0 | 1), "{}", text(&o));
    let fr = read_json(&out.join("fix-report.json"));
    assert_eq!(fr["test_command"], "bash tests.sh", "{fr}");
    assert!(
        fr["sandbox"].as_str().unwrap().starts_with("UNSANDBOXED"),
        "{fr}"
    );
    let md = std::fs::read_to_string(out.join("fix-report.md")).unwrap();
    assert!(md.lines().next().unwrap().contains("UNSANDBOXED"), "{md}");
}

/// `quorum fix TARGET --from REPORT --findings ID` with the scripted model and OUT, plus `extra`.
async fn fix_one(
    target: &Path,
    report: &Path,
    finding: &str,
    backend: &str,
    out: &Path,
    extra: &[&str],
    cwd: &Path,
) -> std::process::Output {
    let mut args = vec![
        "fix",
        target.to_str().unwrap(),
        "--from",
        report.to_str().unwrap(),
        "--findings",
        finding,
        "--backend",
        backend,
        "--model",
        MODEL,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    quorum(&args, cwd).await
}
