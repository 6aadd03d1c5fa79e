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
#[derive(Debug, Clone, PartialEq)]
pub struct FixTarget {
    pub finding: Finding,
    /// `(tool, rule)` when an analyzer reported it: the analyzer oracle re-runs that rule.
    pub analyzer_rule: Option<(String, String)>,
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
