//! How long attempts and test runs take in this run, and from that whether a change that came
//! back alone should wait for the next one: when another attempt is due back before a test run
//! here would end, testing the two together costs one run instead of two.

use std::collections::BTreeMap;
use std::time::Instant;

/// Weight of the newest duration in the running averages.
const NEWEST: f64 = 0.3;

/// The run's pace: attempts in flight since when, and the typical attempt and test run.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    in_flight: BTreeMap<(String, u32), Instant>,
    attempt_secs: Option<f64>,
    test_secs: Option<f64>,
}

fn average(old: Option<f64>, new: f64) -> Option<f64> {
    Some(match old {
        Some(o) => o * (1.0 - NEWEST) + new * NEWEST,
        None => new,
    })
}

impl Pace {
    /// An attempt was placed at `now`.
    pub fn started(&mut self, finding: &str, attempt: u32, now: Instant) {
        self.in_flight.insert((finding.to_string(), attempt), now);
    }

    /// An attempt came back at `now` with its result: its duration counts.
    pub fn finished(&mut self, finding: &str, attempt: u32, now: Instant) {
        if let Some(at) = self.in_flight.remove(&(finding.to_string(), attempt)) {
            self.attempt_secs = average(self.attempt_secs, (now - at).as_secs_f64());
        }
    }

    /// An attempt came back without a result (handed back): it no longer runs.
    pub fn forget(&mut self, finding: &str, attempt: u32) {
        self.in_flight.remove(&(finding.to_string(), attempt));
    }

    /// A test run here took `secs`.
    pub fn tested(&mut self, secs: f64) {
        self.test_secs = average(self.test_secs, secs);
    }

    /// How long to hold a lone change at `now` for the next attempt to come back: a test
    /// run's length when one is due back before a run started now would end; None when none
    /// is (test it now).
    pub fn wait_for_next(&self, now: Instant) -> Option<std::time::Duration> {
        let test = self.test_secs?;
        self.next_due_within_a_test(now)
            .then(|| std::time::Duration::from_secs_f64(test))
    }

    /// Whether another attempt is due back before a test run started at `now` would end (and
    /// is not overdue by more than a test run: a stuck one is not waited for).
    pub fn next_due_within_a_test(&self, now: Instant) -> bool {
        let (Some(attempt), Some(test)) = (self.attempt_secs, self.test_secs) else {
            return false;
        };
        self.in_flight.values().any(|at| {
            let remaining = attempt - now.saturating_duration_since(*at).as_secs_f64();
            remaining <= test && remaining >= -test
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lone_change_waits_only_for_an_attempt_due_within_a_test_run() {
        let t0 = Instant::now();
        let mut p = Pace::default();
        assert!(!p.next_due_within_a_test(t0), "nothing known yet");
        p.started("F1", 1, t0);
        p.finished("F1", 1, t0 + Duration::from_secs(10));
        p.tested(2.0);
        // F2 started at t0: due at t0+10.
        p.started("F2", 1, t0);
        assert!(!p.next_due_within_a_test(t0 + Duration::from_secs(5)));
        assert!(p.next_due_within_a_test(t0 + Duration::from_secs(9)));
        assert!(p.next_due_within_a_test(t0 + Duration::from_secs(11)));
        assert!(
            !p.next_due_within_a_test(t0 + Duration::from_secs(13)),
            "overdue by more than a test run: not waited for"
        );
        assert_eq!(
            p.wait_for_next(t0 + Duration::from_secs(9)),
            Some(Duration::from_secs(2)),
            "held no longer than a test run"
        );
        p.forget("F2", 1);
        assert!(!p.next_due_within_a_test(t0 + Duration::from_secs(9)));
    }
}
