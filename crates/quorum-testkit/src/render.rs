//! Response bodies in each API's own shape, close enough to the real servers (Ollama, vLLM,
//! llama-server) that a client which parses these parses theirs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::api::Api;
use crate::request::{token_estimate, RecordedRequest};
use crate::script::DEFAULT_MODEL;

/// The body of a successful chat answer: `content` as the assistant text, `calls` as native
/// tool calls (OpenAI then sends `content: null`, as the real servers do).
pub(crate) fn chat_ok(
    req: &RecordedRequest,
    content: &str,
    calls: &[(String, Value)],
    call_ids: &AtomicU64,
) -> Value {
    let model = if req.model.is_empty() {
        DEFAULT_MODEL
    } else {
        req.model.as_str()
    };
    let prompt_tokens = req.prompt_tokens();
    let completion_tokens = if calls.is_empty() {
        token_estimate(content)
    } else {
        let rendered: String = calls
            .iter()
            .map(|(name, args)| format!("{name}{args}"))
            .collect();
        token_estimate(&rendered)
    };
    match req.api {
        Api::Ollama => {
            let mut message = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                message["tool_calls"] = calls
                    .iter()
                    .map(|(name, args)| json!({"function": {"name": name, "arguments": args}}))
                    .collect();
            }
            json!({
                "model": model,
                "created_at": rfc3339_now(),
                "message": message,
                "done": true,
                "done_reason": "stop",
                "total_duration": 0,
                "load_duration": 0,
                "prompt_eval_count": prompt_tokens,
                "prompt_eval_duration": 0,
                "eval_count": completion_tokens,
                "eval_duration": 0,
            })
        }
        Api::OpenAi => {
            let (message, finish_reason) = if calls.is_empty() {
                (json!({"role": "assistant", "content": content}), "stop")
            } else {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .map(|(name, args)| {
                        // A string is passed through untouched so scripts can send arguments
                        // that are not valid JSON.
                        let arguments = match args {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        let id = call_ids.fetch_add(1, Ordering::Relaxed);
                        json!({
                            "id": format!("call_{id}"),
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        })
                    })
                    .collect();
                (
                    json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
                    "tool_calls",
                )
            };
            json!({
                "id": format!("chatcmpl-scripted-{}", req.seq),
                "object": "chat.completion",
                "created": unix_now(),
                "model": model,
                "system_fingerprint": "quorum-scripted",
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            })
        }
    }
}

/// An error body the way each API's clients expect to find the message.
pub(crate) fn error_body(api: Api, code: u16, message: &str) -> Value {
    match api {
        Api::Ollama => json!({"error": message}),
        Api::OpenAi => {
            let kind = match code {
                400 | 404 | 422 => "invalid_request_error",
                401 | 403 => "authentication_error",
                429 => "rate_limit_error",
                _ => "server_error",
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    }
}

/// The 404 for a chat naming a model the script does not serve.
pub(crate) fn unknown_model(api: Api, model: &str) -> Value {
    match api {
        Api::Ollama => {
            json!({"error": format!("model \"{model}\" not found, try pulling it first")})
        }
        Api::OpenAi => json!({"error": {
            "message": format!("the model `{model}` does not exist"),
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }}),
    }
}

/// A JSON summary of a request, for `Reply::Echo`.
pub(crate) fn echo_summary(req: &RecordedRequest) -> String {
    json!({
        "seq": req.seq,
        "api": req.api,
        "path": req.path,
        "model": req.model,
        "rule": req.rule,
        "turn": req.turn,
        "text": req.text,
        "system": req.system,
        "last_user": req.last_user,
        "has_tools": req.has_tools,
        "tool_names": req.tool_names,
        "json_schema": req.json_schema,
        "max_tokens": req.max_tokens,
        "stream": req.stream,
    })
    .to_string()
}

fn model_details() -> Value {
    json!({
        "parent_model": "",
        "format": "gguf",
        "family": "scripted",
        "families": ["scripted"],
        "parameter_size": "7B",
        "quantization_level": "Q4_K_M",
    })
}

/// `GET /api/tags`.
pub(crate) fn ollama_tags(models: &[String]) -> Value {
    let now = rfc3339_now();
    let models: Vec<Value> = models
        .iter()
        .map(|name| {
            json!({
                "name": name,
                "model": name,
                "modified_at": now,
                "size": 4_683_087_332u64,
                "digest": "0000000000000000000000000000000000000000000000000000000000000000",
                "details": model_details(),
            })
        })
        .collect();
    json!({ "models": models })
}

/// `POST /api/show` for a served model.
pub(crate) fn ollama_show() -> Value {
    json!({
        "modelfile": "# scripted model\n",
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": model_details(),
        "model_info": {
            "general.architecture": "scripted",
            "scripted.context_length": 8192,
        },
        "capabilities": ["completion", "tools"],
        "modified_at": rfc3339_now(),
    })
}

/// `GET /v1/models`.
pub(crate) fn openai_models(models: &[String]) -> Value {
    let created = unix_now();
    let data: Vec<Value> = models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "quorum-scripted"}))
        .collect();
    json!({"object": "list", "data": data})
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `YYYY-MM-DDTHH:MM:SSZ` without pulling in a date crate for one field.
fn rfc3339_now() -> String {
    let secs = unix_now();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// llama-server's answer to a request larger than its window (HTTP 400), as of b5000+.
pub(crate) fn context_exceeded(n_prompt_tokens: u64, n_ctx: u64) -> String {
    json!({"error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": n_prompt_tokens,
        "n_ctx": n_ctx,
    }})
    .to_string()
}

/// llama-server's `GET /props`, reduced to what clients read.
pub(crate) fn llama_props(n_ctx: u64) -> Value {
    json!({
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": -1}},
        "total_slots": 1,
        "model_path": "models/scripted.gguf",
        "build_info": "b5000-scripted",
    })
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
    }
}
