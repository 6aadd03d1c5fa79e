//! Streamed answers in each server's real framing: Ollama's NDJSON and the server-sent events of
//! vLLM and llama-server — pieces joined, tool-call arguments assembled, usage read, errors
//! mid-stream, a stream cut short, a server that ignores `stream`, and a looping answer cut by
//! the guard long before the output bound.

mod common;

use common::{bounded, quick_retries, Reply, Stub};
use quorum_llm::{
    backend_from_config, BackendConfig, BackendKind, ChatBackend, ChatMessage, ChatRequest,
    LlmClient, LlmError,
};
use serde_json::{json, Value};

fn backend(kind: BackendKind, url: String) -> std::sync::Arc<dyn ChatBackend> {
    backend_from_config(&BackendConfig::new(kind, url)).unwrap()
}

fn request(max_tokens: u32) -> ChatRequest {
    let mut req = ChatRequest::new("m", vec![ChatMessage::user("review")], max_tokens);
    req.json_schema = Some(json!({"type": "object"}));
    req
}

fn ndjson(lines: &[Value]) -> Reply {
    Reply::Raw {
        status: 200,
        headers: vec![("content-type", "application/x-ndjson".into())],
        body: lines.iter().map(|l| format!("{l}\n")).collect(),
    }
}

fn sse(events: &[&str]) -> Reply {
    Reply::Raw {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: events.iter().map(|e| format!("data: {e}\n\n")).collect(),
    }
}

fn ollama_piece(content: &str) -> Value {
    json!({"model": "qwen2.5-coder:0.5b", "created_at": "2026-12-01T00:00:00Z",
           "message": {"role": "assistant", "content": content}, "done": false})
}

fn ollama_done(reason: &str) -> Value {
    json!({"model": "qwen2.5-coder:0.5b", "created_at": "2026-12-01T00:00:01Z",
           "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": reason,
           "total_duration": 1, "prompt_eval_count": 42, "eval_count": 9})
}

#[tokio::test]
async fn ollama_pieces_tool_calls_and_counts_make_one_answer() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![ndjson(&[
                ollama_piece("{\"find"),
                ollama_piece("ings\": []}"),
                json!({"model": "qwen2.5-coder:0.5b", "created_at": "2026-12-01T00:00:00Z",
                       "message": {"role": "assistant", "content": "",
                                   "tool_calls": [{"function": {"name": "file_read", "arguments": {"path": "src/a.rs"}}}]},
                       "done": false}),
                ollama_done("stop"),
            ])],
        );
        let resp = backend(BackendKind::Ollama, stub.base())
            .chat(&request(256))
            .await
            .unwrap();
        assert_eq!(resp.content, "{\"findings\": []}");
        assert_eq!(resp.tool_calls.len(), 1);
        assert_eq!(resp.tool_calls[0].name, "file_read");
        assert_eq!(resp.tool_calls[0].arguments, json!({"path": "src/a.rs"}));
        assert_eq!((resp.usage.tokens_in, resp.usage.tokens_out), (42, 9));
        assert_eq!(resp.finish_reason.as_deref(), Some("stop"));
        assert_eq!(stub.requests_to("/api/chat")[0].body["stream"], true);
    })
    .await;
}

#[tokio::test]
async fn openai_tool_call_arguments_in_pieces_are_joined_and_usage_read() {
    bounded(async {
        let stub = Stub::start().await;
        // vLLM's framing: role chunk, a tool call whose arguments arrive in pieces, the finish
        // chunk, a usage chunk with no choices (stream_options.include_usage), [DONE].
        stub.script(
            "/v1/chat/completions",
            vec![sse(&[
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-1","type":"function","index":0,"function":{"name":"file_grep","arguments":""}}]},"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pattern\": \"ev"}}]},"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"al(\"}"}}]},"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":14,"total_tokens":134}}"#,
                "[DONE]",
            ])],
        );
        let resp = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .chat(&request(256))
            .await
            .unwrap();
        assert_eq!(resp.tool_calls.len(), 1);
        assert_eq!(resp.tool_calls[0].id, "chatcmpl-tool-1");
        assert_eq!(resp.tool_calls[0].arguments, json!({"pattern": "eval("}));
        assert_eq!((resp.usage.tokens_in, resp.usage.tokens_out), (120, 14));
        assert_eq!(resp.finish_reason.as_deref(), Some("tool_calls"));
        let body = &stub.requests_to("/v1/chat/completions")[0].body;
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
    })
    .await;
}

#[tokio::test]
async fn llama_server_content_without_usage_is_estimated() {
    bounded(async {
        let stub = Stub::start().await;
        // llama-server: content deltas, a finish chunk, no usage chunk, [DONE].
        stub.script(
            "/v1/chat/completions",
            vec![sse(&[
                r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"{\"findings\""}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}"#,
                r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":": []}"}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}"#,
                r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}"#,
                "[DONE]",
            ])],
        );
        let resp = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .chat(&request(256))
            .await
            .unwrap();
        assert_eq!(resp.content, "{\"findings\": []}");
        assert!(resp.usage.tokens_in > 0 && resp.usage.tokens_out > 0);
        assert_eq!(resp.finish_reason.as_deref(), Some("stop"));
    })
    .await;
}

#[tokio::test]
async fn a_stream_cut_short_is_a_malformed_response() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![ndjson(&[ollama_piece("{\"findings\": [")])],
        );
        let err = backend(BackendKind::Ollama, stub.base())
            .chat(&request(256))
            .await
            .unwrap_err();
        assert_eq!(err.class(), "malformed_response", "{err}");
        assert!(err.to_string().contains("ended before"), "{err}");

        stub.script(
            "/v1/chat/completions",
            vec![sse(&[
                r#"{"choices":[{"index":0,"delta":{"content":"{\"find"},"finish_reason":null}]}"#,
            ])],
        );
        let err = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .chat(&request(256))
            .await
            .unwrap_err();
        assert_eq!(err.class(), "malformed_response", "{err}");
    })
    .await;
}

#[tokio::test]
async fn errors_mid_stream_keep_their_meaning() {
    bounded(async {
        let stub = Stub::start().await;
        // vLLM reports an oversized request inside the stream in its own words.
        stub.script(
            "/v1/chat/completions",
            vec![sse(&[
                r#"{"error":{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4800 in the messages, 200 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}"#,
                "[DONE]",
            ])],
        );
        let err = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .chat(&request(256))
            .await
            .unwrap_err();
        assert!(
            matches!(err, LlmError::ContextOverflow { n_ctx: Some(4096), .. }),
            "{err:?}"
        );
        // Ollama: a model that fails mid-answer sends an error line.
        stub.script(
            "/api/chat",
            vec![ndjson(&[
                ollama_piece("{\"fi"),
                json!({"error": "an error was encountered while running the model: unexpected EOF"}),
            ])],
        );
        let err = backend(BackendKind::Ollama, stub.base())
            .chat(&request(256))
            .await
            .unwrap_err();
        assert_eq!(err.class(), "malformed_response", "{err}");
        assert!(err.to_string().contains("unexpected EOF"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn a_server_that_ignores_stream_is_read_whole() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/v1/chat/completions",
            vec![Reply::ok(json!({
                "id": "c", "object": "chat.completion", "model": "qwen",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }))],
        );
        let resp = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .chat(&request(256))
            .await
            .unwrap();
        assert_eq!(resp.content, "{}");
        assert_eq!(resp.usage.tokens_in, 3);
    })
    .await;
}

#[tokio::test]
async fn stream_false_sends_one_request_read_whole() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![Reply::ok(json!({
                "model": "m", "message": {"role": "assistant", "content": "{}"},
                "done": true, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1,
            }))],
        );
        let mut cfg = BackendConfig::new(BackendKind::Ollama, stub.base());
        cfg.stream = false;
        let resp = backend_from_config(&cfg)
            .unwrap()
            .chat(&request(256))
            .await
            .unwrap();
        assert_eq!(resp.content, "{}");
        assert_eq!(stub.requests_to("/api/chat")[0].body["stream"], false);
        // The TOML form: `stream = false` in a [[backends]] table; absent means streamed.
        let parsed: BackendConfig =
            serde_json::from_value(json!({"kind": "ollama", "url": "http://h"})).unwrap();
        assert!(parsed.stream);
    })
    .await;
}

#[tokio::test]
async fn a_looping_answer_is_cut_long_before_the_bound_and_not_retried() {
    bounded(async {
        let stub = Stub::start().await;
        // 2,000 tokens' worth of one line: the bound would stop it at 2,048.
        let mut lines = vec![ollama_piece("{\"findings\": [\n")];
        for _ in 0..1000 {
            lines.push(ollama_piece("The input is not validated.\n"));
        }
        lines.push(ollama_done("length"));
        stub.script("/api/chat", vec![ndjson(&lines)]);
        let client = LlmClient::new(
            backend(BackendKind::Ollama, stub.base()),
            1,
            quick_retries(3),
        );
        let err = client.chat(&request(2048)).await.unwrap_err();
        let LlmError::Degenerate { reason, .. } = &err else {
            panic!("expected a cut, got {err:?}");
        };
        assert!(
            reason.contains("the line `The input is not validated.`"),
            "{reason}"
        );
        let tokens: u32 = reason
            .split("cut after about ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no token count in {reason}"));
        assert!(tokens < 2048 / 4, "cut only after {tokens} tokens");
        assert_eq!(err.class(), "degenerate_output");
        // The same prompt would loop again: the client leaves the retry to the task.
        assert_eq!(stub.requests_to("/api/chat").len(), 1);
    })
    .await;
}
