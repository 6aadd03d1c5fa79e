//! Tasks the planner generates, and the scout's classification they are planned from.

use serde::{Deserialize, Serialize};

/// The scout's one LLM judgment about the target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Classification {
    /// software | legal | financial | scientific | documentation | mixed
    pub domain: String,
    #[serde(default)]
    pub languages: Vec<String>,
    #[serde(default)]
    pub frameworks: Vec<String>,
    #[serde(default)]
    pub content_types: Vec<String>,
    #[serde(default)]
    pub review_focus: Vec<String>,
}

pub const DOMAINS: [&str; 6] = [
    "software",
    "legal",
    "financial",
    "scientific",
    "documentation",
    "mixed",
];

/// One specialist task, validated against the pack and the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub persona: String,
    /// Pack-relative paths, each present in the pack.
    pub files: Vec<String>,
    pub mandate: String,
    /// The tools this task may call: the intersection of what the planner asked for, the persona
    /// allows and the flow stage allows. Content under review can never widen it.
    pub tools: Vec<String>,
    /// What the verifier should check, as the planner phrased it (may be empty).
    #[serde(default)]
    pub verification: String,
    /// Model requested by the planner, if any; otherwise the run's default.
    #[serde(default)]
    pub model: Option<String>,
    /// The flow dimension the planner (or the engine) filed this task under, if any; a task
    /// without one counts for every dimension that lists its persona.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<String>,
    /// Why the engine, not the planner, put this task in the plan (a flow's coverage or team
    /// rule); absent for the planner's own tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// A narrow probe (a flow's `probes:`): one yes/no question about the lines around one
    /// match, asked in one short call without tools, instead of an open review of the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Box<Probe>>,
    /// One of a flow's self-consistency passes (`consistency:`): the same task asked again
    /// with its files and hunks in another order; what the passes found is voted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
}

impl Task {
    /// A task of `persona` on `files` with `mandate` and nothing else: no tools, no checker
    /// hint, no model, dimension, origin, probe or pass (the engine and tests set what they need).
    pub fn new(id: &str, persona: &str, files: &[&str], mandate: &str) -> Task {
        Task {
            id: id.into(),
            persona: persona.into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            mandate: mandate.into(),
            tools: Vec::new(),
            verification: String::new(),
            model: None,
            dimension: None,
            origin: None,
            probe: None,
            pass: None,
        }
    }
}

/// Which finder pass a task is, of the planned task it repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pass {
    /// The planned task's id (pass 1 keeps it; pass k is `{of}.p{k}`).
    pub of: String,
    /// 1-based.
    pub number: u32,
    /// How many passes the task has.
    pub passes: u32,
    /// Passes that must find an anchor for it to be kept.
    pub min_votes: u32,
    /// The sampling temperature of this pass's calls (the flow's `consistency.temperature`).
    pub temperature: f32,
}

/// What a probe task asks, and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// `heuristic/probe-id`.
    pub rule: String,
    pub question: String,
    pub title: String,
    /// P0..P3.
    pub severity: String,
    pub category: String,
    pub file: String,
    /// The line the pattern matched, and the excerpt shown around it (inclusive).
    pub line: u32,
    pub start: u32,
    pub end: u32,
}

/// A task the planner proposed that validation refused, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RejectedTask {
    pub id: String,
    pub persona: String,
    pub reason: String,
}
