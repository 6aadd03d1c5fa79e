//! The report as data (schema_version 1, DESIGN §6): what report.json holds — the target and
//! its change, the status and why, the findings, residual concerns and what was dropped, the
//! team and its tasks, usage and methodology, and the sections of the optional phases.

use crate::review::finding::{Dropped, Finding, Severity};
use crate::task::{Classification, RejectedTask};
use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

/// Terminal status of a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReviewStatus {
    Completed,
    Partial,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetInfo {
    pub path: String,
    pub head_sha: Option<String>,
    pub file_count: usize,
    #[serde(default)]
    pub skipped: Vec<crate::pack::Skipped>,
    /// Set for a change review (`--diff`): the revisions and the files that changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffInfo>,
}

/// The change a review was scoped to (report.json `target.diff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffInfo {
    /// The range as given ("main..feature").
    pub spec: String,
    pub base: String,
    pub head: String,
    pub files_changed: usize,
    pub files: Vec<DiffFile>,
}

/// One changed file in [`DiffInfo`] (the hunks stay in the store, not in the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffFile {
    pub path: String,
    /// added | modified | deleted | renamed
    pub change: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    pub added: u32,
    pub removed: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TeamMember {
    pub persona: String,
    pub model: String,
    pub tasks: usize,
    /// Why the flow (not the planner) put this member on the team: always on, or the content
    /// signal that called a conditional member. Absent for the planner's choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One task's outcome (DESIGN §6 `tasks[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Scheduling notes (e.g. a planner-requested model replaced by scoring).
    #[serde(default)]
    pub notes: Vec<String>,
    /// A specialist task's files (the first 20; `files_total` says how many, and a larger
    /// task's `files_digest` names the whole list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_total: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_digest: Option<String>,
    /// What the task was asked to look for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mandate: String,
    /// Why it ended: `answered`, `answered on attempt N`, `answered; the output bound cut a
    /// response`, `failed: CLASS`, `circular fix`, `not run`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ended: String,
    /// The earlier review whose recorded result this task took instead of asking a model
    /// (`quorum review --incremental`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// Why an incremental review ran the task or took a recorded result (which file changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    pub llm_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub wall_ms: u64,
}

/// Counts for the methodology section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The review profile (default | chill | assertive); empty in reports from before profiles.
    #[serde(default)]
    pub profile: String,
}

/// The whole report (report.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Change reviews only: findings on lines the change did not touch. They never count for
    /// the exit code and are not in report.sarif.
    #[serde(default)]
    pub pre_existing: Vec<Finding>,
    /// Analyzer leads of high harm (security, correctness) the review's budget left unchecked
    /// by any model: UNVERIFIED, shown apart, not counted for the exit code unless
    /// `--fail-on-unverified`, and not in report.sarif. Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified_leads: Vec<Finding>,
    /// Style and formatting hits of the analyzers (harm `style`), counted per tool and rule
    /// instead of reported as findings (a flow's `lint_findings: true` reports them). Absent
    /// when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lint: Vec<crate::analyzer::LintCount>,
    pub dropped: Vec<Dropped>,
    pub tasks: Vec<TaskReport>,
    pub usage: Usage,
    pub methodology: Methodology,
    /// Which files completed specialist tasks were given (every report), and the flow's fixed
    /// dimensions and source directories (flows that declare them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::flows::coverage::CoverageReport>,
    /// Exhaustive flows: each round's metrics and the decision it ended with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<crate::flows::rounds::RoundMetrics>,
    /// Flows that select their roster (two-tier selection): why each prefilter survivor is on
    /// the team or not (its trigger, its interest-poll answer), and who the prefilter ruled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<crate::flows::selection::SelectionRecord>,
    /// Every model-checked finding: what each verifier was asked (model, prompt digest) and
    /// answered, the threshold and the combined outcome. Absent when no model verified anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verification_ledger: Vec<crate::review::ledger::LedgerEntry>,
    /// `--apply-safe-fixes`: each safe_auto replacement and whether it was applied to the copy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub safe_fixes: Vec<crate::judging::docreview::SafeFix>,
    /// Conformance flows: every acceptance criterion's verdict and the merge gate (also written
    /// alone as merge-readiness.json). Unmet and divergent criteria are not findings: they
    /// gate through `ready`, not through `--fail-on`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformance: Option<crate::judging::conformance::MergeReadiness>,
    /// Finish reviews: every prior finding's ruling, and which findings of this review are
    /// new (they match no prior finding's anchor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjudication: Option<crate::judging::adjudication::Adjudication>,
    /// Panel flows: each judge's scores of the surviving findings by axis, the aggregates, the
    /// judges that gave no score, and the verdict (the meta-judge's, or the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panel: Option<crate::judging::panel::PanelReport>,
    /// The deterministic analyzers of the catalog: each one's name, whether it ran, why not,
    /// and how many hits it gave (its findings credit it as reporter `analyzer:<name>`).
    /// Absent when none was configured or they were turned off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analyzers: Vec<crate::analyzer::AnalyzerRun>,
    /// Memory across reviews: the insights of earlier reviews of this target offered to the
    /// planner, and how many this review leaves for the next. Absent when both are empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insights: Option<InsightsReport>,
    /// `--since REPORT.json`: this review against an earlier one — new, still present,
    /// dismissed, and the earlier findings fixed since. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<SinceReport>,
}

/// report.json `insights`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InsightsReport {
    pub offered: Vec<OfferedInsight>,
    /// Insights distilled from this review's verified findings for later reviews.
    pub recorded: usize,
}

/// One insight an earlier review left, as offered to this review's planner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OfferedInsight {
    pub id: String,
    pub title: String,
    /// The review it was learned in.
    pub from_flow: String,
    /// Its decayed score when it was offered.
    pub score: f64,
}

impl Report {
    /// True when any surviving finding is at or above `threshold` (P0 is the highest).
    pub fn has_findings_at_or_above(&self, threshold: Severity) -> bool {
        self.findings.iter().any(|f| f.severity <= threshold)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The JSON Schema of report.json, generated from these types (so it cannot drift from what
/// the engine writes). Shipped as `tests/schemas/report.schema.json`; the tests check the
/// shipped copy is current and validate real reports against it.
pub fn json_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(Report)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("title".into(), "quorum report.json".into());
        obj.insert(
            "description".into(),
            format!(
                "The report a quorum review writes (schema_version {SCHEMA_VERSION}). Generated \
                 from the report types in quorum-core; do not edit."
            )
            .into(),
        );
    }
    schema
}

/// [`json_schema`] with every object closed (`additionalProperties: false` wherever properties
/// are listed): for a consumer — or a test — that must refuse any field the types do not name.
pub fn strict_json_schema() -> serde_json::Value {
    fn close(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                    map.insert("additionalProperties".into(), false.into());
                }
                map.values_mut().for_each(close);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(close),
            _ => {}
        }
    }
    let mut schema = json_schema();
    close(&mut schema);
    schema
}

/// An earlier finding this review did not report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gone {
    pub id: String,
    pub title: String,
    pub severity: crate::review::finding::Severity,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line_start: Option<u32>,
}

/// report.json `since`: this review against an earlier one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinceReport {
    /// The earlier review's id and the report file it was read from.
    pub flow_id: String,
    pub path: String,
    /// Findings the earlier review did not report.
    pub new: usize,
    /// Findings it reported that are still present (`seen_before`).
    pub still_present: usize,
    /// Findings the author dismissed there (`wont_fix`) whose lines are unchanged: moved to
    /// `dropped` with `removed_by: dismissed`.
    pub dismissed: usize,
    /// Its findings whose evidence is gone from the tree (or whose file is).
    pub fixed: Vec<Gone>,
    /// Its findings not reported this time although their evidence is still there.
    pub not_reported: Vec<Gone>,
}
