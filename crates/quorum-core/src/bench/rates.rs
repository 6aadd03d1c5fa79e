//! Scoring labelled files at file and class level, for a review and for its analyzers alone.
//!
//! A [`Flag`] is anything that says "this file has a weakness of this class here": one of the
//! report's surviving findings, or one analyzer hit as the tool gave it (no grounding, no
//! verifier, no model). A row is *flagged* when a flag is on its file, of its class
//! ([`agrees`]) and, when the row has lines, within [`LINE_SLACK`] lines of them. A vulnerable
//! row flagged is a true positive, a safe row flagged a false positive; recall (TPR) =
//! TP/(TP+FN), false-positive rate = FP/(FP+TN), precision = TP/(TP+FP), and Youden's index =
//! TPR − FPR, which is 0 for a tool that flags every file or none and 1 for a perfect one.
//!
//! One scorer, [`score_flags`], scores both sides, so the difference of their Youden indexes is
//! what the review's models and verifier add over its analyzers on the same files.

use super::answer_key::LINE_SLACK;
use super::labelled::{LabelledRow, Resolved};
use crate::analyzer::{Lead, REPORTER_PREFIX};
use crate::report::Report;
use crate::review::finding::{Dropped, Finding};
use crate::weakness::{cwe_in, Weakness, Weaknesses};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many of the rows left out (file not in the reviewed directory) a report names.
const SKIPPED_NAMED: usize = 10;

/// A claim that a file has a weakness of a class: a finding or an analyzer hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    pub file: String,
    /// First and last line; absent when the claim names none.
    pub lines: Option<(u32, u32)>,
    pub cwe: Option<u32>,
    /// Its weakness class id (`config/weaknesses.yaml`), when it has one.
    pub weakness: Option<String>,
    /// What words are looked for in: a finding's category and title, a hit's category, rule
    /// and message.
    pub text: String,
}

impl Flag {
    /// A report finding as a flag (none without a file). Its CWE is the report's, else one its
    /// words name; its class is what its category and title name.
    pub fn of_finding(f: &Finding, classes: &Weaknesses) -> Option<Flag> {
        let file = f.file.as_deref()?.trim_start_matches("./").to_string();
        let text = format!("{} {}", f.category, f.title);
        let lines = f
            .line_start
            .filter(|s| *s > 0)
            .map(|s| (s, f.line_end.unwrap_or(s).max(s)));
        Some(Flag {
            file,
            lines,
            cwe: f.cwe.or_else(|| cwe_in(&text)),
            weakness: classes
                .of_finding(&f.category, &f.title)
                .map(|w| w.id.clone()),
            text,
        })
    }

    /// An analyzer hit as the tool gave it.
    pub fn of_lead(l: &Lead) -> Flag {
        Flag {
            file: l.file.clone(),
            lines: Some((l.line, l.end_line.unwrap_or(l.line).max(l.line))),
            cwe: l.cwe,
            weakness: l.weakness.clone(),
            text: format!("{}/{} {}", l.category, l.rule, l.message),
        }
    }
}

/// The weakness class a row names: its class as a weakness id, else its CWE's class, else the
/// class whose words its label holds (`pathtraver`).
fn class_of<'w>(row: &LabelledRow, classes: &'w Weaknesses) -> Option<&'w Weakness> {
    classes
        .get(&row.class)
        .or_else(|| row.cwe.and_then(|c| classes.of_cwe(c)))
        .or_else(|| {
            (!row.class.is_empty())
                .then(|| classes.of_words(&row.class))
                .flatten()
        })
}

/// Whether `flag` is of `row`'s class. With a CWE on both sides: the same weakness class
/// (327 and 328 are both weak hashing), else the same number. Otherwise: the flag's class is
/// the row's, its CWE is of the row's class, or one of the row's class words (its label, its
/// class's words) is in the flag's text.
pub fn agrees(row: &LabelledRow, flag: &Flag, classes: &Weaknesses) -> bool {
    if let (Some(r), Some(f)) = (row.cwe, flag.cwe) {
        return r == f || classes.of_cwe(r).is_some_and(|w| w.has_cwe(f));
    }
    let class = class_of(row, classes);
    if let (Some(w), Some(f)) = (class, flag.cwe) {
        if w.has_cwe(f) {
            return true;
        }
    }
    if let Some(id) = &flag.weakness {
        if *id == row.class || class.is_some_and(|w| w.id == *id) {
            return true;
        }
    }
    let text = flag.text.to_lowercase();
    let label = row.class.to_lowercase().replace(['-', '_'], " ");
    let label_words = (label.chars().count() > 2).then_some(label);
    label_words
        .iter()
        .chain(class.map(|w| &w.words).into_iter().flatten())
        .any(|w| text.contains(w.as_str()))
}

/// Whether `flag` flags `row`: the same file, the row's class, and (when the row has lines)
/// within [`LINE_SLACK`] lines of them.
pub fn flags_row(row: &LabelledRow, flag: &Flag, classes: &Weaknesses) -> bool {
    if flag.file != row.file {
        return false;
    }
    if let Some((a, b)) = row.lines {
        let Some((s, e)) = flag.lines else {
            return false;
        };
        if s > b.saturating_add(LINE_SLACK) || e.saturating_add(LINE_SLACK) < a {
            return false;
        }
    }
    agrees(row, flag, classes)
}

/// Counts and rates over labelled rows.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Rates {
    pub true_positives: usize,
    pub false_positives: usize,
    pub false_negatives: usize,
    pub true_negatives: usize,
    /// TP / (TP + FN), the true-positive rate; 0 without vulnerable rows.
    pub recall: f64,
    /// TP / (TP + FP); 0 when nothing was flagged.
    pub precision: f64,
    /// FP / (FP + TN); 0 without safe rows.
    pub false_positive_rate: f64,
    /// recall − false_positive_rate.
    pub youden: f64,
}

fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// Two decimals, never `-0.00`.
fn two(v: f64) -> String {
    let r = (v * 100.0).round() / 100.0;
    format!("{:.2}", r + 0.0)
}

impl Rates {
    pub fn of_counts(tp: usize, fp: usize, fn_: usize, tn: usize) -> Rates {
        let recall = ratio(tp, tp + fn_);
        let fpr = ratio(fp, fp + tn);
        Rates {
            true_positives: tp,
            false_positives: fp,
            false_negatives: fn_,
            true_negatives: tn,
            recall,
            precision: ratio(tp, tp + fp),
            false_positive_rate: fpr,
            youden: recall - fpr,
        }
    }

    /// The rows that are vulnerable (TP + FN) and safe (FP + TN).
    pub fn vulnerable(&self) -> usize {
        self.true_positives + self.false_negatives
    }

    pub fn safe(&self) -> usize {
        self.false_positives + self.true_negatives
    }

    /// `recall 0.62 (5/8)  precision 0.71  FPR 0.25 (2/8)  Youden 0.38`.
    pub fn line(&self) -> String {
        format!(
            "recall {} ({}/{})  precision {}  FPR {} ({}/{})  Youden {}",
            two(self.recall),
            self.true_positives,
            self.vulnerable(),
            two(self.precision),
            two(self.false_positive_rate),
            self.false_positives,
            self.safe(),
            two(self.youden)
        )
    }

    /// The short form a per-class line uses: `TPR 1/2 FPR 0/1 Youden 0.50`.
    fn brief(&self) -> String {
        format!(
            "TPR {}/{} FPR {}/{} Youden {}",
            self.true_positives,
            self.vulnerable(),
            self.false_positives,
            self.safe(),
            two(self.youden)
        )
    }
}

/// Score `flags` over `rows`: the rates, and for each row whether a flag flagged it.
pub fn score_flags(
    rows: &[LabelledRow],
    flags: &[Flag],
    classes: &Weaknesses,
) -> (Rates, Vec<bool>) {
    let flagged: Vec<bool> = rows
        .iter()
        .map(|r| flags.iter().any(|f| flags_row(r, f, classes)))
        .collect();
    (rates_of(rows, &flagged, |_| true), flagged)
}

fn rates_of(rows: &[LabelledRow], flagged: &[bool], keep: impl Fn(&LabelledRow) -> bool) -> Rates {
    let (mut tp, mut fp, mut fn_, mut tn) = (0, 0, 0, 0);
    for (r, f) in rows.iter().zip(flagged) {
        if !keep(r) {
            continue;
        }
        match (r.vulnerable, *f) {
            (true, true) => tp += 1,
            (true, false) => fn_ += 1,
            (false, true) => fp += 1,
            (false, false) => tn += 1,
        }
    }
    Rates::of_counts(tp, fp, fn_, tn)
}

/// One class of the labels, both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassRates {
    /// How the rows name it: `sqli (CWE-89)`.
    pub class: String,
    pub rows: usize,
    pub quorum: Rates,
    pub analyzers: Rates,
}

/// One labelled row and who flagged it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowOutcome {
    pub file: String,
    pub class: String,
    pub vulnerable: bool,
    /// A surviving finding of the review flagged it.
    pub by_quorum: bool,
    /// An analyzer hit flagged it.
    pub by_analyzers: bool,
}

/// What the review's verifier did with the analyzer leads on labelled files of their class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Calibration {
    /// Leads the verifier checked that fall on a vulnerable row of their class.
    pub on_vulnerable: usize,
    pub kept_on_vulnerable: usize,
    pub rejected_on_vulnerable: usize,
    /// Leads the verifier checked that fall only on safe rows of their class.
    pub on_safe: usize,
    pub kept_on_safe: usize,
    pub rejected_on_safe: usize,
    /// Checked leads on no labelled file of their class.
    pub off_labels: usize,
    /// Leads no model checked (the report's unverified leads, and those dropped as
    /// `unconfirmed_lead`).
    pub unchecked: usize,
}

impl Calibration {
    /// `verifier: of N leads on vulnerable files kept K; of M leads on safe files rejected R`.
    pub fn line(&self) -> String {
        format!(
            "verifier: of {} leads on vulnerable files kept {}; of {} leads on safe files rejected {} ({} unchecked, {} on no labelled file of their class)",
            self.on_vulnerable,
            self.kept_on_vulnerable,
            self.on_safe,
            self.rejected_on_safe,
            self.unchecked,
            self.off_labels
        )
    }
}

/// The score of one review and its analyzers against an expected-results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelledScore {
    /// The expected-results file.
    pub labels: String,
    /// Rows scored (their file is in the reviewed directory).
    pub rows: usize,
    pub vulnerable: usize,
    pub safe: usize,
    /// Rows not scored: their file is not in the reviewed directory.
    pub skipped: usize,
    /// The first few of them, as labelled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_files: Vec<String>,
    /// The report's surviving findings (what `quorum` is scored on).
    pub findings: usize,
    /// The analyzers' hits (what `analyzers alone` is scored on).
    pub leads: usize,
    /// High-harm analyzer leads no model checked, reported apart (not scored).
    pub unverified_leads: usize,
    pub quorum: Rates,
    pub analyzers: Rates,
    /// quorum's Youden index minus the analyzers'.
    pub youden_gain: f64,
    pub per_class: Vec<ClassRates>,
    pub verifier: Calibration,
    pub outcomes: Vec<RowOutcome>,
}

/// Score a report and the analyzers' hits of the same review against `resolved` labels.
/// Only the report's `findings` count for quorum (not residual concerns, not unverified leads).
pub fn score_labelled(
    labels: &str,
    resolved: &Resolved,
    report: &Report,
    leads: &[Lead],
) -> LabelledScore {
    score_labelled_parts(
        labels,
        resolved,
        &report.findings,
        &report.dropped,
        report.unverified_leads.len(),
        leads,
        Weaknesses::shipped(),
    )
}

/// [`score_labelled`] from a report's parts: its findings, what it dropped, how many
/// unverified leads it set apart.
pub fn score_labelled_parts(
    labels: &str,
    resolved: &Resolved,
    findings: &[Finding],
    dropped: &[Dropped],
    unverified_leads: usize,
    leads: &[Lead],
    classes: &Weaknesses,
) -> LabelledScore {
    let rows = &resolved.rows;
    let quorum_flags: Vec<Flag> = findings
        .iter()
        .filter_map(|f| Flag::of_finding(f, classes))
        .collect();
    let lead_flags: Vec<Flag> = leads.iter().map(Flag::of_lead).collect();
    let (quorum, by_quorum) = score_flags(rows, &quorum_flags, classes);
    let (analyzers, by_analyzers) = score_flags(rows, &lead_flags, classes);

    let mut groups: BTreeMap<String, Vec<&LabelledRow>> = BTreeMap::new();
    for r in rows {
        groups.entry(r.class_label()).or_default().push(r);
    }
    let per_class = groups
        .into_iter()
        .map(|(label, members)| {
            let is = |r: &LabelledRow| r.class_label() == label;
            ClassRates {
                rows: members.len(),
                quorum: rates_of(rows, &by_quorum, is),
                analyzers: rates_of(rows, &by_analyzers, is),
                class: label,
            }
        })
        .collect();

    let outcomes = rows
        .iter()
        .zip(by_quorum.iter().zip(&by_analyzers))
        .map(|(r, (q, a))| RowOutcome {
            file: r.file.clone(),
            class: r.class_label(),
            vulnerable: r.vulnerable,
            by_quorum: *q,
            by_analyzers: *a,
        })
        .collect();

    LabelledScore {
        labels: labels.to_string(),
        rows: rows.len(),
        vulnerable: rows.iter().filter(|r| r.vulnerable).count(),
        safe: rows.iter().filter(|r| !r.vulnerable).count(),
        skipped: resolved.missing.len(),
        skipped_files: resolved
            .missing
            .iter()
            .take(SKIPPED_NAMED)
            .map(|r| r.file.clone())
            .collect(),
        findings: findings.len(),
        leads: leads.len(),
        unverified_leads,
        youden_gain: quorum.youden - analyzers.youden,
        quorum,
        analyzers,
        per_class,
        verifier: calibrate(rows, findings, dropped, unverified_leads, leads, classes),
        outcomes,
    }
}

/// A text with its whitespace runs made single spaces (as a lead's title is written).
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The leads the verifier kept (findings credited to an analyzer) and rejected (dropped by
/// the verifier, matched to a lead by file and title: `RULE: message`, perhaps cut short),
/// each placed on the labelled rows of its class.
fn calibrate(
    rows: &[LabelledRow],
    findings: &[Finding],
    dropped: &[Dropped],
    unverified_leads: usize,
    leads: &[Lead],
    classes: &Weaknesses,
) -> Calibration {
    let mut c = Calibration {
        unchecked: unverified_leads
            + dropped
                .iter()
                .filter(|d| d.removed_by == "unconfirmed_lead")
                .count(),
        ..Calibration::default()
    };
    let kept = findings
        .iter()
        .filter(|f| {
            f.reporters
                .iter()
                .any(|r| r.persona.starts_with(REPORTER_PREFIX))
        })
        .filter_map(|f| Flag::of_finding(f, classes));
    let mut used = vec![false; leads.len()];
    let mut rejected = Vec::new();
    for d in dropped.iter().filter(|d| d.removed_by == "verifier") {
        let Some(file) = d.file.as_deref() else {
            continue;
        };
        let title = flat(&d.title);
        let title = title.trim_end_matches('…');
        let hit = leads.iter().enumerate().find(|(i, l)| {
            !used[*i]
                && l.file == file.trim_start_matches("./")
                && !title.is_empty()
                && flat(&format!("{}: {}", l.rule, l.message)).starts_with(title)
        });
        if let Some((i, l)) = hit {
            used[i] = true;
            rejected.push(Flag::of_lead(l));
        }
    }
    let checked = kept
        .map(|f| (f, true))
        .chain(rejected.into_iter().map(|f| (f, false)));
    for (flag, was_kept) in checked {
        let on: Vec<&LabelledRow> = rows
            .iter()
            .filter(|r| flags_row(r, &flag, classes))
            .collect();
        if on.iter().any(|r| r.vulnerable) {
            c.on_vulnerable += 1;
            if was_kept {
                c.kept_on_vulnerable += 1;
            } else {
                c.rejected_on_vulnerable += 1;
            }
        } else if !on.is_empty() {
            c.on_safe += 1;
            if was_kept {
                c.kept_on_safe += 1;
            } else {
                c.rejected_on_safe += 1;
            }
        } else {
            c.off_labels += 1;
        }
    }
    c
}

impl LabelledScore {
    /// The score as a person reads it.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "labels {}: {} rows scored ({} vulnerable, {} safe)",
            self.labels, self.rows, self.vulnerable, self.safe
        );
        if self.skipped > 0 {
            let _ = write!(
                out,
                "; {} skipped, their file not among the reviewed files ({}{})",
                self.skipped,
                self.skipped_files.join(", "),
                if self.skipped > self.skipped_files.len() {
                    ", …"
                } else {
                    ""
                }
            );
        }
        let _ = writeln!(
            out,
            "\n{} findings, {} analyzer hits",
            self.findings, self.leads
        );
        let _ = writeln!(out, "quorum:          {}", self.quorum.line());
        let _ = writeln!(out, "analyzers alone: {}", self.analyzers.line());
        let gain = (self.youden_gain * 100.0).round() / 100.0 + 0.0;
        let _ = writeln!(out, "quorum adds {gain:+.2} Youden over its analyzers");
        let _ = writeln!(
            out,
            "unverified leads: {} (high-harm analyzer hits no model checked; not scored)",
            self.unverified_leads
        );
        let width = self
            .per_class
            .iter()
            .map(|c| c.class.chars().count())
            .max()
            .unwrap_or(0);
        for c in &self.per_class {
            let _ = writeln!(
                out,
                "  {:<width$}  {} rows  quorum {}  analyzers {}",
                c.class,
                c.rows,
                c.quorum.brief(),
                c.analyzers.brief()
            );
        }
        let _ = writeln!(out, "{}", self.verifier.line());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Labels;
    use crate::review::finding::{Reporter, Severity};

    fn row(file: &str, class: &str, cwe: Option<u32>, vulnerable: bool) -> LabelledRow {
        LabelledRow {
            row: 1,
            file: file.into(),
            class: class.into(),
            cwe,
            vulnerable,
            lines: None,
        }
    }

    fn finding(file: &str, line: u32, category: &str, title: &str, cwe: Option<u32>) -> Finding {
        let mut f: Finding = serde_json::from_value(serde_json::json!({
            "id": "F001", "title": title, "severity": "P1", "confidence": 0.9,
            "category": category, "file": file, "line_start": line, "line_end": line,
            "symbol": null, "evidence": "x", "why_it_matters": "", "suggested_fix": "",
            "verdict": "CONFIRMED", "reporters": [], "anchor": "a"
        }))
        .unwrap();
        f.cwe = cwe;
        f
    }

    fn credited(mut f: Finding, persona: &str) -> Finding {
        f.reporters.push(Reporter {
            persona: persona.into(),
            model: "m".into(),
            node: "n".into(),
            carried_from: None,
        });
        f
    }

    fn lead(file: &str, line: u32, rule: &str, message: &str, cwe: Option<u32>) -> Lead {
        Lead {
            tool: "bandit".into(),
            file: file.into(),
            line,
            end_line: None,
            rule: rule.into(),
            message: message.into(),
            severity: Severity::P1,
            category: "security".into(),
            confidence: 0.8,
            harm: crate::weakness::Harm::Security,
            cwe,
            weakness: None,
        }
    }

    fn dropped(title: &str, file: &str, by: &str) -> Dropped {
        Dropped {
            title: title.into(),
            file: Some(file.into()),
            reason: "r".into(),
            verdict: None,
            removed_by: by.into(),
        }
    }

    #[test]
    fn cwes_of_one_weakness_class_agree_and_other_classes_do_not() {
        let w = Weaknesses::shipped();
        let r = row("h.py", "hash", Some(328), true);
        let flag = |cwe: Option<u32>, text: &str| Flag {
            file: "h.py".into(),
            lines: Some((3, 3)),
            cwe,
            weakness: None,
            text: text.into(),
        };
        assert!(agrees(&r, &flag(Some(327), "B303 md5"), w));
        assert!(agrees(&r, &flag(Some(328), ""), w));
        assert!(agrees(&r, &flag(Some(916), ""), w));
        // Another class, whatever its words say.
        assert!(!agrees(&r, &flag(Some(89), "weak hash"), w));
        // No CWE on the flag: the row's class words decide.
        assert!(agrees(
            &r,
            &flag(None, "security uses md5 for passwords"),
            w
        ));
        assert!(!agrees(&r, &flag(None, "sql built from input"), w));
        // A row of a class no CWE names: its label or the flag's class id.
        let own = row("h.py", "sql-injection", None, true);
        assert!(agrees(
            &own,
            &Flag {
                weakness: Some("sql-injection".into()),
                ..flag(None, "t")
            },
            w
        ));
        assert!(agrees(&own, &flag(Some(89), "t"), w));
        assert!(agrees(
            &row("h.py", "pathtraver", None, true),
            &flag(None, "Path traversal in open"),
            w
        ));
        // Unknown CWEs agree only when equal.
        let odd = row("h.py", "trustbound", Some(501), true);
        assert!(agrees(&odd, &flag(Some(501), ""), w));
        assert!(!agrees(&odd, &flag(Some(502), ""), w));
    }

    #[test]
    fn a_row_with_lines_wants_a_flag_within_three_of_them_on_its_file() {
        let w = Weaknesses::shipped();
        let mut r = row("a.py", "sqli", Some(89), true);
        r.lines = Some((10, 12));
        let at = |file: &str, lines: Option<(u32, u32)>| Flag {
            file: file.into(),
            lines,
            cwe: Some(89),
            weakness: None,
            text: String::new(),
        };
        assert!(flags_row(&r, &at("a.py", Some((15, 15))), w));
        assert!(flags_row(&r, &at("a.py", Some((5, 7))), w));
        assert!(!flags_row(&r, &at("a.py", Some((16, 20))), w));
        assert!(!flags_row(&r, &at("a.py", None), w));
        assert!(!flags_row(&r, &at("b.py", Some((10, 10))), w));
        r.lines = None;
        assert!(flags_row(&r, &at("a.py", Some((900, 900))), w));
    }

    /// Eight labelled files, scored by hand:
    /// quorum flags v1 v2 v3 (TP 3, FN 1) and s1 (FP 1, TN 3): recall 3/4, FPR 1/4,
    /// precision 3/4, Youden 0.50. The analyzers flag v1 v2 (TP 2, FN 2) and s1 s2 s3
    /// (FP 3, TN 1): recall 2/4, FPR 3/4, precision 2/5, Youden -0.25. Gain +0.75.
    #[test]
    fn a_tiny_labelled_set_scores_as_counted_by_hand() {
        let labels = Labels::parse_csv(
            "file,class,cwe,vulnerable\n\
             v1,sqli,89,true\nv2,sqli,89,true\nv3,hash,328,true\nv4,cmdi,78,true\n\
             s1,sqli,89,false\ns2,sqli,89,false\ns3,hash,328,false\ns4,cmdi,78,false\n\
             gone,sqli,89,true\n",
            "e.csv",
        )
        .unwrap();
        let files = [
            "t/v1.py", "t/v2.py", "t/v3.py", "t/v4.py", "t/s1.py", "t/s2.py", "t/s3.py", "t/s4.py",
        ];
        let resolved = labels.resolve(files).unwrap();
        assert_eq!((resolved.rows.len(), resolved.missing.len()), (8, 1));
        let findings = vec![
            credited(
                finding(
                    "t/v1.py",
                    4,
                    "security/B608",
                    "B608: SQL built from a string",
                    Some(89),
                ),
                "analyzer:bandit",
            ),
            finding(
                "t/v2.py",
                4,
                "security/injection",
                "SQL injection through name",
                None,
            ),
            finding(
                "t/v3.py",
                9,
                "security",
                "Weak hash md5 for passwords",
                Some(327),
            ),
            // The wrong class on v4 flags nothing.
            finding("t/v4.py", 2, "security", "XSS in the template", Some(79)),
            finding("t/s1.py", 4, "security", "SQL injection", Some(89)),
        ];
        let leads = vec![
            lead("t/v1.py", 4, "B608", "SQL built from a string", Some(89)),
            lead("t/v2.py", 4, "B608", "SQL built from a string", Some(89)),
            lead("t/s1.py", 4, "B608", "SQL built from a string", Some(89)),
            lead("t/s2.py", 6, "B608", "SQL   built from\na string", Some(89)),
            lead("t/s3.py", 2, "B324", "md5 used", Some(327)),
            // A hit on another class of a safe file flags nothing.
            lead("t/s4.py", 2, "B608", "SQL built from a string", Some(89)),
            lead(
                "t/elsewhere.py",
                1,
                "B608",
                "SQL built from a string",
                Some(89),
            ),
        ];
        let dropped = vec![
            dropped("B608: SQL built from a string", "t/v2.py", "verifier"),
            dropped("B608: SQL built from a string", "t/s2.py", "verifier"),
            dropped("B324: md5 used", "t/s3.py", "verifier"),
            dropped("Made-up thing", "t/s4.py", "verifier"),
            dropped(
                "B608: SQL built from a string",
                "t/s1.py",
                "unconfirmed_lead",
            ),
            dropped(
                "B608: SQL built from a string",
                "t/elsewhere.py",
                "grounding",
            ),
        ];
        let s = score_labelled_parts(
            "e.csv",
            &resolved,
            &findings,
            &dropped,
            2,
            &leads,
            Weaknesses::shipped(),
        );
        assert_eq!((s.rows, s.vulnerable, s.safe, s.skipped), (8, 4, 4, 1));
        let q = s.quorum;
        assert_eq!(
            (
                q.true_positives,
                q.false_negatives,
                q.false_positives,
                q.true_negatives
            ),
            (3, 1, 1, 3)
        );
        assert!((q.recall - 0.75).abs() < 1e-9 && (q.false_positive_rate - 0.25).abs() < 1e-9);
        assert!((q.precision - 0.75).abs() < 1e-9 && (q.youden - 0.5).abs() < 1e-9);
        let a = s.analyzers;
        assert_eq!(
            (
                a.true_positives,
                a.false_negatives,
                a.false_positives,
                a.true_negatives
            ),
            (2, 2, 3, 1)
        );
        assert!((a.precision - 0.4).abs() < 1e-9 && (a.youden + 0.25).abs() < 1e-9);
        assert!((s.youden_gain - 0.75).abs() < 1e-9);
        // Per class: cmdi has one vulnerable and one safe row and neither side flags them.
        let classes: Vec<&str> = s.per_class.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(
            classes,
            ["cmdi (CWE-78)", "hash (CWE-328)", "sqli (CWE-89)"]
        );
        let sql = &s.per_class[2];
        assert_eq!(
            (
                sql.rows,
                sql.quorum.true_positives,
                sql.analyzers.false_positives
            ),
            (4, 2, 2)
        );
        // The verifier: kept the v1 lead (vulnerable); rejected one on v2 (vulnerable) and the
        // ones on s2 and s3 (safe); "Made-up thing" is no lead.
        assert_eq!(
            s.verifier,
            Calibration {
                on_vulnerable: 2,
                kept_on_vulnerable: 1,
                rejected_on_vulnerable: 1,
                on_safe: 2,
                kept_on_safe: 0,
                rejected_on_safe: 2,
                off_labels: 0,
                unchecked: 3,
            }
        );
        let text = s.to_text();
        for line in [
            "labels e.csv: 8 rows scored (4 vulnerable, 4 safe); 1 skipped, their file not among the reviewed files (gone)",
            "quorum:          recall 0.75 (3/4)  precision 0.75  FPR 0.25 (1/4)  Youden 0.50",
            "analyzers alone: recall 0.50 (2/4)  precision 0.40  FPR 0.75 (3/4)  Youden -0.25",
            "quorum adds +0.75 Youden over its analyzers",
            "unverified leads: 2 (high-harm analyzer hits no model checked; not scored)",
            "  sqli (CWE-89)   4 rows  quorum TPR 2/2 FPR 1/2 Youden 0.50  analyzers TPR 2/2 FPR 2/2 Youden 0.00",
            "verifier: of 2 leads on vulnerable files kept 1; of 2 leads on safe files rejected 2 (3 unchecked, 0 on no labelled file of their class)",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        let o = &s.outcomes[0];
        assert_eq!(
            (o.file.as_str(), o.by_quorum, o.by_analyzers),
            ("t/v1.py", true, true)
        );
    }

    #[test]
    fn nothing_flagged_and_no_rows_of_a_kind_score_zero_not_nan() {
        let w = Weaknesses::shipped();
        let rows = [row("a.py", "sqli", Some(89), true)];
        let (r, flagged) = score_flags(&rows, &[], w);
        assert_eq!(flagged, [false]);
        assert_eq!(
            (r.recall, r.precision, r.false_positive_rate, r.youden),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!(
            r.line(),
            "recall 0.00 (0/1)  precision 0.00  FPR 0.00 (0/0)  Youden 0.00"
        );
        assert_eq!(two(-0.001), "0.00");
    }
}
