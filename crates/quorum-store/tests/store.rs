//! The store's contract, on real sled databases in temporary directories.

mod common;

use common::{finding, meta, task};
use quorum_core::pack::ContextPack;
use quorum_core::task::{Classification, RejectedTask};
use quorum_store::{AttemptRecord, DataDir, DerivedStatus, Event, StoreError};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn data_dir() -> (tempfile::TempDir, DataDir) {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(dir.path());
    (dir, data)
}

fn finish(status: &str) -> Event {
    Event::FlowFinished {
        status: status.to_string(),
        reason: format!("{status} on purpose"),
    }
}

fn attempt(task_id: &str, attempt: u32, output: String) -> AttemptRecord {
    AttemptRecord {
        task_id: task_id.to_string(),
        attempt,
        persona: "security-reviewer".to_string(),
        model: "qwen2.5-coder:0.5b".to_string(),
        backend: "ollama".to_string(),
        node: "node-a".to_string(),
        prompt_hash: blake3::hash(b"system+user").to_hex().to_string(),
        output,
        iterations: 3,
        tokens_in: 1200,
        tokens_out: 340,
        started_ms: 1_000,
        ended_ms: 4_500,
        error_class: None,
        error: None,
        transcript: serde_json::json!([
            {"role": "system", "content": "you review"},
            {"role": "user", "content": "review src/lib.rs"}
        ]),
        reused_from: None,
        cache: None,
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn create_open_list_delete_round_trip() {
    let (_tmp, data) = data_dir();
    assert!(data.list_flows().unwrap().is_empty());

    let m = meta("20250601-120000-aaaaaa", "/repo", 1_000);
    let store = data.create_flow(&m).unwrap();
    assert_eq!(store.meta().unwrap(), m);
    drop(store);

    let store = data.open_flow(&m.flow_id).unwrap();
    assert_eq!(store.meta().unwrap(), m);
    drop(store);

    let listed = data.list_flows().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].flow_id, m.flow_id);
    assert_eq!(listed[0].flow_name, "review");
    assert_eq!(listed[0].target_path, "/repo");
    assert_eq!(listed[0].started_at, m.started_at);

    data.delete_flow(&m.flow_id).unwrap();
    assert!(data.list_flows().unwrap().is_empty());
    assert!(matches!(
        data.open_flow(&m.flow_id),
        Err(StoreError::NotFound { flow_id }) if flow_id == m.flow_id
    ));
    assert!(matches!(
        data.delete_flow(&m.flow_id),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn creating_a_flow_twice_fails_and_keeps_the_first() {
    let (_tmp, data) = data_dir();
    let first = meta("f1", "/repo", 1);
    drop(data.create_flow(&first).unwrap());
    let mut second = first.clone();
    second.target_path = "/elsewhere".to_string();
    assert!(matches!(
        data.create_flow(&second),
        Err(StoreError::AlreadyExists { flow_id }) if flow_id == "f1"
    ));
    // sled releases its file lock from a background thread shortly after the drop.
    let mut opened = data.open_flow("f1");
    for _ in 0..100 {
        if !matches!(opened, Err(StoreError::Locked { .. })) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        opened = data.open_flow("f1");
    }
    assert_eq!(opened.unwrap().meta().unwrap(), first);
}

#[test]
fn flow_ids_that_are_not_one_path_component_are_refused() {
    let (tmp, data) = data_dir();
    for bad in ["../escape", "a/b", "", ".hidden"] {
        assert!(matches!(
            data.create_flow(&meta(bad, "/repo", 1)),
            Err(StoreError::InvalidFlowId { .. })
        ));
        assert!(matches!(
            data.open_flow(bad),
            Err(StoreError::InvalidFlowId { .. })
        ));
    }
    assert!(!tmp.path().join("escape").exists());
}

#[test]
fn list_is_newest_first() {
    let (_tmp, data) = data_dir();
    for (id, ms) in [("b", 2_000), ("a", 3_000), ("c", 1_000)] {
        drop(data.create_flow(&meta(id, "/repo", ms)).unwrap());
    }
    let ids: Vec<String> = data
        .list_flows()
        .unwrap()
        .into_iter()
        .map(|s| s.flow_id)
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
}

#[test]
fn pack_snapshot_round_trips_exactly() {
    let (tmp, data) = data_dir();
    let mut pack = ContextPack::from_files(
        tmp.path().join("target"),
        Some("feedface".to_string()),
        vec![
            ("src/lib.rs".to_string(), "pub fn f() {}\n".to_string()),
            ("src/copy.rs".to_string(), "pub fn f() {}\n".to_string()),
            ("README.md".to_string(), "# demo\n\nünïcödé ✓\n".to_string()),
            (
                "Cargo.toml".to_string(),
                "[package]\nname = \"x\"\n".to_string(),
            ),
            ("empty.txt".to_string(), String::new()),
            ("../outside".to_string(), "nope".to_string()),
        ],
    );
    pack.skipped.push(quorum_core::pack::Skipped {
        path: ".env".to_string(),
        reason: "secret".to_string(),
    });
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    store.save_pack(&pack).unwrap();
    drop(store);

    let loaded = data.open_flow("f").unwrap().load_pack().unwrap();
    assert_eq!(loaded.root, pack.root);
    assert_eq!(loaded.head_sha, pack.head_sha);
    assert_eq!(loaded.skipped, pack.skipped);
    assert_eq!(
        loaded.files.keys().collect::<Vec<_>>(),
        pack.files.keys().collect::<Vec<_>>()
    );
    for (path, want) in &pack.files {
        let got = &loaded.files[path];
        assert_eq!(got.path, want.path);
        assert_eq!(got.hash, want.hash);
        assert_eq!(got.size, want.size);
        assert_eq!(got.line_count, want.line_count);
        assert_eq!(got.language, want.language);
        assert_eq!(got.kind, want.kind);
        assert_eq!(&*got.content, &*want.content);
    }
    // The rebuilt pack works as a pack.
    assert!(loaded
        .read_lines("src/lib.rs", 1, 1)
        .unwrap()
        .contains("pub fn f"));
}

#[test]
fn a_flow_without_a_saved_pack_says_so() {
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    assert!(matches!(store.load_pack(), Err(StoreError::NoPack { .. })));
}

#[test]
fn events_keep_order_and_seq_stays_monotonic_across_reopen() {
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    let first = [
        Event::FlowStarted {
            flow_id: "f".to_string(),
        },
        Event::Note {
            message: "one".to_string(),
        },
        Event::Note {
            message: "two".to_string(),
        },
    ];
    let seqs: Vec<u64> = first.iter().map(|e| store.append(e).unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3]);
    drop(store);

    let store = data.open_flow("f").unwrap();
    let resumed = Event::Resumed { from_seq: 3 };
    assert_eq!(store.append(&resumed).unwrap(), 4);
    // Clones share the counter.
    let clone = store.clone();
    assert_eq!(
        clone
            .append(&Event::Note {
                message: "three".into()
            })
            .unwrap(),
        5
    );
    drop(store);
    drop(clone);

    let events = data.open_flow("f").unwrap().events().unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(events[0].event, first[0]);
    assert_eq!(events[2].event, first[2]);
    assert_eq!(events[3].event, resumed);
    assert!(events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    assert!(events[0].at_ms > 0);
}

#[test]
fn concurrent_appends_get_distinct_seqs_in_log_order() {
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                (0..25)
                    .map(|i| {
                        store
                            .append(&Event::Note {
                                message: format!("{t}-{i}"),
                            })
                            .unwrap()
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (1..=100).collect::<Vec<u64>>());
    assert_eq!(store.events().unwrap().len(), 100);
}

#[test]
fn replay_of_a_stored_log_derives_resume_state() {
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    let classification = Classification {
        domain: "software".to_string(),
        languages: vec!["rust".to_string()],
        ..Classification::default()
    };
    let rejected = vec![RejectedTask {
        id: "t9".to_string(),
        persona: "nobody".to_string(),
        reason: "unknown persona".to_string(),
    }];
    for event in [
        Event::FlowStarted {
            flow_id: "f".into(),
        },
        Event::ScoutCompleted {
            classification: classification.clone(),
            fallback: false,
        },
        Event::PlanCompleted {
            tasks: vec![task("t1"), task("t2"), task("t3")],
            rejected: rejected.clone(),
        },
        Event::AttemptStarted {
            task_id: "t1".into(),
            attempt: 1,
            node: "node-a".into(),
        },
        Event::AttemptSucceeded {
            task_id: "t1".into(),
            attempt: 1,
            findings: vec![finding("a"), finding("b")],
        },
        Event::AttemptFailed {
            task_id: "t2".into(),
            attempt: 3,
            error_class: "malformed_output".into(),
            error: "prose".into(),
        },
        Event::TaskAbandoned {
            task_id: "t2".into(),
            reason: "circular_fix".into(),
        },
        Event::AttemptStarted {
            task_id: "t3".into(),
            attempt: 1,
            node: "node-b".into(),
        },
    ] {
        store.append(&event).unwrap();
    }
    drop(store);

    let store = data.open_flow("f").unwrap();
    let replay = store.replay().unwrap();
    assert_eq!(replay.classification, Some((classification, false)));
    let (tasks, rej) = replay.plan.clone().unwrap();
    assert_eq!(tasks.len(), 3);
    assert_eq!(rej, rejected);
    assert_eq!(replay.completed["t1"], vec![finding("a"), finding("b")]);
    assert!(!replay.completed.contains_key("t2"));
    assert_eq!(replay.abandoned["t2"], "circular_fix");
    assert_eq!(replay.attempts["t1"], 1);
    assert_eq!(replay.attempts["t2"], 3);
    assert_eq!(replay.attempts["t3"], 1);
    assert_eq!(replay.finished, None);
    assert_eq!(replay.last_seq, 8);
    let unfinished: Vec<&str> = replay
        .unfinished_tasks()
        .iter()
        .map(|t| t.id.as_str())
        .collect();
    assert_eq!(unfinished, ["t3"]);
    assert_eq!(store.status(), DerivedStatus::Interrupted);

    let listed = data.list_flows();
    // The store is open here, so the listing sees it as running.
    assert_eq!(listed.unwrap()[0].status, DerivedStatus::Running);
    drop(store);
    let summary = data.list_flows().unwrap().remove(0);
    assert_eq!(summary.status, DerivedStatus::Interrupted);
    assert_eq!(summary.tasks_total, 3);
    assert_eq!(summary.tasks_done, 2);
    assert_eq!(summary.findings, 2);
    assert!(summary.last_event_ms > 1);
}

#[test]
fn attempts_round_trip_with_a_megabyte_of_output() {
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    let big: String = (0..1024 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut failed = attempt("t1", 1, "partial".to_string());
    failed.error_class = Some("timeout".to_string());
    failed.error = Some("no answer in 120 s".to_string());
    let ok = attempt("t1", 2, big.clone());
    let other = attempt("t0", 1, "done".to_string());
    for a in [&ok, &failed, &other] {
        store.record_attempt(a).unwrap();
    }
    drop(store);

    let attempts = data.open_flow("f").unwrap().attempts().unwrap();
    assert_eq!(attempts, vec![other, failed, ok]);
    assert_eq!(attempts[2].output.len(), 1024 * 1024);
    assert_eq!(attempts[2].output, big);
}

#[test]
fn report_round_trips() {
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    assert_eq!(store.report().unwrap(), None);
    store.save_report("{\"schema_version\":1}").unwrap();
    drop(store);
    assert_eq!(
        data.open_flow("f").unwrap().report().unwrap().as_deref(),
        Some("{\"schema_version\":1}")
    );
}

#[test]
fn status_is_derived_from_the_finish_event() {
    let (_tmp, data) = data_dir();
    for (id, event, want) in [
        ("done", Some(finish("completed")), DerivedStatus::Completed),
        ("part", Some(finish("partial")), DerivedStatus::Partial),
        ("fail", Some(finish("failed")), DerivedStatus::Failed),
        ("dead", None, DerivedStatus::Interrupted),
    ] {
        let store = data.create_flow(&meta(id, "/repo", 1)).unwrap();
        store
            .append(&Event::FlowStarted { flow_id: id.into() })
            .unwrap();
        if let Some(event) = event {
            store.append(&event).unwrap();
        }
        assert_eq!(store.status(), want, "{id}");
        drop(store);
        let listed = data.list_flows().unwrap();
        let summary = listed.iter().find(|s| s.flow_id == id).unwrap();
        assert_eq!(summary.status, want, "{id}");
        assert_eq!(summary.status.to_string(), want.as_str());
    }
}

#[test]
fn gc_collects_old_finished_and_interrupted_flows_only() {
    let (_tmp, data) = data_dir();
    // Real start times: a flow without events is as old as its start.
    let now = common::now_ms();
    let done = data.create_flow(&meta("done", "/repo", now)).unwrap();
    done.append(&finish("completed")).unwrap();
    drop(done);
    drop(data.create_flow(&meta("dead", "/repo", now)).unwrap());
    let running = data.create_flow(&meta("running", "/repo", now)).unwrap();

    assert!(data.gc(Duration::from_secs(86_400)).unwrap().is_empty());
    assert_eq!(data.list_flows().unwrap().len(), 3);

    let mut deleted = data.gc(Duration::ZERO).unwrap();
    deleted.sort();
    assert_eq!(deleted, ["dead", "done"]);
    let left: Vec<String> = data
        .list_flows()
        .unwrap()
        .into_iter()
        .map(|s| s.flow_id)
        .collect();
    assert_eq!(left, ["running"]);
    // The running flow was not disturbed.
    running
        .append(&Event::Note {
            message: "still here".into(),
        })
        .unwrap();
    assert!(matches!(
        data.delete_flow("running"),
        Err(StoreError::Locked { .. })
    ));
}

#[test]
fn find_resumable_picks_the_newest_interrupted_flow_of_that_target_and_flow() {
    let (_tmp, data) = data_dir();
    drop(data.create_flow(&meta("old", "/repo", 1)).unwrap());
    drop(data.create_flow(&meta("new", "/repo", 5)).unwrap());
    let finished = data.create_flow(&meta("finished", "/repo", 9)).unwrap();
    finished.append(&finish("completed")).unwrap();
    drop(finished);
    drop(
        data.create_flow(&meta("other-target", "/other", 10))
            .unwrap(),
    );
    let mut other_flow = meta("other-flow", "/repo", 11);
    other_flow.flow_name = "audit".to_string();
    drop(data.create_flow(&other_flow).unwrap());
    let _running = data.create_flow(&meta("running", "/repo", 12)).unwrap();

    let found = data.find_resumable("/repo", "review").unwrap().unwrap();
    assert_eq!(found.flow_id, "new");
    assert_eq!(
        data.find_resumable("/repo", "audit")
            .unwrap()
            .unwrap()
            .flow_id,
        "other-flow"
    );
    assert!(data.find_resumable("/nowhere", "review").unwrap().is_none());
}

#[test]
fn a_corrupt_store_is_reported_with_its_path_and_never_reset() {
    let (tmp, data) = data_dir();
    let store = data.create_flow(&meta("bad", "/repo", 2)).unwrap();
    store
        .append(&Event::FlowStarted {
            flow_id: "bad".into(),
        })
        .unwrap();
    drop(store);
    let good = data.create_flow(&meta("good", "/repo", 1)).unwrap();
    good.append(&finish("completed")).unwrap();
    drop(good);

    let db = tmp.path().join("flows").join("bad").join("db");
    let files = files_under(&db);
    assert!(!files.is_empty());
    let mut junk = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let len = std::fs::metadata(file).unwrap().len().max(64) as usize;
        let bytes: Vec<u8> = (0..len).map(|j| ((i * 31 + j * 7) % 251) as u8).collect();
        std::fs::write(file, &bytes).unwrap();
        junk.push(bytes);
    }

    match data.open_flow("bad") {
        Err(e @ StoreError::Corrupt { .. }) => {
            let message = e.to_string();
            assert!(message.contains(&db.display().to_string()), "{message}");
            assert!(message.contains("never reset"), "{message}");
        }
        other => panic!("expected corrupt, got {other:?}"),
    }

    // One bad flow does not fail the listing.
    let listed = data.list_flows().unwrap();
    assert_eq!(listed.len(), 2);
    let bad = listed.iter().find(|s| s.flow_id == "bad").unwrap();
    match &bad.status {
        DerivedStatus::Corrupt(message) => {
            assert!(message.contains(&db.display().to_string()), "{message}")
        }
        other => panic!("expected corrupt, got {other}"),
    }
    assert_eq!(
        bad.target_path, "/repo",
        "metadata beside the db still names it"
    );
    let good = listed.iter().find(|s| s.flow_id == "good").unwrap();
    assert_eq!(good.status, DerivedStatus::Completed);

    // Neither gc nor resume-lookup touches it.
    assert_eq!(data.gc(Duration::ZERO).unwrap(), ["good"]);
    assert!(data.find_resumable("/repo", "review").unwrap().is_none());

    // The junk is still there, byte for byte, and nothing was added.
    assert_eq!(files_under(&db), files);
    for (file, bytes) in files.iter().zip(&junk) {
        assert_eq!(&std::fs::read(file).unwrap(), bytes, "{}", file.display());
    }

    // Deleting it is the way out, and it works.
    data.delete_flow("bad").unwrap();
    assert!(data.list_flows().unwrap().is_empty());
}

#[test]
fn a_store_missing_its_database_files_is_corrupt_not_recreated() {
    let (tmp, data) = data_dir();
    drop(data.create_flow(&meta("f", "/repo", 1)).unwrap());
    let db = tmp.path().join("flows").join("f").join("db");
    std::fs::remove_file(db.join("db")).unwrap();
    match data.open_flow("f") {
        Err(StoreError::Corrupt { path, message }) => {
            assert_eq!(path, db);
            assert!(message.contains("missing"), "{message}");
        }
        other => panic!("expected corrupt, got {other:?}"),
    }
    assert!(!db.join("db").exists());
}

#[test]
fn node_store_keeps_facts_across_reopen_and_is_exclusive() {
    let (_tmp, data) = data_dir();
    let node = data.open_node().unwrap();
    node.put("model/qwen/tokens_per_s", &42.5f64).unwrap();
    node.put("model/llama/tokens_per_s", &17.0f64).unwrap();
    assert!(matches!(data.open_node(), Err(StoreError::Locked { .. })));
    drop(node);
    let node = data.open_node().unwrap();
    assert_eq!(
        node.get::<f64>("model/qwen/tokens_per_s").unwrap(),
        Some(42.5)
    );
    assert_eq!(node.get::<f64>("absent").unwrap(), None);
    assert_eq!(
        node.keys("model/").unwrap(),
        ["model/llama/tokens_per_s", "model/qwen/tokens_per_s"]
    );
    assert!(matches!(
        node.get::<String>("model/qwen/tokens_per_s"),
        Err(StoreError::Decode { .. })
    ));
}

#[test]
fn the_scope_of_a_review_survives_reopen_and_the_first_one_wins() {
    use quorum_core::scope::{ChangeKind, ChangeSet, FileChange, Guidance, Profile, ReviewScope};
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("s", "/repo", 1)).unwrap();
    let scope = ReviewScope {
        change: Some(ChangeSet {
            spec: "main..topic".into(),
            base: "a".repeat(40),
            head: "b".repeat(40),
            files: vec![FileChange {
                path: "src/a.rs".into(),
                kind: ChangeKind::Modified,
                old_path: None,
                added: 1,
                removed: 1,
                touched: vec![(3, 3)],
                hunks: "@@ -3 +3 @@\n-a\n+b\n".into(),
            }],
        }),
        guidance: Guidance {
            source: ".quorum.toml".into(),
            instructions: "mind the tenants".into(),
            paths: Vec::new(),
        },
        profile: Profile::Chill,
        spec: None,
        prior: None,
        analyzers: Default::default(),
        memory: None,
    };
    store
        .append(&Event::ScopeRecorded {
            scope: scope.clone(),
        })
        .unwrap();
    store
        .append(&Event::ScopeRecorded {
            scope: ReviewScope::default(),
        })
        .unwrap();
    drop(store);
    let store = data.open_flow("s").unwrap();
    assert_eq!(store.replay().unwrap().scope, Some(scope));
}

#[test]
fn criteria_and_their_judgments_replay_first_one_wins() {
    use quorum_core::judging::conformance::{Criterion, CriterionStatus, Judgment};
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("c", "/repo", 1)).unwrap();
    let crit = |id: &str| Criterion {
        id: id.into(),
        text: format!("criterion {id}"),
        line: 1,
    };
    let judged = |id: &str, status| Judgment {
        id: id.into(),
        status,
        evidence: Vec::new(),
        reason: "r".into(),
        judged: true,
    };
    store
        .append(&Event::CriteriaExtracted {
            criteria: vec![crit("C1"), crit("C2")],
            by_model: false,
        })
        .unwrap();
    store
        .append(&Event::CriteriaExtracted {
            criteria: vec![crit("X")],
            by_model: true,
        })
        .unwrap();
    store
        .append(&Event::CriteriaJudged {
            judgments: vec![judged("C1", CriterionStatus::Divergent)],
        })
        .unwrap();
    // A late, fenced batch ruling again on C1 changes nothing; C2 is new.
    store
        .append(&Event::CriteriaJudged {
            judgments: vec![
                judged("C1", CriterionStatus::Met),
                judged("C2", CriterionStatus::Unmet),
            ],
        })
        .unwrap();
    drop(store);
    let r = data.open_flow("c").unwrap().replay().unwrap();
    let (criteria, by_model) = r.criteria.unwrap();
    assert_eq!(criteria.len(), 2);
    assert!(!by_model);
    assert_eq!(r.criteria_judged["C1"].status, CriterionStatus::Divergent);
    assert_eq!(r.criteria_judged["C2"].status, CriterionStatus::Unmet);
}

#[test]
fn prior_rulings_replay_the_first_ruling_per_finding() {
    use quorum_core::judging::adjudication::{Adjudged, Status};
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("p", "/repo", 1)).unwrap();
    let ruled = |id: &str, status| Adjudged {
        id: id.into(),
        title: "t".into(),
        file: Some("a.py".into()),
        severity: quorum_core::review::finding::Severity::P1,
        disposition: None,
        status,
        reason: "r".into(),
        evidence: Vec::new(),
        decided_by: "judge".into(),
        judged: true,
    };
    store
        .append(&Event::PriorAdjudicated {
            rulings: vec![ruled("F001", Status::StillPresent)],
        })
        .unwrap();
    // A late batch ruling again on F001 changes nothing; F002 is new.
    store
        .append(&Event::PriorAdjudicated {
            rulings: vec![ruled("F001", Status::Fixed), ruled("F002", Status::Fixed)],
        })
        .unwrap();
    drop(store);
    let r = data.open_flow("p").unwrap().replay().unwrap();
    assert_eq!(r.adjudicated.len(), 2);
    assert_eq!(r.adjudicated["F001"].status, Status::StillPresent);
    assert_eq!(r.adjudicated["F002"].status, Status::Fixed);
}

#[test]
fn panel_facts_replay_first_scores_latest_failures_and_first_verdict() {
    use quorum_core::judging::panel::{Decision, JudgeScore, Verdict, VerdictBy};
    let (_tmp, data) = data_dir();
    let store = data.create_flow(&meta("j", "/repo", 1)).unwrap();
    let scored = |judge: &str, overall: f64| Event::PanelScored {
        score: JudgeScore {
            judge: judge.into(),
            axis: "grounding".into(),
            perspective: "skeptic".into(),
            model: "m".into(),
            overall,
            reason: "r".into(),
            items: Vec::new(),
        },
    };
    let failed = |judge: &str, error: &str| Event::PanelJudgeFailed {
        judge: judge.into(),
        error: error.into(),
    };
    let decided = |verdict, by| Event::PanelDecided {
        decision: Decision {
            verdict,
            by,
            summary: "s".into(),
        },
    };
    for e in [
        scored("a", 2.0),
        failed("b", "prose"),
        // A late answer of a judge already counted changes nothing.
        scored("a", 9.0),
        // A judge that failed once and answered on a later try counts.
        failed("c", "http 500"),
        scored("c", 7.0),
        failed("b", "prose again"),
        failed("a", "fenced late failure"),
        decided(Verdict::Revise, VerdictBy::Rule),
        decided(Verdict::Accept, VerdictBy::MetaJudge),
    ] {
        store.append(&e).unwrap();
    }
    drop(store);
    let r = data.open_flow("j").unwrap().replay().unwrap();
    let scores: Vec<(&str, f64)> = r
        .panel_scores
        .values()
        .map(|s| (s.judge.as_str(), s.overall))
        .collect();
    assert_eq!(scores, [("a", 2.0), ("c", 7.0)]);
    assert_eq!(r.panel_failed.len(), 1);
    assert_eq!(r.panel_failed["b"], "prose again");
    let d = r.panel_decision.unwrap();
    assert_eq!((d.verdict, d.by), (Verdict::Revise, VerdictBy::Rule));
}
