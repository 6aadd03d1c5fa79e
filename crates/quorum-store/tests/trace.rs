//! Trace export writes one Hermes-format (ShareGPT-style) JSON line per recorded attempt.

mod common;

use quorum_store::{trace_export, AttemptRecord, DataDir};
use serde_json::{json, Value};

fn record(task_id: &str, attempt: u32, output: &str, transcript: Value) -> AttemptRecord {
    AttemptRecord {
        task_id: task_id.to_string(),
        attempt,
        persona: "security-reviewer".to_string(),
        model: "qwen2.5-coder:0.5b".to_string(),
        backend: "openai".to_string(),
        node: "node-a".to_string(),
        prompt_hash: "ab12".to_string(),
        output: output.to_string(),
        iterations: 2,
        tokens_in: 900,
        tokens_out: 120,
        started_ms: 10_000,
        ended_ms: 12_500,
        error_class: None,
        error: None,
        transcript,
        reused_from: None,
        cache: None,
    }
}

/// The JSON bodies of every `<tag>\n…\n</tag>` block in `text`.
fn blocks(text: &str, tag: &str) -> Vec<Value> {
    let open = format!("<{tag}>\n");
    let close = format!("\n</{tag}>");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let end = body.find(&close).expect("unterminated block");
        out.push(serde_json::from_str(&body[..end]).expect("block body is json"));
        rest = &body[end + close.len()..];
    }
    out
}

#[test]
fn attempts_export_as_hermes_jsonl_with_tool_calls_responses_and_thinking() {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::new(tmp.path());
    let store = data
        .create_flow(&common::meta("flow-1", "/repo", 1))
        .unwrap();
    let final_answer = "{\"findings\": []}";
    let transcript = json!([
        {"role": "system", "content": "You are a security reviewer."},
        {"role": "user", "content": "Review src/lib.rs for memory safety."},
        {"role": "assistant",
         "content": "<think>I should read the file first.</think>",
         "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": "src/lib.rs"}},
            {"id": "c2", "name": "grep", "arguments": "{\"pattern\": \"unsafe\"}"}
         ]},
        {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "    1 | pub fn f() {}"},
        {"role": "tool", "tool_call_id": "c2", "content": "[{\"path\": \"src/lib.rs\", \"line\": 3}]"},
        {"role": "assistant", "content": final_answer}
    ]);
    store
        .record_attempt(&record("t1", 1, final_answer, transcript))
        .unwrap();
    let mut failed = record(
        "t1",
        2,
        "not json at all",
        json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}]},
            {"role": "assistant", "content": "", "reasoning_content": "hmm, prose it is"}
        ], "tools": [{"name": "read_file"}]}),
    );
    failed.error_class = Some("malformed_output".to_string());
    failed.error = Some("prose instead of json".to_string());
    store.record_attempt(&failed).unwrap();

    let mut out = Vec::new();
    assert_eq!(trace_export(&store, &mut out).unwrap(), 2);
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one json object"))
        .collect();
    assert_eq!(lines.len(), 2);

    let first = &lines[0];
    assert_eq!(first["id"], "flow-1/t1/1");
    assert_eq!(first["persona"], "security-reviewer");
    assert_eq!(first["model"], "qwen2.5-coder:0.5b");
    assert_eq!(first["duration_ms"], 2_500);
    assert_eq!(first["tokens_in"], 900);
    let turns = first["conversations"].as_array().unwrap();
    let froms: Vec<&str> = turns.iter().map(|t| t["from"].as_str().unwrap()).collect();
    assert_eq!(froms, ["system", "human", "gpt", "tool", "gpt"]);
    assert!(turns.iter().all(|t| t["value"].is_string()));
    assert_eq!(turns[0]["value"], "You are a security reviewer.");
    assert_eq!(turns[1]["value"], "Review src/lib.rs for memory safety.");

    let call_turn = turns[2]["value"].as_str().unwrap();
    assert!(call_turn.starts_with("<think>I should read the file first.</think>"));
    let calls = blocks(call_turn, "tool_call");
    assert_eq!(
        calls,
        [
            json!({"name": "read_file", "arguments": {"path": "src/lib.rs"}}),
            json!({"name": "grep", "arguments": {"pattern": "unsafe"}}),
        ]
    );
    let responses = blocks(turns[3]["value"].as_str().unwrap(), "tool_response");
    assert_eq!(
        responses,
        [
            json!({"name": "read_file", "content": "    1 | pub fn f() {}"}),
            json!({"name": "grep", "content": [{"path": "src/lib.rs", "line": 3}]}),
        ]
    );
    assert_eq!(turns[4]["value"], final_answer);

    let second = &lines[1];
    assert_eq!(second["id"], "flow-1/t1/2");
    assert_eq!(second["error_class"], "malformed_output");
    assert_eq!(second["tools"], json!([{"name": "read_file"}]));
    let turns = second["conversations"].as_array().unwrap();
    let froms: Vec<&str> = turns.iter().map(|t| t["from"].as_str().unwrap()).collect();
    assert_eq!(froms, ["system", "human", "gpt", "gpt"]);
    assert_eq!(turns[1]["value"], "part one part two");
    assert_eq!(turns[2]["value"], "<think>\nhmm, prose it is\n</think>");
    // The final output was not in the transcript, so it closes the conversation.
    assert_eq!(turns[3]["value"], "not json at all");
}

#[test]
fn a_flow_without_attempts_exports_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = DataDir::new(tmp.path())
        .create_flow(&common::meta("empty", "/repo", 1))
        .unwrap();
    let mut out = Vec::new();
    assert_eq!(trace_export(&store, &mut out).unwrap(), 0);
    assert!(out.is_empty());
}
