//! Streamed answers in each API's own framing, for a request that asked for `stream: true`:
//! Ollama's NDJSON lines (pieces with `done: false`, then the counts with `done: true`) and
//! OpenAI's server-sent events (a role chunk, content deltas, tool calls whose arguments arrive
//! in pieces, the finishing chunk, usage when `stream_options.include_usage`, `[DONE]`).
//!
//! Built from the body the same reply would have had unstreamed, so both modes say the same.

use serde_json::{json, Value};

use crate::api::Api;
use crate::request::RecordedRequest;

/// Content is sent in pieces of about this many characters (a token or two).
const PIECE_CHARS: usize = 8;

/// The content type of a streamed answer.
pub(crate) fn content_type(api: Api) -> &'static str {
    match api {
        Api::Ollama => "application/x-ndjson",
        Api::OpenAi => "text/event-stream",
    }
}

/// Every framed event of `whole` (an unstreamed chat body from `render::chat_ok`), in order.
pub(crate) fn events(req: &RecordedRequest, whole: &Value) -> Vec<String> {
    match req.api {
        Api::Ollama => ollama_events(whole),
        Api::OpenAi => openai_events(req, whole),
    }
}

fn pieces(content: &str) -> Vec<String> {
    let chars: Vec<char> = content.chars().collect();
    chars
        .chunks(PIECE_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

fn ollama_events(whole: &Value) -> Vec<String> {
    let model = &whole["model"];
    let created = &whole["created_at"];
    let line = |message: Value| {
        format!(
            "{}\n",
            json!({"model": model, "created_at": created, "message": message, "done": false})
        )
    };
    let content = whole["message"]["content"].as_str().unwrap_or("");
    let mut out: Vec<String> = pieces(content)
        .into_iter()
        .map(|p| line(json!({"role": "assistant", "content": p})))
        .collect();
    if let Some(calls) = whole["message"].get("tool_calls") {
        out.push(line(
            json!({"role": "assistant", "content": "", "tool_calls": calls}),
        ));
    }
    let mut last = whole.clone();
    last["message"] = json!({"role": "assistant", "content": ""});
    out.push(format!("{last}\n"));
    out
}

fn openai_events(req: &RecordedRequest, whole: &Value) -> Vec<String> {
    let chunk = |choices: Value| {
        json!({
            "id": whole["id"],
            "object": "chat.completion.chunk",
            "created": whole["created"],
            "model": whole["model"],
            "system_fingerprint": whole["system_fingerprint"],
            "choices": choices,
        })
    };
    let delta = |delta: Value| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
    let message = &whole["choices"][0]["message"];
    let mut events = vec![delta(json!({"role": "assistant", "content": ""}))];
    let content = message["content"].as_str().unwrap_or("");
    events.extend(
        pieces(content)
            .into_iter()
            .map(|p| delta(json!({"content": p}))),
    );
    for (i, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        events.push(delta(json!({"tool_calls": [{
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }]})));
        // Arguments arrive in two pieces, as real servers split them, so a client must join.
        let arguments = call["function"]["arguments"].as_str().unwrap_or("");
        let half = arguments
            .char_indices()
            .map(|(at, _)| at)
            .nth(arguments.chars().count() / 2)
            .unwrap_or(arguments.len());
        for part in [&arguments[..half], &arguments[half..]] {
            events.push(delta(json!({"tool_calls": [{
                "index": i,
                "function": {"arguments": part},
            }]})));
        }
    }
    let finish = &whole["choices"][0]["finish_reason"];
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let usage_asked = req.body["stream_options"]["include_usage"] == json!(true);
    if usage_asked {
        let mut usage = chunk(json!([]));
        usage["usage"] = whole["usage"].clone();
        events.push(usage);
    }
    let mut out: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// Sets the finish reason of an unstreamed body (`length` for an answer the bound stopped).
pub(crate) fn set_finish_reason(api: Api, whole: &mut Value, reason: &str) {
    match api {
        Api::Ollama => whole["done_reason"] = json!(reason),
        Api::OpenAi => whole["choices"][0]["finish_reason"] = json!(reason),
    }
}
