//! The stages of a flow: the engine [`Role`] that runs each (which deterministic machinery, in
//! which order) and a [`Stage`] as the flow file writes it.

use serde::{Deserialize, Serialize};

/// The machinery that executes a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Scout,
    Planner,
    Specialist,
    Verifier,
    /// Optional: re-scores each verified finding's severity and confidence without seeing the
    /// finder's; the effective scores are the consultant's from then on. Never drops a finding.
    Consultant,
    Synthesizer,
    /// Optional: a spec's acceptance criteria, when its form gives none.
    Criteria,
    /// Optional: each criterion judged met, unmet or divergent against the target.
    Conformance,
    /// Optional (finish review): each finding of a prior review ruled fixed, still present,
    /// or — when the author disputes it — disputed accepted or rejected, against the target.
    Adjudicator,
    /// Optional: the judge panel scores the surviving findings on the flow's axes (one blind
    /// call per judge), the scores are aggregated in Rust, and a meta-judge gives the verdict.
    /// Never fails the review: a dead panel is reported incomplete.
    Panel,
}

impl Role {
    /// The roles every flow has, in the order they run.
    pub const ALL: [Role; 5] = [
        Role::Scout,
        Role::Planner,
        Role::Specialist,
        Role::Verifier,
        Role::Synthesizer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Scout => "scout",
            Role::Planner => "planner",
            Role::Specialist => "specialist",
            Role::Verifier => "verifier",
            Role::Consultant => "consultant",
            Role::Synthesizer => "synthesizer",
            Role::Criteria => "criteria",
            Role::Conformance => "conformance",
            Role::Adjudicator => "adjudicator",
            Role::Panel => "panel",
        }
    }
}

/// One stage of the DAG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub id: String,
    pub role: Role,
    #[serde(default)]
    pub needs: Vec<String>,
    /// Instructions for the judgment node (system prompt body). Required for every role but
    /// specialist, whose instructions come from its persona.
    #[serde(default)]
    pub instructions: String,
    /// Tools the stage may grant (specialists); the task's tools are intersected with these.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Stage-level concurrency override.
    #[serde(default)]
    pub max_concurrent: Option<usize>,
}
