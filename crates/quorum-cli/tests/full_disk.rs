//! A real full disk under a local review (issue 27): the data dir on a small tmpfs, filled while
//! the review waits on held answers. The review stops failed with one line naming the data dir
//! and what to do (exit 3), no escape codes reach the redirected stderr, `flows list` never calls
//! it corrupt, and once space is freed `quorum resume` completes it without asking any model
//! again for a task recorded as done. Mounting a tmpfs needs root: elsewhere the test says so
//! and passes without checking.

mod common;

use common::*;
use quorum_testkit::ScriptedServer;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tmpfs mounted at a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("quorum-full-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Tmpfs { dir })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.dir).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Fill the filesystem under `dir` to the last byte; returns the filler to delete later.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![7u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    // Whatever is left that does not take a whole block.
    while f.write_all(&[7u8]).is_ok() {}
    let _ = f.sync_all();
    path
}

fn only_flow(data: &Path) -> String {
    let mut ids: Vec<String> = std::fs::read_dir(data.join("flows"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids.pop().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_review_in_one_line_and_resume_completes_it() {
    let Some(fs) = Tmpfs::mount("8m") else {
        println!("SKIP: cannot mount a tmpfs here (needs root): the full-disk path is not checked end to end");
        return;
    };
    let server = ScriptedServer::start(six_tasks_holding_after(2))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("target");
    copy_dir(&fixture("code_project"), &target);
    let data = fs.dir.join("data");
    let out = work.path().join("out");
    let backend = format!("ollama={}", server.ollama_url());
    let mut feed = server.subscribe();
    let child = command(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--max-concurrent",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
    )
    .env_remove("NO_COLOR")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Two tasks answered; the third is asked and held: fill the disk now, then let it answer.
    let mut seen = std::collections::BTreeSet::new();
    let reached = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(r) = feed.recv().await {
            if let Some(t) = task_of(&r) {
                seen.insert(t);
                if seen.len() > 2 {
                    break;
                }
            }
        }
    })
    .await;
    assert!(reached.is_ok(), "the review never reached its third task");
    let filler = fill(&fs.dir);
    server.release();
    let o = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the review hung on a full disk")
        .unwrap();
    let (code, stdout, stderr) = parts(&o);
    assert_eq!(code, 3, "stdout: {stdout}\nstderr: {stderr}");
    let why = format!("the data dir {} is out of space", data.display());
    let all = format!("{stdout}{stderr}");
    assert_eq!(
        all.matches(&why).count(),
        1,
        "the error appears once:\n{all}"
    );
    assert!(all.contains("free space, then `quorum resume"), "{all}");
    assert!(
        !stderr.contains('\u{1b}'),
        "escape codes reached a redirected stderr:\n{stderr}"
    );
    // The store's own complaints (sled's, once per failed flush) are not the user's to read.
    assert!(!all.contains("failed to flush"), "{all}");
    let report = read_json(&out.join("report.json"));
    assert_eq!(report["status"], "failed");

    // Listed while the disk is full: unavailable, never corrupt.
    let flow_id = only_flow(&data);
    let list = quorum(
        &["flows", "list", "--data-dir", data.to_str().unwrap()],
        work.path(),
    )
    .await;
    let listed = text(&list);
    assert!(!listed.contains("corrupt"), "{listed}");

    // Space freed: interrupted, and resume completes it.
    std::fs::remove_file(&filler).unwrap();
    let list = quorum(
        &["flows", "list", "--data-dir", data.to_str().unwrap()],
        work.path(),
    )
    .await;
    let listed = text(&list);
    assert!(listed.contains("interrupted"), "{listed}");
    let done_before: Vec<String> = {
        let store = quorum_store::DataDir::new(&data)
            .open_flow(&flow_id)
            .unwrap();
        store
            .replay()
            .unwrap()
            .completed
            .keys()
            .filter(|k| k.starts_with('t'))
            .cloned()
            .collect()
    };
    assert!(done_before.len() >= 2, "{done_before:?}");
    let asked_before = server.requests().len();
    let out2 = work.path().join("out2");
    let o = quorum(
        &[
            "resume",
            &flow_id,
            "--data-dir",
            data.to_str().unwrap(),
            "--backend",
            &backend,
            "--out",
            out2.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    let (code, stdout, stderr) = parts(&o);
    assert!(
        code == 0 || code == 1,
        "resume ({code}): {stdout}\n{stderr}"
    );
    let report = read_json(&out2.join("report.json"));
    assert_eq!(report["status"], "completed", "{}", report["status_reason"]);
    for r in server.requests().iter().skip(asked_before) {
        if let Some(t) = task_of(r) {
            assert!(
                !done_before.contains(&t),
                "{t} was recorded as done and asked again"
            );
        }
    }
}
