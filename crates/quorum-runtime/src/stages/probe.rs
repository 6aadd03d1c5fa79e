//! A narrow probe (`quorum_core::flows::probes`): one yes/no question about the numbered lines
//! around one pattern match, asked in one short schema-bound call without tools. A "yes" with
//! a quote becomes a candidate finding at the line the model named; grounding then checks the
//! quote against the file and the verifier judges it like any other finding. A "no", or a yes
//! without a quote, is no finding.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use quorum_core::review::finding::{RawFinding, Severity};
use quorum_core::schema;
use quorum_core::task::{Probe, Task};
use quorum_core::weaver::{self, ContextBudget, DATA_NOT_INSTRUCTIONS};
use serde_json::Value;

/// The probe's prompt: the question, then the lines around the match, numbered and delimited.
pub fn probe_prompt(ctx: &ReviewContext, probe: &Probe) -> Result<(String, String), AttemptError> {
    let system = format!(
        "You answer one yes/no question about a short excerpt of code, from the lines shown \
         alone.\n{DATA_NOT_INSTRUCTIONS}\n\n{}",
        schema::PROBE_FORMAT
    );
    let excerpt = ctx
        .pack
        .read_lines(&probe.file, probe.start, probe.end)
        .map_err(|e| AttemptError::Internal(format!("probe excerpt: {e}")))?;
    let user = format!(
        "## Question\n{}\n\n## Code ({} lines {}-{}, numbered)\n{}",
        probe.question,
        probe.file,
        probe.start,
        probe.end,
        weaver::delimit(&probe.file, &excerpt)
    );
    Ok((system, user))
}

fn finding_of(probe: &Probe, v: &Value) -> Option<RawFinding> {
    if v.get("holds").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let quote = v.get("quote").and_then(Value::as_str)?.trim().to_string();
    if quote.is_empty() {
        return None;
    }
    let line = v
        .get("line")
        .and_then(Value::as_u64)
        .and_then(|l| u32::try_from(l).ok())
        .filter(|l| (probe.start..=probe.end).contains(l))
        .unwrap_or(probe.line);
    Some(RawFinding {
        title: probe.title.clone(),
        severity: Severity::parse_lenient(&probe.severity).unwrap_or(Severity::P2),
        // A narrow yes is a candidate: the verifier decides, the gate weighs it as moderate.
        confidence: 0.7,
        category: probe.category.clone(),
        file: Some(probe.file.clone()),
        line_start: Some(line),
        line_end: Some(line),
        symbol: None,
        evidence: quote,
        why_it_matters: v
            .get("why")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
        suggested_fix: String::new(),
        routing: Default::default(),
    })
}

/// Ask one probe: its findings (none or one) and what the call cost.
pub async fn probe(
    ctx: &ReviewContext,
    task: &Task,
    probe: &Probe,
) -> Result<(Vec<RawFinding>, StageStats), AttemptError> {
    let (system, user) = probe_prompt(ctx, probe)?;
    let (client, model) = ctx.pick(&task.persona, &system, &user, task.model.as_deref())?;
    let window = ctx.budget_for(&client, &model);
    let output_tokens = ctx
        .flow
        .probes
        .as_ref()
        .map(|p| p.max_output_tokens)
        .unwrap_or(window.output_tokens)
        .min(window.output_tokens)
        .max(32);
    let budget = ContextBudget {
        context_tokens: window.context_tokens,
        output_tokens,
    };
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(budget, &model),
        &system,
        &user,
        schema::probe_schema(),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let findings = match parsed {
        Parsed::Object(v) => finding_of(probe, &v).into_iter().collect(),
        Parsed::Objects(vs) => vs
            .iter()
            .filter_map(|v| finding_of(probe, v))
            .take(1)
            .collect(),
    };
    Ok((findings, StageStats { model, stats }))
}
