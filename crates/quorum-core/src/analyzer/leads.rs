//! A hit tied to a pack file is a [`Lead`]: a place for a specialist to look (a bounded,
//! delimited list in its prompt) and a candidate finding grounding and the verifier must
//! confirm. [`Leads`] (with each tool's [`AnalyzerRun`]) are recorded with the review's scope;
//! before the gate, unchecked candidates are dropped and a candidate inside another report's
//! lines takes its anchor.

use crate::pack::ContextPack;
use crate::review::finding::{Dropped, RawFinding, Severity, Verdict};
use crate::review::judged::Judged;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// How many leads one specialist prompt lists before saying how many more there are.
pub const MAX_LEADS_PER_PROMPT: usize = 20;

/// The reporter persona that credits a tool: `analyzer:<name>`.
pub const REPORTER_PREFIX: &str = "analyzer:";

pub(crate) fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// One analyzer hit tied to a file of the pack: a place a specialist should look, and a
/// candidate finding the verifier must confirm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lead {
    /// The analyzer's catalog name.
    pub tool: String,
    pub file: String,
    pub line: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    pub rule: String,
    pub message: String,
    pub severity: Severity,
    pub category: String,
    pub confidence: f64,
}

impl Lead {
    /// The reporter persona that credits this lead's tool.
    pub fn reporter_name(&self) -> String {
        format!("{REPORTER_PREFIX}{}", self.tool)
    }

    /// The lead as a candidate finding. Its evidence is the cited lines as the pack holds them
    /// (extended by a line or two when they are too short to locate anything), so grounding
    /// checks the location like any finding's; a line outside the file quotes nothing and
    /// grounding refuses it.
    pub fn to_finding(&self, pack: &ContextPack) -> RawFinding {
        let end = self.end_line.unwrap_or(self.line).max(self.line);
        let evidence = pack
            .get(&self.file)
            .filter(|f| self.line >= 1 && self.line <= f.line_count)
            .map(|f| {
                let lines: Vec<&str> = f.content.lines().collect();
                let from = self.line as usize - 1;
                let mut to = (end as usize).min(lines.len()).min(from + 3);
                let chars = |a: usize, b: usize| {
                    lines[a..b]
                        .iter()
                        .map(|l| l.chars().filter(|c| !c.is_whitespace()).count())
                        .sum::<usize>()
                };
                while chars(from, to) < crate::review::grounding::MIN_EVIDENCE_CHARS
                    && to < lines.len()
                    && to < from + 3
                {
                    to += 1;
                }
                lines[from..to].join("\n")
            })
            .unwrap_or_default();
        RawFinding {
            title: one_line(&format!("{}: {}", self.rule, self.message), 120),
            severity: self.severity,
            confidence: self.confidence,
            category: format!("{}/{}", self.category, self.rule),
            file: Some(self.file.clone()),
            line_start: Some(self.line),
            line_end: Some(end),
            symbol: None,
            evidence,
            // The verifier sees this; it names the rule, never who reported it.
            why_it_matters: format!("rule {}: {}", self.rule, self.message),
            suggested_fix: String::new(),
            routing: Default::default(),
        }
    }
}

/// What happened to one analyzer of the catalog in this review (the report's `analyzers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AnalyzerRun {
    pub name: String,
    /// True when the tool ran and its output was read.
    pub ran: bool,
    /// Why it did not run, or why its output could not be used (not on PATH, no matching
    /// files, timed out and killed, unreadable output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_reason: Option<String>,
    /// Leads kept from its output.
    pub hits: usize,
    /// What was left out of its output (hits outside the reviewed files, over `max_hits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default)]
    pub duration_ms: u64,
}

impl AnalyzerRun {
    pub fn skipped(name: &str, why: impl Into<String>) -> AnalyzerRun {
        AnalyzerRun {
            name: name.to_string(),
            ran: false,
            skipped_reason: Some(why.into()),
            hits: 0,
            note: None,
            duration_ms: 0,
        }
    }

    /// One line for progress output and the report's methodology.
    pub fn describe(&self) -> String {
        let mut s = match (&self.skipped_reason, self.ran) {
            (Some(why), false) => format!("{} skipped: {why}", self.name),
            _ => format!("{}: {} hits", self.name, self.hits),
        };
        if let Some(n) = &self.note {
            let _ = write!(s, " ({n})");
        }
        s
    }
}

/// The analyzers' outcome for a review: every catalog entry's run and the leads they gave.
/// Decided once before the first stage and recorded with the review's scope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Leads {
    #[serde(default)]
    pub runs: Vec<AnalyzerRun>,
    #[serde(default)]
    pub leads: Vec<Lead>,
}

impl Leads {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.leads.is_empty()
    }

    /// The leads on any of `files`, in file and line order.
    pub fn on_files(&self, files: &[String]) -> Vec<&Lead> {
        let mut out: Vec<&Lead> = self
            .leads
            .iter()
            .filter(|l| files.contains(&l.file))
            .collect();
        out.sort_by(|a, b| (&a.file, a.line, &a.tool).cmp(&(&b.file, b.line, &b.tool)));
        out
    }

    /// Only the leads on `files` (the runs stay: they are what the report says).
    pub fn for_files(&self, files: &[String]) -> Leads {
        Leads {
            runs: self.runs.clone(),
            leads: self.on_files(files).into_iter().cloned().collect(),
        }
    }
}

/// Whether `r` is an analyzer's lead (credited to `analyzer:<tool>`) rather than a reviewer's
/// finding.
pub fn is_lead(r: &crate::review::finding::Reported) -> bool {
    r.reporter.persona.starts_with(REPORTER_PREFIX)
}

/// Analyzer candidates no model checked (over `max_verifications`, the budget spent, the
/// verifier unavailable) leave the findings for `dropped`: a tool's hit becomes a finding only
/// once the verifier confirmed it, unlike a specialist's claim, which stays UNVERIFIED and
/// marked. Without this, a noisy tool would fill the report with unchecked findings.
pub fn take_unchecked_leads(judged: Vec<Judged>) -> (Vec<Judged>, Vec<Dropped>) {
    let mut kept = Vec::with_capacity(judged.len());
    let mut dropped = Vec::new();
    for j in judged {
        if j.verdict == Verdict::Unverified && is_lead(&j.reported) {
            dropped.push(Dropped {
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                reason: format!("analyzer lead not confirmed: {}", j.reason),
                verdict: Some(Verdict::Unverified),
                removed_by: "unconfirmed_lead".into(),
            });
        } else {
            kept.push(j);
        }
    }
    (kept, dropped)
}

/// A tool's hit inside the lines of a finding someone else reported is the same problem seen
/// twice: the candidate takes that finding's anchor (its symbol, else its first line), so
/// dedup merges the two — one finding, both reporters, the tool corroborating — instead of
/// listing it again under the rule's name. It also takes no more confidence than that report,
/// so when both are judged alike the merged finding keeps the reviewer's words (dedup keeps
/// the best-verdict, most confident report's text). Hallucinated reports anchor nothing.
pub fn anchor_to_overlapping(judged: &mut [Judged]) {
    let is_tool = |j: &Judged| is_lead(&j.reported);
    type Anchor = (String, u32, u32, Option<String>, f64);
    let anchors: Vec<Anchor> = judged
        .iter()
        .filter(|j| !is_tool(j) && j.verdict != Verdict::Hallucinated)
        .filter_map(|j| {
            let f = &j.reported.finding;
            let start = f.line_start?;
            let end = f.line_end.unwrap_or(start).max(start);
            Some((f.file.clone()?, start, end, f.symbol.clone(), f.confidence))
        })
        .collect();
    for j in judged.iter_mut().filter(|j| is_tool(j)) {
        let f = &mut j.reported.finding;
        let (Some(file), Some(line)) = (f.file.as_deref(), f.line_start) else {
            continue;
        };
        let Some((_, start, _, symbol, confidence)) = anchors
            .iter()
            .find(|(af, s, e, _, _)| af == file && *s <= line && line <= *e)
        else {
            continue;
        };
        f.confidence = f.confidence.min(*confidence);
        match symbol {
            Some(s) => f.symbol = Some(s.clone()),
            None => {
                let end = f.line_end.unwrap_or(line).max(*start);
                f.line_start = Some(*start);
                f.line_end = Some(end);
            }
        }
    }
}

/// The list of leads for a prompt, at most `max` of them, then a visible count of the rest.
/// The caller delimits it as untrusted content: messages quote the code under review.
pub fn leads_list(leads: &[&Lead], max: usize) -> String {
    let mut out = String::new();
    for l in leads.iter().take(max) {
        let lines = match l.end_line {
            Some(e) if e > l.line => format!("{}-{e}", l.line),
            _ => l.line.to_string(),
        };
        let _ = writeln!(
            out,
            "- {}:{lines} [{} {}] {}",
            l.file, l.tool, l.rule, l.message
        );
    }
    if leads.len() > max {
        let _ = writeln!(
            out,
            "- … {} more leads on these files not shown",
            leads.len() - max
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::testing::pack;

    #[test]
    fn a_lead_is_a_candidate_finding_with_the_lines_as_evidence() {
        let p = pack();
        let lead = Lead {
            tool: "bandit".into(),
            file: "app.py".into(),
            line: 4,
            end_line: None,
            rule: "B105".into(),
            message: "Possible hardcoded password".into(),
            severity: Severity::P2,
            category: "security".into(),
            confidence: 0.7,
        };
        let f = lead.to_finding(&p);
        assert_eq!(f.evidence, "password = \"hunter2hunter2\"");
        assert_eq!(f.category, "security/B105");
        assert!(matches!(
            crate::review::grounding::ground(&f, &p),
            crate::review::grounding::Grounding::Grounded { .. }
        ));
        // A short line borrows the next one so the quote locates something.
        let short = Lead {
            line: 5,
            ..lead.clone()
        };
        assert_eq!(short.to_finding(&p).evidence, "x = 1");
        let outside = Lead { line: 99, ..lead };
        let f = outside.to_finding(&p);
        assert!(f.evidence.is_empty());
        assert!(matches!(
            crate::review::grounding::ground(&f, &p),
            crate::review::grounding::Grounding::Decided {
                verdict: crate::review::finding::Verdict::Hallucinated,
                ..
            }
        ));
    }

    #[test]
    fn unchecked_analyzer_candidates_are_dropped_specialists_kept() {
        use crate::review::finding::{Reported, Reporter};
        let p = pack();
        let judged = |persona: &str, verdict: Verdict| Judged {
            reported: Reported {
                task_id: "t".into(),
                reporter: Reporter {
                    persona: persona.into(),
                    model: String::new(),
                    node: "n".into(),
                    carried_from: None,
                },
                finding: Lead {
                    tool: "bandit".into(),
                    file: "app.py".into(),
                    line: 4,
                    end_line: None,
                    rule: "B105".into(),
                    message: "password".into(),
                    severity: Severity::P2,
                    category: "security".into(),
                    confidence: 0.7,
                }
                .to_finding(&p),
            },
            verdict,
            reason: "over the flow's max_verifications (4)".into(),
            deterministic: false,
            notes: Vec::new(),
            ballot: None,
            rescored: None,
        };
        let (kept, dropped) = take_unchecked_leads(vec![
            judged("analyzer:bandit", Verdict::Unverified),
            judged("analyzer:bandit", Verdict::Confirmed),
            judged("security_reviewer", Verdict::Unverified),
        ]);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].verdict, Verdict::Confirmed);
        assert_eq!(kept[1].reported.reporter.persona, "security_reviewer");
        assert_eq!(dropped.len(), 1);
        assert_eq!(
            dropped[0].reason,
            "analyzer lead not confirmed: over the flow's max_verifications (4)"
        );
    }

    #[test]
    fn a_hit_inside_a_reported_finding_merges_into_it() {
        use crate::review::finding::{Reported, Reporter};
        let p = pack();
        let judged = |persona: &str, finding: RawFinding| Judged {
            reported: Reported {
                task_id: "t".into(),
                reporter: Reporter {
                    persona: persona.into(),
                    model: "m".into(),
                    node: "n".into(),
                    carried_from: None,
                },
                finding,
            },
            verdict: Verdict::Confirmed,
            reason: String::new(),
            deterministic: false,
            notes: Vec::new(),
            ballot: None,
            rescored: None,
        };
        let lead = |line: u32| Lead {
            tool: "bandit".into(),
            file: "long.py".into(),
            line,
            end_line: None,
            rule: "B105".into(),
            message: "Possible hardcoded password".into(),
            severity: Severity::P3,
            category: "security".into(),
            confidence: 0.7,
        };
        let mut mine = lead(4).to_finding(&p);
        mine.title = "Hard-coded password".into();
        mine.severity = Severity::P1;
        // Less sure than the tool, and still the words that are kept.
        mine.confidence = 0.55;
        mine.line_start = Some(3);
        mine.line_end = Some(4);
        let mut all = vec![
            judged("security_reviewer", mine.clone()),
            judged("analyzer:bandit", lead(4).to_finding(&p)),
            judged("analyzer:bandit", lead(11).to_finding(&p)),
        ];
        anchor_to_overlapping(&mut all);
        let gated = crate::review::dedup::merge_and_gate(all.clone(), 0.5);
        assert_eq!(gated.findings.len(), 2, "{:?}", gated.findings);
        let merged = &gated.findings[0];
        assert_eq!(merged.title, "Hard-coded password");
        let who: Vec<&str> = merged
            .reporters
            .iter()
            .map(|r| r.persona.as_str())
            .collect();
        assert_eq!(who, ["analyzer:bandit", "security_reviewer"]);
        assert_eq!(
            gated.findings[1].line_start,
            Some(11),
            "a hit elsewhere stays its own"
        );
        // With a symbol, the symbol is the anchor.
        mine.symbol = Some("password".into());
        let mut all = vec![
            judged("security_reviewer", mine),
            judged("analyzer:bandit", lead(4).to_finding(&p)),
        ];
        anchor_to_overlapping(&mut all);
        assert_eq!(all[1].reported.finding.symbol.as_deref(), Some("password"));
        assert_eq!(
            crate::review::dedup::merge_and_gate(all, 0.5)
                .findings
                .len(),
            1
        );
    }

    #[test]
    fn prompt_list_is_bounded_with_a_visible_rest() {
        let leads: Vec<Lead> = (1..=25)
            .map(|i| Lead {
                tool: "ruff".into(),
                file: "app.py".into(),
                line: i,
                end_line: None,
                rule: "E501".into(),
                message: format!("line {i} too long"),
                severity: Severity::P3,
                category: "lint".into(),
                confidence: 0.6,
            })
            .collect();
        let all = Leads {
            runs: Vec::new(),
            leads,
        };
        let mine = all.on_files(&["app.py".to_string()]);
        let text = leads_list(&mine, MAX_LEADS_PER_PROMPT);
        assert_eq!(text.lines().count(), 21);
        assert!(text.contains("- app.py:1 [ruff E501] line 1 too long"));
        assert!(text.contains("… 5 more leads on these files not shown"));
        assert!(all.on_files(&["other.py".to_string()]).is_empty());
    }
}
