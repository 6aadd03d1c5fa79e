//! The scripted server over real HTTP: rule matching, reply sequences, both API shapes, faults and
//! recording, as a backend client would see them.

use std::future::Future;
use std::time::Duration;

use quorum_testkit::{Api, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};

/// Every test is bounded so a regression that hangs fails instead of stalling the suite.
async fn bounded<F: Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("test timed out");
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not json ({e}): {}", self.body))
    }

    /// The assistant content in either API's shape.
    fn content(&self) -> String {
        let v = self.json();
        v.pointer("/message/content")
            .or_else(|| v.pointer("/choices/0/message/content"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no content in {v}"))
            .to_string()
    }
}

async fn post(url: String, body: &Value) -> Answer {
    let resp = client().post(url).json(body).send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap(),
    }
}

async fn get(url: String) -> Answer {
    let resp = client().get(url).send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap(),
    }
}

async fn ollama(server: &ScriptedServer, messages: Value) -> Answer {
    let body = json!({"model": "scripted-model", "stream": false, "messages": messages});
    post(format!("{}/api/chat", server.ollama_url()), &body).await
}

async fn openai(server: &ScriptedServer, messages: Value) -> Answer {
    let body = json!({"model": "scripted-model", "messages": messages});
    post(format!("{}/chat/completions", server.openai_url()), &body).await
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[tokio::test]
async fn text_rules_match_on_all_any_none_and_regex() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("all")
                        .when_all(["alpha", "beta"])
                        .when_none(["skip"])
                        .reply(Reply::text("all")),
                )
                .rule(
                    Rule::new("any")
                        .when_any(["gamma", "delta"])
                        .reply(Reply::text("any")),
                )
                .rule(
                    Rule::new("regex")
                        .when_regex(r"file_\d+\.rs")
                        .reply(Reply::text("regex")),
                )
                .fallback(Reply::text("fallback")),
        )
        .await
        .unwrap();

        let cases = [
            ("alpha and beta", "all"),
            ("alpha only", "fallback"),
            ("alpha beta but skip", "fallback"),
            ("then delta", "any"),
            ("see file_12.rs", "regex"),
            ("see file_x.rs", "fallback"),
        ];
        for (prompt, expected) in cases {
            assert_eq!(
                ollama(&server, user(prompt)).await.content(),
                expected,
                "{prompt}"
            );
        }
        let rules: Vec<Option<String>> = server.requests().into_iter().map(|r| r.rule).collect();
        assert_eq!(
            rules,
            vec![
                Some("all".into()),
                None,
                None,
                Some("any".into()),
                Some("regex".into()),
                None
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn system_last_user_and_turn_script_a_tool_loop() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("answer-after-tool")
                        .when_system(["security reviewer"])
                        .when_last_user(["RESULT: 42"])
                        .turn(1)
                        .reply(Reply::text("done")),
                )
                .rule(
                    Rule::new("first-call")
                        .when_system(["security reviewer"])
                        .turn(0)
                        .reply(Reply::tool("file_read", json!({"path": "src/a.rs"}))),
                ),
        )
        .await
        .unwrap();

        let first = ollama(
            &server,
            json!([
                {"role": "system", "content": "You are a security reviewer."},
                {"role": "user", "content": "Review src/a.rs"},
            ]),
        )
        .await;
        assert_eq!(first.status, 200);
        assert_eq!(
            first.json()["message"]["tool_calls"][0]["function"]["name"],
            "file_read"
        );

        let second = ollama(
            &server,
            json!([
                {"role": "system", "content": "You are a security reviewer."},
                {"role": "user", "content": "Review src/a.rs"},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "file_read", "arguments": {"path": "src/a.rs"}}}]},
                {"role": "tool", "content": "RESULT: 42"},
            ]),
        )
        .await;
        assert_eq!(second.content(), "done");

        // The system substring is required: the same conversation under another persona misses.
        let other = ollama(
            &server,
            json!([
                {"role": "system", "content": "You are a style reviewer."},
                {"role": "user", "content": "RESULT: 42"},
            ]),
        )
        .await;
        assert_eq!(other.status, 500);

        let recorded = server.requests();
        assert_eq!(recorded[0].rule.as_deref(), Some("first-call"));
        assert_eq!(recorded[1].rule.as_deref(), Some("answer-after-tool"));
        assert_eq!(recorded[1].turn, 1);
        assert_eq!(recorded[1].last_user, "RESULT: 42");
        assert_eq!(recorded[2].rule, None);
    })
    .await;
}

#[tokio::test]
async fn api_and_has_tools_conditions() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("openai-tools")
                        .when_api(Api::OpenAi)
                        .when_has_tools(true)
                        .reply(Reply::text("openai with tools")),
                )
                .rule(
                    Rule::new("openai")
                        .when_api(Api::OpenAi)
                        .reply(Reply::text("openai")),
                )
                .rule(
                    Rule::new("ollama-no-tools")
                        .when_has_tools(false)
                        .reply(Reply::text("ollama without tools")),
                )
                .fallback(Reply::text("other")),
        )
        .await
        .unwrap();

        let tools = json!([{"type": "function", "function": {"name": "grep", "parameters": {}}}]);
        let with_tools = |api_body: Value| {
            let mut body = api_body;
            body["tools"] = tools.clone();
            body
        };

        assert_eq!(openai(&server, user("x")).await.content(), "openai");
        let body = with_tools(json!({"model": "scripted-model", "messages": user("x")}));
        let answer = post(format!("{}/chat/completions", server.openai_url()), &body).await;
        assert_eq!(answer.content(), "openai with tools");

        assert_eq!(
            ollama(&server, user("x")).await.content(),
            "ollama without tools"
        );
        let body = with_tools(json!({"model": "scripted-model", "messages": user("x")}));
        let answer = post(format!("{}/api/chat", server.ollama_url()), &body).await;
        assert_eq!(answer.content(), "other");

        let recorded = server.requests();
        assert_eq!(recorded[1].tool_names, vec!["grep".to_string()]);
        assert!(recorded[1].has_tools);
        assert_eq!(recorded[0].api, Api::OpenAi);
        assert_eq!(recorded[2].api, Api::Ollama);
    })
    .await;
}

#[tokio::test]
async fn replies_are_consumed_in_order_and_the_last_repeats() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().rule(
                Rule::new("seq")
                    .reply(Reply::text("one"))
                    .then(Reply::text("two"))
                    .then(Reply::text("three")),
            ),
        )
        .await
        .unwrap();
        let mut got = Vec::new();
        for _ in 0..5 {
            got.push(ollama(&server, user("hi")).await.content());
        }
        assert_eq!(got, ["one", "two", "three", "three", "three"]);
    })
    .await;
}

#[tokio::test]
async fn times_exhausts_a_rule_then_later_rules_and_fallback_apply() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(Rule::new("twice").reply(Reply::text("a")).times(2))
                .rule(
                    Rule::new("once")
                        .when_all(["x"])
                        .reply(Reply::text("b"))
                        .times(1),
                )
                .fallback(Reply::text("c")),
        )
        .await
        .unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(ollama(&server, user("x")).await.content());
        }
        assert_eq!(got, ["a", "a", "b", "c"]);
    })
    .await;
}

#[tokio::test]
async fn no_rule_and_no_fallback_is_a_loud_500_still_recorded() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().rule(Rule::new("r").when_all(["needle"]).reply(Reply::text("ok"))),
        )
        .await
        .unwrap();
        let answer = ollama(&server, user("haystack")).await;
        assert_eq!(answer.status, 500);
        assert_eq!(answer.body, "no rule matched");
        let answer = openai(&server, user("haystack")).await;
        assert_eq!(answer.status, 500);
        assert_eq!(answer.body, "no rule matched");

        let recorded = server.requests();
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[0].text, "haystack");
        assert_eq!(recorded[0].rule, None);
    })
    .await;
}

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
async fn status_replies_carry_retry_after_and_api_shaped_bodies() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("limited")
                        .when_all(["busy"])
                        .reply(Reply::rate_limited(7))
                        .then(Reply::text("ok now")),
                )
                .rule(
                    Rule::new("custom")
                        .when_all(["custom"])
                        .reply(Reply::status_body(503, "overloaded, go away")),
                )
                .fallback(Reply::status(500)),
        )
        .await
        .unwrap();

        let answer = openai(&server, user("busy")).await;
        assert_eq!(answer.status, 429);
        assert_eq!(answer.headers["retry-after"], "7");
        assert_eq!(answer.json()["error"]["type"], "rate_limit_error");
        assert_eq!(openai(&server, user("busy")).await.content(), "ok now");

        let answer = ollama(&server, user("custom")).await;
        assert_eq!(answer.status, 503);
        assert_eq!(answer.body, "overloaded, go away");
        assert!(answer.headers.get("retry-after").is_none());

        let answer = ollama(&server, user("other")).await;
        assert_eq!(answer.status, 500);
        assert!(answer.json()["error"].as_str().unwrap().contains("500"));
    })
    .await;
}

#[tokio::test]
async fn delay_then_answers_with_the_inner_reply() {
    bounded(async {
        let server = ScriptedServer::start(Script::new().rule(
            Rule::new("slow").reply(Reply::delay(30, Reply::delay(20, Reply::text("late")))),
        ))
        .await
        .unwrap();
        let answer = ollama(&server, user("x")).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.content(), "late");
    })
    .await;
}

#[tokio::test]
async fn held_replies_wait_for_release_then_answer() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("held")
                        .when_all(["wait"])
                        .reply(Reply::held(Reply::text("released"))),
                )
                .fallback(Reply::text("fine")),
        )
        .await
        .unwrap();
        let base = server.ollama_url();
        let held = tokio::spawn({
            let body = json!({"model": "scripted-model", "messages": user("wait for it")});
            let url = format!("{base}/api/chat");
            async move { post(url, &body).await }
        });
        server.wait_for_requests(1).await;
        assert_eq!(ollama(&server, user("other")).await.content(), "fine");
        assert!(!held.is_finished(), "a held reply answered before release");
        server.release();
        let answer = held.await.unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.json()["message"]["content"], "released");
        // Once released, later held replies answer at once.
        assert_eq!(
            ollama(&server, user("wait again")).await.content(),
            "released"
        );
    })
    .await;
}

#[tokio::test]
async fn hang_blocks_only_its_own_request_and_shutdown_releases_it() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(Rule::new("hang").when_all(["hang"]).reply(Reply::hang()))
                .rule(
                    Rule::new("slow")
                        .when_all(["slow"])
                        .reply(Reply::delay(600_000, Reply::text("never"))),
                )
                .fallback(Reply::text("fine")),
        )
        .await
        .unwrap();
        let base = server.ollama_url();
        let hanging = tokio::spawn({
            let body = json!({"model": "scripted-model", "messages": user("please hang")});
            let url = format!("{base}/api/chat");
            async move { post(url, &body).await }
        });
        let slow = tokio::spawn({
            let body = json!({"model": "scripted-model", "messages": user("slow")});
            let url = format!("{base}/api/chat");
            async move { post(url, &body).await }
        });
        let seen = server.wait_for_requests(2).await;
        assert_eq!(seen.len(), 2);

        // Other requests are served while two are parked.
        assert_eq!(ollama(&server, user("normal")).await.content(), "fine");
        assert!(!hanging.is_finished());

        let addr = server.addr();
        server.shutdown();
        let released = hanging.await.unwrap();
        assert_eq!(released.status, 503);
        let released = slow.await.unwrap();
        assert_eq!(released.status, 503);

        // The port stops accepting once every connection is gone.
        let refused = loop {
            match tokio::net::TcpStream::connect(addr).await {
                Err(_) => break true,
                Ok(_) => tokio::task::yield_now().await,
            }
        };
        assert!(refused);
    })
    .await;
}

#[tokio::test]
async fn truncated_reply_is_a_200_with_broken_json() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().rule(Rule::new("cut").reply(Reply::truncated("a fine answer"))),
        )
        .await
        .unwrap();
        for answer in [
            ollama(&server, user("x")).await,
            openai(&server, user("x")).await,
        ] {
            assert_eq!(answer.status, 200);
            assert_eq!(answer.headers["content-type"], "application/json");
            assert!(answer.body.starts_with('{'));
            assert!(serde_json::from_str::<Value>(&answer.body).is_err());
        }
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
async fn requests_record_what_the_client_sent() {
    bounded(async {
        let server = ScriptedServer::start(Script::new().fallback(Reply::text("ok")))
            .await
            .unwrap();

        let body = json!({
            "model": "scripted-model",
            "stream": false,
            "format": {"type": "object"},
            "options": {"num_predict": 512, "temperature": 0},
            "tools": [{"type": "function", "function": {"name": "file_read"}}, {"type": "function", "function": {"name": "grep"}}],
            "messages": [
                {"role": "system", "content": "SYSTEM ONE"},
                {"role": "user", "content": "first question"},
                {"role": "assistant", "content": "first answer"},
                {"role": "user", "content": "second question"},
            ],
        });
        post(format!("{}/api/chat", server.ollama_url()), &body).await;

        let body = json!({
            "model": "scripted-model",
            "max_tokens": 64,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
            "messages": [
                {"role": "system", "content": "SYS A"},
                {"role": "developer", "content": "SYS B"},
                {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_0", "content": "grep output"},
            ],
        });
        let resp = client()
            .post(format!("{}/chat/completions", server.openai_url()))
            .bearer_auth("sk-test")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);

        let body = json!({
            "model": "scripted-model",
            "max_completion_tokens": 9,
            "response_format": {"type": "text"},
            "messages": user("plain"),
        });
        post(format!("{}/chat/completions", server.openai_url()), &body).await;

        let recorded = server.requests();
        assert_eq!(recorded.len(), 3);
        let r = &recorded[0];
        assert_eq!(r.seq, 0);
        assert_eq!(r.api, Api::Ollama);
        assert_eq!(r.path, "/api/chat");
        assert_eq!(r.model, "scripted-model");
        assert_eq!(
            r.text,
            "SYSTEM ONE\nfirst question\nfirst answer\nsecond question"
        );
        assert_eq!(r.system, "SYSTEM ONE");
        assert_eq!(r.last_user, "second question");
        assert_eq!(r.turn, 1);
        assert!(r.json_schema);
        assert_eq!(r.max_tokens, Some(512));
        assert_eq!(r.tool_names, ["file_read", "grep"]);
        assert_eq!(r.stream, Some(false));
        assert_eq!(r.authorization, None);
        assert_eq!(r.body["options"]["temperature"], 0);
        assert_eq!(r.rule, None);

        let r = &recorded[1];
        assert_eq!(r.seq, 1);
        assert_eq!(r.api, Api::OpenAi);
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.system, "SYS A\nSYS B");
        assert_eq!(r.text, "SYS A\nSYS B\npart one\npart two\ngrep output");
        assert_eq!(r.last_user, "grep output");
        assert_eq!(r.turn, 1);
        assert!(r.json_schema);
        assert_eq!(r.max_tokens, Some(64));
        assert!(!r.has_tools);
        assert_eq!(r.stream, None);
        assert_eq!(r.authorization.as_deref(), Some("Bearer sk-test"));

        let r = &recorded[2];
        assert!(!r.json_schema);
        assert_eq!(r.max_tokens, Some(9));
        assert_eq!(r.turn, 0);
    })
    .await;
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_400_and_recorded() {
    bounded(async {
        let server = ScriptedServer::start(Script::new().fallback(Reply::text("ok")))
            .await
            .unwrap();
        let resp = client()
            .post(format!("{}/api/chat", server.ollama_url()))
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let recorded = server.requests();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].body, json!("{not json"));
    })
    .await;
}

#[tokio::test]
async fn echo_reports_what_was_received() {
    bounded(async {
        let server =
            ScriptedServer::start(Script::new().rule(Rule::new("echo").reply(Reply::echo())))
                .await
                .unwrap();
        let content = openai(
            &server,
            json!([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]),
        )
        .await
        .content();
        let summary: Value = serde_json::from_str(&content).unwrap();
        assert_eq!(summary["rule"], "echo");
        assert_eq!(summary["api"], "openai");
        assert_eq!(summary["system"], "S");
        assert_eq!(summary["last_user"], "U");
        assert_eq!(summary["text"], "S\nU");
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

#[tokio::test]
async fn concurrent_requests_consume_each_reply_exactly_once() {
    bounded(async {
        let mut rule = Rule::new("seq").times(10);
        for i in 0..10 {
            rule = rule.reply(Reply::text(format!("r{i}")));
        }
        let server = ScriptedServer::start(Script::new().rule(rule).fallback(Reply::text("rest")))
            .await
            .unwrap();
        let url = format!("{}/api/chat", server.ollama_url());
        let mut tasks = Vec::new();
        for _ in 0..25 {
            let url = url.clone();
            tasks.push(tokio::spawn(async move {
                let body = json!({"model": "scripted-model", "messages": user("go")});
                post(url, &body).await.content()
            }));
        }
        let mut got = Vec::new();
        for task in tasks {
            got.push(task.await.unwrap());
        }
        got.sort();
        let mut expected: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
        expected.extend(std::iter::repeat_n("rest".to_string(), 15));
        expected.sort();
        assert_eq!(got, expected);

        let recorded = server.requests();
        let seqs: Vec<u64> = recorded.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (0..25).collect::<Vec<u64>>());
        assert_eq!(
            recorded
                .iter()
                .filter(|r| r.rule.as_deref() == Some("seq"))
                .count(),
            10
        );
    })
    .await;
}

#[tokio::test]
async fn set_script_swaps_rules_and_restarts_counters() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().rule(Rule::new("old").reply(Reply::text("old")).times(1)),
        )
        .await
        .unwrap();
        assert_eq!(ollama(&server, user("x")).await.content(), "old");
        assert_eq!(ollama(&server, user("x")).await.status, 500);

        server.set_script(Script::new().rule(Rule::new("new").reply(Reply::text("new")).times(1)));
        assert_eq!(ollama(&server, user("x")).await.content(), "new");
        server
            .set_script(Script::new().rule(Rule::new("new").reply(Reply::text("again")).times(1)));
        assert_eq!(ollama(&server, user("x")).await.content(), "again");
        assert_eq!(server.requests().len(), 4);
    })
    .await;
}

#[tokio::test]
async fn subscribe_feeds_requests_in_order() {
    bounded(async {
        let server = ScriptedServer::start(Script::new().fallback(Reply::text("ok")))
            .await
            .unwrap();
        let mut feed = server.subscribe();
        ollama(&server, user("first")).await;
        openai(&server, user("second")).await;
        assert_eq!(feed.recv().await.unwrap().text, "first");
        assert_eq!(feed.recv().await.unwrap().text, "second");
        server.shutdown();
        assert!(feed.recv().await.is_none());
    })
    .await;
}

#[tokio::test]
async fn scripts_with_authoring_errors_are_refused_at_start() {
    bounded(async {
        let err = ScriptedServer::start(Script::new().rule(Rule::new("empty")))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("\"empty\""), "{err}");

        let err = ScriptedServer::start(
            Script::new().rule(
                Rule::new("bad-regex")
                    .when_regex("(")
                    .reply(Reply::text("x")),
            ),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("bad-regex"), "{err}");

        let err = ScriptedServer::start(Script::new().fallback(Reply::delay(1, Reply::status(42))))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("42"), "{err}");
    })
    .await;
}
