//! gl-code-quality-report.json: GitLab's Code Quality report (the subset of the Code Climate
//! issue format that GitLab reads), so `artifacts:reports:codequality` shows findings in the
//! merge-request widget and diff.
//!
//! The file is a JSON array with one object per surviving finding that names a file:
//! `description`, `check_name`, `fingerprint`, `severity`, `location.path`,
//! `location.lines.begin` (and `end`). Decisions, each for a reason GitLab imposes:
//! - Severity maps P0 → `critical`, P1 → `major`, P2 → `minor`, P3 → `info`. GitLab's scale
//!   also has `blocker`; quorum's top severity is "critical" in report.md too, so `blocker` is
//!   never written.
//! - `fingerprint` is what GitLab compares between the base and head pipelines to tell new
//!   findings from fixed ones, so it is derived from the finding's anchor (stable across runs,
//!   as SARIF's partialFingerprints); should two findings share an anchor, the later ones get an
//!   ordinal mixed in, so fingerprints are unique within a report.
//! - `location.path` is relative to the repository root (see [`super::Report::render`]), with
//!   no leading "./"; `lines.begin` is at least 1 (a finding without lines points at line 1).
//! - Findings without a file are left out: GitLab requires a path, and they stay in full in
//!   report.md and report.json.

use super::common::{anchor_fingerprint, normalize_slashes, one_line, repo_path, rule_id};
use super::Report;
use crate::review::finding::{Finding, Severity};
use serde_json::{json, Value};
use std::collections::HashSet;

impl Report {
    /// The Code Quality report: a JSON array, one issue per located surviving finding.
    pub fn to_gitlab_code_quality(&self, repo_prefix: &str) -> Value {
        let root = normalize_slashes(&self.target.path);
        let mut seen: HashSet<String> = HashSet::new();
        let issues: Vec<Value> = self
            // Compared with an earlier review, only what it did not report is posted again.
            .new_findings()
            .filter_map(|f| {
                let path = repo_path(f, &root, repo_prefix)?;
                let fingerprint = unique_fingerprint(f, &mut seen);
                Some(issue(f, &path, fingerprint))
            })
            .collect();
        Value::Array(issues)
    }
}

/// GitLab's scale is info < minor < major < critical < blocker.
pub fn gitlab_severity(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 => "critical",
        Severity::P1 => "major",
        Severity::P2 => "minor",
        Severity::P3 => "info",
    }
}

fn unique_fingerprint(f: &Finding, seen: &mut HashSet<String>) -> String {
    let base = anchor_fingerprint(f);
    let mut print = base.clone();
    let mut n = 1u32;
    while !seen.insert(print.clone()) {
        n += 1;
        print = blake3::hash(format!("{base}#{n}").as_bytes())
            .to_hex()
            .to_string();
    }
    print
}

fn issue(f: &Finding, path: &str, fingerprint: String) -> Value {
    let begin = f.line_start.or(f.line_end).unwrap_or(1).max(1);
    let end = f.line_end.unwrap_or(begin).max(begin);
    let title = one_line(&f.title);
    let title = if title.is_empty() {
        format!("finding {}", one_line(&f.id))
    } else {
        title
    };
    let why = one_line(&f.why_it_matters);
    let description = if why.is_empty() {
        title
    } else {
        format!("{title} — {why}")
    };
    json!({
        "description": description,
        "check_name": rule_id(&f.category),
        "fingerprint": fingerprint,
        "severity": gitlab_severity(f.severity),
        "location": {
            "path": path,
            "lines": { "begin": begin, "end": end },
        },
    })
}
