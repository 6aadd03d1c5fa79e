//! Fix attempts on other nodes of a cluster: the attempt as it travels ([`ShippedAttempt`]),
//! what comes back ([`ShippedResult`]), the seam the driver places attempts through
//! ([`FixWorkers`], implemented over the cluster's API by the binary), and the worker side that
//! runs one with its own node's model ([`run_shipped`]).
//!
//! An attempt travels as data: the finding, the feedback of the attempt before, the bounds,
//! and the tree to start from as a manifest of (path, content hash) — the review's snapshot
//! with the fixes kept so far. Contents go by hash, so a node that holds a file's content is
//! not sent it again. The node runs the fix agent in a private worktree of its own and, only
//! when its own configuration allows test commands (a floor no client lowers) and it can
//! sandbox them, the project's tests on the changed tree. Everything else — the analyzers, the
//! blind verifier, the decision — stays with the run's conductor.

use crate::agent::{self, AgentOutcome, ModelRoute};
use crate::journal::StoredChange;
use crate::sandbox::{Isolation, TestCommand};
use crate::worktree::Worktree;
use quorum_core::fixing::edit::EditBounds;
use quorum_core::fixing::fix_loop::{TestRun, VerifierCheck, UNNAMED_FAILURE};
use quorum_core::fixing::select::FixTarget;
use quorum_runtime::agent::{CallStats, LoopLimits};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// One file of the tree an attempt starts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    pub path: String,
    /// blake3 of the content, hex (as the snapshot hashes it).
    pub hash: String,
    /// The target marks it executable (a test command may run it directly).
    #[serde(default)]
    pub executable: bool,
}

/// The test command as a node is asked to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippedTests {
    pub command: String,
    pub timeout_secs: u64,
    pub max_output: usize,
    /// The tests the base already fails (not blamed on the change).
    #[serde(default)]
    pub base_failing: std::collections::BTreeSet<String>,
}

/// A fix attempt to run on another node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShippedAttempt {
    /// The fix run's id, for the node's log.
    pub run_id: String,
    pub target: FixTarget,
    pub attempt: u32,
    /// Why the attempt before was discarded, for the agent.
    pub feedback: Option<String>,
    pub bounds: EditBounds,
    /// The tree to start from: the snapshot with the fixes kept when the attempt was placed.
    pub tree: Vec<TreeEntry>,
    /// Run the project's tests on the changed tree, if the node's policy allows.
    pub tests: Option<ShippedTests>,
    /// Ask this node's blind verifier whether the finding still holds after the change (when
    /// the change is usable and breaks no test the base passes).
    #[serde(default)]
    pub verify: bool,
    /// The verifier model the user named: the node verifies with it, or not at all (then this
    /// run's own verifier judges the change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier_model: Option<String>,
}

/// What a node hands back for one attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShippedResult {
    /// The node that ran it, and its model.
    pub node: String,
    pub model: String,
    pub outcome: AgentOutcome,
    /// The attempt's changes against the tree it was shipped.
    pub changes: Vec<StoredChange>,
    /// The tests on the changed tree, when asked for, allowed and the change was usable.
    pub tests: Option<TestRun>,
    /// Why the node ran no tests although asked: its policy, or no sandbox.
    pub tests_not_run: Option<String>,
    /// The node's blind verifier on the change, when asked and it got that far.
    #[serde(default)]
    pub verifier: Option<VerifierCheck>,
    pub stats: CallStats,
}

/// Why an attempt could not be carried out on a node: never the attempt's fault, so it is
/// placed again without costing the finding an attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The node is at capacity, draining or refusing work for now: ask again later.
    #[error("{0}")]
    Busy(String),
    /// The node cannot be reached, died, or stopped answering: take it off this run.
    #[error("{0}")]
    Lost(String),
}

/// How the driver reaches the cluster's nodes for fix attempts.
#[async_trait::async_trait]
pub trait FixWorkers: Send + Sync + 'static {
    /// The nodes that take fix attempts, with how many each runs at once (nodes that joined
    /// since the run started included).
    fn nodes(&self) -> Vec<(String, usize)>;
    /// Resolves when a node has joined since the last call; never, by default.
    async fn joined(&self) {
        std::future::pending::<()>().await
    }
    /// Run `attempt` on `node`; `contents` holds every file of its tree by content hash (the
    /// implementation sends what the node lacks).
    async fn run(
        &self,
        node: &str,
        attempt: ShippedAttempt,
        contents: Arc<HashMap<String, Arc<str>>>,
    ) -> Result<ShippedResult, PlacementError>;
}

/// Whether and how this node runs the test commands that fix attempts ask for: the node's own
/// configuration decides; a client cannot turn it on, nor lift the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestPolicy {
    /// Test commands run, isolated from the network this way.
    Sandboxed(Isolation),
    /// Test commands never run here: why (for the conductor's report).
    Refused(String),
}

/// The model-independent limits of a fix agent's tool loop on a model with `window` tokens of
/// context and `max_output` tokens per answer: the same on every node.
pub fn agent_limits(window: u32, max_output: u32) -> LoopLimits {
    LoopLimits {
        max_iterations: 8,
        budget: quorum_core::weaver::ContextBudget {
            context_tokens: window,
            output_tokens: max_output,
        },
        max_tool_calls_per_turn: 4,
        max_tool_result_tokens: 2_000,
    }
}

/// This node's models for an attempt: the fix agent's, and the blind verifier's (another
/// family where one is served; None when the node has none to spare).
pub struct NodeModels {
    pub fixer: ModelRoute,
    pub verifier: Option<ModelRoute>,
}

/// Worker side: run a shipped attempt in a private worktree under `work_dir` (removed after),
/// with this node's fixer, its tests when `policy` allows, and its blind verifier when asked.
/// `contents` maps each tree entry's hash to its text; the caller checked none is missing.
pub async fn run_shipped(
    attempt: ShippedAttempt,
    contents: &HashMap<String, Arc<str>>,
    models: &NodeModels,
    limits: LoopLimits,
    policy: &TestPolicy,
    work_dir: &Path,
    node: &str,
) -> Result<ShippedResult, std::io::Error> {
    let mut files = Vec::with_capacity(attempt.tree.len());
    for e in &attempt.tree {
        let text = contents.get(&e.hash).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no content for {} ({})", e.path, e.hash),
            )
        })?;
        files.push((e.path.clone(), text.to_string(), e.executable));
    }
    let _ = std::fs::remove_dir_all(work_dir);
    let home = work_dir.join("home");
    std::fs::create_dir_all(&home)?;
    let mut worktree = Worktree::from_files(files, work_dir.join("tree"), attempt.bounds)?;
    let fixer = &models.fixer;
    let mut stats = CallStats::default();
    let outcome = agent::attempt(
        &fixer.client,
        &fixer.spec,
        limits,
        &attempt.target,
        &mut worktree,
        attempt.feedback.as_deref(),
        &mut stats,
    )
    .await;
    let changes = worktree.changes();
    let usable = outcome.failure.is_none() && !changes.is_empty();
    let (tests, tests_not_run) = match (&attempt.tests, policy) {
        (None, _) => (None, None),
        (Some(_), TestPolicy::Refused(why)) => (None, Some(why.clone())),
        (Some(_), TestPolicy::Sandboxed(_)) if !usable => (None, None),
        (Some(t), TestPolicy::Sandboxed(isolation)) => {
            let command = TestCommand {
                command: t.command.clone(),
                isolation: isolation.clone(),
                timeout: Duration::from_secs(t.timeout_secs.max(1)),
                max_output: t.max_output,
                limits: crate::sandbox::Limits::default(),
            };
            let run = match crate::oracles::run_tests(&command, worktree.root(), &home).await {
                Ok(run) => run,
                Err(e) => TestRun {
                    passed: false,
                    failing: [UNNAMED_FAILURE.to_string()].into(),
                    summary: format!("the test command could not be started on {node}: {e}"),
                },
            };
            (Some(run), None)
        }
    };
    let base_failing = attempt
        .tests
        .as_ref()
        .map(|t| t.base_failing.clone())
        .unwrap_or_default();
    let broke = tests
        .as_ref()
        .is_some_and(|t| !t.failing.is_subset(&base_failing));
    let verifier = match (&models.verifier, attempt.verify && usable && !broke) {
        (Some(v), true) => {
            let diff = crate::patch::unified(&changes);
            Some(
                match crate::oracles::verify(
                    &v.client,
                    &v.spec,
                    &attempt.target,
                    &changes,
                    &diff,
                    &mut stats,
                )
                .await
                {
                    Ok(check) => check.judged_by(&fixer.spec.model, &v.spec.model),
                    // A verifier that cannot answer never keeps a fix.
                    Err(e) => VerifierCheck {
                        still_holds: true,
                        reason: format!("the verifier on {node} could not judge the change: {e}"),
                        ..Default::default()
                    },
                },
            )
        }
        _ => None,
    };
    let _ = std::fs::remove_dir_all(work_dir);
    Ok(ShippedResult {
        node: node.to_string(),
        model: fixer.spec.model.clone(),
        outcome,
        changes: changes.iter().map(StoredChange::from).collect(),
        tests,
        tests_not_run,
        verifier,
        stats,
    })
}

/// The hashes of `tree` that `have` lacks, each once: what a node must be sent before it can
/// run the attempt.
pub fn missing(tree: &[TreeEntry], have: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = tree
        .iter()
        .filter(|e| !have(&e.hash))
        .map(|e| e.hash.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The tree a run's attempts start from, kept current as fixes are kept: its manifest and
/// every content by hash.
#[derive(Debug, Clone, Default)]
pub struct ShippableTree {
    entries: BTreeMap<String, TreeEntry>,
    contents: Arc<HashMap<String, Arc<str>>>,
}

impl ShippableTree {
    /// The snapshot as the run starts: `executable` says which files the target marks so.
    pub fn of_pack(pack: &quorum_core::pack::ContextPack) -> ShippableTree {
        let mut entries = BTreeMap::new();
        let mut contents = HashMap::new();
        for (path, f) in &pack.files {
            entries.insert(
                path.clone(),
                TreeEntry {
                    path: path.clone(),
                    hash: f.hash.clone(),
                    executable: is_executable(&pack.root.join(path)),
                },
            );
            contents.insert(f.hash.clone(), f.content.to_arc());
        }
        ShippableTree {
            entries,
            contents: Arc::new(contents),
        }
    }

    /// A kept fix's files take their new text.
    pub fn apply(&mut self, changes: &[crate::worktree::FileChange]) {
        let contents = Arc::make_mut(&mut self.contents);
        for c in changes {
            let hash = quorum_core::pack::PackFile::new(c.path.clone(), c.after.clone()).hash;
            contents.insert(hash.clone(), Arc::from(c.after.as_str()));
            let executable = self.entries.get(&c.path).is_some_and(|e| e.executable);
            self.entries.insert(
                c.path.clone(),
                TreeEntry {
                    path: c.path.clone(),
                    hash,
                    executable,
                },
            );
        }
    }

    pub fn manifest(&self) -> Vec<TreeEntry> {
        self.entries.values().cloned().collect()
    }

    pub fn contents(&self) -> Arc<HashMap<String, Arc<str>>> {
        self.contents.clone()
    }
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_core::pack::ContextPack;

    #[test]
    fn the_tree_follows_kept_fixes_and_a_node_is_sent_only_what_it_lacks() {
        let pack = ContextPack::from_files(
            "/nowhere".into(),
            None,
            vec![
                ("a.py".into(), "x = 1\n".into()),
                ("b.py".into(), "y = 2\n".into()),
            ],
        );
        let mut tree = ShippableTree::of_pack(&pack);
        let before = tree.manifest();
        tree.apply(&[crate::worktree::FileChange {
            path: "a.py".into(),
            before: Some("x = 1\n".into()),
            after: "x = 3\n".into(),
        }]);
        let after = tree.manifest();
        assert_eq!(before[1], after[1], "b.py is untouched");
        assert_ne!(before[0].hash, after[0].hash);
        assert_eq!(&*tree.contents()[&after[0].hash], "x = 3\n");
        // A node that holds the base is sent only the kept fix's new text.
        let have: Vec<String> = before.iter().map(|e| e.hash.clone()).collect();
        assert_eq!(
            missing(&after, |h| have.iter().any(|x| x == h)),
            vec![after[0].hash.clone()]
        );
    }
}
