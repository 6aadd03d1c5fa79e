//! Model-server clients: Ollama's native API and the OpenAI-compatible API behind one
//! `ChatBackend` trait, and `LlmClient`, which adds a concurrency bound and retries.
//!
//! Every call carries an output-token bound and runs under a per-call timeout. Answers are
//! streamed (unless a backend says `stream = false`) so that [`guard`] can cut a generation that
//! loops long before the bound.
//! Backends make exactly one HTTP call per `chat`; retrying is `LlmClient`'s job alone, so a retry
//! policy is applied once and attempts are counted in one place.
//!
//! Architecture invariant: this crate knows HTTP and the two wire formats, nothing about personas,
//! prompts or findings.

mod backend;
mod client;
mod error;
pub mod guard;
mod http;
mod ollama;
mod openai;
mod retry;
mod types;

pub use backend::ChatBackend;
pub use client::{backend_from_config, LlmClient, MIN_CONTEXT_WINDOW};
pub use error::LlmError;
pub use ollama::OllamaBackend;
pub use openai::OpenAiBackend;
pub use retry::RetryPolicy;
pub use types::{
    default_connect_timeout_secs, default_max_concurrent, default_stream, default_timeout_secs,
    estimate_tokens, BackendConfig, BackendKind, ChatMessage, ChatRequest, ChatResponse, ModelInfo,
    Role, ToolCall, ToolSpec, Usage,
};
