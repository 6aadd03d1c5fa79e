//! The HTTP server: both backend APIs on one port, rule evaluation under one lock, recording, and
//! the faults a script asks for.
//!
//! Choosing a reply and recording the request happen in one critical section, so concurrent
//! requests consume a rule's replies exactly once each and `seq` order is the order in which rules
//! were consulted. Waiting (delays, hangs) happens outside the lock, and every wait also watches
//! the shutdown signal: axum's graceful shutdown waits for in-flight requests, so a hanging
//! handler that ignored it would keep the server (and a test's runtime) alive forever.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use regex::Regex;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::api::Api;
use crate::render;
use crate::request::RecordedRequest;
use crate::script::{
    duplicate_rule_names, same_model, ContextWindow, Reply, Rule, Script, CONTEXT_WINDOW_RULE,
};
use crate::stream;

/// Prompts carry whole files; the real servers accept far more than axum's 2 MB default.
const BODY_LIMIT: usize = 256 * 1024 * 1024;

/// A running scripted model server. Dropping it (or [`ScriptedServer::shutdown`]) stops serving
/// and releases every hanging or delayed request with a 503.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedServer {
    /// Serves `script` on 127.0.0.1 on an ephemeral port.
    pub async fn start(script: Script) -> io::Result<ScriptedServer> {
        ScriptedServer::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), script).await
    }

    /// Serves `script` on `addr`. A script that fails [`Script::validate`] is refused with
    /// `InvalidInput`, so an authoring mistake fails the test at setup.
    pub async fn start_on(addr: SocketAddr, script: Script) -> io::Result<ScriptedServer> {
        script
            .validate()
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (shutdown, _) = watch::channel(false);
        let (recorded, _) = watch::channel(0usize);
        let (released, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(Served {
                script: Installed::new(script),
                requests: Vec::new(),
                subscribers: Vec::new(),
            }),
            shutdown,
            recorded,
            released,
            call_ids: AtomicU64::new(0),
        });

        let app = Router::new()
            .route("/", get(|| async { "Ollama is running" }))
            .route("/api/chat", post(ollama_chat))
            .route("/api/tags", get(ollama_tags))
            .route("/api/show", post(ollama_show))
            .route("/api/version", get(ollama_version))
            .route("/v1/chat/completions", post(openai_chat))
            .route("/v1/models", get(openai_models))
            .route("/props", get(llama_props))
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(shared.clone());
        let mut stop = shared.shutdown.subscribe();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await;
            if let Err(err) = served {
                tracing::warn!(%err, "scripted server stopped with an error");
            }
        });
        tracing::debug!(%addr, "scripted server listening");
        Ok(ScriptedServer { addr, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL for an Ollama client: `http://127.0.0.1:PORT`.
    pub fn ollama_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL for an OpenAI-compatible client: `http://127.0.0.1:PORT/v1`.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every chat request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Every chat request so far, removed from the server's record (which a long benchmark
    /// would otherwise grow by every prompt). Sequence numbers keep counting, so after a take
    /// a request's `seq` is no longer its index in [`ScriptedServer::requests`].
    pub fn take_requests(&self) -> Vec<RecordedRequest> {
        std::mem::take(&mut self.shared.lock().requests)
    }

    /// Waits until at least `n` chat requests have arrived (whether or not they were answered
    /// yet), then returns them all. Lets a test know a hanging request reached the server without
    /// sleeping.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<RecordedRequest> {
        let mut count = self.shared.recorded.subscribe();
        // The sender lives as long as `self`, so this only ends when the count is reached.
        let _ = count.wait_for(|seen| *seen >= n).await;
        self.requests()
    }

    /// A feed of every chat request recorded from now on, in `seq` order.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<RecordedRequest> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.lock().subscribers.push(tx);
        rx
    }

    /// Replaces the script; rule hit counters start again from zero, recorded requests are kept.
    /// A script that fails validation is still installed (a rule with a bad regex never
    /// matches, one without replies answers 500) and a warning is logged.
    pub fn set_script(&self, script: Script) {
        if let Err(err) = script.validate() {
            tracing::warn!(%err, "installing a script that does not validate");
        }
        self.shared.lock().script = Installed::new(script);
    }

    /// Answers every `held` reply, waiting or still to come.
    pub fn release(&self) {
        self.shared.released.send_replace(true);
    }

    /// Stops serving; hanging and delayed requests are answered 503 so nothing waits forever,
    /// and every [`ScriptedServer::subscribe`] feed ends.
    pub fn shutdown(self) {
        // Drop does the work; this name exists so a test can say what it means.
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
        // Close the feeds now rather than when the last connection goes, so a subscriber's
        // `recv` ends even if a client keeps a half-sent request open.
        self.shared.lock().subscribers.clear();
    }
}

struct Shared {
    state: Mutex<Served>,
    shutdown: watch::Sender<bool>,
    /// Number of requests recorded so far, for `wait_for_requests`.
    recorded: watch::Sender<usize>,
    /// Set by [`ScriptedServer::release`]; `held` replies wait for it.
    released: watch::Sender<bool>,
    call_ids: AtomicU64,
}

struct Served {
    script: Installed,
    requests: Vec<RecordedRequest>,
    subscribers: Vec<mpsc::UnboundedSender<RecordedRequest>>,
}

/// A script with its regexes compiled and its hit counters.
struct Installed {
    rules: Vec<InstalledRule>,
    fallback: Option<Reply>,
    models: Vec<String>,
    context_window: Option<ContextWindow>,
}

struct InstalledRule {
    rule: Rule,
    regex: Option<Regex>,
    hits: usize,
}

impl Installed {
    fn new(script: Script) -> Installed {
        for name in duplicate_rule_names(&script) {
            tracing::warn!(rule = %name, "two rules share a name; recorded rule names are ambiguous");
        }
        let rules = script
            .rules
            .into_iter()
            .map(|rule| {
                let regex = rule
                    .when
                    .regex
                    .as_deref()
                    .and_then(|pattern| match Regex::new(pattern) {
                        Ok(regex) => Some(regex),
                        Err(err) => {
                            tracing::warn!(rule = %rule.name, %err, "invalid regex; rule never matches");
                            None
                        }
                    });
                InstalledRule {
                    rule,
                    regex,
                    hits: 0,
                }
            })
            .collect();
        Installed {
            rules,
            fallback: script.fallback,
            models: script.models,
            context_window: script.context_window,
        }
    }
}

/// What the locked section decided for one request.
enum Decision {
    BadBody,
    UnknownModel,
    NoRule,
    RuleWithoutReplies(String),
    Answer(Reply),
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Served> {
        // A panic elsewhere while holding the lock leaves plain data behind; keep serving it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Picks the reply, consumes it and records the request, atomically.
    fn decide(&self, mut req: RecordedRequest, parsed: bool) -> (RecordedRequest, Decision) {
        let mut served = self.lock();
        req.seq = served.requests.len() as u64;
        let models = &served.script.models;
        let decision = if !parsed {
            Decision::BadBody
        } else if !models.is_empty() && !models.iter().any(|m| same_model(m, &req.model)) {
            Decision::UnknownModel
        } else if let Some(window) = served
            .script
            .context_window
            .filter(|w| req.window_tokens() > w.tokens)
        {
            req.rule = Some(CONTEXT_WINDOW_RULE.to_string());
            Decision::Answer(Reply::status_body(
                400,
                render::context_exceeded(req.window_tokens(), window.tokens),
            ))
        } else {
            let chosen = served.script.rules.iter_mut().find(|r| {
                r.rule.times.is_none_or(|times| r.hits < times)
                    && r.rule.when.holds(&req, r.regex.as_ref())
            });
            match chosen {
                Some(installed) => {
                    installed.hits += 1;
                    req.rule = Some(installed.rule.name.clone());
                    let replies = &installed.rule.replies;
                    match replies.get((installed.hits - 1).min(replies.len().saturating_sub(1))) {
                        Some(reply) => Decision::Answer(reply.clone()),
                        None => Decision::RuleWithoutReplies(installed.rule.name.clone()),
                    }
                }
                None => match &served.script.fallback {
                    Some(reply) => Decision::Answer(reply.clone()),
                    None => Decision::NoRule,
                },
            }
        };
        tracing::debug!(
            seq = req.seq,
            api = %req.api,
            model = %req.model,
            rule = ?req.rule,
            "scripted request"
        );
        served.requests.push(req.clone());
        served.subscribers.retain(|tx| tx.send(req.clone()).is_ok());
        self.recorded.send_replace(served.requests.len());
        (req, decision)
    }

    /// Resolves when the server is shutting down.
    async fn stopping(&self) {
        let mut stop = self.shutdown.subscribe();
        let _ = stop.wait_for(|stopped| *stopped).await;
    }

    async fn answer(&self, req: &RecordedRequest, reply: Reply) -> Response {
        let mut reply = reply;
        loop {
            return match reply {
                Reply::Delay { ms, then } => {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                            reply = *then;
                            continue;
                        }
                        _ = self.stopping() => shutting_down(req.api),
                    }
                }
                Reply::Held(then) => {
                    let mut released = self.released.subscribe();
                    tokio::select! {
                        _ = released.wait_for(|open| *open) => {
                            reply = *then;
                            continue;
                        }
                        _ = self.stopping() => shutting_down(req.api),
                    }
                }
                Reply::Hang => {
                    self.stopping().await;
                    shutting_down(req.api)
                }
                Reply::Text(text) => self.chat_reply(req, &text, &[], None, false),
                Reply::ToolCalls(calls) => self.chat_reply(req, "", &calls, None, false),
                Reply::Echo => self.chat_reply(req, &render::echo_summary(req), &[], None, false),
                Reply::Truncated(text) => self.chat_reply(req, &text, &[], None, true),
                Reply::Repeat { prefix, line } => {
                    let text = repeated_to_bound(req, &prefix, &line);
                    self.chat_reply(req, &text, &[], Some("length"), false)
                }
                Reply::Status {
                    code,
                    body,
                    retry_after,
                } => status_reply(req.api, code, body, retry_after),
            };
        }
    }
}

impl Shared {
    /// A 200 chat answer, streamed when the request asked for a stream. `truncated` cuts it
    /// half-way: the JSON body in the middle, a stream before its last events.
    fn chat_reply(
        &self,
        req: &RecordedRequest,
        content: &str,
        calls: &[(String, Value)],
        finish_reason: Option<&str>,
        truncated: bool,
    ) -> Response {
        let mut whole = render::chat_ok(req, content, calls, &self.call_ids);
        if let Some(reason) = finish_reason {
            stream::set_finish_reason(req.api, &mut whole, reason);
        }
        if req.stream == Some(true) {
            let mut events = stream::events(req, &whole);
            if truncated {
                events.truncate(events.len() / 2);
            }
            let body: String = events.concat();
            return ([(CONTENT_TYPE, stream::content_type(req.api))], body).into_response();
        }
        if truncated {
            let full = whole.to_string();
            let cut = cut_in_half(&full).to_string();
            return ([(CONTENT_TYPE, "application/json")], cut).into_response();
        }
        Json(whole).into_response()
    }
}

/// `prefix`, then `line` repeated until the request's output bound (about 4 characters a token;
/// 2,048 tokens when the request set none).
fn repeated_to_bound(req: &RecordedRequest, prefix: &str, line: &str) -> String {
    const MOST_TOKENS: u64 = 1 << 20;
    let bound = req.max_tokens.unwrap_or(2048).clamp(1, MOST_TOKENS) as usize * 4;
    let line = if line.is_empty() { " " } else { line };
    let mut text = prefix.chars().take(bound).collect::<String>();
    while text.chars().count() < bound {
        text.push_str(line);
    }
    text.chars().take(bound).collect()
}

/// A strict prefix of a JSON object is never valid JSON, since only the final `}` closes it.
fn cut_in_half(full: &str) -> &str {
    let mut at = full.len() / 2;
    while at > 0 && !full.is_char_boundary(at) {
        at -= 1;
    }
    &full[..at]
}

fn status_reply(api: Api, code: u16, body: String, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = if body.is_empty() {
        let message = format!("scripted status {code}");
        (status, Json(render::error_body(api, code, &message))).into_response()
    } else if serde_json::from_str::<Value>(&body).is_ok() {
        (status, [(CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
    };
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

fn shutting_down(api: Api) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(render::error_body(
            api,
            503,
            "scripted server shutting down",
        )),
    )
        .into_response()
}

async fn chat(
    shared: Arc<Shared>,
    api: Api,
    path: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (req, parsed) = match serde_json::from_slice::<Value>(&body) {
        Ok(value) => (
            RecordedRequest::from_body(api, path, value, authorization),
            true,
        ),
        Err(_) => (
            RecordedRequest::unparsable(api, path, &body, authorization),
            false,
        ),
    };
    let (req, decision) = shared.decide(req, parsed);
    match decision {
        Decision::Answer(reply) => shared.answer(&req, reply).await,
        Decision::BadBody => (
            StatusCode::BAD_REQUEST,
            Json(render::error_body(api, 400, "request body is not json")),
        )
            .into_response(),
        Decision::UnknownModel => (
            StatusCode::NOT_FOUND,
            Json(render::unknown_model(api, &req.model)),
        )
            .into_response(),
        Decision::NoRule => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no rule matched",
        )
            .into_response(),
        Decision::RuleWithoutReplies(rule) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("rule {rule:?} has no replies"),
        )
            .into_response(),
    }
}

async fn ollama_chat(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(shared, Api::Ollama, "/api/chat", headers, body).await
}

async fn openai_chat(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(shared, Api::OpenAi, "/v1/chat/completions", headers, body).await
}

async fn ollama_tags(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(render::ollama_tags(&shared.lock().script.models))
}

async fn openai_models(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(render::openai_models(&shared.lock().script.models))
}

async fn llama_props(State(shared): State<Arc<Shared>>) -> Response {
    match shared.lock().script.context_window {
        Some(w) if w.advertised => Json(render::llama_props(w.tokens)).into_response(),
        _ => (StatusCode::NOT_FOUND, "File Not Found").into_response(),
    }
}

async fn ollama_version() -> Json<Value> {
    Json(json!({"version": "0.6.5"}))
}

async fn ollama_show(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let requested = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
        v.get("model")
            .or_else(|| v.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let Some(model) = requested else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "model is required"})),
        )
            .into_response();
    };
    let known = {
        let served = shared.lock();
        let models = &served.script.models;
        models.is_empty() || models.iter().any(|m| same_model(m, &model))
    };
    if known {
        Json(render::ollama_show()).into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "model not found"})),
        )
            .into_response()
    }
}
