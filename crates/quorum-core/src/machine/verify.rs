//! Verification: grounding first for every finding (deterministic, here), then the grounded
//! ones within `max_verifications` in batches of `verify_batch`, each an attempt placed like a
//! specialist task — so a cluster verifies in parallel — preferring places whose models are of
//! another family than the finders'.

use crate::analyzer::is_lead;
use crate::machine::batches::VerifyRound;
use crate::machine::fact::Fact;
use crate::machine::grounded::{ground_one, unverified, Grounded};
use crate::machine::progress::Progress;
use crate::machine::protocol::Level;
use crate::machine::review::Review;
use crate::machine::run::TaskRun;
use crate::machine::schedule::{Input, Place, TaskKey};
use crate::machine::state::{Phase, ReviewMachine};
use crate::models::{family_of, lineage};
use crate::review::consensus::{self, Ballot, Decision};
use crate::review::finding::{Reported, Verdict};
use crate::review::judged::Judged;
use crate::task::Pass;
use std::collections::{BTreeMap, BTreeSet};

/// The share of a wall-time budget after which no more analyzer leads go to verifiers
/// (numerator, denominator): the rest is left for the batches in flight and the synthesis.
const LEAD_TIME_SHARE: (u64, u64) = (4, 5);

impl ReviewMachine {
    /// The self-consistency vote (a flow's `consistency:`), before anything is verified: of
    /// what the passes of one task reported, an anchor enough passes found keeps one finding
    /// and one too few found is dropped (kept aside for the verdicts, `removed_by:
    /// consistency`). Computed from the reported findings alone, so a resumed review votes
    /// the same.
    pub(super) fn vote_on_passes(&mut self) {
        let passes: BTreeMap<&str, &Pass> = self
            .runs
            .iter()
            .filter_map(|r| r.task.as_ref())
            .filter_map(|t| Some((t.id.as_str(), t.pass.as_ref()?)))
            .collect();
        if passes.is_empty() {
            return;
        }
        // Votes count only what grounding does not drop, at the lines it places it.
        let placed: Vec<Option<(u32, u32)>> = self
            .found
            .reported
            .iter()
            .map(|r| {
                if !passes.contains_key(r.task_id.as_str()) {
                    return None;
                }
                let lines = |f: &crate::review::finding::RawFinding| {
                    let a = f.line_start.unwrap_or(0);
                    Some((a, f.line_end.unwrap_or(a)))
                };
                match ground_one(&self.review.pack, &self.review.catalog, r.clone()) {
                    Grounded::Ready { reported, .. } => lines(&reported.finding),
                    // Kept without a check (no evidence quoted): it votes at the lines it cites.
                    Grounded::Decided(j) if j.verdict != Verdict::Hallucinated => {
                        lines(&j.reported.finding)
                    }
                    Grounded::Decided(_) => None,
                }
            })
            .collect();
        let ballots: Vec<Ballot<'_>> = self
            .found
            .reported
            .iter()
            .zip(&placed)
            .map(|(r, lines)| Ballot {
                pass: passes.get(r.task_id.as_str()).copied(),
                file: r.finding.file.as_deref(),
                title: &r.finding.title,
                lines: *lines,
            })
            .collect();
        let decisions = consensus::vote(&ballots);
        let reported = std::mem::take(&mut self.found.reported);
        let (mut duplicates, mut outvoted) = (0usize, 0usize);
        for (r, decision) in reported.into_iter().zip(decisions) {
            match decision {
                Decision::Keep => self.found.reported.push(r),
                Decision::Duplicate => duplicates += 1,
                Decision::Outvoted { reason } => {
                    outvoted += 1;
                    self.found.outvoted.push(Judged {
                        reported: r,
                        verdict: Verdict::Hallucinated,
                        reason,
                        deterministic: true,
                        notes: Vec::new(),
                        ballot: None,
                        rescored: None,
                    });
                }
            }
        }
        self.log(
            Level::Info,
            format!(
                "consistency vote: {} findings stand, {duplicates} found again by other passes, \
                 {outvoted} found by too few passes",
                self.found.reported.len()
            ),
        );
    }

    /// Under a wall-time budget, the analyzer leads of high harm (security, correctness) do not
    /// wait for the specialists: when the plan is made they form an early verification round,
    /// whose batches are released (`release_leads`) before the specialists' tasks are added —
    /// so they take the places first — and, as each ends, alongside them, until the lead
    /// deadline. Their verdicts are recorded per batch like any, and the verification round
    /// takes them as already judged. Without a wall budget every lead within
    /// `max_verifications` is verified anyway, most harmful first, and nothing starts early.
    pub(super) fn start_early_leads(&mut self) {
        if self.lead_deadline_ms().is_none() || self.found.verify.is_some() {
            return;
        }
        let review = self.review.clone();
        let candidates = crate::machine::phases::lead_candidates(&review);
        if !candidates.iter().any(|(_, h)| h.is_high()) {
            return;
        }
        let p = &review.flow.parameters;
        let (budget, batch) = (p.max_verifications, p.verify_batch.max(1));
        let reported: Vec<_> = candidates.iter().map(|(r, _)| r.clone()).collect();
        let mut round = VerifyRound::new(&reported);
        let mut ready = Vec::new();
        for (i, (r, harm)) in candidates.into_iter().enumerate() {
            if let Some(j) = self.found.prior_verdicts.get(&round.keys[i]) {
                round.judged[i] = Some(j.clone());
                continue;
            }
            if !harm.is_high() || ready.len() >= budget {
                continue;
            }
            ready.extend(ground_into(&review, &mut round, i, r));
        }
        round.held = ready.chunks(batch).map(<[_]>::to_vec).collect();
        self.log(
            Level::Info,
            format!(
                "{} high-harm analyzer leads verified while the specialists work",
                ready.len()
            ),
        );
        self.found.verify = Some(round);
        self.release_leads();
    }

    pub(super) fn start_verification(&mut self) {
        self.emit(Progress::Stage {
            stage: "verifier".to_string(),
        });
        let p = &self.review.flow.parameters;
        let (budget, batch) = (p.max_verifications, p.verify_batch.max(1));
        let mut round = VerifyRound::new(&self.found.reported);
        let mut prior = std::mem::take(&mut self.found.prior_verdicts);
        // The early lead round ended with the specialists' phase (which waits for every
        // attempt): what it judged stands, and its calls count with this round's.
        if let Some(early) = self.found.verify.take() {
            for (key, j) in early.keys.iter().zip(&early.judged) {
                if let Some(j) = j {
                    prior.insert(key.clone(), j.clone());
                }
            }
            round.stats = early.stats;
            round.model = early.model;
            round.degraded = early.degraded;
        }
        // A resumed review: what finished batches judged stands, and those model-checked
        // findings already used their share of the budget.
        let mut checked = 0usize;
        for (i, key) in round.keys.iter().enumerate() {
            if let Some(j) = prior.get(key) {
                checked += usize::from(j.ballot.is_some());
                round.judged[i] = Some(j.clone());
            }
        }
        let mut ready = Vec::new();
        for (i, r) in self.found.reported.iter().cloned().enumerate() {
            if round.judged[i].is_some() {
                continue;
            }
            let Some((i, reported, notes)) = ground_into(&self.review, &mut round, i, r) else {
                continue;
            };
            if checked + ready.len() < budget {
                ready.push((i, reported, notes));
            } else {
                let why = format!(
                    "grounded; not model-checked: over the flow's max_verifications ({budget})"
                );
                round.judged[i] = Some(unverified(reported, notes, why));
            }
        }
        // Under a wall-time budget the analyzer leads wait their turn (see `release_leads`);
        // without one they are batched with the rest, as many as the budget allows.
        let (ready, leads): (Vec<_>, Vec<_>) = if self.lead_deadline_ms().is_some() {
            ready.into_iter().partition(|(_, r, _)| !is_lead(r))
        } else {
            (ready, Vec::new())
        };
        round.held = leads.chunks(batch).map(<[_]>::to_vec).collect();
        let mut keys = Vec::new();
        for (key, chunk) in self.stage_batches(&ready, batch, "verifier") {
            self.runs[key].persona = "verifier".into();
            round.batches.insert(key, chunk);
            keys.push(key);
        }
        self.found.verify = Some(round);
        self.prefer_independent(&keys);
        self.add_tasks(keys);
        // Grounding may have decided everything but the leads, or everything.
        self.release_leads();
        self.advance();
    }

    /// Verification batches prefer places serving another model family than the finders'.
    fn prefer_independent(&mut self, keys: &[TaskKey]) {
        let Some(places) = self.independent_verifier_places() else {
            return;
        };
        // Straight into the scheduler, not through `feed`: a preference starts nothing, and
        // `feed` would see a verify phase with no batches yet and call it done.
        for &key in keys {
            let input = Input::Prefer {
                key,
                places: places.clone(),
            };
            let started = self.sched.step(self.now, input);
            debug_assert!(started.is_empty(), "a preference started something");
        }
    }

    /// When analyzer leads stop being handed to verifiers under a wall-time budget: once this
    /// share of it is spent, so the batches in flight and the synthesis still fit.
    fn lead_deadline_ms(&self) -> Option<u64> {
        let wall = self.review.flow.parameters.max_wall_secs;
        let started = self.started_ms?;
        (wall > 0).then(|| {
            started
                .saturating_add(wall.saturating_mul(1000) / LEAD_TIME_SHARE.1 * LEAD_TIME_SHARE.0)
        })
    }

    /// Under a wall-time budget, analyzer leads are verified as time allows rather than as
    /// many as `max_verifications` says at once: at most one lead batch per free place is in
    /// flight, another is handed out as one ends, and once the lead deadline has passed (or
    /// would, before a batch as long as the longest so far could end) the rest stay
    /// UNVERIFIED (and, being leads, are dropped as `unconfirmed_lead`) instead of running
    /// into the budget and ending the whole review partial. Decided from `now` when
    /// a batch ends, so it needs no timer; a resumed review starts its own budget and takes
    /// the verdicts its batches recorded.
    pub(super) fn release_leads(&mut self) {
        let Some(deadline) = self.lead_deadline_ms() else {
            return;
        };
        let early = self.phase == Phase::Specialists;
        if self.halting
            || self.ending.budget_spent.is_some()
            || (self.phase != Phase::Verify && !early)
        {
            return;
        }
        if self.found.verify.as_ref().is_none_or(|r| r.held.is_empty()) {
            return;
        }
        // Another batch would take about as long as the longest one so far: none is handed
        // out that would end past the deadline.
        let longest = self.found.verify.as_ref().map_or(0, |r| {
            r.batches
                .keys()
                .filter(|k| self.sched.task(**k).is_some_and(|t| t.status.is_terminal()))
                .map(|k| self.runs[*k].duration_ms)
                .max()
                .unwrap_or(0)
        });
        if self.now.saturating_add(longest) >= deadline {
            let wall = self.review.flow.parameters.max_wall_secs;
            let why = format!(
                "grounded; not model-checked: no time left in the flow's wall-time budget \
                 ({wall}s), of which leads get the first {}%",
                100 * LEAD_TIME_SHARE.0 / LEAD_TIME_SHARE.1
            );
            let left = self.found.verify.as_mut().map_or(0, |r| r.hold_back(&why));
            self.log(
                Level::Info,
                format!("{left} analyzer leads left unverified: {why}"),
            );
            return;
        }
        let window = self.review.max_concurrent().max(1)
            + self.peers.iter().map(|p| p.capacity).sum::<usize>();
        loop {
            let Some(round) = self.found.verify.as_mut() else {
                return;
            };
            let sched = &self.sched;
            let in_flight = round
                .lead_keys
                .iter()
                .filter(|k| sched.task(**k).is_some_and(|t| !t.status.is_terminal()))
                .count();
            if in_flight >= window {
                return;
            }
            let Some(chunk) = round.held.pop_front() else {
                return;
            };
            let name = format!("verifier-leads-{}", round.lead_keys.len() + 1);
            let key = self.add_run(TaskRun::stage(&name));
            self.runs[key].persona = "verifier".into();
            if let Some(round) = self.found.verify.as_mut() {
                round.batches.insert(key, chunk);
                round.lead_keys.push(key);
            }
            self.prefer_independent(&[key]);
            self.add_tasks(vec![key]);
        }
    }

    /// The places serving a model of a family no finder used, when that is some but not all of
    /// them: verification batches prefer them (independence), and fall back to the rest rather
    /// than wait. `None` when every place — or none — would do.
    fn independent_verifier_places(&self) -> Option<Vec<Place>> {
        if !self.config.remote {
            return None;
        }
        let finders: BTreeSet<String> = self
            .found
            .reported
            .iter()
            .map(|r| lineage(&family_of(&r.reporter.model)))
            .collect();
        let independent = |models: &[String]| {
            models
                .iter()
                .any(|m| !finders.contains(&lineage(&family_of(m))))
        };
        let mut all = vec![(Place::Local, independent(&self.config.local_models))];
        for p in &self.peers {
            all.push((Place::Peer(p.node.clone()), independent(&p.models)));
        }
        let preferred: Vec<Place> = all
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(p, _)| p.clone())
            .collect();
        (!preferred.is_empty() && preferred.len() < all.len()).then_some(preferred)
    }

    /// Every batch has ended: the verdicts in report order, one fact, the gate, the summary.
    pub(super) fn verification_done(&mut self) {
        let Some(round) = self.found.verify.take() else {
            return;
        };
        self.usage.add_counts(&round.stats);
        if round.model.is_some() {
            self.found.verifier_model = round.model.clone();
        }
        self.found.verifier_degraded = round.degraded;
        let mut judged = round.into_judged();
        judged.extend(self.found.outvoted.iter().cloned());
        self.record(Fact::VerifyCompleted {
            judged: judged.clone(),
        });
        let total = judged.len();
        self.emit(Progress::Verified { done: total, total });
        let gated = self.gate(judged);
        self.found.gated = Some(gated);
        self.start_phase(Phase::Synthesize);
    }
}

/// Grounds finding `i` of a verification round: decided there (no quote to check, or a quote
/// not in the source), or returned ready for a model with grounding's notes.
fn ground_into(
    review: &Review,
    round: &mut VerifyRound,
    i: usize,
    r: Reported,
) -> Option<(usize, Reported, Vec<String>)> {
    match ground_one(&review.pack, &review.catalog, r) {
        Grounded::Decided(j) => {
            round.judged[i] = Some(j);
            None
        }
        Grounded::Ready {
            reported, notes, ..
        } => Some((i, reported, notes)),
    }
}
