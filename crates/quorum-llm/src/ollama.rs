//! Client for Ollama's native API: `POST /api/chat` (streamed as NDJSON unless the backend
//! says `stream = false`), `GET /api/tags` and `POST /api/show`. The native API is used rather than Ollama's OpenAI shim because only it takes
//! `num_ctx` per request and reports capabilities and context length per model.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::backend::ChatBackend;
use crate::error::LlmError;
use crate::guard::OutputGuard;
use crate::http::{Http, ReplyMessage};
use crate::types::{
    estimate_completion_tokens, estimate_prompt_tokens, BackendConfig, BackendKind, ChatMessage,
    ChatRequest, ChatResponse, ModelInfo, Role, ToolCall, Usage,
};

#[derive(Debug)]
pub struct OllamaBackend {
    url: String,
    chat_url: String,
    tags_url: String,
    show_url: String,
    http: Http,
}

impl OllamaBackend {
    pub fn new(cfg: &BackendConfig) -> Result<Self, LlmError> {
        let url = crate::http::validated_base_url(&cfg.url)?;
        Ok(OllamaBackend {
            chat_url: format!("{url}/api/chat"),
            tags_url: format!("{url}/api/tags"),
            show_url: format!("{url}/api/show"),
            http: Http::new(cfg)?,
            url,
        })
    }

    /// Reads a streamed answer into one reply, cutting it when the guard sees it loop; an
    /// error line (a model that failed mid-answer) ends it as that error.
    async fn streamed(&self, req: &ChatRequest, body: &Value) -> Result<ChatReply, LlmError> {
        let mut lines = self.http.post_lines(&self.chat_url, body).await?;
        if lines.is_plain_json() {
            // A server (or proxy) that ignored `stream` and sent the whole answer at once.
            let text = lines.rest().await?;
            return serde_json::from_str(&text).map_err(|e| LlmError::Decode {
                url: self.chat_url.clone(),
                message: format!(
                    "{e} in body: {}",
                    crate::error::body_snippet(text.as_bytes())
                ),
            });
        }
        let mut guard = OutputGuard::for_request(req);
        let mut whole = ChatReply {
            model: None,
            done: false,
            message: None,
            done_reason: None,
            prompt_eval_count: None,
            eval_count: None,
            error: None,
        };
        let mut content = String::new();
        let mut calls = Vec::new();
        while let Some(line) = lines.next_line().await? {
            if line.trim().is_empty() {
                continue;
            }
            let chunk: ChatReply = serde_json::from_str(&line).map_err(|e| LlmError::Decode {
                url: self.chat_url.clone(),
                message: format!(
                    "{e} in streamed line: {}",
                    crate::error::body_snippet(line.as_bytes())
                ),
            })?;
            if chunk.error.is_some() {
                whole.error = chunk.error;
                return Ok(whole);
            }
            if let Some(m) = chunk.message {
                if let Some(piece) = m.content {
                    if let Some(cut) = guard.push(&piece) {
                        tracing::info!(url = %self.chat_url, model = %req.model, reason = %cut.reason, "streamed answer cut");
                        return Err(LlmError::Degenerate {
                            url: self.chat_url.clone(),
                            reason: cut.reason,
                        });
                    }
                    content.push_str(&piece);
                }
                calls.extend(m.tool_calls.unwrap_or_default());
            }
            whole.model = chunk.model.or(whole.model);
            if chunk.done {
                whole.done = true;
                whole.done_reason = chunk.done_reason;
                whole.prompt_eval_count = chunk.prompt_eval_count;
                whole.eval_count = chunk.eval_count;
                break;
            }
        }
        if !whole.done {
            return Err(LlmError::Decode {
                url: self.chat_url.clone(),
                message: "the streamed answer ended before its last message".into(),
            });
        }
        whole.message = Some(ReplyMessage {
            content: Some(content),
            tool_calls: Some(calls),
        });
        Ok(whole)
    }

    async fn show(&self, name: &str) -> Result<ShowResponse, LlmError> {
        self.http
            .post_json(&self.show_url, &json!({ "model": name }))
            .await
    }
}

/// The request body for `/api/chat`.
pub(crate) fn chat_body(req: &ChatRequest, stream: bool) -> Value {
    let mut options = Map::new();
    options.insert("num_predict".into(), json!(req.max_tokens));
    options.insert("temperature".into(), json!(req.temperature));
    if let Some(n) = req.num_ctx {
        options.insert("num_ctx".into(), json!(n));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        "messages".into(),
        Value::Array(req.messages.iter().map(message_json).collect()),
    );
    body.insert("stream".into(), json!(stream));
    body.insert("options".into(), Value::Object(options));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(schema) = &req.json_schema {
        body.insert("format".into(), schema.clone());
    }
    Value::Object(body)
}

fn message_json(m: &ChatMessage) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(m.role.as_str()));
    out.insert("content".into(), json!(m.content));
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| json!({ "function": { "name": c.name, "arguments": arguments_object(&c.arguments) } }))
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if m.role == Role::Tool {
        if let Some(name) = &m.name {
            out.insert("tool_name".into(), json!(name));
        }
    }
    Value::Object(out)
}

/// Ollama rejects a history whose tool-call arguments are not an object. Arguments kept as a raw
/// string (the model emitted non-JSON) are parsed if possible, else sent empty: the tool result
/// that follows already tells the model its call was malformed.
fn arguments_object(args: &Value) -> Value {
    match args {
        Value::Object(_) => args.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({}),
        },
        _ => json!({}),
    }
}

/// A whole answer, or one line of a streamed one (then `done` marks the last).
#[derive(Deserialize)]
struct ChatReply {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    done: bool,
    message: Option<ReplyMessage>,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
    /// Ollama sometimes answers 200 with only an error (e.g. a model that failed to load).
    #[serde(default)]
    error: Option<String>,
}

/// Ollama usually sends arguments as an object, but some models and versions send a string holding
/// JSON; both become an object, and a string that is not JSON is kept verbatim.
fn normalise_arguments(args: Value) -> Value {
    match args {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Value::Null => json!({}),
        other => other,
    }
}

#[derive(Deserialize)]
struct TagsReply {
    #[serde(default)]
    models: Vec<TagEntry>,
}

#[derive(Deserialize)]
struct TagEntry {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    details: Details,
}

#[derive(Deserialize, Default)]
struct Details {
    #[serde(default)]
    family: Option<String>,
    #[serde(default)]
    parameter_size: Option<String>,
    #[serde(default)]
    quantization_level: Option<String>,
}

#[derive(Deserialize)]
struct ShowResponse {
    #[serde(default)]
    details: Details,
    #[serde(default)]
    model_info: Map<String, Value>,
    #[serde(default)]
    capabilities: Vec<String>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|v| !v.trim().is_empty())
}

/// The context length from `model_info`: `<architecture>.context_length` when the architecture is
/// named, else the first key ending in `.context_length`.
fn context_length(info: &Map<String, Value>) -> Option<u64> {
    let arch_key = info
        .get("general.architecture")
        .and_then(Value::as_str)
        .map(|a| format!("{a}.context_length"));
    if let Some(v) = arch_key.and_then(|k| info.get(&k)).and_then(Value::as_u64) {
        return Some(v);
    }
    info.iter()
        .filter(|(k, _)| k.ends_with(".context_length"))
        .find_map(|(_, v)| v.as_u64())
}

#[async_trait::async_trait]
impl ChatBackend for OllamaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Ollama
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let stream = self.http.streams();
        let body = chat_body(req, stream);
        let reply: ChatReply = if stream {
            self.streamed(req, &body).await?
        } else {
            self.http.post_json(&self.chat_url, &body).await?
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        let message = match (reply.message, reply.error) {
            (Some(m), _) => m,
            (None, Some(err)) => {
                if let Some(n_ctx) = crate::error::context_overflow(&err) {
                    return Err(LlmError::ContextOverflow {
                        url: self.chat_url.clone(),
                        n_ctx,
                        body: crate::error::body_snippet(err.as_bytes()),
                    });
                }
                return Err(LlmError::Decode {
                    url: self.chat_url.clone(),
                    message: format!("server reported: {err}"),
                });
            }
            (None, None) => {
                return Err(LlmError::Decode {
                    url: self.chat_url.clone(),
                    message: "response has no message".into(),
                })
            }
        };
        let content = message.content.unwrap_or_default();
        let tool_calls: Vec<ToolCall> = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                // Ollama's calls carry no id; one is made up so results can be matched to calls.
                id: non_empty(c.id).unwrap_or_else(|| format!("call_{i}")),
                name: c.function.name,
                arguments: normalise_arguments(c.function.arguments),
            })
            .collect();
        let usage = Usage {
            tokens_in: reply
                .prompt_eval_count
                .unwrap_or_else(|| estimate_prompt_tokens(req)),
            tokens_out: reply
                .eval_count
                .unwrap_or_else(|| estimate_completion_tokens(&content, &tool_calls)),
        };
        Ok(ChatResponse {
            content,
            tool_calls,
            usage,
            model: non_empty(reply.model).unwrap_or_else(|| req.model.clone()),
            finish_reason: non_empty(reply.done_reason),
            duration_ms,
            attempts: 1,
        })
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let tags: TagsReply = self.http.get_json(&self.tags_url).await?;
        let mut models = Vec::with_capacity(tags.models.len());
        for entry in tags.models {
            let Some(name) = non_empty(entry.name).or(non_empty(entry.model)) else {
                continue;
            };
            let mut info = ModelInfo {
                family: non_empty(entry.details.family),
                parameter_size: non_empty(entry.details.parameter_size),
                quantization: non_empty(entry.details.quantization_level),
                ..ModelInfo::named(name)
            };
            // Details from /api/show are an enrichment: a model that lists but will not show is
            // still served, so a failed show keeps the entry with what /api/tags said.
            match self.show(&info.name).await {
                Ok(show) => {
                    info.family = non_empty(show.details.family).or(info.family);
                    info.parameter_size =
                        non_empty(show.details.parameter_size).or(info.parameter_size);
                    info.quantization =
                        non_empty(show.details.quantization_level).or(info.quantization);
                    info.context_length = context_length(&show.model_info);
                    info.capabilities = show.capabilities;
                }
                Err(e) => tracing::debug!(
                    url = %self.show_url,
                    model = %info.name,
                    error = %e,
                    "model details unavailable"
                ),
            }
            models.push(info);
        }
        Ok(models)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_length_prefers_the_named_architecture() {
        let info: Map<String, Value> = serde_json::from_value(json!({
            "general.architecture": "qwen2",
            "clip.context_length": 77,
            "qwen2.context_length": 32768,
        }))
        .unwrap();
        assert_eq!(context_length(&info), Some(32768));
        let info: Map<String, Value> =
            serde_json::from_value(json!({ "llama.context_length": 8192 })).unwrap();
        assert_eq!(context_length(&info), Some(8192));
        assert_eq!(context_length(&Map::new()), None);
    }

    #[test]
    fn arguments_normalise_to_objects() {
        assert_eq!(normalise_arguments(json!({"a": 1})), json!({"a": 1}));
        assert_eq!(normalise_arguments(json!("{\"a\":1}")), json!({"a": 1}));
        assert_eq!(normalise_arguments(json!("not json")), json!("not json"));
        assert_eq!(arguments_object(&json!("not json")), json!({}));
        assert_eq!(arguments_object(&json!("{\"a\":1}")), json!({"a": 1}));
    }
}
