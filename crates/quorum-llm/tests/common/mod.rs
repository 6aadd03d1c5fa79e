//! A scripted HTTP stub for this crate's tests: replies are queued per path (the last one repeats),
//! and every request is recorded with its headers and JSON body.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use quorum_llm::RetryPolicy;
use serde_json::Value;

#[derive(Clone, Debug)]
pub enum Reply {
    Json(u16, Value),
    Raw {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Accepts the request and never answers.
    Hang,
}

impl Reply {
    pub fn ok(v: Value) -> Self {
        Reply::Json(200, v)
    }

    pub fn status(status: u16, body: &str) -> Self {
        Reply::Raw {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    /// `Value::Null` when the body was empty or not JSON.
    pub body: Value,
}

#[derive(Default)]
struct StubState {
    replies: Mutex<HashMap<String, VecDeque<Reply>>>,
    requests: Mutex<Vec<Recorded>>,
}

pub struct Stub {
    pub addr: SocketAddr,
    state: Arc<StubState>,
}

impl Stub {
    pub async fn start() -> Stub {
        let state = Arc::new(StubState::default());
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Stub { addr, state }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues replies for `path`; the last one keeps being served once the others are used.
    pub fn script(&self, path: &str, replies: Vec<Reply>) {
        self.state
            .replies
            .lock()
            .unwrap()
            .insert(path.to_string(), replies.into());
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }
}

async fn handle(
    State(state): State<Arc<StubState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    state.requests.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    v.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = {
        let mut replies = state.replies.lock().unwrap();
        match replies.get_mut(&path) {
            Some(queue) if queue.len() > 1 => queue.pop_front(),
            Some(queue) => queue.front().cloned(),
            None => None,
        }
    };
    match reply {
        None => (StatusCode::NOT_FOUND, format!("no script for {path}")).into_response(),
        Some(Reply::Json(status, v)) => (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            v.to_string(),
        )
            .into_response(),
        Some(Reply::Raw {
            status,
            headers,
            body,
        }) => {
            let mut resp = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (k, v) in headers {
                resp.headers_mut().insert(k, v.parse().unwrap());
            }
            resp
        }
        Some(Reply::Hang) => std::future::pending().await,
    }
}

/// Fails the test instead of hanging it.
pub async fn bounded<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("test exceeded its time bound")
}

/// Retries with delays too small to matter.
pub fn quick_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
    }
}
