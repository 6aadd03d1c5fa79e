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
/// anchor is that finding again, adjudicated, and is not counted twice.
pub fn exit_for(
    report: &Report,
    fail_on: Option<quorum_core::review::finding::Severity>,
) -> ExitCode {
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
            Some(t) if report.has_findings_at_or_above(t) => ExitCode::Findings,
            _ => ExitCode::Clean,
        },
    }
}
