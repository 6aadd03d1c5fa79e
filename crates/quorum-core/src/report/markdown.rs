//! report.md, for people: the document's outline, section by section. What the review found
//! is in [`findings`], what the optional phases add in [`phases`], how the review ran in
//! [`methodology`]; [`text`] keeps model text from breaking the Markdown.

mod findings;
mod methodology;
mod phases;
mod text;

use super::Report;

impl Report {
    /// report.md: summary, findings by area and severity, action items, methodology.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        findings::md_header(self, &mut out);
        findings::md_summary(self, &mut out);
        phases::md_conformance(self, &mut out);
        phases::md_adjudication(self, &mut out);
        phases::md_panel(self, &mut out);
        findings::md_team_announcement(self, &mut out);
        findings::md_findings(self, &mut out);
        findings::md_residual(self, &mut out);
        findings::md_unverified_leads(self, &mut out);
        findings::md_pre_existing(self, &mut out);
        findings::md_action_items(self, &mut out);
        findings::md_dropped(self, &mut out);
        phases::md_safe_fixes(self, &mut out);
        methodology::md_methodology(self, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::report::testing::{empty_report, report};
    use crate::report::ReviewStatus;

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
    fn markdown_says_what_each_task_read_and_where_the_time_went() {
        let mut r = report();
        let mut fast = r.tasks[0].clone();
        fast.id = "t2".into();
        fast.duration_ms = 2_000;
        fast.ended = "answered".into();
        fast.files = Vec::new();
        fast.files_total = 0;
        fast.mandate = String::new();
        r.tasks.push(fast);
        let md = r.to_markdown();
        // The tasks table gives each task's file count and why it ended.
        let row = md
            .lines()
            .find(|l| l.starts_with("| t1 |"))
            .unwrap_or_else(|| panic!("no t1 row:\n{md}"));
        assert!(
            row.starts_with("| t1 | security-auditor | failed | 3 | model-a | 2 | 12,345 / 678 |")
                && row.ends_with("| failed: timeout |"),
            "{row}"
        );
        // Its mandate and files, with the mandate's pipe kept from breaking the line.
        assert!(md.contains("#### What each task read"), "{md}");
        assert!(md.contains("`src/auth.rs`, `src/a|b.rs`"), "{md}");
        // The summary names the slowest task first.
        let summary = &md[..md.find("## Methodology").unwrap()];
        let slowest = summary
            .lines()
            .find(|l| l.starts_with("**Slowest tasks:**"))
            .unwrap_or_else(|| panic!("no slowest tasks line:\n{md}"));
        let (t1, t2) = (slowest.find("`t1`").unwrap(), slowest.find("`t2`").unwrap());
        assert!(t1 < t2, "{slowest}");
        assert!(slowest.contains("failed: timeout"), "{slowest}");
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
}
