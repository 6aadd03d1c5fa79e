//! End-to-end tests of the API over real loopback sockets: a fake `ReviewApi` behind the real
//! server, driven through `ApiClient`, the raw generated client and the reflection client.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use quorum_api::pb;
use quorum_api::{
    serve_with_listener, ApiClient, ApiError, EventStream, ReviewApi, CONNECT_TIMEOUT,
    FINISHED_KIND,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::Code;

const TOKEN: &str = "test-token-0123456789";
/// The fake keeps reviews of this flow running, so their reports are not ready.
const RUNNING_FLOW: &str = "slow";

/// Bounds every test: a hang is a failure, not a stuck CI job.
async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test did not finish within its bound")
}

struct Review {
    request: pb::SubmitReviewRequest,
    running: bool,
}

/// An in-memory `ReviewApi` that counts every call it sees.
#[derive(Default)]
struct Fake {
    calls: AtomicUsize,
    reviews: Mutex<HashMap<String, Review>>,
    /// Watch senders kept open so the fake's streams never end by themselves; only the server's
    /// cut after `finished` can end them.
    open_senders: Mutex<Vec<mpsc::Sender<pb::ReviewEvent>>>,
}

impl Fake {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn seen(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    fn checksum(files: &[pb::SourceFile]) -> u64 {
        files
            .iter()
            .flat_map(|f| f.content.iter())
            .fold(0u64, |acc, b| {
                acc.wrapping_mul(31).wrapping_add(u64::from(*b))
            })
    }
}

fn event(seq: u64, kind: &str) -> pb::ReviewEvent {
    pb::ReviewEvent {
        seq,
        kind: kind.to_string(),
        json: format!(r#"{{"seq":{seq},"kind":"{kind}"}}"#),
    }
}

#[async_trait]
impl ReviewApi for Fake {
    async fn submit(&self, req: pb::SubmitReviewRequest) -> Result<String, ApiError> {
        self.seen();
        if req.files.is_empty() {
            return Err(ApiError::InvalidArgument("the pack has no files".into()));
        }
        let mut reviews = self.reviews.lock().unwrap();
        let flow_id = format!("flow-{}", reviews.len() + 1);
        let running = req.flow == RUNNING_FLOW;
        reviews.insert(
            flow_id.clone(),
            Review {
                request: req,
                running,
            },
        );
        Ok(flow_id)
    }

    async fn watch(&self, flow_id: &str) -> Result<EventStream, ApiError> {
        self.seen();
        if !self.reviews.lock().unwrap().contains_key(flow_id) {
            return Err(ApiError::NotFound(format!("no review {flow_id}")));
        }
        let (tx, rx) = mpsc::channel(4);
        let sender = tx.clone();
        // Sent from a task through a small channel so the events really trickle in over time.
        tokio::spawn(async move {
            let kinds = [
                "stage",
                "task_started",
                "task_finished",
                "usage",
                FINISHED_KIND,
            ];
            for (i, kind) in kinds.iter().enumerate() {
                if sender.send(event(i as u64 + 1, kind)).await.is_err() {
                    return;
                }
            }
            // Anything after `finished` must never reach the client.
            let _ = sender.send(event(99, "after_finished")).await;
        });
        self.open_senders.lock().unwrap().push(tx);
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    async fn report(&self, flow_id: &str) -> Result<pb::GetReportResponse, ApiError> {
        self.seen();
        let reviews = self.reviews.lock().unwrap();
        let review = reviews
            .get(flow_id)
            .ok_or_else(|| ApiError::NotFound(format!("no review {flow_id}")))?;
        if review.running {
            return Err(ApiError::Running(format!(
                "review {flow_id} is still running"
            )));
        }
        let bytes: usize = review.request.files.iter().map(|f| f.content.len()).sum();
        Ok(pb::GetReportResponse {
            status: "completed".into(),
            report_json: format!(
                r#"{{"target":"{}","files":{},"bytes":{},"checksum":{}}}"#,
                review.request.target_name,
                review.request.files.len(),
                bytes,
                Fake::checksum(&review.request.files)
            ),
            report_markdown: format!("# review of {}\n", review.request.target_name),
            report_sarif: r#"{"version":"2.1.0"}"#.into(),
        })
    }

    async fn cancel(&self, flow_id: &str) -> Result<bool, ApiError> {
        self.seen();
        let mut reviews = self.reviews.lock().unwrap();
        let review = reviews
            .get_mut(flow_id)
            .ok_or_else(|| ApiError::NotFound(format!("no review {flow_id}")))?;
        let was_running = review.running;
        review.running = false;
        Ok(was_running)
    }

    async fn list(&self) -> Result<Vec<pb::ReviewSummary>, ApiError> {
        self.seen();
        let reviews = self.reviews.lock().unwrap();
        let mut out: Vec<_> = reviews
            .iter()
            .map(|(id, r)| pb::ReviewSummary {
                flow_id: id.clone(),
                flow: r.request.flow.clone(),
                target: r.request.target_name.clone(),
                status: if r.running { "running" } else { "completed" }.into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                findings: 2,
            })
            .collect();
        out.sort_by(|a, b| a.flow_id.cmp(&b.flow_id));
        Ok(out)
    }

    async fn cluster_status(&self) -> Result<Vec<pb::NodeStatus>, ApiError> {
        self.seen();
        Ok(vec![pb::NodeStatus {
            name: "node-a".into(),
            addr: "127.0.0.1:7100".into(),
            alive: true,
            models: vec!["qwen2.5-coder:7b".into()],
            capacity: 4,
            in_flight: 1,
            last_seen_ms: 120,
            ..Default::default()
        }])
    }

    fn node_name(&self) -> String {
        "node-a".into()
    }
}

struct Running {
    url: String,
    fake: Arc<Fake>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), ApiError>>,
}

impl Running {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap().unwrap();
    }
}

async fn start() -> Running {
    let fake = Arc::new(Fake::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let api: Arc<dyn ReviewApi> = fake.clone();
    let server = tokio::spawn(serve_with_listener(
        listener,
        api,
        TOKEN.to_string(),
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        url,
        fake,
        stop,
        server,
    }
}

fn pack(flow: &str, files: Vec<pb::SourceFile>) -> pb::SubmitReviewRequest {
    pb::SubmitReviewRequest {
        target_name: "./fixture".into(),
        head_sha: Some("0123abcd".into()),
        files,
        flow: flow.into(),
        flow_yaml: None,
        options: Some(pb::ReviewOptions {
            model: "qwen2.5-coder:7b".into(),
            fail_on: "P1".into(),
            max_concurrent: 2,
            sensitive: false,
            verifier_model: String::new(),
            no_analyzers: false,
            ..Default::default()
        }),
        spec: None,
        prior: None,
        scope_json: None,
    }
}

fn small_files() -> Vec<pb::SourceFile> {
    vec![pb::SourceFile {
        path: "src/lib.rs".into(),
        content: b"pub fn f() {}\n".to_vec(),
    }]
}

#[tokio::test]
async fn submit_watch_report_round_trip() {
    bounded(async {
        let server = start().await;
        let client = ApiClient::connect(&server.url, TOKEN).await.unwrap();

        let flow_id = client.submit(pack("review", small_files())).await.unwrap();
        assert_eq!(flow_id, "flow-1");

        let events: Vec<pb::ReviewEvent> = client
            .watch(&flow_id)
            .await
            .unwrap()
            .map(|e| e.unwrap())
            .collect()
            .await;
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "stage",
                "task_started",
                "task_finished",
                "usage",
                "finished"
            ]
        );
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        assert_eq!(events[4].json, r#"{"seq":5,"kind":"finished"}"#);

        let report = client.report(&flow_id).await.unwrap();
        assert_eq!(report.status, "completed");
        assert!(report.report_json.contains(r#""target":"./fixture""#));
        assert_eq!(report.report_markdown, "# review of ./fixture\n");
        assert!(report.report_sarif.contains("2.1.0"));

        let listed = client.list().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].flow_id, flow_id);
        assert_eq!(listed[0].target, "./fixture");

        let nodes = client.cluster_status().await.unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].models, ["qwen2.5-coder:7b"]);
        assert_eq!((nodes[0].capacity, nodes[0].in_flight), (4, 1));
        assert_eq!(client.answered_by().await.unwrap(), "node-a");

        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn unknown_and_running_reviews_map_to_their_codes() {
    bounded(async {
        let server = start().await;
        let client = ApiClient::connect(&server.url, TOKEN).await.unwrap();

        let err = client.report("flow-404").await.unwrap_err();
        assert!(
            matches!(err, ApiError::NotFound(ref m) if m == "no review flow-404"),
            "{err:?}"
        );
        let err = client.watch("flow-404").await.err().unwrap();
        assert!(matches!(err, ApiError::NotFound(_)), "{err:?}");
        let err = client.cancel("flow-404").await.unwrap_err();
        assert!(matches!(err, ApiError::NotFound(_)), "{err:?}");

        let flow_id = client
            .submit(pack(RUNNING_FLOW, small_files()))
            .await
            .unwrap();
        let err = client.report(&flow_id).await.unwrap_err();
        assert!(matches!(err, ApiError::Running(_)), "{err:?}");

        // The same codes as a raw gRPC client sees them.
        let mut raw = pb::quorum_client::QuorumClient::connect(server.url.clone())
            .await
            .unwrap();
        let mut request = tonic::Request::new(pb::GetReportRequest {
            flow_id: flow_id.clone(),
        });
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let status = raw.get_report(request).await.unwrap_err();
        assert_eq!(status.code(), Code::FailedPrecondition);

        assert!(client.cancel(&flow_id).await.unwrap());
        assert!(!client.cancel(&flow_id).await.unwrap());
        assert_eq!(client.report(&flow_id).await.unwrap().status, "completed");

        // Rejected at the edge before the implementation is asked.
        let calls = server.fake.calls();
        let err = client.report("  ").await.unwrap_err();
        assert!(matches!(err, ApiError::InvalidArgument(_)), "{err:?}");
        assert_eq!(server.fake.calls(), calls);

        // The implementation's own refusal travels back as the same variant.
        let err = client.submit(pack("review", Vec::new())).await.unwrap_err();
        assert_eq!(
            err,
            ApiError::InvalidArgument("the pack has no files".into())
        );

        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn calls_without_the_right_token_are_rejected_before_the_implementation() {
    bounded(async {
        let server = start().await;
        let mut raw = pb::quorum_client::QuorumClient::connect(server.url.clone())
            .await
            .unwrap();

        let status = raw
            .list_reviews(pb::ListReviewsRequest {})
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated);
        assert!(
            status.message().contains("missing api token"),
            "{}",
            status.message()
        );

        let status = raw
            .watch_review(pb::WatchReviewRequest {
                flow_id: "flow-1".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated);

        for (header, expected) in [
            (TOKEN.to_string(), "malformed authorization metadata"),
            (format!("Basic {TOKEN}"), "malformed authorization metadata"),
            (format!("Bearer {TOKEN}x"), "invalid api token"),
            ("Bearer ".to_string(), "invalid api token"),
        ] {
            let mut request = tonic::Request::new(pb::SubmitReviewRequest::default());
            request
                .metadata_mut()
                .insert("authorization", header.parse().unwrap());
            let status = raw.submit_review(request).await.unwrap_err();
            assert_eq!(status.code(), Code::Unauthenticated, "{header}");
            assert!(
                status.message().contains(expected),
                "{header}: {}",
                status.message()
            );
        }

        let wrong = ApiClient::connect(&server.url, "not-the-token")
            .await
            .unwrap();
        let err = wrong.cluster_status().await.unwrap_err();
        match err {
            ApiError::Unauthenticated(m) => {
                assert!(m.contains(&server.url), "{m}");
                assert!(m.contains("invalid api token"), "{m}");
            }
            other => panic!("expected unauthenticated, got {other:?}"),
        }

        assert_eq!(
            server.fake.calls(),
            0,
            "the implementation saw a rejected call"
        );

        // The right token on the same connection still works.
        let right = ApiClient::connect(&server.url, TOKEN).await.unwrap();
        assert!(right.list().await.unwrap().is_empty());
        assert_eq!(server.fake.calls(), 1);

        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn reflection_lists_and_describes_the_service_without_a_token() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    bounded(async {
        let server = start().await;
        let channel = tonic::transport::Endpoint::from_shared(server.url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = ServerReflectionClient::new(channel);
        let requests = vec![
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::ListServices(String::new())),
            },
            ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::FileContainingSymbol(
                    "quorum.v1.Quorum".into(),
                )),
            },
        ];
        let mut responses = client
            .server_reflection_info(tokio_stream::iter(requests))
            .await
            .unwrap()
            .into_inner();

        let first = responses.next().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = first.message_response else {
            panic!("expected a service list, got {first:?}");
        };
        let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"quorum.v1.Quorum"), "{names:?}");

        let second = responses.next().await.unwrap().unwrap();
        let Some(MessageResponse::FileDescriptorResponse(files)) = second.message_response else {
            panic!("expected a file descriptor, got {second:?}");
        };
        assert!(!files.file_descriptor_proto.is_empty());

        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_20_mib_pack_uploads_intact() {
    bounded(async {
        let server = start().await;
        let client = ApiClient::connect(&server.url, TOKEN).await.unwrap();

        let files: Vec<pb::SourceFile> = (0..4u8)
            .map(|i| pb::SourceFile {
                path: format!("src/big_{i}.rs"),
                content: (0..5 * 1024 * 1024u32)
                    .map(|j| (j.wrapping_mul(7) ^ u32::from(i)) as u8)
                    .collect(),
            })
            .collect();
        let checksum = Fake::checksum(&files);
        let flow_id = client.submit(pack("review", files)).await.unwrap();

        let report = client.report(&flow_id).await.unwrap();
        let expected = format!(
            r#""files":4,"bytes":{},"checksum":{checksum}"#,
            20 * 1024 * 1024
        );
        assert!(
            report.report_json.contains(&expected),
            "{}",
            report.report_json
        );

        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn connecting_to_a_dead_port_fails_fast_and_names_the_url() {
    bounded(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);

        let url = format!("http://{addr}");
        let err = tokio::time::timeout(
            CONNECT_TIMEOUT + Duration::from_secs(5),
            ApiClient::connect(&url, TOKEN),
        )
        .await
        .expect("connect did not give up")
        .unwrap_err();
        match err {
            ApiError::Unavailable(m) => assert!(m.contains(&url), "{m}"),
            other => panic!("expected unavailable, got {other:?}"),
        }

        // A bare host:port means http.
        let err = ApiClient::connect(&addr.to_string(), TOKEN)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::Unavailable(ref m) if m.contains(&url)),
            "{err:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn bad_urls_and_tokens_are_refused_before_connecting() {
    bounded(async {
        let err = ApiClient::connect("ftp://127.0.0.1:1", TOKEN)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidArgument(ref m) if m.contains("ftp://127.0.0.1:1")),
            "{err:?}"
        );
        let err = ApiClient::connect("http://127.0.0.1:1", "  ")
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidArgument(ref m) if m.starts_with("no api token")),
            "{err:?}"
        );
        let err = ApiClient::connect("http://127.0.0.1:1", "tok\nen")
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::InvalidArgument(_)), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn the_server_refuses_to_start_without_a_token() {
    bounded(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api: Arc<dyn ReviewApi> = Arc::new(Fake::default());
        let err = serve_with_listener(listener, api, " ".into(), async {})
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidArgument(ref m) if m.starts_with("no api token")),
            "{err:?}"
        );
    })
    .await;
}
