//! Measures the store's write path: appends 10,000 flushed events and records 60 attempts to
//! one flow, then reopens and replays it (what a resume pays). Prints rates, not assertions.
//!
//! `cargo run --release -p quorum-store --example store_bench [DIR]` — DIR defaults to a
//! temporary directory; pass one on the disk a real data dir would live on.

use quorum_core::review::finding::{RawFinding, Severity};
use quorum_store::{AttemptRecord, DataDir, Event, FlowMeta};
use std::time::Instant;

const EVENTS: usize = 10_000;
const ATTEMPTS: u32 = 60;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::tempdir_in(base)?;
    let data = DataDir::new(tmp.path());
    let meta = FlowMeta {
        flow_id: "bench".into(),
        flow_name: "review".into(),
        flow_yaml: "name: review\n".into(),
        params: serde_json::json!({}),
        target_path: "/bench".into(),
        head_sha: None,
        started_at: "2025-01-01T00:00:00Z".into(),
        started_ms: 0,
        node: "bench".into(),
    };
    let store = data.create_flow(&meta)?;
    let finding = RawFinding {
        title: "unchecked index".into(),
        severity: Severity::P2,
        confidence: 0.7,
        category: "correctness".into(),
        file: Some("src/lib.rs".into()),
        line_start: Some(10),
        line_end: Some(12),
        symbol: Some("get".into()),
        evidence: "v[i]".into(),
        why_it_matters: "panics on bad input".into(),
        suggested_fix: "use v.get(i)".into(),
        routing: Default::default(),
    };

    let started = Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..EVENTS {
        let task_id = format!("t{}", i % ATTEMPTS as usize);
        let event = match i % 3 {
            0 => Event::AttemptStarted {
                task_id,
                attempt: 1,
                node: "bench".into(),
            },
            1 => Event::AttemptSucceeded {
                task_id,
                attempt: 1,
                findings: vec![finding.clone(); 3],
            },
            _ => Event::Note {
                message: format!("note {i}"),
            },
        };
        let one = Instant::now();
        store.append(&event)?;
        slowest = slowest.max(one.elapsed());
    }
    let events_elapsed = started.elapsed();

    let output = "x".repeat(20 * 1024);
    let transcript = serde_json::json!([
        {"role": "system", "content": "s".repeat(4 * 1024)},
        {"role": "user", "content": "u".repeat(16 * 1024)},
        {"role": "assistant", "content": output},
    ]);
    let started = Instant::now();
    for n in 0..ATTEMPTS {
        store.record_attempt(&AttemptRecord {
            task_id: format!("t{n}"),
            attempt: 1,
            persona: "p".into(),
            model: "m".into(),
            backend: "ollama".into(),
            node: "bench".into(),
            prompt_hash: "h".into(),
            output: output.clone(),
            iterations: 4,
            tokens_in: 5_000,
            tokens_out: 800,
            started_ms: 0,
            ended_ms: 1,
            error_class: None,
            error: None,
            transcript: transcript.clone(),
            reused_from: None,
            cache: None,
        })?;
    }
    let attempts_elapsed = started.elapsed();
    drop(store);

    let started = Instant::now();
    let store = data.open_flow("bench")?;
    let replay = store.replay()?;
    let resume_elapsed = started.elapsed();

    let per_append = events_elapsed / EVENTS as u32;
    println!(
        "events: {EVENTS} flushed appends in {:.2?} = {:.0} events/s, {:.1?} per append (slowest {:.1?})",
        events_elapsed,
        EVENTS as f64 / events_elapsed.as_secs_f64(),
        per_append,
        slowest
    );
    println!(
        "attempts: {ATTEMPTS} records (~44 KiB each) in {:.2?} = {:.2?} per attempt",
        attempts_elapsed,
        attempts_elapsed / ATTEMPTS
    );
    println!(
        "resume: open + replay of {} events in {:.2?} ({} tasks completed)",
        replay.last_seq,
        resume_elapsed,
        replay.completed.len()
    );
    Ok(())
}
