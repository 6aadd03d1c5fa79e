//! The build loop's oracle: the conformance judge (the same prompts, batches and grounding as
//! a `conformance` review) asked about the worktree as it is, on a model chosen apart from the
//! builder's. It sees the criteria and the files, never the builder's words.

use quorum_core::fixing::build_loop::Verdicts;
use quorum_core::flows::flow::Flow;
use quorum_core::judging::conformance::{
    ground_judgment, Criterion, CriterionStatus, Judgment, Spec,
};
use quorum_core::judging::named_code::require_named_code;
use quorum_core::machine::review::Review;
use quorum_core::pack::ContextPack;
use quorum_core::scope::ReviewScope;
use quorum_runtime::agent::CallStats;
use quorum_runtime::{Backends, ReviewContext};

/// How the judge is reached and what it judges against.
#[derive(Clone)]
pub struct JudgeSetup {
    pub backends: Backends,
    /// A flow with a conformance stage: its instructions, batch size and context window.
    pub flow: Flow,
    pub spec: Spec,
    /// The judge's model (another than the builder's where one is served).
    pub model: String,
    pub node: String,
}

/// The judge's verdicts on one tree.
#[derive(Debug, Clone, Default)]
pub struct TreeJudgment {
    /// One per criterion, grounded against the tree.
    pub judgments: Vec<Judgment>,
    pub stats: CallStats,
}

impl TreeJudgment {
    /// The loop's view: what is met (with grounded evidence), what was not ruled on, and why
    /// the rest is not met.
    pub fn verdicts(&self) -> Verdicts {
        verdicts_of(&self.judgments)
    }
}

/// The loop's view of a set of grounded judgments.
pub fn verdicts_of(judgments: &[Judgment]) -> Verdicts {
    let mut v = Verdicts::default();
    for j in judgments {
        if !j.judged {
            v.unjudged.insert(j.id.clone());
        } else if j.status == CriterionStatus::Met {
            v.met.insert(j.id.clone());
            continue;
        }
        v.reasons.insert(j.id.clone(), j.reason.clone());
    }
    v
}

/// Judge every criterion against `pack` (the worktree as it is), in the flow's batches. A
/// batch whose call fails leaves its criteria not judged, with the reason.
pub async fn judge_tree(
    setup: &JudgeSetup,
    criteria: &[Criterion],
    pack: ContextPack,
) -> TreeJudgment {
    let spec_path = setup.spec.pack_path.clone();
    let scope = ReviewScope {
        spec: Some(setup.spec.clone()),
        ..ReviewScope::default()
    };
    let review = Review {
        flow_id: "build".into(),
        flow: setup.flow.clone(),
        catalog: Default::default(),
        pack: pack.clone(),
        verifier_model: Some(setup.model.clone()),
        node: setup.node.clone(),
        max_concurrent: Some(1),
        started_at: String::new(),
        scope,
    };
    let ctx = ReviewContext::new(review, setup.backends.clone());
    let batch = setup.flow.parameters.conformance_batch.max(1);
    let mut out = TreeJudgment::default();
    for chunk in criteria.chunks(batch) {
        match quorum_runtime::stages::conformance::judge_criteria(&ctx, chunk).await {
            Ok(answer) => {
                out.stats.llm_calls += answer.stage.stats.llm_calls;
                out.stats.tokens_in += answer.stage.stats.tokens_in;
                out.stats.tokens_out += answer.stage.stats.tokens_out;
                out.judgments.extend(answer.judgments.into_iter().map(|j| {
                    let j = ground_judgment(j, &pack, spec_path.as_deref());
                    match chunk.iter().find(|c| c.id == j.id) {
                        Some(c) => require_named_code(j, &c.text, &pack, spec_path.as_deref()),
                        None => j,
                    }
                }));
            }
            Err(e) => out.judgments.extend(
                chunk
                    .iter()
                    .map(|c| Judgment::not_judged(&c.id, format!("the judge's call failed: {e}"))),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_judged_grounded_met_counts_as_met() {
        let j = |id: &str, status, judged| Judgment {
            id: id.into(),
            status,
            evidence: vec![],
            reason: format!("{id} reason"),
            judged,
        };
        let v = verdicts_of(&[
            j("C1", CriterionStatus::Met, true),
            j("C2", CriterionStatus::Divergent, true),
            j("C3", CriterionStatus::Unmet, false),
        ]);
        assert_eq!(v.met, ["C1".to_string()].into());
        assert_eq!(v.unjudged, ["C3".to_string()].into());
        assert_eq!(v.reasons.len(), 2);
        assert_eq!(v.reasons["C2"], "C2 reason");
    }
}
