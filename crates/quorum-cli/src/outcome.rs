//! What a finished review leaves behind: its report files (written atomically, in the
//! requested formats, plus a conformance review's merge gate), the outcome lines on stdout,
//! and the exit code its status, gate and findings decide.

use crate::exit::ExitCode;
use anyhow::{Context, Result};
use quorum_core::report::{report_format, Report, ReviewStatus, REPORT_FORMATS};
use std::path::Path;

pub fn write_reports(report: &Report, out: &Path, formats: &[String]) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    // The merge-request formats name files relative to the repository, which a review of a
    // subdirectory of a checkout is not the root of.
    let repo_prefix =
        quorum_core::pack::git_work_tree_prefix(Path::new(&report.target.path)).unwrap_or_default();
    for f in formats {
        let Some(format) = report_format(f) else {
            continue;
        };
        let Some(body) = report.render(format.name, &repo_prefix) else {
            continue;
        };
        let name = format.file_name;
        write_atomically(out, name, &body)?;
    }
    // A conformance review's gate is its own file whatever the formats: scripts read it.
    if let Some(c) = &report.conformance {
        write_atomically(out, MERGE_READINESS, &c.to_json())?;
    }
    Ok(())
}

/// Write the reports, or end the command incomplete (exit 3) in one line that still says how
/// the review ended: a full disk under `--out` must not hide the review's own status.
pub fn write_reports_or_say(report: &Report, out: &Path, formats: &[String]) -> Result<()> {
    write_reports(report, out, formats).map_err(|e| {
        let status = format!("{:?}", report.status).to_lowercase();
        let why = if report.status_reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", report.status_reason)
        };
        crate::exit::incomplete(format!(
            "review {status}{why}; its reports could not be written to {}: {}",
            out.display(),
            crate::exit::one_line(&e)
        ))
    })
}

/// The file a conformance review writes its merge gate to, beside the reports.
pub const MERGE_READINESS: &str = "merge-readiness.json";

/// Write-then-rename so a reader never sees half a file.
fn write_atomically(out: &Path, name: &str, body: &str) -> Result<()> {
    let path = out.join(name);
    let tmp = out.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, body).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

pub fn print_outcome(report: &Report, out: &Path, formats: &[String]) {
    let mut counts = [0usize; 4];
    for f in &report.findings {
        counts[f.severity as usize] += 1;
    }
    let status = format!("{:?}", report.status).to_lowercase();
    println!(
        "review {status}: {} findings (P0 {}, P1 {}, P2 {}, P3 {}), {} dropped, {} residual",
        report.findings.len(),
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        report.dropped.len(),
        report.residual_concerns.len()
    );
    if let Some(d) = &report.target.diff {
        println!(
            "change {}: {} files changed; {} pre-existing findings off the change",
            d.spec,
            d.files_changed,
            report.pre_existing.len()
        );
    }
    if let Some(c) = &report.conformance {
        let (met, unmet, divergent) = c.counts();
        println!(
            "conformance: {} ({met} met, {unmet} unmet, {divergent} divergent of {} criteria): {}",
            if c.ready { "ready" } else { "not ready" },
            c.criteria.len(),
            out.join(MERGE_READINESS).display()
        );
    }
    if let Some(a) = &report.adjudication {
        let s = &a.summary;
        println!(
            "finish review: {} fixed, {} still present, {} disputed accepted, {} disputed rejected of {} prior findings; {} new",
            s.fixed,
            s.still_present,
            s.disputed_accepted,
            s.disputed_rejected,
            a.findings.len(),
            s.new
        );
    }
    if !report.status_reason.is_empty() {
        println!("note: {}", report.status_reason);
    }
    // The first written file in REPORT_FORMATS order: report.md when there is one.
    let main = REPORT_FORMATS
        .iter()
        .find(|f| formats.iter().any(|w| w == f.name))
        .map_or("report.md", |f| f.file_name);
    println!("report: {}", out.join(main).display());
}

/// DESIGN §6, with the conformance gate folded into 1: a completed conformance review exits 1
/// when any criterion is not met (or, as any review, a finding is at/above --fail-on), 0 only
/// when every criterion is met; partial or failed is 3 whatever the criteria say. A completed
/// finish review exits 1 when a prior finding still stands (still_present, disputed_rejected)
/// or a new finding is at/above --fail-on; a finding of this review at a prior finding's
/// anchor is that finding again, adjudicated, and is not counted twice. Unverified leads
/// (analyzer hits the budget left unchecked) count only with `unverified` (the user's
/// `--fail-on-unverified`).
pub fn exit_for(
    report: &Report,
    fail_on: Option<quorum_core::review::finding::Severity>,
    unverified: bool,
) -> ExitCode {
    let unverified_at = |t| unverified && report.unverified_leads.iter().any(|f| f.severity <= t);
    match report.status {
        ReviewStatus::Failed | ReviewStatus::Partial => ExitCode::Incomplete,
        ReviewStatus::Completed if report.conformance.as_ref().is_some_and(|c| !c.ready) => {
            ExitCode::Findings
        }
        ReviewStatus::Completed if report.adjudication.is_some() => {
            match (fail_on, &report.adjudication) {
                (Some(t), Some(a)) if a.blocks(&report.findings, t) => ExitCode::Findings,
                _ => ExitCode::Clean,
            }
        }
        ReviewStatus::Completed => match fail_on {
            Some(t) if report.has_findings_at_or_above(t) || unverified_at(t) => ExitCode::Findings,
            _ => ExitCode::Clean,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorum_core::review::finding::{Finding, Severity};

    fn completed_report() -> Report {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "flow_id": "f", "flow": "quick", "status": "completed",
            "status_reason": "", "started_at": "",
            "target": {"path": "/t", "head_sha": null, "file_count": 1},
            "classification": {"domain": "software"}, "summary": "", "action_items": [],
            "team": [], "findings": [], "residual_concerns": [], "pre_existing": [],
            "dropped": [], "tasks": [],
            "usage": {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0, "wall_ms": 0},
            "methodology": {"reported": 0, "dropped": 0, "merged": 0, "residual": 0,
                "promoted": 0, "confidence_gate": 0.5, "verifier_models": [],
                "verifier_note": "", "rejected_tasks": [], "profile": "default"}
        }))
        .expect("a minimal report")
    }

    fn unverified_lead(severity: Severity) -> Finding {
        serde_json::from_value(serde_json::json!({
            "id": "U001", "title": "B608: SQL built from strings", "severity": severity,
            "confidence": 0.8, "category": "security/B608", "file": "app.py",
            "line_start": 3, "line_end": 3, "evidence": "", "why_it_matters": "",
            "suggested_fix": "", "verdict": "UNVERIFIED", "reporters": [], "anchor": "app.py:L3",
            "cwe": 89
        }))
        .expect("a minimal finding")
    }

    #[test]
    fn unverified_leads_fail_the_run_only_when_asked() {
        let mut report = completed_report();
        report.unverified_leads = vec![unverified_lead(Severity::P1)];
        assert_eq!(
            exit_for(&report, Some(Severity::P1), false),
            ExitCode::Clean
        );
        assert_eq!(
            exit_for(&report, Some(Severity::P1), true),
            ExitCode::Findings
        );
        // Below the threshold it does not count either way.
        assert_eq!(exit_for(&report, Some(Severity::P0), true), ExitCode::Clean);
        assert_eq!(exit_for(&report, None, true), ExitCode::Clean);
    }
}
