//! A `quorum mcp` process spoken to in JSON-RPC over its stdin and stdout, as an agent would:
//! the session every MCP test drives.

use super::*;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TOKEN: &str = NODE_TOKEN;

pub struct Session {
    pub child: tokio::process::Child,
    pub stdin: tokio::process::ChildStdin,
    out: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Session {
    pub async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// A request and its response (every stdout line must be JSON-RPC).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = self
                .out
                .next_line()
                .await
                .unwrap()
                .expect("quorum mcp closed stdout");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON-RPC ({e}): {line:?}"));
            assert_eq!(v["jsonrpc"], "2.0", "{v}");
            if v["id"] == id {
                return v;
            }
        }
    }

    /// tools/call; returns the tool's JSON text payload, or the error object.
    pub async fn tool(&mut self, name: &str, args: Value) -> Result<Value, Value> {
        let r = self
            .call("tools/call", json!({"name": name, "arguments": args}))
            .await;
        if !r["error"].is_null() {
            return Err(r["error"].clone());
        }
        let res = &r["result"];
        let text = res["content"][0]["text"].as_str().unwrap_or_default();
        if res["isError"] == true {
            return Err(json!(text));
        }
        Ok(serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}")))
    }
}

pub async fn spawn_mcp(work: &std::path::Path, args: &[&str]) -> Session {
    let args: Vec<&str> = std::iter::once("mcp").chain(args.iter().copied()).collect();
    let mut child = command(&args, work)
        .env("QUORUM_API_TOKEN", TOKEN)
        .stdin(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Session {
        stdin: child.stdin.take().unwrap(),
        out: BufReader::new(child.stdout.take().unwrap()).lines(),
        child,
        next_id: 0,
    }
}

impl Session {
    pub async fn initialize(&mut self) -> Value {
        let init = self
            .call(
                "initialize",
                json!({"protocolVersion": "2025-03-26", "capabilities": {},
                       "clientInfo": {"name": "test-agent", "version": "1"}}),
            )
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        init
    }

    /// Poll review_status until the review has ended.
    pub async fn until_done(&mut self, flow_id: &str) -> Value {
        for _ in 0..4000 {
            let status = self
                .tool("review_status", json!({"flow_id": flow_id}))
                .await
                .unwrap();
            if status["status"] != "running" {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("review {flow_id} never ended");
    }
}
