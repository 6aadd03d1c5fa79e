//! OpenTelemetry traces over OTLP/HTTP (protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: the runtime's review > stage > attempt spans,
//! with the context carried to peers in each `RemoteAttempt`.
//!
//! The exporter runs on the SDK's own batch thread with a blocking HTTP client, so it must be
//! built and shut down outside the async runtime; `main` does both.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::{BTreeMap, HashMap};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::Layer;

/// Whether traces are asked for by the standard environment.
pub fn wanted() -> bool {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
}

/// The tracing layer that exports quorum's spans, and the provider to shut down at exit.
/// `service` names this process in the traces (the node name when known).
pub fn layer<S>(service: &str) -> Result<(impl Layer<S>, SdkTracerProvider), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| format!("cannot set up the OTLP trace exporter: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service.to_string())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("quorum");
    quorum_runtime::obs::set_trace_propagation(quorum_runtime::obs::TracePropagation {
        inject,
        extract,
    });
    // Only the runtime's own review/stage/attempt spans: not every library's internals.
    let targets = Targets::new().with_target("quorum_runtime", tracing::Level::INFO);
    Ok((
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(targets),
        provider,
    ))
}

fn inject(span: &tracing::Span) -> BTreeMap<String, String> {
    let mut headers: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut headers);
    headers.into_iter().collect()
}

fn extract(span: &tracing::Span, headers: &BTreeMap<String, String>) {
    let headers: HashMap<String, String> = headers.clone().into_iter().collect();
    let cx = TraceContextPropagator::new().extract(&headers);
    if let Err(e) = span.set_parent(cx) {
        tracing::debug!(error = %e, "cannot attach a peer's trace context");
    }
}
