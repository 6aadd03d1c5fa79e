//! `quorum build PATH --spec SPEC` with the binary, a scripted model server and a scripted
//! test command: increments kept only when the tests pass and the conformance judge (reading
//! the files, never the builder's words) finds more criteria met; a test-breaking increment
//! undone and its failure put in the next builder's prompt; a killed build resumed without
//! redoing a kept increment or re-judging the base; a spec inside the target neither shown to
//! the judge nor editable by the builder; regressions and no progress undone until the loop
//! stops on oscillation.

mod common;

use common::fixing::git_out;
use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::path::Path;

const BUILDER: &str = "You are a builder";
const JUDGE: &str = "You are the conformance judge";

const LIMITER: &str = "LIMIT = 60


def remaining(used):
    return LIMIT - used
";

const TESTS: &str = r#"if grep -q "def remaining" limiter.py; then echo "test tests::remaining ... ok"; else echo "test tests::remaining ... FAILED"; exit 1; fi
"#;

const SPEC: &str = "# Rate limiter

- [ ] The limiter refuses a request once the limit is used up.
- [ ] The limit is read from the RATE_LIMIT environment variable.
";

fn met(id: &str, line: u32, quote: &str) -> Value {
    json!({"id": id, "status": "met", "reason": "done",
           "evidence": [{"file": "limiter.py", "line_start": line, "line_end": line, "quote": quote}]})
}

fn unmet(id: &str, why: &str) -> Value {
    json!({"id": id, "status": "unmet", "reason": why, "evidence": []})
}

/// The judge answers from the files it is shown.
fn judge_rules(script: Script) -> Script {
    script
        .rule(
            Rule::new("judge-both")
                .when_system([JUDGE])
                .when_all(["def allow", "os.environ"])
                .reply(Reply::json(&json!({"judgments": [
                    met("C1", 10, "def allow(used):"),
                    met("C2", 3, "LIMIT = int(os.environ.get(\"RATE_LIMIT\", \"60\"))")]}))),
        )
        .rule(
            Rule::new("judge-c1")
                .when_system([JUDGE])
                .when_all(["def allow"])
                .reply(Reply::json(&json!({"judgments": [
                    met("C1", 8, "def allow(used):"),
                    unmet("C2", "JUDGE-SAYS-HARD-CODED")]}))),
        )
        .rule(
            Rule::new("judge-none")
                .when_system([JUDGE])
                .reply(Reply::json(&json!({"judgments": [
                    unmet("C1", "nothing refuses a request"),
                    unmet("C2", "JUDGE-SAYS-HARD-CODED")]}))),
        )
}

fn edit(old: &str, new: &str, summary: &str) -> Reply {
    Reply::json(
        &json!({"edits": [{"path": "limiter.py", "old": old, "new": new}], "summary": summary}),
    )
}

/// Increment 1 adds allow(); increment 2 renames remaining() (the test fails); increment 3,
/// told why 2 was undone, reads the limit from the environment. `hold_second`: increment 2
/// is never answered (a build to kill).
fn build_script(hold_second: bool) -> Script {
    let third = Rule::new("builder-3")
        .when_system([BUILDER])
        .when_all(["Your previous increment was undone"])
        .reply(edit(
            "LIMIT = 60",
            "import os\n\nLIMIT = int(os.environ.get(\"RATE_LIMIT\", \"60\"))",
            "BUILDER-SAYS-ENV",
        ));
    let second = Rule::new("builder-2")
        .when_system([BUILDER])
        .when_all(["Criteria already met"]);
    let second = if hold_second {
        second.reply(Reply::hang())
    } else {
        second.reply(edit(
            "def remaining(used):",
            "def left(used):",
            "BUILDER-SAYS-RENAMED",
        ))
    };
    let first = Rule::new("builder-1").when_system([BUILDER]).reply(edit(
        "    return LIMIT - used\n",
        "    return LIMIT - used\n\n\ndef allow(used):\n    return used < LIMIT\n",
        "BUILDER-SAYS-ALLOW",
    ));
    judge_rules(
        Script::new()
            .models([MODEL])
            .rule(third)
            .rule(second)
            .rule(first),
    )
}

fn builders(reqs: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    reqs.iter().filter(|r| r.system.contains(BUILDER)).collect()
}

fn judges(reqs: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    reqs.iter().filter(|r| r.system.contains(JUDGE)).collect()
}

fn build_args(target: &Path, spec: &Path, out: &Path, backend: &str) -> Vec<String> {
    [
        "build",
        target.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
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
    .collect()
}

/// A build killed (kill -9) while increment 2 is being made, resumed with --resume: the
/// kept increment 1 and the base's judgment are not redone, increment 2 breaks the tests and
/// is undone with the failure in increment 3's prompt, and increment 3 satisfies the spec.
/// The branch holds the two kept increments; the checkout is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_keeps_what_the_judge_and_tests_accept_and_resumes_after_a_kill() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    write(&target, "limiter.py", LIMITER);
    write(&target, "tests.sh", TESTS);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let head = git_out(&target, &["rev-parse", "HEAD"]);
    let spec = work.path().join("SPEC.md");
    std::fs::write(&spec, SPEC).unwrap();
    let out = work.path().join("build-out");

    let first = ScriptedServer::start(build_script(true)).await.unwrap();
    let mut seen = first.subscribe();
    let args = build_args(
        &target,
        &spec,
        &out,
        &format!("ollama={}", first.ollama_url()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = command(&args, work.path()).spawn().unwrap();
    loop {
        let r = tokio::time::timeout(HUNG, seen.recv())
            .await
            .expect("increment 2 is asked")
            .unwrap();
        if r.system.contains(BUILDER) && r.text.contains("Criteria already met") {
            break;
        }
    }
    child.kill().await.unwrap();
    let reqs = first.requests();
    // The first builder saw the open criteria with the judge's reasons, and the files as
    // numbered lines, each delimited as data.
    let b1 = builders(&reqs)[0];
    let criteria = delimited(&b1.text, &format!("criteria from {}", spec.display()))
        .expect("the open criteria, delimited");
    assert!(
        criteria.contains("C1: The limiter refuses a request once the limit is used up.")
            && criteria.contains("(not met yet: nothing refuses a request)"),
        "{criteria}"
    );
    // One criterion at a time: C2 waits for a later increment.
    assert!(!criteria.contains("C2:"), "{criteria}");
    let file = delimited(&b1.text, "limiter.py").expect("the file, delimited");
    assert!(file.contains("    1  LIMIT = 60"), "{file}");
    // Without --resume the interrupted build is named, not overwritten.
    let o = quorum(&args, work.path()).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        stderr(&o).contains("continue it with --resume"),
        "{}",
        stderr(&o)
    );

    let second = ScriptedServer::start(build_script(false)).await.unwrap();
    let mut args = build_args(
        &target,
        &spec,
        &out,
        &format!("ollama={}", second.ollama_url()),
    );
    args.push("--resume".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = quorum(&args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        stdout(&o).contains("2 of 2 criteria met (satisfied) after 3 increment(s), 2 kept"),
        "{}",
        text(&o)
    );
    assert!(
        stderr(&o).contains("resumed: 1 increment(s) kept before the interruption"),
        "{}",
        stderr(&o)
    );
    let reqs = second.requests();
    // Neither increment 1 nor the base's judgment is redone.
    assert!(builders(&reqs)
        .iter()
        .all(|r| r.text.contains("Criteria already met")));
    // The judge ruled on increment 3 only: increment 2 failed its tests first.
    let judged = judges(&reqs);
    assert_eq!(judged.len(), 1, "{}", judged.len());
    // It saw the files, never what the builder said of its change.
    for r in judges(&first.requests()).iter().chain(&judged) {
        assert!(!r.text.contains("BUILDER-SAYS"), "{}", r.text);
    }
    // Increment 3 was told why increment 2 was undone.
    let b3 = builders(&reqs)
        .into_iter()
        .find(|r| r.text.contains("Your previous increment was undone"))
        .expect("increment 3");
    let why = delimited(&b3.text, "undone increment").expect("the failure, delimited");
    assert!(why.contains("tests::remaining"), "{why}");
    // ... and shown the undone change itself, which the files it sees no longer hold.
    let undone = delimited(&b3.text, "undone change").expect("the undone diff, delimited");
    assert!(
        undone.contains("-def remaining(used):") && undone.contains("+def left(used):"),
        "{undone}"
    );

    let report = read_json(&out.join("build-report.json"));
    assert_eq!(report["stop"], "satisfied", "{report}");
    assert_eq!(report["satisfied"], true);
    let its = report["iterations"].as_array().unwrap();
    assert_eq!(its.len(), 3, "{report}");
    assert_eq!(its[0]["kept"], true);
    let focus: Vec<&str> = its.iter().map(|i| i["focus"].as_str().unwrap()).collect();
    assert_eq!(focus, ["C1", "C2", "C2"], "one criterion per increment");
    assert_eq!(its[0]["newly_met"], json!(["C1"]));
    assert_eq!(its[1]["kept"], false);
    assert_eq!(its[1]["failure"]["kind"], "tests_failed");
    assert_eq!(its[1]["failure"]["detail"], "tests::remaining");
    assert_eq!(its[2]["kept"], true);
    assert_eq!(its[2]["newly_met"], json!(["C2"]));
    assert_eq!(report["criteria"][0]["met_at"], 1);
    assert_eq!(report["criteria"][1]["met_at"], 3);
    assert_eq!(report["backstop"]["iterations"], 6, "max(3, 3 x 2)");
    // The resumed run kept the backstop the build started with.
    assert_eq!(report["backstop"]["source"], "recorded", "{report}");
    // The kept increments are commits on the branch; the checkout is as it was.
    let branch = report["branch"].as_str().unwrap().to_string();
    let log = git_out(
        &target,
        &["log", "--format=%s", &format!("{head}..{branch}")],
    );
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "quorum build: increment 3 meets C2",
            "quorum build: increment 1 meets C1"
        ],
        "{log}"
    );
    let built = git_out(&target, &["show", &format!("{branch}:limiter.py")]);
    assert!(
        built.contains("def allow(used):") && built.contains("os.environ"),
        "{built}"
    );
    assert_eq!(
        std::fs::read_to_string(target.join("limiter.py")).unwrap(),
        LIMITER
    );
    assert_eq!(git_out(&target, &["rev-parse", "HEAD"]), head);
    let patch = std::fs::read_to_string(out.join("build.patch")).unwrap();
    assert!(patch.contains("+def allow(used):"), "{patch}");
    let md = std::fs::read_to_string(out.join("build-report.md")).unwrap();
    assert!(md.contains("**2 of 2 criteria met**"), "{md}");
    // The run's facts are in the build history later runs learn their backstop from.
    let history =
        std::fs::read_to_string(work.path().join(".home/data/quorum/build-history.jsonl"))
            .expect("the build history");
    let facts: Value = serde_json::from_str(history.lines().last().unwrap()).unwrap();
    assert_eq!(facts["criteria"], 2);
    assert_eq!(facts["last_progress"], 3);
    assert_eq!(facts["stop"], "satisfied");

    // A finished build is not resumed.
    let o = quorum(&args, work.path()).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(stderr(&o).contains("has finished"), "{}", stderr(&o));
}

/// A spec inside the target (not a git checkout): the judge is not shown it, an increment
/// that edits it is refused, one that breaks a met criterion is a regression, and going round
/// the same open criteria stops the build as oscillating (exit 1, nothing delivered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_is_not_the_work_and_going_round_the_same_gaps_stops_the_build() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    let base = format!("{LIMITER}\n\ndef allow(used):\n    return used < LIMIT\n");
    write(&target, "limiter.py", &base);
    write(&target, "tests.sh", TESTS);
    write(&target, "SPEC.md", SPEC);
    let script = judge_rules(
        Script::new()
            .models([MODEL])
            // 4: after no progress, the same comment again.
            .rule(
                Rule::new("builder-again")
                    .when_system([BUILDER])
                    .when_all(["no open criterion met"])
                    .reply(edit("LIMIT = 60", "LIMIT = 60  # per minute, again", "again")),
            )
            // 3: after the regression, a comment only.
            .rule(
                Rule::new("builder-comment")
                    .when_system([BUILDER])
                    .when_all(["broke criteria that were met"])
                    .reply(edit("LIMIT = 60", "LIMIT = 60  # per minute", "comment")),
            )
            // 2: after the refused spec edit, it drops allow() while reading the environment.
            .rule(
                Rule::new("builder-regress")
                    .when_system([BUILDER])
                    .when_all(["changed the spec"])
                    .reply(Reply::json(&json!({"edits": [
                        {"path": "limiter.py", "old": "LIMIT = 60", "new": "import os\n\nLIMIT = int(os.environ.get(\"RATE_LIMIT\", \"60\"))"},
                        {"path": "limiter.py", "old": "def allow(used):\n    return used < LIMIT\n", "new": ""}],
                        "summary": "env"}))),
            )
            // 1: it ticks the spec's box.
            .rule(
                Rule::new("builder-tick")
                    .when_system([BUILDER])
                    .reply(Reply::json(&json!({"edits": [{"path": "SPEC.md",
                        "old": "- [ ] The limit is read", "new": "- [x] The limit is read"}],
                        "summary": "done"}))),
            )
            // Judged met for the environment alone once allow() is gone.
            .rule(
                Rule::new("judge-env-only")
                    .when_system([JUDGE])
                    .when_all(["os.environ"])
                    .when_none(["def allow"])
                    .reply(Reply::json(&json!({"judgments": [
                        unmet("C1", "allow() is gone"),
                        met("C2", 3, "LIMIT = int(os.environ.get(\"RATE_LIMIT\", \"60\"))")]}))),
            ),
    );
    let server = ScriptedServer::start(script).await.unwrap();
    let out = work.path().join("build-out");
    let spec = target.join("SPEC.md");
    let args = build_args(
        &target,
        &spec,
        &out,
        &format!("ollama={}", server.ollama_url()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = quorum(&args, work.path()).await;
    assert_eq!(code(&o), 1, "{}", text(&o));
    let report = read_json(&out.join("build-report.json"));
    assert_eq!(report["stop"], "oscillating", "{report}");
    let kinds: Vec<&str> = report["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["failure"]["kind"].as_str().unwrap_or("kept"))
        .collect();
    assert_eq!(
        kinds,
        ["edit_failed", "regression", "no_progress", "no_progress"],
        "{report}"
    );
    assert_eq!(report["iterations"][1]["failure"]["detail"], "C1");
    assert_eq!(report["criteria"][0]["met_at"], 0, "the base met C1");
    assert!(report.get("branch").is_none() && report.get("patched_copy").is_none());
    // The judge never saw the spec as material, and the spec was never changed.
    let reqs = server.requests();
    for r in judges(&reqs) {
        assert!(delimited(&r.text, "SPEC.md").is_none(), "{}", r.text);
        assert!(delimited(&r.text, "limiter.py").is_some());
    }
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), SPEC);
    // The regression's reason named the lost criterion for the next builder.
    let after_regression = builders(&reqs)
        .into_iter()
        .find(|r| r.text.contains("broke criteria that were met"))
        .expect("the builder after the regression");
    let why = delimited(&after_regression.text, "undone increment").unwrap();
    assert!(why.contains("C1: allow() is gone"), "{why}");

    // A spec with no criteria in a form quorum reads is refused before any model call.
    let vague = work.path().join("vague.md");
    std::fs::write(&vague, "Make it better.\n").unwrap();
    let before = server.requests().len();
    let args = build_args(
        &target,
        &vague,
        &work.path().join("o2"),
        &format!("ollama={}", server.ollama_url()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = quorum(&args, work.path()).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        stderr(&o).contains("has no acceptance criteria"),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.requests().len(), before);
}
