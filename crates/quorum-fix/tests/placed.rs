//! The fix driver with attempts placed on nodes, driven through a scripted `FixWorkers` (no
//! network, no model): results that come back together are tested together in one run and
//! kept together; a batch that breaks a test falls back to one at a time; a node's test run
//! counts only on the tree the change is kept into, and a failing one discards the change
//! without a run here; a lost node's attempt is placed again at no cost, a busy node is asked
//! again after its pause. The test command counts its runs in a file outside the worktree.

use quorum_core::fixing::edit::EditBounds;
use quorum_core::fixing::fix_loop::{TestRun, VerifierCheck};
use quorum_core::fixing::select::FixTarget;
use quorum_core::pack::ContextPack;
use quorum_core::review::finding::Finding;
use quorum_fix::agent::AgentOutcome;
use quorum_fix::journal::{Journal, StoredChange};
use quorum_fix::remote::{FixWorkers, PlacementError, ShippedAttempt, ShippedResult};
use quorum_fix::sandbox::{Isolation, TestCommand};
use quorum_fix::{FixJob, FixRun, ModelRoute};
use quorum_runtime::agent::{CallSpec, CallStats};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Barrier;

/// What a scripted node answers for one (finding, attempt).
#[derive(Clone)]
enum Answer {
    /// Replace `old` with `new` in the finding's file.
    Edit { old: String, new: String },
    /// As Edit, with the node's own test run.
    EditTested {
        old: String,
        new: String,
        tests: TestRun,
    },
    /// The node is lost (first time only; then Edit).
    LoseThenEdit { old: String, new: String },
    /// The node is busy (first time only; then Edit).
    BusyThenEdit { old: String, new: String },
}

struct ScriptedNodes {
    nodes: Vec<(String, usize)>,
    /// By finding id and attempt number.
    answers: BTreeMap<(String, u32), Answer>,
    /// First attempts' answers wait until this many were asked (None: answer at once).
    together: Option<Arc<Barrier>>,
    /// (node, finding, attempt) as asked, in order.
    asked: Mutex<Vec<(String, String, u32)>>,
    /// Failures already given, so a retry succeeds.
    failed_once: Mutex<Vec<String>>,
    /// The nodes' blind verifier's verdict on every change (None: not asked).
    verdict: Option<VerifierCheck>,
}

fn change(
    a: &ShippedAttempt,
    contents: &HashMap<String, Arc<str>>,
    old: &str,
    new: &str,
) -> StoredChange {
    let file = a.target.finding.file.clone().unwrap();
    let entry = a.tree.iter().find(|e| e.path == file).unwrap();
    let text = contents[&entry.hash].to_string();
    assert!(text.contains(old), "{old:?} not in {file}: {text}");
    StoredChange {
        path: file,
        before: Some(text.clone()),
        after: text.replacen(old, new, 1),
    }
}

#[async_trait::async_trait]
impl FixWorkers for ScriptedNodes {
    fn nodes(&self) -> Vec<(String, usize)> {
        self.nodes.clone()
    }

    async fn run(
        &self,
        node: &str,
        attempt: ShippedAttempt,
        contents: Arc<HashMap<String, Arc<str>>>,
    ) -> Result<ShippedResult, PlacementError> {
        let id = attempt.target.finding.id.clone();
        self.asked
            .lock()
            .unwrap()
            .push((node.to_string(), id.clone(), attempt.attempt));
        let answer = self.answers[&(id.clone(), attempt.attempt)].clone();
        let first_failure = |key: String| {
            let mut f = self.failed_once.lock().unwrap();
            if f.contains(&key) {
                false
            } else {
                f.push(key);
                true
            }
        };
        let (old, new, tests) = match answer {
            Answer::Edit { old, new } => (old, new, None),
            Answer::EditTested { old, new, tests } => (old, new, Some(tests)),
            Answer::LoseThenEdit { old, new } => {
                if first_failure(id.clone()) {
                    return Err(PlacementError::Lost(format!("{node} went away")));
                }
                (old, new, None)
            }
            Answer::BusyThenEdit { old, new } => {
                if first_failure(id.clone()) {
                    return Err(PlacementError::Busy(format!("{node} is full")));
                }
                (old, new, None)
            }
        };
        if let (Some(b), 1) = (&self.together, attempt.attempt) {
            b.wait().await;
        }
        Ok(ShippedResult {
            node: node.to_string(),
            model: "scripted".into(),
            outcome: AgentOutcome {
                applied: 1,
                ..Default::default()
            },
            changes: vec![change(&attempt, &contents, &old, &new)],
            tests,
            tests_not_run: None,
            verifier: self.verdict.clone(),
            stats: CallStats::default(),
        })
    }
}

fn target(id: &str, file: &str) -> FixTarget {
    let finding: Finding = serde_json::from_value(serde_json::json!({
        "id": id, "title": format!("flag in {file}"), "severity": "P1", "confidence": 0.9,
        "category": "bug", "file": file, "line_start": 1, "line_end": 1, "symbol": null,
        "evidence": "FLAG = 1", "why_it_matters": "w", "suggested_fix": "s",
        "verdict": "CONFIRMED", "reporters": [], "anchor": format!("{file}:flag")
    }))
    .unwrap_or_else(|e| panic!("finding: {e}"));
    FixTarget {
        finding,
        analyzer_rule: None,
        confirmed_because: Vec::new(),
    }
}

/// Files a.py, b.py, c.py each holding `FLAG = 1`; the test fails when any file holds BROKEN.
fn pack() -> ContextPack {
    ContextPack::from_files(
        "/nowhere".into(),
        None,
        ["a.py", "b.py", "c.py"]
            .iter()
            .map(|f| (f.to_string(), "FLAG = 1\n".to_string()))
            .collect(),
    )
}

fn job(work: &Path, counter: &Path, nodes: Arc<ScriptedNodes>) -> FixJob {
    let backend = quorum_llm::OllamaBackend::new(&quorum_llm::BackendConfig::new(
        quorum_llm::BackendKind::Ollama,
        "http://127.0.0.1:9",
    ))
    .unwrap();
    FixJob {
        targets: vec![
            target("F1", "a.py"),
            target("F2", "b.py"),
            target("F3", "c.py"),
        ],
        pack: pack(),
        work_dir: work.to_path_buf(),
        fixer: ModelRoute {
            client: quorum_llm::LlmClient::new(
                Arc::new(backend),
                1,
                quorum_llm::RetryPolicy::none(),
            ),
            spec: CallSpec {
                model: "never-asked".into(),
                max_tokens: 10,
                temperature: 0.0,
                num_ctx: None,
            },
        },
        loop_limits: quorum_fix::remote::agent_limits(8192, 256),
        verifier: None,
        verifier_model: None,
        tests: Some(TestCommand {
            command: format!(
                "echo run >> {}; if grep -q BROKEN *.py; then echo 'test t::intact ... FAILED'; exit 1; fi; echo 'test t::intact ... ok'",
                counter.display()
            ),
            isolation: Isolation::None,
            timeout: Duration::from_secs(30),
            max_output: 64 * 1024,
            limits: Default::default(),
        }),
        analyzers: None,
        bounds: EditBounds::default(),
        parallel: 0,
        remote: Some(nodes),
        run_id: "test".into(),
    }
}

fn edit(old: &str, new: &str) -> Answer {
    Answer::Edit {
        old: old.into(),
        new: new.into(),
    }
}

fn nodes(answers: Vec<((&str, u32), Answer)>, together: Option<usize>) -> Arc<ScriptedNodes> {
    Arc::new(ScriptedNodes {
        nodes: vec![("a".into(), 1), ("b".into(), 1), ("c".into(), 1)],
        answers: answers
            .into_iter()
            .map(|((f, n), a)| ((f.to_string(), n), a))
            .collect(),
        together: together.map(|n| Arc::new(Barrier::new(n))),
        asked: Mutex::new(Vec::new()),
        failed_once: Mutex::new(Vec::new()),
        verdict: None,
    })
}

async fn run(nodes: Arc<ScriptedNodes>) -> (FixRun, usize, Vec<String>) {
    let work = tempfile::tempdir().unwrap();
    let counter = work.path().join("test-runs");
    let job = job(&work.path().join("run"), &counter, nodes);
    let mut journal = Journal::open(&work.path().join("journal.jsonl")).unwrap();
    let mut lines = Vec::new();
    let run = tokio::time::timeout(
        Duration::from_secs(120),
        quorum_fix::run(job, &mut journal, Vec::new(), |l| lines.push(l)),
    )
    .await
    .expect("the run ends")
    .unwrap();
    let runs = std::fs::read_to_string(&counter)
        .unwrap_or_default()
        .lines()
        .count();
    (run, runs, lines)
}

fn kept(run: &FixRun) -> Vec<String> {
    run.kept.iter().map(|k| k.finding_id.clone()).collect()
}

// One thread: the three answers released together all finish before the driver looks again.
#[tokio::test(flavor = "current_thread")]
async fn changes_that_come_back_together_are_tested_in_one_run_and_kept_together() {
    let nodes = nodes(
        vec![
            (("F1", 1), edit("FLAG = 1", "FLAG = 0")),
            (("F2", 1), edit("FLAG = 1", "FLAG = 0")),
            (("F3", 1), edit("FLAG = 1", "FLAG = 0")),
        ],
        Some(3),
    );
    let (run, test_runs, lines) = run(nodes.clone()).await;
    assert_eq!(kept(&run).len(), 3, "{lines:#?}");
    // The base, then one run for the three.
    assert_eq!(test_runs, 2, "{lines:#?}");
    for e in &run.entries {
        let a = &e.attempts[0];
        assert_eq!(a.tested_with.len(), 2, "{a:?}");
        assert!(a.node.is_some());
    }
    let mut placed: Vec<String> = nodes
        .asked
        .lock()
        .unwrap()
        .iter()
        .map(|a| a.0.clone())
        .collect();
    placed.sort();
    assert_eq!(placed, vec!["a", "b", "c"], "one attempt on each node");
    assert_eq!(run.usage.attempts, 3);
}

// One thread: the three answers released together all finish before the driver looks again.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_that_breaks_a_test_is_judged_one_change_at_a_time() {
    let nodes = nodes(
        vec![
            (("F1", 1), edit("FLAG = 1", "FLAG = 0")),
            (("F2", 1), edit("FLAG = 1", "BROKEN = 1")),
            (("F2", 2), edit("FLAG = 1", "FLAG = 0")),
            (("F3", 1), edit("FLAG = 1", "FLAG = 0")),
        ],
        Some(3),
    );
    let (run, test_runs, lines) = run(nodes).await;
    let mut k = kept(&run);
    k.sort();
    assert_eq!(k, vec!["F1", "F2", "F3"], "{lines:#?}");
    let f2 = run.entries.iter().find(|e| e.finding_id == "F2").unwrap();
    assert_eq!(f2.attempts.len(), 2, "{f2:?}");
    assert!(!f2.attempts[0].kept);
    // Whatever came back together was tested together once and, broken, alone: never was a
    // broken change kept, and every kept one passed a run holding exactly the kept fixes.
    assert!(test_runs >= 4, "{test_runs} {lines:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_test_run_counts_on_the_tree_the_change_is_kept_into_and_a_failing_one_discards() {
    let passed = TestRun {
        passed: true,
        failing: Default::default(),
        summary: "ok".into(),
    };
    let failed = TestRun {
        passed: false,
        failing: ["t::intact".to_string()].into(),
        summary: "FAILED".into(),
    };
    let mut ns = nodes(
        vec![
            (
                ("F1", 1),
                Answer::EditTested {
                    old: "FLAG = 1".into(),
                    new: "FLAG = 0".into(),
                    tests: passed,
                },
            ),
            (
                ("F2", 1),
                Answer::EditTested {
                    old: "FLAG = 1".into(),
                    new: "FLAG = 2".into(),
                    tests: failed,
                },
            ),
            (("F2", 2), edit("FLAG = 1", "FLAG = 0")),
            (("F3", 1), edit("FLAG = 1", "FLAG = 0")),
        ],
        None,
    );
    Arc::get_mut(&mut ns).unwrap().nodes = vec![("a".into(), 1)];
    let (run, test_runs, lines) = run(ns).await;
    assert_eq!(kept(&run).len(), 3, "{lines:#?}");
    let f1 = &run.entries[0].attempts[0];
    assert_eq!(f1.tested_on.as_deref(), Some("a"), "{f1:?}");
    let f2 = &run.entries[1];
    assert_eq!(f2.attempts.len(), 2, "{f2:?}");
    assert_eq!(f2.attempts[0].tested_on.as_deref(), Some("a"));
    assert!(!f2.attempts[0].kept);
    // The base; F1 and F2's first attempt were judged by the node's runs; F2's second
    // attempt and F3 (untested by the node) ran here.
    assert_eq!(test_runs, 3, "{lines:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_and_a_busy_one_cost_no_attempt() {
    let ns = nodes(
        vec![
            (
                ("F1", 1),
                Answer::LoseThenEdit {
                    old: "FLAG = 1".into(),
                    new: "FLAG = 0".into(),
                },
            ),
            (
                ("F2", 1),
                Answer::BusyThenEdit {
                    old: "FLAG = 1".into(),
                    new: "FLAG = 0".into(),
                },
            ),
            (("F3", 1), edit("FLAG = 1", "FLAG = 0")),
        ],
        None,
    );
    let (run, _, lines) = run(ns.clone()).await;
    assert_eq!(kept(&run).len(), 3, "{lines:#?}");
    assert_eq!(run.usage.attempts, 3, "{lines:#?}");
    let asked = ns.asked.lock().unwrap().clone();
    // F1 went to a first, which was lost: never asked again.
    let f1 = asked.iter().find(|a| a.1 == "F1").unwrap();
    assert_eq!(f1.0, "a", "{asked:?}");
    assert_eq!(asked.iter().filter(|a| a.0 == "a").count(), 1, "{asked:?}");
    assert!(
        lines.iter().any(|l| l.contains("handed back: a is lost")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("handed back: b is busy")),
        "{lines:#?}"
    );
}

/// With a blind verifier asked for, each node's verdict on its change is taken — this run's
/// own verifier (a dead server here, which would count as "still holds") is never called — and
/// a node's "still holds" discards the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_blind_verifier_judges_their_changes() {
    for (still_holds, kept_expected) in [(false, 3usize), (true, 0)] {
        let mut ns = nodes(
            vec![
                (("F1", 1), edit("FLAG = 1", "FLAG = 0")),
                (("F2", 1), edit("FLAG = 1", "FLAG = 0")),
                (("F3", 1), edit("FLAG = 1", "FLAG = 0")),
                (("F1", 2), edit("FLAG = 1", "FLAG = 0")),
                (("F2", 2), edit("FLAG = 1", "FLAG = 0")),
                (("F3", 2), edit("FLAG = 1", "FLAG = 0")),
                (("F1", 3), edit("FLAG = 1", "FLAG = 0")),
                (("F2", 3), edit("FLAG = 1", "FLAG = 0")),
                (("F3", 3), edit("FLAG = 1", "FLAG = 0")),
            ],
            None,
        );
        Arc::get_mut(&mut ns).unwrap().verdict = Some(VerifierCheck {
            still_holds,
            reason: "judged on the node".into(),
            ..Default::default()
        });
        let work = tempfile::tempdir().unwrap();
        let counter = work.path().join("test-runs");
        let mut job = job(&work.path().join("run"), &counter, ns);
        job.verifier = Some(job.fixer.clone());
        let mut journal = Journal::open(&work.path().join("journal.jsonl")).unwrap();
        // "Still holds" three times in a row is a circular fix: the run ends.
        let run = tokio::time::timeout(
            Duration::from_secs(120),
            quorum_fix::run(job, &mut journal, Vec::new(), |_| {}),
        )
        .await
        .expect("the run ends")
        .unwrap();
        assert_eq!(run.kept.len(), kept_expected, "still_holds {still_holds}");
        for e in &run.entries {
            let v = e.attempts[0].oracles.verifier.as_ref().expect("a verdict");
            assert_eq!(v.reason, "judged on the node", "{e:?}");
        }
    }
}
