//! quorum-metrics: one process-wide Prometheus registry and the metrics quorum keeps in it.
//!
//! Code anywhere below the binary (llm clients, the conductor, the node) increments these
//! through the small functions here; `/metrics` renders them with [`render`]. Counting is a
//! map lookup and an atomic add, cheap enough for every model call. quorum-core stays free of
//! it: only the crates that do I/O count.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::OnceLock;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    role: String,
    outcome: String,
    error_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    backend: String,
    model: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    backend: String,
    direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WhereLabel {
    placement: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 50 ms .. ~100 s: from a scripted model to a slow local 70B answer.
    Histogram::new(exponential_buckets(0.05, 2.0, 12))
}

struct Metrics {
    registry: Registry,
    reviews_started: Counter,
    reviews_finished: Family<StatusLabel, Counter>,
    attempts: Family<AttemptLabels, Counter>,
    model_calls: Family<CallLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    call_latency: HistogramFamily<BackendLabel>,
    placements: Family<WhereLabel, Counter>,
    fenced: Family<ReasonLabel, Counter>,
    nodes: Family<StateLabel, Gauge>,
    queues: Family<QueueLabel, Gauge>,
}

fn metrics() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| {
        let mut registry = Registry::with_prefix("quorum");
        let reviews_started = Counter::default();
        registry.register(
            "reviews_started",
            "Reviews started (new or resumed) in this process",
            reviews_started.clone(),
        );
        let reviews_finished = Family::<StatusLabel, Counter>::default();
        registry.register(
            "reviews_finished",
            "Reviews finished, by final status (completed, partial, failed)",
            reviews_finished.clone(),
        );
        let attempts = Family::<AttemptLabels, Counter>::default();
        registry.register(
            "attempts",
            "Stage attempts finished, by role, outcome (ok, error) and error class",
            attempts.clone(),
        );
        let model_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "model_calls",
            "Model calls (each HTTP try), by backend URL, model and outcome class",
            model_calls.clone(),
        );
        let tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "model_tokens",
            "Tokens sent (in) and received (out), by backend URL",
            tokens.clone(),
        );
        let call_latency: HistogramFamily<BackendLabel> =
            Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "model_call_duration_seconds",
            "Latency of successful model calls, by backend URL",
            call_latency.clone(),
        );
        let placements = Family::<WhereLabel, Counter>::default();
        registry.register(
            "placements",
            "Specialist attempts placed, on this node (local) or a peer (remote)",
            placements.clone(),
        );
        let fenced = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "fenced_attempts",
            "Attempts fenced off (late result ignored, lease lapsed, node lost)",
            fenced.clone(),
        );
        let nodes = Family::<StateLabel, Gauge>::default();
        registry.register(
            "cluster_nodes",
            "Cluster members by state (up, suspect, draining, lost), as this node sees them",
            nodes.clone(),
        );
        let queues = Family::<QueueLabel, Gauge>::default();
        registry.register(
            "queue_depth",
            "Work waiting or in flight: reviews_running, tasks_pending (planned specialist tasks neither succeeded nor running), specialists_active, model_calls_waiting, model_calls_in_flight",
            queues.clone(),
        );
        Metrics {
            registry,
            reviews_started,
            reviews_finished,
            attempts,
            model_calls,
            tokens,
            call_latency,
            placements,
            fenced,
            nodes,
            queues,
        }
    })
}

/// A review began running (fresh or resumed).
pub fn review_started() {
    metrics().reviews_started.inc();
}

/// A review ended with `status` (completed, partial, failed).
pub fn review_finished(status: &str) {
    metrics()
        .reviews_finished
        .get_or_create(&StatusLabel {
            status: status.to_string(),
        })
        .inc();
}

/// A stage attempt ended. `error_class` is empty when it succeeded.
pub fn attempt_finished(role: &str, ok: bool, error_class: &str) {
    metrics()
        .attempts
        .get_or_create(&AttemptLabels {
            role: role.to_string(),
            outcome: if ok { "ok" } else { "error" }.to_string(),
            error_class: error_class.to_string(),
        })
        .inc();
}

/// One model call (one HTTP try) to `backend` ended; `outcome` is "ok" or the error class.
pub fn model_call(
    backend: &str,
    model: &str,
    outcome: &str,
    seconds: Option<f64>,
    tokens_in: u64,
    tokens_out: u64,
) {
    let m = metrics();
    m.model_calls
        .get_or_create(&CallLabels {
            backend: backend.to_string(),
            model: model.to_string(),
            outcome: outcome.to_string(),
        })
        .inc();
    if let Some(s) = seconds {
        m.call_latency
            .get_or_create(&BackendLabel {
                backend: backend.to_string(),
            })
            .observe(s);
    }
    for (direction, n) in [("in", tokens_in), ("out", tokens_out)] {
        if n > 0 {
            m.tokens
                .get_or_create(&TokenLabels {
                    backend: backend.to_string(),
                    direction: direction.to_string(),
                })
                .inc_by(n);
        }
    }
}

/// A specialist attempt was placed: `remote` when on a peer.
pub fn placed(remote: bool) {
    metrics()
        .placements
        .get_or_create(&WhereLabel {
            placement: if remote { "remote" } else { "local" }.to_string(),
        })
        .inc();
}

/// An attempt was fenced off for `reason` (late_result, lease_lapsed, node_lost, wrong_node).
pub fn fenced(reason: &str) {
    metrics()
        .fenced
        .get_or_create(&ReasonLabel {
            reason: reason.to_string(),
        })
        .inc();
}

/// Replace the cluster-members gauge with `counts` (state, how many): states absent now read 0.
pub fn set_cluster_nodes(counts: &[(&str, i64)]) {
    let m = metrics();
    for state in ["up", "suspect", "draining", "lost"] {
        let n = counts
            .iter()
            .filter(|(s, _)| *s == state)
            .map(|(_, n)| *n)
            .sum();
        m.nodes
            .get_or_create(&StateLabel {
                state: state.to_string(),
            })
            .set(n);
    }
}

/// Set the depth of `queue` (reviews_running, tasks_pending, specialists_active, ...).
pub fn set_queue_depth(queue: &str, depth: i64) {
    metrics()
        .queues
        .get_or_create(&QueueLabel {
            queue: queue.to_string(),
        })
        .set(depth);
}

/// Add `delta` to the depth of `queue`.
pub fn add_queue_depth(queue: &str, delta: i64) {
    metrics()
        .queues
        .get_or_create(&QueueLabel {
            queue: queue.to_string(),
        })
        .inc_by(delta);
}

/// Counts one item in `queue` for as long as it lives, so a cancelled or failed wait can never
/// leave the gauge high.
pub struct QueueGuard(&'static str);

impl QueueGuard {
    pub fn new(queue: &'static str) -> QueueGuard {
        add_queue_depth(queue, 1);
        QueueGuard(queue)
    }
}

impl Drop for QueueGuard {
    fn drop(&mut self) {
        add_queue_depth(self.0, -1);
    }
}

/// The Content-Type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Everything counted so far, as OpenMetrics text (which Prometheus scrapes natively).
pub fn render() -> String {
    let mut out = String::new();
    if encode(&mut out, &metrics().registry).is_err() {
        // Encoding into a String cannot fail short of a formatter bug; say so in the scrape.
        out = "# quorum: metrics could not be encoded\n# EOF\n".to_string();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_appear_in_the_exposition() {
        review_started();
        review_finished("completed");
        attempt_finished("specialist", false, "timeout");
        model_call("http://m", "qwen", "ok", Some(0.2), 10, 5);
        set_cluster_nodes(&[("up", 2)]);
        let text = render();
        assert!(text.contains("quorum_reviews_started_total "), "{text}");
        assert!(
            text.contains("quorum_reviews_finished_total{status=\"completed\"} "),
            "{text}"
        );
        assert!(text.contains(
            "quorum_attempts_total{role=\"specialist\",outcome=\"error\",error_class=\"timeout\"} "
        ));
        assert!(text.contains("quorum_model_call_duration_seconds_bucket{"));
        assert!(text.contains("quorum_cluster_nodes{state=\"up\"} 2"));
        assert!(text.trim_end().ends_with("# EOF"));
    }
}
