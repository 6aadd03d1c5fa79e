//! What the server remembers about each chat request, extracted once from the raw body so that
//! rules match on it and tests assert on it without re-parsing either API's shape.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::Api;

/// One chat request as received. Only chat calls are recorded (`/api/chat`,
/// `/v1/chat/completions`); model listings and `/api/show` are not, so counting requests counts
/// LLM calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Arrival order, from 0; equal to the request's index in `ScriptedServer::requests()`.
    pub seq: u64,
    pub api: Api,
    pub path: String,
    /// The `model` field, or empty when the body had none.
    pub model: String,
    /// The body as sent; a body that was not JSON is kept as a JSON string of its bytes.
    pub body: Value,
    /// All message contents joined by "\n" (text parts only, for multi-part contents).
    pub text: String,
    /// The system (and OpenAI "developer") messages joined by "\n".
    pub system: String,
    /// The content of the last user or tool message.
    pub last_user: String,
    /// The rule that answered; `None` for the fallback, no match, an unknown model or a bad body.
    pub rule: Option<String>,
    pub has_tools: bool,
    pub tool_names: Vec<String>,
    /// Structured output was asked for: Ollama `format`, or OpenAI `response_format` other than
    /// `{"type": "text"}`.
    pub json_schema: bool,
    /// Ollama `options.num_predict`; OpenAI `max_completion_tokens`, else `max_tokens`.
    pub max_tokens: Option<u64>,
    /// Assistant messages already in the conversation.
    pub turn: usize,
    /// The `stream` field as sent. The server streams only when it is `true` (Ollama also streams
    /// when it is absent; this server does not, so a client that forgets the field shows up
    /// here rather than against a real server).
    pub stream: Option<bool>,
    /// The `Authorization` header, to check that an API key reaches the backend.
    pub authorization: Option<String>,
}

impl RecordedRequest {
    /// Extracts everything rules and tests look at. `seq` and `rule` are filled in by the server.
    pub(crate) fn from_body(
        api: Api,
        path: &str,
        body: Value,
        authorization: Option<String>,
    ) -> RecordedRequest {
        let messages: &[Value] = body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let role = |m: &Value| {
            m.get("role")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let content = |m: &Value| m.get("content").and_then(content_text);

        let text = messages
            .iter()
            .filter_map(content)
            .collect::<Vec<_>>()
            .join("\n");
        let system = messages
            .iter()
            .filter(|m| matches!(role(m).as_str(), "system" | "developer"))
            .filter_map(content)
            .collect::<Vec<_>>()
            .join("\n");
        let last_user = messages
            .iter()
            .rev()
            .find(|m| matches!(role(m).as_str(), "user" | "tool"))
            .and_then(content)
            .unwrap_or_default();
        let turn = messages.iter().filter(|m| role(m) == "assistant").count();

        let tool_names: Vec<String> = body
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| {
                        t.pointer("/function/name")
                            .or_else(|| t.get("name"))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let has_tools = body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|tools| !tools.is_empty());

        let (json_schema, max_tokens) = match api {
            Api::Ollama => (
                body.get("format").is_some_and(|f| !f.is_null()),
                body.pointer("/options/num_predict").and_then(Value::as_u64),
            ),
            Api::OpenAi => (
                body.get("response_format").is_some_and(|f| {
                    !f.is_null() && f.get("type").and_then(Value::as_str) != Some("text")
                }),
                body.get("max_completion_tokens")
                    .and_then(Value::as_u64)
                    .or_else(|| body.get("max_tokens").and_then(Value::as_u64)),
            ),
        };

        RecordedRequest {
            seq: 0,
            api,
            path: path.to_string(),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            stream: body.get("stream").and_then(Value::as_bool),
            text,
            system,
            last_user,
            rule: None,
            has_tools,
            tool_names,
            json_schema,
            max_tokens,
            turn,
            authorization,
            body,
        }
    }

    /// A request whose body was not JSON: recorded (so the test sees it) with nothing extracted.
    pub(crate) fn unparsable(
        api: Api,
        path: &str,
        raw: &[u8],
        authorization: Option<String>,
    ) -> RecordedRequest {
        let mut req = RecordedRequest::from_body(api, path, Value::Null, authorization);
        req.body = Value::String(String::from_utf8_lossy(raw).into_owned());
        req
    }

    /// The usage figure for the prompt: a quarter of its characters, at least one.
    pub fn prompt_tokens(&self) -> u64 {
        token_estimate(&self.text)
    }

    /// What the request occupies of a context window, as a server with
    /// [`Script::context_window`](crate::Script::context_window) counts it: a quarter of the
    /// characters of message contents, tool-call arguments and tool definitions, plus the
    /// output bound.
    pub fn window_tokens(&self) -> u64 {
        let calls: usize = self
            .body
            .get("messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .filter_map(|m| m.get("tool_calls"))
                    .map(|c| c.to_string().chars().count())
                    .sum()
            })
            .unwrap_or(0);
        let tools = self
            .body
            .get("tools")
            .map_or(0, |t| t.to_string().chars().count());
        let chars = self.text.chars().count() + calls + tools;
        chars as u64 / 4 + self.max_tokens.unwrap_or(0)
    }
}

/// A deterministic stand-in for a tokenizer, so tests can predict usage exactly.
pub(crate) fn token_estimate(text: &str) -> u64 {
    (text.chars().count() as u64 / 4).max(1)
}

/// OpenAI allows content as a list of typed parts; only the text parts carry prompt text.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}
