//! The conformance stages' prompts and calls: the criteria stage (a spec whose form gave no
//! criteria, read by one model call) and the judge (a batch of criteria against the target).
//!
//! Both prompts carry the spec as the user's words and the target as material, each inside
//! `weaver::delimit` markers: neither can instruct the model. The judge's answer is only read
//! here; its evidence is grounded by the conductor (`quorum_core::judging::conformance::ground_judgment`),
//! so a verdict counts only once its quotes are found where they say.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use crate::stages::judge_batch::judge_batch;
use quorum_core::flows::flow::Role;
use quorum_core::judging::conformance::{self, Criterion, Judgment, Spec};
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

/// The judge's answer for one batch, before grounding.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConformanceOutput {
    /// One per criterion of the batch, in batch order.
    pub judgments: Vec<Judgment>,
    pub stage: StageStats,
}

fn spec_of(ctx: &ReviewContext) -> Result<&Spec, AttemptError> {
    ctx.scope.spec.as_ref().ok_or_else(|| {
        AttemptError::Config(
            "this flow judges a spec, and the review has none: pass --spec FILE".into(),
        )
    })
}

/// The criteria stage's prompt: the spec, as the user's words, for a model to list its
/// acceptance criteria.
pub fn criteria_prompt_in(
    ctx: &ReviewContext,
    spec: &Spec,
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"criteria\": \
         [{{\"text\": \"one adjudicable criterion, in the spec's words\"}}]}}",
        ctx.instructions(Role::Criteria)
    );
    let body = weaver::delimit(&format!("spec {}", spec.path), &spec.text);
    let fitted = budget.fit(
        &system,
        &[Slot {
            name: "spec",
            content: &body,
            weight: 1,
        }],
    );
    (system, format!("## Spec\n{}", fitted[0]))
}

/// One model call for the criteria of a spec whose form gave none.
pub async fn extract_criteria(
    ctx: &ReviewContext,
) -> Result<(Vec<Criterion>, StageStats), AttemptError> {
    let spec = spec_of(ctx)?;
    let (system, user) = criteria_prompt_in(ctx, spec, ctx.budget());
    let (client, model) = ctx.pick("criteria", &system, &user, None)?;
    let budget = ctx.budget_for(&client, &model);
    let (system, user) = if budget == ctx.budget() {
        (system, user)
    } else {
        criteria_prompt_in(ctx, spec, budget)
    };
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(budget, &model),
        &system,
        &user,
        conformance::criteria_schema(),
        Expect::Objects {
            keys: &["criteria", "requirements", "items"],
            id_key: "text",
        },
        &mut stats,
    )
    .await?;
    let values = match parsed {
        Parsed::Objects(v) => v,
        Parsed::Object(v) => vec![v],
    };
    let criteria = conformance::normalize_criteria(&values);
    if criteria.is_empty() {
        return Err(AttemptError::SchemaViolation(
            "the criteria answer named no criterion".into(),
        ));
    }
    Ok((criteria, StageStats { model, stats }))
}

/// The target as the judge sees it: the change's files first (a change review), then the rest,
/// each as numbered lines in its own delimited block, never the spec itself. Built only up to
/// `max_chars`; the budget's fit cuts the rest visibly.
pub fn target_material(ctx: &ReviewContext, max_chars: usize) -> String {
    let spec_path = ctx.scope.spec.as_ref().and_then(|s| s.pack_path.as_deref());
    let changed: Vec<&str> = ctx
        .scope
        .change
        .as_ref()
        .map(|c| c.files.iter().map(|f| f.path.as_str()).collect())
        .unwrap_or_default();
    let mut order: Vec<&str> = changed
        .iter()
        .copied()
        .filter(|p| ctx.pack.get(p).is_some())
        .collect();
    order.extend(
        ctx.pack
            .files
            .keys()
            .map(String::as_str)
            .filter(|p| !changed.contains(p)),
    );
    let mut out = String::new();
    if let Some(c) = &ctx.scope.change {
        let list: String = c
            .files
            .iter()
            .map(|f| format!("{} {}\n", f.kind.as_str(), f.path))
            .collect();
        let _ = write!(
            out,
            "The change {} touches these files (listed first below):\n{}",
            c.spec,
            weaver::delimit("changed files", &list)
        );
    }
    let mut left = 0usize;
    for path in order {
        if Some(path) == spec_path {
            continue;
        }
        let Some(f) = ctx.pack.get(path) else {
            continue;
        };
        if out.len() >= max_chars {
            left += 1;
            continue;
        }
        let lines = ctx
            .pack
            .read_lines(path, 1, f.line_count.max(1))
            .unwrap_or_default();
        out.push_str(&weaver::delimit(path, &lines));
    }
    if left > 0 {
        let _ = writeln!(
            out,
            "[{left} more files not shown: the prompt budget is spent]"
        );
    }
    out
}

/// The judge's prompt for one batch: its criteria (the user's words) and the target material,
/// both delimited as data.
pub fn conformance_prompt_in(
    ctx: &ReviewContext,
    batch: &[Criterion],
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"judgments\": \
         [{{\"id\": \"<the criterion's id>\", \"status\": \"<met, unmet or divergent>\", \
         \"reason\": \"<one or two sentences>\", \"evidence\": [{{\"file\": \"<a path as \
         shown>\", \"line_start\": <the first line quoted>, \"line_end\": <the last line \
         quoted>, \"quote\": \"<those lines, copied exactly>\"}}]}}]}} \
         with one judgment for every criterion id. Quotes are checked against the files: a met \
         without a quote that is found where it says counts as unmet.",
        ctx.instructions(Role::Conformance)
    );
    let mut list = String::new();
    for c in batch {
        let _ = writeln!(list, "{}: {}", c.id, c.text);
    }
    let spec = ctx
        .scope
        .spec
        .as_ref()
        .map(|s| s.path.as_str())
        .unwrap_or("the spec");
    let criteria = weaver::delimit(&format!("acceptance criteria from {spec}"), &list);
    let max_chars = (budget.input_tokens() as usize).saturating_mul(4);
    let material = target_material(ctx, max_chars);
    // Equal shares: the criteria are the question and rarely need theirs (a batch is a few
    // lines), so the target gets nearly all; a long batch is never cut for a big target.
    let fitted = budget.fit(
        &system,
        &[
            Slot {
                name: "criteria",
                content: &criteria,
                weight: 1,
            },
            Slot {
                name: "target",
                content: &material,
                weight: 1,
            },
        ],
    );
    (
        system,
        format!(
            "## Acceptance criteria\n{}\n## Target\n{}",
            fitted[0], fitted[1]
        ),
    )
}

/// One judge call for a batch of criteria. The judge is an independent evaluator: it runs on
/// the verifier's model (`--verifier-model`, else the default), sees the criteria and the target,
/// and never the specialists' findings or who wrote the code.
pub async fn judge_criteria(
    ctx: &ReviewContext,
    batch: &[Criterion],
) -> Result<ConformanceOutput, AttemptError> {
    spec_of(ctx)?;
    let ids: Vec<&str> = batch.iter().map(|c| c.id.as_str()).collect();
    let (values, stage) = judge_batch(
        ctx,
        |budget| conformance_prompt_in(ctx, batch, budget),
        conformance::judgments_schema(&ids),
        &["judgments", "criteria", "results"],
    )
    .await?;
    Ok(ConformanceOutput {
        judgments: conformance::normalize_judgments(&values, batch),
        stage,
    })
}
