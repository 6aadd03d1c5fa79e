//! A reported finding after verification: the verdict (grounding's or the verifiers'), why,
//! the verifiers' ballot and the consultant's re-score — what dedup, the gate and the
//! verification ledger read.

use crate::review::finding::{Reported, Rescored, Verdict};
use crate::review::vote::Ballot;
use serde::{Deserialize, Serialize};

/// A reported finding after verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub reported: Reported,
    pub verdict: Verdict,
    /// Why the verdict: a grounding failure ("evidence not found near lines 10-14") or the model's reason.
    pub reason: String,
    /// True when the verdict came from deterministic grounding alone, without a model call.
    pub deterministic: bool,
    /// What the engine changed or could not do, for the reader (corrected lines, why a
    /// verification did not run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The verifiers' votes when a model checked it (absent when grounding alone decided or no
    /// check ran); the verification ledger of the report is built from these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ballot: Option<Ballot>,
    /// Set when the flow's confidence consultant re-scored it: `reported.finding` then carries
    /// the consultant's severity and confidence, this the finder's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescored: Option<Rescored>,
}

/// The consultant's record for findings merged into one: the best report's, else the first
/// re-scored member's.
pub fn rescored_of(best: &Judged, members: &[Judged]) -> Option<Rescored> {
    best.rescored
        .clone()
        .or_else(|| members.iter().find_map(|m| m.rescored.clone()))
}
