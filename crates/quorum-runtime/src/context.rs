//! Everything one review needs, shared read-only by its conductor and task actors.

use crate::backends::Backends;
use quorum_core::catalog::Catalog;
use quorum_core::flow::Flow;
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
}

pub type SharedContext = Arc<ReviewContext>;

impl ReviewContext {
    pub fn max_concurrent(&self) -> usize {
        self.max_concurrent
            .unwrap_or(self.flow.parameters.max_concurrent)
            .max(1)
    }
}
