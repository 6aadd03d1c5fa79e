//! Anchors, dedup and the confidence gate: many reports of one problem become one finding.
//!
//! The anchor is `file#symbol` when a symbol is named, else `file:L{bucket}` with 5-line buckets
//! (`(line_start - 1) / 5`). Findings sharing an anchor merge: reporters are unioned, the highest
//! severity and confidence win, the best-verdict (CONFIRMED > PLAUSIBLE > UNVERIFIABLE) report's
//! text is kept. A merged finding below the gate is a residual concern unless two or more distinct
//! personas reported it, in which case it is promoted.
//!
//! Corroboration counts personas, not reports: the same persona run on two tasks (or twice after
//! a retry) sees the problem through the same lens, so it is not an independent second opinion.
//! Everything here is deterministic: the same judged reports in the same order always give the
//! same ids, order and text.

use crate::review::finding::{Dropped, Finding, RawFinding, Reporter, Verdict};
use crate::review::judged::Judged;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

pub const BUCKET_LINES: u32 = 5;

/// The merge key of a finding: `file#symbol`, else `file:L{bucket}`, else `file`; without a file,
/// `?:{title}` (lowercased, whitespace collapsed) so only identical complaints merge.
pub fn anchor(finding: &RawFinding) -> String {
    let Some(file) = normalized_file(finding.file.as_deref()) else {
        let title = finding
            .title
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        return format!("?:{title}");
    };
    if let Some(symbol) = normalized_symbol(finding.symbol.as_deref()) {
        return format!("{file}#{symbol}");
    }
    match finding.line_start {
        Some(line) => format!("{file}:L{}", (line.max(1) - 1) / BUCKET_LINES),
        None => file,
    }
}

/// Path as the pack lists it: trimmed, forward slashes, no leading "./"; empty means none.
fn normalized_file(file: Option<&str>) -> Option<String> {
    let f = file?.trim().replace('\\', "/");
    let mut f = f.as_str();
    while let Some(rest) = f.strip_prefix("./") {
        f = rest;
    }
    (!f.is_empty()).then(|| f.to_string())
}

/// Symbol trimmed with a trailing "()" removed, so "foo()" and "foo" meet; case is kept because
/// in most languages `Foo` and `foo` are different things.
fn normalized_symbol(symbol: Option<&str>) -> Option<String> {
    let s = symbol?.trim();
    let s = s.strip_suffix("()").unwrap_or(s).trim_end();
    (!s.is_empty()).then(|| s.to_string())
}

/// Result of merging and gating.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gated {
    /// Survivors, sorted by severity then file then line; ids are "F001", "F002", ...
    pub findings: Vec<Finding>,
    /// Below the gate and not corroborated: kept out of `findings`, shown as residual concerns.
    pub residual: Vec<Finding>,
    /// HALLUCINATED findings (with the grounding/verifier reason).
    pub dropped: Vec<Dropped>,
    /// How many reports were merged into another (reports - distinct anchors among survivors).
    pub merged: usize,
    /// In a change review: findings and residual concerns on lines the change did not touch
    /// (see [`crate::scope::ReviewScope::apply`]); always empty out of [`merge_and_gate`].
    pub pre_existing: Vec<Finding>,
    /// Analyzer leads of high harm (security, correctness) that no model checked before the
    /// budget ran out: reported apart, never silently dropped ("U001"..).
    #[serde(default)]
    pub unverified: Vec<Finding>,
}

/// Merge judged reports by anchor, drop the hallucinated, and split the rest at `gate`. A
/// finding that names no file or quotes no evidence, and so could not be checked
/// (UNVERIFIABLE by grounding), is a residual concern whatever its confidence or
/// corroboration.
///
/// `findings` and `residual` are sorted by severity, file, first line, anchor and numbered
/// "F001".. and "R001".. in that order; `dropped` keeps input order.
pub fn merge_and_gate(judged: Vec<Judged>, gate: f64) -> Gated {
    let mut out = Gated::default();
    // Groups in first-seen order, so ties in the final sort still resolve by input order.
    let mut groups: Vec<(String, Vec<Judged>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut reports = 0usize;
    for j in judged {
        if j.verdict == Verdict::Hallucinated {
            out.dropped.push(Dropped {
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                removed_by: crate::review::finding::removed_by(j.deterministic, &j.reason),
                reason: j.reason,
                verdict: Some(Verdict::Hallucinated),
            });
            continue;
        }
        reports += 1;
        let key = anchor(&j.reported.finding);
        match index.get(&key) {
            Some(&i) => groups[i].1.push(j),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![j]));
            }
        }
    }
    out.merged = reports - groups.len();

    let mut kept = Vec::new();
    let mut residual = Vec::new();
    for (key, members) in groups {
        let Some((mut finding, personas)) = merge_group(key, &members) else {
            continue;
        };
        let nothing_to_check = finding.file.is_none() || finding.evidence.trim().is_empty();
        if finding.verdict == Verdict::Unverifiable && nothing_to_check {
            // Nobody could check a claim that names no file or quotes nothing: it stays
            // visible, but below everything verification stood behind, and it never closes a
            // merge gate.
            let what = if finding.file.is_none() {
                "no location given"
            } else {
                "no evidence quoted"
            };
            finding.notes.push(format!(
                "{what}: it could not be checked against the source"
            ));
            residual.push(finding);
        } else if finding.confidence >= gate {
            kept.push(finding);
        } else if personas >= 2 {
            kept.push(Finding {
                promoted: true,
                ..finding
            });
        } else {
            residual.push(finding);
        }
    }
    out.findings = number(kept, "F");
    out.residual = number(residual, "R");
    out
}

fn verdict_rank(v: Verdict) -> u8 {
    match v {
        Verdict::Confirmed => 0,
        Verdict::Plausible => 1,
        Verdict::Unverifiable => 2,
        Verdict::Unverified => 3,
        Verdict::Hallucinated => 4,
    }
}

/// A confidence usable for comparison and gating: NaN counts as no confidence at all.
fn sane_confidence(c: f64) -> f64 {
    if c.is_nan() {
        0.0
    } else {
        c.clamp(0.0, 1.0)
    }
}

/// One finding from the reports sharing an anchor, and how many distinct personas reported it.
/// The text comes from the best-verdict report, highest confidence among those, earliest on ties.
fn merge_group(key: String, members: &[Judged]) -> Option<(Finding, usize)> {
    let best = members.iter().reduce(|best, j| {
        let by_verdict = verdict_rank(j.verdict).cmp(&verdict_rank(best.verdict));
        let by_confidence = sane_confidence(best.reported.finding.confidence)
            .partial_cmp(&sane_confidence(j.reported.finding.confidence))
            .unwrap_or(Ordering::Equal);
        if by_verdict.then(by_confidence) == Ordering::Less {
            j
        } else {
            best
        }
    })?;
    let reporters: BTreeSet<Reporter> = members
        .iter()
        .map(|j| j.reported.reporter.clone())
        .collect();
    let personas: BTreeSet<&str> = members
        .iter()
        .map(|j| j.reported.reporter.persona.as_str())
        .collect();
    let severity = members.iter().map(|j| j.reported.finding.severity).min()?;
    let confidence = members
        .iter()
        .map(|j| sane_confidence(j.reported.finding.confidence))
        .fold(0.0, f64::max);
    let f = &best.reported.finding;
    // Carried only when no reporter was asked in this review.
    let carried_from = reporters
        .iter()
        .map(|r| r.carried_from.clone())
        .collect::<Option<BTreeSet<String>>>()
        .and_then(|flows| flows.into_iter().next_back());
    // The weakness class: the best report's, else a corroborating report's (a tool's rule),
    // else the CWE a report names itself (a tool's own, such as bandit's `issue_cwe`) — so a
    // finding counts under the same weakness as the hit it came from.
    let classes = crate::weakness::Weaknesses::shipped();
    let reports = || std::iter::once(best).chain(members.iter());
    let cwe = reports()
        .find_map(|j| {
            let r = &j.reported.finding;
            classes.of_finding(&r.category, &r.title)?.cwe
        })
        .or_else(|| {
            reports().find_map(|j| crate::weakness::cwe_in(&j.reported.finding.why_it_matters))
        });
    let finding = Finding {
        id: String::new(),
        title: f.title.clone(),
        severity,
        confidence,
        category: f.category.clone(),
        file: normalized_file(f.file.as_deref()),
        line_start: f.line_start,
        line_end: f.line_end,
        symbol: f.symbol.clone(),
        evidence: f.evidence.clone(),
        why_it_matters: f.why_it_matters.clone(),
        suggested_fix: f.suggested_fix.clone(),
        verdict: best.verdict,
        reporters: reporters.into_iter().collect(),
        anchor: key,
        promoted: false,
        notes: best.notes.clone(),
        routing: f.routing.clone(),
        rescored: crate::review::judged::rescored_of(best, members),
        fresh_eyes: false,
        carried_from,
        seen_before: None,
        cwe,
    };
    Some((finding, personas.len()))
}

/// Sort and re-assign ids after findings moved between lists.
pub(crate) fn renumber(findings: Vec<Finding>, prefix: &str) -> Vec<Finding> {
    number(findings, prefix)
}

/// Sort (checked before UNVERIFIED, then severity, file, first line, anchor; located before
/// unlocated) and assign ids. A finding nobody could check is listed after every checked one,
/// whatever its severity, so the top of the report is what verification stood behind.
fn number(mut findings: Vec<Finding>, prefix: &str) -> Vec<Finding> {
    findings.sort_by(|a, b| {
        (a.verdict == Verdict::Unverified)
            .cmp(&(b.verdict == Verdict::Unverified))
            .then_with(|| a.severity.cmp(&b.severity))
            .then_with(|| a.file.is_none().cmp(&b.file.is_none()))
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.line_start.is_none().cmp(&b.line_start.is_none()))
            .then_with(|| a.line_start.cmp(&b.line_start))
            .then_with(|| a.anchor.cmp(&b.anchor))
    });
    for (i, f) in findings.iter_mut().enumerate() {
        f.id = format!("{prefix}{:03}", i + 1);
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::finding::{Reported, Severity};

    fn raw(file: Option<&str>, line: Option<u32>, symbol: Option<&str>) -> RawFinding {
        RawFinding {
            title: "Token  compared\twith ==".into(),
            severity: Severity::P2,
            confidence: 0.9,
            category: "security/timing".into(),
            file: file.map(str::to_string),
            line_start: line,
            line_end: line,
            symbol: symbol.map(str::to_string),
            evidence: "if token == expected".into(),
            why_it_matters: "timing leak".into(),
            suggested_fix: "constant-time compare".into(),
            routing: Default::default(),
        }
    }

    fn judged(
        persona: &str,
        task: &str,
        finding: RawFinding,
        verdict: Verdict,
        confidence: f64,
    ) -> Judged {
        Judged {
            reported: Reported {
                task_id: task.into(),
                reporter: Reporter {
                    persona: persona.into(),
                    model: "m".into(),
                    node: "n1".into(),
                    carried_from: None,
                },
                finding: RawFinding {
                    confidence,
                    ..finding
                },
            },
            verdict,
            reason: format!("{persona} says {}", verdict.as_str()),
            deterministic: false,
            notes: Vec::new(),
            ballot: None,
            rescored: None,
        }
    }

    #[test]
    fn anchor_prefers_symbol_then_bucket_then_file_then_title() {
        let a = |file, line, sym| anchor(&raw(file, line, sym));
        assert_eq!(
            a(Some("src/a.rs"), Some(3), Some(" verify() ")),
            "src/a.rs#verify"
        );
        assert_eq!(
            a(Some("src/a.rs"), Some(3), Some("verify")),
            "src/a.rs#verify"
        );
        assert_eq!(a(Some("src/a.rs"), Some(3), Some("  ")), "src/a.rs:L0");
        assert_eq!(a(Some("src/a.rs"), None, None), "src/a.rs");
        assert_eq!(a(None, Some(3), Some("verify")), "?:token compared with ==");
        assert_eq!(a(Some(""), None, None), "?:token compared with ==");
    }

    #[test]
    fn anchor_buckets_five_lines() {
        let a = |line| anchor(&raw(Some("a.rs"), Some(line), None));
        for line in 1..=5 {
            assert_eq!(a(line), "a.rs:L0", "line {line}");
        }
        assert_eq!(a(6), "a.rs:L1");
        assert_eq!(a(10), "a.rs:L1");
        assert_eq!(a(11), "a.rs:L2");
        // Line 0 is nonsense from a model; it must not underflow.
        assert_eq!(a(0), "a.rs:L0");
    }

    #[test]
    fn anchor_normalises_paths() {
        let a = |file| anchor(&raw(Some(file), Some(7), None));
        assert_eq!(a("./src/auth.rs"), "src/auth.rs:L1");
        assert_eq!(a("././src/auth.rs"), "src/auth.rs:L1");
        assert_eq!(a(" src\\auth.rs "), "src/auth.rs:L1");
    }

    #[test]
    fn unverified_findings_are_kept_marked_after_checked_ones_with_their_notes() {
        let mut critical = raw(Some("src/a.rs"), Some(1), Some("a"));
        critical.severity = Severity::P0;
        let minor = {
            let mut m = raw(Some("src/b.rs"), Some(9), Some("b"));
            m.severity = Severity::P3;
            m
        };
        let mut unverified = judged("p", "t1", critical, Verdict::Unverified, 0.9);
        unverified.notes = vec!["not verified: the verifier call failed".into()];
        let g = merge_and_gate(
            vec![
                unverified,
                judged("q", "t2", minor, Verdict::Plausible, 0.9),
            ],
            0.5,
        );
        assert!(g.dropped.is_empty());
        assert_eq!(g.findings.len(), 2);
        // The checked P3 comes before the unverified P0.
        assert_eq!(g.findings[0].verdict, Verdict::Plausible);
        assert_eq!(g.findings[1].verdict, Verdict::Unverified);
        assert_eq!(g.findings[1].id, "F002");
        assert_eq!(
            g.findings[1].notes,
            vec!["not verified: the verifier call failed".to_string()]
        );
        let json = serde_json::to_value(&g.findings[1]).unwrap();
        assert_eq!(json["verdict"], "UNVERIFIED");
        // An empty notes list stays out of report.json (schema_version 1 unchanged).
        assert!(serde_json::to_value(&g.findings[0])
            .unwrap()
            .get("notes")
            .is_none());
    }

    #[test]
    fn merge_keeps_max_severity_and_confidence_and_unions_reporters() {
        let mut low = raw(Some("./src/auth.rs"), Some(12), None);
        low.severity = Severity::P3;
        low.title = "weak".into();
        let mut high = raw(Some("src/auth.rs"), Some(14), None);
        high.severity = Severity::P1;
        high.title = "strong".into();
        let g = merge_and_gate(
            vec![
                judged(
                    "security_sentinel",
                    "t1",
                    low.clone(),
                    Verdict::Plausible,
                    0.95,
                ),
                judged("correctness", "t2", high, Verdict::Confirmed, 0.7),
                judged("security_sentinel", "t3", low, Verdict::Unverifiable, 0.5),
            ],
            0.6,
        );
        assert_eq!(g.merged, 2);
        assert_eq!(g.findings.len(), 1);
        let f = &g.findings[0];
        assert_eq!(f.severity, Severity::P1);
        assert_eq!(f.confidence, 0.95);
        assert_eq!(f.verdict, Verdict::Confirmed);
        // Text from the CONFIRMED report even though another had higher confidence.
        assert_eq!(f.title, "strong");
        assert_eq!(f.line_start, Some(14));
        assert_eq!(f.file.as_deref(), Some("src/auth.rs"));
        assert_eq!(f.anchor, "src/auth.rs:L2");
        let personas: Vec<_> = f.reporters.iter().map(|r| r.persona.as_str()).collect();
        assert_eq!(personas, vec!["correctness", "security_sentinel"]);
        assert!(!f.promoted);
    }

    #[test]
    fn a_finding_names_its_class_cwe_else_the_one_its_tool_gave() {
        let mut classed = raw(Some("a.py"), Some(3), None);
        classed.category = "security/B608".into();
        let mut tool_only = raw(Some("b.py"), Some(3), None);
        tool_only.category = "security/B603".into();
        tool_only.why_it_matters = "rule B603 (CWE-78): subprocess call".into();
        let mut plain = raw(Some("c.py"), Some(3), None);
        plain.title = "An unclear name".into();
        plain.category = "maintainability".into();
        plain.why_it_matters = "readers stumble".into();
        let g = merge_and_gate(
            vec![
                judged("analyzer:bandit", "scope", classed, Verdict::Confirmed, 0.8),
                judged(
                    "analyzer:bandit",
                    "scope",
                    tool_only,
                    Verdict::Confirmed,
                    0.8,
                ),
                judged("security_sentinel", "t1", plain, Verdict::Confirmed, 0.8),
            ],
            0.5,
        );
        let cwe = |file: &str| {
            g.findings
                .iter()
                .find(|f| f.file.as_deref() == Some(file))
                .unwrap()
                .cwe
        };
        assert_eq!(cwe("a.py"), Some(89));
        assert_eq!(cwe("b.py"), Some(78));
        assert_eq!(cwe("c.py"), None);
    }

    #[test]
    fn text_tie_on_verdict_goes_to_highest_confidence() {
        let mut a = raw(Some("a.rs"), Some(1), None);
        a.title = "first".into();
        let mut b = a.clone();
        b.title = "second".into();
        let g = merge_and_gate(
            vec![
                judged("p", "t1", a, Verdict::Plausible, 0.7),
                judged("q", "t2", b, Verdict::Plausible, 0.8),
            ],
            0.5,
        );
        assert_eq!(g.findings[0].title, "second");
    }

    #[test]
    fn hallucinated_is_dropped_with_reason() {
        let g = merge_and_gate(
            vec![
                judged(
                    "p",
                    "t1",
                    raw(Some("a.rs"), Some(1), None),
                    Verdict::Hallucinated,
                    0.9,
                ),
                judged(
                    "q",
                    "t2",
                    raw(Some("a.rs"), Some(2), None),
                    Verdict::Confirmed,
                    0.9,
                ),
            ],
            0.5,
        );
        assert_eq!(
            g.dropped,
            vec![Dropped {
                title: "Token  compared\twith ==".into(),
                file: Some("a.rs".into()),
                reason: "p says HALLUCINATED".into(),
                verdict: Some(Verdict::Hallucinated),
                removed_by: "verifier".into(),
            }]
        );
        // The hallucinated report neither merges into nor corroborates the surviving one.
        assert_eq!(g.merged, 0);
        assert_eq!(g.findings.len(), 1);
        assert_eq!(g.findings[0].reporters.len(), 1);
    }

    #[test]
    fn gate_sends_lone_low_confidence_to_residual() {
        let g = merge_and_gate(
            vec![
                judged(
                    "p",
                    "t1",
                    raw(Some("a.rs"), Some(1), None),
                    Verdict::Plausible,
                    0.4,
                ),
                judged(
                    "p",
                    "t1",
                    raw(Some("b.rs"), Some(1), None),
                    Verdict::Unverifiable,
                    0.3,
                ),
                judged(
                    "p",
                    "t1",
                    raw(Some("c.rs"), Some(1), None),
                    Verdict::Confirmed,
                    0.6,
                ),
            ],
            0.6,
        );
        let ids: Vec<_> = g
            .findings
            .iter()
            .map(|f| (f.id.as_str(), f.anchor.as_str()))
            .collect();
        assert_eq!(ids, vec![("F001", "c.rs:L0")]);
        let res: Vec<_> = g
            .residual
            .iter()
            .map(|f| (f.id.as_str(), f.anchor.as_str()))
            .collect();
        assert_eq!(res, vec![("R001", "a.rs:L0"), ("R002", "b.rs:L0")]);
        assert!(g.residual.iter().all(|f| !f.promoted));
    }

    #[test]
    fn a_finding_with_nothing_to_check_is_a_residual_concern_however_sure_or_severe() {
        let mut nowhere = raw(None, None, None);
        nowhere.severity = Severity::P0;
        let g = merge_and_gate(
            vec![
                judged(
                    "api_designer",
                    "t1",
                    nowhere.clone(),
                    Verdict::Unverifiable,
                    0.9,
                ),
                judged(
                    "security_sentinel",
                    "t2",
                    nowhere,
                    Verdict::Unverifiable,
                    0.9,
                ),
                judged(
                    "p",
                    "t3",
                    raw(Some("a.rs"), Some(1), None),
                    Verdict::Confirmed,
                    0.7,
                ),
            ],
            0.5,
        );
        assert_eq!(g.findings.len(), 1, "{:?}", g.findings);
        assert_eq!(g.findings[0].file.as_deref(), Some("a.rs"));
        assert_eq!(g.residual.len(), 1);
        assert!(
            !g.residual[0].promoted,
            "two personas do not make it checkable"
        );
        assert!(g.residual[0]
            .notes
            .iter()
            .any(|n| n.contains("no location given")));
        // Located but quoting nothing: the same.
        let mut bare = raw(Some("src/app.py"), Some(12), None);
        bare.evidence = "  ".into();
        let g = merge_and_gate(
            vec![judged(
                "api_designer",
                "t1",
                bare,
                Verdict::Unverifiable,
                0.9,
            )],
            0.5,
        );
        assert!(g.findings.is_empty(), "{:?}", g.findings);
        assert!(g.residual[0]
            .notes
            .iter()
            .any(|n| n.contains("no evidence quoted")));
    }

    #[test]
    fn two_personas_promote_below_gate() {
        let f = || raw(Some("a.rs"), Some(3), Some("check"));
        let g = merge_and_gate(
            vec![
                judged("security_sentinel", "t1", f(), Verdict::Unverifiable, 0.3),
                judged("correctness", "t2", f(), Verdict::Unverifiable, 0.4),
            ],
            0.6,
        );
        assert!(g.residual.is_empty());
        assert_eq!(g.findings.len(), 1);
        assert!(g.findings[0].promoted);
        assert_eq!(g.findings[0].confidence, 0.4);
        assert_eq!(g.merged, 1);
    }

    #[test]
    fn same_persona_twice_is_not_corroboration() {
        let f = || raw(Some("a.rs"), Some(3), None);
        let g = merge_and_gate(
            vec![
                judged("security_sentinel", "t1", f(), Verdict::Plausible, 0.3),
                judged("security_sentinel", "t2", f(), Verdict::Plausible, 0.4),
            ],
            0.6,
        );
        assert!(g.findings.is_empty());
        assert_eq!(g.residual.len(), 1);
        assert_eq!(g.residual[0].id, "R001");
        assert_eq!(g.merged, 1);
    }

    #[test]
    fn ordering_and_ids_are_deterministic() {
        let mk = |file: Option<&str>, line: Option<u32>, sev: Severity| {
            let mut r = raw(file, line, None);
            r.severity = sev;
            r
        };
        let input = vec![
            judged(
                "p",
                "t",
                mk(Some("b.rs"), Some(40), Severity::P2),
                Verdict::Confirmed,
                0.9,
            ),
            judged(
                "p",
                "t",
                mk(None, None, Severity::P0),
                Verdict::Confirmed,
                0.9,
            ),
            judged(
                "p",
                "t",
                mk(Some("a.rs"), Some(90), Severity::P2),
                Verdict::Confirmed,
                0.9,
            ),
            judged(
                "p",
                "t",
                mk(Some("b.rs"), Some(2), Severity::P2),
                Verdict::Confirmed,
                0.9,
            ),
            judged(
                "p",
                "t",
                mk(Some("z.rs"), None, Severity::P0),
                Verdict::Confirmed,
                0.9,
            ),
            judged(
                "p",
                "t",
                mk(Some("a.rs"), Some(7), Severity::P1),
                Verdict::Plausible,
                0.9,
            ),
        ];
        let g = merge_and_gate(input.clone(), 0.5);
        let got: Vec<_> = g
            .findings
            .iter()
            .map(|f| (f.id.clone(), f.anchor.clone()))
            .collect();
        let want = [
            ("F001", "z.rs"),
            ("F002", "?:token compared with =="),
            ("F003", "a.rs:L1"),
            ("F004", "a.rs:L17"),
            ("F005", "b.rs:L0"),
            ("F006", "b.rs:L7"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(i, a)| (i.to_string(), a.to_string()))
            .collect();
        assert_eq!(got, want);
        let mut reversed = input;
        reversed.reverse();
        assert_eq!(merge_and_gate(reversed, 0.5).findings, g.findings);
    }

    #[test]
    fn nan_confidence_is_below_any_gate() {
        let g = merge_and_gate(
            vec![judged(
                "p",
                "t",
                raw(Some("a.rs"), Some(1), None),
                Verdict::Confirmed,
                f64::NAN,
            )],
            0.1,
        );
        assert_eq!(g.residual.len(), 1);
        assert_eq!(g.residual[0].confidence, 0.0);
    }
}
