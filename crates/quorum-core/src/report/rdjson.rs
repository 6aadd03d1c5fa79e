//! report.rdjson: the Reviewdog Diagnostic Format (`DiagnosticResult` as JSON, reviewdog's
//! `proto/rdf/reviewdog.proto`), so `reviewdog -f=rdjson` posts findings as merge-request
//! comments on GitHub, GitLab, Gitea and Bitbucket.
//!
//! Shape decisions, each for a reason reviewdog imposes:
//! - Only fields of the proto are written. reviewdog reads the file with protojson (unknown
//!   fields are dropped), so anything else would be silently lost; the test suite checks this
//!   against the vendored schema made strict.
//! - Paths are relative to the repository root (see [`super::Report::render`]): reviewdog joins
//!   a relative path with the directory it runs in, so run it from the repository root.
//! - Ranges are linewise (no columns): per the proto, a range whose start and end both omit the
//!   column covers the start line through the end line, which is what a finding cites. A finding
//!   with a file but no lines gets no range, and reviewdog posts it as a file-level comment.
//! - Findings without a file are left out: reviewdog can only place a diagnostic in a file, and
//!   they stay in full in report.md and report.json.
//! - No `suggestions`: those are literal replacement text for the range, and a finding's
//!   suggested fix is prose, so it goes into the message instead.
//! - Severity: P0 and P1 are ERROR, P2 WARNING, P3 INFO (as SARIF's error/warning/note).

use super::common::{code, information_uri, normalize_slashes, one_line, repo_path, rule_id};
use super::Report;
use crate::review::finding::{Finding, Severity};
use serde_json::{json, Map, Value};

/// The source name reviewdog shows in front of every comment (`**[quorum]**`).
const SOURCE_NAME: &str = "quorum";

impl Report {
    /// report.rdjson: one diagnostic per surviving finding that names a file, in report order.
    pub fn to_rdjson(&self, repo_prefix: &str) -> Value {
        let root = normalize_slashes(&self.target.path);
        let diagnostics: Vec<(Severity, Value)> = self
            // Compared with an earlier review, only what it did not report is posted again.
            .new_findings()
            .filter_map(|f| {
                let path = repo_path(f, &root, repo_prefix)?;
                Some((f.severity, diagnostic(f, &path)))
            })
            .collect();
        // The overall severity is the fallback for a diagnostic without one (each has its own);
        // the worst one present says what the run amounts to.
        let overall = diagnostics
            .iter()
            .map(|(s, _)| *s)
            .min()
            .map(rd_severity)
            .unwrap_or("INFO");
        json!({
            "source": source(),
            "severity": overall,
            "diagnostics": diagnostics.into_iter().map(|(_, d)| d).collect::<Vec<_>>(),
        })
    }
}

fn source() -> Value {
    let mut s = Map::new();
    s.insert("name".into(), json!(SOURCE_NAME));
    if let Some(url) = information_uri() {
        s.insert("url".into(), json!(url));
    }
    Value::Object(s)
}

fn rd_severity(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 | Severity::P1 => "ERROR",
        Severity::P2 => "WARNING",
        Severity::P3 => "INFO",
    }
}

fn diagnostic(f: &Finding, path: &str) -> Value {
    let mut location = Map::new();
    location.insert("path".into(), json!(path));
    if let Some(start) = f.line_start.or(f.line_end).filter(|l| *l >= 1) {
        let end = f.line_end.unwrap_or(start).max(start);
        location.insert(
            "range".into(),
            json!({ "start": { "line": start }, "end": { "line": end } }),
        );
    }
    json!({
        "message": message(f),
        "location": Value::Object(location),
        "severity": rd_severity(f.severity),
        "source": { "name": SOURCE_NAME },
        "code": { "value": rule_id(&f.category) },
    })
}

/// Markdown, as reviewdog posts it after its own severity, source and code prefix.
fn message(f: &Finding) -> String {
    let title = one_line(&f.title);
    let title = if title.is_empty() {
        format!("finding {}", one_line(&f.id))
    } else {
        title
    };
    let confidence = if f.confidence.is_finite() {
        format!(", confidence {:.2}", f.confidence.clamp(0.0, 1.0))
    } else {
        String::new()
    };
    let mut out = format!(
        "**{title}** ({}{confidence}, {})",
        f.severity.as_str(),
        f.verdict.as_str()
    );
    let why = f.why_it_matters.trim();
    if !why.is_empty() {
        out.push_str("\n\n");
        out.push_str(why);
    }
    let fix = f.suggested_fix.trim();
    if !fix.is_empty() {
        out.push_str("\n\n**Suggested fix:** ");
        out.push_str(fix);
    }
    if let Some(sym) = f.symbol.as_deref().map(one_line).filter(|s| !s.is_empty()) {
        out.push_str(&format!("\n\nSymbol: {}", code(&sym)));
    }
    out
}
