//! The review report: one data structure (schema_version 1, DESIGN §6) and three renderings —
//! Markdown for people, JSON for scripts, SARIF 2.1.0 for code-scanning tools.

use crate::finding::{Dropped, Finding, Severity};
use crate::task::{Classification, RejectedTask};
use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

/// Terminal status of a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewStatus {
    Completed,
    Partial,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub path: String,
    pub head_sha: Option<String>,
    pub file_count: usize,
    #[serde(default)]
    pub skipped: Vec<crate::pack::Skipped>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamMember {
    pub persona: String,
    pub model: String,
    pub tasks: usize,
}

/// One task's outcome (DESIGN §6 `tasks[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    pub id: String,
    /// The persona for specialist tasks; the stage name ("scout", "planner", ...) otherwise.
    pub persona: String,
    /// completed | failed | skipped
    pub status: String,
    pub attempts: u32,
    pub model: String,
    pub node: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub duration_ms: u64,
    pub error_class: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// How the output was parsed (clean / extracted / salvaged), when it was JSON.
    #[serde(default)]
    pub recovery: Option<String>,
    #[serde(default)]
    pub tool_calls: u32,
    /// Tool calls the model wrote as JSON text rather than as native tool calls.
    #[serde(default)]
    pub text_tool_calls: u32,
    #[serde(default)]
    pub findings: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub llm_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub wall_ms: u64,
}

/// Counts for the methodology section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Methodology {
    pub reported: usize,
    pub dropped: usize,
    pub merged: usize,
    pub residual: usize,
    pub promoted: usize,
    pub confidence_gate: f64,
    /// Models that verified findings, and whether it was a different family from the finders.
    pub verifier_models: Vec<String>,
    pub verifier_note: String,
    pub rejected_tasks: Vec<RejectedTask>,
}

/// The whole report (report.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub flow_id: String,
    pub flow: String,
    pub status: ReviewStatus,
    /// Why the review is partial or failed; empty when completed.
    #[serde(default)]
    pub status_reason: String,
    pub started_at: String,
    pub target: TargetInfo,
    pub classification: Classification,
    /// Executive summary (from the synthesizer model, or a deterministic fallback).
    pub summary: String,
    /// Action items, most important first.
    #[serde(default)]
    pub action_items: Vec<String>,
    pub team: Vec<TeamMember>,
    pub findings: Vec<Finding>,
    #[serde(default)]
    pub residual_concerns: Vec<Finding>,
    pub dropped: Vec<Dropped>,
    pub tasks: Vec<TaskReport>,
    pub usage: Usage,
    pub methodology: Methodology,
}

impl Report {
    /// True when any surviving finding is at or above `threshold` (P0 is the highest).
    pub fn has_findings_at_or_above(&self, threshold: Severity) -> bool {
        self.findings.iter().any(|f| f.severity <= threshold)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// report.md: summary, findings by area and severity, action items, methodology.
    pub fn to_markdown(&self) -> String {
        todo!("helper: implement")
    }

    /// report.sarif: SARIF 2.1.0 — one rule per category, relative URIs, startLine, and
    /// partialFingerprints derived from the anchor.
    pub fn to_sarif(&self) -> serde_json::Value {
        todo!("helper: implement")
    }
}
