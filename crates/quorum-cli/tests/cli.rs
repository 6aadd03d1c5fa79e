//! The `quorum` binary end to end: exit codes, report files, and every bad-input case of
//! DESIGN §6, against the scripted model server.

mod common;

use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::Value;
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_writes_three_reports_and_exits_1_on_findings() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let target = fixture("code_project");
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
        ],
        work.path(),
    )
    .await;
    assert_eq!(
        code(&o),
        1,
        "a P0 survived, default --fail-on P1: {}",
        text(&o)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("review completed: 3 findings (P0 1, P1 1, P2 1, P3 0)"),
        "{stdout}"
    );
    assert!(stdout.contains("report.md"));
    assert!(
        o.stderr.is_empty() || !String::from_utf8_lossy(&o.stderr).contains('\r'),
        "no progress line when not a tty"
    );

    let json: Value = read_json(&out.join("report.json"));
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["status"], "completed");
    for key in [
        "flow_id",
        "flow",
        "target",
        "classification",
        "team",
        "findings",
        "dropped",
        "tasks",
        "usage",
    ] {
        assert!(json.get(key).is_some(), "report.json lacks {key}");
    }
    let f = &json["findings"][0];
    for key in [
        "id",
        "title",
        "severity",
        "confidence",
        "category",
        "file",
        "line_start",
        "line_end",
        "symbol",
        "evidence",
        "why_it_matters",
        "suggested_fix",
        "verdict",
        "reporters",
        "anchor",
    ] {
        assert!(f.get(key).is_some(), "finding lacks {key}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("SQL injection in item search"));
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.sarif")).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/schemas/sarif-schema-2.1.0.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(
        validator.is_valid(&sarif),
        "report.sarif is not valid SARIF 2.1.0"
    );

    // --fail-on none turns the same review into exit 0; --fail-on P0 still fails on the P0.
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
            "--fail-on",
            "none",
            "--format",
            "json",
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
}

/// `--format rdjson,gitlab` on a target that is a subdirectory of a checkout: both
/// merge-request files, only them, one entry per finding, paths relative to the repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_writes_rdjson_and_gitlab_reports() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let target = repo.join("app");
    copy_dir(&fixture("code_project"), &target);
    let out = work.path().join("out");
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
            "--format",
            "rdjson,gitlab",
            "--quiet",
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 1, "a P0 survived: {}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("review completed: 3 findings"), "{stdout}");
    assert!(stdout.contains("report.rdjson"), "{stdout}");
    for absent in ["report.md", "report.json", "report.sarif"] {
        assert!(!out.join(absent).exists(), "{absent} was not asked for");
    }

    let rd: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.rdjson")).unwrap()).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/schemas/rdjson-DiagnosticResult.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        jsonschema::validator_for(&schema).unwrap().is_valid(&rd),
        "report.rdjson is not valid rdjson: {rd}"
    );
    let mut diags: Vec<(String, String, u64)> = rd["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["location"]["path"].as_str().unwrap().to_string(),
                d["severity"].as_str().unwrap().to_string(),
                d["location"]["range"]["start"]["line"].as_u64().unwrap(),
            )
        })
        .collect();
    diags.sort();
    assert_eq!(
        diags,
        [
            ("app/src/auth.py".to_string(), "ERROR".to_string(), 15),
            ("app/src/db.py".to_string(), "ERROR".to_string(), 53),
            ("app/src/utils.py".to_string(), "WARNING".to_string(), 20),
        ]
    );

    let gl: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("gl-code-quality-report.json")).unwrap(),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/schemas/gitlab-code-quality-report.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        jsonschema::validator_for(&schema).unwrap().is_valid(&gl),
        "not a valid code quality report: {gl}"
    );
    let mut issues: Vec<(String, String, u64)> = gl
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["location"]["path"].as_str().unwrap().to_string(),
                i["severity"].as_str().unwrap().to_string(),
                i["location"]["lines"]["begin"].as_u64().unwrap(),
            )
        })
        .collect();
    issues.sort();
    assert_eq!(
        issues,
        [
            ("app/src/auth.py".to_string(), "major".to_string(), 15),
            ("app/src/db.py".to_string(), "critical".to_string(), 53),
            ("app/src/utils.py".to_string(), "minor".to_string(), 20),
        ]
    );

    // An unknown format is a usage error before anything runs, naming what is accepted.
    let o = quorum(
        &["review", target.to_str().unwrap(), "--format", "md,html"],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("\"html\"") && err.contains("rdjson, gitlab"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_out_dir_and_auto_model() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let backend = format!("openai={}", server.openai_url());
    let target = fixture("code_project");
    // No --model: "auto" takes the model the server lists.
    let o = quorum(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--fail-on",
            "none",
        ],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let runs: Vec<_> = std::fs::read_dir(work.path().join("quorum-out"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);
    let dir = runs.into_iter().next().unwrap().unwrap().path();
    for f in ["report.md", "report.json", "report.sarif"] {
        assert!(dir.join(f).is_file(), "missing {f}");
    }
    assert!(server.requests().iter().all(|r| r.model == MODEL));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_review_exits_3_and_still_writes_the_report() {
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&code_plan())),
        )
        .rule(
            Rule::new("sec")
                .when_system(["You are security_sentinel"])
                .reply(Reply::status(400)),
        )
        .rule(
            Rule::new("rest")
                .when_any(["You are software_developer", "You are test_engineer"])
                .reply(Reply::text("{\"findings\": []}")),
        )
        .rule(synthesizer_rule());
    let server = ScriptedServer::start(script).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("o");
    let backend = format!("ollama={}", server.ollama_url());
    let o = quorum(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
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
    assert_eq!(code(&o), 3, "{}", text(&o));
    let json: Value = read_json(&out.join("report.json"));
    assert_eq!(json["status"], "partial");
    assert!(json["status_reason"].as_str().unwrap().contains("t1"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exit_codes() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();

    // PATH missing / not a directory: exit 2, one line.
    let o = quorum(&["review", "/nonexistent/quorum-target"], w).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("does not exist"));
    let file = w.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let o = quorum(&["review", file.to_str().unwrap()], w).await;
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a directory"));

    // Empty directory: a completed review that says there was nothing to review, no backend needed.
    let empty = w.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = w.join("empty-out");
    let o = quorum(
        &[
            "review",
            empty.to_str().unwrap(),
            "--backend",
            "ollama=http://127.0.0.1:9",
            "--out",
            out.to_str().unwrap(),
        ],
        w,
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing to review"));
    assert!(out.join("report.json").is_file());

    // No backend reachable: exit 3 from the probe, before a review is even stored (so it
    // waits on no stage and retries nothing), naming the URL and how to configure one.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{dead}");
    let stored_before = quorum(&["flows", "list"], w).await;
    let o = quorum(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--backend",
            &format!("ollama={url}"),
        ],
        w,
    )
    .await;
    assert_eq!(code(&o), 3, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&url) && err.contains("--backend"), "{err}");
    assert!(err.contains("no backend reachable"), "{err}");
    let stored_after = quorum(&["flows", "list"], w).await;
    assert_eq!(code(&stored_after), 0, "{}", text(&stored_after));
    assert_eq!(
        stdout(&stored_after),
        stdout(&stored_before),
        "a review was stored before the backend was found unreachable"
    );

    // Invalid persona YAML: exit 2 naming the file and the field.
    let personas = w.join("personas");
    copy_dir(&repo_root().join("personas"), &personas);
    let p = personas.join("security_sentinel.yaml");
    let broken = std::fs::read_to_string(&p).unwrap().replacen(
        "file_tree, list_directory",
        "file_tree, shell_exec",
        1,
    );
    std::fs::write(&p, broken).unwrap();
    let o = quorum(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--personas",
            personas.to_str().unwrap(),
        ],
        w,
    )
    .await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("security_sentinel.yaml") && err.contains("tools["),
        "{err}"
    );
    let o = quorum(
        &["personas", "check", "--config", &write_config(w, &personas)],
        w,
    )
    .await;
    assert_eq!(code(&o), 2, "{}", text(&o));

    // Invalid flow YAML: exit 2 naming the file and the field.
    let flow = w.join("bad-flow.yaml");
    let text_flow = std::fs::read_to_string(repo_root().join("flows/review.yaml"))
        .unwrap()
        .replace("confidence_gate: 0.5", "confidence_gate: 7");
    std::fs::write(&flow, text_flow).unwrap();
    let o = quorum(
        &[
            "review",
            fixture("code_project").to_str().unwrap(),
            "--flow",
            flow.to_str().unwrap(),
        ],
        w,
    )
    .await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad-flow.yaml") && err.contains("parameters.confidence_gate"),
        "{err}"
    );

    // Usage errors.
    for args in [
        vec!["review"],
        vec!["review", ".", "--fail-on", "P7"],
        vec!["review", ".", "--backend", "gopher=http://x"],
        vec!["review", ".", "--format", "pdf"],
        vec!["frobnicate"],
    ] {
        let o = quorum(&args, w).await;
        assert_eq!(code(&o), 2, "{args:?}: {}", text(&o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personas_and_models_commands() {
    let work = tempfile::tempdir().unwrap();
    let o = quorum(&["personas", "list"], work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(list.lines().count() >= 16 && list.contains("security_sentinel"));
    let o = quorum(&["personas", "show", "contract_counsel"], work.path()).await;
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("## Heuristics"));
    let o = quorum(&["personas", "show", "nobody"], work.path()).await;
    assert_eq!(code(&o), 2);
    let o = quorum(&["personas", "check"], work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));

    let server = ScriptedServer::start(Script::new().models(["m-one", "m-two"]))
        .await
        .unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let o = quorum(
        &["models", "list", "--backend", &backend, "--format", "json"],
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["name"], "m-one");
    assert_eq!(v[0]["agentic"]["locality"], "local");
}

fn write_config(dir: &Path, personas: &Path) -> String {
    let p = dir.join("q.toml");
    std::fs::write(
        &p,
        format!("personas_dir = {:?}\n", personas.to_str().unwrap()),
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

/// `quorum pack`: what a review would read, under the same config layering, without a model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_lists_included_and_excluded_files() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let target = w.join("target-dir");
    let files: &[(&str, &[u8])] = &[
        ("src/app.py", b"print('hi')\n"),
        ("src/util.py", b"def f():\n    return 1\n"),
        ("README.md", b"# demo\n"),
        (".gitignore", b"*.log\n"),
        ("debug.log", b"noise\n"),
        (".env", b"API_KEY=hunter2\n"),
        ("deploy/id_rsa", b"-----BEGIN OPENSSH PRIVATE KEY-----\n"),
        ("data/big.csv", &[b'1'; 64]),
        ("logo.png", b"\x89PNG\0\0"),
        ("node_modules/x/index.js", b"1\n"),
        ("vendor/lib.py", b"x = 1\n"),
    ];
    for (path, body) in files {
        let p = target.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    // ./quorum.toml is a config layer for `pack` exactly as for `review`.
    std::fs::write(
        w.join("quorum.toml"),
        "[pack]\nmax_file_bytes = 40\nexclude = [\"vendor/\"]\n",
    )
    .unwrap();

    let o = quorum(&["pack", target.to_str().unwrap(), "--format", "json"], w).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("pack --format json is JSON");
    let included: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        included,
        [".gitignore", "README.md", "src/app.py", "src/util.py"]
    );
    let excluded: Vec<(&str, &str)> = v["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        excluded,
        [
            (".env", "secret"),
            ("data/big.csv", "too-large"),
            ("debug.log", "ignored"),
            ("deploy/id_rsa", "secret"),
            ("logo.png", "binary"),
            ("node_modules/", "always-excluded"),
            ("vendor/", "config-glob"),
        ]
    );
    let totals = &v["totals"];
    assert_eq!(totals["files"], included.len());
    assert_eq!(totals["excluded"], excluded.len());
    let sum = |key: &str| -> u64 {
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f[key].as_u64().unwrap())
            .sum()
    };
    assert_eq!(totals["bytes"].as_u64().unwrap(), sum("bytes"));
    assert_eq!(
        totals["estimated_tokens"].as_u64().unwrap(),
        sum("estimated_tokens")
    );
    assert_eq!(v["languages"][0]["language"], "python");
    assert_eq!(v["languages"][0]["files"], 2);
    assert_eq!(v["excluded_by_reason"]["secret"], 2);
    assert!(v["root"].as_str().unwrap().ends_with("target-dir"));

    // The text summary: totals, reasons, and no secret among the included files.
    let o = quorum(&["pack", target.to_str().unwrap()], w).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("4 files"), "{out}");
    assert!(out.contains("excluded by config glob"), "{out}");
    let included_part = &out[out.find("\nincluded").expect("included section")..];
    assert!(included_part.contains("src/app.py"), "{out}");
    assert!(
        !included_part.contains(".env") && !included_part.contains("id_rsa"),
        "{out}"
    );
    assert!(!out.contains("hunter2"), "contents are never printed");

    // A missing path is a usage error, in one line.
    let o = quorum(&["pack", w.join("nope").to_str().unwrap()], w).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_text_is_bounded_unless_all() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("many");
    std::fs::create_dir_all(&target).unwrap();
    for i in 0..45 {
        std::fs::write(target.join(format!("f{i:02}.txt")), "x\n").unwrap();
    }
    let o = quorum(&["pack", target.to_str().unwrap()], work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("... and 5 more"), "{out}");
    assert!(out.contains("f39.txt") && !out.contains("f40.txt"), "{out}");
    let o = quorum(&["pack", target.to_str().unwrap(), "--all"], work.path()).await;
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("... and") && out.contains("f44.txt"), "{out}");
}
