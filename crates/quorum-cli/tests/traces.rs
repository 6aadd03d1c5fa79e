//! OpenTelemetry: a real two-node `quorum node` cluster exports its spans over OTLP/HTTP to an
//! in-test receiver; the review's trace covers every stage and continues on the peer.
#![cfg(feature = "otel")]
mod common;

use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use quorum_api::ApiClient;
use quorum_testkit::ScriptedServer;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
    attrs: HashMap<String, String>,
}

/// A minimal OTLP/HTTP collector: POST /v1/traces, protobuf body, every span sent on.
async fn receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<Span>) {
    use axum::routing::post;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: axum::body::Bytes| {
            let tx = tx.clone();
            async move {
                let req =
                    ExportTraceServiceRequest::decode(body.as_ref()).expect("not OTLP protobuf");
                for rs in req.resource_spans {
                    let service = rs
                        .resource
                        .iter()
                        .flat_map(|r| r.attributes.iter())
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                        .map(|v| match v {
                            AnyValue::StringValue(s) => s.clone(),
                            other => format!("{other:?}"),
                        })
                        .unwrap_or_default();
                    for ss in rs.scope_spans {
                        for s in ss.spans {
                            let attrs = s
                                .attributes
                                .iter()
                                .filter_map(|kv| {
                                    let v = match kv.value.as_ref()?.value.as_ref()? {
                                        AnyValue::StringValue(s) => s.clone(),
                                        AnyValue::IntValue(i) => i.to_string(),
                                        other => format!("{other:?}"),
                                    };
                                    Some((kv.key.clone(), v))
                                })
                                .collect();
                            let _ = tx.send(Span {
                                service: service.clone(),
                                name: s.name,
                                trace_id: s.trace_id,
                                span_id: s.span_id,
                                parent: s.parent_span_id,
                                attrs,
                            });
                        }
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    (url, rx)
}

struct Node {
    child: tokio::process::Child,
    cluster: String,
    api: Option<String>,
    server: ScriptedServer,
}

async fn start(name: &str, work: &Path, join: Option<&str>, api: bool, otlp: &str) -> Node {
    let server = ScriptedServer::start(six_task_script(0, false))
        .await
        .unwrap();
    let mut args: Vec<String> = [
        "--name",
        name,
        "--listen",
        "127.0.0.1:0",
        "--heartbeat-ms",
        "100",
        "--deadline-ms",
        "1000",
        "--model",
        MODEL,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend([
        "--backend".into(),
        format!("ollama={}", server.ollama_url()),
    ]);
    args.extend([
        "--data-dir".into(),
        work.join(format!("data-{name}")).display().to_string(),
    ]);
    if api {
        args.extend(["--api".into(), "127.0.0.1:0".into()]);
    }
    if let Some(j) = join {
        args.extend(["--join".into(), j.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = spawn_node(
        node_command(&args, work)
            .env("QUORUM_COOKIE", "trace-test-cookie")
            // One specialist at a time per node, so the conductor spreads tasks over both.
            .env("QUORUM_MAX_CONCURRENT", "1")
            .env("RUST_LOG", "warn")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
            .env("OTEL_BSP_SCHEDULE_DELAY", "200"),
    )
    .await;
    Node {
        cluster: node.cluster().to_string(),
        api: node.api,
        child: node.child,
        server,
    }
}

async fn stop(node: &mut Node) {
    let pid = node.child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = tokio::time::timeout(Duration::from_secs(60), node.child.wait())
        .await
        .expect("node did not exit on SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_node_review_is_one_trace_covering_every_stage_and_the_peer() {
    tokio::time::timeout(Duration::from_secs(240), async {
        let (otlp, mut spans) = receiver().await;
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let mut a = start("ta", w, None, true, &otlp).await;
        let mut b = start("tb", w, Some(&a.cluster.clone()), false, &otlp).await;
        let api = a.api.clone().unwrap();
        let c = ApiClient::connect(&api, NODE_TOKEN).await.unwrap();
        for i in 0.. {
            assert!(i < 600, "the two nodes never saw each other");
            let alive = c
                .cluster_status()
                .await
                .unwrap()
                .into_iter()
                .filter(|n| n.alive)
                .count();
            if alive == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let o = client(
            &[
                "review",
                fixture("code_project").to_str().unwrap(),
                "--cluster",
                &api,
                "--out",
                w.join("out").to_str().unwrap(),
                "--quiet",
            ],
            w,
        )
        .await;
        assert!(
            matches!(o.status.code(), Some(0) | Some(1)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let peer_calls = b
            .server
            .requests()
            .iter()
            .filter(|r| task_of(r).is_some())
            .count();
        assert!(peer_calls > 0, "the peer ran no specialist attempt");
        assert!(!a.server.requests().is_empty());
        // A node flushes its spans when it stops.
        stop(&mut b).await;
        stop(&mut a).await;
        let mut got = Vec::new();
        while let Ok(s) = spans.try_recv() {
            got.push(s);
        }

        let reviews: Vec<&Span> = got.iter().filter(|s| s.name == "review").collect();
        assert_eq!(reviews.len(), 1, "{got:#?}");
        let review = reviews[0];
        assert_eq!(review.service, "quorum-node-ta");
        let stages: Vec<&str> = got
            .iter()
            .filter(|s| s.name == "stage" && s.trace_id == review.trace_id)
            .map(|s| s.attrs.get("stage").map(String::as_str).unwrap_or(""))
            .collect();
        for st in ["scout", "planner", "specialists", "verifier", "synthesizer"] {
            assert!(stages.contains(&st), "no {st} stage span: {stages:?}");
        }
        let attempts: Vec<&Span> = got
            .iter()
            .filter(|s| s.name == "attempt" && s.trace_id == review.trace_id)
            .collect();
        assert!(attempts.len() >= 6 + 4, "{attempts:#?}");
        let remote: Vec<&Span> = got.iter().filter(|s| s.name == "remote_attempt").collect();
        assert!(!remote.is_empty(), "the peer exported no attempt span");
        for r in &remote {
            assert_eq!(r.service, "quorum-node-tb");
            assert_eq!(
                r.trace_id, review.trace_id,
                "the peer's span is not in the review's trace"
            );
            let parent = attempts
                .iter()
                .find(|a| a.span_id == r.parent)
                .expect("the peer's span has no attempt span of the origin as parent");
            assert_eq!(parent.attrs.get("node").map(String::as_str), Some("tb"));
            assert_eq!(parent.attrs.get("task"), r.attrs.get("task"));
        }
    })
    .await
    .expect("test timed out");
}
