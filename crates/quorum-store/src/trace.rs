//! Trace export: every recorded task attempt as one line of Hermes-format JSONL, the
//! ShareGPT-style layout of the Hermes function-calling datasets, for inspection and for
//! training data.
//!
//! Each line is `{"id": "<flow>/<task>/<attempt>", "conversations": [{"from", "value"}...],
//! ...metadata}`. Roles map system→`system`, user→`human`, assistant→`gpt`, tool→`tool`.
//! An assistant turn's tool calls follow its text as `<tool_call>\n{"name", "arguments"}\n
//! </tool_call>` blocks; consecutive tool results form one `tool` turn of
//! `<tool_response>\n{"name", "content"}\n</tool_response>` blocks. Thinking is kept as
//! `<think>…</think>`: inline in the content as the model wrote it, or rebuilt from a separate
//! `thinking` / `reasoning` / `reasoning_content` field. When the transcript does not end in
//! the attempt's final output, that output is appended as a last `gpt` turn.
//!
//! The transcript is either the message list itself or `{"messages": [...], "tools": [...]}`;
//! tool definitions, when present, are exported as a top-level `tools` field.

use crate::error::StoreError;
use crate::flow_store::{AttemptRecord, FlowStore};
use serde_json::{json, Map, Value};

/// Write one JSONL line per recorded attempt, in task then attempt order; returns the count.
pub fn trace_export(store: &FlowStore, out: &mut impl std::io::Write) -> Result<usize, StoreError> {
    let meta = store.meta()?;
    let attempts = store.attempts()?;
    for attempt in &attempts {
        let line = hermes_line(&meta.flow_id, &meta.flow_name, attempt);
        serde_json::to_writer(&mut *out, &line).map_err(|e| StoreError::Write(e.into()))?;
        out.write_all(b"\n").map_err(StoreError::Write)?;
    }
    out.flush().map_err(StoreError::Write)?;
    Ok(attempts.len())
}

fn hermes_line(flow_id: &str, flow_name: &str, a: &AttemptRecord) -> Value {
    let (messages, tools) = match &a.transcript {
        Value::Array(messages) => (messages.as_slice(), None),
        Value::Object(obj) => (
            obj.get("messages")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default(),
            obj.get("tools").filter(|t| !t.is_null()).cloned(),
        ),
        _ => (&[][..], None),
    };
    let mut conversations = conversations(messages);
    let ends_with_output = conversations
        .last()
        .is_some_and(|(from, value)| from == "gpt" && value.contains(a.output.as_str()));
    if !a.output.is_empty() && !ends_with_output {
        conversations.push(("gpt".to_string(), a.output.clone()));
    }
    let mut line = Map::new();
    line.insert(
        "id".into(),
        json!(format!("{flow_id}/{}/{}", a.task_id, a.attempt)),
    );
    line.insert(
        "conversations".into(),
        Value::Array(
            conversations
                .into_iter()
                .map(|(from, value)| json!({"from": from, "value": value}))
                .collect(),
        ),
    );
    if let Some(tools) = tools {
        line.insert("tools".into(), tools);
    }
    let metadata = json!({
        "flow_id": flow_id,
        "flow": flow_name,
        "task_id": a.task_id,
        "attempt": a.attempt,
        "persona": a.persona,
        "model": a.model,
        "backend": a.backend,
        "node": a.node,
        "prompt_hash": a.prompt_hash,
        "iterations": a.iterations,
        "tokens_in": a.tokens_in,
        "tokens_out": a.tokens_out,
        "started_ms": a.started_ms,
        "ended_ms": a.ended_ms,
        "duration_ms": a.ended_ms.saturating_sub(a.started_ms),
        "error_class": a.error_class,
        "error": a.error,
    });
    if let Value::Object(metadata) = metadata {
        line.extend(metadata);
    }
    Value::Object(line)
}

/// Messages to (from, value) turns.
fn conversations(messages: &[Value]) -> Vec<(String, String)> {
    let mut turns: Vec<(String, String)> = Vec::new();
    // Tool call id -> tool name, for tool results that carry only the id.
    let mut call_names: Map<String, Value> = Map::new();
    for message in messages {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let content = content_text(message.get("content"));
        match role {
            "system" | "developer" => turns.push(("system".into(), content)),
            "assistant" => {
                let mut parts = Vec::new();
                let thinking = ["thinking", "reasoning", "reasoning_content"]
                    .iter()
                    .find_map(|k| message.get(*k).and_then(Value::as_str))
                    .filter(|t| !t.trim().is_empty());
                if let Some(thinking) = thinking {
                    if !content.contains("<think>") {
                        parts.push(format!("<think>\n{}\n</think>", thinking.trim()));
                    }
                }
                if !content.is_empty() {
                    parts.push(content);
                }
                for call in message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let (id, name, arguments) = tool_call_parts(call);
                    if let Some(id) = id {
                        call_names.insert(id, json!(name));
                    }
                    let body = json!({"name": name, "arguments": arguments});
                    parts.push(format!("<tool_call>\n{body}\n</tool_call>"));
                }
                turns.push(("gpt".into(), parts.join("\n")));
            }
            "tool" => {
                let name = message
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| {
                        message
                            .get("tool_call_id")
                            .and_then(Value::as_str)
                            .and_then(|id| call_names.get(id))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                let body = json!({"name": name, "content": structured_or_text(&content)});
                let block = format!("<tool_response>\n{body}\n</tool_response>");
                match turns.last_mut() {
                    Some((from, value)) if from == "tool" => {
                        value.push('\n');
                        value.push_str(&block);
                    }
                    _ => turns.push(("tool".into(), block)),
                }
            }
            // user, and anything unknown: what the model was told.
            _ => turns.push(("human".into(), content)),
        }
    }
    turns
}

/// Content as text: a string, or the text parts of a multi-part content array.
fn content_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(""),
        Some(other) => other.to_string(),
    }
}

/// (id, name, arguments) of a tool call, in our flat shape or OpenAI's nested `function` one.
/// Arguments given as a JSON string are parsed, as Hermes writes them as an object.
fn tool_call_parts(call: &Value) -> (Option<String>, String, Value) {
    let function = call.get("function").unwrap_or(call);
    let id = call.get("id").and_then(Value::as_str).map(str::to_string);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let arguments = match function.get("arguments") {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| json!(s)),
        Some(v) => v.clone(),
        None => json!({}),
    };
    (id, name, arguments)
}

/// A tool result that is a JSON object or array is embedded as JSON, anything else as text.
fn structured_or_text(content: &str) -> Value {
    let trimmed = content.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(content) {
            return v;
        }
    }
    json!(content)
}
