//! Cross-validation: N independent verifier votes on one grounded finding, combined by the
//! flow's threshold into the one verdict the rest of the review uses, and the verification
//! ledger that shows the reader who was asked what and what each answered.
//!
//! A vote is a readable verdict (CONFIRMED, PLAUSIBLE, HALLUCINATED, UNVERIFIABLE) from one
//! verifier call. A call that failed or whose answer had no readable verdict is *no vote*: it
//! neither upholds nor rejects. The rules, with `s` the upholding votes (CONFIRMED or
//! PLAUSIBLE), `h` the HALLUCINATED votes and `d = s + h` the decided votes (UNVERIFIABLE
//! abstains: it says the claim cannot be checked, not that it is wrong):
//!
//! | threshold   | kept when      | kept as CONFIRMED when | otherwise            |
//! |-------------|----------------|------------------------|----------------------|
//! | `any`       | `s >= 1`       | `c >= 1`               | HALLUCINATED, dropped |
//! | `majority`  | `2s > d`       | `2c > d`               | HALLUCINATED, dropped |
//! | `unanimous` | `h == 0`       | `c == d`               | HALLUCINATED, dropped |
//!
//! (`c` = CONFIRMED votes; a kept finding that is not CONFIRMED is PLAUSIBLE.) Before those
//! rules: no vote at all leaves the finding UNVERIFIED (kept, with the reason, as a failed
//! single verifier always did); votes that are all UNVERIFIABLE give UNVERIFIABLE (kept). A tie
//! under `majority` does not keep the finding. With one verifier every threshold gives exactly
//! that verifier's verdict.

use crate::review::finding::Verdict;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How many of a finding's verifiers must uphold it for it to stay.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Threshold {
    /// One upholding vote keeps the finding.
    #[default]
    Any,
    /// More upholding than HALLUCINATED votes.
    Majority,
    /// No HALLUCINATED vote.
    Unanimous,
}

impl Threshold {
    pub const ALL: [Threshold; 3] = [Threshold::Any, Threshold::Majority, Threshold::Unanimous];

    /// Exact (case-insensitive) names only: a threshold decides what is dropped, so a typo must
    /// be an error rather than a guess.
    pub fn parse(s: &str) -> Option<Threshold> {
        Threshold::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s.trim()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Threshold::Any => "any",
            Threshold::Majority => "majority",
            Threshold::Unanimous => "unanimous",
        }
    }

    /// Whether `yes` votes out of `decided` meet this threshold.
    fn met(self, yes: usize, decided: usize) -> bool {
        match self {
            Threshold::Any => yes >= 1,
            Threshold::Majority => 2 * yes > decided,
            Threshold::Unanimous => decided > 0 && yes == decided,
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One verifier's answer on one finding, as the ledger shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Vote {
    /// Which of the finding's verifiers: "v1", "v2", ...
    pub verifier: String,
    pub model: String,
    /// `None` when the call failed or its answer had no readable verdict (no vote).
    pub verdict: Option<Verdict>,
    /// The verifier's reason, or why there is no vote.
    pub reason: String,
    /// A short digest (blake3, 12 hex) of the exact prompt the verifier was sent, so a reader
    /// can tell identical questions from different ones without the prompt in the report.
    #[serde(default)]
    pub prompt_digest: String,
}

/// What the verifiers of one finding said, and the threshold their votes were combined by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ballot {
    pub threshold: Threshold,
    pub votes: Vec<Vote>,
}

/// The combined verdict of `votes` under `threshold` (rules in the module docs).
pub fn combine(threshold: Threshold, votes: &[Option<Verdict>]) -> Verdict {
    let cast: Vec<Verdict> = votes
        .iter()
        .flatten()
        .copied()
        .filter(|v| *v != Verdict::Unverified)
        .collect();
    if cast.is_empty() {
        return Verdict::Unverified;
    }
    let count = |f: &dyn Fn(Verdict) -> bool| cast.iter().filter(|v| f(**v)).count();
    let confirmed = count(&|v| v == Verdict::Confirmed);
    let upheld = count(&|v| matches!(v, Verdict::Confirmed | Verdict::Plausible));
    let rejected = count(&|v| v == Verdict::Hallucinated);
    let decided = upheld + rejected;
    if decided == 0 {
        return Verdict::Unverifiable;
    }
    if !threshold.met(upheld, decided) {
        Verdict::Hallucinated
    } else if threshold.met(confirmed, decided) {
        Verdict::Confirmed
    } else {
        Verdict::Plausible
    }
}

impl Ballot {
    /// The combined verdict and its reason. One vote keeps that verifier's own reason (what a
    /// single verifier always reported); several name the count and the first reason that
    /// agrees with the outcome. No vote at all gives UNVERIFIED with the first failure.
    pub fn outcome(&self) -> (Verdict, String) {
        let verdicts: Vec<Option<Verdict>> = self.votes.iter().map(|v| v.verdict).collect();
        let verdict = combine(self.threshold, &verdicts);
        let first_reason = |pred: &dyn Fn(Option<Verdict>) -> bool| {
            self.votes
                .iter()
                .find(|v| pred(v.verdict))
                .map(|v| v.reason.clone())
                .unwrap_or_default()
        };
        if self.votes.len() == 1 {
            return (verdict, self.votes[0].reason.clone());
        }
        let cast = verdicts.iter().flatten().count();
        let reason = match verdict {
            Verdict::Unverified => format!(
                "no verifier gave a verdict ({} asked): {}",
                self.votes.len(),
                first_reason(&|_| true)
            ),
            Verdict::Unverifiable => format!(
                "{cast} of {} verifiers found it unverifiable: {}",
                self.votes.len(),
                first_reason(&|v| v == Some(Verdict::Unverifiable))
            ),
            Verdict::Hallucinated => {
                let n = verdicts
                    .iter()
                    .filter(|v| **v == Some(Verdict::Hallucinated))
                    .count();
                format!(
                    "{n} of {cast} votes rejected it ({} threshold): {}",
                    self.threshold,
                    first_reason(&|v| v == Some(Verdict::Hallucinated))
                )
            }
            Verdict::Confirmed | Verdict::Plausible => {
                let n = verdicts
                    .iter()
                    .filter(|v| matches!(v, Some(Verdict::Confirmed | Verdict::Plausible)))
                    .count();
                format!(
                    "{n} of {cast} votes upheld it ({} threshold): {}",
                    self.threshold,
                    first_reason(&|v| v == Some(verdict))
                )
            }
        };
        (verdict, reason)
    }

    /// What the votes that were not counted say, for the finding's notes.
    pub fn no_votes(&self) -> Vec<String> {
        if self.votes.len() < 2 {
            return Vec::new();
        }
        self.votes
            .iter()
            .filter(|v| v.verdict.is_none())
            .map(|v| {
                format!(
                    "verifier {} ({}) gave no vote: {}",
                    v.verifier, v.model, v.reason
                )
            })
            .collect()
    }
}

/// A short digest of a prompt for the ledger.
pub fn prompt_digest(system: &str, user: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(system.as_bytes());
    h.update(b"\n\0\n");
    h.update(user.as_bytes());
    h.finalize().to_hex()[..12].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Threshold::{Any, Majority, Unanimous};

    const C: Option<Verdict> = Some(Verdict::Confirmed);
    const P: Option<Verdict> = Some(Verdict::Plausible);
    const H: Option<Verdict> = Some(Verdict::Hallucinated);
    const U: Option<Verdict> = Some(Verdict::Unverifiable);
    const X: Option<Verdict> = None; // the call failed: no vote

    /// The threshold table of the README and the flow files, row by row.
    #[test]
    fn threshold_table() {
        use Verdict::{
            Confirmed as KC, Hallucinated as DH, Plausible as KP, Unverifiable as KU,
            Unverified as UV,
        };
        #[rustfmt::skip]
        let table: &[(&[Option<Verdict>], Verdict, Verdict, Verdict)] = &[
            // votes              any  majority unanimous
            (&[C],                KC,  KC,  KC),
            (&[P],                KP,  KP,  KP),
            (&[H],                DH,  DH,  DH),
            (&[U],                KU,  KU,  KU),
            (&[X],                UV,  UV,  UV),
            (&[C, H, H],          KC,  DH,  DH),
            (&[C, P, H],          KC,  KP,  DH),
            (&[C, C, H],          KC,  KC,  DH),
            (&[P, P, H],          KP,  KP,  DH),
            (&[C, C, P],          KC,  KC,  KP),
            (&[C, C, C],          KC,  KC,  KC),
            (&[P, H, H],          KP,  DH,  DH),
            (&[H, H, H],          DH,  DH,  DH),
            (&[C, H],             KC,  DH,  DH), // a tie does not keep under majority
            (&[C, X, X],          KC,  KC,  KC), // failures are no votes
            (&[H, X, X],          DH,  DH,  DH),
            (&[X, X, X],          UV,  UV,  UV),
            (&[C, U, U],          KC,  KC,  KC), // UNVERIFIABLE abstains
            (&[H, U, U],          DH,  DH,  DH),
            (&[U, U, X],          KU,  KU,  KU),
            (&[C, U, H],          KC,  DH,  DH),
            (&[C, P, U, H, H],    KC,  DH,  DH),
            (&[C, P, P, H, H],    KC,  KP,  DH),
        ];
        for (votes, any, majority, unanimous) in table {
            for (t, want) in [(Any, any), (Majority, majority), (Unanimous, unanimous)] {
                assert_eq!(combine(t, votes), *want, "{t} over {votes:?}");
            }
        }
    }

    #[test]
    fn one_verifier_is_todays_verdict_under_every_threshold() {
        for v in [C, P, H, U, X] {
            let first = combine(Any, &[v]);
            for t in Threshold::ALL {
                assert_eq!(combine(t, &[v]), first);
            }
        }
    }

    fn vote(k: usize, verdict: Option<Verdict>, reason: &str) -> Vote {
        Vote {
            verifier: format!("v{k}"),
            model: "m".into(),
            verdict,
            reason: reason.into(),
            prompt_digest: String::new(),
        }
    }

    #[test]
    fn outcome_reasons_are_deterministic() {
        let single = Ballot {
            threshold: Majority,
            votes: vec![vote(1, C, "line 3 builds SQL from input")],
        };
        assert_eq!(
            single.outcome(),
            (Verdict::Confirmed, "line 3 builds SQL from input".into())
        );
        let mixed = Ballot {
            threshold: Majority,
            votes: vec![
                vote(1, H, "no query here"),
                vote(2, P, "depends on the caller"),
                vote(3, C, "line 3 builds SQL"),
            ],
        };
        assert_eq!(
            mixed.outcome(),
            (
                Verdict::Plausible,
                "2 of 3 votes upheld it (majority threshold): depends on the caller".into()
            )
        );
        let failed = Ballot {
            threshold: Any,
            votes: vec![vote(1, X, "timeout"), vote(2, X, "500")],
        };
        assert_eq!(failed.outcome().0, Verdict::Unverified);
        assert!(failed.outcome().1.contains("timeout"));
        assert_eq!(failed.no_votes().len(), 2);
    }

    #[test]
    fn thresholds_parse_exactly() {
        assert_eq!(Threshold::parse("Majority"), Some(Majority));
        assert_eq!(Threshold::parse("unanimous"), Some(Unanimous));
        assert_eq!(Threshold::parse("most"), None);
        assert_eq!(Threshold::parse(""), None);
    }
}
