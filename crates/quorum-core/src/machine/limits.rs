//! The review's time limits, all derived from the flow: each attempt's deadline, and the
//! scheduler's leases, backoffs and suspicion windows.

use crate::flows::flow::{Flow, Role};
use crate::machine::job::Job;
use crate::machine::review::Review;
use crate::machine::schedule::SchedulerParams;

/// How long a peer that could not be reached, or refused, is left out of placement.
const SUSPECT_MS: u64 = 3_000;

/// How long a peer that let a lease lapse is left out of placement (unless it delivers first):
/// long enough that the retry of what it lost goes elsewhere.
const LAPSED_NODE_AVOIDED_MS: u64 = 60_000;

/// Model calls per finding in a verification batch: one per verifier, and one for the
/// consultant when the flow has one.
pub fn calls_per_finding(flow: &Flow) -> u64 {
    let consult = flow.optional_stage(Role::Consultant).is_some();
    flow.parameters.verifiers.max(1) as u64 + u64::from(consult)
}

/// The longest a specialist attempt may run anywhere: its turns, each bounded by the call
/// timeout, plus room for the final answer.
pub fn specialist_deadline_ms(flow: &Flow) -> u64 {
    let p = &flow.parameters;
    p.call_timeout_secs
        .max(1)
        .saturating_mul(p.max_iterations as u64 + 2)
        .saturating_mul(1000)
}

/// The longest one attempt of `job` may run.
pub fn deadline_ms(review: &Review, job: &Job) -> u64 {
    let p = &review.flow.parameters;
    let call = p.call_timeout_secs.max(1);
    let secs = match job {
        Job::Specialist { .. } => call.saturating_mul(p.max_iterations as u64 + 2),
        // Every finding is asked of every verifier, and of the consultant when there is one.
        Job::Verify { reported, .. } => call
            .saturating_mul(
                (reported.len() as u64).saturating_mul(calls_per_finding(&review.flow))
                    / review.max_concurrent() as u64
                    + 2,
            )
            .saturating_mul(2),
        Job::Plan(_) => call.saturating_mul(2 * (p.planner_retries as u64 + 1)),
        _ => call.saturating_mul(2),
    };
    secs.saturating_mul(1000)
}

/// The scheduler's tunables for this review; `lease_ms` is the cluster's lease on a remote
/// attempt.
pub fn scheduler_params(review: &Review, lease_ms: u64) -> SchedulerParams {
    let p = &review.flow.parameters;
    SchedulerParams {
        task_attempts: p.task_attempts,
        // Stage runs get at least two tries: a flaky scout should not cost the whole plan.
        stage_attempts: p.task_attempts.max(2),
        circular_fix_repeats: p.circular_fix_repeats,
        local_capacity: review.max_concurrent(),
        lease_ms,
        attempt_ms: specialist_deadline_ms(&review.flow),
        suspect_ms: SUSPECT_MS,
        lapsed_avoid_ms: LAPSED_NODE_AVOIDED_MS,
        max_handbacks: 16,
        backoff_base_ms: 250,
        backoff_cap_ms: 10_000,
    }
}
