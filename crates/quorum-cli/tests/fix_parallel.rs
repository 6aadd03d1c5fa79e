//! `quorum fix --jobs N` with the binary and scripted models: agents at work at once, a change
//! three-way merged onto the fixes kept meanwhile or, when its lines moved, rebased once; and a
//! killed parallel run resumed.

mod common;

use common::fixing::*;
use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};

/// `--jobs 3`: three fix agents work at once, each on the fixes kept when it started. The hash
/// fix lands first; the timing fix, made on the unfixed base, merges cleanly onto it (other
/// lines) and is judged on the merged tree; the digest-length fix changed the hash fix's line,
/// so it conflicts, is tried once more on the current tree (rebased) and is kept then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_fixes_merge_and_a_conflicting_one_is_rebased_once() {
    let work = tempfile::tempdir().unwrap();
    let (target, head_before) = git_project(work.path());
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
    let (target, _) = git_project(work.path());
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
