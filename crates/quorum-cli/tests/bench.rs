//! `quorum bench quality` end to end against the scripted server: the corpus is reviewed like
//! any target, and the score printed follows the answer key, grounding and the verifier.

mod common;

use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};

/// One specialist reporting three findings on the mini corpus: one on a planted defect (a line
/// off), one real but about something else, one quoting code that is not there.
fn script() -> Script {
    let finding = |file: &str, line: u32, category: &str, title: &str, evidence: &str| {
        json!({"title": title, "severity": "P1", "confidence": 0.9, "category": category,
               "file": file, "line_start": line, "line_end": line, "evidence": evidence,
               "why_it_matters": "it matters", "suggested_fix": "fix it"})
    };
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({"tasks": [
                    {"id": "t1", "persona": "security_sentinel", "files": ["db.py", "run.py"],
                     "mandate": "Find injection flaws.", "tools": []}
                ]}))),
        )
        .rule(
            Rule::new("specialist")
                .when_system(["You are security_sentinel"])
                .reply(Reply::json(&json!({"findings": [
                    finding("db.py", 4, "security/injection", "SQL built from the name",
                            "SELECT * FROM users WHERE name"),
                    finding("run.py", 6, "style", "Docstring says too little",
                            "subprocess.call(cmd, shell=True)"),
                    finding("db.py", 2, "security/sql", "Table dropped on start",
                            "DROP TABLE users"),
                ]}))),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_score_follows_the_key_grounding_and_the_verifier() {
    let server = ScriptedServer::start(script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let corpus = fixture("bench_corpus");
    let backend = format!("ollama={}", server.ollama_url());
    let o = quorum(
        &[
            "bench",
            "quality",
            "--corpus",
            corpus.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--format",
            "json",
            "--quiet",
        ],
        work.path(),
    )
    .await;
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(s["corpus"], "bench-mini");
    assert_eq!(s["answers"], 2);
    // The fabricated quote never survives grounding; the two real findings do.
    assert_eq!(s["findings"], 2, "{s}");
    assert_eq!(s["removed_by_grounding"], 1, "{s}");
    assert_eq!(s["removed_by_verifier"], 0, "{s}");
    assert_eq!(s["found"], 1, "{s}");
    assert_eq!(s["recall"], 0.5);
    assert_eq!(s["precision"], 0.5);
    assert_eq!(s["f1"], 0.5);
    assert_eq!(s["outcomes"][0]["file"], "db.py");
    assert!(s["outcomes"][0]["found_by"].is_string(), "{s}");
    assert!(s["outcomes"][1]["found_by"].is_null(), "{s}");
    // The review itself is an ordinary one: its report sits beside the score.
    assert!(out.join("report.json").is_file());
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench-quality.json")).unwrap())
            .unwrap();
    assert_eq!(saved["recall"], 0.5);
    // The corpus's answer key never reached a model: only its files did.
    for r in server.requests() {
        assert!(!r.text.contains("corpus.yaml") && !r.text.contains("shell-injection"));
    }
}

#[tokio::test]
async fn a_corpus_without_a_key_is_refused_in_one_line() {
    let work = tempfile::tempdir().unwrap();
    let o = quorum(
        &[
            "bench",
            "quality",
            "--corpus",
            work.path().to_str().unwrap(),
            "--backend",
            "ollama=http://127.0.0.1:9",
        ],
        work.path(),
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("corpus.yaml"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
