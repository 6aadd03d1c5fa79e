//! The one error type of the node crate's control-plane side: why a review could not be agreed,
//! copied, or taken over here. The API edge turns it into `ApiError`.

/// Why a control-plane step of this node failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Control(#[from] quorum_control::ControlError),
    /// The control plane applied the command and said no.
    #[error("the control plane refused: {0}")]
    Refused(String),
    /// The review's pack reached too few voters for a takeover to be possible.
    #[error("the review's pack reached {got} of {voters} voters, {need} needed for a takeover to be possible; is a majority of the voters up?")]
    PackShort {
        got: usize,
        voters: usize,
        need: usize,
    },
    #[error("this node holds no copy of review {flow_id}'s pack: {message}")]
    NoPack { flow_id: String, message: String },
    /// Someone else conducts the review now.
    #[error("review {flow_id} moved on to {conductor} at epoch {epoch}")]
    Moved {
        flow_id: String,
        conductor: String,
        epoch: u64,
    },
    /// A replicated fact or review record that does not decode, or a fact that cannot be sent.
    #[error("bad replicated data: {0}")]
    Data(String),
    #[error("review store: {0}")]
    Store(String),
    #[error("cannot reach {node}: {message}")]
    Peer { node: String, message: String },
    #[error("cannot resume the review: {0}")]
    Resume(String),
}

impl From<quorum_store::StoreError> for NodeError {
    fn from(e: quorum_store::StoreError) -> Self {
        NodeError::Store(e.to_string())
    }
}
