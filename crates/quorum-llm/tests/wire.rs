//! Wire-format tests for both backends against a local stub: what is sent, and how replies,
//! including tool calls, null content, missing usage and malformed bodies, are read.

mod common;

use common::{bounded, Reply, Stub};
use quorum_llm::{
    backend_from_config, estimate_tokens, BackendConfig, BackendKind, ChatBackend, ChatMessage,
    ChatRequest, LlmError, ToolCall, ToolSpec,
};
use serde_json::{json, Value};

fn backend(kind: BackendKind, url: String) -> std::sync::Arc<dyn ChatBackend> {
    backend_from_config(&BackendConfig::new(kind, url)).unwrap()
}

fn full_request() -> ChatRequest {
    ChatRequest {
        model: "qwen2.5-coder:0.5b".into(),
        messages: vec![
            ChatMessage::system("you review code"),
            ChatMessage::user("review src/lib.rs"),
            ChatMessage::assistant_with_tool_calls(
                "",
                vec![ToolCall {
                    id: "call_7".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "src/lib.rs"}),
                }],
            ),
            ChatMessage::tool_result("call_7", "read_file", "fn main() {}"),
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "read a file from the pack".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        json_schema: Some(json!({"type": "object", "properties": {"findings": {"type": "array"}}})),
        max_tokens: 512,
        temperature: 0.25,
        num_ctx: Some(8192),
    }
}

fn ollama_reply(content: &str) -> Value {
    json!({
        "model": "qwen2.5-coder:0.5b",
        "message": {"role": "assistant", "content": content},
        "done": true,
        "done_reason": "stop",
        "prompt_eval_count": 42,
        "eval_count": 7,
    })
}

fn openai_reply(content: Value) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "qwen",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
    })
}

#[tokio::test]
async fn ollama_request_carries_bounds_tools_schema_and_tool_messages() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script("/api/chat", vec![Reply::ok(ollama_reply("ok"))]);
        let b = backend(BackendKind::Ollama, format!("{}/", stub.base()));
        let req = full_request();
        b.chat(&req).await.unwrap();

        let sent = stub.requests_to("/api/chat");
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].method, "POST");
        let body = &sent[0].body;
        assert_eq!(body["model"], "qwen2.5-coder:0.5b");
        // Streamed, so a looping answer can be cut (a JSON answer is still read: tests/stream.rs).
        assert_eq!(body["stream"], true);
        assert_eq!(body["options"]["num_predict"], 512);
        assert_eq!(body["options"]["temperature"], 0.25);
        assert_eq!(body["options"]["num_ctx"], 8192);
        assert_eq!(body["format"], req.json_schema.clone().unwrap());
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "read_file");
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            req.tools[0].parameters
        );
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 4);
        assert_eq!(
            msgs[0],
            json!({"role": "system", "content": "you review code"})
        );
        assert_eq!(
            msgs[2]["tool_calls"][0]["function"],
            json!({"name": "read_file", "arguments": {"path": "src/lib.rs"}})
        );
        assert_eq!(
            msgs[3],
            json!({"role": "tool", "content": "fn main() {}", "tool_name": "read_file"})
        );
    })
    .await;
}

#[tokio::test]
async fn ollama_minimal_request_still_bounds_output() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script("/api/chat", vec![Reply::ok(ollama_reply("ok"))]);
        let b = backend(BackendKind::Ollama, stub.base());
        b.chat(&ChatRequest::new("m", vec![ChatMessage::user("hi")], 64))
            .await
            .unwrap();
        let body = &stub.requests_to("/api/chat")[0].body;
        assert_eq!(body["options"]["num_predict"], 64);
        assert!(body["options"].get("num_ctx").is_none());
        assert!(body.get("format").is_none());
        assert!(body.get("tools").is_none());
    })
    .await;
}

#[tokio::test]
async fn ollama_tool_calls_with_object_and_string_arguments() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![Reply::ok(json!({
                "model": "llama3.1:8b",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"function": {"name": "read_file", "arguments": {"path": "a.rs"}}},
                        {"function": {"name": "grep", "arguments": "{\"pattern\": \"unsafe\"}"}},
                        {"function": {"name": "grep", "arguments": "pattern=unsafe"}},
                    ],
                },
                "done_reason": "stop",
                "prompt_eval_count": 100,
                "eval_count": 20,
            }))],
        );
        let b = backend(BackendKind::Ollama, stub.base());
        let resp = b
            .chat(&ChatRequest::new(
                "llama3.1:8b",
                vec![ChatMessage::user("go")],
                64,
            ))
            .await
            .unwrap();
        assert_eq!(resp.content, "");
        assert_eq!(resp.model, "llama3.1:8b");
        assert_eq!(resp.finish_reason.as_deref(), Some("stop"));
        assert_eq!((resp.usage.tokens_in, resp.usage.tokens_out), (100, 20));
        assert_eq!(resp.attempts, 1);
        let calls = &resp.tool_calls;
        assert_eq!(calls.len(), 3);
        assert_eq!(
            calls[0],
            ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                arguments: json!({"path": "a.rs"}),
            }
        );
        assert_eq!(calls[1].id, "call_1");
        assert_eq!(calls[1].arguments, json!({"pattern": "unsafe"}));
        assert_eq!(calls[2].arguments, json!("pattern=unsafe"));
    })
    .await;
}

#[tokio::test]
async fn ollama_missing_usage_is_estimated_from_characters() {
    bounded(async {
        let stub = Stub::start().await;
        let answer = "x".repeat(40);
        stub.script(
            "/api/chat",
            vec![Reply::ok(
                json!({"message": {"role": "assistant", "content": answer}}),
            )],
        );
        let b = backend(BackendKind::Ollama, stub.base());
        let prompt = "y".repeat(101);
        let resp = b
            .chat(&ChatRequest::new("m", vec![ChatMessage::user(prompt)], 64))
            .await
            .unwrap();
        assert_eq!(resp.usage.tokens_in, estimate_tokens(101));
        assert_eq!(resp.usage.tokens_in, 26);
        assert_eq!(resp.usage.tokens_out, 10);
        assert_eq!(resp.model, "m", "falls back to the requested model");
        assert_eq!(resp.finish_reason, None);
    })
    .await;
}

#[tokio::test]
async fn openai_request_carries_bounds_tools_schema_key_and_tool_messages() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script("/v1/chat/completions", vec![Reply::ok(openai_reply(json!("ok")))]);
        let var = "QUORUM_LLM_TEST_OPENAI_KEY";
        std::env::set_var(var, "sk-test-123");
        let mut cfg = BackendConfig::new(BackendKind::OpenAi, format!("{}/v1/", stub.base()));
        cfg.api_key_env = Some(var.into());
        let b = backend_from_config(&cfg).unwrap();
        let req = full_request();
        b.chat(&req).await.unwrap();

        let sent = stub.requests_to("/v1/chat/completions");
        assert_eq!(sent.len(), 1);
        assert_eq!(
            sent[0].headers.get("authorization").map(String::as_str),
            Some("Bearer sk-test-123")
        );
        let body = &sent[0].body;
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["max_tokens"], 512);
        assert_eq!(body["temperature"], 0.25);
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": req.json_schema.clone().unwrap(), "strict": false}})
        );
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["description"], "read a file from the pack");
        let msgs = body["messages"].as_array().unwrap();
        let call = &msgs[2]["tool_calls"][0];
        assert_eq!(call["id"], "call_7");
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "read_file");
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"path": "src/lib.rs"}));
        assert_eq!(
            msgs[3],
            json!({"role": "tool", "tool_call_id": "call_7", "content": "fn main() {}"})
        );
    })
    .await;
}

#[tokio::test]
async fn openai_url_without_v1_is_used_as_given_and_no_key_means_no_header() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/chat/completions",
            vec![Reply::ok(openai_reply(json!("ok")))],
        );
        let b = backend(BackendKind::OpenAi, stub.base());
        let resp = b
            .chat(&ChatRequest::new("m", vec![ChatMessage::user("hi")], 16))
            .await
            .unwrap();
        assert_eq!(resp.content, "ok");
        let sent = stub.requests_to("/chat/completions");
        assert_eq!(sent.len(), 1);
        assert!(!sent[0].headers.contains_key("authorization"));
        assert!(sent[0].body.get("response_format").is_none());
        assert!(sent[0].body.get("tools").is_none());
        assert_eq!(sent[0].body["max_tokens"], 16);
    })
    .await;
}

#[tokio::test]
async fn openai_null_content_with_tool_calls() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/v1/chat/completions",
            vec![Reply::ok(json!({
                "model": "qwen",
                "choices": [{
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": null,
                        "tool_calls": [
                            {"id": "abc", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                            {"type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":"}},
                        ],
                    },
                    "finish_reason": "tool_calls",
                }],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3},
            }))],
        );
        let b = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()));
        let resp = b
            .chat(&ChatRequest::new("qwen", vec![ChatMessage::user("go")], 64))
            .await
            .unwrap();
        assert_eq!(resp.content, "");
        assert_eq!(resp.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!((resp.usage.tokens_in, resp.usage.tokens_out), (11, 3));
        assert_eq!(resp.tool_calls.len(), 2);
        assert_eq!(resp.tool_calls[0].id, "abc");
        assert_eq!(resp.tool_calls[0].arguments, json!({"path": "a.rs"}));
        assert_eq!(resp.tool_calls[1].id, "call_1");
        assert_eq!(resp.tool_calls[1].arguments, json!("{\"pattern\":"));
    })
    .await;
}

#[tokio::test]
async fn openai_missing_usage_is_estimated() {
    bounded(async {
        let stub = Stub::start().await;
        let mut reply = openai_reply(json!("z".repeat(12)));
        reply.as_object_mut().unwrap().remove("usage");
        stub.script("/v1/chat/completions", vec![Reply::ok(reply)]);
        let b = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()));
        let resp = b
            .chat(&ChatRequest::new(
                "m",
                vec![ChatMessage::user("w".repeat(20))],
                64,
            ))
            .await
            .unwrap();
        assert_eq!((resp.usage.tokens_in, resp.usage.tokens_out), (5, 3));
    })
    .await;
}

#[tokio::test]
async fn malformed_bodies_are_decode_errors_naming_the_endpoint() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![Reply::status(200, "<html>gateway</html>")],
        );
        stub.script(
            "/v1/chat/completions",
            vec![Reply::status(
                200,
                r#"{"choices":[{"message":{"content":"trunc"#,
            )],
        );
        stub.script(
            "/empty/v1/chat/completions",
            vec![Reply::ok(json!({"choices": []}))],
        );
        let req = ChatRequest::new("m", vec![ChatMessage::user("hi")], 8);

        let err = backend(BackendKind::Ollama, stub.base())
            .chat(&req)
            .await
            .unwrap_err();
        assert_eq!(err.class(), "malformed_response");
        assert!(
            err.to_string().starts_with(&format!(
                "malformed response from {}/api/chat: ",
                stub.base()
            )),
            "{err}"
        );

        let err = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .chat(&req)
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::Decode { .. }), "{err}");
        assert_eq!(
            err.url(),
            Some(format!("{}/v1/chat/completions", stub.base()).as_str())
        );

        let err = backend(BackendKind::OpenAi, format!("{}/empty/v1", stub.base()))
            .chat(&req)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no choices"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn unknown_model_is_a_client_error_with_the_body() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/chat",
            vec![Reply::Json(404, json!({"error": "model 'nope' not found"}))],
        );
        let err = backend(BackendKind::Ollama, stub.base())
            .chat(&ChatRequest::new("nope", vec![ChatMessage::user("hi")], 8))
            .await
            .unwrap_err();
        match &err {
            LlmError::Client { status, body, url } => {
                assert_eq!(*status, 404);
                assert!(body.contains("model 'nope' not found"));
                assert_eq!(url, &format!("{}/api/chat", stub.base()));
            }
            other => panic!("expected a client error, got {other:?}"),
        }
        assert!(!err.retryable());
    })
    .await;
}

#[tokio::test]
async fn ollama_lists_models_with_show_details() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/api/tags",
            vec![Reply::ok(json!({"models": [
                {"name": "qwen2.5-coder:7b", "model": "qwen2.5-coder:7b",
                 "details": {"family": "qwen2", "parameter_size": "7.6B", "quantization_level": "Q4_K_M"}},
                {"name": "gone:latest", "details": {"family": "llama", "parameter_size": "8B", "quantization_level": "Q8_0"}},
            ]}))],
        );
        // Shows are asked in listing order: the first succeeds, the second fails and must not
        // drop the model.
        stub.script(
            "/api/show",
            vec![
                Reply::ok(json!({
                    "details": {"family": "qwen2", "parameter_size": "7.6B", "quantization_level": "Q4_K_M"},
                    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
                    "capabilities": ["completion", "tools"],
                })),
                Reply::Json(404, json!({"error": "model not found"})),
            ],
        );
        let models = backend(BackendKind::Ollama, stub.base())
            .list_models()
            .await
            .unwrap();
        assert_eq!(models.len(), 2);
        assert_eq!(models[0].name, "qwen2.5-coder:7b");
        assert_eq!(models[0].family.as_deref(), Some("qwen2"));
        assert_eq!(models[0].parameter_size.as_deref(), Some("7.6B"));
        assert_eq!(models[0].quantization.as_deref(), Some("Q4_K_M"));
        assert_eq!(models[0].context_length, Some(32768));
        assert_eq!(models[0].capabilities, vec!["completion", "tools"]);
        assert_eq!(models[1].name, "gone:latest");
        assert_eq!(models[1].quantization.as_deref(), Some("Q8_0"));
        assert_eq!(models[1].context_length, None);

        let shows = stub.requests_to("/api/show");
        assert_eq!(shows.len(), 2);
        assert_eq!(shows[0].method, "POST");
        assert_eq!(shows[0].body, json!({"model": "qwen2.5-coder:7b"}));
        assert_eq!(stub.requests_to("/api/tags")[0].method, "GET");
    })
    .await;
}

#[tokio::test]
async fn openai_lists_models() {
    bounded(async {
        let stub = Stub::start().await;
        stub.script(
            "/v1/models",
            vec![Reply::ok(json!({"object": "list", "data": [
                {"id": "Qwen/Qwen2.5-Coder-7B", "object": "model", "owned_by": "vllm", "max_model_len": 16384},
                {"id": "qwen0.5b.gguf", "object": "model", "meta": {"n_ctx_train": 32768}},
                {"id": "plain", "object": "model"},
            ]}))],
        );
        let models = backend(BackendKind::OpenAi, format!("{}/v1", stub.base()))
            .list_models()
            .await
            .unwrap();
        let names: Vec<_> = models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["Qwen/Qwen2.5-Coder-7B", "qwen0.5b.gguf", "plain"]);
        assert_eq!(models[0].context_length, Some(16384));
        assert_eq!(models[1].context_length, Some(32768));
        assert_eq!(models[2].context_length, None);
        assert_eq!(stub.requests_to("/v1/models")[0].method, "GET");
    })
    .await;
}
