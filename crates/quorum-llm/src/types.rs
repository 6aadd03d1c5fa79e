//! Backend-neutral data types: backend configuration, chat requests and responses, tool calls and
//! model descriptions. Both wire formats (Ollama native, OpenAI-compatible) translate to and from these.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::LlmError;

/// Which wire protocol a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Ollama's native API (`/api/chat`, `/api/tags`, `/api/show`).
    Ollama,
    /// The OpenAI-compatible API (`/v1/chat/completions`, `/v1/models`): vLLM, llama-server, LM Studio.
    OpenAi,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Ollama => "ollama",
            BackendKind::OpenAi => "openai",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ollama" => Ok(BackendKind::Ollama),
            "openai" => Ok(BackendKind::OpenAi),
            other => Err(LlmError::Config(format!(
                "unknown backend kind '{other}' (expected ollama or openai)"
            ))),
        }
    }
}

pub fn default_max_concurrent() -> usize {
    4
}

pub fn default_timeout_secs() -> u64 {
    300
}

pub fn default_connect_timeout_secs() -> u64 {
    10
}

pub fn default_stream() -> bool {
    true
}

/// One model server, as written in a TOML `[[backends]]` table or given as `--backend KIND=URL`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendConfig {
    pub kind: BackendKind,
    /// Ollama: `http://127.0.0.1:11434`; OpenAI-compatible: the base including `/v1`.
    pub url: String,
    /// Models this backend serves; empty means ask the server.
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: usize,
    /// Bound on one whole call, so no single generation can decode indefinitely.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    #[serde(default = "default_connect_timeout_secs")]
    pub connect_timeout_secs: u64,
    /// Name of the environment variable holding a bearer key; the key itself never sits in config.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Stream answers, so a generation that stops saying anything (a loop, no JSON) is cut
    /// early; `false` for a server or proxy that mishandles streaming. The output bound stays
    /// the last resort either way.
    #[serde(default = "default_stream")]
    pub stream: bool,
}

impl BackendConfig {
    /// A config with every optional field at its default.
    pub fn new(kind: BackendKind, url: impl Into<String>) -> Self {
        BackendConfig {
            kind,
            url: url.into(),
            models: Vec::new(),
            max_concurrent: default_max_concurrent(),
            timeout_secs: default_timeout_secs(),
            connect_timeout_secs: default_connect_timeout_secs(),
            api_key_env: None,
            stream: default_stream(),
        }
    }
}

/// Parses the `--backend KIND=URL` flag form, e.g. `openai=http://127.0.0.1:8080/v1`.
impl FromStr for BackendConfig {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, url) = s.split_once('=').ok_or_else(|| {
            LlmError::Config(format!("backend '{s}' is not of the form KIND=URL"))
        })?;
        let url = url.trim();
        if url.is_empty() {
            return Err(LlmError::Config(format!("backend '{s}' has an empty url")));
        }
        Ok(BackendConfig::new(kind.parse()?, url))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Normally a JSON object; a `Value::String` when the model emitted arguments that are not JSON,
    /// kept verbatim so the caller can report the malformed call back to the model.
    pub arguments: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For tool results: the name of the tool that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    /// An assistant turn that requested tool calls; it must precede the matching tool results.
    pub fn assistant_with_tool_calls(
        content: impl Into<String>,
        tool_calls: Vec<ToolCall>,
    ) -> Self {
        ChatMessage {
            tool_calls,
            ..Self::plain(Role::Assistant, content)
        }
    }

    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ChatMessage {
            tool_call_id: Some(call_id.into()),
            name: Some(name.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON schema object describing the arguments.
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// Empty means no tools are offered.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Structured output: sent as Ollama `format` or OpenAI `response_format` json_schema.
    #[serde(default)]
    pub json_schema: Option<serde_json::Value>,
    /// Always sent: an unbounded generation is never requested.
    pub max_tokens: u32,
    pub temperature: f32,
    /// Ollama `options.num_ctx`; ignored by OpenAI-compatible servers, whose context is fixed at load.
    #[serde(default)]
    pub num_ctx: Option<u32>,
}

impl ChatRequest {
    /// A request with no tools, no schema, temperature 0 and the server's default context size.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>, max_tokens: u32) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            tools: Vec::new(),
            json_schema: None,
            max_tokens,
            temperature: 0.0,
            num_ctx: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub tokens_in: u64,
    pub tokens_out: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// As reported by the server; estimated at four characters per token where it reported nothing.
    pub usage: Usage,
    pub model: String,
    pub finish_reason: Option<String>,
    /// Wall time of the HTTP call that produced this response (not of earlier failed attempts).
    pub duration_ms: u64,
    /// How many HTTP calls it took; 1 from a backend, set by `LlmClient` after retries.
    pub attempts: u32,
}

/// The vendor layer of a model card, as read from the backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    pub family: Option<String>,
    pub parameter_size: Option<String>,
    pub quantization: Option<String>,
    pub context_length: Option<u64>,
    /// Ollama's capability list (`completion`, `tools`, `vision`, ...); empty when not reported.
    pub capabilities: Vec<String>,
}

impl ModelInfo {
    pub fn named(name: impl Into<String>) -> Self {
        ModelInfo {
            name: name.into(),
            ..ModelInfo::default()
        }
    }
}

/// Token estimate for text whose count the server did not report: about four characters per token
/// for English and code, which keeps budgets and reports honest instead of silently zero.
pub fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

fn tool_call_chars(calls: &[ToolCall]) -> usize {
    calls
        .iter()
        .map(|c| c.name.chars().count() + c.arguments.to_string().chars().count())
        .sum()
}

/// Estimated prompt tokens of a request: message contents and tool-call arguments.
pub(crate) fn estimate_prompt_tokens(req: &ChatRequest) -> u64 {
    let chars: usize = req
        .messages
        .iter()
        .map(|m| m.content.chars().count() + tool_call_chars(&m.tool_calls))
        .sum();
    estimate_tokens(chars)
}

/// Estimated completion tokens of a reply: its text and tool calls.
pub(crate) fn estimate_completion_tokens(content: &str, calls: &[ToolCall]) -> u64 {
    estimate_tokens(content.chars().count() + tool_call_chars(calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_kind_round_trips() {
        assert_eq!(
            "ollama".parse::<BackendKind>().unwrap(),
            BackendKind::Ollama
        );
        assert_eq!(
            " OpenAI ".parse::<BackendKind>().unwrap(),
            BackendKind::OpenAi
        );
        assert_eq!(BackendKind::OpenAi.to_string(), "openai");
        assert!("vllm".parse::<BackendKind>().is_err());
        assert_eq!(
            serde_json::to_string(&BackendKind::OpenAi).unwrap(),
            "\"openai\""
        );
    }

    #[test]
    fn backend_config_defaults_from_toml_shaped_json() {
        let cfg: BackendConfig =
            serde_json::from_str(r#"{"kind":"ollama","url":"http://127.0.0.1:11434"}"#).unwrap();
        assert_eq!(
            cfg,
            BackendConfig::new(BackendKind::Ollama, "http://127.0.0.1:11434")
        );
        assert_eq!(cfg.max_concurrent, 4);
        assert_eq!(cfg.timeout_secs, 300);
        assert_eq!(cfg.connect_timeout_secs, 10);
    }

    #[test]
    fn backend_flag_form_parses() {
        let cfg: BackendConfig = "openai=http://127.0.0.1:8080/v1".parse().unwrap();
        assert_eq!(cfg.kind, BackendKind::OpenAi);
        assert_eq!(cfg.url, "http://127.0.0.1:8080/v1");
        assert!("http://x".parse::<BackendConfig>().is_err());
        assert!("ollama=".parse::<BackendConfig>().is_err());
        assert!("gpt=http://x".parse::<BackendConfig>().is_err());
    }

    #[test]
    fn tool_result_message_carries_id_and_name() {
        let m = ChatMessage::tool_result("call_0", "read_file", "fn main() {}");
        assert_eq!(m.role, Role::Tool);
        assert_eq!(m.tool_call_id.as_deref(), Some("call_0"));
        assert_eq!(m.name.as_deref(), Some("read_file"));
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["role"], "tool");
    }

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
        assert_eq!(estimate_tokens(9), 3);
    }
}
