//! Choosing who and what: two-tier persona selection (the deterministic prefilter, then one
//! short interest poll per discretionary survivor, failing open) and an exhaustive round's
//! model-guided file selector.

use crate::agent::{self, CallSpec, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use quorum_core::flows::selection::{PollOutcome, SelectionDecision, SelectionRecord};
use quorum_core::task::Classification;
use quorum_core::weaver::{self, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

/// Two-tier selection (when the flow asks for it): the deterministic prefilter, then one short
/// interest poll per discretionary survivor. Fails open: a poll that errors, times out or
/// answers unreadably keeps its persona. `None` when the flow selects nothing (whole catalog);
/// else every decision, for the report.
pub(crate) async fn select_personas(
    ctx: &ReviewContext,
    classification: &Classification,
) -> Option<SelectionRecord> {
    let sel = ctx.flow.selection.as_ref()?;
    let candidates = quorum_core::flows::selection::prefilter(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        classification,
    );
    let decided = |c: &quorum_core::flows::selection::Candidate, poll, reason| SelectionDecision {
        persona: c.persona.clone(),
        prefilter: c.reason.clone(),
        poll,
        reason,
    };
    for c in &candidates {
        tracing::info!(persona = %c.persona, reason = %c.reason, "selection: prefilter kept");
    }
    if !sel.interest_poll {
        let decisions = candidates
            .iter()
            .map(|c| {
                let poll = if c.floor {
                    PollOutcome::Floor
                } else {
                    PollOutcome::NotPolled
                };
                decided(c, poll, None)
            })
            .collect();
        return Some(SelectionRecord::new(&ctx.catalog, decisions));
    }
    let mut files = String::new();
    for f in ctx.pack.files.values().take(200) {
        let _ = writeln!(files, "- {} ({})", f.path, f.kind.as_str());
    }
    if ctx.pack.len() > 200 {
        let _ = writeln!(files, "- … {} more files", ctx.pack.len() - 200);
    }
    let material = format!(
        "## Classification\n{}\n\n## Files\n{}",
        serde_json::to_string_pretty(classification).unwrap_or_default(),
        weaver::delimit("file list", &files)
    );
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: \
         {{\"interested\": true or false, \"reason\": \"one short sentence\"}}",
        sel.instructions.trim()
    );
    let mut polls = tokio::task::JoinSet::new();
    let mut polled: Vec<&quorum_core::flows::selection::Candidate> = Vec::new();
    let mut decisions = Vec::new();
    for c in &candidates {
        if c.floor {
            decisions.push(decided(c, PollOutcome::Floor, None));
            continue;
        }
        let Ok(p) = ctx.catalog.get(&c.persona) else {
            continue;
        };
        let user = format!(
            "## Candidate\n{}: {}\n\n## Its mandate\n{}\n\n{material}",
            p.name,
            p.summary.trim(),
            p.mandate.trim()
        );
        // The verifier tier: a short yes/no needs no tools and little reasoning.
        let picked = ctx.pick("verifier", &system, &user, None);
        let system = system.clone();
        let spec_of = |model: &str| CallSpec {
            max_tokens: sel.max_output_tokens,
            ..ctx.call_spec(ctx.budget(), model)
        };
        let timeout = std::time::Duration::from_secs(ctx.flow.parameters.call_timeout_secs.max(1));
        match picked {
            Err(e) => {
                tracing::warn!(persona = %c.persona, error = %e, "selection: no model for the poll; kept (fail open)");
                decisions.push(decided(c, PollOutcome::NoModel, None));
            }
            Ok((client, model)) => {
                let spec = spec_of(&model);
                let name = c.persona.clone();
                polled.push(c);
                polls.spawn(async move {
                    let mut stats = CallStats::default();
                    let call = agent::json_call(
                        &client,
                        &spec,
                        &system,
                        &user,
                        serde_json::json!({"type": "object",
                            "properties": {"interested": {"type": "boolean"}, "reason": {"type": "string"}},
                            "required": ["interested"]}),
                        Expect::Object,
                        &mut stats,
                    );
                    let answer = tokio::time::timeout(timeout, call).await;
                    let (interested, reason) = match answer {
                        Ok(Ok((Parsed::Object(v), _))) => (
                            v.get("interested").and_then(|b| b.as_bool()),
                            v.get("reason")
                                .and_then(|r| r.as_str())
                                .map(|r| r.chars().take(300).collect::<String>())
                                .filter(|r| !r.trim().is_empty()),
                        ),
                        _ => (None, None),
                    };
                    (name, interested, reason)
                });
            }
        }
    }
    let mut answered: Vec<(String, Option<bool>, Option<String>)> = Vec::new();
    while let Some(joined) = polls.join_next().await {
        match joined {
            Ok(a) => answered.push(a),
            // Its name is lost with the task: the sweep below keeps it (fail open).
            Err(e) => tracing::warn!(error = %e, "selection: a poll task ended abnormally"),
        }
    }
    for c in polled {
        let (poll, reason) = match answered.iter().find(|(n, ..)| *n == c.persona) {
            Some((_, Some(false), r)) => {
                tracing::info!(persona = %c.persona, "selection: not interested");
                (PollOutcome::Declined, r.clone())
            }
            Some((_, Some(true), r)) => (PollOutcome::Interested, r.clone()),
            _ => {
                tracing::warn!(persona = %c.persona, "selection: poll failed; kept (fail open)");
                (PollOutcome::Failed, None)
            }
        };
        decisions.push(decided(c, poll, reason));
    }
    Some(SelectionRecord::new(&ctx.catalog, decisions))
}

/// The exhaustive flow's model-guided selection (`select: model`): one short planner-tier call
/// that names the files the next round re-reads. Returns the named paths (unchecked: the
/// caller validates them against the pack) or why there are none, and the call's cost.
pub async fn select_round_files(
    ctx: &ReviewContext,
    rule: &quorum_core::flows::flow::Exhaustive,
    round: u32,
    new: &[quorum_core::flows::rounds::NewFinding<'_>],
) -> (Result<Vec<String>, String>, CallStats) {
    let mut stats = CallStats::default();
    let (system, user) = quorum_core::flows::rounds::selector_prompt(rule, &ctx.pack, round, new);
    let (client, model) = match ctx.pick("planner", &system, &user, None) {
        Ok(p) => p,
        Err(e) => return (Err(format!("no model for the selector: {e}")), stats),
    };
    let spec = CallSpec {
        // A list of paths: a short answer.
        max_tokens: ctx.flow.parameters.max_output_tokens.min(1024),
        ..ctx.call_spec(ctx.budget_for(&client, &model), &model)
    };
    let timeout = std::time::Duration::from_secs(ctx.flow.parameters.call_timeout_secs.max(1));
    let call = agent::json_call(
        &client,
        &spec,
        &system,
        &user,
        quorum_core::flows::rounds::selector_schema(rule),
        Expect::Object,
        &mut stats,
    );
    let answer = match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(format!(
            "no answer within {}s",
            ctx.flow.parameters.call_timeout_secs
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok((Parsed::Object(v), _))) => match v.get("files").and_then(|f| f.as_array()) {
            Some(list) => Ok(list
                .iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect()),
            None => Err("the answer had no files list".to_string()),
        },
        Ok(Ok(_)) => Err("the answer was not one JSON object".to_string()),
    };
    (answer, stats)
}
