//! A node whose store refuses writes takes no new work and says so (issue 27): a submitted
//! review is refused with the reason (the client goes to another node), the node's status
//! carries it, and once a write goes through again the node takes reviews again.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_api::{pb, ApiError, ReviewApi};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_node::{NodeService, NodeSetup, PackRegistry};
use quorum_runtime::{Backends, StorageHealth};
use quorum_testkit::ScriptedServer;
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn request() -> pb::SubmitReviewRequest {
    let root = fixture("code_project");
    let files = ["src/db.py", "src/auth.py", "src/utils.py"]
        .iter()
        .filter_map(|rel| {
            Some(pb::SourceFile {
                path: rel.to_string(),
                content: std::fs::read(root.join(rel)).ok()?,
            })
        })
        .collect();
    pb::SubmitReviewRequest {
        target_name: "./code_project".into(),
        files,
        flow: "review".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_store_refuses_writes_takes_no_review_and_says_why() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let server = ScriptedServer::start(code_review_script()).await.unwrap();
        let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
        cfg.models = vec![MODEL.into()];
        let data = tempfile::tempdir().unwrap();
        let storage = Arc::new(StorageHealth::default());
        let svc = NodeService::new(NodeSetup {
            name: "n1".into(),
            data: quorum_store::DataDir::new(data.path()),
            backends: Backends::from_configs(&[cfg], MODEL).unwrap(),
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
            storage: storage.clone(),
            results: None,
        });
        let why = "the data dir /data is out of space: free space";
        storage.failed(why);
        match svc.submit(request()).await {
            Err(ApiError::Unavailable(m)) => {
                assert!(
                    m.contains("node n1 takes no new review") && m.contains(why),
                    "{m}"
                )
            }
            other => panic!("a node with a failing store took a review: {other:?}"),
        }
        let status = svc.cluster_status().await.unwrap();
        assert_eq!(status[0].storage, why);
        assert!(server.requests().is_empty(), "no model was asked");

        // A write went through (a probe, another review): the node works again.
        storage.recovered();
        let id = svc
            .submit(request())
            .await
            .expect("a healthy node takes the review");
        assert!(!id.is_empty());
        assert!(svc.cluster_status().await.unwrap()[0].storage.is_empty());
    })
    .await
    .expect("the test hung");
}
