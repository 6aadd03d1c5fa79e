//! The scripted server over real HTTP: rule matching, reply sequences, both API shapes, faults and
//! recording, as a backend client would see them. The client helpers are here; the tests are in
//! one room per subject.

mod faults;
mod recording;
mod rules;
mod shapes;
mod streaming;

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
