//! What a stage's failure degrades to, built without a model: a classification from the
//! pack's facts when the scout fails, and a summary from the findings when the synthesizer
//! fails or the budget leaves no call for it.

use crate::judging::conformance::{CriterionStatus, MergeReadiness};
use crate::machine::job::Synthesis;
use crate::pack::ContextPack;
use crate::review::dedup::Gated;
use crate::task::Classification;

/// A classification from facts alone, used when the scout's model call fails: the review goes on
/// with a coarser plan rather than stopping.
pub fn fallback_classification(pack: &ContextPack) -> Classification {
    let facts = pack.facts();
    let code = facts.kinds.get("code").copied().unwrap_or(0);
    let docs = facts.kinds.get("doc").copied().unwrap_or(0);
    let domain = if code > 0 && docs > code {
        "mixed"
    } else if code > 0 {
        "software"
    } else {
        "documentation"
    };
    Classification {
        domain: domain.into(),
        languages: facts.languages.iter().map(|(l, _)| l.clone()).collect(),
        frameworks: Vec::new(),
        content_types: Vec::new(),
        review_focus: Vec::new(),
    }
}

/// The deterministic summary: counts by severity and the first action items.
pub fn fallback_synthesis(pack: &ContextPack, gated: &Gated) -> Synthesis {
    let mut counts = [0usize; 4];
    for f in &gated.findings {
        counts[f.severity as usize] += 1;
    }
    let summary = if pack.is_empty() {
        "There was nothing to review: the target holds no reviewable files.".to_string()
    } else if gated.findings.is_empty() {
        format!(
            "No finding survived verification across {} files ({} residual concerns, {} dropped).",
            pack.len(),
            gated.residual.len(),
            gated.dropped.len()
        )
    } else {
        format!(
            "{} findings survived verification across {} files: {} P0, {} P1, {} P2, {} P3.",
            gated.findings.len(),
            pack.len(),
            counts[0],
            counts[1],
            counts[2],
            counts[3]
        )
    };
    let action_items = gated
        .findings
        .iter()
        .take(8)
        .map(|f| {
            format!(
                "{}: {}",
                f.id,
                if f.suggested_fix.trim().is_empty() {
                    f.title.as_str()
                } else {
                    f.suggested_fix.trim()
                }
            )
        })
        .collect();
    Synthesis {
        summary,
        action_items,
        fallback: true,
    }
}

/// One sentence on a conformance gate for a summary written without a model.
pub fn gate_sentence(gate: &MergeReadiness) -> String {
    if gate.ready {
        return format!(
            "Merge gate: ready, all {} acceptance criteria met.",
            gate.criteria.len()
        );
    }
    let blocking: Vec<String> = gate
        .criteria
        .iter()
        .filter(|c| c.status != CriterionStatus::Met)
        .map(|c| format!("{} {}", c.id, c.status.as_str()))
        .collect();
    if blocking.is_empty() {
        format!("Merge gate: not ready ({}).", gate.note)
    } else {
        format!("Merge gate: not ready — {}.", blocking.join(", "))
    }
}
