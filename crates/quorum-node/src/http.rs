//! The node's HTTP face: a live dashboard (plain HTML/JS compiled into the binary), the JSON
//! and server-sent-event feeds it reads, and Prometheus `/metrics`.
//!
//! Everything goes through the same [`ReviewApi`] the gRPC API serves, so the dashboard shows
//! exactly what `ClusterStatus`, `ListReviews`, `WatchReview` and `GetReport` return. Every
//! feed and `/metrics` needs the API's bearer token, as `Authorization: Bearer T` or
//! `?token=T` (the page keeps the token it was opened with and sends it on each request it
//! makes); there is no tokenless mode, because a loopback port is reachable by every local
//! user. Only the page's static shell (HTML, JS, CSS — no data) loads without it.

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use quorum_api::{pb, ApiError, ReviewApi, FINISHED_KIND};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

const INDEX_HTML: &str = include_str!("dashboard/index.html");
const DASHBOARD_JS: &str = include_str!("dashboard/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("dashboard/dashboard.css");

#[derive(Clone)]
struct HttpState {
    api: Arc<dyn ReviewApi>,
    token: blake3::Hash,
}

/// The dashboard, its feeds and `/metrics` over `api`, guarded by `token`.
pub fn router(api: Arc<dyn ReviewApi>, token: &str) -> Router {
    let state = HttpState {
        api,
        token: blake3::hash(token.as_bytes()),
    };
    // The page and its assets hold no data, so they load without the token (a browser does
    // not send `?token=` on subresources); every feed and `/metrics` needs it.
    let guarded = Router::new()
        .route("/metrics", get(metrics))
        .route("/api/cluster", get(cluster))
        .route("/api/reviews", get(reviews))
        .route("/api/reviews/{id}/events", get(events))
        .route("/api/reviews/{id}/stream", get(stream))
        .route("/api/reviews/{id}/report", get(report))
        .layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/", get(index))
        .route("/dashboard.js", get(script))
        .route("/dashboard.css", get(style))
        .merge(guarded)
        .with_state(state)
}

/// Serve [`router`] on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    api: Arc<dyn ReviewApi>,
    token: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(api, token))
        .with_graceful_shutdown(shutdown)
        .await
}

fn presented_token<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<&'a str> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return v.strip_prefix("Bearer ").map(str::trim);
    }
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

async fn auth(State(s): State<HttpState>, req: Request, next: Next) -> Response {
    let query = req.uri().query().map(str::to_string);
    // The token may be percent-encoded in a URL; tokens are compared as sent otherwise.
    let ok = presented_token(req.headers(), query.as_deref())
        .map(percent_decode)
        .is_some_and(|t| blake3::hash(t.as_bytes()) == s.token);
    if !ok {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "missing or wrong token: open the dashboard as /?token=<the node's API token> or send Authorization: Bearer <token>\n",
        )
            .into_response();
    }
    next.run(req).await
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // The page runs only its own script and talks only to this node.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:",
            ),
        ],
        INDEX_HTML,
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        DASHBOARD_JS,
    )
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        DASHBOARD_CSS,
    )
}

fn api_error(e: ApiError) -> Response {
    let code = match &e {
        ApiError::NotFound(_) => StatusCode::NOT_FOUND,
        ApiError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        ApiError::Running(_) => StatusCode::CONFLICT,
        ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        ApiError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (code, Json(json!({ "error": e.to_string() }))).into_response()
}

fn node_json(n: &pb::NodeStatus) -> Value {
    json!({
        "name": n.name,
        "addr": n.addr,
        "alive": n.alive,
        "state": if n.state.is_empty() { if n.alive { "up" } else { "lost" } } else { n.state.as_str() },
        "models": n.models,
        "capacity": n.capacity,
        "in_flight": n.in_flight,
        "last_seen_ms": n.last_seen_ms,
        "voter": n.voter,
        "leader": n.leader,
        "conducting": n.conducting,
    })
}

async fn cluster(State(s): State<HttpState>) -> Response {
    match s.api.cluster_status().await {
        Ok(mut nodes) => {
            nodes.sort_by(|a, b| a.name.cmp(&b.name));
            Json(json!({ "nodes": nodes.iter().map(node_json).collect::<Vec<_>>() }))
                .into_response()
        }
        Err(e) => api_error(e),
    }
}

async fn reviews(State(s): State<HttpState>) -> Response {
    match s.api.list().await {
        Ok(mut list) => {
            list.sort_by(|a, b| b.started_at.cmp(&a.started_at));
            let out: Vec<Value> = list
                .iter()
                .map(|r| {
                    json!({
                        "flow_id": r.flow_id,
                        "flow": r.flow,
                        "target": r.target,
                        "status": r.status,
                        "started_at": r.started_at,
                        "findings": r.findings,
                    })
                })
                .collect();
            Json(json!({ "reviews": out })).into_response()
        }
        Err(e) => api_error(e),
    }
}

fn event_json(e: &pb::ReviewEvent) -> Value {
    json!({
        "seq": e.seq,
        "kind": e.kind,
        "data": serde_json::from_str::<Value>(&e.json).unwrap_or(Value::Null),
    })
}

/// The events so far, as one JSON array: the page renders these first, then follows
/// [`stream`] from the last `seq` for what comes next.
async fn events(State(s): State<HttpState>, Path(id): Path<String>) -> Response {
    let mut stream = match s.api.watch(&id).await {
        Ok(st) => st,
        Err(e) => return api_error(e),
    };
    let mut out = Vec::new();
    // Take what is ready now (the backlog) and stop at the first event not yet produced, so a
    // running review's live tail is never waited for.
    while let Some(ev) = std::future::poll_fn(|cx| ready_now(stream.as_mut(), cx)).await {
        let done = ev.kind == FINISHED_KIND;
        out.push(event_json(&ev));
        if done {
            break;
        }
    }
    Json(json!({ "flow_id": id, "events": out })).into_response()
}

/// How often a live stream with nothing to say sends a `heartbeat` event. The page takes a
/// stream silent for three of them (a frozen node, a dead path) for lost and reconnects: the
/// browser's own EventSource would wait on such a stream indefinitely.
pub const SSE_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);

/// Live events as server-sent events, each with its `seq` as the SSE id; events at or below
/// `?after=` are skipped, and a `heartbeat` event (`{"every_ms": N}`) comes whenever the
/// review has been quiet for [`SSE_HEARTBEAT`]. The stream ends after the review's
/// `finished` event.
async fn stream(
    State(s): State<HttpState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    use tokio_stream::StreamExt;
    let after: u64 = q.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
    let stream = match s.api.watch(&id).await {
        Ok(st) => st,
        Err(e) => return api_error(e),
    };
    // Forwarded through a channel so the response ends right after the `finished` event,
    // not when some later event (there is none) would have been looked at.
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::ReviewEvent>(64);
    tokio::spawn(async move {
        let mut stream = stream;
        while let Some(e) = stream.next().await {
            if e.seq <= after {
                continue;
            }
            let done = e.kind == FINISHED_KIND;
            if tx.send(e).await.is_err() || done {
                break;
            }
        }
    });
    let sse = tokio_stream::wrappers::ReceiverStream::new(rx).map(|e| {
        Ok::<_, Infallible>(
            Event::default()
                .id(e.seq.to_string())
                .event("review")
                .data(event_json(&e).to_string()),
        )
    });
    Sse::new(sse)
        .keep_alive(
            KeepAlive::new().interval(SSE_HEARTBEAT).event(
                Event::default()
                    .event("heartbeat")
                    .data(json!({ "every_ms": SSE_HEARTBEAT.as_millis() as u64 }).to_string()),
            ),
        )
        .into_response()
}

/// Wakes the real task, and remembers that it was woken.
struct Noting {
    woken: std::sync::atomic::AtomicBool,
    inner: std::task::Waker,
}

impl std::task::Wake for Noting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.wake_by_ref();
    }
}

/// The stream's next item if it can be had without waiting: `Ready(None)` when it is pending.
/// A stream that yields only to be fair (it wakes itself before returning pending, as a long
/// backlog does every few items) is polled again rather than taken for empty.
fn ready_now(
    mut stream: std::pin::Pin<&mut (dyn tokio_stream::Stream<Item = pb::ReviewEvent> + Send)>,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<Option<pb::ReviewEvent>> {
    use std::task::Poll;
    loop {
        let noting = Arc::new(Noting {
            woken: std::sync::atomic::AtomicBool::new(false),
            inner: cx.waker().clone(),
        });
        let waker = std::task::Waker::from(noting.clone());
        let mut own = std::task::Context::from_waker(&waker);
        match stream.as_mut().poll_next(&mut own) {
            Poll::Ready(ev) => return Poll::Ready(ev),
            Poll::Pending if noting.woken.load(std::sync::atomic::Ordering::SeqCst) => continue,
            Poll::Pending => return Poll::Ready(None),
        }
    }
}

async fn report(State(s): State<HttpState>, Path(id): Path<String>) -> Response {
    match s.api.report(&id).await {
        Ok(r) => ([(header::CONTENT_TYPE, "application/json")], r.report_json).into_response(),
        Err(e) => api_error(e),
    }
}

async fn metrics(State(s): State<HttpState>) -> Response {
    // Membership is read when scraped, so the gauge is never staler than the scrape.
    if let Ok(nodes) = s.api.cluster_status().await {
        let mut counts: Vec<(&str, i64)> = Vec::new();
        for n in &nodes {
            let state = match n.state.as_str() {
                "" if n.alive => "up",
                "" => "lost",
                "up" => "up",
                "suspect" => "suspect",
                "draining" => "draining",
                _ => "lost",
            };
            counts.push((state, 1));
        }
        quorum_metrics::set_cluster_nodes(&counts);
    }
    (
        [(header::CONTENT_TYPE, quorum_metrics::CONTENT_TYPE)],
        quorum_metrics::render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_read_from_the_header_first_then_the_query() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_token(&h, Some("a=1&token=xyz")), Some("xyz"));
        assert_eq!(presented_token(&h, Some("a=1")), None);
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(presented_token(&h, Some("token=xyz")), Some("abc"));
        assert_eq!(percent_decode("a%2Fb%3d"), "a/b=");
        assert_eq!(percent_decode("100%"), "100%");
    }

    #[tokio::test]
    async fn a_long_backlog_is_taken_whole_and_a_live_tail_is_not_waited_for() {
        use tokio_stream::StreamExt;
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let backlog: Vec<pb::ReviewEvent> = (1..=100)
                .map(|seq| pb::ReviewEvent {
                    seq,
                    kind: "stage".into(),
                    json: "{}".into(),
                })
                .collect();
            let (_tx, rx) = tokio::sync::broadcast::channel::<pb::ReviewEvent>(4);
            let live = tokio_stream::wrappers::BroadcastStream::new(rx).filter_map(|r| r.ok());
            let mut s: quorum_api::EventStream = Box::pin(tokio_stream::iter(backlog).chain(live));
            let mut seqs = Vec::new();
            while let Some(ev) = std::future::poll_fn(|cx| ready_now(s.as_mut(), cx)).await {
                seqs.push(ev.seq);
            }
            assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
        })
        .await
        .expect("ready_now waited for the live tail");
    }
}
