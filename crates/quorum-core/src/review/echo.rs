//! A finding that repeats its prompt instead of the material: a format's placeholder copied as
//! evidence (`<the cited lines, copied exactly from the file>`), or a persona's example —
//! its situation or its finding, whole or a clause of it — given as the quote from the target.
//!
//! Small models do this (a 1.5B copied "the sort column comes straight from the query string
//! into SQL" from the security persona's example onto an unrelated function). Grounding drops
//! such a finding anyway (its evidence is not in the file); this says why, so the report's
//! `removed_by` is `prompt_echo` and a prompt change that invites copying shows in the counts.
//! It is asked only of a finding grounding could not place: a quote that is really in the file
//! is the material, whatever an example says.

use crate::catalog::Persona;
use crate::review::finding::RawFinding;
use crate::schema::FINDINGS_FORMAT;

/// Copied text shorter than this (normalised) is too common to call an echo of an example.
const MIN_ECHO_CHARS: usize = 20;

/// The texts of one task's prompt a finding could repeat.
#[derive(Debug, Clone, Default)]
pub struct PromptEchoes {
    /// (normalised text, as shown) of each placeholder and example sentence.
    texts: Vec<(String, String)>,
}

/// Lowercase letters and digits, single spaces: how two copies of a sentence compare.
fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = true;
    for c in s.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    out.trim_end().to_string()
}

/// The placeholders of an answer format: the text between each `<` and `>`.
pub fn placeholders(format: &str) -> Vec<&str> {
    format
        .split('<')
        .skip(1)
        .filter_map(|s| s.split_once('>').map(|(p, _)| p))
        .filter(|p| !p.trim().is_empty())
        .collect()
}

impl PromptEchoes {
    /// What a specialist of `persona` was shown: the findings format's placeholders and the
    /// persona's examples (none for an analyzer's lead or an unknown reporter).
    pub fn for_persona(persona: Option<&Persona>) -> PromptEchoes {
        let mut texts: Vec<(String, String)> = placeholders(FINDINGS_FORMAT)
            .into_iter()
            .map(|p| (normalize(p), format!("<{p}>")))
            .collect();
        for ex in persona.into_iter().flat_map(|p| &p.examples) {
            for t in [&ex.situation, &ex.finding] {
                texts.push((normalize(t), t.clone()));
            }
        }
        texts.retain(|(n, _)| !n.is_empty());
        PromptEchoes { texts }
    }

    /// What `finding` repeats instead of quoting the material, if it does: its evidence equal
    /// to a placeholder, or equal to (or a clause of, or containing) an example sentence.
    pub fn echo(&self, finding: &RawFinding) -> Option<String> {
        let evidence = normalize(&finding.evidence);
        if evidence.is_empty() {
            return None;
        }
        self.texts.iter().find_map(|(text, shown)| {
            let same = evidence == *text;
            let clause = evidence.len() >= MIN_ECHO_CHARS
                && (text.contains(&evidence) || evidence.contains(text.as_str()))
                && text.len() >= MIN_ECHO_CHARS;
            (same || clause).then(|| format!("its evidence is the prompt's \"{shown}\""))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(evidence: &str) -> RawFinding {
        serde_json::from_value(serde_json::json!({
            "title": "t", "severity": "P1", "confidence": 0.9, "category": "security/injection",
            "file": "a.py", "line_start": 1, "line_end": 1, "evidence": evidence,
            "why_it_matters": "w", "suggested_fix": "f"
        }))
        .unwrap()
    }

    fn persona() -> Persona {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../personas");
        let catalog = crate::catalog::Catalog::load(&root).expect("the shipped catalog");
        catalog.personas["security_sentinel"].clone()
    }

    #[test]
    fn a_copied_placeholder_or_example_is_an_echo_and_real_code_is_not() {
        let e = PromptEchoes::for_persona(Some(&persona()));
        // The format's placeholder, copied.
        assert!(e
            .echo(&finding("<the cited lines, copied exactly from the file>"))
            .is_some());
        // A clause of the example finding, as the 1.5B did.
        let why = e
            .echo(&finding(
                "the sort column comes straight from the query string into SQL",
            ))
            .unwrap();
        assert!(why.contains("sort column"), "{why}");
        // The example's code quote.
        assert!(e
            .echo(&finding("'ORDER BY ' + request.args['sort']"))
            .is_some());
        // Code that merely shares a short token with an example is not.
        assert!(e.echo(&finding("cursor.execute(sql)")).is_none());
        assert!(e.echo(&finding("")).is_none());
        // Without a persona, only the format's placeholders count.
        let bare = PromptEchoes::for_persona(None);
        assert!(bare
            .echo(&finding(
                "the sort column comes straight from the query string into SQL"
            ))
            .is_none());
    }

    #[test]
    fn the_findings_format_has_placeholders_and_nothing_to_copy() {
        assert!(placeholders(FINDINGS_FORMAT).len() >= 8);
        assert_eq!(
            crate::schema::copyable_values(FINDINGS_FORMAT),
            Vec::<String>::new()
        );
    }
}
