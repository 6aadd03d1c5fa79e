//! Client for the OpenAI-compatible API (`POST {base}/chat/completions`, streamed as server-sent
//! events unless the backend says `stream = false`; `GET {base}/models`) as
//! served by vLLM, llama.cpp's llama-server and LM Studio. The base URL normally ends in `/v1`; one
//! given without it is used as given, since some proxies mount the API elsewhere.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::backend::ChatBackend;
use crate::error::LlmError;
use crate::guard::OutputGuard;
use crate::http::{Http, ReplyFunction, ReplyMessage, ReplyToolCall};
use crate::types::{
    estimate_completion_tokens, estimate_prompt_tokens, BackendConfig, BackendKind, ChatMessage,
    ChatRequest, ChatResponse, ModelInfo, Role, ToolCall, Usage,
};

#[derive(Debug)]
pub struct OpenAiBackend {
    url: String,
    chat_url: String,
    models_url: String,
    /// llama-server's `/props` (beside `/v1`), which states the window the server really runs.
    props_url: String,
    http: Http,
}

impl OpenAiBackend {
    /// Reads a streamed completion into one reply, cutting it when the guard sees it loop. A
    /// server that ignored `stream` and sent one JSON document is read as such.
    async fn streamed(&self, req: &ChatRequest, body: &Value) -> Result<CompletionReply, LlmError> {
        let mut lines = self.http.post_lines(&self.chat_url, body).await?;
        if lines.is_plain_json() {
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
        let mut model = None;
        let mut content = String::new();
        let mut calls: Vec<PartialCall> = Vec::new();
        let mut finish_reason = None;
        let mut usage = None;
        let mut ended = false;
        while let Some(line) = lines.next_line().await? {
            // Server-sent events: `data: ...` lines; comments, event names and blanks skipped.
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                ended = true;
                break;
            }
            let chunk: StreamChunk = serde_json::from_str(data).map_err(|e| LlmError::Decode {
                url: self.chat_url.clone(),
                message: format!(
                    "{e} in streamed event: {}",
                    crate::error::body_snippet(data.as_bytes())
                ),
            })?;
            if let Some(err) = chunk.error {
                return Err(self.stream_error(&err));
            }
            model = chunk.model.or(model);
            usage = chunk.usage.or(usage);
            let Some(choice) = chunk.choices.into_iter().next() else {
                continue;
            };
            if let Some(delta) = choice.delta {
                if let Some(piece) = delta.content {
                    if let Some(cut) = guard.push(&piece) {
                        tracing::info!(url = %self.chat_url, model = %req.model, reason = %cut.reason, "streamed answer cut");
                        return Err(LlmError::Degenerate {
                            url: self.chat_url.clone(),
                            reason: cut.reason,
                        });
                    }
                    content.push_str(&piece);
                }
                for piece in delta.tool_calls.unwrap_or_default() {
                    self.add_call_piece(&mut calls, piece, &mut guard)?;
                }
            }
            if choice.finish_reason.is_some() {
                finish_reason = choice.finish_reason;
            }
        }
        // A server that closes the stream after the finishing event without `[DONE]` has
        // still said everything; one that stops before it has not.
        if !ended && finish_reason.is_none() {
            return Err(LlmError::Decode {
                url: self.chat_url.clone(),
                message: "the streamed answer ended before it finished".into(),
            });
        }
        let tool_calls = calls
            .into_iter()
            .map(|c| ReplyToolCall {
                id: c.id,
                function: ReplyFunction {
                    name: c.name,
                    arguments: c.object.unwrap_or(Value::String(c.arguments)),
                },
            })
            .collect();
        Ok(CompletionReply {
            model,
            choices: vec![Choice {
                message: Some(ReplyMessage {
                    content: Some(content),
                    tool_calls: Some(tool_calls),
                }),
                finish_reason,
            }],
            usage,
        })
    }

    fn add_call_piece(
        &self,
        calls: &mut Vec<PartialCall>,
        piece: DeltaCall,
        guard: &mut OutputGuard,
    ) -> Result<(), LlmError> {
        let index = piece.index.unwrap_or(calls.len().saturating_sub(1));
        if index >= MAX_STREAMED_CALLS {
            return Err(LlmError::Decode {
                url: self.chat_url.clone(),
                message: format!("more than {MAX_STREAMED_CALLS} tool calls in one answer"),
            });
        }
        if calls.len() <= index {
            calls.resize_with(index + 1, PartialCall::default);
        }
        let call = &mut calls[index];
        if piece.id.is_some() {
            call.id = piece.id;
        }
        if let Some(f) = piece.function {
            if let Some(name) = f.name {
                call.name.push_str(&name);
            }
            match f.arguments {
                Some(Value::String(more)) => {
                    // Arguments count against the output like content does.
                    if let Some(cut) = guard.push_arguments(&more) {
                        return Err(LlmError::Degenerate {
                            url: self.chat_url.clone(),
                            reason: cut.reason,
                        });
                    }
                    call.arguments.push_str(&more);
                }
                Some(Value::Null) | None => {}
                Some(object) => call.object = Some(object),
            }
        }
        Ok(())
    }

    /// An error event mid-stream: a context overflow as such, anything else as what it says.
    fn stream_error(&self, err: &Value) -> LlmError {
        let text = err.to_string();
        if let Some(n_ctx) = crate::error::context_overflow(&text) {
            return LlmError::ContextOverflow {
                url: self.chat_url.clone(),
                n_ctx,
                body: crate::error::body_snippet(text.as_bytes()),
            };
        }
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(text);
        LlmError::Decode {
            url: self.chat_url.clone(),
            message: format!("server reported: {message}"),
        }
    }

    pub fn new(cfg: &BackendConfig) -> Result<Self, LlmError> {
        let url = crate::http::validated_base_url(&cfg.url)?;
        Ok(OpenAiBackend {
            chat_url: format!("{url}/chat/completions"),
            models_url: format!("{url}/models"),
            props_url: format!("{}/props", url.strip_suffix("/v1").unwrap_or(&url)),
            http: Http::new(cfg)?,
            url,
        })
    }
}

/// The request body for `/chat/completions`.
pub(crate) fn chat_body(req: &ChatRequest, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        "messages".into(),
        Value::Array(req.messages.iter().map(message_json).collect()),
    );
    body.insert("stream".into(), json!(stream));
    if stream {
        // Token counts arrive in a last chunk only when asked for.
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    body.insert("max_tokens".into(), json!(req.max_tokens));
    body.insert("temperature".into(), json!(req.temperature));
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
        // strict=false: strict mode rejects schemas with optional fields, which ours have.
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": { "name": "output", "schema": schema, "strict": false },
            }),
        );
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
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": arguments_string(&c.arguments) },
                })
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    match m.role {
        Role::Tool => {
            if let Some(id) = &m.tool_call_id {
                out.insert("tool_call_id".into(), json!(id));
            }
        }
        _ => {
            if let Some(name) = &m.name {
                out.insert("name".into(), json!(name));
            }
        }
    }
    Value::Object(out)
}

/// The API carries arguments as a JSON-encoded string; a raw string kept from a malformed call is
/// sent back exactly as the model wrote it.
fn arguments_string(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[derive(Deserialize)]
struct CompletionReply {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ReplyUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ReplyMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// One server-sent event of a streamed completion.
#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<StreamChoice>,
    #[serde(default)]
    usage: Option<ReplyUsage>,
    /// vLLM reports a failure mid-stream as an event holding only an error.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct StreamChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaCall>>,
}

/// A piece of a tool call: the first names it, the rest add to its arguments.
#[derive(Deserialize)]
struct DeltaCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// The most tool calls one streamed answer may assemble.
const MAX_STREAMED_CALLS: usize = 64;

/// A tool call being assembled from its pieces.
#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
    /// A server that sent the arguments as an object rather than string pieces.
    object: Option<Value>,
}

#[derive(Deserialize)]
struct ReplyUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Arguments arrive as a string holding JSON. One that does not parse is kept as the string, so
/// the caller can show the model what it wrote; a server that already sent an object is accepted.
fn parse_arguments(args: Value) -> Value {
    match args {
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Value::Null => json!({}),
        other => other,
    }
}

#[derive(Deserialize)]
struct ModelsReply {
    #[serde(default)]
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
    /// vLLM reports the served context length here.
    #[serde(default)]
    max_model_len: Option<u64>,
    /// llama-server reports model metadata here.
    #[serde(default)]
    meta: Option<Map<String, Value>>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|v| !v.trim().is_empty())
}

#[async_trait::async_trait]
impl ChatBackend for OpenAiBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::OpenAi
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let stream = self.http.streams();
        let body = chat_body(req, stream);
        let reply: CompletionReply = if stream {
            self.streamed(req, &body).await?
        } else {
            self.http.post_json(&self.chat_url, &body).await?
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        let Some(choice) = reply.choices.into_iter().next() else {
            return Err(LlmError::Decode {
                url: self.chat_url.clone(),
                message: "response has no choices".into(),
            });
        };
        let Some(message) = choice.message else {
            return Err(LlmError::Decode {
                url: self.chat_url.clone(),
                message: "first choice has no message".into(),
            });
        };
        let content = message.content.unwrap_or_default();
        let tool_calls: Vec<ToolCall> = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: non_empty(c.id).unwrap_or_else(|| format!("call_{i}")),
                name: c.function.name,
                arguments: parse_arguments(c.function.arguments),
            })
            .collect();
        let (prompt, completion) = match reply.usage {
            Some(u) => (u.prompt_tokens, u.completion_tokens),
            None => (None, None),
        };
        let usage = Usage {
            tokens_in: prompt.unwrap_or_else(|| estimate_prompt_tokens(req)),
            tokens_out: completion
                .unwrap_or_else(|| estimate_completion_tokens(&content, &tool_calls)),
        };
        Ok(ChatResponse {
            content,
            tool_calls,
            usage,
            model: non_empty(reply.model).unwrap_or_else(|| req.model.clone()),
            finish_reason: non_empty(choice.finish_reason),
            duration_ms,
            attempts: 1,
        })
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let reply: ModelsReply = self.http.get_json(&self.models_url).await?;
        // llama-server's /v1/models only knows the trained context (`n_ctx_train`); the window it
        // was started with (`-c`, per slot) is in /props. Other servers have no /props: a failure
        // here only means the listing's own figure stands.
        let served = match self.http.get_json::<Value>(&self.props_url).await {
            Ok(props) => props_n_ctx(&props),
            Err(e) => {
                tracing::debug!(url = %self.props_url, error = %e, "no /props");
                None
            }
        };
        Ok(reply
            .data
            .into_iter()
            .map(|m| {
                let ctx = m.max_model_len.or_else(|| {
                    m.meta
                        .as_ref()
                        .and_then(|meta| meta.get("n_ctx_train"))
                        .and_then(Value::as_u64)
                });
                ModelInfo {
                    context_length: served.or(ctx),
                    ..ModelInfo::named(m.id)
                }
            })
            .collect())
    }
}

/// The per-slot window from llama-server's `/props`: `default_generation_settings.n_ctx`, or a
/// top-level `n_ctx` as some builds report it.
fn props_n_ctx(props: &Value) -> Option<u64> {
    props
        .get("default_generation_settings")
        .and_then(|d| d.get("n_ctx"))
        .or_else(|| props.get("n_ctx"))
        .and_then(Value::as_u64)
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn props_state_the_served_window() {
        assert_eq!(
            props_n_ctx(&json!({"default_generation_settings": {"n_ctx": 2560}, "total_slots": 1})),
            Some(2560)
        );
        assert_eq!(props_n_ctx(&json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(
            props_n_ctx(&json!({"default_generation_settings": {}})),
            None
        );
    }

    #[test]
    fn arguments_parse_or_stay_raw() {
        assert_eq!(
            parse_arguments(json!("{\"path\":\"a\"}")),
            json!({"path": "a"})
        );
        assert_eq!(parse_arguments(json!("{\"path\":")), json!("{\"path\":"));
        assert_eq!(parse_arguments(json!("")), json!({}));
        assert_eq!(parse_arguments(json!({"a": 1})), json!({"a": 1}));
        assert_eq!(arguments_string(&json!({"a": 1})), "{\"a\":1}");
        assert_eq!(arguments_string(&json!("{\"path\":")), "{\"path\":");
    }
}
