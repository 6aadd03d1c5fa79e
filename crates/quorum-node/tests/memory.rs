//! A node's memory does not grow with every review it ran: when a review ends its pack leaves
//! the registry peers fetch from and its event log shrinks to the end event, while its report
//! stays available; only the newest finished reviews keep their report in memory, older ones
//! are served from their stores.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_api::{pb, ReviewApi, FINISHED_KIND};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_node::{NodeService, NodeSetup, PackRegistry};
use quorum_runtime::Backends;
use quorum_testkit::ScriptedServer;
use std::sync::Arc;
use std::time::Duration;
use support::*;
use tokio_stream::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_review_releases_its_pack_and_events() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
        cfg.models = vec![MODEL.into()];
        let backends = Backends::from_configs(&[cfg], MODEL).unwrap();
        let data = tempfile::tempdir().unwrap();
        let packs = Arc::new(PackRegistry::default());
        let svc = NodeService::new(NodeSetup {
            name: "n".into(),
            data: quorum_store::DataDir::new(data.path()),
            backends,
            personas_dir: repo_root().join("personas"),
            flows_dir: repo_root().join("flows"),
            default_flow: "review".into(),
            max_concurrent: Some(2),
            advertised_addr: String::new(),
            board: Arc::new(quorum_runtime::board::MemoryBoard::default()),
            remote: None,
            packs: packs.clone(),
            analyzers: None,
            memory: None,
            storage: Default::default(),
            results: None,
        });
        // Keep no finished review's full event log, so this one's is released at its end.
        svc.set_event_logs_kept(0);
        let mut files = Vec::new();
        let root = fixture("code_project");
        for rel in [
            "src/db.py",
            "src/auth.py",
            "src/utils.py",
            "tests/test_app.py",
            "README.md",
            "src/app.py",
        ] {
            if let Ok(content) = std::fs::read(root.join(rel)) {
                files.push(pb::SourceFile {
                    path: rel.into(),
                    content,
                });
            }
        }
        let id = svc
            .submit(pb::SubmitReviewRequest {
                target_name: "./code_project".into(),
                files,
                flow: "review".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(packs.len(), 1, "a running review's pack is served to peers");
        let mut events = svc.watch(&id).await.unwrap();
        let mut n = 0;
        while let Some(ev) = events.next().await {
            n += 1;
            if ev.kind == FINISHED_KIND {
                break;
            }
        }
        assert!(n > 1, "the review streamed its progress");
        // The end event is pushed after the release, under the same lock.
        assert!(
            packs.is_empty(),
            "a finished review's pack is still in memory"
        );
        let replay: Vec<_> = svc.watch(&id).await.unwrap().collect().await;
        assert_eq!(replay.len(), 1, "{replay:?}");
        assert_eq!(replay[0].kind, FINISHED_KIND);
        let report = svc.report(&id).await.unwrap();
        assert!(!report.report_json.is_empty());
    })
    .await
    .unwrap();
}

fn code_project_files() -> Vec<pb::SourceFile> {
    let root = fixture("code_project");
    [
        "src/db.py",
        "src/auth.py",
        "src/utils.py",
        "README.md",
        "src/app.py",
    ]
    .into_iter()
    .filter_map(|rel| {
        std::fs::read(root.join(rel))
            .ok()
            .map(|content| pb::SourceFile {
                path: rel.into(),
                content,
            })
    })
    .collect()
}

async fn run_to_end(svc: &NodeService) -> String {
    let id = svc
        .submit(pb::SubmitReviewRequest {
            target_name: "./code_project".into(),
            files: code_project_files(),
            flow: "review".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut events = svc.watch(&id).await.unwrap();
    while let Some(ev) = events.next().await {
        if ev.kind == FINISHED_KIND {
            break;
        }
    }
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_newest_reports_stay_in_memory_and_older_ones_come_from_the_store() {
    tokio::time::timeout(Duration::from_secs(180), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
        cfg.models = vec![MODEL.into()];
        let backends = Backends::from_configs(&[cfg], MODEL).unwrap();
        let data = tempfile::tempdir().unwrap();
        let svc = NodeService::new(NodeSetup {
            name: "n".into(),
            data: quorum_store::DataDir::new(data.path()),
            backends,
            personas_dir: repo_root().join("personas"),
            flows_dir: repo_root().join("flows"),
            default_flow: "review".into(),
            max_concurrent: Some(2),
            advertised_addr: String::new(),
            board: Arc::new(quorum_runtime::board::MemoryBoard::default()),
            remote: None,
            packs: Arc::new(PackRegistry::default()),
            analyzers: None,
            memory: None,
            storage: Default::default(),
            results: None,
        });
        // N = 1: the second review's end releases the first one's report.
        svc.set_reports_kept(1);
        let oldest = run_to_end(&svc).await;
        assert_eq!(svc.reports_in_memory(), 1);
        let from_memory = svc.report(&oldest).await.unwrap();
        let newest = run_to_end(&svc).await;
        assert_eq!(
            svc.reports_in_memory(),
            1,
            "N+1 finished reviews must hold only N reports"
        );
        // The oldest is answered from its store, with the same report it had in memory.
        let from_store = svc.report(&oldest).await.unwrap();
        assert_eq!(from_store.status, from_memory.status);
        assert_eq!(from_store.report_json, from_memory.report_json);
        assert!(!svc.report(&newest).await.unwrap().report_json.is_empty());
        let listed = svc.list().await.unwrap();
        assert!(
            listed
                .iter()
                .any(|r| r.flow_id == oldest && r.status == "completed"),
            "{listed:?}"
        );

        // Past the entry bound a finished review is forgotten whole, and still answered for.
        svc.set_entries_kept(1);
        let third = run_to_end(&svc).await;
        assert_eq!(svc.reviews_in_memory(), 1, "only the newest entry is kept");
        let again = svc.report(&oldest).await.unwrap();
        assert_eq!(again.report_json, from_memory.report_json);
        let mut events = svc.watch(&newest).await.unwrap();
        let ev = events
            .next()
            .await
            .expect("a forgotten review's end is served");
        assert_eq!(ev.kind, FINISHED_KIND);
        assert!(ev.json.contains("completed"), "{}", ev.json);
        assert!(events.next().await.is_none(), "and the stream ends");
        assert!(!svc.cancel(&newest).await.unwrap(), "it already ended");
        assert!(svc.cancel("no-such-review").await.is_err());
        let listed = svc.list().await.unwrap();
        for id in [&oldest, &newest, &third] {
            assert!(listed.iter().any(|r| &r.flow_id == id), "{id} listed");
        }
    })
    .await
    .unwrap();
}
