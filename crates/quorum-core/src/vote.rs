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

use crate::finding::{Finding, Judged, Verdict};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How many of a finding's verifiers must uphold it for it to stay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// The user's overrides of a flow's `verifiers` and `verify_threshold` (`quorum review
/// --verifiers N --verify-threshold T`, or a submitted review's options), checked; the error is
/// one line naming the flag and what it accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Overrides {
    pub verifiers: Option<usize>,
    pub verify_threshold: Option<Threshold>,
}

impl Overrides {
    pub fn parse(verifiers: Option<usize>, threshold: Option<&str>) -> Result<Overrides, String> {
        if let Some(n) = verifiers {
            if !(1..=crate::flow::MAX_VERIFIERS).contains(&n) {
                return Err(format!(
                    "--verifiers must be between 1 and {} (got {n})",
                    crate::flow::MAX_VERIFIERS
                ));
            }
        }
        let verify_threshold = match threshold {
            None => None,
            Some(t) => Some(Threshold::parse(t).ok_or_else(|| {
                format!("--verify-threshold must be any, majority or unanimous (got {t:?})")
            })?),
        };
        Ok(Overrides {
            verifiers,
            verify_threshold,
        })
    }

    /// Apply to a flow's parameters (the flag wins over the flow file).
    pub fn apply(&self, p: &mut crate::flow::FlowParams) {
        if let Some(n) = self.verifiers {
            p.verifiers = n;
        }
        if let Some(t) = self.verify_threshold {
            p.verify_threshold = t;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.verifiers.is_none() && self.verify_threshold.is_none()
    }
}

/// One verifier's answer on one finding, as the ledger shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// One model-checked finding in report.json's `verification_ledger`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The report id the verdict went into (F001, R001, ... in `findings`, `residual_concerns`
    /// or `pre_existing`): the finding with its anchor, else its title and file; `null` when
    /// it was dropped (or a merge left neither to match).
    pub finding: Option<String>,
    pub title: String,
    pub file: Option<String>,
    pub line_start: Option<u32>,
    /// The specialist task that reported it.
    pub task: String,
    pub anchor: String,
    pub votes: Vec<Vote>,
    pub threshold: Threshold,
    /// The combined verdict (HALLUCINATED: the finding is in `dropped`).
    pub outcome: Verdict,
    /// The confidence consultant's re-scoring, when the flow has one and it answered: the
    /// finder's original scores, the consultant's model and reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescored: Option<crate::finding::Rescored>,
}

/// The ledger of every judged finding that was model-checked, in verdict order, with the id
/// each one ended up under in `lists` (the report's findings, residual concerns, pre-existing).
pub fn ledger(judged: &[Judged], lists: &[&[Finding]]) -> Vec<LedgerEntry> {
    judged
        .iter()
        .filter_map(|j| {
            let ballot = j.ballot.as_ref()?;
            let anchor = crate::dedup::anchor(&j.reported.finding);
            // By anchor; a flow that merges by its own key (document review's sections) is
            // matched by title and file instead.
            let f = &j.reported.finding;
            let finding = (j.verdict != Verdict::Hallucinated)
                .then(|| {
                    let all = || lists.iter().flat_map(|l| l.iter());
                    all()
                        .find(|x| x.anchor == anchor)
                        .or_else(|| all().find(|x| x.title == f.title && x.file == f.file))
                        .map(|x| x.id.clone())
                })
                .flatten();
            Some(LedgerEntry {
                finding,
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                line_start: j.reported.finding.line_start,
                task: j.reported.task_id.clone(),
                anchor,
                votes: ballot.votes.clone(),
                threshold: ballot.threshold,
                outcome: j.verdict,
                rescored: j.rescored.clone(),
            })
        })
        .collect()
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
    fn overrides_check_their_range_and_names() {
        let o = Overrides::parse(Some(3), Some("majority")).unwrap();
        let mut p = crate::flow::FlowParams::default();
        o.apply(&mut p);
        assert_eq!((p.verifiers, p.verify_threshold), (3, Majority));
        let e = Overrides::parse(Some(0), None).unwrap_err();
        assert!(e.starts_with("--verifiers must be between 1 and"), "{e}");
        assert!(Overrides::parse(Some(10), None).is_err());
        let e = Overrides::parse(None, Some("most")).unwrap_err();
        assert_eq!(
            e,
            "--verify-threshold must be any, majority or unanimous (got \"most\")"
        );
        assert!(Overrides::parse(None, None).unwrap().is_empty());
    }

    #[test]
    fn the_ledger_names_the_report_id_each_checked_finding_went_into() {
        use crate::finding::{RawFinding, Reported, Reporter, Severity};
        let judged = |title: &str, line: u32, verdict: Verdict, ballot: bool| Judged {
            reported: Reported {
                task_id: "t1".into(),
                reporter: Reporter {
                    persona: "p".into(),
                    model: "m".into(),
                    node: "n".into(),
                },
                finding: RawFinding {
                    title: title.into(),
                    severity: Severity::P1,
                    confidence: 0.9,
                    category: "c".into(),
                    file: Some("a.py".into()),
                    line_start: Some(line),
                    line_end: Some(line),
                    symbol: None,
                    evidence: "e".into(),
                    why_it_matters: "w".into(),
                    suggested_fix: "f".into(),
                    routing: Default::default(),
                },
            },
            verdict,
            reason: "r".into(),
            deterministic: false,
            notes: Vec::new(),
            ballot: ballot.then(|| Ballot {
                threshold: Majority,
                votes: vec![vote(1, Some(verdict), "r")],
            }),
            rescored: None,
        };
        let all = vec![
            judged("kept", 3, Verdict::Confirmed, true),
            judged("dropped", 30, Verdict::Hallucinated, true),
            judged("by grounding", 60, Verdict::Unverifiable, false),
            judged("own anchor", 90, Verdict::Plausible, true),
        ];
        let mut gated = crate::dedup::merge_and_gate(all.clone(), 0.5);
        // A flow with its own merge key (document review) anchors differently.
        for f in &mut gated.findings {
            if f.title == "own anchor" {
                f.anchor = "a.py#Section".into();
            }
        }
        let l = ledger(&all, &[&gated.findings, &gated.residual]);
        let ids: Vec<(&str, Option<&str>, Verdict)> = l
            .iter()
            .map(|e| (e.title.as_str(), e.finding.as_deref(), e.outcome))
            .collect();
        let id_of = |t: &str| {
            gated
                .findings
                .iter()
                .find(|f| f.title == t)
                .map(|f| f.id.as_str())
        };
        assert_eq!(
            ids,
            [
                ("kept", id_of("kept"), Verdict::Confirmed),
                ("dropped", None, Verdict::Hallucinated),
                ("own anchor", id_of("own anchor"), Verdict::Plausible),
            ]
        );
        assert!(l
            .iter()
            .all(|e| e.finding.is_some() || e.outcome == Verdict::Hallucinated));
        assert_eq!(l[0].anchor, "a.py:L0");
        assert_eq!((l[0].task.as_str(), l[0].threshold), ("t1", Majority));
    }

    #[test]
    fn thresholds_parse_exactly() {
        assert_eq!(Threshold::parse("Majority"), Some(Majority));
        assert_eq!(Threshold::parse("unanimous"), Some(Unanimous));
        assert_eq!(Threshold::parse("most"), None);
        assert_eq!(Threshold::parse(""), None);
    }
}
