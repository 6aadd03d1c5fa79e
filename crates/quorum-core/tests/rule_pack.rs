//! quorum's semgrep rule pack (`config/semgrep/`) against its own test lines
//! (`tests/semgrep/`): every rule has lines it must flag (`ruleid:`) and lines it must not
//! (`ok:`), and `semgrep --test` runs them when semgrep is installed
//! (`deploy/local/analyzers.sh`). CI installs it and sets QUORUM_REQUIRE_SEMGREP=1, so there
//! the test fails rather than skips without it.

use quorum_core::analyzer::RULE_PACK;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every rule id of the pack.
fn rule_ids() -> Vec<String> {
    let mut ids = Vec::new();
    for (_, text) in RULE_PACK {
        let doc: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        for r in doc["rules"].as_sequence().unwrap() {
            ids.push(r["id"].as_str().unwrap().to_string());
        }
    }
    ids
}

#[test]
fn every_rule_has_positive_and_negative_test_lines() {
    let mut annotations = String::new();
    for e in std::fs::read_dir(repo().join("tests/semgrep")).unwrap() {
        annotations.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
    }
    for id in rule_ids() {
        let positive = annotations.lines().any(|l| {
            l.trim_start()
                .strip_prefix("# ruleid:")
                .is_some_and(|ids| ids.split(',').any(|i| i.trim() == id))
        });
        let negative = annotations.lines().any(|l| {
            l.trim_start()
                .strip_prefix("# ok:")
                .is_some_and(|ids| ids.split(',').any(|i| i.trim() == id))
        });
        assert!(
            positive,
            "rule {id} has no `# ruleid: {id}` line in tests/semgrep/"
        );
        assert!(
            negative,
            "rule {id} has no `# ok: {id}` line in tests/semgrep/"
        );
    }
}

/// semgrep: $QUORUM_SEMGREP, else on PATH, else where deploy/local/analyzers.sh puts it.
fn semgrep() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("QUORUM_SEMGREP") {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("semgrep"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(cache.join("quorum/local/analyzers-bin/semgrep")).filter(|p| p.exists())
    })
}

#[test]
fn semgrep_test_passes_on_the_rule_pack() {
    let Some(semgrep) = semgrep() else {
        assert!(
            std::env::var("QUORUM_REQUIRE_SEMGREP").as_deref() != Ok("1"),
            "QUORUM_REQUIRE_SEMGREP=1 but semgrep is not installed (deploy/local/analyzers.sh)"
        );
        eprintln!(
            "SKIP: semgrep is not installed; run deploy/local/analyzers.sh to check the rule pack"
        );
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(&semgrep)
        .args([
            "--test",
            "--metrics=off",
            "--disable-version-check",
            "--config",
            "config/semgrep",
            "tests/semgrep",
        ])
        .current_dir(repo())
        .env("HOME", home.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", semgrep.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "semgrep --test failed:\n{text}");
    assert!(text.contains("All tests passed"), "{text}");
}
