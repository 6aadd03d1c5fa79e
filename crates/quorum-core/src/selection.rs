//! Tier 0 of two-tier persona selection (seed 002 §4.2): a deterministic, free prefilter.
//!
//! A reviewer survives when one of its declared `triggers` occurs, as whole words, in the
//! review's signals (paths, languages, file kinds, the scout's classification, the documents'
//! text). The personas the flow itself names are an unconditional floor, and a reviewer that
//! declares no trigger cannot be ruled out, so it survives: selection fails open. Tier 1 (the
//! interest poll) is a model call and lives in the runtime.

use crate::catalog::Catalog;
use crate::flow::Flow;
use crate::pack::{ContextPack, FileKind};
use crate::task::Classification;

/// Bound on the document text read for signals, so a huge pack costs a bounded scan.
const MAX_SIGNAL_CHARS: usize = 400_000;

/// Why one persona is a candidate after the prefilter.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub persona: String,
    /// "named by the flow", "no triggers declared", or `trigger "sql"`.
    pub reason: String,
    /// Floor members are not polled: the flow decided.
    pub floor: bool,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn contains_phrase(hay: &str, needle: &str) -> bool {
    !needle.is_empty()
        && hay.match_indices(needle).any(|(i, _)| {
            let before = hay[..i].chars().next_back();
            let after = hay[i + needle.len()..].chars().next();
            !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
        })
}

/// The lowercase text the prefilter matches triggers against.
pub fn signal_text(pack: &ContextPack, classification: &Classification) -> String {
    let mut s = String::new();
    for v in [&classification.domain]
        .into_iter()
        .chain(&classification.languages)
        .chain(&classification.frameworks)
        .chain(&classification.content_types)
        .chain(&classification.review_focus)
    {
        s.push_str(v);
        s.push('\n');
    }
    for f in pack.files.values() {
        // Path components and extension as words: "src/auth.py" -> "src auth py".
        s.push_str(&f.path.replace(['/', '.', '-'], " "));
        s.push(' ');
        s.push_str(&f.language);
        s.push('\n');
    }
    for f in pack.files.values().filter(|f| f.kind == FileKind::Doc) {
        if s.len() >= MAX_SIGNAL_CHARS {
            break;
        }
        let room = MAX_SIGNAL_CHARS - s.len();
        let text: String = f.content.chars().take(room).collect();
        s.push_str(&text);
        s.push('\n');
    }
    s.to_lowercase()
}

/// The reviewers that survive the prefilter, in catalog order.
pub fn prefilter(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    classification: &Classification,
) -> Vec<Candidate> {
    let text = signal_text(pack, classification);
    let named: Vec<&str> = flow.named_personas().into_iter().map(|(_, p)| p).collect();
    let mut out = Vec::new();
    for p in catalog.reviewers() {
        let candidate = |reason: String, floor: bool| Candidate {
            persona: p.name.clone(),
            reason,
            floor,
        };
        if named.contains(&p.name.as_str()) {
            out.push(candidate("named by the flow".into(), true));
        } else if p.triggers.is_empty() {
            out.push(candidate("no triggers declared".into(), false));
        } else if let Some(t) = p
            .triggers
            .iter()
            .find(|t| contains_phrase(&text, &t.trim().to_lowercase()))
        {
            out.push(candidate(format!("trigger {:?}", t.trim()), false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn triggers_select_and_the_flow_floor_stays() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let catalog = Catalog::load(&repo.join("personas")).unwrap();
        let flow = Flow::load(&repo.join("flows/document-review.yaml")).unwrap();
        let pack = ContextPack::snapshot(
            &repo.join("tests/fixtures/code_project"),
            &crate::pack::PackOptions::default(),
        )
        .unwrap();
        let class = Classification {
            domain: "software".into(),
            content_types: vec!["http api".into(), "database access".into()],
            ..Classification::default()
        };
        let got = prefilter(&flow, &catalog, &pack, &class);
        let find = |n: &str| got.iter().find(|c| c.persona == n);
        // The flow's own members survive whatever the material.
        assert!(find("coherence").is_some_and(|c| c.floor));
        assert!(find("scope_guardian").is_some_and(|c| c.floor));
        // A code trigger matches a code project; a clinical one does not.
        assert!(
            find("security_sentinel").is_some_and(|c| !c.floor && c.reason.starts_with("trigger"))
        );
        assert!(find("clinical_research_reviewer").is_none());
        assert!(find("employment_counsel").is_none());
        // Whole words only: "sql" does not match inside "mysqlx".
        assert!(!contains_phrase("use mysqlx here", "sql"));
        assert!(contains_phrase("raw sql, here", "sql"));
    }
}
