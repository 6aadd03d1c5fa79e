//! Findings as specialists emit them and as the report shows them (what verification made of
//! one is [`crate::review::judged::Judged`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// P0 (critical) .. P3 (minor). Ordered so that `P0 < P1`: "at or above P1" is `sev <= P1`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Severity {
    P0,
    P1,
    P2,
    P3,
}

impl Severity {
    pub const ALL: [Severity; 4] = [Severity::P0, Severity::P1, Severity::P2, Severity::P3];

    /// Lenient parse of what models write: "P1", "p1", "high", "critical", "minor"...
    pub fn parse_lenient(s: &str) -> Option<Severity> {
        let t = s.trim().to_ascii_lowercase();
        Some(match t.as_str() {
            "p0" | "critical" | "blocker" | "sev0" => Severity::P0,
            "p1" | "high" | "major" | "sev1" => Severity::P1,
            "p2" | "medium" | "moderate" | "sev2" => Severity::P2,
            "p3" | "low" | "minor" | "info" | "informational" | "trivial" | "nit" | "sev3" => {
                Severity::P3
            }
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::P0 => "P0",
            Severity::P1 => "P1",
            Severity::P2 => "P2",
            Severity::P3 => "P3",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verifier's judgment of one finding.
///
/// `Unverifiable` is a judgment (the claim cannot be checked from the source); `Unverified`
/// says no judgment was made: the finding was grounded but its verification could not run
/// (the verifier failed, the budget was spent, its answer was unreadable). Unverified findings
/// stay in the report's `findings`, marked, after the checked ones, with the reason in `notes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Confirmed,
    Plausible,
    Hallucinated,
    Unverifiable,
    Unverified,
}

impl Verdict {
    pub fn parse_lenient(s: &str) -> Option<Verdict> {
        let t = s.trim().to_ascii_uppercase();
        Some(match t.as_str() {
            "CONFIRMED" | "CONFIRM" | "TRUE" | "VALID" => Verdict::Confirmed,
            "PLAUSIBLE" | "LIKELY" | "POSSIBLE" => Verdict::Plausible,
            "HALLUCINATED" | "FALSE" | "INVALID" | "REFUTED" => Verdict::Hallucinated,
            "UNVERIFIABLE" | "UNKNOWN" | "UNDECIDABLE" => Verdict::Unverifiable,
            "UNVERIFIED" => Verdict::Unverified,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Confirmed => "CONFIRMED",
            Verdict::Plausible => "PLAUSIBLE",
            Verdict::Hallucinated => "HALLUCINATED",
            Verdict::Unverifiable => "UNVERIFIABLE",
            Verdict::Unverified => "UNVERIFIED",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a document finding may be resolved (seed 003's routing classes).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AutofixClass {
    /// Local and deterministic (a term, a cross-reference): may be applied without asking.
    SafeAuto,
    /// An edit that changes meaning: needs the owner's approval.
    GatedAuto,
    /// A question of judgment for a person.
    Manual,
    /// Information only.
    Advisory,
}

impl AutofixClass {
    pub fn parse_lenient(s: &str) -> Option<AutofixClass> {
        let t = s.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        Some(match t.as_str() {
            "safe_auto" | "safe" | "auto" => AutofixClass::SafeAuto,
            "gated_auto" | "gated" => AutofixClass::GatedAuto,
            "manual" | "human" => AutofixClass::Manual,
            "advisory" | "info" | "fyi" => AutofixClass::Advisory,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AutofixClass::SafeAuto => "safe_auto",
            AutofixClass::GatedAuto => "gated_auto",
            AutofixClass::Manual => "manual",
            AutofixClass::Advisory => "advisory",
        }
    }

    /// How much human attention the class demands; merging keeps the most demanding.
    pub fn caution(self) -> u8 {
        match self {
            AutofixClass::SafeAuto => 0,
            AutofixClass::Advisory => 1,
            AutofixClass::GatedAuto => 2,
            AutofixClass::Manual => 3,
        }
    }
}

/// What a reviewer wants done with the passage a document finding is about. Opposite stances
/// from two reviewers on one section are a contradiction the synthesis surfaces.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Stance {
    Keep,
    Remove,
    Add,
    Change,
}

impl Stance {
    pub fn parse_lenient(s: &str) -> Option<Stance> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "keep" | "retain" | "preserve" => Stance::Keep,
            "remove" | "cut" | "delete" | "drop" => Stance::Remove,
            "add" | "expand" | "extend" => Stance::Add,
            "change" | "revise" | "rewrite" | "fix" => Stance::Change,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stance::Keep => "keep",
            Stance::Remove => "remove",
            Stance::Add => "add",
            Stance::Change => "change",
        }
    }

    /// Stances that cannot both be followed on one passage.
    pub fn opposes(self, other: Stance) -> bool {
        matches!(
            (self, other),
            (Stance::Keep, Stance::Remove)
                | (Stance::Remove, Stance::Keep)
                | (Stance::Add, Stance::Remove)
                | (Stance::Remove, Stance::Add)
        )
    }
}

/// An exact text replacement a finding proposes: `old` must occur in the cited file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TextFix {
    pub old: String,
    pub new: String,
}

/// Optional document-review fields of a finding (all absent in other flows).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Routing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autofix_class: Option<AutofixClass>,
    /// review-fixer | downstream-resolver | human | release (free text, lowercased).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance: Option<Stance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autofix: Option<TextFix>,
}

impl Routing {
    pub fn is_empty(&self) -> bool {
        *self == Routing::default()
    }
}

/// One finding as a specialist reported it, after lenient normalisation of the model's JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawFinding {
    pub title: String,
    pub severity: Severity,
    /// 0.0 ..= 1.0, clamped.
    pub confidence: f64,
    pub category: String,
    pub file: Option<String>,
    pub line_start: Option<u32>,
    pub line_end: Option<u32>,
    pub symbol: Option<String>,
    pub evidence: String,
    pub why_it_matters: String,
    pub suggested_fix: String,
    #[serde(default, flatten)]
    pub routing: Routing,
}

/// Who reported a finding. Several reporters on one anchor corroborate it.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Reporter {
    pub persona: String,
    pub model: String,
    pub node: String,
    /// The review whose recorded result this report was taken from (an incremental review's
    /// reuse); absent when the model was asked in this review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
}

/// A raw finding with its provenance, as it leaves a specialist task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reported {
    pub task_id: String,
    pub reporter: Reporter,
    pub finding: RawFinding,
}

/// What the confidence consultant changed. The finding's severity and confidence are the
/// consultant's; these are the finder's own, kept for the reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rescored {
    pub original_severity: Severity,
    pub original_confidence: f64,
    pub model: String,
    pub reason: String,
}

/// A surviving finding in the report (DESIGN §6 `findings[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    pub confidence: f64,
    pub category: String,
    pub file: Option<String>,
    pub line_start: Option<u32>,
    pub line_end: Option<u32>,
    pub symbol: Option<String>,
    pub evidence: String,
    pub why_it_matters: String,
    pub suggested_fix: String,
    pub verdict: Verdict,
    pub reporters: Vec<Reporter>,
    pub anchor: String,
    /// True when the finding was below the confidence gate and kept only because another persona
    /// reported the same anchor.
    #[serde(default)]
    pub promoted: bool,
    /// What the engine changed or could not do (lines corrected by grounding, a verification
    /// that did not run). Absent from report.json when empty; schema_version 1 readers ignore it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Document-review routing (autofix_class, owner, stance, autofix); absent elsewhere.
    #[serde(default, flatten)]
    pub routing: Routing,
    /// The finder's own severity and confidence when the flow's consultant re-scored the
    /// finding (`severity` and `confidence` above are then the consultant's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescored: Option<Rescored>,
    /// Reported only by the flow's fresh-eyes lane (a specialist that saw the material, not
    /// the plan); absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh_eyes: bool,
    /// Every reporter's result was taken from this earlier review's record (an incremental
    /// review's reuse); the finding was grounded and verified again against today's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
    /// `quorum review --since REPORT.json`: the earlier review and its id for this finding
    /// (`FLOW_ID F003`), which reported it already; a CI bot does not post it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_before: Option<String>,
    /// The CWE of the finding's weakness class (`config/weaknesses.yaml`: from an analyzer's
    /// rule, else the words of its category and title); absent when it names no known class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwe: Option<u32>,
}

/// A finding that did not survive (DESIGN §6 `dropped[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Dropped {
    pub title: String,
    pub file: Option<String>,
    pub reason: String,
    pub verdict: Option<Verdict>,
    /// What removed it: `grounding` (deterministic: evidence not in the file, lines out of
    /// range), `prompt_echo` (grounding found it repeating the prompt's format or a persona's
    /// example instead of the material), `consistency` (too few of a flow's self-consistency
    /// passes found it), `verifier` (the model judged it hallucinated),
    /// `profile` (under the severity floor) or `unconfirmed_lead` (an analyzer hit no model
    /// checked); empty in reports from before this field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub removed_by: String,
}

impl Dropped {
    /// Removed by deterministic grounding rather than by a model's judgment.
    pub fn by_grounding(&self) -> bool {
        self.removed_by == "grounding" || self.removed_by == "prompt_echo"
    }
}

/// How grounding's reason begins when a finding repeats the prompt (a format's placeholder,
/// a persona's example) instead of quoting the material.
pub const ECHO_REASON: &str = "repeats the prompt, not the material: ";

/// The `removed_by` of a hallucinated finding, from how its verdict was reached: `prompt_echo`
/// when grounding found it repeating the prompt, else `grounding` or `verifier`.
pub fn removed_by(deterministic: bool, reason: &str) -> String {
    if deterministic && reason.starts_with(ECHO_REASON) {
        "prompt_echo"
    } else if deterministic && reason.starts_with(crate::review::consensus::OUTVOTED_REASON) {
        "consistency"
    } else if deterministic {
        "grounding"
    } else {
        "verifier"
    }
    .to_string()
}
