//! Push by push: a report compared with the report of an earlier review of the same target
//! (`quorum review --since REPORT.json`). A finding already reported there and still present
//! is marked `seen_before` (SARIF says `unchanged`, rdjson and GitLab leave it out, so a bot
//! never posts the same comment twice); one the author dismissed as `wont_fix`, or whose
//! dispute a finish review's judge accepted, is not raised again while its lines are unchanged; the earlier findings no longer reported are listed,
//! fixed (their evidence is gone) or not reported this time (it is still there).
//!
//! Matching is deterministic: the same file and the same quoted evidence (whitespace
//! ignored), else the same file and the same title; each earlier finding matches at most one
//! finding of this report.

use crate::judging::adjudication::{precheck, Disposition, Prior, PriorFinding};
use crate::pack::ContextPack;
use crate::report::{Gone, Report, SinceReport};
use crate::review::finding::{Dropped, Finding};
use serde::{Deserialize, Serialize};

/// What `removed_by` says of a finding the author dismissed in an earlier review.
pub const DISMISSED: &str = "dismissed";

/// The earlier review a report is compared with, as `--since` read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Its review id (`flow_id` of its report.json).
    pub flow_id: String,
    /// Its findings, with the author's dispositions when `--dispositions` gave them.
    pub prior: Prior,
    /// A finish review's disputes its judge accepted (`adjudication.findings[]` with status
    /// `disputed_accepted`), with the lines it quoted: not raised again while those are there.
    #[serde(default)]
    pub accepted_disputes: Vec<PriorFinding>,
}

impl Baseline {
    /// An earlier report.json (`path` names it) and the author's dispositions of its
    /// findings, as [`Prior::from_texts`] reads them.
    pub fn from_texts(
        path: &str,
        report_json: &str,
        dispositions: Option<(&str, &str)>,
    ) -> Result<Baseline, crate::error::PriorError> {
        let prior = Prior::from_texts(path, report_json, dispositions)?;
        let json = serde_json::from_str::<serde_json::Value>(report_json).ok();
        let flow_id = json
            .as_ref()
            .and_then(|v| v.get("flow_id")?.as_str().map(str::to_string))
            .unwrap_or_else(|| path.to_string());
        let accepted_disputes = json
            .as_ref()
            .and_then(|v| v.pointer("/adjudication/findings")?.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|a| {
                serde_json::from_value::<crate::judging::adjudication::Adjudged>(a).ok()
            })
            .filter(|a| a.status == crate::judging::adjudication::Status::DisputedAccepted)
            .map(|a| {
                let quote = a.evidence.first();
                PriorFinding {
                    id: a.id,
                    title: a.title,
                    severity: a.severity,
                    file: a.file.or_else(|| quote.map(|q| q.file.clone())),
                    line_start: quote.and_then(|q| q.line_start),
                    line_end: quote.and_then(|q| q.line_end),
                    evidence: quote.map(|q| q.quote.clone()).unwrap_or_default(),
                    why_it_matters: String::new(),
                    note: None,
                }
            })
            .collect();
        Ok(Baseline {
            flow_id,
            prior,
            accepted_disputes,
        })
    }
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn norm_file(f: Option<&str>) -> Option<String> {
    let f = f?.trim().replace('\\', "/");
    let f = f.trim_start_matches("./").to_string();
    (!f.is_empty()).then_some(f)
}

fn same(f: &Finding, p: &PriorFinding) -> Option<u8> {
    if norm_file(f.file.as_deref()) != norm_file(p.file.as_deref()) {
        return None;
    }
    let (ev, pev) = (squash(&f.evidence), squash(&p.evidence));
    if !ev.is_empty() && ev == pev {
        return Some(0);
    }
    let title = |t: &str| {
        t.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    (title(&f.title) == title(&p.title)).then_some(1)
}

/// The unmatched earlier finding that matches `f` best (evidence before title).
fn matching(f: &Finding, prior: &[PriorFinding], taken: &[bool]) -> Option<usize> {
    prior
        .iter()
        .enumerate()
        .filter(|(i, _)| !taken[*i])
        .filter_map(|(i, p)| same(f, p).map(|rank| (rank, i)))
        .min()
        .map(|(_, i)| i)
}

fn gone(p: &PriorFinding) -> Gone {
    Gone {
        id: p.id.clone(),
        title: p.title.clone(),
        severity: p.severity,
        file: p.file.clone(),
        line_start: p.line_start,
    }
}

impl Report {
    /// Compare this report with `baseline` over `pack` (the snapshot this review read): mark,
    /// dismiss and list as the module says, and record the account in `since`.
    pub fn compare_since(&mut self, baseline: &Baseline, pack: &ContextPack) {
        let prior = &baseline.prior.findings;
        let mut taken = vec![false; prior.len()];
        let mut since = SinceReport {
            flow_id: baseline.flow_id.clone(),
            path: baseline.prior.path.clone(),
            ..SinceReport::default()
        };
        let mut kept = Vec::with_capacity(self.findings.len());
        let accepted = &baseline.accepted_disputes;
        let none_taken = vec![false; accepted.len()];
        for mut f in std::mem::take(&mut self.findings) {
            // A dispute the finish review's judge accepted, its quoted lines still there.
            if let Some(a) = matching(&f, accepted, &none_taken).map(|i| &accepted[i]) {
                if matches!(
                    precheck(a, pack),
                    crate::judging::adjudication::PreCheck::EvidencePresent { .. }
                ) {
                    since.dismissed += 1;
                    self.dropped.push(Dropped {
                        title: f.title.clone(),
                        file: f.file.clone(),
                        reason: format!(
                            "its dispute was accepted in review {} ({}); its lines are unchanged",
                            baseline.flow_id, a.id
                        ),
                        verdict: Some(f.verdict),
                        removed_by: DISMISSED.to_string(),
                    });
                    continue;
                }
            }
            let Some(i) = matching(&f, prior, &taken) else {
                since.new += 1;
                kept.push(f);
                continue;
            };
            taken[i] = true;
            let p = &prior[i];
            let wont_fix = p
                .note
                .as_ref()
                .filter(|n| n.disposition == Disposition::WontFix);
            let unchanged = matches!(
                precheck(p, pack),
                crate::judging::adjudication::PreCheck::EvidencePresent { .. }
            );
            if let (Some(note), true) = (wont_fix, unchanged) {
                since.dismissed += 1;
                let comment = note.comment.trim();
                self.dropped.push(Dropped {
                    title: f.title.clone(),
                    file: f.file.clone(),
                    reason: format!(
                        "dismissed as wont_fix in review {} ({}){}; its lines are unchanged",
                        baseline.flow_id,
                        p.id,
                        if comment.is_empty() {
                            String::new()
                        } else {
                            format!(": {comment}")
                        }
                    ),
                    verdict: Some(f.verdict),
                    removed_by: DISMISSED.to_string(),
                });
                continue;
            }
            since.still_present += 1;
            f.seen_before = Some(format!("{} {}", baseline.flow_id, p.id));
            kept.push(f);
        }
        // Ids stay dense (F001, F002, ...) once a dismissed finding has left the list.
        self.findings = if since.dismissed > 0 {
            crate::review::dedup::renumber(kept, "F")
        } else {
            kept
        };
        // A finding below the gate now is still there: neither fixed nor new.
        for f in self
            .residual_concerns
            .iter_mut()
            .chain(self.pre_existing.iter_mut())
        {
            if let Some(i) = matching(f, prior, &taken) {
                taken[i] = true;
                f.seen_before = Some(format!("{} {}", baseline.flow_id, prior[i].id));
            }
        }
        for (p, _) in prior.iter().zip(&taken).filter(|(_, t)| !**t) {
            match precheck(p, pack) {
                crate::judging::adjudication::PreCheck::EvidencePresent { .. }
                | crate::judging::adjudication::PreCheck::NoAnchor => {
                    since.not_reported.push(gone(p))
                }
                _ => since.fixed.push(gone(p)),
            }
        }
        self.since = Some(since);
    }

    /// The findings a CI bot posts: all of them, or only the new ones when the report was
    /// compared with an earlier review.
    pub fn new_findings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.seen_before.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::adjudication::AuthorNote;
    use crate::report::testing::{empty_report, finding};
    use crate::review::finding::Severity;

    fn pack(files: &[(&str, &str)]) -> (tempfile::TempDir, ContextPack) {
        let dir = tempfile::tempdir().unwrap();
        for (p, text) in files {
            std::fs::write(dir.path().join(p), text).unwrap();
        }
        let pack = ContextPack::snapshot(dir.path(), &Default::default()).unwrap();
        (dir, pack)
    }

    fn now(id: &str, file: &str, line: u32, evidence: &str) -> Finding {
        let mut f = finding(id, Severity::P2, "security", Some(file));
        f.line_start = Some(line);
        f.line_end = Some(line);
        f.evidence = evidence.into();
        f
    }

    fn then(id: &str, file: &str, line: u32, evidence: &str) -> PriorFinding {
        PriorFinding {
            id: id.into(),
            title: format!("earlier {id}"),
            severity: Severity::P2,
            file: Some(file.into()),
            line_start: Some(line),
            line_end: Some(line),
            evidence: evidence.into(),
            why_it_matters: String::new(),
            note: None,
        }
    }

    #[test]
    fn findings_are_new_seen_before_or_dismissed_and_the_rest_fixed_or_not_reported() {
        let (_dir, pack) = pack(&[(
            "a.py",
            "x = 1\neval(a)\nexec(b)\nos.system(c)\npickle.loads(d)\n",
        )]);
        let mut report = empty_report();
        report.findings = vec![
            now("F001", "a.py", 2, "eval(a)"),
            // The same evidence, moved and with other spacing: still the earlier finding.
            now("F002", "a.py", 3, "exec( b )"),
            now("F003", "a.py", 4, "os.system(c)"),
        ];
        let mut wont_fix = then("F7", "a.py", 4, "os.system(c)");
        wont_fix.note = Some(AuthorNote {
            disposition: Disposition::WontFix,
            comment: "sandboxed".into(),
        });
        let baseline = Baseline {
            flow_id: "flow-1".into(),
            accepted_disputes: Vec::new(),
            prior: Prior {
                path: "old.json".into(),
                dispositions: None,
                findings: vec![
                    then("F5", "a.py", 9, "exec(b)"),
                    wont_fix,
                    then("F8", "a.py", 5, "pickle.loads(d)"),
                    then("F9", "a.py", 1, "yaml.load(e)"),
                ],
            },
        };
        report.compare_since(&baseline, &pack);
        let s = report.since.clone().unwrap();
        assert_eq!((s.new, s.still_present, s.dismissed), (1, 1, 1));
        let ids = |v: &[Gone]| v.iter().map(|g| g.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&s.fixed), ["F9"], "its evidence is gone");
        assert_eq!(ids(&s.not_reported), ["F8"], "its evidence is still there");
        let titles: Vec<_> = report
            .findings
            .iter()
            .map(|f| f.evidence.as_str())
            .collect();
        assert_eq!(titles, ["eval(a)", "exec( b )"]);
        assert_eq!(report.findings[0].seen_before, None);
        assert_eq!(report.findings[1].seen_before.as_deref(), Some("flow-1 F5"));
        assert_eq!(
            report.new_findings().count(),
            1,
            "a bot posts only the new one"
        );
        let d = report.dropped.last().unwrap();
        assert_eq!(d.removed_by, DISMISSED);
        assert!(
            d.reason
                .contains("wont_fix in review flow-1 (F7): sandboxed"),
            "{}",
            d.reason
        );

        // SARIF marks the baseline state; rdjson and GitLab carry the new finding only.
        let sarif = report.to_sarif();
        let states: Vec<_> = sarif["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["baselineState"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(states, ["new", "unchanged"]);
        assert_eq!(
            report.to_rdjson("")["diagnostics"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            report.to_gitlab_code_quality("").as_array().unwrap().len(),
            1
        );
        let md = report.to_markdown();
        assert!(
            md.contains("Since review flow-1: **1 new**, 1 still present"),
            "{md}"
        );
        assert!(md.contains("- **Seen before:** flow-1 F5"), "{md}");
    }

    #[test]
    fn a_dismissed_finding_comes_back_when_its_lines_change() {
        let (_dir, pack) = pack(&[("a.py", "os.system(c + d)\n")]);
        let mut report = empty_report();
        report.findings = vec![now("F001", "a.py", 1, "os.system(c + d)")];
        let mut p = then("F7", "a.py", 1, "os.system(c)");
        p.title = report.findings[0].title.clone();
        p.note = Some(AuthorNote {
            disposition: Disposition::WontFix,
            comment: String::new(),
        });
        let baseline = Baseline {
            flow_id: "flow-1".into(),
            accepted_disputes: Vec::new(),
            prior: Prior {
                path: "old.json".into(),
                dispositions: None,
                findings: vec![p],
            },
        };
        report.compare_since(&baseline, &pack);
        assert_eq!(report.findings.len(), 1, "raised again: its line changed");
        assert_eq!(report.findings[0].seen_before.as_deref(), Some("flow-1 F7"));
        assert_eq!(report.since.unwrap().dismissed, 0);
    }
}

#[cfg(test)]
mod disputes {
    use super::*;
    use crate::report::testing::{empty_report, finding};
    use crate::review::finding::Severity;

    #[test]
    fn a_dispute_a_finish_review_accepted_is_not_raised_again_while_its_lines_stand() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 1\nrandom.random()\n").unwrap();
        let pack = ContextPack::snapshot(dir.path(), &Default::default()).unwrap();
        // A finish review's report: no findings of its own, one accepted dispute.
        let report_json = serde_json::json!({
            "schema_version": 1, "flow_id": "finish-1", "findings": [],
            "adjudication": {"prior": "r1.json", "findings": [{
                "id": "F002", "title": "Weak randomness", "file": "a.py", "severity": "P2",
                "disposition": "disputed", "status": "disputed_accepted",
                "reason": "not used for security", "decided_by": "judge",
                "evidence": [{"file": "a.py", "line_start": 2, "line_end": 2,
                              "quote": "random.random()"}]}],
                "new_findings": [], "summary": {"fixed": 0, "still_present": 0,
                "disputed_accepted": 1, "disputed_rejected": 0, "not_judged": 0, "new": 0}}
        })
        .to_string();
        let baseline = Baseline::from_texts("finish.json", &report_json, None).unwrap();
        assert_eq!(baseline.accepted_disputes.len(), 1);
        let mut f = finding("F001", Severity::P2, "security", Some("a.py"));
        f.title = "Weak randomness".into();
        f.evidence = "random.random()".into();
        f.line_start = Some(2);
        let mut report = empty_report();
        report.findings = vec![f.clone()];
        report.compare_since(&baseline, &pack);
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        let d = report.dropped.last().unwrap();
        assert_eq!(d.removed_by, DISMISSED);
        assert!(
            d.reason
                .contains("dispute was accepted in review finish-1 (F002)"),
            "{}",
            d.reason
        );

        // Its lines changed: raised again.
        let dir2 = tempfile::tempdir().unwrap();
        std::fs::write(dir2.path().join("a.py"), "x = 1\nsecrets.token_hex()\n").unwrap();
        let pack2 = ContextPack::snapshot(dir2.path(), &Default::default()).unwrap();
        let mut report = empty_report();
        report.findings = vec![f];
        report.compare_since(&baseline, &pack2);
        assert_eq!(report.findings.len(), 1);
    }
}
