//! The conductor of a review on this node: the actor that drives the review machine
//! ([`actor`]), its messages ([`msg`]), how it runs and ships attempts ([`dispatch`]), and how
//! results, renewals, cancels and membership news reach it by name ([`routing`]).

pub mod actor;
pub mod dispatch;
pub mod msg;
pub mod routing;

pub use actor::{ConductorArgs, ConductorState, FlowConductor};
pub use msg::ConductorMsg;
pub use routing::{
    cancel_review, deliver_renewal, deliver_result, notify_node_joined, notify_node_lost,
};
