//! The deterministic half of the flows that judge rather than only find: a spec's acceptance
//! criteria and their verdicts ([`conformance`]), a finish review's rulings on a prior report
//! ([`adjudication`]), document review's team, synthesis and safe fixes ([`docreview`]), and
//! the judge panel's reading, aggregation and rule verdict ([`panel`]).
//!
//! Architecture invariant: a model's answer is read leniently and never taken on its word — a
//! conformance `met` without a quote grounded in the pack, or whose criterion names code the
//! target lacks, is `unmet`, an adjudicator's ruling
//! that a finding stands needs a grounded quote and its `fixed` does not stand while the
//! evidence is still verbatim, a panel's aggregates and fallback verdict are computed here, and
//! document review's conditional members are called by signals counted in the pack.

pub mod adjudication;
pub mod conformance;
pub mod docreview;
pub mod named_code;
pub mod panel;
