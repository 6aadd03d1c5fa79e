//! The synthesizer: the summary and action items written from the gated findings (the machine
//! falls back to a deterministic summary when it fails).

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use quorum_core::flows::flow::Role;
use quorum_core::judging::conformance::MergeReadiness;
use quorum_core::machine::Synthesis;
use quorum_core::schema;
use quorum_core::task::Classification;
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

pub fn synthesizer_prompt(
    ctx: &ReviewContext,
    gated: &quorum_core::review::dedup::Gated,
    classification: &Classification,
    conformance: Option<&MergeReadiness>,
) -> (String, String) {
    synthesizer_prompt_in(ctx, gated, classification, conformance, ctx.budget())
}

/// [`synthesizer_prompt`] fitted to `budget`.
pub fn synthesizer_prompt_in(
    ctx: &ReviewContext,
    gated: &quorum_core::review::dedup::Gated,
    classification: &Classification,
    conformance: Option<&MergeReadiness>,
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"summary\": \"...\", \
         \"action_items\": [\"...\"]}}",
        ctx.instructions(Role::Synthesizer)
    );
    let mut list = String::new();
    for f in &gated.findings {
        let loc = match (&f.file, f.line_start) {
            (Some(p), Some(l)) => format!("{p}:{l}"),
            (Some(p), None) => p.clone(),
            _ => "-".into(),
        };
        let _ = writeln!(
            list,
            "{} [{}] {} — {} ({}, {})",
            f.id, f.severity, f.title, loc, f.verdict, f.category
        );
    }
    if list.is_empty() {
        list.push_str("(no findings survived verification)\n");
    }
    let stats = format!(
        "domain: {}\nfiles reviewed: {}\nfindings: {}\nresidual concerns: {}\ndropped as hallucinated: {}\n",
        classification.domain,
        ctx.pack.len(),
        gated.findings.len(),
        gated.residual.len(),
        gated.dropped.len()
    );
    let list = weaver::delimit("findings", &list);
    let Some(gate) = conformance else {
        let fitted = budget.fit(
            &system,
            &[Slot {
                name: "findings",
                content: &list,
                weight: 1,
            }],
        );
        return (
            system,
            format!("## Statistics\n{stats}\n## Findings\n{}", fitted[0]),
        );
    };
    // A conformance flow: the summary must say whether the work is ready to merge and why.
    let (met, unmet, divergent) = gate.counts();
    let stats = format!(
        "{stats}merge gate: {} ({met} met, {unmet} unmet, {divergent} divergent of {} acceptance criteria)\n",
        if gate.ready { "ready" } else { "not ready" },
        gate.criteria.len()
    );
    let mut verdicts = String::new();
    for c in &gate.criteria {
        let _ = writeln!(
            verdicts,
            "{} [{}] {} — {}",
            c.id,
            c.status.as_str(),
            c.text,
            c.reason
        );
    }
    let verdicts = weaver::delimit("acceptance criteria and their verdicts", &verdicts);
    let fitted = budget.fit(
        &system,
        &[
            Slot {
                name: "findings",
                content: &list,
                weight: 1,
            },
            Slot {
                name: "criteria",
                content: &verdicts,
                weight: 1,
            },
        ],
    );
    (
        system,
        format!(
            "## Statistics\n{stats}\n## Findings\n{}\n## Acceptance criteria\n{}",
            fitted[0], fitted[1]
        ),
    )
}

pub async fn synthesize(
    ctx: &ReviewContext,
    gated: &quorum_core::review::dedup::Gated,
    classification: &Classification,
    conformance: Option<&MergeReadiness>,
) -> Result<(Synthesis, StageStats), AttemptError> {
    let (system, user) = synthesizer_prompt(ctx, gated, classification, conformance);
    let (client, model) = ctx.pick("synthesizer", &system, &user, None)?;
    let budget = ctx.budget_for(&client, &model);
    let (system, user) = if budget == ctx.budget() {
        (system, user)
    } else {
        synthesizer_prompt_in(ctx, gated, classification, conformance, budget)
    };
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(budget, &model),
        &system,
        &user,
        schema::synthesis_schema(),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let Parsed::Object(v) = parsed else {
        return Err(AttemptError::Internal("expected an object".into()));
    };
    let summary = v
        .get("summary")
        .and_then(quorum_core::parse::lenient_string)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| AttemptError::SchemaViolation("synthesis has no summary".into()))?;
    let action_items = match v.get("action_items") {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(quorum_core::parse::lenient_string)
            .take(12)
            .collect(),
        _ => Vec::new(),
    };
    Ok((
        Synthesis {
            summary,
            action_items,
            fallback: false,
        },
        StageStats { model, stats },
    ))
}
