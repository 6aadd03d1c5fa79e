//! `LlmClient`: what the runtime calls. It wraps one backend with a concurrency bound (a model
//! server degrades badly past a few parallel generations) and retries transient failures;
//! `backend_from_config` builds that backend for a config's kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::backend::ChatBackend;
use crate::error::LlmError;
use crate::ollama::OllamaBackend;
use crate::openai::OpenAiBackend;
use crate::retry::RetryPolicy;
use crate::types::{BackendConfig, BackendKind, ChatRequest, ChatResponse, ModelInfo};

/// Builds the backend for `cfg.kind`; fails on a URL that is not http(s) or a zero timeout.
pub fn backend_from_config(cfg: &BackendConfig) -> Result<Arc<dyn ChatBackend>, LlmError> {
    Ok(match cfg.kind {
        BackendKind::Ollama => Arc::new(OllamaBackend::new(cfg)?),
        BackendKind::OpenAi => Arc::new(OpenAiBackend::new(cfg)?),
    })
}

/// Cheap to clone; clones share the backend and the concurrency bound.
#[derive(Clone, Debug)]
pub struct LlmClient {
    backend: Arc<dyn ChatBackend>,
    limiter: Arc<Semaphore>,
    max_concurrent: usize,
    retry: RetryPolicy,
    probe_timeout: Duration,
    /// The context window each model is served with, as probed and as lowered by the server's
    /// own overflow answers. Shared by clones, so one attempt's lesson reaches every later one.
    windows: Arc<Mutex<HashMap<String, u32>>>,
}

/// No window is assumed below this: a server that keeps refusing requests this small has a
/// problem a smaller prompt will not solve.
pub const MIN_CONTEXT_WINDOW: u32 = 512;

fn window_key(model: &str) -> &str {
    model.strip_suffix(":latest").unwrap_or(model)
}

impl LlmClient {
    /// `max_concurrent` of 0 is treated as 1, since a bound of zero would block every call forever.
    pub fn new(backend: Arc<dyn ChatBackend>, max_concurrent: usize, retry: RetryPolicy) -> Self {
        let max_concurrent = max_concurrent.max(1);
        LlmClient {
            backend,
            limiter: Arc::new(Semaphore::new(max_concurrent)),
            max_concurrent,
            retry,
            probe_timeout: Duration::from_secs(crate::types::default_connect_timeout_secs()),
            windows: Arc::default(),
        }
    }

    /// A client with the default retry policy; the probe is bounded by `connect_timeout_secs`.
    pub fn from_config(cfg: &BackendConfig) -> Result<Self, LlmError> {
        if cfg.max_concurrent == 0 {
            return Err(LlmError::Config(format!(
                "backend {}: max_concurrent must be at least 1",
                cfg.url
            )));
        }
        let backend = backend_from_config(cfg)?;
        Ok(
            LlmClient::new(backend, cfg.max_concurrent, RetryPolicy::default())
                .with_probe_timeout(Duration::from_secs(cfg.connect_timeout_secs)),
        )
    }

    /// Overall bound on `probe`.
    pub fn with_probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    pub fn backend(&self) -> &Arc<dyn ChatBackend> {
        &self.backend
    }

    pub fn max_concurrent(&self) -> usize {
        self.max_concurrent
    }

    /// Calls holding a concurrency permit right now (a gauge for status displays).
    pub fn in_flight(&self) -> usize {
        self.max_concurrent
            .saturating_sub(self.limiter.available_permits())
    }

    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The context window `model` is known to be served with, if any is known.
    pub fn context_window(&self, model: &str) -> Option<u32> {
        self.windows
            .lock()
            .ok()
            .and_then(|w| w.get(window_key(model)).copied())
    }

    /// Record the window a server reports for `model` (from a probe, or from configuration).
    pub fn set_context_window(&self, model: &str, tokens: u32) {
        if let Ok(mut w) = self.windows.lock() {
            w.insert(
                window_key(model).to_string(),
                tokens.max(MIN_CONTEXT_WINDOW),
            );
        }
    }

    /// After an overflow answer to `req`: the window the server stated when it is below the one
    /// the request was built for; when the request was already built for the stated window (the
    /// estimate of its tokens was short), three quarters of it, never below half the stated
    /// window (which is a fact); when the server stated nothing, half. Never raises a known
    /// window.
    fn lower_window(&self, req: &ChatRequest, stated: Option<u32>) -> u32 {
        let used = req
            .num_ctx
            .or_else(|| self.context_window(&req.model))
            .unwrap_or_else(|| {
                let prompt = crate::types::estimate_prompt_tokens(req);
                u32::try_from(prompt)
                    .unwrap_or(u32::MAX)
                    .saturating_add(req.max_tokens)
            });
        let next = match stated {
            Some(n) if n < used => n,
            Some(n) => (used / 4 * 3).max(n / 2),
            None => used / 2,
        }
        .max(MIN_CONTEXT_WINDOW);
        let next = self
            .context_window(&req.model)
            .map_or(next, |known| known.min(next));
        self.set_context_window(&req.model, next);
        next
    }

    /// One chat, retried on transient failures. The concurrency permit is held only while a call
    /// is in flight, not during backoff, so a retrying caller does not starve the others.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let max_attempts = self.retry.attempts();
        let mut attempt = 0;
        loop {
            attempt += 1;
            tracing::debug!(
                backend = %self.backend.kind(),
                url = %self.backend.url(),
                model = %req.model,
                attempt,
                max_attempts,
                "llm call"
            );
            let result = {
                let waiting = quorum_metrics::QueueGuard::new("model_calls_waiting");
                let _permit =
                    self.limiter.acquire().await.map_err(|_| {
                        LlmError::Config("the concurrency limiter was closed".into())
                    })?;
                drop(waiting);
                let _in_flight = quorum_metrics::QueueGuard::new("model_calls_in_flight");
                self.backend.chat(req).await
            };
            match &result {
                Ok(resp) => quorum_metrics::model_call(
                    self.backend.url(),
                    &req.model,
                    "ok",
                    Some(resp.duration_ms as f64 / 1000.0),
                    resp.usage.tokens_in,
                    resp.usage.tokens_out,
                ),
                Err(err) => quorum_metrics::model_call(
                    self.backend.url(),
                    &req.model,
                    err.class(),
                    None,
                    0,
                    0,
                ),
            }
            match result {
                Ok(mut resp) => {
                    resp.attempts = attempt;
                    tracing::debug!(
                        url = %self.backend.url(),
                        model = %req.model,
                        attempt,
                        tokens_in = resp.usage.tokens_in,
                        tokens_out = resp.usage.tokens_out,
                        duration_ms = resp.duration_ms,
                        "llm call done"
                    );
                    return Ok(resp);
                }
                Err(LlmError::ContextOverflow { url, n_ctx, body }) => {
                    let next = self.lower_window(req, n_ctx);
                    tracing::info!(
                        %url,
                        model = %req.model,
                        stated = ?n_ctx,
                        window = next,
                        "request did not fit the context window; later requests use the smaller one"
                    );
                    return Err(LlmError::ContextOverflow { url, n_ctx, body });
                }
                Err(err) if err.retryable() && attempt < max_attempts => {
                    let delay = self.retry.delay_for(attempt, &err);
                    tracing::debug!(
                        url = %self.backend.url(),
                        model = %req.model,
                        attempt,
                        error_class = err.class(),
                        error = %err,
                        delay_ms = delay.as_millis() as u64,
                        "llm call failed, retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
                Err(err) => {
                    tracing::debug!(
                        url = %self.backend.url(),
                        model = %req.model,
                        attempt,
                        error_class = err.class(),
                        error = %err,
                        "llm call failed"
                    );
                    return Err(err);
                }
            }
        }
    }

    /// The backend's models, bounded by a short overall timeout so that an unreachable or wedged
    /// server is reported within seconds rather than after a full call timeout.
    /// Each model's reported context length becomes its known window.
    pub async fn probe(&self) -> Result<Vec<ModelInfo>, LlmError> {
        match tokio::time::timeout(self.probe_timeout, self.backend.list_models()).await {
            Ok(result) => {
                if let Ok(models) = &result {
                    for m in models {
                        if let Some(ctx) = m.context_length.filter(|&c| c > 0) {
                            self.set_context_window(
                                &m.name,
                                u32::try_from(ctx).unwrap_or(u32::MAX),
                            );
                        }
                    }
                }
                result
            }
            Err(_) => Err(LlmError::Timeout {
                url: self.backend.url().to_string(),
                secs: self.probe_timeout.as_secs_f64().ceil() as u64,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_from_config_picks_the_kind_and_rejects_bad_config() {
        let b = backend_from_config(&BackendConfig::new(
            BackendKind::OpenAi,
            "http://127.0.0.1:8080/v1/",
        ))
        .unwrap();
        assert_eq!(b.kind(), BackendKind::OpenAi);
        assert_eq!(b.url(), "http://127.0.0.1:8080/v1");
        let mut cfg = BackendConfig::new(BackendKind::Ollama, "http://127.0.0.1:11434");
        cfg.timeout_secs = 0;
        assert_eq!(backend_from_config(&cfg).unwrap_err().class(), "config");
        cfg.timeout_secs = 1;
        cfg.max_concurrent = 0;
        assert_eq!(LlmClient::from_config(&cfg).unwrap_err().class(), "config");
    }
}
