//! A conformance `met` must find in the work the code its criterion names: a criterion that
//! names `Limiter.allow()` or `RATE_LIMIT` is not met by a target in which neither appears,
//! whatever a judge quoted. A small judge often answers `met` with the criterion's own words
//! as its reason and any nearby line as its quote; grounding proves the quote exists, this
//! proves the named thing does.
//!
//! Names are the identifiers inside backticks, and bare words shaped like code (an inner
//! underscore: `RATE_LIMIT`, `max_retries`). A criterion with a negation ("must not call
//! `eval`", "never", "without") is left alone: there absence may be the point.

use crate::judging::conformance::{CriterionStatus, Judgment};
use crate::pack::ContextPack;
use regex::Regex;
use std::sync::OnceLock;

/// Shortest identifier counted as a name (`id`, `x` say too little).
const MIN_NAME: usize = 3;

fn identifier() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").expect("valid pattern"))
}

fn backticked() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"`([^`\n]{1,120})`").expect("valid pattern"))
}

/// A requirement that something be absent ("must not call `eval`", "never", "without"): a
/// condition inside a positive requirement ("defaults to 60 when it is not set") is not one.
fn negated(text: &str) -> bool {
    let lower = text.to_lowercase().replace('’', "'");
    const PHRASES: [&str; 17] = [
        "must not",
        "shall not",
        "should not",
        "may not",
        "must never",
        "does not",
        "do not",
        "is not allowed",
        "are not allowed",
        "cannot",
        "can't",
        "won't",
        "mustn't",
        "shouldn't",
        "doesn't",
        "don't",
        "no longer",
    ];
    PHRASES.iter().any(|p| lower.contains(p))
        || lower.split(|c: char| !c.is_alphanumeric()).any(|w| {
            matches!(w, "never" | "without" | "neither" | "nor")
                || w.starts_with("forbid")
                || w.starts_with("prohibit")
                || w.starts_with("avoid")
        })
}

/// The code a criterion names, in order of appearance, each once; empty for a negated one.
pub fn named_code(criterion: &str) -> Vec<String> {
    if negated(criterion) {
        return Vec::new();
    }
    let mut names: Vec<String> = Vec::new();
    let mut push = |n: &str| {
        if n.len() >= MIN_NAME && !names.iter().any(|m| m == n) {
            names.push(n.to_string());
        }
    };
    for span in backticked().captures_iter(criterion) {
        for id in identifier().find_iter(&span[1]) {
            push(id.as_str());
        }
    }
    let outside = backticked().replace_all(criterion, " ");
    for id in identifier().find_iter(&outside) {
        let w = id.as_str().trim_matches('_');
        if w.contains('_') {
            push(w);
        }
    }
    names
}

/// Hold a grounded `met` to the code its criterion names: when a name occurs in no file of
/// `pack` (the spec itself, at `spec_path`, does not count), the criterion is unmet, saying
/// which name is missing. Other verdicts pass unchanged.
pub fn require_named_code(
    mut j: Judgment,
    criterion: &str,
    pack: &ContextPack,
    spec_path: Option<&str>,
) -> Judgment {
    if j.status != CriterionStatus::Met {
        return j;
    }
    let missing: Vec<String> = named_code(criterion)
        .into_iter()
        .filter(|name| {
            !pack.files.iter().any(|(path, f)| {
                Some(path.as_str()) != spec_path && f.content.contains(name.as_str())
            })
        })
        .collect();
    if missing.is_empty() {
        return j;
    }
    j.status = CriterionStatus::Unmet;
    j.reason = format!(
        "judged met, but the criterion names {} and the target has no such text, so unmet{}",
        missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", "),
        if j.reason.is_empty() {
            String::new()
        } else {
            format!(" (the judge said: {})", j.reason)
        }
    );
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_backticked_identifiers_and_underscored_words() {
        assert_eq!(
            named_code("`Limiter.allow()` returns True; the limit comes from RATE_LIMIT."),
            ["Limiter", "allow", "RATE_LIMIT"]
        );
        assert_eq!(
            named_code("Retries are bounded by max_retries, see `cfg`."),
            ["cfg", "max_retries"]
        );
        assert!(named_code("The page size is configurable.").is_empty());
        assert!(named_code("The code must not call `eval`.").is_empty());
        assert!(named_code("It never reads RATE_LIMIT.").is_empty());
        assert!(named_code("The handler does not log API_KEY.").is_empty());
        // A condition inside a positive requirement is not a negation.
        assert_eq!(
            named_code("The limit is read from RATE_LIMIT, and defaults to 60 when it is not set."),
            ["RATE_LIMIT"]
        );
    }

    fn judged_met() -> Judgment {
        Judgment {
            id: "C1".into(),
            status: CriterionStatus::Met,
            evidence: Vec::new(),
            reason: "REASON".into(),
            judged: true,
        }
    }

    #[test]
    fn a_met_whose_named_code_is_absent_is_unmet() {
        let pack = ContextPack::from_files(
            "/t".into(),
            None,
            vec![
                (
                    "limiter.py".into(),
                    "LIMIT = 60\nclass Limiter:\n    pass\n".into(),
                ),
                (
                    "SPEC.md".into(),
                    "`Limiter.allow()` and RATE_LIMIT\n".into(),
                ),
            ],
        );
        let criterion = "`Limiter.allow()` refuses requests over RATE_LIMIT.";
        let j = require_named_code(judged_met(), criterion, &pack, Some("SPEC.md"));
        assert_eq!(j.status, CriterionStatus::Unmet);
        assert!(
            j.reason.contains("`allow`, `RATE_LIMIT`") && j.reason.contains("REASON"),
            "{}",
            j.reason
        );
        // Present in the work: met stands. Unmet and divergent are not touched.
        let j = require_named_code(judged_met(), "`Limiter` exists.", &pack, Some("SPEC.md"));
        assert_eq!(j.status, CriterionStatus::Met);
        let mut d = judged_met();
        d.status = CriterionStatus::Divergent;
        assert_eq!(
            require_named_code(d, criterion, &pack, None).status,
            CriterionStatus::Divergent
        );
        // The spec's own text is no evidence that the code exists.
        let j = require_named_code(judged_met(), criterion, &pack, None);
        assert_eq!(
            j.status,
            CriterionStatus::Met,
            "without a spec path the spec file counts as target"
        );
    }
}
