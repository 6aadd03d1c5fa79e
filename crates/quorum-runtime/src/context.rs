//! Everything one review needs on this node, shared read-only by its conductor and task actors:
//! the review's immutable inputs ([`Review`], quorum-core's) and this node's handles — its
//! model backends, the fact log, the peers and the team board.

use crate::backends::Backends;
use crate::board::TeamBoard;
use crate::facts::FactLog;
use crate::remote::RemoteExecutor;
use quorum_core::machine::Review;
use std::sync::Arc;

/// Immutable inputs of one review plus the node's handles. Shared behind an `Arc`; nothing in
/// it changes while the review runs, which is what lets any actor read it without locks. It
/// dereferences to the [`Review`], so `ctx.pack`, `ctx.flow` and the rest read as fields.
#[derive(Debug)]
pub struct ReviewContext {
    pub review: Arc<Review>,
    pub backends: Backends,
    /// Where every fact of the review is recorded (disabled = nowhere).
    pub facts: FactLog,
    /// Other nodes that can run attempts (None = this process only).
    pub remote: Option<Arc<dyn RemoteExecutor>>,
    /// The team blackboard (None = team tools are not offered).
    pub board: Option<Arc<dyn TeamBoard>>,
    /// Where completed results are recorded and, in an incremental review, taken from (None =
    /// neither: `--no-cache`, or the cache is held by another process).
    pub incremental: Option<Incremental>,
}

/// The result cache a review records into, and whether it takes results from it.
#[derive(Debug, Clone)]
pub struct Incremental {
    pub cache: Arc<quorum_store::ResultCache>,
    /// Take recorded results whose key matches (`--incremental`); otherwise only record.
    pub reuse: bool,
}

pub type SharedContext = Arc<ReviewContext>;

impl ReviewContext {
    /// A review on this process alone: no fact log, no peers, no team board.
    pub fn new(review: Review, backends: Backends) -> ReviewContext {
        ReviewContext {
            review: Arc::new(review),
            backends,
            facts: FactLog::disabled(),
            remote: None,
            board: None,
            incremental: None,
        }
    }

    pub fn with_facts(mut self, facts: FactLog) -> Self {
        self.facts = facts;
        self
    }

    pub fn with_remote(mut self, remote: Option<Arc<dyn RemoteExecutor>>) -> Self {
        self.remote = remote;
        self
    }

    pub fn with_incremental(mut self, incremental: Option<Incremental>) -> Self {
        self.incremental = incremental;
        self
    }

    pub fn with_board(mut self, board: Option<Arc<dyn TeamBoard>>) -> Self {
        self.board = board;
        self
    }
}

impl std::ops::Deref for ReviewContext {
    type Target = Review;

    fn deref(&self) -> &Review {
        &self.review
    }
}

/// Copy on write: a context being built (tests, a node preparing a review) sets the review's
/// fields in place; once shared, a change would give this context its own copy.
impl std::ops::DerefMut for ReviewContext {
    fn deref_mut(&mut self) -> &mut Review {
        Arc::make_mut(&mut self.review)
    }
}
