//! Model-server clients: Ollama's native API and the OpenAI-compatible API behind one
//! `ChatBackend` trait, and `LlmClient`, which adds a concurrency bound and retries.
//!
//! Every call is non-streaming, carries an output-token bound and runs under a per-call timeout.
//! Backends make exactly one HTTP call per `chat`; retrying is `LlmClient`'s job alone, so a retry
//! policy is applied once and attempts are counted in one place.
//!
//! Architecture invariant: this crate knows HTTP and the two wire formats, nothing about personas,
//! prompts or findings.

mod client;
mod error;
mod http;
mod ollama;
mod openai;
mod retry;
mod types;

use std::sync::Arc;

pub use client::{LlmClient, MIN_CONTEXT_WINDOW};
pub use error::LlmError;
pub use ollama::OllamaBackend;
pub use openai::OpenAiBackend;
pub use retry::RetryPolicy;
pub use types::{
    default_connect_timeout_secs, default_max_concurrent, default_timeout_secs, estimate_tokens,
    BackendConfig, BackendKind, ChatMessage, ChatRequest, ChatResponse, ModelInfo, Role, ToolCall,
    ToolSpec, Usage,
};

/// One model server speaking one wire protocol.
#[async_trait::async_trait]
pub trait ChatBackend: Send + Sync + std::fmt::Debug {
    fn kind(&self) -> BackendKind;
    /// The base URL as configured, without a trailing slash.
    fn url(&self) -> &str;
    /// Exactly one HTTP call; no retry.
    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError>;
    /// The models the server has, with whatever details it reports.
    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError>;
}

/// Builds the backend for `cfg.kind`; fails on a URL that is not http(s) or a zero timeout.
pub fn backend_from_config(cfg: &BackendConfig) -> Result<Arc<dyn ChatBackend>, LlmError> {
    Ok(match cfg.kind {
        BackendKind::Ollama => Arc::new(OllamaBackend::new(cfg)?),
        BackendKind::OpenAi => Arc::new(OpenAiBackend::new(cfg)?),
    })
}

/// The base URL without trailing slashes, after checking it is an absolute http(s) URL.
pub(crate) fn validated_base_url(raw: &str) -> Result<String, LlmError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed)
        .map_err(|e| LlmError::Config(format!("invalid backend url '{raw}': {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(LlmError::Config(format!(
            "invalid backend url '{raw}': expected http:// or https:// with a host"
        )));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_validated_and_trimmed() {
        assert_eq!(
            validated_base_url("http://127.0.0.1:8080/v1/").unwrap(),
            "http://127.0.0.1:8080/v1"
        );
        assert!(validated_base_url("127.0.0.1:11434").is_err());
        assert!(validated_base_url("ftp://h").is_err());
        assert!(validated_base_url("").is_err());
    }

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
