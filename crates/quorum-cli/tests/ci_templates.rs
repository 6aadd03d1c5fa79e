//! The CI templates under deploy/ci/ are run, not just read: each template's own review
//! command, taken from its YAML, runs in a shell as its CI would run it, against the scripted
//! model server on a repository with a base and a head commit, and the files the template's
//! later steps hand to code scanning, reviewdog or GitLab are checked against their schemas.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs (the test needs the git binary to build its fixture)");
    assert!(out.status.success(), "git {args:?}");
}

fn rev(dir: &Path, name: &str) -> String {
    let out = std::process::Command::new("git")
        .args(["rev-parse", name])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

const CHANGED: &str = "query = \"SELECT * FROM t WHERE id = \" + user_id";

/// A checkout as CI has it: a base commit and a head commit that rewrites one line.
fn checkout() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let app = |head: bool| -> String {
        (1..=20)
            .map(|i| {
                if i == 10 && head {
                    format!("{CHANGED}\n")
                } else {
                    format!("value_{i} = {i}\n")
                }
            })
            .collect()
    };
    git(r, &["init", "-q", "-b", "main"]);
    write(r, "src/app.py", &app(false));
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "base"]);
    let base = rev(r, "HEAD");
    write(r, "src/app.py", &app(true));
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "head"]);
    let head = rev(r, "HEAD");
    (dir, base, head)
}

/// A P1 on the changed line: the merge gate closes.
async fn server() -> ScriptedServer {
    let tasks = json!([{"id": "t1", "persona": "security_sentinel", "files": ["src/app.py"],
                        "mandate": "Review the query the change builds."}]);
    let found = finding(
        "SQL built by concatenation",
        "P1",
        0.9,
        "src/app.py",
        10,
        CHANGED,
    );
    ScriptedServer::start(scripted_review(
        tasks,
        &[("security_sentinel", json!([found]))],
    ))
    .await
    .unwrap()
}

fn template(name: &str) -> serde_yaml::Value {
    let path = repo_root().join("deploy/ci").join(name);
    serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

/// `text` with every `${{ expr }}` replaced from `context`; an expression the test does not
/// know fails, so a template cannot depend on something unchecked.
fn github_expand(text: &str, context: &HashMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("}}").expect("an unclosed ${{") + i;
        let expr = rest[i + 3..end].trim();
        let value = context
            .get(expr)
            .unwrap_or_else(|| panic!("the template uses ${{{{ {expr} }}}}, unknown to this test"));
        out.push_str(value);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A shell running `script` in `cwd` with `quorum` on PATH and `env`; its exit code.
fn run_shell(script: &str, cwd: &Path, env: &[(String, String)]) -> (i32, String) {
    let bin_dir = PathBuf::from(BIN).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", cwd.join(".home"))
        .env("XDG_DATA_HOME", cwd.join(".home/data"))
        .env("QUORUM_HOME", repo_root())
        .env("QUORUM_ANALYZERS__ENABLED", "false")
        .env_remove("QUORUM_API_TOKEN")
        .env_remove("QUORUM_DATA_DIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn validate(schema_file: &str, doc: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/schemas").join(schema_file)).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{schema_file}: {errors:?}");
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display())),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_github_actions_template_reviews_the_change_and_feeds_its_later_steps() {
    let (repo, base, head) = checkout();
    let server = server().await;
    let wf = template("github-actions.yml");
    let steps = wf["jobs"]["review"]["steps"].as_sequence().unwrap();
    let review = steps
        .iter()
        .find(|s| s["id"].as_str() == Some("review"))
        .expect("a step with id: review");

    let context: HashMap<&str, String> = HashMap::from([
        ("github.event.pull_request.base.sha", base),
        ("github.event.pull_request.head.sha", head),
        (
            "vars.QUORUM_BACKEND",
            format!("ollama={}", server.ollama_url()),
        ),
        ("vars.QUORUM_MODEL", MODEL.to_string()),
        ("secrets.GITHUB_TOKEN", "unused".to_string()),
    ]);
    let outputs = repo.path().join(".github-output");
    let mut env: Vec<(String, String)> = review["env"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                github_expand(v.as_str().unwrap(), &context),
            )
        })
        .collect();
    env.push(("GITHUB_OUTPUT".into(), outputs.display().to_string()));
    let script = github_expand(review["run"].as_str().unwrap(), &context);
    let (code, stderr) = tokio::task::block_in_place(|| run_shell(&script, repo.path(), &env));
    assert_eq!(code, 0, "the review step failed: {stderr}");
    let said = std::fs::read_to_string(&outputs).unwrap();
    assert!(
        said.contains("exit_code=1"),
        "a P1 on the change closes the gate: {said}"
    );
    // The merge gate step runs exactly then.
    let gate = steps
        .iter()
        .find(|s| s["name"].as_str() == Some("Merge gate"))
        .unwrap();
    assert_eq!(
        gate["if"].as_str(),
        Some("steps.review.outputs.exit_code == '1'")
    );

    // What the later steps read is there and well formed.
    let sarif_step = steps
        .iter()
        .find(|s| s["with"]["sarif_file"].is_string())
        .expect("a SARIF upload step");
    let sarif = json_file(
        &repo
            .path()
            .join(sarif_step["with"]["sarif_file"].as_str().unwrap()),
    );
    validate("sarif-schema-2.1.0.json", &sarif);
    assert!(
        sarif.to_string().contains("SQL built by concatenation"),
        "{sarif}"
    );
    let reviewdog = steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .find(|r| r.contains("reviewdog"))
        .expect("a reviewdog step");
    let input = reviewdog.rsplit('<').next().unwrap().trim();
    let rdjson = json_file(&repo.path().join(input));
    validate("rdjson-DiagnosticResult.json", &rdjson);
    assert_eq!(
        rdjson["diagnostics"][0]["location"]["path"], "src/app.py",
        "{rdjson}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gitlab_template_reviews_the_change_and_writes_its_code_quality_report() {
    let (repo, base, head) = checkout();
    let server = server().await;
    let ci = template("gitlab-ci.yml");
    let job = &ci["quorum"];
    let script: Vec<&str> = job["script"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let env = vec![
        ("CI_MERGE_REQUEST_DIFF_BASE_SHA".to_string(), base),
        ("CI_COMMIT_SHA".to_string(), head),
        (
            "QUORUM_BACKEND".to_string(),
            format!("ollama={}", server.ollama_url()),
        ),
        ("QUORUM_MODEL".to_string(), MODEL.to_string()),
    ];
    let (code, stderr) =
        tokio::task::block_in_place(|| run_shell(&script.join("\n"), repo.path(), &env));
    assert_eq!(
        code, 1,
        "a P1 on the change fails the job (the gate): {stderr}"
    );
    assert_eq!(job["artifacts"]["when"].as_str(), Some("always"));
    let report = job["artifacts"]["reports"]["codequality"].as_str().unwrap();
    let quality = json_file(&repo.path().join(report));
    validate("gitlab-code-quality-report.json", &quality);
    assert_eq!(quality[0]["location"]["path"], "src/app.py", "{quality}");
}
