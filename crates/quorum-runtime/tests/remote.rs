//! Specialist attempts on other nodes, through the same seam the cluster uses: placement by
//! load, results routed back by the conductor's registry name, node loss fencing and
//! reassignment. The "peer" here runs `remote::run_attempt` with its own backends and its own
//! scripted model server, in process.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_core::flows::flow::Flow;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::report::Report;
use quorum_llm::{BackendConfig, BackendKind};
use quorum_runtime::remote::{self, RemoteAttempt, RemoteExecutor, RemoteSlot};
use quorum_runtime::{Backends, ReviewContext};
use quorum_testkit::review::ContextBuilder;
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
    /// Every shipped attempt's task files and manifest paths.
    shipped: Mutex<Vec<(Vec<String>, Vec<String>)>>,
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
        self.shipped.lock().unwrap().push((
            req.task.files.clone(),
            req.manifest.iter().map(|m| m.path.clone()).collect(),
        ));
        if self.hang {
            self.held.lock().unwrap().push(req);
            return Ok(());
        }
        // "Fetch" contents by hash from the origin's pack.
        let contents: BTreeMap<String, Arc<str>> = self
            .pack
            .files
            .values()
            .map(|f| (f.hash.clone(), f.content.to_arc()))
            .collect();
        let backends = self.backends.clone();
        let name = self.name.clone();
        tokio::spawn(async move {
            let (flow_id, attempt) = (req.flow_id.clone(), req.attempt);
            let outcome = remote::run_attempt(req, &contents, &backends, None, &name).await;
            quorum_runtime::conductor::deliver_result(&flow_id, attempt, &name, outcome);
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
    context_with(
        local,
        peer.map(|p| p as Arc<dyn RemoteExecutor>),
        flow_id,
        1,
    )
}

fn context_with(
    local: &ScriptedServer,
    remote: Option<Arc<dyn RemoteExecutor>>,
    flow_id: &str,
    max_concurrent: usize,
) -> Arc<ReviewContext> {
    ContextBuilder::new(local, &fixture("code_project"))
        .flow_id(flow_id)
        .node("origin")
        .max_concurrent(Some(max_concurrent))
        .backends(backends(local))
        .remote(remote)
        .shared()
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
        shipped: Mutex::new(Vec::new()),
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
    // Each attempt carried (and so fetched) its own task's files only, never the whole pack.
    let pack_files = ContextPack::snapshot(&fixture("code_project"), &PackOptions::default())
        .unwrap()
        .len();
    for (task_files, manifest) in peer.shipped.lock().unwrap().iter() {
        let mut want = task_files.clone();
        want.sort();
        let mut got = manifest.clone();
        got.sort();
        assert_eq!(got, want, "the manifest is the task's files");
        assert!(got.len() < pack_files, "{got:?} of {pack_files}");
    }
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
        shipped: Mutex::new(Vec::new()),
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
    assert!(quorum_runtime::conductor::notify_node_lost("sleepy") >= 1);
    // The node wakes up and answers anyway: fenced.
    let contents: BTreeMap<String, Arc<str>> = peer
        .pack
        .files
        .values()
        .map(|f| (f.hash.clone(), f.content.to_arc()))
        .collect();
    let (fid, attempt) = (held.flow_id.clone(), held.attempt);
    let late = remote::run_attempt(held, &contents, &peer.backends, None, "sleepy").await;
    quorum_runtime::conductor::deliver_result(&fid, attempt, "sleepy", late);

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

/// A peer with a fixed behaviour for every attempt it is sent.
#[derive(Debug)]
enum Behaviour {
    /// Refuse at once, as a draining or full node does.
    Refuse,
    /// Take the attempt and never answer nor renew (a dropped result frame, a dead worker).
    Silent,
}

#[derive(Debug)]
struct OddPeer {
    name: String,
    behaviour: Behaviour,
    lease: Duration,
    sent: Mutex<Vec<(String, u64)>>,
    cancelled: Mutex<Vec<u64>>,
}

impl OddPeer {
    fn new(name: &str, behaviour: Behaviour) -> Arc<OddPeer> {
        Arc::new(OddPeer {
            name: name.into(),
            behaviour,
            lease: Duration::from_millis(300),
            sent: Mutex::new(Vec::new()),
            cancelled: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait::async_trait]
impl RemoteExecutor for OddPeer {
    fn peers(&self) -> Vec<RemoteSlot> {
        vec![RemoteSlot {
            node: self.name.clone(),
            capacity: 4,
            models: vec![MODEL.into()],
        }]
    }

    async fn dispatch(&self, _node: &str, req: RemoteAttempt) -> Result<(), String> {
        self.sent
            .lock()
            .unwrap()
            .push((req.task.id.clone(), req.attempt));
        if let Behaviour::Refuse = self.behaviour {
            let name = self.name.clone();
            tokio::spawn(async move {
                quorum_runtime::conductor::deliver_result(
                    &req.flow_id,
                    req.attempt,
                    &name,
                    remote::RemoteOutcome::Err {
                        class: "refused".into(),
                        message: format!("node {name} is draining"),
                    },
                );
            });
        }
        Ok(())
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    async fn cancel(&self, _node: &str, _flow_id: &str, attempts: Vec<u64>) {
        self.cancelled.lock().unwrap().extend(attempts);
    }
}

fn specialist_tasks(r: &Report) -> Vec<&quorum_core::report::TaskReport> {
    r.tasks.iter().filter(|t| t.id.starts_with('t')).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_worker_s_leases_lapse_and_its_attempts_run_elsewhere() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer = OddPeer::new("silent", Behaviour::Silent);
    let flow_id = uuid::Uuid::new_v4().to_string();
    // No membership event ever says the peer is gone: only the lease can catch it.
    let ctx = context_with(
        &local,
        Some(peer.clone() as Arc<dyn RemoteExecutor>),
        &flow_id,
        1,
    );
    let report = run(ctx).await;
    assert_eq!(
        report.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let sent = peer.sent.lock().unwrap().clone();
    assert!(!sent.is_empty(), "nothing was placed on the silent peer");
    for t in specialist_tasks(&report) {
        assert_eq!(t.status, "completed", "{t:?}");
        assert_eq!(t.node, "origin", "{t:?}");
        assert_eq!(t.attempts, 1, "a lapsed lease cost {} an attempt", t.id);
    }
    // The lapsed attempts were fenced: the peer was told to stop each of them.
    let cancelled = peer.cancelled.lock().unwrap().clone();
    for (_, attempt) in &sent {
        assert!(
            cancelled.contains(attempt),
            "attempt {attempt} was not stopped"
        );
    }
    // A result that arrives after the lease lapsed is not counted.
    let (task, attempt) = sent[0].clone();
    assert!(!quorum_runtime::conductor::deliver_result(
        &flow_id,
        attempt,
        "silent",
        remote::RemoteOutcome::Err {
            class: "internal".into(),
            message: format!("late {task}"),
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_from_a_draining_node_cost_no_attempt() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer = OddPeer::new("drainer", Behaviour::Refuse);
    let flow_id = uuid::Uuid::new_v4().to_string();
    // The shipped flow's attempts, unchanged: refusals must not use them up.
    let ctx = context_with(
        &local,
        Some(peer.clone() as Arc<dyn RemoteExecutor>),
        &flow_id,
        1,
    );
    let report = run(ctx).await;
    assert_eq!(
        report.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert!(!peer.sent.lock().unwrap().is_empty());
    for t in specialist_tasks(&report) {
        assert_eq!(t.status, "completed", "{t:?}");
        assert_eq!(t.attempts, 1, "a refusal cost {} an attempt", t.id);
        assert_eq!(t.node, "origin");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_from_a_node_the_attempt_is_not_placed_on_is_ignored() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer = OddPeer::new("silent", Behaviour::Silent);
    let flow_id = uuid::Uuid::new_v4().to_string();
    let ctx = context_with(
        &local,
        Some(peer.clone() as Arc<dyn RemoteExecutor>),
        &flow_id,
        1,
    );
    let review = tokio::spawn(run(ctx));
    let mut placed = None;
    for _ in 0..200 {
        if let Some(p) = peer.sent.lock().unwrap().first().cloned() {
            placed = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (task, attempt) = placed.expect("nothing placed on the peer");
    // Another node claims the attempt with a forged, finding-laden success.
    let forged = remote::RemoteOutcome::Ok(quorum_runtime::stages::SpecialistOutput {
        findings: vec![serde_json::from_value(serde_json::json!({
            "title": "forged finding", "severity": "P0", "confidence": 1.0,
            "category": "security", "file": "src/db.py", "line_start": 1, "line_end": 1,
            "evidence": "import", "why_it_matters": "x", "suggested_fix": "x"
        }))
        .unwrap()],
        invalid: 0,
        iterations: 1,
        stage: Default::default(),
    });
    quorum_runtime::conductor::deliver_result(&flow_id, attempt, "mallory", forged);
    let report = review.await.unwrap();
    assert!(
        report.findings.iter().all(|f| f.title != "forged finding"),
        "a forged result for {task} was counted"
    );
    assert_eq!(report.status, quorum_core::report::ReviewStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_every_attempt_and_ends_partial() {
    use quorum_testkit::{Reply, Rule, Script};
    // Every specialist hangs: without a cancel this review would only end at its timeouts.
    let script = Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&code_plan())),
        )
        .rule(
            Rule::new("hang")
                .when_system(["You are "])
                .reply(Reply::hang()),
        );
    let local = ScriptedServer::start(script).await.unwrap();
    let peer = OddPeer::new("silent", Behaviour::Silent);
    let flow_id = uuid::Uuid::new_v4().to_string();
    let ctx = context_with(
        &local,
        Some(peer.clone() as Arc<dyn RemoteExecutor>),
        &flow_id,
        2,
    );
    let review = tokio::spawn(run(ctx));
    // Wait until a specialist is running here and one was placed on the peer.
    for _ in 0..300 {
        let here = local.requests().iter().any(|r| {
            r.system.contains("You are security_sentinel")
                || r.system.contains("You are software_developer")
                || r.system.contains("You are test_engineer")
        });
        if here && !peer.sent.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !peer.sent.lock().unwrap().is_empty(),
        "nothing placed on the peer"
    );
    assert!(quorum_runtime::conductor::cancel_review(&flow_id, "stopped by the test").await);
    let after_cancel = local.requests().len();
    let report = tokio::time::timeout(Duration::from_secs(10), review)
        .await
        .expect("the review did not end after cancel")
        .unwrap();
    assert_eq!(report.status, quorum_core::report::ReviewStatus::Partial);
    assert!(
        report.status_reason.contains("cancelled"),
        "{}",
        report.status_reason
    );
    // The peer was told to stop what it ran, and no model request started after the cancel.
    let sent: Vec<u64> = peer.sent.lock().unwrap().iter().map(|(_, a)| *a).collect();
    let cancelled = peer.cancelled.lock().unwrap().clone();
    assert!(
        sent.iter().all(|a| cancelled.contains(a)),
        "{sent:?} vs {cancelled:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        local.requests().len(),
        after_cancel,
        "a model request started after cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_batches_are_placed_like_tasks_and_judge_the_same() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let single = run(context(&local, None, &uuid::Uuid::new_v4().to_string())).await;
    let peer = Arc::new(FakePeer {
        name: "peer".into(),
        capacity: 4,
        backends: backends(&peer_server),
        pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
        alive: AtomicBool::new(true),
        hang: false,
        held: Mutex::new(Vec::new()),
        ran: Mutex::new(Vec::new()),
        shipped: Mutex::new(Vec::new()),
    });
    // One finding per batch, so the batches outnumber this node's single slot.
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    flow.parameters.verify_batch = 1;
    let ctx = {
        let mut c = Arc::try_unwrap(context(
            &local,
            Some(peer.clone()),
            &uuid::Uuid::new_v4().to_string(),
        ))
        .unwrap();
        c.flow = flow;
        Arc::new(c)
    };
    let spread = run(ctx).await;
    assert_eq!(
        spread.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        spread.status_reason
    );
    // The same verdicts as one node, whoever judged them.
    let verdicts = |r: &Report| {
        let mut v: Vec<String> = r
            .findings
            .iter()
            .map(|f| format!("{}|{:?}", f.anchor, f.verdict))
            .collect();
        v.sort();
        v
    };
    assert_eq!(verdicts(&single), verdicts(&spread));
    let batches: Vec<_> = spread
        .tasks
        .iter()
        .filter(|t| t.id.starts_with("verifier"))
        .collect();
    assert!(batches.len() > 1, "{batches:?}");
    assert!(
        batches.iter().any(|t| t.node == "peer"),
        "no verification batch ran on the peer: {batches:?}"
    );
    // The peer's verifier model was asked, blind to the finder.
    let peer_verifications: Vec<_> = peer_server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .collect();
    assert!(!peer_verifications.is_empty());
    for r in &peer_verifications {
        assert!(!r.text.contains("security_sentinel") && !r.text.contains("confidence"));
    }
}

/// Cross-validation in a cluster: the N votes of a finding are cast inside its verification
/// batch, on whichever node runs the batch, with the flow (and its `verifiers`) shipped along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_on_a_peer_casts_every_vote_of_its_findings_there() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer = Arc::new(FakePeer {
        name: "peer".into(),
        capacity: 4,
        backends: backends(&peer_server),
        pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
        alive: AtomicBool::new(true),
        hang: false,
        held: Mutex::new(Vec::new()),
        ran: Mutex::new(Vec::new()),
        shipped: Mutex::new(Vec::new()),
    });
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    flow.parameters.verify_batch = 1;
    flow.parameters.verifiers = 3;
    let ctx = {
        let mut c = Arc::try_unwrap(context(
            &local,
            Some(peer.clone()),
            &uuid::Uuid::new_v4().to_string(),
        ))
        .unwrap();
        c.flow = flow;
        Arc::new(c)
    };
    let report = run(ctx).await;
    assert_eq!(
        report.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let asked = |s: &ScriptedServer| -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for r in s.requests() {
            if r.system.contains("You are an independent verifier") {
                let title = r
                    .last_user
                    .lines()
                    .find_map(|l| l.strip_prefix("Title: "))
                    .unwrap_or("?")
                    .to_string();
                *m.entry(title).or_insert(0) += 1;
            }
        }
        m
    };
    let (here, there) = (asked(&local), asked(&peer_server));
    assert!(!there.is_empty(), "no verification batch ran on the peer");
    // Every grounded finding asked exactly three times, all on the node that ran its batch.
    let mut all: Vec<(String, usize)> = here.clone().into_iter().chain(there.clone()).collect();
    all.sort();
    assert_eq!(all.len(), 5, "{here:?} / {there:?}");
    assert!(all.iter().all(|(_, n)| *n == 3), "{here:?} / {there:?}");
    assert_eq!(report.verification_ledger.len(), 5);
    assert!(report.verification_ledger.iter().all(
        |e| e.votes.len() == 3 && e.outcome == quorum_core::review::finding::Verdict::Confirmed
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_shipped_to_a_peer_runs_there_with_the_shipped_catalog() {
    use quorum_runtime::remote::{RemoteOutcome, RemoteStage};
    let origin_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let ctx = context(&origin_server, None, "stage-flow");
    let contents: BTreeMap<String, Arc<str>> = ctx
        .pack
        .files
        .values()
        .map(|f| (f.hash.clone(), f.content.to_arc()))
        .collect();
    let classification = quorum_core::task::Classification {
        domain: "software".into(),
        ..Default::default()
    };
    let plan = RemoteAttempt::stage(
        &ctx,
        ctx.backends.sensitive,
        7,
        "planner",
        RemoteStage::Plan {
            classification: classification.clone(),
            catalog: ctx.catalog.clone(),
        },
        Duration::from_secs(10),
    );
    // Through the wire form, as a peer receives it.
    let plan: RemoteAttempt = serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
    let out = remote::run_attempt(plan, &contents, &backends(&peer_server), None, "peer").await;
    let RemoteOutcome::Planned(p) = out else {
        panic!("the peer did not plan: {out:?}");
    };
    assert!(!p.tasks.is_empty());
    let planner_reqs = peer_server
        .requests()
        .into_iter()
        .filter(|r| r.system.contains("You are the planner"))
        .count();
    assert_eq!(
        planner_reqs, 1,
        "the plan was made on the peer's model server"
    );
    assert!(origin_server.requests().is_empty());
    let scout = RemoteAttempt::stage(
        &ctx,
        ctx.backends.sensitive,
        8,
        "scout",
        RemoteStage::Scout,
        Duration::from_secs(10),
    );
    let out = remote::run_attempt(scout, &contents, &backends(&peer_server), None, "peer").await;
    assert!(matches!(out, RemoteOutcome::Scouted(..)), "{out:?}");
}

/// A peer as it advertises itself serving another model family than the finders'.
#[derive(Debug)]
struct OtherFamily(Arc<FakePeer>);

#[async_trait::async_trait]
impl RemoteExecutor for OtherFamily {
    fn peers(&self) -> Vec<RemoteSlot> {
        self.0
            .peers()
            .into_iter()
            .map(|s| RemoteSlot {
                models: vec!["llama3.1:8b".into()],
                ..s
            })
            .collect()
    }

    async fn dispatch(&self, node: &str, req: RemoteAttempt) -> Result<(), String> {
        self.0.dispatch(node, req).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_prefers_a_node_serving_another_model_family() {
    let local = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer_server = ScriptedServer::start(code_review_script()).await.unwrap();
    let peer = Arc::new(FakePeer {
        name: "peer".into(),
        capacity: 8,
        backends: backends(&peer_server),
        pack: ContextPack::snapshot(&fixture("code_project"), &PackOptions::default()).unwrap(),
        alive: AtomicBool::new(true),
        hang: false,
        held: Mutex::new(Vec::new()),
        ran: Mutex::new(Vec::new()),
        shipped: Mutex::new(Vec::new()),
    });
    let mut flow = Flow::load(&repo_root().join("flows/review.yaml")).unwrap();
    flow.parameters.call_timeout_secs = 5;
    flow.parameters.verify_batch = 1;
    // This node has as much room as the peer: only the preference sends batches there.
    let ctx = {
        let mut c = Arc::try_unwrap(context_with(
            &local,
            Some(Arc::new(OtherFamily(peer.clone()))),
            &uuid::Uuid::new_v4().to_string(),
            4,
        ))
        .unwrap();
        c.flow = flow;
        Arc::new(c)
    };
    let report = run(ctx).await;
    assert_eq!(
        report.status,
        quorum_core::report::ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    let batches: Vec<_> = report
        .tasks
        .iter()
        .filter(|t| t.id.starts_with("verifier"))
        .collect();
    assert!(batches.len() > 1, "{batches:?}");
    assert!(
        batches.iter().all(|t| t.node == "peer"),
        "a batch ran on this node although a node of another family had room: {batches:?}"
    );
    let local_verifications = local
        .requests()
        .into_iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .count();
    assert_eq!(local_verifications, 0);
}
