//! The oracles a change faces, in the order they are asked: the edit itself, the project's
//! tests on the tree the change would be kept into, the analyzers on the changed files, and
//! the blind verifier on the diff. The fix loop decides on the first failure, so once one has
//! failed the rest are not asked.

use crate::agent::AgentOutcome;
use crate::job::FixJob;
use crate::oracles;
use crate::patch;
use crate::worktree::FileChange;
use quorum_core::fixing::fix_loop::{
    AnalyzerCheck, EditOutcome, Oracles, TestRun, VerifierCheck, UNNAMED_FAILURE,
};
use quorum_core::fixing::select::FixTarget;
use quorum_runtime::agent::CallStats;
use std::collections::BTreeSet;
use std::path::Path;

/// What the edit itself came to.
pub fn edit_outcome(changes: &[FileChange], outcome: &AgentOutcome) -> EditOutcome {
    if let Some(reason) = &outcome.failure {
        EditOutcome::Failed {
            reason: reason.clone(),
        }
    } else if changes.is_empty() {
        EditOutcome::NoChange
    } else {
        EditOutcome::Applied {
            files: changes.iter().map(|c| c.path.clone()).collect(),
            lines: changes
                .iter()
                .map(|c| {
                    quorum_core::fixing::edit::changed_lines(
                        c.before.as_deref().unwrap_or(""),
                        &c.after,
                    )
                })
                .sum(),
        }
    }
}

/// The project's tests on the tree in `dir` (the run's test command; None without one).
pub async fn tests_here(job: &FixJob, dir: &Path, home: &Path) -> Option<TestRun> {
    let tests = job.tests.as_ref()?;
    Some(match oracles::run_tests(tests, dir, home).await {
        Ok(run) => run,
        Err(e) => TestRun {
            passed: false,
            failing: [UNNAMED_FAILURE.to_string()].into(),
            summary: format!("the test command could not be started: {e}"),
        },
    })
}

/// Whether `run` fails a test the base passes.
pub fn breaks_tests(run: Option<&TestRun>, base_failing: Option<&BTreeSet<String>>) -> bool {
    run.is_some_and(|t| base_failing.is_none_or(|base| !t.failing.is_subset(base)))
}

/// The checks that judge the change itself, whatever tree it lands on: the analyzers on the
/// changed files, then (if they pass) the blind verifier on the diff — the verdict of the
/// node that made the change when it gave one (`node_verifier`), else this run's verifier.
pub async fn change_checks(
    job: &FixJob,
    target: &FixTarget,
    changes: &[FileChange],
    fixer_model: &str,
    node_verifier: Option<VerifierCheck>,
    stats: &mut CallStats,
) -> (Option<AnalyzerCheck>, Option<VerifierCheck>) {
    let analyzer = match &job.analyzers {
        Some(setup) => oracles::analyzer_check(setup, target, changes).await,
        None => None,
    };
    if analyzer
        .as_ref()
        .is_some_and(|a| a.rule_still_fires || !a.new_hits.is_empty())
    {
        return (analyzer, None);
    }
    if job.verifier.is_some() && node_verifier.is_some() {
        return (analyzer, node_verifier);
    }
    let verifier = match &job.verifier {
        Some(verifier) => {
            let diff = patch::unified(changes);
            Some(
                match oracles::verify(
                    &verifier.client,
                    &verifier.spec,
                    target,
                    changes,
                    &diff,
                    stats,
                )
                .await
                {
                    Ok(v) => v.judged_by(fixer_model, &verifier.spec.model),
                    // A verifier that cannot answer never keeps a fix.
                    Err(e) => VerifierCheck {
                        still_holds: true,
                        reason: format!("the verifier could not judge the change: {e}"),
                        ..Default::default()
                    },
                },
            )
        }
        None => None,
    };
    (analyzer, verifier)
}

/// Whether the change-level checks failed.
pub fn checks_fail(analyzer: Option<&AnalyzerCheck>, verifier: Option<&VerifierCheck>) -> bool {
    analyzer.is_some_and(|a| a.rule_still_fires || !a.new_hits.is_empty())
        || verifier.is_some_and(|v| v.still_holds)
}

/// Run the oracles that apply on one change, applied to the tree in `dir`, cheapest first.
/// `from_node`: a node's run of the tests on exactly this tree, taken instead of running them
/// here, and its blind verifier's verdict on the change.
#[allow(clippy::too_many_arguments)]
pub async fn judge(
    job: &FixJob,
    target: &FixTarget,
    dir: &Path,
    home: &Path,
    changes: &[FileChange],
    outcome: &AgentOutcome,
    base_failing: Option<&BTreeSet<String>>,
    fixer_model: &str,
    from_node: (Option<TestRun>, Option<VerifierCheck>),
    stats: &mut CallStats,
) -> Oracles {
    let (node_tests, node_verifier) = from_node;
    let mut oracles = Oracles {
        edit: edit_outcome(changes, outcome),
        tests: None,
        analyzer: None,
        verifier: None,
    };
    if !matches!(oracles.edit, EditOutcome::Applied { .. }) {
        return oracles;
    }
    oracles.tests = match node_tests {
        Some(run) => Some(run),
        None => tests_here(job, dir, home).await,
    };
    if breaks_tests(oracles.tests.as_ref(), base_failing) {
        return oracles;
    }
    let (analyzer, verifier) =
        change_checks(job, target, changes, fixer_model, node_verifier, stats).await;
    oracles.analyzer = analyzer;
    oracles.verifier = verifier;
    oracles
}
