//! Observability derived from the progress a review emits: Prometheus counts and the tracing
//! spans (review > stage > attempt) that an OpenTelemetry layer, when installed, exports.
//!
//! Both are fed from the conductor's one `emit` point, so counting never changes what the
//! conductor decides and the conductor carries no observability state of its own.

use crate::progress::Progress;
use quorum_core::review::finding::Finding;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

/// How a trace context crosses to a peer: the binary installs these when it exports traces
/// (the runtime itself knows no tracing backend). `inject` writes a span's context as text
/// headers (W3C `traceparent`); `extract` makes those the parent of a span.
#[derive(Clone, Copy)]
pub struct TracePropagation {
    pub inject: fn(&tracing::Span) -> BTreeMap<String, String>,
    pub extract: fn(&tracing::Span, &BTreeMap<String, String>),
}

static PROPAGATION: OnceLock<TracePropagation> = OnceLock::new();

/// Install the propagation (once per process; later calls are ignored).
pub fn set_trace_propagation(p: TracePropagation) {
    let _ = PROPAGATION.set(p);
}

/// The trace context of `task`'s live attempt in `flow_id`, for a `RemoteAttempt`; None when
/// traces are not exported.
pub fn trace_context(flow_id: &str, task: &str) -> Option<BTreeMap<String, String>> {
    let p = PROPAGATION.get()?;
    let span = attempt_span(flow_id, task)?;
    let headers = (p.inject)(&span);
    (!headers.is_empty()).then_some(headers)
}

/// The span a peer runs a shipped attempt in: a child of the origin's attempt span when the
/// attempt carried its context.
pub fn remote_attempt_span(
    trace: Option<&BTreeMap<String, String>>,
    flow_id: &str,
    task: &str,
    node: &str,
) -> tracing::Span {
    let span = tracing::info_span!(
        parent: None,
        "remote_attempt",
        flow_id = %flow_id,
        task = %task,
        role = role_of(task),
        node = %node,
    );
    if let (Some(p), Some(t)) = (PROPAGATION.get(), trace) {
        (p.extract)(&span, t);
    }
    span
}

/// Open spans of one review (the review itself, its current stage, its live attempts) and
/// what its queue gauges need.
struct ReviewSpans {
    review: tracing::Span,
    stage: Option<tracing::Span>,
    attempts: HashMap<String, tracing::Span>,
    /// Specialist tasks planned and not yet finished for good.
    planned: usize,
    /// Specialist tasks that succeeded.
    done: std::collections::HashSet<String>,
    /// Specialist tasks with an attempt running now.
    running: std::collections::HashSet<String>,
}

/// Recompute the task gauges from every review this process runs.
fn set_task_gauges(all: &HashMap<String, ReviewSpans>) {
    let pending: usize = all
        .values()
        .map(|r| r.planned.saturating_sub(r.done.len() + r.running.len()))
        .sum();
    let active: usize = all.values().map(|r| r.running.len()).sum();
    quorum_metrics::set_queue_depth("tasks_pending", pending as i64);
    quorum_metrics::set_queue_depth("specialists_active", active as i64);
}

fn spans() -> &'static Mutex<HashMap<String, ReviewSpans>> {
    static S: OnceLock<Mutex<HashMap<String, ReviewSpans>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The role a task id stands for: stage runs are named after their role, the rest are
/// specialists.
pub fn role_of(task: &str) -> &'static str {
    // Stage runs are named after their role, batches `role-k`, panel judges `panel:persona`.
    const STAGES: [&str; 8] = [
        "scout",
        "planner",
        "verifier",
        "synthesizer",
        "criteria",
        "conformance",
        "adjudicator",
        "panel",
    ];
    let base = task.split(['-', ':']).next().unwrap_or(task);
    STAGES
        .into_iter()
        .find(|s| *s == base && (task == *s || task[s.len()..].starts_with(['-', ':'])))
        .unwrap_or("specialist")
}

/// A review starts (or resumes) running in this process.
pub fn review_started(flow_id: &str, node: &str) {
    quorum_metrics::review_started();
    quorum_metrics::add_queue_depth("reviews_running", 1);
    let review = tracing::info_span!("review", flow_id = %flow_id, node = %node);
    if let Ok(mut s) = spans().lock() {
        s.insert(
            flow_id.to_string(),
            ReviewSpans {
                review,
                stage: None,
                attempts: HashMap::new(),
                planned: 0,
                done: Default::default(),
                running: Default::default(),
            },
        );
    }
}

/// The span of a live attempt of `task` in `flow_id`, to carry its context to a peer.
pub fn attempt_span(flow_id: &str, task: &str) -> Option<tracing::Span> {
    let s = spans().lock().ok()?;
    let r = s.get(flow_id)?;
    r.attempts
        .get(task)
        .or(r.stage.as_ref())
        .or(Some(&r.review))
        .cloned()
}

/// Count and trace one progress event of `flow_id`.
pub fn observe(flow_id: &str, p: &Progress) {
    match p {
        Progress::TaskFinished {
            task,
            ok,
            error_class,
            ..
        } => quorum_metrics::attempt_finished(
            role_of(task),
            *ok,
            error_class.as_deref().unwrap_or_default(),
        ),
        Progress::Finished { status } => quorum_metrics::review_finished(status),
        _ => {}
    }
    let Ok(mut all) = spans().lock() else {
        return;
    };
    if matches!(p, Progress::Finished { .. }) {
        // Dropping the spans closes them: attempts, then stage, then the review.
        if let Some(mut r) = all.remove(flow_id) {
            r.attempts.clear();
            r.stage.take();
            drop(r);
            quorum_metrics::add_queue_depth("reviews_running", -1);
        }
        set_task_gauges(&all);
        return;
    }
    let Some(r) = all.get_mut(flow_id) else {
        return;
    };
    match p {
        Progress::Planned { tasks, .. } => r.planned = *tasks,
        Progress::Stage { stage } => {
            r.attempts.clear();
            r.stage = Some(tracing::info_span!(parent: &r.review, "stage", stage = %stage));
        }
        Progress::TaskStarted {
            task,
            persona,
            attempt,
            node,
            model,
        } => {
            let parent = r.stage.as_ref().unwrap_or(&r.review);
            let span = tracing::info_span!(
                parent: parent,
                "attempt",
                task = %task,
                role = role_of(task),
                persona = %persona,
                attempt = attempt,
                node = %node,
                model = %model,
            );
            r.attempts.insert(task.clone(), span);
            if role_of(task) == "specialist" {
                r.running.insert(task.clone());
            }
        }
        Progress::TaskFinished {
            task, ok, error, ..
        } => {
            r.running.remove(task);
            if *ok && role_of(task) == "specialist" {
                r.done.insert(task.clone());
            }
            if let Some(span) = r.attempts.remove(task) {
                if !ok {
                    span.in_scope(|| {
                        tracing::info!(
                            error = error.as_deref().unwrap_or_default(),
                            "attempt failed"
                        )
                    });
                }
            }
        }
        _ => {}
    }
    set_task_gauges(&all);
}

/// One `Progress::Finding` per surviving finding, in report order.
pub fn finding_events(findings: &[Finding]) -> Vec<Progress> {
    findings
        .iter()
        .map(|f| Progress::Finding {
            id: f.id.clone(),
            title: f.title.clone(),
            severity: format!("{:?}", f.severity).to_lowercase(),
            file: f.file.clone(),
            line_start: f.line_start,
            line_end: f.line_end,
            verdict: format!("{:?}", f.verdict).to_lowercase(),
            evidence: f.evidence.chars().take(400).collect(),
        })
        .collect()
}

#[cfg(test)]
mod role_tests {
    use super::role_of;

    #[test]
    fn every_stage_run_has_its_role_and_tasks_are_specialists() {
        for (run, role) in [
            ("scout", "scout"),
            ("planner", "planner"),
            ("verifier", "verifier"),
            ("verifier-3", "verifier"),
            ("conformance-2", "conformance"),
            ("adjudicator", "adjudicator"),
            ("adjudicator-1", "adjudicator"),
            ("panel:judge_grounding_skeptic", "panel"),
            ("synthesizer", "synthesizer"),
            ("t1", "specialist"),
            ("sec-1", "specialist"),
            ("scouting", "specialist"),
            ("panelist-1", "specialist"),
        ] {
            assert_eq!(role_of(run), role, "{run}");
        }
    }
}
