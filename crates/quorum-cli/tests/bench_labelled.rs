//! `quorum bench quality --expected FILE` end to end against the scripted server, with a fake
//! ruff on a PATH the test controls: four OWASP-style test files (two vulnerable, two safe that
//! look alike), labelled in OWASP's CSV format. The analyzers alone flag both safe files; the
//! scripted verifier rejects those two leads, so quorum's Youden index is above theirs by what
//! the verifier removed and what the model found that no tool did.
#![cfg(unix)]

mod common;

use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::path::Path;

const SQL: &str = "import sqlite3\n\n\ndef handler(request):\n    name = request.args.get(\"name\")\n    sql = \"SELECT * FROM users WHERE name = '\" + name + \"'\"\n    return sqlite3.connect(\"db\").execute(sql).fetchall()\n";
const SQL_SAFE: &str = "import sqlite3\n\n\ndef handler(request):\n    name = \"constant\"\n    sql = \"SELECT * FROM users WHERE name = '\" + name + \"'\"\n    return sqlite3.connect(\"db\").execute(sql).fetchall()\n";
const HASH_SAFE: &str = "import hashlib\n\n\ndef handler(request):\n    data = b\"static\"\n    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()\n    return digest\n";
const PATH: &str = "import os\n\n\ndef handler(request):\n    name = request.args.get(\"file\")\n    path = os.path.join(\"/srv/files\", name)\n    with open(path) as f:\n        return f.read()\n";

/// OWASP Benchmark's expected-results shape; test 00099 is not copied into the directory.
const EXPECTED: &str = "# test name, category, real vulnerability, cwe\n\
    BenchmarkTest00001,sqli,true,89\n\
    BenchmarkTest00002,sqli,false,89\n\
    BenchmarkTest00003,hash,false,328\n\
    BenchmarkTest00004,pathtraver,true,22\n\
    BenchmarkTest00099,sqli,true,89\n";

fn benchmark(dir: &Path) {
    let code = dir.join("testcode");
    std::fs::create_dir_all(&code).unwrap();
    for (n, text) in [(1, SQL), (2, SQL_SAFE), (3, HASH_SAFE), (4, PATH)] {
        std::fs::write(code.join(format!("BenchmarkTest0000{n}.py")), text).unwrap();
    }
    std::fs::create_dir_all(dir.join("helpers")).unwrap();
    std::fs::write(
        dir.join("helpers/utils.py"),
        "def helper():\n    return 1\n",
    )
    .unwrap();
}

/// A ruff stand-in: ruff's JSON for S608 (SQL built from strings) on both SQL files and S324
/// (md5) on the safe hash; nothing on the path traversal.
fn fake_ruff(bin: &Path) {
    let hit = |file: &str, code: &str, msg: &str| {
        format!(
            "{{\"code\": \"{code}\", \"filename\": \"$PWD/testcode/{file}.py\", \"location\": {{\"row\": 6, \"column\": 5}}, \
             \"end_location\": {{\"row\": 6, \"column\": 40}}, \"message\": \"{msg}\", \"fix\": null, \"url\": null}}"
        )
    };
    let json = format!(
        "[{}, {}, {}]",
        hit(
            "BenchmarkTest00001",
            "S608",
            "Possible SQL injection vector through string-based query construction"
        ),
        hit(
            "BenchmarkTest00002",
            "S608",
            "Possible SQL injection vector through string-based query construction"
        ),
        hit(
            "BenchmarkTest00003",
            "S324",
            "Probable use of insecure hash functions in `hashlib`: `md5`"
        ),
    );
    script(
        bin,
        "ruff",
        &format!("printf '%s\\n' \"{}\"", json.replace('"', "\\\"")),
    );
}

/// The model finds the SQL injection (with the tool) and the path traversal (no tool does);
/// the verifier rejects whatever is claimed on the two safe files and confirms the rest.
fn scripted() -> Script {
    let finding = |file: &str, line: u32, category: &str, title: &str, evidence: &str| {
        json!({"title": title, "severity": "P1", "confidence": 0.9, "category": category,
               "file": format!("testcode/{file}.py"), "line_start": line, "line_end": line,
               "evidence": evidence, "why_it_matters": "it matters", "suggested_fix": "fix it"})
    };
    let files: Vec<String> = (1..=4)
        .map(|n| format!("testcode/BenchmarkTest0000{n}.py"))
        .collect();
    let mut s = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": [
                    {"id": "t1", "persona": "security_sentinel", "files": files,
                     "mandate": "Find injection and path flaws.", "tools": []}
                ]}))),
        )
        .rule(
            Rule::new("specialist")
                .when_system(["You are security_sentinel"])
                .reply(Reply::json(&json!({"findings": [
                    finding("BenchmarkTest00001", 6, "security/injection",
                            "SQL injection from the name parameter",
                            "SELECT * FROM users WHERE name"),
                    finding("BenchmarkTest00004", 7, "security/path-traversal",
                            "Path traversal: the requested file name is opened",
                            "with open(path) as f:"),
                ]}))),
        );
    for safe in ["BenchmarkTest00002", "BenchmarkTest00003"] {
        s = s.rule(
            Rule::new(format!("verifier rejects {safe}"))
                .when_system(["You are an independent verifier"])
                .when_all([format!("Location: testcode/{safe}.py")])
                .reply(Reply::json(
                    &json!({"verdict": "HALLUCINATED", "reason": "the value is a constant"}),
                )),
        );
    }
    s.rule(verifier_confirms()).rule(synthesizer_rule())
}

fn cmd(args: &[&str], work: &Path, bin: &Path) -> tokio::process::Command {
    let mut c = command(args, work);
    c.env("PATH", bin)
        .env("QUORUM_ANALYZERS__TIMEOUT_SECS", "5")
        .env_remove("QUORUM_ANALYZERS__ENABLED");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_and_its_analyzers_alone_are_scored_on_the_same_labelled_files() {
    let server = ScriptedServer::start(scripted()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_ruff(&bin);
    let dir = work.path().join("owasp");
    benchmark(&dir);
    let expected = work.path().join("expectedresults-0.1.csv");
    std::fs::write(&expected, EXPECTED).unwrap();
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let o = run(&mut cmd(
        &[
            "bench",
            "quality",
            "--corpus",
            dir.to_str().unwrap(),
            "--expected",
            expected.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        work.path(),
        &bin,
    ))
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for line in [
        "analyzers: ruff: 3 hits;",
        "rows scored (2 vulnerable, 2 safe); 1 skipped, their file not among the reviewed files (BenchmarkTest00099)",
        "quorum:          recall 1.00 (2/2)  precision 1.00  FPR 0.00 (0/2)  Youden 1.00",
        "analyzers alone: recall 0.50 (1/2)  precision 0.33  FPR 1.00 (2/2)  Youden -0.50",
        "quorum adds +1.50 Youden over its analyzers",
        "unverified leads: 0",
        "  pathtraver (CWE-22)  1 rows  quorum TPR 1/1 FPR 0/0 Youden 1.00  analyzers TPR 0/1 FPR 0/0 Youden 0.00",
        "verifier: of 1 leads on vulnerable files kept 1; of 2 leads on safe files rejected 2",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{}", text(&o));
    }

    let s = read_json(&out.join("bench-quality.json"));
    assert_eq!(
        (s["rows"].clone(), s["skipped"].clone()),
        (json!(4), json!(1))
    );
    assert_eq!(s["quorum"]["true_positives"], 2, "{s}");
    assert_eq!(s["quorum"]["false_positives"], 0, "{s}");
    assert_eq!(s["quorum"]["youden"], 1.0);
    // The analyzers' score is their own hits: both safe files flagged, the traversal missed.
    assert_eq!(s["leads"], 3);
    assert_eq!(s["analyzers"]["true_positives"], 1, "{s}");
    assert_eq!(s["analyzers"]["false_positives"], 2, "{s}");
    assert_eq!(s["analyzers"]["false_negatives"], 1, "{s}");
    assert_eq!(s["youden_gain"], 1.5);
    assert_eq!(s["verifier"]["rejected_on_safe"], 2, "{s}");
    assert_eq!(s["verifier"]["kept_on_vulnerable"], 1, "{s}");
    let outcome = |file: &str| -> Value {
        s["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["file"] == format!("testcode/{file}.py"))
            .cloned()
            .unwrap()
    };
    assert_eq!(outcome("BenchmarkTest00002")["by_analyzers"], true);
    assert_eq!(outcome("BenchmarkTest00002")["by_quorum"], false);
    assert_eq!(outcome("BenchmarkTest00004")["by_quorum"], true);
    assert_eq!(outcome("BenchmarkTest00004")["by_analyzers"], false);
    assert_eq!(s["analyzer_runs"][0], "ruff: 3 hits");
    // The review is an ordinary one: its report, the tool credited, the two leads rejected.
    let report = read_json(&out.join("report.json"));
    let rejected: Vec<&Value> = report["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["removed_by"] == "verifier")
        .collect();
    assert_eq!(rejected.len(), 2, "{report}");
    // The labels never reached a model: only the files did.
    for r in server.requests() {
        assert!(!r.text.contains("BenchmarkTest00099") && !r.text.contains("pathtraver"));
    }
}

#[tokio::test]
async fn labels_naming_no_file_there_or_a_bad_row_are_refused_in_one_line() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("owasp");
    benchmark(&dir);
    let expected = work.path().join("e.csv");
    let go = |labels: &'static str| {
        std::fs::write(&expected, labels).unwrap();
        let args: Vec<String> = [
            "bench",
            "quality",
            "--corpus",
            dir.to_str().unwrap(),
            "--expected",
            expected.to_str().unwrap(),
            "--backend",
            "ollama=http://127.0.0.1:9",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cwd = work.path().to_path_buf();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            quorum(&args, &cwd).await
        }
    };
    for (labels, want) in [
        ("BenchmarkTest00042,sqli,true,89\n", "none of the 1 files"),
        (
            "BenchmarkTest00001,sqli,perhaps,89\n",
            "e.csv: row 1: `vulnerable` must be true or false",
        ),
    ] {
        let o = go(labels).await;
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
