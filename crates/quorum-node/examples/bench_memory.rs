//! Memory over a node's lifetime: 100 scripted reviews through one `NodeService`, printing the
//! process's resident memory (VmRSS) after the first and after every tenth. A node that kept
//! every review's pack (512 KiB each here) and events would grow by the packs alone by 50 MiB;
//! this one levels off once its bounded caches (the newest 16 reports and event logs, the
//! blackboard's 64 reviews, the allocator's arenas) are full.
//!
//! `cargo run --release -p quorum-node --example bench_memory`

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_api::{pb, ReviewApi, FINISHED_KIND};
use quorum_llm::{BackendConfig, BackendKind};
use quorum_node::{NodeService, NodeSetup, PackRegistry};
use quorum_runtime::Backends;
use quorum_testkit::ScriptedServer;
use std::sync::Arc;
use support::*;
use tokio_stream::StreamExt;

const REVIEWS: usize = 100;
/// Padding per review so a pack weighs something (distinct per review: no sharing).
const PAD_BYTES: usize = 512 * 1024;

fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = ScriptedServer::start(code_review_script()).await.unwrap();
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    let backends = Backends::from_configs(&[cfg], MODEL).unwrap();
    let data = tempfile::tempdir().unwrap();
    let packs = Arc::new(PackRegistry::default());
    let svc = NodeService::new(NodeSetup {
        name: "bench".into(),
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
    let root = fixture("code_project");
    let mut at_50 = 0;
    for i in 0..REVIEWS {
        let mut files = Vec::new();
        for rel in [
            "src/db.py",
            "src/auth.py",
            "src/utils.py",
            "tests/test_app.py",
            "README.md",
        ] {
            if let Ok(content) = std::fs::read(root.join(rel)) {
                files.push(pb::SourceFile {
                    path: rel.into(),
                    content,
                });
            }
        }
        let pad = format!("review {i}\n").repeat(PAD_BYTES / 10);
        files.push(pb::SourceFile {
            path: "docs/padding.txt".into(),
            content: pad.into_bytes(),
        });
        let id = svc
            .submit(pb::SubmitReviewRequest {
                target_name: format!("./review-{i}"),
                files,
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
        // The scripted server records every prompt; that is the benchmark's memory, not the
        // node's.
        drop(server.take_requests());
        if i == 0 || (i + 1) % 10 == 0 {
            let rss = vm_rss_kib();
            if i + 1 == 50 {
                at_50 = rss;
            }
            println!(
                "after {:>3} review(s): VmRSS {rss} KiB, packs held {}, reviews in memory {}",
                i + 1,
                packs.len(),
                svc.reviews_in_memory()
            );
        }
    }
    let last = vm_rss_kib();
    println!(
        "growth from review 50 to {REVIEWS}: {:.2}x (packs submitted in that span: {} KiB)",
        last as f64 / at_50.max(1) as f64,
        (REVIEWS - 50) * PAD_BYTES / 1024
    );
}
