//! Everything one review needs, shared read-only by its conductor and task actors.

use crate::backends::Backends;
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::ContextPack;
use std::sync::Arc;

/// Immutable inputs of one review. Shared behind an `Arc`; nothing in it changes while the
/// review runs, which is what lets any actor read it without locks.
#[derive(Debug)]
pub struct ReviewContext {
    pub flow_id: String,
    pub flow: Flow,
    pub catalog: Catalog,
    pub pack: ContextPack,
    pub backends: Backends,
    /// Model for the verifier; `None` = the default model.
    pub verifier_model: Option<String>,
    /// This node's name, recorded as every reporter's node.
    pub node: String,
    /// Overrides the flow's max_concurrent when set (--max-concurrent).
    pub max_concurrent: Option<usize>,
    pub started_at: String,
    /// Where every fact of the review is recorded (disabled = nowhere).
    pub facts: crate::facts::FactLog,
    /// Other nodes that can run specialist attempts (None = this process only).
    pub remote: Option<std::sync::Arc<dyn crate::remote::RemoteExecutor>>,
    /// The team blackboard (None = team tools are not offered).
    pub board: Option<std::sync::Arc<dyn crate::board::TeamBoard>>,
    /// The change under review, the repository's guidance and the profile (default: a whole
    /// tree review with no guidance).
    pub scope: quorum_core::scope::ReviewScope,
}

pub type SharedContext = Arc<ReviewContext>;

impl ReviewContext {
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
    pub fn gate(
        &self,
        judged: Vec<quorum_core::review::judged::Judged>,
    ) -> quorum_core::review::dedup::Gated {
        let (mut judged, unchecked) = quorum_core::analyzer::take_unchecked_leads(judged);
        quorum_core::analyzer::anchor_to_overlapping(&mut judged);
        let mut gated = quorum_core::judging::docreview::merge_and_gate_at(
            &self.flow,
            judged,
            self.confidence_gate(),
        );
        gated.dropped.extend(unchecked);
        self.scope.apply(gated)
    }
}
