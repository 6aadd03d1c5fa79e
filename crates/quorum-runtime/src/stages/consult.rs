//! The confidence consultant: a blind re-score of a kept finding's severity and confidence,
//! applied only when it answers within bounds.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::stages::verify::claim_prompt;
use quorum_core::flows::flow::Role;
use quorum_core::review::finding::RawFinding;
use quorum_core::review::judged::Judged;
use quorum_core::schema;
use quorum_core::weaver::{ContextBudget, DATA_NOT_INSTRUCTIONS};

/// The confidence consultant's prompt for one verified finding, fitted to `budget`: the flow's
/// consultant instructions and the same claim-and-source view a verifier gets.
pub fn consultant_prompt_in(
    ctx: &ReviewContext,
    finding: &RawFinding,
    excerpt: &str,
    budget: ContextBudget,
) -> (String, String) {
    let instructions = ctx
        .flow
        .optional_stage(Role::Consultant)
        .map(|s| s.instructions.trim())
        .unwrap_or_default();
    let system = format!(
        "{instructions}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: \
         {{\"severity\": \"<P0, P1, P2 or P3>\", \"confidence\": <0 to 1>, \"reason\": \
         \"<one sentence>\"}} \
         (severity P0 is critical, P3 minor; confidence from 0 to 1 that the problem is real)"
    );
    let user = claim_prompt(&system, finding, excerpt, budget);
    (system, user)
}

/// The consultant's own scores for one verified finding: `Ok((severity, confidence, reason,
/// model))`, or why it gave none (then the finder's scores stand; the finding is never dropped).
pub async fn consult(
    ctx: &ReviewContext,
    finding: &RawFinding,
    excerpt: &str,
    stats: &mut CallStats,
) -> Result<(quorum_core::review::finding::Severity, f64, String, String), String> {
    let (system, user) = consultant_prompt_in(ctx, finding, excerpt, ctx.budget());
    let (client, model) = ctx
        .pick("consultant", &system, &user, None)
        .map_err(|e| format!("no model for the consultant: {e}"))?;
    let budget = ctx.budget_for(&client, &model);
    let (system, user) = if budget == ctx.budget() {
        (system, user)
    } else {
        consultant_prompt_in(ctx, finding, excerpt, budget)
    };
    let result = agent::json_call(
        &client,
        &ctx.call_spec(budget, &model),
        &system,
        &user,
        schema::rescore_schema(),
        Expect::Object,
        stats,
    )
    .await;
    match result {
        Ok((Parsed::Object(v), _)) => {
            let (severity, confidence, reason) = schema::normalize_rescore(&v)?;
            Ok((severity, confidence, reason, model))
        }
        Ok((Parsed::Objects(_), _)) => Err("the consultant's answer was not one object".into()),
        Err(e) => Err(format!("the consultant call failed ({}): {e}", e.class())),
    }
}

/// Put the consultant's scores on a judged finding, keeping the finder's in `rescored`; or
/// note why there are none. Never changes the verdict.
pub fn apply_rescore(
    judged: &mut Judged,
    answer: Result<(quorum_core::review::finding::Severity, f64, String, String), String>,
) {
    match answer {
        Ok((severity, confidence, reason, model)) => {
            let f = &mut judged.reported.finding;
            judged.notes.push(format!(
                "re-scored by the confidence consultant: severity {} → {severity}, confidence \
                 {:.2} → {confidence:.2}",
                f.severity, f.confidence
            ));
            judged.rescored = Some(quorum_core::review::finding::Rescored {
                original_severity: f.severity,
                original_confidence: f.confidence,
                model,
                reason,
            });
            f.severity = severity;
            f.confidence = confidence;
        }
        Err(why) => judged
            .notes
            .push(format!("not re-scored, the finder's scores stand: {why}")),
    }
}
