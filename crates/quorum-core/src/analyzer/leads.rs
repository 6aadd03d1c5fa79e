//! A hit tied to a pack file is a [`Lead`]: a place for a specialist to look (a bounded,
//! delimited list in its prompt) and a candidate finding grounding and the verifier must
//! confirm. [`Leads`] (with each tool's [`AnalyzerRun`]) are recorded with the review's scope;
//! before the gate, unchecked candidates are dropped and a candidate inside another report's
//! lines takes its anchor.

use crate::pack::ContextPack;
use crate::review::finding::{Dropped, RawFinding, Severity, Verdict};
use crate::review::judged::Judged;
use crate::weakness::Harm;
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
    /// The harm its rule names (the catalog's `harm`); older records read as maintainability.
    #[serde(default)]
    pub harm: Harm,
    /// The CWE the tool or the rule's weakness class names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwe: Option<u32>,
    /// The weakness class of its rule (`config/weaknesses.yaml`), whose question the verifier
    /// answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weakness: Option<String>,
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
            // The verifier sees this; it names the rule (and the weakness the tool gives it),
            // never who reported it.
            why_it_matters: match self.cwe {
                Some(cwe) => format!("rule {} (CWE-{cwe}): {}", self.rule, self.message),
                None => format!("rule {}: {}", self.rule, self.message),
            },
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

    /// The leads that are review candidates, most harmful first ([`review_order`]): every
    /// lead but those of harm `style`, which only `lint` (a flow's `lint_findings`) admits.
    pub fn reviewable(&self, lint: bool) -> Vec<&Lead> {
        let mut out: Vec<&Lead> = self
            .leads
            .iter()
            .filter(|l| lint || l.harm != Harm::Style)
            .collect();
        out.sort_by(|a, b| review_order(a, b));
        out
    }

    /// The review candidates on any of `files`, most harmful first (what a specialist's prompt
    /// lists: a style hit there is what a small model copies, lines and all).
    pub fn on_files(&self, files: &[String], lint: bool) -> Vec<&Lead> {
        let mut out = self.reviewable(lint);
        out.retain(|l| files.contains(&l.file));
        out
    }

    /// The style leads counted per tool and rule, most frequent first (the report's `lint`).
    pub fn lint_counts(&self) -> Vec<LintCount> {
        let mut counts: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
        for l in self.leads.iter().filter(|l| l.harm == Harm::Style) {
            *counts
                .entry((l.tool.as_str(), l.rule.as_str()))
                .or_default() += 1;
        }
        let mut out: Vec<LintCount> = counts
            .into_iter()
            .map(|((tool, rule), count)| LintCount {
                tool: tool.to_string(),
                rule: rule.to_string(),
                count,
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.rule.cmp(&b.rule)));
        out
    }

    /// Only the leads on `files` (the runs stay: they are what the report says).
    pub fn for_files(&self, files: &[String]) -> Leads {
        Leads {
            runs: self.runs.clone(),
            leads: self
                .leads
                .iter()
                .filter(|l| files.contains(&l.file))
                .cloned()
                .collect(),
        }
    }
}

/// The order in which leads are verified and listed: by harm (security first), then severity,
/// then the tool's confidence (highest first), then file and line — so a budget that runs out
/// leaves the trivia unchecked, never a security lead while lint was checked.
pub fn review_order(a: &Lead, b: &Lead) -> std::cmp::Ordering {
    (a.harm, a.severity)
        .cmp(&(b.harm, b.severity))
        .then(b.confidence.total_cmp(&a.confidence))
        .then((&a.file, a.line, &a.tool, &a.rule).cmp(&(&b.file, b.line, &b.tool, &b.rule)))
}

/// Style hits of one rule, counted (report.json `lint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LintCount {
    pub tool: String,
    pub rule: String,
    pub count: usize,
}

/// Whether `r` is an analyzer's lead (credited to `analyzer:<tool>`) rather than a reviewer's
/// finding.
pub fn is_lead(r: &crate::review::finding::Reported) -> bool {
    r.reporter.persona.starts_with(REPORTER_PREFIX)
}

/// What became of the analyzer candidates no model checked.
#[derive(Debug, Default)]
pub struct Unchecked {
    /// Everything else, as it was.
    pub kept: Vec<Judged>,
    /// Unchecked leads of high harm (security, correctness): reported apart as unverified.
    pub reported: Vec<Judged>,
    /// Unchecked leads of lower harm: dropped as `unconfirmed_lead`.
    pub dropped: Vec<Dropped>,
}

/// Analyzer candidates no model checked (over `max_verifications`, the budget spent, the
/// verifier unavailable) are not findings: a tool's hit becomes one only once the verifier
/// confirmed it, unlike a specialist's claim, which stays UNVERIFIED and marked. Without this,
/// a noisy tool would fill the report with unchecked findings. Those whose lead in `leads` is
/// of high harm are never dropped unreported: they are set apart as unverified leads; the
/// rest leave for `dropped`.
pub fn take_unchecked_leads(judged: Vec<Judged>, leads: &[Lead]) -> Unchecked {
    let harm_of = |j: &Judged| {
        let f = &j.reported.finding;
        let rule = f.category.rsplit('/').next().unwrap_or_default();
        let same = |l: &&Lead| {
            l.reporter_name() == j.reported.reporter.persona
                && Some(&l.file) == f.file.as_ref()
                && l.rule == rule
        };
        leads
            .iter()
            .filter(same)
            .find(|l| Some(l.line) == f.line_start)
            .or_else(|| leads.iter().find(same))
            .map(|l| l.harm)
    };
    let mut out = Unchecked::default();
    for j in judged {
        if j.verdict == Verdict::Unverified && is_lead(&j.reported) {
            if harm_of(&j).is_some_and(Harm::is_high) {
                out.reported.push(j);
                continue;
            }
            out.dropped.push(Dropped {
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                reason: format!("analyzer lead not confirmed: {}", j.reason),
                verdict: Some(Verdict::Unverified),
                removed_by: "unconfirmed_lead".into(),
            });
        } else {
            out.kept.push(j);
        }
    }
    out
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
            harm: Default::default(),
            cwe: None,
            weakness: None,
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

    fn bandit_lead(rule: &str, line: u32, harm: Harm) -> Lead {
        Lead {
            tool: "bandit".into(),
            file: "app.py".into(),
            line,
            end_line: None,
            rule: rule.into(),
            message: "password".into(),
            severity: Severity::P2,
            category: "security".into(),
            confidence: 0.7,
            harm,
            cwe: None,
            weakness: None,
        }
    }

    #[test]
    fn unchecked_leads_of_high_harm_are_set_apart_the_rest_dropped_specialists_kept() {
        use crate::review::finding::{Reported, Reporter};
        let p = pack();
        let judged = |persona: &str, verdict: Verdict, lead: &Lead| Judged {
            reported: Reported {
                task_id: "t".into(),
                reporter: Reporter {
                    persona: persona.into(),
                    model: String::new(),
                    node: "n".into(),
                    carried_from: None,
                },
                finding: lead.to_finding(&p),
            },
            verdict,
            reason: "over the flow's max_verifications (4)".into(),
            deterministic: false,
            notes: Vec::new(),
            ballot: None,
            rescored: None,
        };
        let secret = bandit_lead("B105", 4, Harm::Security);
        let style = bandit_lead("X1", 5, Harm::Style);
        let leads = vec![secret.clone(), style.clone()];
        let out = take_unchecked_leads(
            vec![
                judged("analyzer:bandit", Verdict::Unverified, &secret),
                judged("analyzer:bandit", Verdict::Unverified, &style),
                judged("analyzer:bandit", Verdict::Confirmed, &secret),
                judged("security_reviewer", Verdict::Unverified, &style),
            ],
            &leads,
        );
        assert_eq!(out.kept.len(), 2);
        assert_eq!(out.kept[0].verdict, Verdict::Confirmed);
        assert_eq!(out.kept[1].reported.reporter.persona, "security_reviewer");
        assert_eq!(out.reported.len(), 1, "the security lead is reported");
        assert_eq!(out.reported[0].reported.finding.line_start, Some(4));
        assert_eq!(out.dropped.len(), 1, "the style lead is dropped");
        assert_eq!(
            out.dropped[0].reason,
            "analyzer lead not confirmed: over the flow's max_verifications (4)"
        );
        // A lead the scope does not know (an older record) is dropped, as before.
        let out = take_unchecked_leads(
            vec![judged("analyzer:bandit", Verdict::Unverified, &secret)],
            &[],
        );
        assert_eq!((out.reported.len(), out.dropped.len()), (0, 1));
    }

    #[test]
    fn leads_are_reviewed_most_harmful_first_and_style_only_when_asked() {
        let mut lint = bandit_lead("F401", 1, Harm::Style);
        lint.tool = "ruff".into();
        let mut sure = bandit_lead("B608", 9, Harm::Security);
        sure.confidence = 0.8;
        let unsure = bandit_lead("B608", 3, Harm::Security);
        let bug = bandit_lead("B006", 2, Harm::Correctness);
        let all = Leads {
            runs: Vec::new(),
            leads: vec![
                lint.clone(),
                bug.clone(),
                unsure.clone(),
                sure.clone(),
                lint,
            ],
        };
        let order: Vec<u32> = all.reviewable(false).iter().map(|l| l.line).collect();
        assert_eq!(
            order,
            [9, 3, 2],
            "security (most confident first), then correctness"
        );
        assert_eq!(all.reviewable(true).len(), 5);
        assert_eq!(all.reviewable(true)[3].harm, Harm::Style);
        assert_eq!(all.on_files(&["app.py".into()], false).len(), 3);
        assert_eq!(
            all.lint_counts(),
            vec![LintCount {
                tool: "ruff".into(),
                rule: "F401".into(),
                count: 2
            }]
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
            harm: Default::default(),
            cwe: None,
            weakness: None,
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
                harm: Harm::Maintainability,
                cwe: None,
                weakness: None,
            })
            .collect();
        let all = Leads {
            runs: Vec::new(),
            leads,
        };
        let mine = all.on_files(&["app.py".to_string()], false);
        let text = leads_list(&mine, MAX_LEADS_PER_PROMPT);
        assert_eq!(text.lines().count(), 21);
        assert!(text.contains("- app.py:1 [ruff E501] line 1 too long"));
        assert!(text.contains("… 5 more leads on these files not shown"));
        assert!(all.on_files(&["other.py".to_string()], false).is_empty());
    }
}
