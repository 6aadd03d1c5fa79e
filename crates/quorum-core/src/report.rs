//! The review report: one data structure (schema_version 1, DESIGN §6) and its renderings —
//! Markdown for people, JSON for scripts, SARIF 2.1.0 for code-scanning tools, and two formats
//! that put findings into merge requests: reviewdog's rdjson ([`rdjson`]) and GitLab's code
//! quality report ([`gitlab`]). [`REPORT_FORMATS`] is the one list of them.

use crate::human::{human_duration, thousands};
use crate::review::finding::{Dropped, Finding, Severity};
use crate::task::{Classification, RejectedTask};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

pub mod gitlab;
pub mod rdjson;

pub const SCHEMA_VERSION: u32 = 1;

/// One report file quorum can write: its name in `--format` and config `formats`, and the file
/// it is written to in the output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportFormat {
    pub name: &'static str,
    pub file_name: &'static str,
}

/// Every report format, in the order they are listed and written.
pub const REPORT_FORMATS: &[ReportFormat] = &[
    ReportFormat {
        name: "md",
        file_name: "report.md",
    },
    ReportFormat {
        name: "json",
        file_name: "report.json",
    },
    ReportFormat {
        name: "sarif",
        file_name: "report.sarif",
    },
    ReportFormat {
        name: "rdjson",
        file_name: "report.rdjson",
    },
    ReportFormat {
        name: "gitlab",
        // GitLab's documented artifact name, so `artifacts:reports:codequality` finds it as-is.
        file_name: "gl-code-quality-report.json",
    },
];

/// The format called `name` ("md", "sarif", "gitlab", ...), or None for an unknown name.
pub fn report_format(name: &str) -> Option<ReportFormat> {
    REPORT_FORMATS.iter().copied().find(|f| f.name == name)
}

/// "md, json, sarif, rdjson, gitlab": for messages that say what is accepted.
pub fn report_format_names() -> String {
    REPORT_FORMATS
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

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
    /// Set for a change review (`--diff`): the revisions and the files that changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffInfo>,
}

/// The change a review was scoped to (report.json `target.diff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffInfo {
    /// The range as given ("main..feature").
    pub spec: String,
    pub base: String,
    pub head: String,
    pub files_changed: usize,
    pub files: Vec<DiffFile>,
}

/// One changed file in [`DiffInfo`] (the hunks stay in the store, not in the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffFile {
    pub path: String,
    /// added | modified | deleted | renamed
    pub change: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    pub added: u32,
    pub removed: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Scheduling notes (e.g. a planner-requested model replaced by scoring).
    #[serde(default)]
    pub notes: Vec<String>,
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
    /// The review profile (default | chill | assertive); empty in reports from before profiles.
    #[serde(default)]
    pub profile: String,
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
    /// Change reviews only: findings on lines the change did not touch. They never count for
    /// the exit code and are not in report.sarif.
    #[serde(default)]
    pub pre_existing: Vec<Finding>,
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
}

/// report.json `insights`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InsightsReport {
    pub offered: Vec<OfferedInsight>,
    /// Insights distilled from this review's verified findings for later reviews.
    pub recorded: usize,
}

/// One insight an earlier review left, as offered to this review's planner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    /// The text of the report file for `format` (a [`ReportFormat::name`]), or None for an
    /// unknown format. `repo_prefix` is the target's directory relative to the root of the
    /// repository it sits in ("" when it is the root or not in a repository): the merge-request
    /// formats name files relative to the repository, the others relative to the target.
    pub fn render(&self, format: &str, repo_prefix: &str) -> Option<String> {
        let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
        Some(match format {
            "md" => self.to_markdown(),
            "json" => self.to_json(),
            "sarif" => pretty(self.to_sarif()),
            "rdjson" => pretty(self.to_rdjson(repo_prefix)),
            "gitlab" => pretty(self.to_gitlab_code_quality(repo_prefix)),
            _ => return None,
        })
    }

    /// report.md: summary, findings by area and severity, action items, methodology.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        md_header(self, &mut out);
        md_summary(self, &mut out);
        md_conformance(self, &mut out);
        md_adjudication(self, &mut out);
        md_panel(self, &mut out);
        md_team_announcement(self, &mut out);
        md_findings(self, &mut out);
        md_residual(self, &mut out);
        md_pre_existing(self, &mut out);
        md_action_items(self, &mut out);
        md_dropped(self, &mut out);
        md_safe_fixes(self, &mut out);
        md_methodology(self, &mut out);
        out
    }

    /// report.sarif: SARIF 2.1.0 — one rule per category, relative URIs, startLine, and
    /// partialFingerprints derived from the anchor.
    ///
    /// GitHub code scanning rejects a whole upload when any result lacks a physical location
    /// ("locationFromSarifResult: expected at least one location"), so findings without a file
    /// are not emitted as results; they are listed under `run.properties.unlocatedFindings`
    /// instead, and stay in full in report.md and report.json.
    pub fn to_sarif(&self) -> serde_json::Value {
        let target_root = normalize_slashes(&self.target.path);
        let located: Vec<(&Finding, String)> = self
            .findings
            .iter()
            .filter_map(|f| {
                let uri = f
                    .file
                    .as_deref()
                    .and_then(|file| relative_uri(file, &target_root))?;
                Some((f, uri))
            })
            .collect();

        // BTreeMap keeps rule order (and so every ruleIndex) independent of finding order.
        let mut rules: BTreeMap<String, RuleAcc> = BTreeMap::new();
        for (f, _) in &located {
            let acc = rules
                .entry(rule_id(&f.category))
                .or_insert_with(|| RuleAcc {
                    categories: BTreeSet::new(),
                    worst: f.severity,
                });
            acc.categories.insert(one_line(&f.category));
            acc.worst = acc.worst.min(f.severity);
        }
        let rule_index: BTreeMap<&str, usize> = rules
            .keys()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();

        let sarif_rules: Vec<Value> = rules.iter().map(|(id, acc)| sarif_rule(id, acc)).collect();
        let results: Vec<Value> = located
            .iter()
            .map(|(f, uri)| {
                let id = rule_id(&f.category);
                let index = rule_index.get(id.as_str()).copied().unwrap_or(0);
                sarif_result(f, uri, id, index)
            })
            .collect();

        let mut driver = Map::new();
        driver.insert("name".into(), json!("quorum"));
        driver.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
        driver.insert("semanticVersion".into(), json!(env!("CARGO_PKG_VERSION")));
        if let Some(uri) = information_uri() {
            driver.insert("informationUri".into(), json!(uri));
        }
        driver.insert("rules".into(), Value::Array(sarif_rules));

        let mut run = Map::new();
        run.insert("tool".into(), json!({ "driver": Value::Object(driver) }));
        run.insert(
            "automationDetails".into(),
            json!({ "id": format!("quorum/{}/{}", id_segment(&self.flow), id_segment(&self.flow_id)) }),
        );
        if let Some(base) = base_file_uri(&target_root) {
            run.insert(
                "originalUriBaseIds".into(),
                json!({ SRCROOT: { "uri": base } }),
            );
        }
        run.insert("invocations".into(), json!([self.sarif_invocation()]));
        run.insert("results".into(), Value::Array(results));
        run.insert("properties".into(), self.sarif_run_properties());

        json!({
            "$schema": SARIF_SCHEMA_URI,
            "version": "2.1.0",
            "runs": [Value::Object(run)],
        })
    }

    fn sarif_invocation(&self) -> Value {
        let mut inv = Map::new();
        inv.insert(
            "executionSuccessful".into(),
            json!(self.status != ReviewStatus::Failed),
        );
        let reason = one_line(&self.status_reason);
        if self.status != ReviewStatus::Completed && !reason.is_empty() {
            let level = if self.status == ReviewStatus::Failed {
                "error"
            } else {
                "warning"
            };
            inv.insert(
                "toolExecutionNotifications".into(),
                json!([{ "level": level, "message": { "text": reason } }]),
            );
        }
        Value::Object(inv)
    }

    fn sarif_run_properties(&self) -> Value {
        let root = normalize_slashes(&self.target.path);
        let unlocated: Vec<Value> = self
            .findings
            .iter()
            .filter(|f| {
                f.file
                    .as_deref()
                    .and_then(|file| relative_uri(file, &root))
                    .is_none()
            })
            .map(|f| {
                json!({
                    "id": f.id,
                    "title": f.title,
                    "severity": f.severity.as_str(),
                    "category": f.category,
                    "symbol": f.symbol,
                    "verdict": f.verdict.as_str(),
                })
            })
            .collect();
        let mut props = Map::new();
        props.insert("flowId".into(), json!(self.flow_id));
        props.insert("flow".into(), json!(self.flow));
        props.insert("status".into(), json!(status_str(self.status)));
        if !self.status_reason.is_empty() {
            props.insert("statusReason".into(), json!(self.status_reason));
        }
        props.insert("startedAt".into(), json!(self.started_at));
        // versionControlProvenance needs a repositoryUri, which a review of a directory does
        // not know; the commit still belongs in the log.
        if let Some(sha) = &self.target.head_sha {
            props.insert("headSha".into(), json!(sha));
        }
        props.insert("fileCount".into(), json!(self.target.file_count));
        props.insert("unlocatedFindings".into(), Value::Array(unlocated));
        Value::Object(props)
    }
}

const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const SRCROOT: &str = "%SRCROOT%";
const FINGERPRINT_KEY: &str = "quorumAnchor/v1";

/// Severities of the findings filed under one rule.
struct RuleAcc {
    /// Category spellings that map to this rule id (usually one).
    categories: BTreeSet<String>,
    worst: Severity,
}

fn information_uri() -> Option<&'static str> {
    [env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_HOMEPAGE")]
        .into_iter()
        .find(|u| !u.trim().is_empty())
}

fn status_str(status: ReviewStatus) -> &'static str {
    match status {
        ReviewStatus::Completed => "completed",
        ReviewStatus::Partial => "partial",
        ReviewStatus::Failed => "failed",
    }
}

fn sarif_level(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 | Severity::P1 => "error",
        Severity::P2 => "warning",
        Severity::P3 => "note",
    }
}

/// GitHub's `security-severity` scale (0-10): critical > 9, high 7-8.9, medium 4-6.9, low < 4.
fn security_severity(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 => "9.5",
        Severity::P1 => "8.0",
        Severity::P2 => "5.5",
        Severity::P3 => "2.0",
    }
}

/// The area a category belongs to: the part before the first '/', or the whole category.
fn area_of(category: &str) -> String {
    let c = category.trim();
    let area = c.split('/').next().unwrap_or("").trim();
    if area.is_empty() {
        "uncategorized".to_string()
    } else {
        one_line(area)
    }
}

/// Rule id from a category: lowercase, only `[a-z0-9/_-]`, no empty path segments.
fn rule_id(category: &str) -> String {
    let segments: Vec<String> = category
        .split(['/', '\\'])
        .filter_map(|seg| {
            let mut s = String::new();
            for c in seg.chars().flat_map(char::to_lowercase) {
                let c = if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '-'
                };
                if c == '-' && (s.is_empty() || s.ends_with('-')) {
                    continue;
                }
                s.push(c);
            }
            let s = s.trim_end_matches('-').to_string();
            (!s.is_empty()).then_some(s)
        })
        .collect();
    if segments.is_empty() {
        "uncategorized".to_string()
    } else {
        segments.join("/")
    }
}

/// A PascalCase rule name from a rule id ("security/sql-injection" -> "SecuritySqlInjection").
fn rule_name(id: &str) -> String {
    id.split(['/', '-', '_'])
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut cs = s.chars();
            match cs.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn sarif_rule(id: &str, acc: &RuleAcc) -> Value {
    let shown = acc
        .categories
        .iter()
        .find(|c| !c.is_empty())
        .cloned()
        .unwrap_or_else(|| id.to_string());
    let area = rule_id(&area_of(id));
    let mut tags: BTreeSet<String> = BTreeSet::new();
    tags.insert("quorum".to_string());
    tags.insert(id.to_string());
    tags.insert(area.clone());
    tags.extend(acc.categories.iter().filter(|c| !c.is_empty()).cloned());
    // GitHub files an alert under "security" (and reads security-severity) only with this tag.
    if area == "security" {
        tags.insert("security".to_string());
    }
    json!({
        "id": id,
        "name": rule_name(id),
        "shortDescription": { "text": format!("quorum: {shown}") },
        "fullDescription": {
            "text": format!(
                "Findings that quorum's specialists reported under the category \"{shown}\" and \
                 that an independent verifier did not reject. Each result carries its own \
                 severity, confidence and verdict."
            )
        },
        "defaultConfiguration": { "level": sarif_level(acc.worst) },
        "properties": {
            "tags": tags.into_iter().collect::<Vec<_>>(),
            "security-severity": security_severity(acc.worst),
        },
    })
}

fn sarif_result(f: &Finding, uri: &str, rule: String, rule_index: usize) -> Value {
    let title = one_line(&f.title);
    let title = if title.is_empty() {
        format!("finding {}", one_line(&f.id))
    } else {
        title
    };
    let why = f.why_it_matters.trim();
    let text = if why.is_empty() {
        title
    } else {
        format!("{title} — {why}")
    };

    let start = f.line_start.or(f.line_end).unwrap_or(1).max(1);
    let mut region = Map::new();
    region.insert("startLine".into(), json!(start));
    if let Some(end) = f.line_end {
        region.insert("endLine".into(), json!(end.max(start)));
    }
    let mut location = Map::new();
    location.insert(
        "physicalLocation".into(),
        json!({
            "artifactLocation": { "uri": uri, "uriBaseId": SRCROOT },
            "region": Value::Object(region),
        }),
    );
    if let Some(sym) = f.symbol.as_deref().map(one_line).filter(|s| !s.is_empty()) {
        location.insert(
            "logicalLocations".into(),
            json!([{ "fullyQualifiedName": sym }]),
        );
    }

    let reporters: BTreeSet<&str> = f.reporters.iter().map(|r| r.persona.as_str()).collect();
    json!({
        "ruleId": rule,
        "ruleIndex": rule_index,
        "level": sarif_level(f.severity),
        "message": { "text": text },
        "locations": [Value::Object(location)],
        "partialFingerprints": { FINGERPRINT_KEY: anchor_fingerprint(f) },
        "properties": {
            "findingId": f.id,
            "severity": f.severity.as_str(),
            "confidence": f.confidence,
            "verdict": f.verdict.as_str(),
            "reporters": reporters.into_iter().collect::<Vec<_>>(),
            "promoted": f.promoted,
            "category": f.category,
        },
    })
}

/// Stable across runs for the same anchor, so code scanning tracks an alert across commits.
fn anchor_fingerprint(f: &Finding) -> String {
    let key = if f.anchor.trim().is_empty() {
        // A finding should always carry an anchor; fall back to what identifies it otherwise.
        format!(
            "{}|{}|{}|{}",
            f.category,
            f.file.as_deref().unwrap_or(""),
            f.symbol.as_deref().unwrap_or(""),
            f.title
        )
    } else {
        f.anchor.clone()
    };
    blake3::hash(key.as_bytes()).to_hex().to_string()
}

fn normalize_slashes(p: &str) -> String {
    p.trim().replace('\\', "/")
}

/// A target-relative, percent-encoded URI for a finding's file, or None when it names nothing.
fn relative_uri(file: &str, target_root: &str) -> Option<String> {
    // ':' is encoded too, so "C:/x" cannot be read as a URI scheme.
    relative_path(file, target_root).map(|rel| percent_encode(&rel, b"/"))
}

/// A finding's file as a '/'-separated path relative to the target root (an absolute path
/// under the root loses the root; "." and empty segments go), or None when it names nothing.
fn relative_path(file: &str, target_root: &str) -> Option<String> {
    let file = normalize_slashes(file);
    let root = target_root.trim_end_matches('/');
    let rel = if !root.is_empty() && file.starts_with(&format!("{root}/")) {
        &file[root.len() + 1..]
    } else {
        file.as_str()
    };
    let segments: Vec<&str> = rel
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.is_empty() {
        return None;
    }
    Some(segments.join("/"))
}

/// `file:///abs/path/` for an absolute target path (POSIX or drive-letter), else None.
fn base_file_uri(target_root: &str) -> Option<String> {
    let root = target_root.trim_end_matches('/');
    let bytes = root.as_bytes();
    let path = if root.starts_with('/') {
        root.to_string()
    } else if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        format!("/{root}")
    } else if target_root.starts_with('/') {
        // The filesystem root itself.
        String::new()
    } else {
        return None;
    };
    Some(format!("file://{}/", percent_encode(&path, b"/:")))
}

/// A finding's file relative to the repository root: `repo_prefix` (the target's directory
/// inside its repository, "" for the root) joined with its target-relative path. None when the
/// finding names no file.
fn repo_path(f: &Finding, target_root: &str, repo_prefix: &str) -> Option<String> {
    let rel = relative_path(f.file.as_deref()?, target_root)?;
    let prefix: Vec<&str> = repo_prefix
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if prefix.is_empty() {
        Some(rel)
    } else {
        Some(format!("{}/{rel}", prefix.join("/")))
    }
}

fn percent_encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// automationDetails.id segments must not add '/' of their own: GitHub reads everything up to
/// the last '/' as the analysis category.
fn id_segment(s: &str) -> String {
    let t: String = s
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if t.is_empty() {
        "unnamed".to_string()
    } else {
        t
    }
}

// ---------------------------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------------------------

/// Collapses whitespace (newlines included) so model text cannot break a heading or a list item.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: one line, with '|' escaped so it cannot end the cell.
fn cell(s: &str) -> String {
    let t = one_line(s).replace('|', "\\|");
    if t.is_empty() {
        "—".to_string()
    } else {
        t
    }
}

fn longest_backtick_run(s: &str) -> usize {
    let mut best = 0;
    let mut cur = 0;
    for c in s.chars() {
        if c == '`' {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// An inline code span that survives backticks inside `s` (CommonMark: a longer delimiter run,
/// padded with a space when the content touches a backtick).
fn code(s: &str) -> String {
    let s = one_line(s);
    let fence = "`".repeat(longest_backtick_run(&s) + 1);
    if s.starts_with('`') || s.ends_with('`') {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

/// A fenced block whose fence is longer than any backtick run in the content.
fn fenced(s: &str) -> String {
    let fence = "`".repeat((longest_backtick_run(s) + 1).max(3));
    let body = s.trim_end_matches(['\n', '\r']);
    format!("{fence}\n{body}\n{fence}\n")
}

/// `file:start-end`, `file:line`, `file`, with the symbol after it; "not located" when neither.
fn location_text(
    file: Option<&str>,
    start: Option<u32>,
    end: Option<u32>,
    symbol: Option<&str>,
) -> String {
    let file = file.map(str::trim).filter(|f| !f.is_empty());
    let symbol = symbol.map(str::trim).filter(|s| !s.is_empty());
    let mut parts = Vec::new();
    if let Some(file) = file {
        let range = match (start, end) {
            (Some(s), Some(e)) if e > s => format!(":{s}-{e}"),
            (Some(s), _) => format!(":{s}"),
            (None, Some(e)) => format!(":{e}"),
            (None, None) => String::new(),
        };
        parts.push(code(&format!("{file}{range}")));
    }
    if let Some(sym) = symbol {
        parts.push(format!("symbol {}", code(sym)));
    }
    if parts.is_empty() {
        "not located".to_string()
    } else {
        parts.join(" · ")
    }
}

fn list_or_dash(items: &[String]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|s| one_line(s))
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        "—".to_string()
    } else {
        items.join(", ")
    }
}

fn severity_word(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 => "critical",
        Severity::P1 => "high",
        Severity::P2 => "medium",
        Severity::P3 => "low",
    }
}

fn nothing_to_review(r: &Report) -> bool {
    r.target.file_count == 0 && r.findings.is_empty()
}

fn md_header(r: &Report, out: &mut String) {
    let path = one_line(&r.target.path);
    let path = if path.is_empty() {
        "(unnamed target)".to_string()
    } else {
        path
    };
    let _ = writeln!(out, "# quorum review — {path}\n");
    let status = status_str(r.status);
    let reason = one_line(&r.status_reason);
    if r.status == ReviewStatus::Completed {
        let _ = writeln!(out, "**Status:** {status}\n");
    } else if reason.is_empty() {
        let _ = writeln!(out, "**Status:** {status} — no reason was recorded\n");
    } else {
        let _ = writeln!(out, "**Status:** {status} — {reason}\n");
    }
    let mut meta = vec![
        format!("flow {}", code(&r.flow)),
        format!("id {}", code(&r.flow_id)),
    ];
    if !r.started_at.trim().is_empty() {
        meta.push(format!("started {}", one_line(&r.started_at)));
    }
    let _ = writeln!(out, "{}\n", meta.join(" · "));
    if let Some(d) = &r.target.diff {
        let (added, removed) = d.files.iter().fold((0u64, 0u64), |(a, b), f| {
            (a + f.added as u64, b + f.removed as u64)
        });
        let _ = writeln!(
            out,
            "**Change:** {} ({}..{}) — {} files changed, +{added} −{removed}\n",
            code(&d.spec),
            code(short_sha(&d.base)),
            code(short_sha(&d.head)),
            d.files_changed
        );
    }
}

fn short_sha(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

/// Change reviews: what the specialists noticed outside the change, kept apart from it.
fn md_pre_existing(r: &Report, out: &mut String) {
    if r.target.diff.is_none() && r.pre_existing.is_empty() {
        return;
    }
    out.push_str("## Pre-existing findings\n\n");
    if r.pre_existing.is_empty() {
        out.push_str("None.\n\n");
        return;
    }
    out.push_str(
        "On lines the change did not touch: not part of this change, and not counted for the exit \
         code or in report.sarif.\n\n",
    );
    for f in &r.pre_existing {
        let _ = writeln!(
            out,
            "- {} · {} · {} — {} · {}",
            f.id,
            f.severity,
            one_line(&f.title),
            location_text(
                f.file.as_deref(),
                f.line_start,
                f.line_end,
                f.symbol.as_deref()
            ),
            f.verdict
        );
    }
    out.push('\n');
}

fn md_summary(r: &Report, out: &mut String) {
    out.push_str("## Summary\n\n");
    if nothing_to_review(r) {
        out.push_str("Nothing to review: the target holds no files that could be reviewed.\n\n");
    }
    let summary = r.summary.trim();
    if !summary.is_empty() {
        let _ = writeln!(out, "{summary}\n");
    } else if !nothing_to_review(r) {
        out.push_str("No summary was produced.\n\n");
    }
    out.push_str("| Severity | Findings |\n| --- | ---: |\n");
    for sev in Severity::ALL {
        let n = r.findings.iter().filter(|f| f.severity == sev).count();
        let _ = writeln!(out, "| {sev} {} | {n} |", severity_word(sev));
    }
    let _ = writeln!(out, "| **Total** | {} |\n", r.findings.len());
    let _ = writeln!(
        out,
        "{} residual concern(s) below the confidence gate; {} reported finding(s) dropped.\n",
        r.residual_concerns.len(),
        r.dropped.len()
    );
}

fn md_findings(r: &Report, out: &mut String) {
    out.push_str("## Findings\n\n");
    if r.findings.is_empty() {
        if nothing_to_review(r) {
            out.push_str("Nothing to review.\n\n");
        } else {
            out.push_str("No findings survived verification.\n\n");
        }
        return;
    }
    // Areas in order of their most severe finding, then by name; findings within an area by
    // severity, keeping the report's order among equals.
    let mut areas: BTreeMap<String, Vec<&Finding>> = BTreeMap::new();
    for f in &r.findings {
        areas.entry(area_of(&f.category)).or_default().push(f);
    }
    let mut areas: Vec<(String, Vec<&Finding>)> = areas.into_iter().collect();
    for (_, fs) in &mut areas {
        fs.sort_by_key(|f| f.severity);
    }
    areas.sort_by(|a, b| {
        let worst = |fs: &Vec<&Finding>| fs.first().map(|f| f.severity);
        worst(&a.1).cmp(&worst(&b.1)).then_with(|| a.0.cmp(&b.0))
    });
    for (area, fs) in areas {
        let _ = writeln!(out, "### {area}\n");
        for f in fs {
            md_finding(f, out);
        }
    }
}

fn md_finding(f: &Finding, out: &mut String) {
    let title = one_line(&f.title);
    let title = if title.is_empty() {
        "(untitled)".to_string()
    } else {
        title
    };
    let _ = writeln!(out, "#### {} · {} · {title}\n", one_line(&f.id), f.severity);
    let _ = writeln!(
        out,
        "- **Where:** {}",
        location_text(
            f.file.as_deref(),
            f.line_start,
            f.line_end,
            f.symbol.as_deref()
        )
    );
    let _ = writeln!(out, "- **Category:** {}", one_line(&f.category));
    let promoted = if f.promoted {
        " (promoted: below the confidence gate, corroborated by another reporter)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "- **Verdict:** {} · **Confidence:** {:.2}{promoted}",
        f.verdict, f.confidence
    );
    if let Some(r) = &f.rescored {
        let _ = writeln!(
            out,
            "- **Re-scored** by the confidence consultant ({}): the finder said {} at {:.2}",
            one_line(&r.model),
            r.original_severity,
            r.original_confidence
        );
    }
    if f.fresh_eyes {
        out.push_str(
            "- **Fresh eyes:** only the lane that saw the material, not the plan, found it\n",
        );
    }
    let reporters: Vec<String> = f
        .reporters
        .iter()
        .map(|rep| {
            let mut who = one_line(&rep.persona);
            let detail: Vec<String> = [&rep.model, &rep.node]
                .into_iter()
                .map(|s| one_line(s))
                .filter(|s| !s.is_empty())
                .collect();
            if !detail.is_empty() {
                let _ = write!(who, " ({})", detail.join(", "));
            }
            who
        })
        .collect();
    for note in &f.notes {
        let _ = writeln!(out, "- **Note:** {}", one_line(note));
    }
    if let Some(class) = f.routing.autofix_class {
        let owner = f
            .routing
            .owner
            .as_deref()
            .map(|o| format!(" → {}", one_line(o)))
            .unwrap_or_default();
        let _ = writeln!(out, "- **Route:** {}{owner}", class.as_str());
    }
    let _ = writeln!(out, "- **Reported by:** {}\n", list_or_dash(&reporters));
    if !f.evidence.trim().is_empty() {
        out.push_str("**Evidence**\n\n");
        out.push_str(&fenced(&f.evidence));
        out.push('\n');
    }
    let why = f.why_it_matters.trim();
    if !why.is_empty() {
        let _ = writeln!(out, "**Why it matters:** {why}\n");
    }
    let fix = f.suggested_fix.trim();
    if !fix.is_empty() {
        let _ = writeln!(out, "**Suggested fix:** {fix}\n");
    }
}

fn md_residual(r: &Report, out: &mut String) {
    out.push_str("## Residual concerns\n\n");
    if r.residual_concerns.is_empty() {
        out.push_str("None.\n\n");
        return;
    }
    let _ = writeln!(
        out,
        "Below the confidence gate ({:.2}) and not corroborated by a second reporter: worth a look, \
         not established.\n",
        r.methodology.confidence_gate
    );
    for f in &r.residual_concerns {
        let who: Vec<String> = f
            .reporters
            .iter()
            .map(|rep| one_line(&rep.persona))
            .collect();
        let _ = writeln!(
            out,
            "- {} · {} — {} · confidence {:.2} · {}",
            f.severity,
            one_line(&f.title),
            location_text(
                f.file.as_deref(),
                f.line_start,
                f.line_end,
                f.symbol.as_deref()
            ),
            f.confidence,
            list_or_dash(&who)
        );
    }
    out.push('\n');
}

fn md_action_items(r: &Report, out: &mut String) {
    out.push_str("## Action items\n\n");
    let items: Vec<String> = r
        .action_items
        .iter()
        .map(|s| one_line(s))
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        out.push_str("None.\n\n");
        return;
    }
    for (i, item) in items.iter().enumerate() {
        let _ = writeln!(out, "{}. {item}", i + 1);
    }
    out.push('\n');
}

fn md_dropped(r: &Report, out: &mut String) {
    out.push_str("## Dropped\n\n");
    if r.dropped.is_empty() {
        out.push_str("Nothing was dropped.\n\n");
        return;
    }
    out.push_str("| Title | File | Verdict | Reason |\n| --- | --- | --- | --- |\n");
    for d in &r.dropped {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            cell(&d.title),
            cell(d.file.as_deref().unwrap_or("")),
            d.verdict.map(|v| v.as_str()).unwrap_or("—"),
            cell(&d.reason)
        );
    }
    out.push('\n');
}

/// When the flow, not only the planner, chose the team, say who reviewed and why up front.
fn md_team_announcement(r: &Report, out: &mut String) {
    if !r.team.iter().any(|m| m.reason.is_some()) {
        return;
    }
    out.push_str("## Review team\n\n");
    let mut seen = std::collections::BTreeSet::new();
    for m in &r.team {
        if seen.insert(m.persona.as_str()) {
            let why = m.reason.as_deref().unwrap_or("chosen by the planner");
            let _ = writeln!(out, "- **{}** — {}", one_line(&m.persona), one_line(why));
        }
    }
    out.push('\n');
}

fn md_conformance(r: &Report, out: &mut String) {
    let Some(c) = &r.conformance else {
        return;
    };
    let (met, unmet, divergent) = c.counts();
    let _ = writeln!(
        out,
        "## Conformance\n\nMerge gate: **{}** — {met} met, {unmet} unmet, {divergent} divergent of {} criteria from {} ({} extraction).\n",
        if c.ready { "ready" } else { "not ready" },
        c.criteria.len(),
        one_line(&c.spec),
        c.extraction
    );
    if !c.note.is_empty() {
        let _ = writeln!(out, "Note: {}\n", one_line(&c.note));
    }
    if c.criteria.is_empty() {
        return;
    }
    out.push_str("| Criterion | Status | Evidence | Reason |\n| --- | --- | --- | --- |\n");
    for k in &c.criteria {
        let evidence: Vec<String> = k
            .evidence
            .iter()
            .map(|e| match (e.line_start, e.line_end) {
                (Some(a), Some(b)) if a != b => format!("{}:{a}-{b}", e.file),
                (Some(a), _) => format!("{}:{a}", e.file),
                _ => e.file.clone(),
            })
            .collect();
        let _ = writeln!(
            out,
            "| {} {} | {} | {} | {} |",
            cell(&k.id),
            cell(&k.text),
            k.status.as_str(),
            cell(&evidence.join(", ")),
            cell(&k.reason)
        );
    }
    out.push('\n');
}

/// The judge panel: one row per axis, then the judges that gave no score.
fn md_panel(r: &Report, out: &mut String) {
    let Some(p) = &r.panel else {
        return;
    };
    out.push_str("## Judge panel\n\n");
    match (p.verdict, p.overall) {
        (Some(v), Some(o)) => {
            let by = match p.verdict_by {
                Some(crate::judging::panel::VerdictBy::MetaJudge) => "the meta-judge",
                _ => "rule",
            };
            let _ = writeln!(
                out,
                "Verdict: **{}** (by {by}), overall {o} of 10. {}\n",
                v.as_str(),
                one_line(&p.summary)
            );
        }
        _ => {
            let _ = writeln!(out, "No verdict: {}.\n", one_line(&p.note));
        }
    }
    if !p.axes.is_empty() {
        out.push_str("| Axis | Mean | Min | Max | Spread | Judges | Disagreement |\n| --- | --- | --- | --- | --- | --- | --- |\n");
        for a in &p.axes {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                cell(&a.axis),
                a.mean,
                a.min,
                a.max,
                a.spread,
                a.scores.len(),
                if a.disagreement { "yes" } else { "no" }
            );
        }
        out.push('\n');
    }
    if !p.failed.is_empty() {
        let _ = writeln!(
            out,
            "Not counted (gave no score): {}\n",
            p.failed
                .iter()
                .map(|f| format!("{} ({})", f.judge, one_line(&f.error)))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}

fn md_adjudication(r: &Report, out: &mut String) {
    let Some(a) = &r.adjudication else {
        return;
    };
    let s = &a.summary;
    let _ = writeln!(
        out,
        "## Finish review\n\nPrior review {}: {} fixed, {} still present, {} disputed and accepted, {} disputed and rejected of {} findings; {} new findings.\n",
        one_line(&a.prior),
        s.fixed,
        s.still_present,
        s.disputed_accepted,
        s.disputed_rejected,
        a.findings.len(),
        s.new
    );
    if s.not_judged > 0 {
        let _ = writeln!(
            out,
            "Note: {} prior findings could not be adjudicated and count as still present.\n",
            s.not_judged
        );
    }
    if !a.findings.is_empty() {
        out.push_str("| Prior finding | Severity | Disposition | Status | Evidence | Reason |\n| --- | --- | --- | --- | --- | --- |\n");
        for f in &a.findings {
            let evidence: Vec<String> = f
                .evidence
                .iter()
                .map(|e| match (e.line_start, e.line_end) {
                    (Some(x), Some(y)) if x != y => format!("{}:{x}-{y}", e.file),
                    (Some(x), _) => format!("{}:{x}", e.file),
                    _ => e.file.clone(),
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} {} | {} | {} | {} | {} | {} |",
                cell(&f.id),
                cell(&f.title),
                f.severity.as_str(),
                f.disposition.map(|d| d.as_str()).unwrap_or("-"),
                f.status.as_str(),
                cell(&evidence.join(", ")),
                cell(&f.reason)
            );
        }
        out.push('\n');
    }
    if !a.new_findings.is_empty() {
        let _ = writeln!(
            out,
            "New findings (no prior finding at their anchor): {}\n",
            a.new_findings.join(", ")
        );
    }
}

fn md_safe_fixes(r: &Report, out: &mut String) {
    if r.safe_fixes.is_empty() {
        return;
    }
    let applied = r.safe_fixes.iter().filter(|f| f.applied).count();
    let _ = writeln!(
        out,
        "## Safe fixes\n\n{applied} of {} safe_auto fixes were applied to the copy (the target was not changed).\n",
        r.safe_fixes.len()
    );
    out.push_str("| Finding | File | Old | New | Applied |\n| --- | --- | --- | --- | --- |\n");
    for f in &r.safe_fixes {
        let applied = if f.applied {
            "yes".to_string()
        } else {
            format!("no: {}", f.note)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&f.finding),
            cell(&f.file),
            cell(&f.old),
            cell(&f.new),
            cell(&applied)
        );
    }
    out.push('\n');
}

fn md_rounds(rounds: &[crate::flows::rounds::RoundMetrics], out: &mut String) {
    if rounds.is_empty() {
        return;
    }
    out.push_str("### Rounds\n\n");
    out.push_str(
        "| Round | Persona | Tasks | Completed | Files | Findings | New | Previous total | Tokens in/out | Decision | Next files chosen by |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n",
    );
    for m in rounds {
        let chosen = match (m.selected_by.as_str(), m.selector.as_str()) {
            ("", _) => "—".to_string(),
            (by, "") => by.to_string(),
            (by, note) => format!("{by}: {note}"),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} |",
            m.round,
            cell(&m.persona),
            m.tasks,
            m.completed,
            m.files,
            m.findings,
            m.new_findings,
            m.previous_total,
            m.tokens_in,
            m.tokens_out,
            cell(&m.decision),
            cell(&chosen)
        );
    }
    out.push('\n');
}

fn md_selection(sel: &crate::flows::selection::SelectionRecord, out: &mut String) {
    use crate::flows::selection::PollOutcome;
    out.push_str("### Selection\n\n");
    out.push_str("| Persona | Prefilter | Poll | On the team | Its answer |\n| --- | --- | --- | --- | --- |\n");
    for d in &sel.decisions {
        let poll = match d.poll {
            PollOutcome::Floor => "not polled (named by the flow)",
            PollOutcome::NotPolled => "not polled",
            PollOutcome::Interested => "interested",
            PollOutcome::Declined => "declined",
            PollOutcome::Failed => "failed (kept: fails open)",
            PollOutcome::NoModel => "no model (kept: fails open)",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {poll} | {} | {} |",
            cell(&d.persona),
            cell(&d.prefilter),
            if d.poll.keeps() { "yes" } else { "no" },
            cell(d.reason.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(
        out,
        "\n{} of {} candidates selected; {} reviewers ruled out by the prefilter (no trigger in the material).\n",
        sel.selected.len(),
        sel.decisions.len(),
        sel.ruled_out.len()
    );
}

fn md_coverage(c: &crate::flows::coverage::CoverageReport, out: &mut String) {
    out.push_str("### Coverage\n\n");
    if !c.dimensions.is_empty() {
        out.push_str("| Dimension | Required | Tasks | Findings |\n| --- | --- | --- | ---: |\n");
        for d in &c.dimensions {
            let tasks = if d.tasks.is_empty() {
                "**none**".to_string()
            } else {
                d.tasks.join(", ")
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&d.name),
                if d.required { "yes" } else { "no" },
                cell(&tasks),
                d.findings
            );
        }
        out.push('\n');
    }
    let uncovered: Vec<&str> = c
        .directories
        .iter()
        .filter(|d| d.tasks.is_empty())
        .map(|d| d.directory.as_str())
        .collect();
    if !c.directories.is_empty() {
        let _ = writeln!(
            out,
            "- **Source directories:** {} of {} covered{}",
            c.directories.len() - uncovered.len(),
            c.directories.len(),
            if uncovered.is_empty() {
                String::new()
            } else {
                format!(" (not covered: {})", uncovered.join(", "))
            }
        );
    }
    if c.files_total > 0 {
        let _ = writeln!(
            out,
            "- **Coverage mode:** {}{}",
            c.mode.as_str(),
            match c.mode {
                crate::flows::flow::CoverageMode::Full =>
                    " (every included file was given to some task)",
                crate::flows::flow::CoverageMode::Sampled => " (the planner's choice of files)",
            }
        );
        let _ = writeln!(
            out,
            "- **Files reviewed:** {} of {} (a file counts when a specialist task that completed was given it)",
            c.files_reviewed, c.files_total
        );
        if !c.by_persona.is_empty() {
            let per: Vec<String> = c
                .by_persona
                .iter()
                .map(|(p, n)| format!("{} {n}", cell(p)))
                .collect();
            let _ = writeln!(out, "- **Files by persona:** {}", per.join(", "));
        }
        if c.never_reviewed_count > 0 {
            let listed: Vec<String> = c.never_reviewed.iter().map(|p| code(p)).collect();
            let more = c
                .never_reviewed_count
                .saturating_sub(c.never_reviewed.len());
            let _ = writeln!(
                out,
                "- **Never reviewed ({}):** {}{}",
                c.never_reviewed_count,
                listed.join(", "),
                if more > 0 {
                    format!(" and {more} more (report.json counts them)")
                } else {
                    String::new()
                }
            );
        }
    }
    for a in &c.added {
        let _ = writeln!(
            out,
            "- Added task {} ({}): {}",
            code(&a.task),
            cell(&a.persona),
            one_line(&a.reason)
        );
    }
    out.push('\n');
}

/// The ledger in brief: how many findings were model-checked by how many verifiers, and the
/// split decisions (verifiers that disagreed) with each vote; the whole ledger is in report.json.
fn md_ledger(ledger: &[crate::review::ledger::LedgerEntry], out: &mut String) {
    let Some(first) = ledger.first() else {
        return;
    };
    let most = ledger.iter().map(|e| e.votes.len()).max().unwrap_or(0);
    let split: Vec<&crate::review::ledger::LedgerEntry> = ledger
        .iter()
        .filter(|e| e.votes.windows(2).any(|w| w[0].verdict != w[1].verdict))
        .collect();
    let _ = writeln!(
        out,
        "- **Cross-validation:** {} findings model-checked, up to {most} verifier{} each, {} \
         threshold; {} split decision{}. Every vote is in report.json `verification_ledger`.",
        ledger.len(),
        if most == 1 { "" } else { "s" },
        code(first.threshold.as_str()),
        split.len(),
        if split.len() == 1 { "" } else { "s" }
    );
    const SHOWN_SPLIT: usize = 10;
    for e in split.iter().take(SHOWN_SPLIT) {
        let votes: Vec<&str> = e
            .votes
            .iter()
            .map(|v| v.verdict.map(|v| v.as_str()).unwrap_or("no vote"))
            .collect();
        let _ = writeln!(
            out,
            "  - {} {}: {} → {}",
            code(e.finding.as_deref().unwrap_or("dropped")),
            one_line(&e.title),
            votes.join(", "),
            e.outcome
        );
    }
    if split.len() > SHOWN_SPLIT {
        let _ = writeln!(out, "  - … and {} more", split.len() - SHOWN_SPLIT);
    }
}

fn md_methodology(r: &Report, out: &mut String) {
    out.push_str("## Methodology\n\n");

    out.push_str("### Target\n\n");
    let _ = writeln!(out, "- **Path:** {}", code(&r.target.path));
    let head = r
        .target
        .head_sha
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(code)
        .unwrap_or_else(|| "unknown (not a git checkout)".to_string());
    let _ = writeln!(out, "- **Head:** {head}");
    let _ = writeln!(out, "- **Files reviewed:** {}", r.target.file_count);
    let _ = writeln!(out, "- **Files skipped:** {}", r.target.skipped.len());
    const SHOWN_SKIPPED: usize = 20;
    for s in r.target.skipped.iter().take(SHOWN_SKIPPED) {
        let _ = writeln!(out, "  - {} — {}", code(&s.path), one_line(&s.reason));
    }
    if r.target.skipped.len() > SHOWN_SKIPPED {
        let _ = writeln!(
            out,
            "  - … and {} more (see report.json)",
            r.target.skipped.len() - SHOWN_SKIPPED
        );
    }
    out.push('\n');

    let c = &r.classification;
    out.push_str("### Classification\n\n");
    let domain = one_line(&c.domain);
    let _ = writeln!(
        out,
        "- **Domain:** {}",
        if domain.is_empty() { "—" } else { &domain }
    );
    let _ = writeln!(out, "- **Languages:** {}", list_or_dash(&c.languages));
    let _ = writeln!(out, "- **Frameworks:** {}", list_or_dash(&c.frameworks));
    let _ = writeln!(
        out,
        "- **Content types:** {}",
        list_or_dash(&c.content_types)
    );
    let _ = writeln!(
        out,
        "- **Review focus:** {}\n",
        list_or_dash(&c.review_focus)
    );

    if !r.analyzers.is_empty() {
        out.push_str("### Analyzers\n\n");
        for a in &r.analyzers {
            let _ = writeln!(out, "- {}", one_line(&a.describe()));
        }
        out.push('\n');
    }

    if let Some(i) = &r.insights {
        out.push_str("### Memory\n\n");
        if !i.offered.is_empty() {
            let froms: std::collections::BTreeSet<&str> =
                i.offered.iter().map(|o| o.from_flow.as_str()).collect();
            let _ = writeln!(
                out,
                "- The planner was offered {} insights from earlier reviews ({}).",
                i.offered.len(),
                froms.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        let _ = writeln!(
            out,
            "- {} insights from this review's verified findings were kept for the next review.\n",
            i.recorded
        );
    }

    out.push_str("### Team\n\n");
    if r.team.is_empty() {
        out.push_str("No specialists were assigned.\n\n");
    } else {
        let reasons = r.team.iter().any(|m| m.reason.is_some());
        if reasons {
            out.push_str(
                "| Persona | Model | Tasks | Why on the team |\n| --- | --- | ---: | --- |\n",
            );
        } else {
            out.push_str("| Persona | Model | Tasks |\n| --- | --- | ---: |\n");
        }
        for m in &r.team {
            let _ = write!(
                out,
                "| {} | {} | {} |",
                cell(&m.persona),
                cell(&m.model),
                m.tasks
            );
            if reasons {
                let why = m.reason.as_deref().unwrap_or("chosen by the planner");
                let _ = write!(out, " {} |", cell(why));
            }
            out.push('\n');
        }
        out.push('\n');
    }

    // An empty target has nothing to cover: no section rather than an empty one.
    if let Some(c) = r
        .coverage
        .as_ref()
        .filter(|c| c.files_total > 0 || !c.dimensions.is_empty() || !c.directories.is_empty())
    {
        md_coverage(c, out);
    }
    md_rounds(&r.rounds, out);
    if let Some(sel) = &r.selection {
        md_selection(sel, out);
    }

    out.push_str("### Tasks\n\n");
    if r.tasks.is_empty() {
        out.push_str("No tasks ran.\n\n");
    } else {
        out.push_str(
            "| ID | Persona | Status | Attempts | Model | Tokens in / out | Duration | Error |\n\
             | --- | --- | --- | ---: | --- | ---: | ---: | --- |\n",
        );
        for t in &r.tasks {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} / {} | {} | {} |",
                cell(&t.id),
                cell(&t.persona),
                cell(&t.status),
                t.attempts,
                cell(&t.model),
                thousands(t.tokens_in),
                thousands(t.tokens_out),
                human_duration(t.duration_ms),
                cell(t.error_class.as_deref().unwrap_or(""))
            );
        }
        out.push('\n');
    }

    let m = &r.methodology;
    out.push_str("### Counts\n\n");
    out.push_str("| Reported | Dropped | Merged | Residual | Promoted |\n| ---: | ---: | ---: | ---: | ---: |\n");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} |\n",
        m.reported, m.dropped, m.merged, m.residual, m.promoted
    );
    let _ = writeln!(
        out,
        "**Confidence gate:** {:.2} — a finding below it survives only when another persona reports \
         the same anchor (promoted); otherwise it is listed as a residual concern.\n",
        m.confidence_gate
    );
    if !m.profile.is_empty() && m.profile != "default" {
        let _ = writeln!(out, "**Profile:** {}\n", code(&m.profile));
    }

    out.push_str("### Verification\n\n");
    let _ = writeln!(
        out,
        "- **Verifier models:** {}",
        list_or_dash(&m.verifier_models)
    );
    let note = m.verifier_note.trim();
    if !note.is_empty() {
        let _ = writeln!(out, "- {}", one_line(note));
    }
    md_ledger(&r.verification_ledger, out);
    out.push('\n');

    out.push_str("### Rejected tasks\n\n");
    if m.rejected_tasks.is_empty() {
        out.push_str("None.\n\n");
    } else {
        for t in &m.rejected_tasks {
            let _ = writeln!(
                out,
                "- {} ({}): {}",
                code(&t.id),
                one_line(&t.persona),
                one_line(&t.reason)
            );
        }
        out.push('\n');
    }

    let u = &r.usage;
    out.push_str("### Usage\n\n");
    let _ = writeln!(out, "- **LLM calls:** {}", thousands(u.llm_calls));
    let _ = writeln!(out, "- **Tokens in:** {}", thousands(u.tokens_in));
    let _ = writeln!(out, "- **Tokens out:** {}", thousands(u.tokens_out));
    let _ = writeln!(out, "- **Wall time:** {}", human_duration(u.wall_ms));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::Skipped;
    use crate::review::finding::{Reporter, Verdict};

    fn finding(id: &str, sev: Severity, category: &str, file: Option<&str>) -> Finding {
        Finding {
            id: id.to_string(),
            title: format!("title of {id}"),
            severity: sev,
            confidence: 0.8,
            category: category.to_string(),
            file: file.map(str::to_string),
            line_start: Some(10),
            line_end: Some(14),
            symbol: None,
            evidence: format!("evidence of {id}"),
            why_it_matters: format!("why {id} matters"),
            suggested_fix: format!("fix {id}"),
            verdict: Verdict::Confirmed,
            reporters: vec![Reporter {
                persona: "security-auditor".into(),
                model: "model-a".into(),
                node: "node-1".into(),
            }],
            anchor: format!("{}:L10", file.unwrap_or("")),
            promoted: false,
            notes: Vec::new(),
            routing: Default::default(),
            rescored: None,
            fresh_eyes: false,
        }
    }

    fn report() -> Report {
        let mut sym = finding("F3", Severity::P2, "performance", Some("src/cache.rs"));
        sym.symbol = Some("Cache::get".into());
        sym.line_start = None;
        sym.line_end = None;
        sym.promoted = true;
        Report {
            schema_version: SCHEMA_VERSION,
            flow_id: "flow-123".into(),
            flow: "review".into(),
            status: ReviewStatus::Partial,
            status_reason: "2 of 7 tasks failed".into(),
            started_at: "2025-01-01T00:00:00Z".into(),
            target: TargetInfo {
                path: "/srv/my repo".into(),
                head_sha: Some("abc123".into()),
                file_count: 42,
                skipped: vec![Skipped {
                    path: "big.bin".into(),
                    reason: "binary".into(),
                }],
                diff: None,
            },
            classification: Classification {
                domain: "software".into(),
                languages: vec!["rust".into()],
                frameworks: vec!["axum".into()],
                content_types: vec![],
                review_focus: vec!["security".into()],
            },
            summary: "Two serious problems.".into(),
            action_items: vec![
                "Parameterise the login query".into(),
                "Add a cache bound".into(),
            ],
            team: vec![TeamMember {
                persona: "security-auditor".into(),
                model: "model-a".into(),
                tasks: 3,
                reason: None,
            }],
            findings: vec![
                finding("F1", Severity::P1, "security/injection", Some("src/db.rs")),
                finding("F2", Severity::P0, "security/auth", Some("src/login.rs")),
                sym,
            ],
            residual_concerns: vec![finding("R1", Severity::P3, "style", Some("src/x.rs"))],
            pre_existing: vec![],
            dropped: vec![Dropped {
                title: "a | b".into(),
                file: Some("src/p|q.rs".into()),
                reason: "evidence not found | at all".into(),
                verdict: Some(Verdict::Hallucinated),
                removed_by: "grounding".into(),
            }],
            tasks: vec![TaskReport {
                id: "t1".into(),
                persona: "security-auditor".into(),
                status: "failed".into(),
                attempts: 3,
                model: "model-a".into(),
                node: "node-1".into(),
                tokens_in: 12_345,
                tokens_out: 678,
                duration_ms: 65_000,
                error_class: Some("timeout".into()),
                error: None,
                recovery: None,
                tool_calls: 0,
                text_tool_calls: 0,
                findings: 0,
                notes: Vec::new(),
            }],
            usage: Usage {
                llm_calls: 9,
                tokens_in: 1_234_567,
                tokens_out: 89_000,
                wall_ms: 3_725_000,
            },
            methodology: Methodology {
                reported: 6,
                dropped: 1,
                merged: 1,
                residual: 1,
                promoted: 1,
                confidence_gate: 0.6,
                verifier_models: vec!["model-b".into()],
                verifier_note: "verifier is a different model family".into(),
                rejected_tasks: vec![RejectedTask {
                    id: "t9".into(),
                    persona: "ghost".into(),
                    reason: "unknown persona".into(),
                }],
                profile: String::new(),
            },
            coverage: None,
            rounds: Vec::new(),
            selection: None,
            verification_ledger: Vec::new(),
            safe_fixes: Vec::new(),
            conformance: None,
            adjudication: None,
            panel: None,
            analyzers: Vec::new(),
            insights: None,
        }
    }

    fn empty_report() -> Report {
        let mut r = report();
        r.status = ReviewStatus::Completed;
        r.status_reason.clear();
        r.target.file_count = 0;
        r.target.skipped.clear();
        r.target.head_sha = None;
        r.summary.clear();
        r.action_items.clear();
        r.team.clear();
        r.findings.clear();
        r.residual_concerns.clear();
        r.dropped.clear();
        r.tasks.clear();
        r.usage = Usage::default();
        r.methodology = Methodology::default();
        r
    }

    #[test]
    fn markdown_has_every_section_in_order() {
        let md = report().to_markdown();
        let sections = [
            "# quorum review — /srv/my repo",
            "## Summary",
            "## Findings",
            "## Residual concerns",
            "## Action items",
            "## Dropped",
            "## Methodology",
            "### Team",
            "### Tasks",
            "### Usage",
        ];
        let mut at = 0;
        for s in sections {
            let pos = md[at..]
                .find(s)
                .unwrap_or_else(|| panic!("{s} missing after {at}:\n{md}"));
            at += pos + s.len();
        }
    }

    #[test]
    fn markdown_status_line_carries_the_reason() {
        let md = report().to_markdown();
        assert!(
            md.contains("**Status:** partial — 2 of 7 tasks failed"),
            "{md}"
        );
        let mut done = report();
        done.status = ReviewStatus::Completed;
        done.status_reason = "ignored".into();
        let md = done.to_markdown();
        assert!(md.contains("**Status:** completed\n"), "{md}");
        assert!(!md.contains("ignored"));
    }

    #[test]
    fn markdown_carries_finding_data() {
        let md = report().to_markdown();
        for needle in [
            "F1 · P1 · title of F1",
            "`src/db.rs:10-14`",
            "symbol `Cache::get`",
            "CONFIRMED",
            "**Confidence:** 0.80",
            "security-auditor (model-a, node-1)",
            "```\nevidence of F1\n```",
            "**Why it matters:** why F1 matters",
            "**Suggested fix:** fix F1",
            "promoted",
            "1. Parameterise the login query",
            "2. Add a cache bound",
            "| P0 critical | 1 |",
            "| **Total** | 3 |",
            "`abc123`",
            "**Files skipped:** 1",
            "12,345 / 678",
            "1 min 05 s",
            "1 h 02 min",
            "1,234,567",
            "`t9` (ghost): unknown persona",
            "model-b",
            "**Confidence gate:** 0.60",
            "R1",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
        }
    }

    #[test]
    fn markdown_groups_by_area_then_severity() {
        let md = report().to_markdown();
        let security = md.find("### security").unwrap();
        let performance = md.find("### performance").unwrap();
        assert!(security < performance, "area with the P0 comes first");
        let f2 = md.find("F2 · P0").unwrap();
        let f1 = md.find("F1 · P1").unwrap();
        assert!(security < f2 && f2 < f1 && f1 < performance);
    }

    #[test]
    fn markdown_escapes_pipes_in_table_cells() {
        let md = report().to_markdown();
        let row = md
            .lines()
            .find(|l| l.contains("HALLUCINATED"))
            .expect("dropped row");
        assert_eq!(
            row,
            "| a \\| b | src/p\\|q.rs | HALLUCINATED | evidence not found \\| at all |"
        );
        // Four columns: five unescaped pipes.
        let unescaped = row.replace("\\|", "").matches('|').count();
        assert_eq!(unescaped, 5);
    }

    #[test]
    fn markdown_fence_outlasts_backticks_in_evidence() {
        let mut r = report();
        r.findings[0].evidence = "let s = \"```\";\n````\nstill evidence".into();
        let md = r.to_markdown();
        let block = "`````\nlet s = \"```\";\n````\nstill evidence\n`````\n";
        assert!(md.contains(block), "{md}");
    }

    #[test]
    fn markdown_inline_code_survives_backticks() {
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x"), "`` `x ``");
        assert_eq!(fenced("plain"), "```\nplain\n```\n");
    }

    #[test]
    fn markdown_newlines_cannot_break_headings() {
        let mut r = report();
        r.findings[0].title = "first\n## injected".into();
        let md = r.to_markdown();
        assert!(!md.lines().any(|l| l == "## injected"), "{md}");
        assert!(md.contains("title of F2"));
    }

    #[test]
    fn empty_report_reads_sensibly() {
        let md = empty_report().to_markdown();
        assert!(md.contains("Nothing to review"), "{md}");
        assert!(md.contains("| **Total** | 0 |"));
        assert!(md.contains("No tasks ran."));
        assert!(md.contains("Nothing was dropped."));
        assert!(md.contains("unknown (not a git checkout)"));
        assert!(md.contains("**Wall time:** 0 ms"));
        assert!(!md.contains("No summary was produced"));
    }

    #[test]
    fn default_like_report_renders_without_panicking() {
        let mut r = empty_report();
        r.target.path.clear();
        r.flow.clear();
        r.flow_id.clear();
        r.findings.push(Finding {
            title: String::new(),
            category: "///".into(),
            file: Some("./".into()),
            line_start: Some(0),
            line_end: Some(0),
            confidence: f64::NAN,
            anchor: String::new(),
            ..finding("", Severity::P3, "", None)
        });
        let md = r.to_markdown();
        assert!(md.contains("(unnamed target)"));
        let sarif = r.to_sarif();
        // "./" names no file, so the finding is listed as unlocated rather than emitted.
        assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 0);
        assert_eq!(
            sarif["runs"][0]["properties"]["unlocatedFindings"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn rule_ids_are_slugs() {
        assert_eq!(rule_id("security/injection"), "security/injection");
        assert_eq!(
            rule_id("Security / SQL Injection!"),
            "security/sql-injection"
        );
        assert_eq!(rule_id("a//b\\c"), "a/b/c");
        assert_eq!(rule_id("  "), "uncategorized");
        assert_eq!(rule_id("données/été"), "donn-es/t");
        assert_eq!(rule_name("security/sql-injection"), "SecuritySqlInjection");
    }

    #[test]
    fn uris_are_relative_and_encoded() {
        assert_eq!(
            relative_uri("src/a b.rs", "/t").as_deref(),
            Some("src/a%20b.rs")
        );
        assert_eq!(
            relative_uri("./src\\x.rs", "/t").as_deref(),
            Some("src/x.rs")
        );
        assert_eq!(
            relative_uri("/t/src/x.rs", "/t").as_deref(),
            Some("src/x.rs")
        );
        assert_eq!(relative_uri("C:/x.rs", "/t").as_deref(), Some("C%3A/x.rs"));
        assert_eq!(relative_uri("é.rs", "/t").as_deref(), Some("%C3%A9.rs"));
        assert_eq!(relative_uri("", "/t"), None);
        assert_eq!(
            base_file_uri("/srv/my repo").as_deref(),
            Some("file:///srv/my%20repo/")
        );
        assert_eq!(base_file_uri("/srv/x/").as_deref(), Some("file:///srv/x/"));
        assert_eq!(
            base_file_uri("C:/work").as_deref(),
            Some("file:///C:/work/")
        );
        assert_eq!(base_file_uri("/").as_deref(), Some("file:///"));
        assert_eq!(base_file_uri("relative/dir"), None);
    }

    #[test]
    fn sarif_levels_and_rules_follow_severity() {
        let sarif = report().to_sarif();
        let run = &sarif["runs"][0];
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["performance", "security/auth", "security/injection"]);
        let auth = &rules[1];
        assert_eq!(auth["defaultConfiguration"]["level"], "error");
        assert_eq!(auth["properties"]["security-severity"], "9.5");
        let tags = auth["properties"]["tags"].as_array().unwrap();
        assert!(tags.contains(&json!("security")));
        let perf = &rules[0];
        assert_eq!(perf["defaultConfiguration"]["level"], "warning");
        assert!(!perf["properties"]["tags"]
            .as_array()
            .unwrap()
            .contains(&json!("security")));
        let results = run["results"].as_array().unwrap();
        assert_eq!(results[0]["level"], "error");
        assert_eq!(results[2]["level"], "warning");
        assert_eq!(
            results[2]["locations"][0]["physicalLocation"]["region"]["startLine"],
            1
        );
        assert_eq!(
            results[2]["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
            "Cache::get"
        );
        assert_eq!(results[2]["properties"]["promoted"], true);
        assert_eq!(run["automationDetails"]["id"], "quorum/review/flow-123");
        assert_eq!(run["invocations"][0]["executionSuccessful"], true);
        assert_eq!(run["properties"]["headSha"], "abc123");
        assert_eq!(
            run["originalUriBaseIds"]["%SRCROOT%"]["uri"],
            "file:///srv/my%20repo/"
        );
    }

    #[test]
    fn every_format_renders_and_unknown_ones_do_not() {
        let r = report();
        let mut files = BTreeSet::new();
        for f in REPORT_FORMATS {
            let body = r
                .render(f.name, "")
                .unwrap_or_else(|| panic!("{} renders", f.name));
            assert!(files.insert(f.file_name), "one file per format");
            if f.name == "md" {
                assert!(body.starts_with("# quorum review"));
            } else {
                serde_json::from_str::<Value>(&body)
                    .unwrap_or_else(|e| panic!("{} is JSON: {e}", f.name));
            }
        }
        assert_eq!(
            r.render("rdjson", "").unwrap(),
            serde_json::to_string_pretty(&r.to_rdjson("")).unwrap()
        );
        assert!(r.render("html", "").is_none());
        assert!(report_format("MD").is_none(), "names are exact");
        assert_eq!(
            report_format("gitlab").map(|f| f.file_name),
            Some("gl-code-quality-report.json")
        );
        assert_eq!(report_format_names(), "md, json, sarif, rdjson, gitlab");
    }

    #[test]
    fn the_judge_panel_is_a_short_table_and_absent_without_one() {
        use crate::judging::panel::{JudgeFailure, JudgeScore, PanelReport};
        let mut r = report();
        assert!(!r.to_markdown().contains("Judge panel"));
        assert!(
            r.to_json().find("\"panel\"").is_none(),
            "skipped when absent"
        );
        let judge = |name: &str, overall: f64| JudgeScore {
            judge: name.into(),
            axis: "grounding".into(),
            perspective: "skeptic".into(),
            model: "m".into(),
            overall,
            reason: "r".into(),
            items: Vec::new(),
        };
        r.panel = Some(PanelReport::build(
            &["grounding".to_string()],
            3,
            &[judge("a", 2.0), judge("b", 9.0)],
            vec![JudgeFailure {
                judge: "c".into(),
                error: "malformed output | prose".into(),
            }],
            None,
        ));
        let md = r.to_markdown();
        assert!(md.contains("## Judge panel"), "{md}");
        assert!(
            md.contains("Verdict: **revise** (by rule), overall 5.5 of 10."),
            "{md}"
        );
        assert!(
            md.contains("| grounding | 5.5 | 2 | 9 | 7 | 2 | yes |"),
            "{md}"
        );
        assert!(
            md.contains("Not counted (gave no score): c (malformed output | prose)"),
            "{md}"
        );
        let v: Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["panel"]["verdict_by"], "rule");
        assert_eq!(v["panel"]["axes"][0]["spread"], 7.0);
        assert_eq!(v["panel"]["failed"][0]["judge"], "c");
    }

    #[test]
    fn sarif_marks_failed_runs_unsuccessful() {
        let mut r = report();
        r.status = ReviewStatus::Failed;
        r.status_reason = "planner returned nothing usable".into();
        let sarif = r.to_sarif();
        let inv = &sarif["runs"][0]["invocations"][0];
        assert_eq!(inv["executionSuccessful"], false);
        assert_eq!(inv["toolExecutionNotifications"][0]["level"], "error");
    }
}
