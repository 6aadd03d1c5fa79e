//! Which findings of a report `quorum fix` works on: the ids asked for, else the confirmed
//! findings at or above a severity; each must name a file the target still has.

use crate::report::Report;
use crate::review::finding::{Finding, Severity, Verdict};

/// What the user asked to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These finding ids, whatever their verdict.
    Ids(Vec<String>),
    /// Confirmed findings at or above this severity (P0 is the highest).
    AtLeast(Severity),
}

/// Why the selection is empty or names what the report lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("the report has no finding {0}; its findings are {1}")]
    Unknown(String, String),
    #[error("finding {0} names no file, so there is nothing to edit")]
    NoFile(String),
}

/// A finding picked for fixing, with what the fix agent and oracles need from the report.
/// It travels to the node that runs a fix attempt, so it is plain data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FixTarget {
    pub finding: Finding,
    /// `(tool, rule)` when an analyzer reported it: the analyzer oracle re-runs that rule.
    pub analyzer_rule: Option<(String, String)>,
    /// Why the review's verifiers confirmed it (their reasons from the verification ledger,
    /// at most [`MAX_REASONS`]): the fix agent is told what the defect was judged to be.
    pub confirmed_because: Vec<String>,
}

/// How many verifier reasons a fix target carries.
pub const MAX_REASONS: usize = 3;

/// The reasons of the votes that confirmed finding `id` in the report's verification ledger.
pub fn verifier_reasons(report: &Report, id: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in report
        .verification_ledger
        .iter()
        .filter(|e| e.finding.as_deref() == Some(id))
    {
        for vote in &entry.votes {
            let reason = vote.reason.trim();
            if vote.verdict == Some(Verdict::Confirmed)
                && !reason.is_empty()
                && !out.iter().any(|r| r == reason)
                && out.len() < MAX_REASONS
            {
                out.push(reason.to_string());
            }
        }
    }
    out
}

/// The analyzer and rule behind a finding (reporter `analyzer:<tool>`, category `…/<rule>`).
pub fn analyzer_rule(f: &Finding) -> Option<(String, String)> {
    let tool = f
        .reporters
        .iter()
        .find_map(|r| r.persona.strip_prefix(crate::analyzer::REPORTER_PREFIX))?;
    let rule = f.category.rsplit_once('/')?.1;
    (!rule.is_empty()).then(|| (tool.to_string(), rule.to_string()))
}

/// The findings to fix, in the report's order (most severe first, as the report sorts them).
pub fn select(report: &Report, selection: &Selection) -> Result<Vec<FixTarget>, SelectError> {
    let target = |f: &Finding| FixTarget {
        analyzer_rule: analyzer_rule(f),
        confirmed_because: verifier_reasons(report, &f.id),
        finding: f.clone(),
    };
    match selection {
        Selection::Ids(ids) => {
            let mut out = Vec::new();
            for id in ids {
                let f = report
                    .findings
                    .iter()
                    .find(|f| &f.id == id)
                    .ok_or_else(|| {
                        SelectError::Unknown(
                            id.clone(),
                            report
                                .findings
                                .iter()
                                .map(|f| f.id.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                        )
                    })?;
                if f.file.is_none() {
                    return Err(SelectError::NoFile(id.clone()));
                }
                if !out.iter().any(|t: &FixTarget| &t.finding.id == id) {
                    out.push(target(f));
                }
            }
            Ok(out)
        }
        Selection::AtLeast(min) => Ok(report
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::Confirmed && f.severity <= *min && f.file.is_some())
            .map(target)
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::report;
    use crate::review::ledger::LedgerEntry;
    use crate::review::vote::{Threshold, Vote};

    fn vote(verdict: Option<Verdict>, reason: &str) -> Vote {
        Vote {
            verifier: "v1".into(),
            model: "m".into(),
            verdict,
            reason: reason.into(),
            prompt_digest: String::new(),
        }
    }

    fn entry(finding: Option<&str>, votes: Vec<Vote>) -> LedgerEntry {
        LedgerEntry {
            finding: finding.map(str::to_string),
            title: "t".into(),
            file: None,
            line_start: None,
            task: "t1".into(),
            anchor: "a".into(),
            votes,
            threshold: Threshold::Any,
            outcome: Verdict::Confirmed,
            rescored: None,
        }
    }

    #[test]
    fn a_target_carries_the_reasons_its_verifiers_confirmed_it_with() {
        let mut r = report();
        r.verification_ledger = vec![
            entry(
                Some("F1"),
                vec![
                    vote(
                        Some(Verdict::Confirmed),
                        "the query is built by concatenation",
                    ),
                    vote(Some(Verdict::Hallucinated), "not reachable"),
                    vote(None, "call failed"),
                    vote(
                        Some(Verdict::Confirmed),
                        "the query is built by concatenation",
                    ),
                ],
            ),
            entry(
                Some("F2"),
                vec![vote(Some(Verdict::Confirmed), "other finding")],
            ),
            entry(None, vec![vote(Some(Verdict::Confirmed), "dropped one")]),
        ];
        let picked = select(&r, &Selection::Ids(vec!["F1".into()])).unwrap();
        assert_eq!(
            picked[0].confirmed_because,
            vec!["the query is built by concatenation".to_string()]
        );
        r.verification_ledger[0].votes = (0..6)
            .map(|i| vote(Some(Verdict::Confirmed), &format!("reason {i}")))
            .collect();
        assert_eq!(verifier_reasons(&r, "F1").len(), MAX_REASONS);
        assert!(verifier_reasons(&r, "F9").is_empty());
    }

    #[test]
    fn severity_selection_takes_confirmed_findings_with_files_at_or_above_it() {
        let r = report();
        let ids = |s| -> Vec<String> {
            select(&r, &Selection::AtLeast(s))
                .unwrap()
                .into_iter()
                .map(|t| t.finding.id)
                .collect()
        };
        assert_eq!(ids(Severity::P0), vec!["F2".to_string()]);
        assert!(ids(Severity::P1).contains(&"F1".to_string()));
        assert!(matches!(
            select(&r, &Selection::Ids(vec!["F9".into()])),
            Err(SelectError::Unknown(..))
        ));
    }
}
