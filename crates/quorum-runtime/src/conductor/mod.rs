//! The conductor of a review on this node: the actor that drives the review machine
//! ([`actor`]), its messages ([`msg`]), how it runs and ships attempts ([`dispatch`]), and how
//! results, renewals, cancels and membership news reach it by name ([`routing`]), and how an
//! incremental review takes recorded results instead of running attempts ([`reuse`]).

pub mod actor;
pub mod dispatch;
pub mod msg;
mod reuse;
pub mod routing;

pub use actor::{ConductorArgs, ConductorState, FlowConductor};
pub use msg::ConductorMsg;
pub use routing::{
    cancel_review, deliver_renewal, deliver_result, notify_node_joined, notify_node_lost,
};
