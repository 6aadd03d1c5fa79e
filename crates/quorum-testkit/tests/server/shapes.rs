//! Both API shapes as a client reads them: text, tool calls and usage; unknown models; the
//! default and any model; JSON replies as compact content.

use super::*;

#[tokio::test]
async fn ollama_shapes_text_tool_calls_and_usage() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("tools")
                        .when_all(["use tools"])
                        .reply(Reply::tools([
                            ("file_read", json!({"path": "a.rs"})),
                            ("grep", json!({"pattern": "unsafe"})),
                        ])),
                )
                .fallback(Reply::text("12345678")),
        )
        .await
        .unwrap();

        // 17 characters of prompt: 17 / 4 = 4 tokens; 8 characters of reply: 2 tokens.
        let v = ollama(&server, user("seventeen chars!!")).await.json();
        assert_eq!(v["message"]["role"], "assistant");
        assert_eq!(v["message"]["content"], "12345678");
        assert_eq!(v["done"], true);
        assert_eq!(v["done_reason"], "stop");
        assert_eq!(v["prompt_eval_count"], 4);
        assert_eq!(v["eval_count"], 2);
        assert_eq!(v["model"], "scripted-model");
        assert!(v["message"].get("tool_calls").is_none());

        // Tiny prompts and replies still report at least one token each.
        let v = ollama(&server, user("x")).await.json();
        assert_eq!(v["prompt_eval_count"], 1);

        let v = ollama(&server, user("please use tools")).await.json();
        let calls = v["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0]["function"]["name"], "file_read");
        assert_eq!(calls[0]["function"]["arguments"], json!({"path": "a.rs"}));
        assert_eq!(calls[1]["function"]["arguments"]["pattern"], "unsafe");
        assert_eq!(v["message"]["content"], "");
        assert!(v["eval_count"].as_u64().unwrap() >= 1);
    })
    .await;
}

#[tokio::test]
async fn openai_shapes_text_tool_calls_and_usage() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("tools")
                        .when_all(["use tools"])
                        .reply(Reply::tools([
                            ("file_read", json!({"path": "a.rs"})),
                            ("broken", json!("{\"path\": ")),
                        ])),
                )
                .fallback(Reply::text("12345678")),
        )
        .await
        .unwrap();

        let v = openai(&server, user("seventeen chars!!")).await.json();
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["choices"][0]["message"]["content"], "12345678");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6})
        );

        let v = openai(&server, user("please use tools")).await.json();
        let message = &v["choices"][0]["message"];
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert!(message["content"].is_null());
        let calls = message["tool_calls"].as_array().unwrap();
        assert_eq!(calls[0]["type"], "function");
        assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
        assert_ne!(calls[0]["id"], calls[1]["id"]);
        assert_eq!(calls[0]["function"]["name"], "file_read");
        let args: Value =
            serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"path": "a.rs"}));
        // A string argument goes out verbatim, so scripts can send malformed arguments.
        assert_eq!(calls[1]["function"]["arguments"], "{\"path\": ");
        assert!(v["usage"]["completion_tokens"].as_u64().unwrap() >= 1);
    })
    .await;
}

#[tokio::test]
async fn unknown_models_get_404_in_each_api_shape() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .models(["qwen2.5-coder:7b", "llama3"])
                .fallback(Reply::text("ok")),
        )
        .await
        .unwrap();
        let ask = |model: &str| json!({"model": model, "messages": user("x")});

        let answer = post(format!("{}/api/chat", server.ollama_url()), &ask("missing")).await;
        assert_eq!(answer.status, 404);
        assert!(answer.json()["error"].as_str().unwrap().contains("missing"));
        let answer = post(
            format!("{}/chat/completions", server.openai_url()),
            &ask("missing"),
        )
        .await;
        assert_eq!(answer.status, 404);
        assert_eq!(answer.json()["error"]["code"], "model_not_found");

        let answer = post(
            format!("{}/api/chat", server.ollama_url()),
            &ask("llama3:latest"),
        )
        .await;
        assert_eq!(answer.content(), "ok");
        let answer = post(
            format!("{}/chat/completions", server.openai_url()),
            &ask("qwen2.5-coder:7b"),
        )
        .await;
        assert_eq!(answer.content(), "ok");
        assert_eq!(server.requests()[0].model, "missing");

        let show = |model: &str| {
            let url = format!("{}/api/show", server.ollama_url());
            let body = json!({"model": model});
            async move { post(url, &body).await }
        };
        let answer = show("llama3").await;
        assert_eq!(answer.status, 200);
        let v = answer.json();
        assert_eq!(v["details"]["family"], "scripted");
        assert_eq!(v["details"]["parameter_size"], "7B");
        assert_eq!(v["details"]["quantization_level"], "Q4_K_M");
        assert_eq!(v["model_info"]["scripted.context_length"], 8192);
        assert_eq!(v["capabilities"], json!(["completion", "tools"]));
        let answer = show("missing").await;
        assert_eq!(answer.status, 404);
        assert_eq!(answer.json(), json!({"error": "model not found"}));

        let tags = get(format!("{}/api/tags", server.ollama_url()))
            .await
            .json();
        let names: Vec<&str> = tags["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["qwen2.5-coder:7b", "llama3"]);
        let models = get(format!("{}/models", server.openai_url())).await.json();
        assert_eq!(models["object"], "list");
        assert_eq!(models["data"][1]["id"], "llama3");
        let version = get(format!("{}/api/version", server.ollama_url()))
            .await
            .json();
        assert!(version["version"].is_string());
    })
    .await;
}

#[tokio::test]
async fn default_model_and_any_model() {
    bounded(async {
        let strict = ScriptedServer::start(Script::new().fallback(Reply::text("ok")))
            .await
            .unwrap();
        let tags = get(format!("{}/api/tags", strict.ollama_url()))
            .await
            .json();
        assert_eq!(tags["models"][0]["name"], "scripted-model");
        assert_eq!(ollama(&strict, user("x")).await.content(), "ok");

        let open = ScriptedServer::start(Script::new().any_model().fallback(Reply::text("ok")))
            .await
            .unwrap();
        let body = json!({"model": "whatever-you-like", "messages": user("x")});
        let answer = post(format!("{}/chat/completions", open.openai_url()), &body).await;
        assert_eq!(answer.content(), "ok");
        assert_eq!(answer.json()["model"], "whatever-you-like");
    })
    .await;
}

#[tokio::test]
async fn json_reply_is_compact_content() {
    bounded(async {
        let value = json!({"findings": [{"title": "x", "severity": "P1"}]});
        let server = ScriptedServer::start(Script::new().fallback(Reply::json(&value)))
            .await
            .unwrap();
        let content = ollama(&server, user("x")).await.content();
        assert_eq!(content, r#"{"findings":[{"severity":"P1","title":"x"}]}"#);
    })
    .await;
}
