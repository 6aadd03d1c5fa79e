//! The report, assembled from what the review machine knows when the review ends: status is
//! derived here, from what happened to each task, never kept as a flag while the review runs.

use crate::machine::job::{AttemptStats, Synthesis};
use crate::machine::review::Review;
use crate::machine::run::{TaskRun, TaskState};
use crate::models::family_of;
use crate::report::{
    InsightsReport, Methodology, Report, ReviewStatus, TargetInfo, TeamMember, Usage,
    SCHEMA_VERSION,
};
use crate::review::dedup::Gated;
use crate::task::{Classification, RejectedTask, Task};
use std::collections::{BTreeMap, BTreeSet};

/// What the conductor hands over when the run ends.
#[derive(Debug)]
pub struct RunFacts {
    pub runs: Vec<TaskRun>,
    pub classification: Classification,
    pub classification_fallback: bool,
    pub rejected: Vec<RejectedTask>,
    pub reported: usize,
    pub gated: Gated,
    pub synthesis: Synthesis,
    pub verifier_model: Option<String>,
    pub verifier_degraded: bool,
    /// The verification ledger (every model-checked finding's votes).
    pub ledger: Vec<crate::review::ledger::LedgerEntry>,
    pub usage: AttemptStats,
    pub wall_ms: u64,
    pub failure: Option<String>,
    /// Why the flow budget stopped new work, when it did.
    pub budget: Option<String>,
    /// Why the review was cancelled, when it was: it ends partial, whatever was done.
    pub cancelled: Option<String>,
    /// Conformance flows: the merge gate as the conductor knows it.
    pub conformance: Option<crate::judging::conformance::MergeReadiness>,
    /// Finish reviews: the prior findings' rulings as the conductor knows them.
    pub adjudication: Option<crate::judging::adjudication::Adjudication>,
    /// Why a conformance flow could not judge its spec (no spec, criteria unreadable).
    pub conformance_failure: Option<String>,
    /// Exhaustive flows: each round's metrics.
    pub rounds: Vec<crate::flows::rounds::RoundMetrics>,
    /// Two-tier selection's decisions, when the flow selects its roster.
    pub selection: Option<crate::flows::selection::SelectionRecord>,
    /// Panel flows: the judge panel as far as it got (it never changes the status).
    pub panel: Option<crate::judging::panel::PanelReport>,
}

/// Derive status and build the report.
pub fn assemble(ctx: &Review, facts: RunFacts, now_ms: u64) -> Report {
    let specialists: Vec<&TaskRun> = facts.runs.iter().filter(|r| r.task.is_some()).collect();
    let failed: Vec<&TaskRun> = specialists
        .iter()
        .copied()
        .filter(|r| r.state != TaskState::Completed)
        .collect();
    let (mut status, mut reason) = if let Some(c) = &facts.cancelled {
        (ReviewStatus::Partial, format!("cancelled: {c}"))
    } else if let Some(f) = &facts.failure {
        (ReviewStatus::Failed, f.clone())
    } else if ctx.pack.is_empty() {
        (
            ReviewStatus::Completed,
            "nothing to review: the target holds no reviewable files".to_string(),
        )
    } else if !specialists.is_empty() && failed.len() == specialists.len() {
        (
            ReviewStatus::Failed,
            format!("all {} specialist tasks failed", specialists.len()),
        )
    } else if !failed.is_empty() {
        let names: Vec<String> = failed
            .iter()
            .map(|r| {
                format!(
                    "{} ({})",
                    r.id,
                    r.error_classes
                        .last()
                        .map(String::as_str)
                        .unwrap_or("skipped")
                )
            })
            .collect();
        (
            ReviewStatus::Partial,
            format!(
                "{} of {} specialist tasks did not complete: {}",
                failed.len(),
                specialists.len(),
                names.join(", ")
            ),
        )
    } else {
        (ReviewStatus::Completed, String::new())
    };

    // A conformance flow that could not judge every criterion did not do its job: partial, and
    // a review that is not completed is never ready to merge.
    let mut conformance = facts.conformance;
    if let Some(c) = &mut conformance {
        let unjudged = c.criteria.iter().filter(|k| !k.judged).count();
        if status == ReviewStatus::Completed && !ctx.pack.is_empty() {
            if let Some(f) = &facts.conformance_failure {
                (status, reason) = (ReviewStatus::Partial, f.clone());
            } else if unjudged > 0 {
                (status, reason) = (
                    ReviewStatus::Partial,
                    format!(
                        "{unjudged} of {} acceptance criteria could not be judged",
                        c.criteria.len()
                    ),
                );
            }
        }
        if status != ReviewStatus::Completed {
            let s = format!("{status:?}").to_lowercase();
            c.close(&format!(
                "the review is {s}, and a review that did not complete is never ready"
            ));
        }
    }
    // A finish review that could not rule on every prior finding did not do its job either.
    let mut adjudication = facts.adjudication;
    if let (Some(a), Some(prior)) = (&mut adjudication, ctx.scope.prior.as_ref()) {
        a.mark_new(prior, &facts.gated.findings);
        let unjudged = a.summary.not_judged;
        if status == ReviewStatus::Completed && !ctx.pack.is_empty() && unjudged > 0 {
            (status, reason) = (
                ReviewStatus::Partial,
                format!(
                    "{unjudged} of {} prior findings could not be adjudicated",
                    a.findings.len()
                ),
            );
        }
    }
    let mut team: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in &specialists {
        let model = if r.model.is_empty() {
            "-".to_string()
        } else {
            r.model.clone()
        };
        *team.entry((r.persona.clone(), model)).or_default() += 1;
    }
    let mut verifier_note = match &facts.verifier_model {
        None => "no finding needed a model verdict".to_string(),
        Some(v) => {
            let fam = family_of(v);
            if facts.verifier_degraded {
                format!("verification ran on the same model family as the finders ({fam}): degraded independence")
            } else {
                format!("verification ran on a different model family ({fam}) from the finders")
            }
        }
    };
    let mut notes = Vec::new();
    if let Some(b) = facts.budget.as_ref().filter(|_| facts.cancelled.is_none()) {
        notes.push(format!("{b}; the review kept what it had found"));
    }
    if facts.classification_fallback {
        notes.push(
            "the scout's model call failed; classification was derived from file facts".to_string(),
        );
    }
    // A review that failed says why; that its summary was built without a model follows.
    if facts.synthesis.fallback && !ctx.pack.is_empty() && facts.failure.is_none() {
        notes.push("the summary was built deterministically (synthesizer unavailable)".to_string());
    }
    let status_reason = if notes.is_empty() {
        reason
    } else if reason.is_empty() {
        notes.join("; ")
    } else {
        format!("{reason}; {}", notes.join("; "))
    };
    let promoted = facts.gated.findings.iter().filter(|f| f.promoted).count();
    // Cross-validation may ask several models: every model that voted, first-asked first.
    let mut verifier_models: Vec<String> = facts.verifier_model.iter().cloned().collect();
    for v in facts.ledger.iter().flat_map(|e| &e.votes) {
        if !verifier_models.contains(&v.model) {
            verifier_models.push(v.model.clone());
        }
    }
    // Votes of one model on one prompt are not independent opinions: say so.
    let most_votes = facts
        .ledger
        .iter()
        .map(|e| e.votes.len())
        .max()
        .unwrap_or(0);
    let voters: BTreeSet<&str> = facts
        .ledger
        .iter()
        .flat_map(|e| e.votes.iter().map(|v| v.model.as_str()))
        .collect();
    if most_votes > 1 && voters.len() == 1 {
        verifier_note.push_str(&format!(
            "; every one of the {most_votes} votes per finding came from the one model available \
             ({}), so they are repeated draws rather than independent opinions",
            voters.iter().next().copied().unwrap_or_default()
        ));
    }
    let planned: Vec<Task> = specialists.iter().filter_map(|r| r.task.clone()).collect();
    let completed: Vec<&Task> = specialists
        .iter()
        .filter(|r| r.state == TaskState::Completed)
        .filter_map(|r| r.task.as_ref())
        .collect();
    let coverage = Some(crate::flows::coverage::report(
        &ctx.flow,
        &ctx.pack,
        &planned,
        &completed,
        &facts.gated.findings,
    ));
    // A member the flow's team rules placed says why; the first such task's reason stands.
    let mut reasons: BTreeMap<&str, &str> = BTreeMap::new();
    for t in &planned {
        if let Some(why) = t.origin.as_deref().and_then(|o| o.strip_prefix("team: ")) {
            reasons.entry(t.persona.as_str()).or_insert(why);
        }
    }
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        flow_id: ctx.flow_id.clone(),
        flow: ctx.flow.name.clone(),
        status,
        status_reason,
        started_at: ctx.started_at.clone(),
        target: TargetInfo {
            path: ctx.pack.root.display().to_string(),
            head_sha: ctx.pack.head_sha.clone(),
            file_count: ctx.pack.len(),
            skipped: ctx.pack.skipped.clone(),
            diff: ctx.scope.change.as_ref().map(Into::into),
        },
        classification: facts.classification,
        summary: facts.synthesis.summary,
        action_items: facts.synthesis.action_items,
        team: team
            .into_iter()
            .map(|((persona, model), tasks)| TeamMember {
                reason: reasons.get(persona.as_str()).map(|s| s.to_string()),
                persona,
                model,
                tasks,
            })
            .collect(),
        methodology: Methodology {
            reported: facts.reported,
            dropped: facts.gated.dropped.len(),
            merged: facts.gated.merged,
            residual: facts.gated.residual.len(),
            promoted,
            confidence_gate: ctx.confidence_gate(),
            verifier_models,
            verifier_note,
            rejected_tasks: facts.rejected,
            profile: ctx.scope.profile.as_str().to_string(),
        },
        coverage,
        rounds: facts.rounds,
        selection: facts.selection,
        verification_ledger: facts.ledger,
        safe_fixes: Vec::new(),
        conformance,
        adjudication,
        panel: facts.panel,
        analyzers: ctx.scope.analyzers.runs.clone(),
        findings: facts.gated.findings,
        residual_concerns: facts.gated.residual,
        pre_existing: facts.gated.pre_existing,
        unverified_leads: facts.gated.unverified,
        lint: if ctx.flow.parameters.lint_findings {
            Vec::new()
        } else {
            ctx.scope.analyzers.lint_counts()
        },
        dropped: facts.gated.dropped,
        tasks: facts.runs.iter().map(|r| r.to_report(&ctx.node)).collect(),
        usage: Usage {
            llm_calls: facts.usage.llm_calls,
            tokens_in: facts.usage.tokens_in,
            tokens_out: facts.usage.tokens_out,
            wall_ms: facts.wall_ms,
        },
        insights: None,
        since: None,
    };
    report.insights = insights_of(ctx, &report, now_ms);
    report
}

/// report.json `insights`: what earlier reviews offered the planner and how many insights
/// this review leaves (the caller that keeps them distils the same report the same way).
/// None with memory off or when both are empty.
fn insights_of(ctx: &Review, report: &Report, now_ms: u64) -> Option<InsightsReport> {
    let memory = ctx.scope.memory.as_ref()?;
    let offered: Vec<crate::report::OfferedInsight> = memory
        .offered
        .iter()
        .map(|o| crate::report::OfferedInsight {
            id: o.insight.id.clone(),
            title: o.insight.title.clone(),
            from_flow: o.insight.provenance.flow_id.clone(),
            score: (o.score * 1000.0).round() / 1000.0,
        })
        .collect();
    let recorded = crate::memory::distill_report(report, &memory.repository, now_ms).len();
    (recorded > 0 || !offered.is_empty())
        .then_some(crate::report::InsightsReport { offered, recorded })
}
