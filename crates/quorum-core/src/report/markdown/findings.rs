//! The sections of report.md that say what the review found: the header (target, status,
//! change), the summary, the team announcement, findings by area and severity, residual
//! concerns, pre-existing findings, action items and what was dropped.

use super::text::{cell, fenced, list_or_dash, location_text, severity_word};
use crate::human::human_duration;
use crate::report::common::{area_of, code, one_line, status_str};
use crate::report::{Report, ReviewStatus};
use crate::review::finding::{Finding, Severity};
use std::collections::BTreeMap;
use std::fmt::Write as _;

fn nothing_to_review(r: &Report) -> bool {
    r.target.file_count == 0 && r.findings.is_empty()
}

pub(crate) fn md_header(r: &Report, out: &mut String) {
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
pub(crate) fn md_pre_existing(r: &Report, out: &mut String) {
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
        md_list_line(f, out);
    }
    out.push('\n');
}

/// One finding as a list line: id, severity, title, weakness, where, verdict.
fn md_list_line(f: &Finding, out: &mut String) {
    let cwe = f.cwe.map(|c| format!(" · CWE-{c}")).unwrap_or_default();
    let _ = writeln!(
        out,
        "- {} · {} · {}{cwe} — {} · {}",
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

pub(crate) fn md_summary(r: &Report, out: &mut String) {
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
    if !r.unverified_leads.is_empty() {
        let _ = writeln!(
            out,
            "**{} unverified lead(s)** of high harm were left unchecked by the budget: listed \
             under \"Unverified leads\", not counted above.\n",
            r.unverified_leads.len()
        );
    }
    md_lint(r, out);
    md_since(r, out);
    md_slowest(r, out);
}

/// The analyzers' style hits, counted per rule (they are not review findings by default).
fn md_lint(r: &Report, out: &mut String) {
    if r.lint.is_empty() {
        return;
    }
    const NAMED: usize = 12;
    let total: usize = r.lint.iter().map(|l| l.count).sum();
    let mut named: Vec<String> = r
        .lint
        .iter()
        .take(NAMED)
        .map(|l| format!("{} {} ×{}", one_line(&l.tool), code(&l.rule), l.count))
        .collect();
    if r.lint.len() > NAMED {
        named.push(format!("{} more rules", r.lint.len() - NAMED));
    }
    let _ = writeln!(
        out,
        "**Lint:** {total} style hit(s), not reported as findings (a flow's `lint_findings: \
         true` reports them): {}.\n",
        named.join(", ")
    );
}

/// Analyzer leads of high harm no model checked: apart from the findings, never dropped
/// unreported.
pub(crate) fn md_unverified_leads(r: &Report, out: &mut String) {
    if r.unverified_leads.is_empty() {
        return;
    }
    out.push_str("## Unverified leads\n\n");
    out.push_str(
        "Security and correctness hits of the analyzers that no model checked before the \
         review's budget ran out. They are not confirmed findings: not counted for the exit \
         code (unless `--fail-on-unverified`) nor in report.sarif. Check them by hand, or \
         review again with a larger budget.\n\n",
    );
    for f in &r.unverified_leads {
        md_list_line(f, out);
    }
    out.push('\n');
}

/// `--since`: new, still present, dismissed, and what was fixed since the earlier review.
fn md_since(r: &Report, out: &mut String) {
    let Some(s) = &r.since else {
        return;
    };
    let _ = writeln!(
        out,
        "Since review {}: **{} new**, {} still present (marked seen before), {} dismissed by \
         the author (wont_fix, lines unchanged), {} fixed, {} not reported this time.\n",
        one_line(&s.flow_id),
        s.new,
        s.still_present,
        s.dismissed,
        s.fixed.len(),
        s.not_reported.len()
    );
    for (label, list) in [
        ("Fixed since", &s.fixed),
        ("Not reported this time", &s.not_reported),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{label}:\n");
        for g in list {
            let _ = writeln!(
                out,
                "- {} · {} · {} ({})",
                one_line(&g.id),
                g.severity,
                one_line(&g.title),
                location_text(g.file.as_deref(), g.line_start, None, None)
            );
        }
        out.push('\n');
    }
}

/// The tasks that cost the most wall time, so a long review says where its time went.
fn md_slowest(r: &Report, out: &mut String) {
    const NAMED: usize = 3;
    let mut timed: Vec<_> = r.tasks.iter().filter(|t| t.duration_ms > 0).collect();
    if timed.len() < 2 {
        return;
    }
    timed.sort_by(|a, b| b.duration_ms.cmp(&a.duration_ms).then(a.id.cmp(&b.id)));
    let named: Vec<String> = timed
        .iter()
        .take(NAMED)
        .map(|t| {
            let ended = if t.ended.is_empty() {
                &t.status
            } else {
                &t.ended
            };
            format!(
                "{} ({}, {}, {})",
                code(&t.id),
                one_line(&t.persona),
                human_duration(t.duration_ms),
                one_line(ended)
            )
        })
        .collect();
    let _ = writeln!(out, "**Slowest tasks:** {}.\n", named.join("; "));
}

pub(crate) fn md_findings(r: &Report, out: &mut String) {
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
    match f.cwe {
        Some(cwe) => {
            let _ = writeln!(
                out,
                "- **Category:** {} · **Weakness:** CWE-{cwe}",
                one_line(&f.category)
            );
        }
        None => {
            let _ = writeln!(out, "- **Category:** {}", one_line(&f.category));
        }
    }
    if let Some(seen) = &f.seen_before {
        let _ = writeln!(out, "- **Seen before:** {} (not new)", one_line(seen));
    }
    if let Some(flow) = &f.carried_from {
        let _ = writeln!(
            out,
            "- **Carried from:** review {} (its files unchanged; grounded and verified again)",
            one_line(flow)
        );
    }
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

pub(crate) fn md_residual(r: &Report, out: &mut String) {
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

pub(crate) fn md_action_items(r: &Report, out: &mut String) {
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

pub(crate) fn md_dropped(r: &Report, out: &mut String) {
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
pub(crate) fn md_team_announcement(r: &Report, out: &mut String) {
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
