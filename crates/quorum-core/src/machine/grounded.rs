//! A reported finding after grounding: decided without a model, or grounded and ready for the
//! verifier — and the verdict of a grounded finding no model checked.

use crate::catalog::Catalog;
use crate::pack::ContextPack;
use crate::review::echo::PromptEchoes;
use crate::review::finding::ECHO_REASON;
use crate::review::finding::{Reported, Verdict};
use crate::review::grounding::{self, Grounding};
use crate::review::judged::Judged;

/// A reported finding after grounding: decided without a model, or grounded and waiting for one.
#[derive(Debug, Clone)]
pub enum Grounded {
    Decided(Judged),
    /// Grounded: `reported` carries the corrected lines, `notes` what grounding changed.
    Ready {
        reported: Reported,
        excerpt: String,
        notes: Vec<String>,
    },
}

/// Ground one finding. Lines grounding corrected are written into the finding, with a note. A
/// finding grounding could not place that repeats its prompt (a placeholder of the format, an
/// example of its persona in `catalog`) is dropped as a prompt echo, saying what it repeats.
pub fn ground_one(pack: &ContextPack, catalog: &Catalog, mut reported: Reported) -> Grounded {
    match grounding::ground(&reported.finding, pack) {
        Grounding::Decided { verdict, reason } => {
            let echoes =
                PromptEchoes::for_persona(catalog.personas.get(&reported.reporter.persona));
            let (verdict, reason) = match echoes.echo(&reported.finding) {
                Some(what) => (Verdict::Hallucinated, format!("{ECHO_REASON}{what}")),
                None => (verdict, reason),
            };
            Grounded::Decided(Judged {
                reported,
                verdict,
                reason,
                deterministic: true,
                notes: Vec::new(),
                ballot: None,
                rescored: None,
            })
        }
        Grounding::Grounded {
            excerpt,
            corrected,
            note,
        } => {
            if let Some((a, b)) = corrected {
                reported.finding.line_start = Some(a);
                reported.finding.line_end = Some(b);
            }
            Grounded::Ready {
                reported,
                excerpt,
                notes: note.into_iter().collect(),
            }
        }
    }
}

/// A grounded finding no model checked: UNVERIFIED, with the reason in its notes, kept in the
/// report (after the checked findings) rather than dropped or passed off as PLAUSIBLE.
pub fn unverified(reported: Reported, mut notes: Vec<String>, reason: String) -> Judged {
    notes.push(format!("not verified: {reason}"));
    Judged {
        reported,
        verdict: Verdict::Unverified,
        reason,
        deterministic: false,
        notes,
        ballot: None,
        rescored: None,
    }
}

/// Verification without a model, used when the flow budget leaves no room for model verdicts:
/// grounding decides what it can, and a grounded claim is UNVERIFIED (kept, marked).
pub fn ground_only(pack: &ContextPack, catalog: &Catalog, reported: Vec<Reported>) -> Vec<Judged> {
    reported
        .into_iter()
        .map(|r| match ground_one(pack, catalog, r) {
            Grounded::Decided(j) => j,
            Grounded::Ready {
                reported, notes, ..
            } => unverified(
                reported,
                notes,
                "grounded; not model-checked: the flow budget was spent".into(),
            ),
        })
        .collect()
}
