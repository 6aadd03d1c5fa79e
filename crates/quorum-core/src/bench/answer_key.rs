//! `corpus.yaml`: an answer key at line level, scored over a report's surviving findings.
//!
//! A corpus is a directory holding `corpus.yaml` (its name, where its ground truth comes from,
//! the directory to review, and the answers) and that directory. An answer is a defect the key
//! says is there: a file, a line range and a category, with the words that name it. A finding
//! matches an answer when the file is the same, the line ranges overlap within
//! [`LINE_SLACK`] lines, and the categories agree: one of the answer's keywords appears in the
//! finding's category or title (models name categories freely, so agreement is by the words a
//! reviewer in the field would use, not by an exact label). Each finding matches at most one
//! answer and each answer at most one finding, so nothing is counted twice.

use crate::report::Report;
use crate::review::finding::{Dropped, Finding, Verdict};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How far apart (in lines) a finding's range and an answer's may be and still match.
pub const LINE_SLACK: u32 = 3;

/// Words too generic to say which defect a category names.
const GENERIC: &[&str] = &[
    "security",
    "correctness",
    "bug",
    "bugs",
    "issue",
    "error",
    "code",
    "quality",
    "the",
    "a",
    "of",
    "in",
    "and",
    "with",
    "use",
    "usage",
];

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot read the corpus at {path}: {message}")]
    Read { path: String, message: String },
    #[error("corpus {path} is malformed: {message}")]
    Malformed { path: String, message: String },
    /// One row of an expected-results file (`--expected`): the file, the row (a CSV line, a
    /// JSON array position, 1-based) and what is wrong with it.
    #[error("{path}: row {row}: {message}")]
    Row {
        path: String,
        row: usize,
        message: String,
    },
}

/// One defect the answer key says is in the corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// Path relative to the reviewed directory, with `/` separators.
    pub file: String,
    /// First and last line, 1-based, inclusive.
    pub lines: [u32; 2],
    /// The key's own label (`security/hardcoded_sql_expressions`, `correctness/undefined-variable`).
    pub category: String,
    /// Words that name the defect; a finding whose category or title holds one agrees. Empty:
    /// the category's own words (generic ones left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
}

impl Answer {
    fn words(&self) -> Vec<String> {
        if !self.keywords.is_empty() {
            return self.keywords.iter().map(|k| k.to_lowercase()).collect();
        }
        self.category
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2 && !GENERIC.contains(w))
            .map(str::to_string)
            .collect()
    }
}

/// `corpus.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Corpus {
    pub name: String,
    /// Where the files and the key come from (the public suite, its version and licence).
    #[serde(default)]
    pub source: String,
    /// The directory to review, relative to the corpus directory.
    #[serde(default = "default_target")]
    pub target: String,
    pub answers: Vec<Answer>,
}

fn default_target() -> String {
    "files".into()
}

impl Corpus {
    /// Read `DIR/corpus.yaml` and check that every answer names a file of the target.
    pub fn load(dir: &Path) -> Result<(Corpus, PathBuf), BenchError> {
        let path = dir.join("corpus.yaml");
        let text = std::fs::read_to_string(&path).map_err(|e| BenchError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let corpus: Corpus = serde_yaml::from_str(&text).map_err(|e| BenchError::Malformed {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let target = dir.join(&corpus.target);
        let bad = |message: String| BenchError::Malformed {
            path: path.display().to_string(),
            message,
        };
        if !target.is_dir() {
            return Err(bad(format!(
                "target {} is not a directory",
                target.display()
            )));
        }
        if corpus.answers.is_empty() {
            return Err(bad("it has no answers".into()));
        }
        for a in &corpus.answers {
            if a.lines[0] == 0 || a.lines[0] > a.lines[1] {
                return Err(bad(format!(
                    "{}: lines {:?} are not a 1-based range",
                    a.file, a.lines
                )));
            }
            if !target.join(&a.file).is_file() {
                return Err(bad(format!(
                    "answer file {} is not in {}",
                    a.file,
                    target.display()
                )));
            }
            if a.words().is_empty() {
                return Err(bad(format!(
                    "{}:{}: category {:?} has no telling words; give keywords",
                    a.file, a.lines[0], a.category
                )));
            }
        }
        Ok((corpus, target))
    }
}

/// Does `f` match `a`?
pub fn matches(f: &Finding, a: &Answer) -> bool {
    let Some(file) = f.file.as_deref() else {
        return false;
    };
    if file.trim_start_matches("./") != a.file {
        return false;
    }
    let start = f.line_start.unwrap_or(0);
    let end = f.line_end.unwrap_or(start).max(start);
    if start == 0 {
        return false;
    }
    let overlap = start <= a.lines[1].saturating_add(LINE_SLACK)
        && end.saturating_add(LINE_SLACK) >= a.lines[0];
    if !overlap {
        return false;
    }
    let said = format!("{} {}", f.category, f.title).to_lowercase();
    a.words().iter().any(|w| said.contains(w.as_str()))
}

/// One answer and whether (and by which finding) it was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerOutcome {
    pub file: String,
    pub lines: [u32; 2],
    pub category: String,
    /// The report id of the finding that matched it.
    pub found_by: Option<String>,
}

/// The score of one report against one key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    pub corpus: String,
    pub answers: usize,
    pub findings: usize,
    /// Answers matched by a finding.
    pub found: usize,
    /// Findings that matched an answer.
    pub true_positives: usize,
    pub recall: f64,
    pub precision: f64,
    pub f1: f64,
    /// What the review reported before grounding and verification (the report's methodology).
    pub reported: usize,
    /// Findings removed by deterministic grounding (evidence not in the file, lines out of range).
    pub removed_by_grounding: usize,
    /// Findings the verifier model judged hallucinated.
    pub removed_by_verifier: usize,
    pub outcomes: Vec<AnswerOutcome>,
}

/// Score a report's surviving findings against the key. Matching is greedy in the key's order
/// and then the report's: each answer takes the first unused finding that matches it.
pub fn score(corpus: &Corpus, report: &Report) -> Score {
    score_parts(
        corpus,
        &report.findings,
        &report.dropped,
        report.methodology.reported,
    )
}

/// [`score`] from a report's parts: its surviving findings, what it dropped, how many it had
/// before grounding and verification.
pub fn score_parts(
    corpus: &Corpus,
    findings: &[Finding],
    dropped: &[Dropped],
    reported: usize,
) -> Score {
    let mut used = vec![false; findings.len()];
    let mut outcomes = Vec::with_capacity(corpus.answers.len());
    for a in &corpus.answers {
        let hit = findings
            .iter()
            .enumerate()
            .find(|(i, f)| !used[*i] && matches(f, a))
            .map(|(i, f)| {
                used[i] = true;
                f.id.clone()
            });
        outcomes.push(AnswerOutcome {
            file: a.file.clone(),
            lines: a.lines,
            category: a.category.clone(),
            found_by: hit,
        });
    }
    let found = outcomes.iter().filter(|o| o.found_by.is_some()).count();
    // A finding matching an answer another finding already took is still right, not noise.
    let true_positives = findings
        .iter()
        .filter(|f| corpus.answers.iter().any(|a| matches(f, a)))
        .count();
    let ratio = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let recall = ratio(found, corpus.answers.len());
    let precision = ratio(true_positives, findings.len());
    let f1 = if recall + precision > 0.0 {
        2.0 * recall * precision / (recall + precision)
    } else {
        0.0
    };
    let hallucinated: Vec<_> = dropped
        .iter()
        .filter(|d| d.verdict == Some(Verdict::Hallucinated))
        .collect();
    let removed_by_grounding = hallucinated.iter().filter(|d| d.by_grounding()).count();
    Score {
        corpus: corpus.name.clone(),
        answers: corpus.answers.len(),
        findings: findings.len(),
        found,
        true_positives,
        recall,
        precision,
        f1,
        reported,
        removed_by_grounding,
        removed_by_verifier: hallucinated.len() - removed_by_grounding,
        outcomes,
    }
}

impl Score {
    /// The score as a person reads it.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "corpus {}: {} answers, {} findings\nrecall {:.3} ({}/{})  precision {:.3} ({}/{})  F1 {:.3}\nremoved: {} by grounding, {} by the verifier (of {} reported)\n",
            self.corpus,
            self.answers,
            self.findings,
            self.recall,
            self.found,
            self.answers,
            self.precision,
            self.true_positives,
            self.findings,
            self.f1,
            self.removed_by_grounding,
            self.removed_by_verifier,
            self.reported,
        );
        for o in &self.outcomes {
            let mark = match &o.found_by {
                Some(id) => format!("found ({id})"),
                None => "missed".into(),
            };
            out.push_str(&format!(
                "  {:<7} {}:{}-{} {}\n",
                mark, o.file, o.lines[0], o.lines[1], o.category
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &str, file: &str, lines: (u32, u32), category: &str, title: &str) -> Finding {
        serde_json::from_value(serde_json::json!({
            "id": id, "title": title, "severity": "P2", "confidence": 0.9, "category": category,
            "file": file, "line_start": lines.0, "line_end": lines.1, "symbol": null,
            "evidence": "x", "why_it_matters": "", "suggested_fix": "", "verdict": "CONFIRMED",
            "reporters": [], "anchor": id
        }))
        .unwrap()
    }

    fn answer(file: &str, lines: [u32; 2], category: &str, keywords: &[&str]) -> Answer {
        Answer {
            file: file.into(),
            lines,
            category: category.into(),
            keywords: keywords.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn file_lines_within_three_and_a_telling_word_make_a_match() {
        let a = answer(
            "db.py",
            [10, 10],
            "security/hardcoded_sql_expressions",
            &["sql"],
        );
        assert!(matches(
            &finding("F1", "db.py", (13, 13), "security/sql-injection", "t"),
            &a
        ));
        assert!(matches(
            &finding("F1", "db.py", (5, 7), "injection", "SQL built from input"),
            &a
        ));
        // Four lines off, another file, or no telling word: no match.
        assert!(!matches(&finding("F1", "db.py", (14, 15), "sql", "t"), &a));
        assert!(!matches(&finding("F1", "app.py", (10, 10), "sql", "t"), &a));
        assert!(!matches(
            &finding("F1", "db.py", (10, 10), "security/xss", "escaping"),
            &a
        ));
    }

    #[test]
    fn without_keywords_the_category_s_own_words_count_and_generic_ones_do_not() {
        let a = answer("m.py", [3, 4], "correctness/undefined-variable", &[]);
        assert_eq!(a.words(), ["undefined", "variable"]);
        assert!(matches(
            &finding("F1", "m.py", (4, 4), "bug", "Undefined name used"),
            &a
        ));
        assert!(!matches(
            &finding("F1", "m.py", (4, 4), "correctness", "bad code"),
            &a
        ));
    }

    #[test]
    fn each_answer_and_each_finding_count_once() {
        let corpus = Corpus {
            name: "c".into(),
            source: String::new(),
            target: "files".into(),
            answers: vec![
                answer("a.py", [10, 10], "sql", &[]),
                answer("a.py", [12, 12], "sql", &[]),
                answer("b.py", [1, 1], "shell", &[]),
            ],
        };
        let findings = vec![
            finding("F001", "a.py", (11, 11), "sql", "t"),
            finding("F002", "c.py", (1, 1), "sql", "t"),
        ];
        let dropped = |by: &str| Dropped {
            title: "t".into(),
            file: None,
            reason: "r".into(),
            verdict: Some(Verdict::Hallucinated),
            removed_by: by.into(),
        };
        let s = score_parts(
            &corpus,
            &findings,
            &[
                dropped("grounding"),
                dropped("grounding"),
                dropped("verifier"),
            ],
            5,
        );
        assert_eq!(
            (s.removed_by_grounding, s.removed_by_verifier, s.reported),
            (2, 1, 5)
        );
        // One finding can take only one of the two nearby answers.
        assert_eq!((s.found, s.true_positives, s.findings), (1, 1, 2));
        assert!((s.recall - 1.0 / 3.0).abs() < 1e-9);
        assert!((s.precision - 0.5).abs() < 1e-9);
        assert!((s.f1 - 0.4).abs() < 1e-9);
        assert_eq!(s.outcomes[0].found_by.as_deref(), Some("F001"));
        assert_eq!(s.outcomes[1].found_by, None);
        assert!(
            s.to_text().contains("recall 0.333 (1/3)"),
            "{}",
            s.to_text()
        );
    }
}

#[cfg(test)]
mod shipped {
    use super::Corpus;
    use std::path::Path;

    #[test]
    fn every_shipped_corpus_loads_and_its_answers_point_into_its_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpora");
        let mut n = 0;
        for e in std::fs::read_dir(&root).unwrap() {
            let dir = e.unwrap().path();
            if dir.join("corpus.yaml").is_file() {
                let (corpus, _) =
                    Corpus::load(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
                assert!(!corpus.answers.is_empty());
                n += 1;
            }
        }
        assert!(n >= 1, "no corpus under {}", root.display());
    }
}
