//! A flow held open by another process is `running` to everyone else, and `interrupted` once
//! that process is killed. The other process is this test binary itself, re-executed to run
//! only `holder_process` with `QUORUM_STORE_HOLD` set.

mod common;

use quorum_store::{DataDir, DerivedStatus, Event, StoreError};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const HOLD_DIR: &str = "QUORUM_STORE_HOLD";
const HOLD_FLOW: &str = "QUORUM_STORE_HOLD_FLOW";
/// Events the holder appends before it reports holding; they must survive its kill -9.
const HOLD_APPENDS: &str = "QUORUM_STORE_HOLD_APPENDS";
const HELD: &str = "QUORUM_STORE_HELD";
/// Generous: the child is this binary starting up, on a shared 2-core machine.
const WAIT: Duration = Duration::from_secs(120);

/// Helper, not a check: only acts when re-executed by `a_flow_held_by_another_process_...`.
/// Opens the flow, appends `QUORUM_STORE_HOLD_APPENDS` notes, says so on stdout, and holds
/// it until its stdin closes or it is killed.
#[test]
fn holder_process() {
    let (Some(dir), Some(flow)) = (std::env::var_os(HOLD_DIR), std::env::var(HOLD_FLOW).ok())
    else {
        return;
    };
    let store = DataDir::new(dir).open_flow(&flow).unwrap();
    let appends: usize = std::env::var(HOLD_APPENDS).unwrap().parse().unwrap();
    for i in 0..appends {
        store
            .append(&Event::Note {
                message: format!("from the holder {i}"),
            })
            .unwrap();
    }
    println!("{HELD}");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(store);
}

#[test]
fn a_flow_held_by_another_process_is_running_then_interrupted_with_its_appends_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::new(tmp.path());
    let store = data
        .create_flow(&common::meta("held", "/repo", common::now_ms()))
        .unwrap();
    store
        .append(&Event::FlowStarted {
            flow_id: "held".into(),
        })
        .unwrap();
    drop(store);

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "holder_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLD_DIR, tmp.path())
        .env(HOLD_FLOW, "held")
        .env(HOLD_APPENDS, "50")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest may have printed "test holder_process ... " on the same line.
            if line.contains(HELD) {
                let _ = tx.send(());
            }
        }
    });
    let held = rx.recv_timeout(WAIT);
    if held.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("holder process did not report holding the flow within {WAIT:?}");
    }

    let outcome = std::panic::catch_unwind(|| {
        assert!(matches!(
            data.open_flow("held"),
            Err(StoreError::Locked { .. })
        ));
        let listed = data.list_flows().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].status, DerivedStatus::Running);
        assert_eq!(listed[0].target_path, "/repo");
        assert!(data.find_resumable("/repo", "review").unwrap().is_none());
        assert!(data.gc(Duration::ZERO).unwrap().is_empty());
        assert!(matches!(
            data.delete_flow("held"),
            Err(StoreError::Locked { .. })
        ));
    });

    // kill -9: the lock goes with the process, nothing is left to clean up, and every append
    // it reported is on disk (sled alone would have buffered them for up to 500 ms).
    child.kill().unwrap();
    child.wait().unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }

    let listed = data.list_flows().unwrap();
    assert_eq!(listed[0].status, DerivedStatus::Interrupted);
    let found = data.find_resumable("/repo", "review").unwrap().unwrap();
    assert_eq!(found.flow_id, "held");
    let store = data.open_flow("held").unwrap();
    let events = store.events().unwrap();
    assert_eq!(events.len(), 51);
    assert_eq!(
        events.last().unwrap().event,
        Event::Note {
            message: "from the holder 49".into()
        }
    );
    assert_eq!(store.append(&Event::Resumed { from_seq: 51 }).unwrap(), 52);
    assert_eq!(store.status(), DerivedStatus::Interrupted);
}

/// A node lists its reviews while it accepts new ones: a listing never sees a review half-made
/// (as `corrupt`), and one made as a review is created does not make the creation fail as
/// `Locked` (a listing that opened the new database before sled locked it would hold it).
#[test]
fn flows_created_while_other_threads_list_them_are_never_seen_half_made() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const FLOWS: usize = 150;
    let tmp = tempfile::tempdir().unwrap();
    // One data dir per creation, so a listing is one directory and the probers hit the moment
    // of creation as often as they can.
    let root = |n: usize| tmp.path().join(n.to_string());
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let probers: Vec<_> = (0..3)
        .map(|_| {
            let (next, base) = (next.clone(), tmp.path().to_path_buf());
            std::thread::spawn(move || {
                let (mut probes, mut half_made) = (0u64, Vec::new());
                loop {
                    let n = next.load(Ordering::Relaxed);
                    if n >= FLOWS {
                        return (probes, half_made);
                    }
                    for s in DataDir::new(base.join(n.to_string())).list_flows().unwrap() {
                        if matches!(s.status, DerivedStatus::Corrupt(_)) {
                            half_made.push(format!("{}: {}", s.flow_id, s.status));
                        }
                    }
                    probes += 1;
                }
            })
        })
        .collect();
    let mut failed = Vec::new();
    for n in 0..FLOWS {
        let id = format!("busy-{n}");
        let data = DataDir::new(root(n));
        match data.create_flow(&common::meta(&id, "/repo", common::now_ms())) {
            Ok(store) => drop(store),
            Err(e) => failed.push(format!("{id}: {e}")),
        }
        next.store(n + 1, Ordering::Relaxed);
    }
    for p in probers {
        let (probes, half_made) = p.join().unwrap();
        assert!(probes > 0);
        assert!(half_made.is_empty(), "listed half-made: {half_made:?}");
    }
    assert!(failed.is_empty(), "creations failed: {failed:?}");
    for n in 0..FLOWS {
        assert_eq!(DataDir::new(root(n)).list_flows().unwrap().len(), 1);
    }
}
