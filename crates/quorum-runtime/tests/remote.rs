//! Specialist attempts on other nodes, through the same seam the cluster uses: placement by
//! load, results routed back by the conductor's registry name, node loss fencing and
//! reassignment. The "peer" here runs `remote::run_attempt` with its own backends and its own
//! scripted model server, in process.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::catalog::Catalog;
use quorum_core::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::report::Report;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::remote::{self, RemoteAttempt, RemoteExecutor, RemoteSlot};
use quorum_runtime::{Backends, FactLog, ReviewContext};
use quorum_testkit::ScriptedServer;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

#[derive(Debug)]
struct FakePeer {
    name: String,
    capacity: usize,
    backends: Backends,
    pack: ContextPack,
    alive: AtomicBool,
    /// Hold attempts instead of running them (a hung node).
    hang: bool,
    held: Mutex<Vec<RemoteAttempt>>,
    ran: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl RemoteExecutor for FakePeer {
    fn peers(&self) -> Vec<RemoteSlot> {
        if !self.alive.load(Ordering::SeqCst) {
            return Vec::new();
        }
        vec![RemoteSlot {
            node: self.name.clone(),
            capacity: self.capacity,
            models: vec![MODEL.into()],
        }]
    }

    async fn dispatch(&self, _node: &str, req: RemoteAttempt) -> Result<(), String> {
        self.ran.lock().unwrap().push(req.task.id.clone());
        if self.hang {
            self.held.lock().unwrap().push(req);
            return Ok(());
        }
        // "Fetch" contents by hash from the origin's pack.
        let contents: BTreeMap<String, Arc<str>> = self
            .pack
            .files
            .values()
            .map(|f| (f.hash.clone(), f.content.clone()))
            .collect();
        let backends = self.backends.clone();
        let name = self.name.clone();
        tokio::spawn(async move {
            let (flow_id, attempt) = (req.flow_id.clone(), req.attempt);
            let outcome = remote::run_attempt(req, &contents, &backends, None, &name).await;
            remote::deliver_result(&flow_id, attempt, outcome);
        });
        Ok(())
    }
}

fn backends(server: &ScriptedServer) -> Backends {
    let mut cfg = BackendConfig::new(BackendKind::Ollama, server.ollama_url());
    cfg.models = vec![MODEL.into()];
    cfg.timeout_secs = 5;
    Backends::from_configs(&[cfg], MODEL).unwrap()
}

fn context(
    local: &ScriptedServer,
    peer: Option<Arc<FakePeer>>,
    flow_id: &str,
) -> Arc<ReviewContext> {
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    Arc::new(ReviewContext {
        flow_id: flow_id.into(),
        flow,
        catalog: Catalog::load(&repo_root().join("personas")).unwrap(),
        pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
        backends: backends(local),
        verifier_model: None,
        node: "origin".into(),
        max_concurrent: Some(1),
        started_at: String::new(),
        facts: FactLog::disabled(),
        remote: peer.map(|p| p as Arc<dyn RemoteExecutor>),
        board: None,
        scope: Default::default(),
    })
}

async fn run(ctx: Arc<ReviewContext>) -> Report {
    tokio::time::timeout(
        Duration::from_secs(60),
        quorum_runtime::run_review(ctx, None),
    )
    .await
    .expect("hung")
    .unwrap()
}

fn anchors(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r
        .findings
        .iter()
        .map(|f| format!("{}|{}", f.anchor, f.severity))
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_spreads_to_a_peer_and_the_result_is_the_same() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let single = run(context(&local, None, &uuid::Uuid::new_v4().to_string())).await;

    let ctx_pack =
        ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap();
    let peer = Arc::new(FakePeer {
        name: "peer".into(),
        capacity: 2,
        backends: backends(&peer_server),
        pack: ctx_pack,
        alive: AtomicBool::new(true),
        hang: false,
        held: Mutex::new(Vec::new()),
        ran: Mutex::new(Vec::new()),
    });
    let before = local.requests().len();
    let spread = run(context(
        &local,
        Some(peer.clone()),
        &uuid::Uuid::new_v4().to_string(),
    ))
    .await;
    assert_eq!(
        spread.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        spread.status_reason
    );
    assert_eq!(anchors(&single), anchors(&spread));
    // Some specialists ran on the peer, against the peer's own model server only.
    let on_peer: Vec<_> = spread
        .tasks
        .iter()
        .filter(|t| t.node == "peer")
        .map(|t| t.id.clone())
        .collect();
    assert!(!on_peer.is_empty(), "nothing ran on the peer");
    assert_eq!(on_peer.len(), peer.ran.lock().unwrap().len());
    let peer_personas: Vec<String> = peer_server
        .requests()
        .iter()
        .map(|r| r.system.lines().next().unwrap_or("").to_string())
        .collect();
    assert!(!peer_personas.is_empty() && peer_personas.iter().all(|l| l.starts_with("You are ")));
    let local_specialist_reqs = local.requests()[before..]
        .iter()
        .filter(|r| r.has_tools || r.system.contains("specialist reviewer"))
        .count();
    assert!(
        local_specialist_reqs < single.tasks.len() * 3,
        "the origin still did everything"
    );
    // Reporters carry the node that found them.
    assert!(spread
        .findings
        .iter()
        .flat_map(|f| f.reporters.iter())
        .any(|r| r.node == "peer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_s_attempts_are_reassigned_and_its_late_results_ignored() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer = Arc::new(FakePeer {
        name: "sleepy".into(),
        capacity: 2,
        backends: backends(&peer_server),
        pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
        alive: AtomicBool::new(true),
        hang: true,
        held: Mutex::new(Vec::new()),
        ran: Mutex::new(Vec::new()),
    });
    let flow_id = uuid::Uuid::new_v4().to_string();
    let ctx = context(&local, Some(peer.clone()), &flow_id);
    let review = tokio::spawn(run(ctx));
    // Wait (bounded) until the peer holds an attempt, then declare it lost.
    let mut held = None;
    for _ in 0..200 {
        if let Some(a) = peer.held.lock().unwrap().first().cloned() {
            held = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held = held.expect("no attempt was placed on the peer");
    peer.alive.store(false, Ordering::SeqCst);
    assert!(remote::notify_node_lost("sleepy") >= 1);
    // The node wakes up and answers anyway: fenced.
    let contents: BTreeMap<String, Arc<str>> = peer
        .pack
        .files
        .values()
        .map(|f| (f.hash.clone(), f.content.clone()))
        .collect();
    let (fid, attempt) = (held.flow_id.clone(), held.attempt);
    let late = remote::run_attempt(held, &contents, &peer.backends, None, "sleepy").await;
    remote::deliver_result(&fid, attempt, late);

    let report = review.await.unwrap();
    assert_eq!(
        report.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    // Every task ran to completion on the origin, once each, and no finding is doubled.
    assert!(report
        .tasks
        .iter()
        .filter(|t| t.id.starts_with('t'))
        .all(|t| t.status == "completed" && t.node == "origin"));
    let single = run(context(&local, None, &uuid::Uuid::new_v4().to_string())).await;
    assert_eq!(anchors(&single), anchors(&report));
    for f in &report.findings {
        assert!(
            f.reporters.iter().all(|r| r.node == "origin"),
            "a fenced result was counted: {f:?}"
        );
    }
}
