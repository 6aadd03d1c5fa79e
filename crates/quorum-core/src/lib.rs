//! quorum-core: the domain of a review as plain data and pure functions.
//!
//! Everything a review *means* lives here: the immutable [`pack::ContextPack`] snapshot of the
//! target, the persona catalog, flow definitions, tasks and findings, the resilient parser for
//! model output, deterministic grounding, dedup and the confidence gate, prompt weaving under a
//! token budget, and the report renderers.
//!
//! The rooms, floor by floor (a module uses modules on its own floor or below, never above):
//!
//! 1. leaves: [`error`], [`human`], [`catalog`] (personas), [`task`], [`parse`] (JSON out of
//!    model text), [`weaver`] (prompts under a token budget), [`models`] (model cards and
//!    selection), [`weakness`] (weakness classes: CWE, harm, the verifier's question);
//! 2. [`pack`]: the snapshot of the target, its survey, atlas and tree rules;
//! 3. [`review`]: findings, grounding, votes, the verdict, dedup and the gate, the ledger;
//! 4. [`analyzer`] (tool output as leads) and [`schema`] (output contracts);
//! 5. [`flows`] (the flow file and the rules that complete a plan) and [`judging`]
//!    (conformance, adjudication, document review, the panel);
//! 6. [`report`] (the schema and its renderings), then [`memory`], [`scope`],
//!    [`repo_config`], [`reuse`] (incremental reviews' keys), [`bench`](mod@bench) and
//!    [`fixing`] (the fix loop's decisions and its report);
//! 7. [`machine`]: the review machine — the whole conductor of a review as a pure state
//!    machine (phase order, what each stage's answer means, attempts, budgets, resume,
//!    the report), with its scheduling core ([`machine::schedule`]).
//!
//! Architecture invariant: this crate knows nothing about tokio, sled, tonic, HTTP or actors.
//! It reads the filesystem in exactly one place — the [`pack`] module: the snapshot, its survey
//! and the git HEAD/work-tree lookups — and in the catalog, flow and analyzer-catalog loaders. Every other function is a pure transformation and is unit-tested here.

pub mod analyzer;
pub mod bench;
pub mod catalog;
pub mod error;
pub mod fixing;
pub mod flows;
pub mod human;
pub mod judging;
pub mod machine;
pub mod memory;
pub mod models;
pub mod pack;
pub mod parse;
pub mod repo_config;
pub mod report;
pub mod reuse;
pub mod review;
pub mod schema;
pub mod scope;
pub mod task;
pub mod weakness;
pub mod weaver;
