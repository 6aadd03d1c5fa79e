//! The verification ledger (report.json `verification_ledger`): every model-checked finding,
//! who was asked what, what each answered, and the report id the verdict went into.

use crate::review::dedup::anchor;
use crate::review::finding::{Finding, Rescored, Verdict};
use crate::review::judged::Judged;
use crate::review::vote::{Threshold, Vote};
use serde::{Deserialize, Serialize};

/// One model-checked finding in report.json's `verification_ledger`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LedgerEntry {
    /// The report id the verdict went into (F001, R001, ... in `findings`, `residual_concerns`
    /// or `pre_existing`): the finding with its anchor, else its title and file; `null` when
    /// it was dropped (or a merge left neither to match).
    pub finding: Option<String>,
    pub title: String,
    pub file: Option<String>,
    pub line_start: Option<u32>,
    /// The specialist task that reported it.
    pub task: String,
    pub anchor: String,
    pub votes: Vec<Vote>,
    pub threshold: Threshold,
    /// The combined verdict (HALLUCINATED: the finding is in `dropped`).
    pub outcome: Verdict,
    /// The confidence consultant's re-scoring, when the flow has one and it answered: the
    /// finder's original scores, the consultant's model and reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescored: Option<Rescored>,
}

/// The ledger of every judged finding that was model-checked, in verdict order, with the id
/// each one ended up under in `lists` (the report's findings, residual concerns, pre-existing).
pub fn ledger(judged: &[Judged], lists: &[&[Finding]]) -> Vec<LedgerEntry> {
    judged
        .iter()
        .filter_map(|j| {
            let ballot = j.ballot.as_ref()?;
            let anchor = anchor(&j.reported.finding);
            // By anchor; a flow that merges by its own key (document review's sections) is
            // matched by title and file instead.
            let f = &j.reported.finding;
            let finding = (j.verdict != Verdict::Hallucinated)
                .then(|| {
                    let all = || lists.iter().flat_map(|l| l.iter());
                    all()
                        .find(|x| x.anchor == anchor)
                        .or_else(|| all().find(|x| x.title == f.title && x.file == f.file))
                        .map(|x| x.id.clone())
                })
                .flatten();
            Some(LedgerEntry {
                finding,
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                line_start: j.reported.finding.line_start,
                task: j.reported.task_id.clone(),
                anchor,
                votes: ballot.votes.clone(),
                threshold: ballot.threshold,
                outcome: j.verdict,
                rescored: j.rescored.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::vote::Ballot;
    use Threshold::Majority;

    fn vote(k: usize, verdict: Option<Verdict>, reason: &str) -> Vote {
        Vote {
            verifier: format!("v{k}"),
            model: "m".into(),
            verdict,
            reason: reason.into(),
            prompt_digest: String::new(),
        }
    }

    #[test]
    fn the_ledger_names_the_report_id_each_checked_finding_went_into() {
        use crate::review::finding::{RawFinding, Reported, Reporter, Severity};
        let judged = |title: &str, line: u32, verdict: Verdict, ballot: bool| Judged {
            reported: Reported {
                task_id: "t1".into(),
                reporter: Reporter {
                    persona: "p".into(),
                    model: "m".into(),
                    node: "n".into(),
                    carried_from: None,
                },
                finding: RawFinding {
                    title: title.into(),
                    severity: Severity::P1,
                    confidence: 0.9,
                    category: "c".into(),
                    file: Some("a.py".into()),
                    line_start: Some(line),
                    line_end: Some(line),
                    symbol: None,
                    evidence: "e".into(),
                    why_it_matters: "w".into(),
                    suggested_fix: "f".into(),
                    routing: Default::default(),
                },
            },
            verdict,
            reason: "r".into(),
            deterministic: false,
            notes: Vec::new(),
            ballot: ballot.then(|| Ballot {
                threshold: Majority,
                votes: vec![vote(1, Some(verdict), "r")],
            }),
            rescored: None,
        };
        let all = vec![
            judged("kept", 3, Verdict::Confirmed, true),
            judged("dropped", 30, Verdict::Hallucinated, true),
            judged("by grounding", 60, Verdict::Unverifiable, false),
            judged("own anchor", 90, Verdict::Plausible, true),
        ];
        let mut gated = crate::review::dedup::merge_and_gate(all.clone(), 0.5);
        // A flow with its own merge key (document review) anchors differently.
        for f in &mut gated.findings {
            if f.title == "own anchor" {
                f.anchor = "a.py#Section".into();
            }
        }
        let l = ledger(&all, &[&gated.findings, &gated.residual]);
        let ids: Vec<(&str, Option<&str>, Verdict)> = l
            .iter()
            .map(|e| (e.title.as_str(), e.finding.as_deref(), e.outcome))
            .collect();
        let id_of = |t: &str| {
            gated
                .findings
                .iter()
                .find(|f| f.title == t)
                .map(|f| f.id.as_str())
        };
        assert_eq!(
            ids,
            [
                ("kept", id_of("kept"), Verdict::Confirmed),
                ("dropped", None, Verdict::Hallucinated),
                ("own anchor", id_of("own anchor"), Verdict::Plausible),
            ]
        );
        assert!(l
            .iter()
            .all(|e| e.finding.is_some() || e.outcome == Verdict::Hallucinated));
        assert_eq!(l[0].anchor, "a.py:L0");
        assert_eq!((l[0].task.as_str(), l[0].threshold), ("t1", Majority));
    }
}
