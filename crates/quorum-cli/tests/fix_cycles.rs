//! `quorum fix PATH --flow FLOW` with the binary and scripted models: self-improvement cycles
//! (review, fix, review the fixed tree), their threshold, the refusal of such a flow by
//! `quorum review` and by a node, and a killed run resumed without redoing a cycle.

mod common;

use common::fixing::*;
use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::json;

/// `quorum fix PATH --flow self-improve`: review, fix, review the fixed tree, in cycles. The
/// scripted specialist answers from what the file holds, so each cycle's review sees the
/// fixes of the cycles before it: cycle 1 finds the weak hash, cycle 2 (on the hashed tree)
/// the timing comparison, cycle 3 nothing — the run ends with both fixes on one branch. A flow
/// whose threshold the first cycle misses stops after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_improvement_cycles_build_on_the_fixes_before_them_until_nothing_is_left() {
    let work = tempfile::tempdir().unwrap();
    let (target, head_before) = git_project(work.path());
    let server = ScriptedServer::start(improve_script(false)).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("improve-out");
    let run = |flow: String, out: std::path::PathBuf| {
        let backend = backend.clone();
        let target = target.clone();
        let cwd = work.path().to_path_buf();
        async move { improve(&target, &flow, &backend, &out, &cwd).await }
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

/// `quorum fix TARGET --flow FLOW` with the scripted model, the project's tests (unsandboxed,
/// so no bubblewrap is needed) and OUT.
async fn improve(
    target: &std::path::Path,
    flow: &str,
    backend: &str,
    out: &std::path::Path,
    cwd: &std::path::Path,
) -> std::process::Output {
    quorum(
        &[
            "fix",
            target.to_str().unwrap(),
            "--flow",
            flow,
            "--backend",
            backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--test-cmd",
            "bash tests.sh",
            "--unsandboxed",
        ],
        cwd,
    )
    .await
}

/// The self-improvement script: the specialist reports what the tree it reads still holds (the
/// weak hash, then the timing comparison, then nothing), the fixer fixes each, the verifiers
/// agree. `hold_timing`: the timing fix is never answered (a run to kill).
fn improve_script(hold_timing: bool) -> Script {
    improve_script_with(hold_timing, false)
}

/// `revert_hash`: the timing fix also puts md5 back — a later cycle's change undoing an
/// earlier cycle's fix.
fn improve_script_with(hold_timing: bool, revert_hash: bool) -> Script {
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
    let mut timing_edits = vec![
        json!({"path": "app.py", "old": "import hashlib\n", "new": "import hashlib\nimport hmac\n"}),
        json!({"path": "app.py", "old": "return token == expected",
               "new": "return hmac.compare_digest(token, expected)"}),
    ];
    if revert_hash {
        timing_edits.push(
            json!({"path": "app.py", "old": "hashlib.sha256(data)", "new": "hashlib.md5(data)"}),
        );
    }
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
                .reply(Reply::json(&json!({"edits": timing_edits, "summary": "constant time"})))
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
    let (target, head_before) = git_project(work.path());
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

/// A later cycle's kept change that undoes an earlier cycle's fix: cycle 1 fixes the weak hash,
/// cycle 2's timing fix puts md5 back, and cycle 3's review finds the weak hash again, quoting
/// the same line. It is not fixed a second time: it ends `circular_fix` across cycles, naming
/// the cycle that fixed it, and the fixer is never asked about it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_a_later_cycle_undoes_is_stopped_as_circular_across_cycles() {
    let work = tempfile::tempdir().unwrap();
    let (target, _) = git_project(work.path());
    let server = ScriptedServer::start(improve_script_with(false, true))
        .await
        .unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("improve-out");
    let o = improve(&target, "self-improve", &backend, &out, work.path()).await;
    let fr = read_json(&out.join("fix-report.json"));
    let fixes = fr["fixes"].as_array().unwrap();
    let circled = fixes
        .iter()
        .find(|f| f["cycle"] == 3 && f["title"] == "Weak hash for integrity")
        .unwrap_or_else(|| panic!("the weak hash found again in cycle 3: {fr}\n{}", text(&o)));
    assert_eq!(circled["status"], "unfixed", "{circled}");
    assert_eq!(circled["unfixed_because"], "circular_fix", "{circled}");
    assert_eq!(circled["fixed_in_cycle"], 1, "{circled}");
    assert!(circled["attempts"].as_array().unwrap().is_empty());
    let hash_fixes = fixer_requests(&server.requests())
        .into_iter()
        .filter(|r| r.text.contains("Weak hash for integrity"))
        .count();
    assert_eq!(
        hash_fixes, 1,
        "the fixer was asked about the weak hash again"
    );
    assert!(
        text(&o).contains("was fixed in cycle 1 and is found again"),
        "{}",
        text(&o)
    );
    let md = std::fs::read_to_string(out.join("fix-report.md")).unwrap();
    assert!(
        md.contains("circular fix across cycles: fixed in cycle 1, found again in cycle 3"),
        "{md}"
    );
    // Found and left unfixed: exit 1, as a review with findings left.
    assert_eq!(code(&o), 1, "{}", text(&o));
}
