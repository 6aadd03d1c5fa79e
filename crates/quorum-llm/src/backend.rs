//! The seam between the client and a model server: one server speaking one wire protocol
//! (Ollama's or the OpenAI-compatible one), one HTTP call per `chat`, no retry.

use crate::error::LlmError;
use crate::types::{BackendKind, ChatRequest, ChatResponse, ModelInfo};

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
