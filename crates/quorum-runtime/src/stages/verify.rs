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
    let user = match lead_question(&ctx.pack, finding) {
        Some((question, feeding)) => {
            // Fitted with the question counted, so the whole prompt stays within the window.
            let claim = claim_prompt(&format!("{system}\n{question}"), finding, &feeding, budget);
            format!("{claim}\n{question}")
        }
        None => claim_prompt(&system, finding, excerpt, budget),
    };
    (system, user)
}

/// For an analyzer lead whose rule has a weakness class (`config/weaknesses.yaml`): the
/// narrow question the class asks, as a prompt section, and the code that feeds the cited
/// lines (the enclosing function with its decorators) to answer it on. A small model cannot
/// judge "is this finding true?" in general; it can say whether a request value reaches a
/// line. `None` for any other finding.
pub(crate) fn lead_question(
    pack: &quorum_core::pack::ContextPack,
    finding: &RawFinding,
) -> Option<(String, String)> {
    let rule = finding.category.rsplit_once('/')?.1;
    let class = quorum_core::weakness::Weaknesses::shipped().of_rule(rule)?;
    let file = finding.file.as_deref()?;
    let start = finding.line_start?;
    let end = finding.line_end.unwrap_or(start);
    let (from, to) = quorum_core::review::feeding::feeding_range(pack, file, start, end)?;
    let feeding = pack.read_lines(file, from, to).ok()?;
    let mut section = String::from("## The question\n");
    if !class.explanation.is_empty() {
        let _ = writeln!(section, "{}", class.explanation.trim());
    }
    let _ = writeln!(
        section,
        "Answer this about the source above (lines {start}-{end}, with the code that feeds \
         them): {}\nIf the answer is yes, the verdict is CONFIRMED. If it is no, the verdict \
         is HALLUCINATED. If the source shown cannot tell, UNVERIFIABLE. The reason says which \
         value reaches the line, or why none does.",
        class.question.trim()
    );
    Some((section, feeding))
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

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_core::pack::ContextPack;
    use quorum_core::review::finding::Severity;

    /// The request handler feeding.rs's tests use: SQL built from a form field on line 8.
    const HANDLER: &str = include_str!("../../../../tests/fixtures/snippets/flask_sql_handler.py");

    fn finding(category: &str, line: u32) -> RawFinding {
        RawFinding {
            title: "B608: Possible SQL injection vector through string-based query".into(),
            severity: Severity::P2,
            confidence: 0.7,
            category: category.into(),
            file: Some("app.py".into()),
            line_start: Some(line),
            line_end: Some(line),
            symbol: None,
            evidence: "sql = f\"SELECT * FROM users WHERE name = '{bar}'\"".into(),
            why_it_matters: "rule B608".into(),
            suggested_fix: String::new(),
            routing: Default::default(),
        }
    }

    #[test]
    fn a_lead_of_a_weakness_class_is_asked_its_question_over_the_code_that_feeds_it() {
        let pack = ContextPack::from_files(
            "/t".into(),
            None,
            vec![("app.py".to_string(), HANDLER.to_string())],
        );
        let (section, feeding) =
            lead_question(&pack, &finding("security/B608", 8)).expect("a class question");
        assert!(section.contains("bound query"), "{section}");
        assert!(section.contains("lines 8-8"), "{section}");
        assert!(
            section.contains("yes, the verdict is CONFIRMED"),
            "{section}"
        );
        // Where the value comes from is in view: the route, the request read, the execute.
        assert!(feeding.contains("@app.route"), "{feeding}");
        assert!(feeding.contains("request.form.get('name')"), "{feeding}");
        assert!(feeding.contains("cur.execute(sql)"), "{feeding}");
        assert!(!feeding.contains("from flask import"), "{feeding}");
        // A model's finding, or a rule of no class, keeps the general question.
        assert!(lead_question(&pack, &finding("security", 8)).is_none());
        assert!(lead_question(&pack, &finding("lint/E501", 8)).is_none());
    }
}
