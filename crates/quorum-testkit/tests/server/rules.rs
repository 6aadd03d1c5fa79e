//! Which rule answers: text, system, last-user, turn, API and tool conditions; replies handed
//! out in order with the last repeating; `times`, the fallback, and no answer at all; swapping
//! a script; scripts refused at start.

use super::*;

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
