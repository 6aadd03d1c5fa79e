//! What a review is asked to do, and the rules that complete its plan: the flow file
//! ([`flow`]: stages, parameters and the capability rules as data), the tasks the engine adds
//! itself ([`plan`]), a flow's dimension, directory and full coverage and the fresh-eyes lane
//! ([`coverage`]), the exhaustive flow's rounds ([`rounds`]), two-tier persona selection
//! ([`selection`]), the narrow probes chosen from the catalog's patterns ([`probes`]) and the
//! self-consistency passes of each open task ([`passes`]).
//!
//! `flow` is the floor: the others read a [`flow::Flow`], and every one of them that adds a
//! task adds it through [`plan::engine_task`].
//!
//! Architecture invariant: a flow is data and the engine names no persona — every persona a
//! rule seats comes from the flow file or the catalog, and every task the engine adds passes
//! the planner's own validation (tools are the usual intersection), with its origin saying why.

pub mod coverage;
pub mod fit;
pub mod flow;
pub mod passes;
pub mod plan;
pub mod probes;
pub mod rounds;
pub mod selection;
