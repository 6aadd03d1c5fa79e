//! Anchors, dedup and the confidence gate: many reports of one problem become one finding.
//!
//! The anchor is `file#symbol` when a symbol is named, else `file:L{bucket}` with 5-line buckets
//! (`(line_start - 1) / 5`). Findings sharing an anchor merge: reporters are unioned, the highest
//! severity and confidence win, the best-verdict (CONFIRMED > PLAUSIBLE > UNVERIFIABLE) report's
//! text is kept. A merged finding below the gate is a residual concern unless two or more distinct
//! personas reported it, in which case it is promoted.

use crate::finding::{Dropped, Finding, Judged, RawFinding};

pub const BUCKET_LINES: u32 = 5;

pub fn anchor(finding: &RawFinding) -> String {
    let _ = finding;
    todo!("helper: implement")
}

/// Result of merging and gating.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gated {
    /// Survivors, sorted by severity then file then line; ids are "F001", "F002", ...
    pub findings: Vec<Finding>,
    /// Below the gate and not corroborated: kept out of `findings`, shown as residual concerns.
    pub residual: Vec<Finding>,
    /// HALLUCINATED findings (with the grounding/verifier reason).
    pub dropped: Vec<Dropped>,
    /// How many reports were merged into another (reports - distinct anchors among survivors).
    pub merged: usize,
}

pub fn merge_and_gate(judged: Vec<Judged>, gate: f64) -> Gated {
    let _ = (judged, gate);
    todo!("helper: implement")
}
