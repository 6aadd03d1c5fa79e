//! quorum-core: the domain of a review as plain data and pure functions.
//!
//! Everything a review *means* lives here: the immutable [`pack::ContextPack`] snapshot of the
//! target, the persona catalog, flow definitions, tasks and findings, the resilient parser for
//! model output, deterministic grounding, dedup and the confidence gate, prompt weaving under a
//! token budget, and the report renderers.
//!
//! Architecture invariant: this crate knows nothing about tokio, sled, tonic, HTTP or actors.
//! It reads the filesystem in exactly one place — the [`pack`] module: the snapshot, its survey
//! and the git HEAD/work-tree lookups — and in the catalog, flow and analyzer-catalog loaders. Every other function is a pure transformation and is unit-tested here.

pub mod adjudication;
pub mod analyzer;
pub mod bench;
pub mod catalog;
pub mod conformance;
pub mod coverage;
pub mod dedup;
pub mod docreview;
pub mod error;
pub mod finding;
pub mod flow;
pub mod grounding;
pub mod human;
pub mod judged;
pub mod ledger;
pub mod memory;
pub mod models;
pub mod pack;
pub mod panel;
pub mod parse;
pub mod plan;
pub mod repo_config;
pub mod report;
pub mod rounds;
pub mod schedule;
pub mod schema;
pub mod scope;
pub mod selection;
pub mod task;
pub mod vote;
pub mod weaver;
