//! The sections of report.md the optional phases add: conformance (merge readiness), the
//! finish review's adjudication, the judge panel, and the safe fixes written to a copy.

use super::text::cell;
use crate::report::common::one_line;
use crate::report::Report;
use std::fmt::Write as _;

pub(crate) fn md_conformance(r: &Report, out: &mut String) {
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
pub(crate) fn md_panel(r: &Report, out: &mut String) {
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

pub(crate) fn md_adjudication(r: &Report, out: &mut String) {
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

pub(crate) fn md_safe_fixes(r: &Report, out: &mut String) {
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

#[cfg(test)]
mod tests {
    use crate::report::testing::report;
    use serde_json::Value;

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
}
