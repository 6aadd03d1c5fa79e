//! The verifier: one call per verifier and grounded finding, blind to who reported it and how
//! sure they were, and the flow's threshold over the votes.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use quorum_core::flows::flow::Role;
use quorum_core::machine::grounded::{ground_one, unverified, Grounded};
use quorum_core::review::finding::{RawFinding, Reported, Verdict};
use quorum_core::review::judged::Judged;
use quorum_core::review::vote::{self, Ballot, Vote};
use quorum_core::schema;
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

/// The verifier's prompt for one grounded finding. By construction it carries the claim and the
/// cited source only: never the finder's persona, model or confidence.
pub fn verifier_prompt(
    ctx: &ReviewContext,
    finding: &RawFinding,
    excerpt: &str,
) -> (String, String) {
    verifier_prompt_in(ctx, finding, excerpt, ctx.budget())
}

/// [`verifier_prompt`] fitted to `budget`.
pub fn verifier_prompt_in(
    ctx: &ReviewContext,
    finding: &RawFinding,
    excerpt: &str,
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"verdict\": \
         \"CONFIRMED|PLAUSIBLE|HALLUCINATED|UNVERIFIABLE\", \"reason\": \"one sentence\"}}",
        ctx.instructions(Role::Verifier)
    );
    let user = claim_prompt(&system, finding, excerpt, budget);
    (system, user)
}

/// The claim and the lines it cites, as an independent judge sees them: what is claimed and
/// where, never who claimed it, how severe or how sure they said it was.
pub(crate) fn claim_prompt(
    system: &str,
    finding: &RawFinding,
    excerpt: &str,
    budget: ContextBudget,
) -> String {
    let location = match (&finding.file, finding.line_start, finding.line_end) {
        (Some(f), Some(a), Some(b)) if a != b => format!("{f} lines {a}-{b}"),
        (Some(f), Some(a), _) => format!("{f} line {a}"),
        (Some(f), None, _) => f.clone(),
        (None, _, _) => "(none)".into(),
    };
    // The claim's words come from a reviewer or an analyzer that read the content under
    // review (a tool's message quotes it): data, like the source.
    let mut words = format!(
        "Title: {}\nCategory: {}\nLocation: {location}\n",
        finding.title, finding.category
    );
    if let Some(s) = &finding.symbol {
        let _ = writeln!(words, "Symbol: {s}");
    }
    let _ = write!(words, "Explanation: {}", finding.why_it_matters);
    let mut claim = format!("## Claim\n{}", weaver::delimit("claim", &words));
    if !finding.evidence.trim().is_empty() {
        let _ = writeln!(
            claim,
            "Quoted evidence:\n{}",
            weaver::delimit("quoted evidence", &finding.evidence)
        );
    }
    let source = weaver::delimit(finding.file.as_deref().unwrap_or("source"), excerpt);
    let fitted = budget.fit(
        system,
        &[
            Slot {
                name: "claim",
                content: &claim,
                weight: 1,
            },
            Slot {
                name: "source",
                content: &source,
                weight: 3,
            },
        ],
    );
    format!("{}\n## Source\n{}", fitted[0], fitted[1])
}

/// Ask one verifier about one grounded finding. It sees the claim and the cited lines only:
/// not who reported it, how sure or how severe they said it was, nor what any other verifier
/// answered. A call that fails, or an answer with no readable verdict, is no vote (the reason
/// says why).
pub async fn ask_verifier(
    ctx: &ReviewContext,
    finding: &RawFinding,
    excerpt: &str,
    verifier: &crate::backends::Selected,
    index: usize,
    stats: &mut CallStats,
) -> Vote {
    let budget = ctx.budget_for(&verifier.client, &verifier.model);
    let (system, user) = verifier_prompt_in(ctx, finding, excerpt, budget);
    let prompt_digest = vote::prompt_digest(&system, &user);
    let spec = ctx.call_spec(budget, &verifier.model);
    // The k-th verifier of a model is its own sample: keyed apart from the others.
    let key = quorum_core::reuse::vote_key(
        &verifier.model,
        &system,
        &user,
        &format!("{spec:?} verifier={index}"),
    );
    if let Some(recorded) = recorded_vote(ctx, &key).await {
        return Vote {
            verifier: format!("v{}", index + 1),
            model: verifier.model.clone(),
            verdict: recorded.verdict,
            reason: recorded.reason,
            prompt_digest,
        };
    }
    let result = agent::json_call(
        &verifier.client,
        &spec,
        &system,
        &user,
        schema::verdict_schema(),
        Expect::Object,
        stats,
    )
    .await;
    let (verdict, reason) = match result {
        Ok((Parsed::Object(v), _)) => match schema::normalize_verdict(&v) {
            (Verdict::Unverified, reason) => (None, reason),
            (verdict, reason) => (Some(verdict), reason),
        },
        Ok((Parsed::Objects(_), _)) => (None, "the verifier's answer was not a verdict".into()),
        Err(e) => (
            None,
            format!(
                "grounded, but the verifier call failed ({}): {e}",
                e.class()
            ),
        ),
    };
    if verdict.is_some() {
        record_vote(ctx, key, &verifier.model, verdict, &reason);
    }
    Vote {
        verifier: format!("v{}", index + 1),
        model: verifier.model.clone(),
        verdict,
        reason,
        prompt_digest,
    }
}

/// The vote recorded under `key`, when this review reuses results.
async fn recorded_vote(ctx: &ReviewContext, key: &str) -> Option<quorum_core::reuse::VoteResult> {
    let inc = ctx.incremental.clone().filter(|i| i.reuse)?;
    let key = key.to_string();
    tokio::task::spawn_blocking(move || inc.cache.vote(&key).ok().flatten())
        .await
        .ok()
        .flatten()
        .filter(|v| v.verdict.is_some())
}

/// Record a vote that gave a verdict (a failed call is not a result), when the review records.
fn record_vote(
    ctx: &ReviewContext,
    key: String,
    model: &str,
    verdict: Option<Verdict>,
    reason: &str,
) {
    let Some(inc) = ctx.incremental.clone() else {
        return;
    };
    let vote = quorum_core::reuse::VoteResult {
        flow_id: ctx.flow_id.clone(),
        model: model.to_string(),
        verdict,
        reason: reason.to_string(),
    };
    // Not awaited, like a task's result: a shortcut for later reviews, not a fact of this one.
    tokio::task::spawn_blocking(move || {
        if let Err(e) = inc.cache.put_vote(&key, &vote) {
            tracing::warn!(error = %e, "vote not recorded in the result cache");
        }
    });
}

/// A grounded finding's verdict from its verifiers' votes, combined by the flow's threshold
/// ([`quorum_core::review::vote`]). No vote at all leaves it UNVERIFIED with the reason; the ballot
/// stays on the verdict for the report's verification ledger.
pub fn judge_by_votes(
    ctx: &ReviewContext,
    reported: Reported,
    mut notes: Vec<String>,
    votes: Vec<Vote>,
) -> Judged {
    let ballot = Ballot {
        threshold: ctx.flow.parameters.verify_threshold,
        votes,
    };
    let (verdict, reason) = ballot.outcome();
    notes.extend(ballot.no_votes());
    let mut judged = if verdict == Verdict::Unverified {
        unverified(reported, notes, reason)
    } else {
        Judged {
            reported,
            verdict,
            reason,
            deterministic: false,
            notes,
            ballot: None,
            rescored: None,
        }
    };
    judged.ballot = Some(ballot);
    judged
}

/// Verify one reported finding: grounding first, then (if grounded) one call per verifier in
/// `verifiers`, in turn, combined by the flow's threshold.
pub async fn verify_one(
    ctx: &ReviewContext,
    reported: Reported,
    verifiers: &[crate::backends::Selected],
    stats: &mut CallStats,
) -> Judged {
    match ground_one(&ctx.pack, &ctx.catalog, reported) {
        Grounded::Decided(j) => j,
        Grounded::Ready {
            reported,
            excerpt,
            notes,
        } => {
            let mut votes = Vec::with_capacity(verifiers.len());
            for (k, v) in verifiers.iter().enumerate() {
                votes.push(ask_verifier(ctx, &reported.finding, &excerpt, v, k, stats).await);
            }
            judge_by_votes(ctx, reported, notes, votes)
        }
    }
}
