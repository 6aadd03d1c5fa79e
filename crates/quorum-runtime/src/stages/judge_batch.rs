//! One call of an independent judge over a batch: what the conformance judge and the
//! adjudicator share. The judge runs on the verifier's model (`--verifier-model`, else the
//! default), with a prompt fitted to that model's window, under a JSON schema, and its answer
//! is read leniently as a list of objects; the caller normalises them against its batch.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use quorum_core::weaver::ContextBudget;
use serde_json::Value;

/// Ask the judge: `prompt` builds (system, user) for the judge model's budget; `keys` are the
/// names the answer's list may come under, each object carrying an `id`.
pub async fn judge_batch(
    ctx: &ReviewContext,
    prompt: impl FnOnce(ContextBudget) -> (String, String),
    schema: Value,
    keys: &[&str],
) -> Result<(Vec<Value>, StageStats), AttemptError> {
    let (judge, _) = ctx
        .backends
        .select_verifier(ctx.verifier_model.as_deref(), &[])
        .map_err(|e| AttemptError::Config(e.to_string()))?;
    let budget = ctx.budget_for(&judge.client, &judge.model);
    let (system, user) = prompt(budget);
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &judge.client,
        &ctx.call_spec(budget, &judge.model),
        &system,
        &user,
        schema,
        Expect::Objects { keys, id_key: "id" },
        &mut stats,
    )
    .await?;
    let values = match parsed {
        Parsed::Objects(v) => v,
        Parsed::Object(v) => vec![v],
    };
    Ok((
        values,
        StageStats {
            model: judge.model,
            stats,
        },
    ))
}
