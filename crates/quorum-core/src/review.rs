//! Findings from report to verdict: a finding as a specialist reports it and as the report
//! shows it ([`finding`]), its check against the pack ([`grounding`]) and against the prompt it
//! was written from ([`echo`]), the code that feeds a cited line ([`feeding`]), the verifiers' votes
//! ([`vote`]) and the verdict they make ([`judged`]), the merge and the confidence gate
//! ([`dedup`]), the ledger of who was asked what ([`ledger`]), and the vote of a flow's
//! self-consistency passes on what they found ([`consensus`]).
//!
//! The order of the rooms is the order of the data: `finding` → `vote` → `judged` → `dedup` →
//! `ledger`; `grounding` reads a finding and the pack.
//!
//! Architecture invariant: nothing here calls a model or reads a flow. Grounding decides from
//! the pack alone; a verifier's answer arrives as data (a [`vote::Vote`]) and is only counted
//! here, under the threshold the caller passes.

pub mod consensus;
pub mod dedup;
pub mod echo;
pub mod feeding;
pub mod finding;
pub mod grounding;
pub mod judged;
pub mod ledger;
pub mod vote;
