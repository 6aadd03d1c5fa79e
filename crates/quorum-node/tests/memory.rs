//! A node's memory does not grow with every review it ran: when a review ends its pack leaves
//! the registry peers fetch from and its event log shrinks to the end event, while its report
//! stays available.

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
