//! `quorum review --flow document-review --apply-safe-fixes DIR` end to end: the target is left
//! byte for byte as it was, the copy carries exactly the safe_auto fixes, the report lists them.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use serde_json::Value;
use std::path::Path;

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            out.push((
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_fixes_go_to_a_copy_and_never_to_the_target() {
    let server = ScriptedServer::start(doc_review_script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let target = w.join("plan");
    copy_dir(&fixture("plan_doc"), &target);
    let before = snapshot(&target);
    let fixed = w.join("fixed");
    let out = w.join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let args = [
        "review",
        target.to_str().unwrap(),
        "--flow",
        "document-review",
        "--backend",
        &backend,
        "--model",
        MODEL,
        "--out",
        out.to_str().unwrap(),
        "--fail-on",
        "none",
        "--quiet",
        "--apply-safe-fixes",
        fixed.to_str().unwrap(),
    ];
    let o = quorum(&args, w).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    assert_eq!(snapshot(&target), before, "the target was modified");
    let original = std::fs::read_to_string(target.join(PLAN_DOC)).unwrap();
    let copy = std::fs::read_to_string(fixed.join(PLAN_DOC)).unwrap();
    assert_eq!(original.matches(SAFE_OLD).count(), 1);
    assert_eq!(copy, original.replacen(SAFE_OLD, SAFE_NEW, 1));
    assert_eq!(snapshot(&fixed).len(), before.len());

    let report: Value = read_json(&out.join("report.json"));
    let fixes = report["safe_fixes"]
        .as_array()
        .expect("report lists the fixes");
    assert_eq!(fixes.len(), 1, "{fixes:?}");
    assert_eq!(fixes[0]["applied"], true);
    assert_eq!(fixes[0]["old"], SAFE_OLD);
    assert_eq!(fixes[0]["file"], PLAN_DOC);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Safe fixes"), "{md}");
    assert!(md.contains("1 of 1 safe_auto fixes were applied to the copy"));

    // A destination inside the target, or one that already holds files, is refused up front
    // (exit 2) before any model call.
    let requests = server.requests().len();
    for bad in [target.join("fixed"), fixed.clone()] {
        let mut args = args.to_vec();
        let last = args.len() - 1;
        args[last] = bad.to_str().unwrap();
        let o = quorum(&args, w).await;
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("--apply-safe-fixes"));
    }
    // Through a cluster the target is not on the reviewing machine: refused, not ignored.
    let elsewhere = w.join("elsewhere");
    let mut remote = args.to_vec();
    let last = remote.len() - 1;
    remote[last] = elsewhere.to_str().unwrap();
    remote.extend(["--cluster", "http://127.0.0.1:9"]);
    let o = quorum(&remote, w).await;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--apply-safe-fixes needs the target"));
    assert!(!elsewhere.exists());
    assert_eq!(server.requests().len(), requests);
    assert_eq!(snapshot(&target), before);
}
