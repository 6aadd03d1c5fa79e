//! report.md's methodology: how the review ran — team, tasks and their outcomes, usage, the
//! exhaustive rounds, persona selection, coverage, the verification ledger and the
//! analyzers.

use super::text::{cell, list_or_dash};
use crate::human::{human_duration, thousands};
use crate::report::common::{code, one_line};
use crate::report::Report;
use std::fmt::Write as _;

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
    if sel.decisions.is_empty() {
        // No two-tier selection ran: only the plan's fit refused personas.
        md_refused(sel, out);
        return;
    }
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
    md_refused(sel, out);
}

/// The personas the plan's fit refused for this material, with why.
fn md_refused(sel: &crate::flows::selection::SelectionRecord, out: &mut String) {
    if sel.refused.is_empty() {
        return;
    }
    out.push_str(
        "Refused for this material (the planner chose them, the material gave no reason):\n\n",
    );
    for r in &sel.refused {
        let _ = writeln!(out, "- {}: {}", cell(&r.persona), cell(&r.reason));
    }
    out.push('\n');
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

/// What each specialist task was asked and given: its mandate and files (a large task's count
/// and digest stand in for the full list, which report.json's `files` begins).
fn md_task_scope(tasks: &[crate::report::TaskReport], out: &mut String) {
    const SHOWN: usize = 6;
    let scoped: Vec<_> = tasks
        .iter()
        .filter(|t| t.files_total > 0 || !t.mandate.trim().is_empty())
        .collect();
    if scoped.is_empty() {
        return;
    }
    out.push_str("#### What each task read\n\n");
    for t in scoped {
        let mandate = one_line(&t.mandate);
        let mandate = if mandate.is_empty() {
            "—".to_string()
        } else {
            mandate
        };
        let mut files: Vec<String> = t.files.iter().take(SHOWN).map(|f| code(f)).collect();
        let more = t.files_total.saturating_sub(files.len());
        if more > 0 {
            files.push(format!("… {more} more"));
        }
        let digest = t
            .files_digest
            .as_deref()
            .map(|d| format!(" (list digest {})", code(d)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- {} ({}): {} — files: {}{}",
            code(&t.id),
            one_line(&t.persona),
            mandate,
            if files.is_empty() {
                "—".to_string()
            } else {
                files.join(", ")
            },
            digest
        );
    }
    out.push('\n');
}

/// The incremental review's account: which tasks took a recorded result, which ran and why.
fn md_reuse(r: &Report, out: &mut String) {
    let lines = r.cache_explanation();
    if lines.is_empty() {
        return;
    }
    out.push_str(
        "#### Incremental review

",
    );
    for l in lines {
        let _ = writeln!(out, "- {}", one_line(&l));
    }
    out.push('\n');
}

impl Report {
    /// One line per task an incremental review keyed: `T3 reused from F: …` or `T4 ran: changed
    /// since F: a.py (edited)`, preceded by a count; empty when the review did not reuse.
    pub fn cache_explanation(&self) -> Vec<String> {
        let keyed: Vec<&crate::report::TaskReport> =
            self.tasks.iter().filter(|t| t.cache.is_some()).collect();
        if keyed.is_empty() {
            return Vec::new();
        }
        let reused = keyed.iter().filter(|t| t.reused_from.is_some()).count();
        let mut lines = vec![format!(
            "{reused} of {} keyed tasks took a recorded result; {} ran",
            keyed.len(),
            keyed.len() - reused
        )];
        for t in keyed {
            if let Some(why) = t.cache.as_deref() {
                lines.push(format!("{} ({}): {why}", t.id, t.persona));
            }
        }
        lines
    }
}

pub(crate) fn md_methodology(r: &Report, out: &mut String) {
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
            "| ID | Persona | Status | Attempts | Model | Files | Tokens in / out | Duration | Ended |\n\
             | --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |\n",
        );
        for t in &r.tasks {
            let ended = if t.ended.is_empty() {
                t.error_class.as_deref().unwrap_or("")
            } else {
                &t.ended
            };
            let files = if t.files_total == 0 {
                "—".to_string()
            } else {
                t.files_total.to_string()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
                cell(&t.id),
                cell(&t.persona),
                cell(&t.status),
                t.attempts,
                cell(&t.model),
                files,
                thousands(t.tokens_in),
                thousands(t.tokens_out),
                human_duration(t.duration_ms),
                cell(ended)
            );
        }
        out.push('\n');
        md_task_scope(&r.tasks, out);
        md_reuse(r, out);
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
