//! Shared builders for the store's integration tests.
#![allow(dead_code)]

use quorum_core::review::finding::{RawFinding, Severity};
use quorum_core::task::Task;
use quorum_store::FlowMeta;

pub fn meta(flow_id: &str, target: &str, started_ms: u64) -> FlowMeta {
    FlowMeta {
        flow_id: flow_id.to_string(),
        flow_name: "review".to_string(),
        flow_yaml: "name: review\nstages: []\n".to_string(),
        params: serde_json::json!({"max_concurrent": 4, "fail_on": "P1", "models": ["m"]}),
        target_path: target.to_string(),
        head_sha: Some("0123456789abcdef0123456789abcdef01234567".to_string()),
        started_at: "2025-06-01T12:00:00Z".to_string(),
        started_ms,
        node: "node-a".to_string(),
    }
}

pub fn task(id: &str) -> Task {
    Task {
        id: id.to_string(),
        persona: "security-reviewer".to_string(),
        files: vec!["src/lib.rs".to_string()],
        mandate: format!("review {id}"),
        tools: vec!["read_file".to_string()],
        verification: String::new(),
        model: None,
        dimension: None,
        origin: None,
        probe: None,
        pass: None,
    }
}

pub fn finding(title: &str) -> RawFinding {
    RawFinding {
        title: title.to_string(),
        severity: Severity::P1,
        confidence: 0.8,
        category: "security".to_string(),
        file: Some("src/lib.rs".to_string()),
        line_start: Some(3),
        line_end: Some(4),
        symbol: None,
        evidence: "unsafe { }".to_string(),
        why_it_matters: "memory safety".to_string(),
        suggested_fix: "remove unsafe".to_string(),
        routing: Default::default(),
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
