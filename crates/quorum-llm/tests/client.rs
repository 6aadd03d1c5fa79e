//! `LlmClient` behaviour against a local stub: retries and what is not retried, transport
//! failures, timeouts, the concurrency bound and the probe.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use common::{bounded, quick_retries, Reply, Stub};
use quorum_llm::{
    backend_from_config, BackendConfig, BackendKind, ChatMessage, ChatRequest, LlmClient, LlmError,
    RetryPolicy,
};
use serde_json::{json, Value};
use tokio::sync::watch;

fn ok_reply() -> Reply {
    Reply::ok(json!({
        "model": "m",
        "message": {"role": "assistant", "content": "fine"},
        "done_reason": "stop",
        "prompt_eval_count": 3,
        "eval_count": 1,
    }))
}

fn request() -> ChatRequest {
    ChatRequest::new("m", vec![ChatMessage::user("hi")], 32)
}

fn client(url: String, retry: RetryPolicy) -> LlmClient {
    let backend = backend_from_config(&BackendConfig::new(BackendKind::Ollama, url)).unwrap();
    LlmClient::new(backend, 4, retry)
}

#[tokio::test]
async fn rate_limit_then_success_takes_two_attempts() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![
                Reply::Raw {
                    status: 429,
                    headers: vec![("retry-after", "0".into())],
                    body: "slow down".into(),
                },
                ok_reply(),
            ],
        );
        // Retry-After 0 must win over the policy's 30s backoff, or this test would not finish.
        let slow = RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_secs(30),
            max_delay: Duration::from_secs(30),
        };
        let resp = client(stub.base(), slow).chat(&request()).await.unwrap();
        assert_eq!(resp.attempts, 2);
        assert_eq!(resp.content, "fine");
        assert_eq!(stub.requests_to("/api/chat").len(), 2);
    })
    .await;
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![
                Reply::status(500, "boom"),
                Reply::status(503, "loading"),
                ok_reply(),
            ],
        );
        let resp = client(stub.base(), quick_retries(4))
            .chat(&request())
            .await
            .unwrap();
        assert_eq!(resp.attempts, 3);
        assert_eq!(stub.requests_to("/api/chat").len(), 3);
    })
    .await;
}

#[tokio::test]
async fn exhausted_retries_return_the_last_error() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script("/api/chat", vec![Reply::status(500, "still broken")]);
        let err = client(stub.base(), quick_retries(3))
            .chat(&request())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::Server {
                url: format!("{}/api/chat", stub.base()),
                status: 500,
                body: "still broken".into(),
            }
        );
        assert_eq!(stub.requests_to("/api/chat").len(), 3);
    })
    .await;
}

#[tokio::test]
async fn client_errors_and_malformed_bodies_are_not_retried() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![Reply::status(400, "bad schema"), ok_reply()],
        );
        let err = client(stub.base(), quick_retries(4))
            .chat(&request())
            .await
            .unwrap_err();
        assert_eq!(err.class(), "client_error");
        assert_eq!(stub.requests_to("/api/chat").len(), 1);

        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![
                Reply::status(200, r#"{"message": {"content": "cut"#),
                ok_reply(),
            ],
        );
        let err = client(stub.base(), quick_retries(4))
            .chat(&request())
            .await
            .unwrap_err();
        assert_eq!(err.class(), "malformed_response");
        assert_eq!(stub.requests_to("/api/chat").len(), 1);
    })
    .await;
}

#[tokio::test]
async fn refused_connection_names_the_url_after_retries() {
    bounded(async {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}");
        let err = client(url.clone(), quick_retries(3))
            .chat(&request())
            .await
            .unwrap_err();
        match &err {
            LlmError::Connect { url: u, message } => {
                assert_eq!(u, &format!("{url}/api/chat"));
                assert!(message.contains("refused"), "{message}");
            }
            other => panic!("expected a connect error, got {other:?}"),
        }
        assert!(err
            .to_string()
            .starts_with(&format!("cannot connect to {url}/api/chat: ")));
        assert_eq!(err.class(), "transport");
    })
    .await;
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script("/v1/chat/completions", vec![Reply::Hang]);
        let mut cfg = BackendConfig::new(BackendKind::OpenAi, format!("{}/v1", stub.base()));
        cfg.timeout_secs = 1;
        let backend = backend_from_config(&cfg).unwrap();
        let err = LlmClient::new(backend, 1, RetryPolicy::none())
            .chat(&request())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::Timeout {
                url: format!("{}/v1/chat/completions", stub.base()),
                secs: 1,
            }
        );
        assert!(err.retryable());
    })
    .await;
}

/// Server-side view of concurrency: how many requests are inside the handler at once, and how
/// many the test has let go.
#[derive(Clone, Copy, Default)]
struct Flight {
    in_flight: usize,
    arrived: usize,
    max: usize,
    released: usize,
}

/// Holds the n-th arriving request until the test has released n, so requests stay in flight
/// as long as the test needs to look at them.
async fn held(State(tx): State<Arc<watch::Sender<Flight>>>) -> Json<Value> {
    let mut index = 0;
    tx.send_modify(|f| {
        f.in_flight += 1;
        f.arrived += 1;
        f.max = f.max.max(f.in_flight);
        index = f.arrived;
    });
    let _ = tx.subscribe().wait_for(|f| f.released >= index).await;
    tx.send_modify(|f| f.in_flight -= 1);
    Json(
        json!({"message": {"role": "assistant", "content": "ok"}, "prompt_eval_count": 1, "eval_count": 1}),
    )
}

#[tokio::test]
async fn concurrency_is_bounded_by_max_concurrent() {
    bounded(async {
        let (tx, mut rx) = watch::channel(Flight::default());
        let tx = Arc::new(tx);
        let app = Router::new()
            .route("/api/chat", post(held))
            .with_state(Arc::clone(&tx));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });

        let mut cfg = BackendConfig::new(BackendKind::Ollama, format!("http://{addr}"));
        cfg.max_concurrent = 2;
        let client = LlmClient::from_config(&cfg).unwrap();
        assert_eq!(client.max_concurrent(), 2);
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..6 {
            let client = client.clone();
            calls.spawn(async move { client.chat(&request()).await });
        }
        // Three rounds: two calls are held in the server, the client must be holding both
        // permits for them (no third can start), then the pair is let go.
        for round in 1..=3 {
            rx.wait_for(|f| f.in_flight >= 2 && f.arrived >= 2 * round)
                .await
                .unwrap();
            assert_eq!(client.in_flight(), 2, "round {round}");
            tx.send_modify(|f| f.released += 2);
        }
        while let Some(done) = calls.join_next().await {
            assert_eq!(done.unwrap().unwrap().attempts, 1);
        }
        let seen = *tx.borrow();
        assert_eq!(seen.arrived, 6);
        assert_eq!(seen.max, 2, "at most max_concurrent calls may be in flight");
        assert_eq!(client.in_flight(), 0);
    })
    .await;
}

#[tokio::test]
async fn probe_lists_models_or_fails_fast() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/v1/models",
            vec![Reply::ok(json!({"data": [{"id": "m1"}]}))],
        );
        let c = LlmClient::from_config(&BackendConfig::new(
            BackendKind::OpenAi,
            format!("{}/v1", stub.base()),
        ))
        .unwrap();
        let models = c.probe().await.unwrap();
        assert_eq!(models.len(), 1);
        assert_eq!(models[0].name, "m1");

        // A server that accepts but never lists must not hold the probe for the call timeout.
        let hung = Stub::start().await;
        hung.script("/api/tags", vec![Reply::Hang]);
        let c =
            client(hung.base(), RetryPolicy::none()).with_probe_timeout(Duration::from_millis(200));
        let err = c.probe().await.unwrap_err();
        assert_eq!(err.class(), "timeout");
        assert_eq!(err.url(), Some(hung.base().as_str()));
    })
    .await;
}

/// Real answers of each server to a request larger than its window, with the window the client
/// must assume next for a request built for 8192 tokens.
const OVERFLOWS: [(&str, u16, &str, u32); 5] = [
    (
        "llama-server",
        400,
        r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3012,"n_ctx":2560}}"#,
        2560,
    ),
    (
        "llama-server (older)",
        400,
        r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"invalid_request_error"}}"#,
        4096,
    ),
    (
        "vllm",
        400,
        r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (3000 in the messages, 2000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        // Stated 4096 is below 8192: the stated window wins.
        4096,
    ),
    (
        "openai",
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        // Stated 8192 is what the request was built for: the estimate was short, so a
        // quarter less.
        6144,
    ),
    (
        "ollama",
        500,
        r#"{"error":"prompt too long; exceeded max context length by 120 tokens"}"#,
        4096,
    ),
];

#[tokio::test]
async fn context_overflow_is_its_own_class_not_retried_as_is_and_lowers_the_window() {
    bounded(async {
        for (server, status, body, next) in OVERFLOWS {
            let stub = Stub::start().await;
            stub.script("/api/chat", vec![Reply::status(status, body), ok_reply()]);
            let c = client(stub.base(), quick_retries(3));
            let mut req = request();
            req.num_ctx = Some(8192);
            let err = c.chat(&req).await.unwrap_err();
            assert_eq!(err.class(), "context_overflow", "{server}: {err}");
            assert!(!err.retryable(), "{server}");
            assert!(
                err.to_string().contains(&stub.base()),
                "{server}: the error names the endpoint: {err}"
            );
            // Sent once: the same request cannot fit by repetition.
            assert_eq!(stub.requests_to("/api/chat").len(), 1, "{server}");
            assert_eq!(c.context_window("m"), Some(next), "{server}");
            // Clones share what was learned, and a second refusal halves again.
            let again = c.clone();
            let mut smaller = request();
            smaller.num_ctx = c.context_window("m");
            stub.script("/api/chat", vec![Reply::status(status, body)]);
            let _ = again.chat(&smaller).await.unwrap_err();
            assert!(
                c.context_window("m").unwrap() < next,
                "{server}: {:?}",
                c.context_window("m")
            );
        }
    })
    .await;
}
