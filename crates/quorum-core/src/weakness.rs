//! Weakness classes as data (`config/weaknesses.yaml`, compiled in): what a finding of a known
//! kind is (its CWE), the harm it can do, which analyzer rules report it, the words reviewers
//! use for it, and the one narrow question a verifier answers about a lead of the class.
//!
//! The engine names no class: leads take theirs from their rule id, a model's finding from the
//! words of its category and title; the harm orders verification when the budget is short;
//! the question is what a small verifier can answer where "is this finding true?" is too wide.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The shipped classes, compiled in so the binary works from any directory.
pub const DEFAULT_WEAKNESSES: &str = include_str!("../../../config/weaknesses.yaml");

/// How much a finding of a kind can hurt, most harmful first: the order in which analyzer
/// leads are verified when the budget is short, and the line between review findings and
/// lint (`Style` leads are counted, not verified, unless a flow asks for them).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Harm {
    Security,
    Correctness,
    Reliability,
    #[default]
    Maintainability,
    Style,
}

impl Harm {
    pub fn as_str(self) -> &'static str {
        match self {
            Harm::Security => "security",
            Harm::Correctness => "correctness",
            Harm::Reliability => "reliability",
            Harm::Maintainability => "maintainability",
            Harm::Style => "style",
        }
    }

    /// Harm that must never be dropped unreported: a lead of it the budget could not check is
    /// reported as an unverified finding instead of leaving for `dropped`.
    pub fn is_high(self) -> bool {
        matches!(self, Harm::Security | Harm::Correctness)
    }
}

/// One weakness class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weakness {
    pub id: String,
    #[serde(default)]
    pub cwe: Option<u32>,
    /// Further CWE ids that name the same class.
    #[serde(default)]
    pub also: Vec<u32>,
    pub harm: Harm,
    /// Analyzer rule ids: exact, or a prefix ending in `*`.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Lower-case words or phrases that name the class in a finding's category or title.
    #[serde(default)]
    pub words: Vec<String>,
    pub question: String,
    #[serde(default)]
    pub explanation: String,
}

impl Weakness {
    /// Whether `rule` (an analyzer's rule id) reports this class.
    pub fn has_rule(&self, rule: &str) -> bool {
        self.rules.iter().any(|r| match r.strip_suffix('*') {
            Some(prefix) => rule.starts_with(prefix),
            None => r == rule,
        })
    }

    /// Whether `cwe` names this class.
    pub fn has_cwe(&self, cwe: u32) -> bool {
        self.cwe == Some(cwe) || self.also.contains(&cwe)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeaknessFile {
    weaknesses: Vec<Weakness>,
}

/// The weakness classes, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Weaknesses {
    pub classes: Vec<Weakness>,
}

/// A weakness file that cannot be used: which and why.
#[derive(Debug, thiserror::Error)]
#[error("weakness classes {path}: {message}")]
pub struct WeaknessError {
    pub path: String,
    pub message: String,
}

impl Weaknesses {
    /// The shipped classes, parsed once. The file is compiled in and checked by the tests, so a
    /// parse failure here is a build defect; it yields no classes rather than a panic.
    pub fn shipped() -> &'static Weaknesses {
        static SHIPPED: OnceLock<Weaknesses> = OnceLock::new();
        SHIPPED.get_or_init(|| {
            Weaknesses::parse(DEFAULT_WEAKNESSES, "config/weaknesses.yaml").unwrap_or_default()
        })
    }

    /// Parse and validate: ids unique and non-empty, a question for each, words lower case.
    pub fn parse(yaml: &str, path: &str) -> Result<Weaknesses, WeaknessError> {
        let bad = |message: String| WeaknessError {
            path: path.to_string(),
            message,
        };
        let file: WeaknessFile = serde_yaml::from_str(yaml).map_err(|e| bad(e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for w in &file.weaknesses {
            if w.id.trim().is_empty() || !seen.insert(w.id.clone()) {
                return Err(bad(format!("class {:?}: `id` empty or listed twice", w.id)));
            }
            if w.question.trim().is_empty() {
                return Err(bad(format!("class {:?}: `question` is empty", w.id)));
            }
            if let Some(word) = w.words.iter().find(|x| **x != x.to_lowercase()) {
                return Err(bad(format!(
                    "class {:?}: word {word:?} is not lower case",
                    w.id
                )));
            }
        }
        Ok(Weaknesses {
            classes: file.weaknesses,
        })
    }

    pub fn get(&self, id: &str) -> Option<&Weakness> {
        self.classes.iter().find(|w| w.id == id)
    }

    /// The class an analyzer rule reports, the first listed on a tie.
    pub fn of_rule(&self, rule: &str) -> Option<&Weakness> {
        self.classes.iter().find(|w| w.has_rule(rule))
    }

    /// The class a CWE id names.
    pub fn of_cwe(&self, cwe: u32) -> Option<&Weakness> {
        self.classes.iter().find(|w| w.has_cwe(cwe))
    }

    /// The class whose words appear in `text` (a finding's category and title), by the longest
    /// word that matches; the first class listed on a tie.
    pub fn of_words(&self, text: &str) -> Option<&Weakness> {
        let text = text.to_lowercase();
        let mut best: Option<(&Weakness, usize)> = None;
        for w in &self.classes {
            let longest = w
                .words
                .iter()
                .filter(|word| text.contains(word.as_str()))
                .map(String::len)
                .max();
            if let Some(n) = longest {
                if best.is_none_or(|(_, m)| n > m) {
                    best = Some((w, n));
                }
            }
        }
        best.map(|(w, _)| w)
    }

    /// The class of a finding: its rule (the part of the category after the last `/`, as an
    /// analyzer lead's category ends), else a `CWE-N` it names, else its words.
    pub fn of_finding(&self, category: &str, title: &str) -> Option<&Weakness> {
        let rule = category.rsplit('/').next().unwrap_or(category);
        self.of_rule(rule)
            .or_else(|| cwe_in(&format!("{category} {title}")).and_then(|c| self.of_cwe(c)))
            .or_else(|| self.of_words(&format!("{category} {title}")))
    }
}

/// The first `CWE-N` (any case, `-` or `_` or nothing between) in `text`.
pub fn cwe_in(text: &str) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find("cwe") {
        let after = rest[i + 3..].trim_start_matches(['-', '_', ' ']);
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse() {
            return Some(n);
        }
        rest = &rest[i + 3..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_classes_parse_and_each_has_a_question() {
        let w = Weaknesses::parse(DEFAULT_WEAKNESSES, "config/weaknesses.yaml").unwrap();
        assert!(w.classes.len() >= 10);
        assert_eq!(Weaknesses::shipped().classes.len(), w.classes.len());
        assert!(w.classes.iter().all(|c| !c.question.is_empty()));
    }

    #[test]
    fn a_lead_takes_its_class_from_its_rule_a_finding_from_its_words() {
        let w = Weaknesses::shipped();
        assert_eq!(w.of_rule("B608").unwrap().cwe, Some(89));
        assert_eq!(
            w.of_rule("sql-built-from-strings").unwrap().id,
            "sql-injection"
        );
        assert_eq!(w.of_rule("S608").unwrap().id, "sql-injection");
        assert!(w.of_rule("F401").is_none());
        assert!(w.of_rule("B6080").is_none(), "exact ids are exact");
        assert_eq!(
            w.of_finding("security/B506", "yaml.load").unwrap().id,
            "unsafe-deserialization"
        );
        assert_eq!(
            w.of_finding("security", "SQL injection through the name parameter")
                .unwrap()
                .cwe,
            Some(89)
        );
        assert_eq!(
            w.of_finding("injection", "see CWE-78 for this").unwrap().id,
            "command-injection"
        );
        assert!(w.of_finding("style", "line too long").is_none());
        assert_eq!(w.of_cwe(327).unwrap().id, "weak-hash");
    }

    #[test]
    fn cwe_ids_are_read_in_their_spellings() {
        assert_eq!(cwe_in("CWE-89: SQL"), Some(89));
        assert_eq!(cwe_in("cwe_502"), Some(502));
        assert_eq!(cwe_in("the cwe list, then CWE 22"), Some(22));
        assert_eq!(cwe_in("no id"), None);
    }

    #[test]
    fn a_bad_file_is_refused_with_the_class() {
        let dup = "weaknesses:\n  - {id: a, harm: security, question: q}\n  - {id: a, harm: style, question: q}\n";
        assert!(Weaknesses::parse(dup, "w.yaml")
            .unwrap_err()
            .to_string()
            .contains("listed twice"));
        let upper = "weaknesses:\n  - {id: a, harm: security, question: q, words: [SQL]}\n";
        assert!(Weaknesses::parse(upper, "w.yaml").is_err());
        assert!(Weaknesses::parse("weaknesses: [{id: a}]", "w.yaml").is_err());
    }
}
