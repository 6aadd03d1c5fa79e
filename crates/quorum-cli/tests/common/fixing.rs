//! What the `quorum fix` test files share: the two-defect project and its scripted test
//! command, the scripted review that reports both defects, and readers of what a fix run left.

use super::*;
use quorum_testkit::{RecordedRequest, Script, ScriptedServer};
use serde_json::{json, Value};
use std::path::Path;

pub const APP: &str = "import hashlib


def digest(data):
    return hashlib.md5(data).hexdigest()


def check(token, expected):
    return token == expected
";

/// The project's "test suite": names each test the way `cargo test` prints it.
pub const TESTS: &str = r#"fail=0
if grep -q "def digest" app.py; then echo "test tests::digest ... ok"; else echo "test tests::digest ... FAILED"; fail=1; fi
if grep -q "def check" app.py; then echo "test tests::check ... ok"; else echo "test tests::check ... FAILED"; fail=1; fi
exit $fail
"#;

pub const FIXER: &str = "You fix one reported defect";
pub const BLIND: &str = "You are an independent reviewer";

pub fn project(root: &Path) {
    write(root, "app.py", APP);
    write(root, "tests.sh", TESTS);
}

/// The review that produces the report: one task, two confirmed findings.
pub fn review_script() -> Script {
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
pub async fn reviewed(target: &Path, work: &Path) -> std::path::PathBuf {
    reviewed_by(target, work, review_script()).await
}

/// Review `target` with `script`; the report.json path.
pub async fn reviewed_by(target: &Path, work: &Path, script: Script) -> std::path::PathBuf {
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

pub fn id_of(report: &Value, title: &str) -> String {
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

pub fn fixer_requests(reqs: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    reqs.iter().filter(|r| r.system.contains(FIXER)).collect()
}

pub fn git_out(dir: &Path, args: &[&str]) -> String {
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

/// The project as a git repository with one commit, under `work`: its path and HEAD.
pub fn git_project(work: &Path) -> (std::path::PathBuf, String) {
    let target = work.join("project");
    project(&target);
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    let head = git_out(&target, &["rev-parse", "HEAD"]);
    (target, head)
}
