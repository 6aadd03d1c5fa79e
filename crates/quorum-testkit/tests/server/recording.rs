//! What the server records of each request and hands to subscribers: what the client sent, in
//! order, exactly once per reply, including bodies that are not JSON.

use super::*;

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
