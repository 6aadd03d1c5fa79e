//! The immutable inputs of one review: what is reviewed (the pack and its scope), how (the flow
//! and the catalog) and where (the node that conducts it).
//!
//! Shared read-only by the review machine and, through the runtime's `ReviewContext`, by every
//! stage: nothing in it changes while the review runs.

use crate::catalog::Catalog;
use crate::flows::flow::Flow;
use crate::pack::ContextPack;
use crate::review::dedup::Gated;
use crate::review::judged::Judged;
use crate::scope::ReviewScope;

/// The inputs of one review.
#[derive(Debug, Clone)]
pub struct Review {
    pub flow_id: String,
    pub flow: Flow,
    pub catalog: Catalog,
    pub pack: ContextPack,
    /// Model for the verifier; `None` = the default model.
    pub verifier_model: Option<String>,
    /// The conducting node's name, recorded as the reporter's node of what runs here.
    pub node: String,
    /// Overrides the flow's max_concurrent when set (--max-concurrent).
    pub max_concurrent: Option<usize>,
    /// rfc3339.
    pub started_at: String,
    /// The change under review, the repository's guidance and the profile (default: a whole
    /// tree review with no guidance).
    pub scope: ReviewScope,
}

impl Review {
    pub fn max_concurrent(&self) -> usize {
        self.max_concurrent
            .unwrap_or(self.flow.parameters.max_concurrent)
            .max(1)
    }

    /// The confidence gate in force: the profile's, else the flow's.
    pub fn confidence_gate(&self) -> f64 {
        self.scope.gate(self.flow.parameters.confidence_gate)
    }

    /// Merge and gate the verified findings, then apply the review's scope (severity floor,
    /// findings off the change moved to `pre_existing`). Analyzer candidates no model checked
    /// are dropped first (`analyzer::take_unchecked_leads`), and those inside another
    /// report's lines take its anchor, so they merge into it (`analyzer::anchor_to_overlapping`).
    pub fn gate(&self, judged: Vec<Judged>) -> Gated {
        let unchecked = crate::analyzer::take_unchecked_leads(judged, &self.scope.analyzers.leads);
        let mut judged = unchecked.kept;
        crate::analyzer::anchor_to_overlapping(&mut judged);
        let mut gated = crate::judging::docreview::merge_and_gate_at(
            &self.flow,
            judged,
            self.confidence_gate(),
        );
        gated.dropped.extend(unchecked.dropped);
        // Unchecked leads of high harm: merged among themselves, whatever their confidence,
        // and kept apart — an unverified security lead is neither a finding nor dropped.
        let apart = crate::review::dedup::merge_and_gate(unchecked.reported, 0.0);
        gated.unverified = apart.findings;
        self.scope.apply(gated)
    }
}
