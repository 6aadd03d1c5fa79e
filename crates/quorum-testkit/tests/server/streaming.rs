//! `stream: true` answered in each API's framing, cut short by `truncated`, and a looping model
//! (`repeat`) that runs to the request's output bound.

use super::*;

async fn streamed(server: &ScriptedServer, api: Api, extra: Value) -> Answer {
    let mut body = json!({"model": "scripted-model", "stream": true, "messages": user("go")});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let url = match api {
        Api::Ollama => format!("{}/api/chat", server.ollama_url()),
        Api::OpenAi => format!("{}/chat/completions", server.openai_url()),
    };
    post(url, &body).await
}

/// Ollama's lines, each a JSON object.
fn lines(answer: &Answer) -> Vec<Value> {
    answer
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// OpenAI's events: the JSON of each `data:` line, and whether `[DONE]` closed them.
fn events(answer: &Answer) -> (Vec<Value>, bool) {
    let mut done = false;
    let mut out = Vec::new();
    for block in answer.body.split("\n\n").filter(|b| !b.is_empty()) {
        let data = block
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("{block}"));
        if data == "[DONE]" {
            done = true;
        } else {
            out.push(serde_json::from_str(data).unwrap());
        }
    }
    (out, done)
}

#[tokio::test]
async fn ollama_streams_ndjson_pieces_then_the_counts() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().fallback(Reply::text("{\"findings\": [\"a long enough answer\"]}")),
        )
        .await
        .unwrap();
        let answer = streamed(&server, Api::Ollama, json!({})).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.headers["content-type"], "application/x-ndjson");
        let lines = lines(&answer);
        assert!(lines.len() > 3, "one piece per few characters: {lines:?}");
        let (last, pieces) = lines.split_last().unwrap();
        assert!(pieces.iter().all(|l| l["done"] == false));
        let joined: String = pieces
            .iter()
            .map(|l| l["message"]["content"].as_str().unwrap())
            .collect();
        assert_eq!(joined, "{\"findings\": [\"a long enough answer\"]}");
        assert_eq!(last["done"], true);
        assert_eq!(last["done_reason"], "stop");
        assert!(last["eval_count"].as_u64().unwrap() > 0);
        assert_eq!(server.requests()[0].stream, Some(true));
    })
    .await;
}

#[tokio::test]
async fn openai_streams_events_with_tool_arguments_in_pieces() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().fallback(Reply::tool("file_read", json!({"path": "src/lib.rs"}))),
        )
        .await
        .unwrap();
        let answer = streamed(
            &server,
            Api::OpenAi,
            json!({"stream_options": {"include_usage": true}}),
        )
        .await;
        assert_eq!(answer.headers["content-type"], "text/event-stream");
        let (events, done) = events(&answer);
        assert!(done, "a stream ends with [DONE]");
        let mut arguments = String::new();
        let mut name = None;
        for e in &events {
            for call in e["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(n) = call["function"]["name"].as_str() {
                    name = Some(n.to_string());
                }
                arguments.push_str(call["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
        assert_eq!(name.as_deref(), Some("file_read"));
        assert_eq!(
            serde_json::from_str::<Value>(&arguments).unwrap(),
            json!({"path": "src/lib.rs"})
        );
        let finish: Vec<_> = events
            .iter()
            .filter_map(|e| e["choices"][0]["finish_reason"].as_str())
            .collect();
        assert_eq!(finish, ["tool_calls"]);
        let usage = events.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    })
    .await;
}

#[tokio::test]
async fn a_truncated_stream_stops_before_its_end() {
    bounded(async {
        let server = ScriptedServer::start(Script::new().fallback(Reply::truncated(
            "{\"findings\": [\"cut somewhere in here\"]}",
        )))
        .await
        .unwrap();
        let ollama = lines(&streamed(&server, Api::Ollama, json!({})).await);
        assert!(!ollama.is_empty() && ollama.iter().all(|l| l["done"] == false));
        let (events, done) = events(&streamed(&server, Api::OpenAi, json!({})).await);
        assert!(!done && !events.is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_repeating_model_runs_to_the_output_bound() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().fallback(Reply::repeat("{\"findings\": [\n", "again and again\n")),
        )
        .await
        .unwrap();
        // Unstreamed: the whole bound's worth, stopped by `length`.
        let body = json!({"model": "scripted-model", "stream": false, "messages": user("go"),
                          "options": {"num_predict": 100}});
        let answer = post(format!("{}/api/chat", server.ollama_url()), &body).await;
        let content = answer.content();
        assert_eq!(content.chars().count(), 400);
        assert!(content.starts_with("{\"findings\": [\nagain and again\nagain"));
        assert_eq!(answer.json()["done_reason"], "length");
        // Streamed: the same, in pieces, finishing with `length`.
        let (events, done) =
            events(&streamed(&server, Api::OpenAi, json!({"max_tokens": 50})).await);
        assert!(done);
        let joined: String = events
            .iter()
            .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(joined.chars().count(), 200);
        assert!(events
            .iter()
            .any(|e| e["choices"][0]["finish_reason"] == "length"));
    })
    .await;
}
