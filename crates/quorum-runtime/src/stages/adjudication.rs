//! The finish review's adjudicator call: a batch of a prior review's findings, each with the
//! author's disposition and the engine's pre-check, ruled against the current tree.
//!
//! The prior finding's words and the author's comment came from outside this review (another
//! run's models, the author), so each is wrapped in `weaver::delimit` markers like the target
//! itself: none can instruct the model. The answer is only read here; the conductor settles it
//! (`quorum_core::judging::adjudication::settle`) against the tree before it counts.

use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use crate::stages::judge_batch::judge_batch;
use quorum_core::flows::flow::Role;
use quorum_core::judging::adjudication::{self, Adjudged, PriorFinding, NEAR_LINES};
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The adjudicator's answer for one batch, before settling.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AdjudicationOutput {
    /// One per prior finding of the batch, in batch order.
    pub rulings: Vec<Adjudged>,
    pub stage: StageStats,
}

fn location(f: &PriorFinding) -> String {
    match (f.file.as_deref(), f.line_start, f.line_end) {
        (Some(p), Some(a), Some(b)) if a != b => format!("{p}:{a}-{b}"),
        (Some(p), Some(a), _) => format!("{p}:{a}"),
        (Some(p), None, _) => p.to_string(),
        (None, ..) => "(no file)".to_string(),
    }
}

/// The prior findings of a batch as the adjudicator sees them: each finding and each author's
/// comment in its own delimited block, the engine's pre-check beside it.
pub fn prior_material(ctx: &ReviewContext, batch: &[PriorFinding]) -> String {
    let mut out = String::new();
    for f in batch {
        let body = format!(
            "title: {}\nseverity: {}\nlocation: {}\nevidence:\n{}\nwhy it matters: {}\n",
            f.title,
            f.severity.as_str(),
            location(f),
            f.evidence,
            f.why_it_matters
        );
        let _ = writeln!(out, "### {}", f.id);
        out.push_str(&weaver::delimit(&format!("prior finding {}", f.id), &body));
        match &f.note {
            Some(n) => {
                let _ = writeln!(out, "Author's disposition: {}", n.disposition.as_str());
                if !n.comment.is_empty() {
                    out.push_str(&weaver::delimit(
                        &format!("author's comment on {}", f.id),
                        &n.comment,
                    ));
                }
            }
            None => out.push_str("Author's disposition: none given\n"),
        }
        let pre = adjudication::precheck(f, &ctx.pack);
        let _ = writeln!(out, "Engine pre-check: {}\n", pre.describe());
    }
    out
}

/// The current tree around each cited location of the batch: one delimited block per file,
/// the cited lines with `NEAR_LINES` either side, numbered.
pub fn tree_material(ctx: &ReviewContext, batch: &[PriorFinding]) -> String {
    let mut spans: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for f in batch {
        let Some(file) = f.file.as_deref().and_then(|p| ctx.pack.get(p)) else {
            continue;
        };
        let (a, b) = match (f.line_start, f.line_end) {
            (Some(a), b) => (
                a.saturating_sub(NEAR_LINES).max(1),
                b.unwrap_or(a).saturating_add(NEAR_LINES),
            ),
            _ => (1, file.line_count.max(1)),
        };
        let e = spans.entry(file.path.clone()).or_insert((a, b));
        *e = (e.0.min(a), e.1.max(b));
    }
    let mut out = String::new();
    for (path, (a, b)) in spans {
        let lines = ctx.pack.read_lines(&path, a, b).unwrap_or_default();
        out.push_str(&weaver::delimit(&path, &lines));
    }
    if out.is_empty() {
        out.push_str("(none of the cited files is in the current tree)\n");
    }
    out
}

/// The adjudicator's prompt for one batch.
pub fn adjudication_prompt_in(
    ctx: &ReviewContext,
    batch: &[PriorFinding],
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"rulings\": \
         [{{\"id\": \"<the prior finding's id>\", \"status\": \"<fixed, still_present, \
         disputed_accepted or disputed_rejected>\", \"reason\": \"<one or two sentences>\", \
         \"evidence\": [{{\"file\": \"<a path as shown>\", \"line_start\": <the first line \
         quoted>, \"line_end\": <the last line quoted>, \"quote\": \"<those lines, copied \
         exactly>\"}}]}}]}} with one ruling for \
         every prior finding id. The disputed statuses are only for findings the author \
         disputes. Quotes are checked against the current tree: a still_present or \
         disputed_rejected without a quote found where it says cannot be claimed.",
        ctx.instructions(Role::Adjudicator)
    );
    let prior = prior_material(ctx, batch);
    let tree = tree_material(ctx, batch);
    let fitted = budget.fit(
        &system,
        &[
            Slot {
                name: "prior findings",
                content: &prior,
                weight: 1,
            },
            Slot {
                name: "current tree",
                content: &tree,
                weight: 2,
            },
        ],
    );
    (
        system,
        format!(
            "## Prior findings\n{}\n## Current tree\n{}",
            fitted[0], fitted[1]
        ),
    )
}

/// One adjudicator call for a batch. Like the conformance judge it is an independent
/// evaluator: it runs on the verifier's model (`--verifier-model`, else the default) and sees
/// the prior findings, the author's words and the tree, never this review's own findings.
pub async fn adjudicate(
    ctx: &ReviewContext,
    batch: &[PriorFinding],
) -> Result<AdjudicationOutput, AttemptError> {
    let ids: Vec<&str> = batch.iter().map(|f| f.id.as_str()).collect();
    let (values, stage) = judge_batch(
        ctx,
        |budget| adjudication_prompt_in(ctx, batch, budget),
        adjudication::rulings_schema(&ids),
        &["rulings", "findings", "results"],
    )
    .await?;
    Ok(AdjudicationOutput {
        rulings: adjudication::normalize_rulings(&values, batch),
        stage,
    })
}
