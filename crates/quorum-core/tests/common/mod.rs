//! A realistic report shared by the renderer tests: located and unlocated findings, odd paths
//! (spaces, parentheses, backslashes, an absolute path under the target), odd lines and
//! categories.

// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]

use quorum_core::pack::Skipped;
use quorum_core::report::{
    Methodology, Report, ReviewStatus, TargetInfo, TaskReport, TeamMember, Usage, SCHEMA_VERSION,
};
use quorum_core::review::finding::{Dropped, Finding, Reporter, Severity, Verdict};
use quorum_core::task::{Classification, RejectedTask};

pub fn reporter(persona: &str) -> Reporter {
    Reporter {
        persona: persona.into(),
        model: "qwen2.5-coder".into(),
        node: "ws-1".into(),
        carried_from: None,
    }
}

#[allow(clippy::too_many_arguments)]
pub fn finding(
    id: &str,
    severity: Severity,
    category: &str,
    file: Option<&str>,
    lines: (Option<u32>, Option<u32>),
    symbol: Option<&str>,
    anchor: &str,
) -> Finding {
    Finding {
        id: id.into(),
        title: format!("Problem {id}"),
        severity,
        confidence: 0.75,
        category: category.into(),
        file: file.map(str::to_string),
        line_start: lines.0,
        line_end: lines.1,
        symbol: symbol.map(str::to_string),
        evidence: "let q = format!(\"SELECT * FROM users WHERE name = '{}'\", name);".into(),
        why_it_matters: "An attacker controls `name`.".into(),
        suggested_fix: "Use a bound parameter.".into(),
        verdict: Verdict::Confirmed,
        reporters: vec![reporter("security-auditor"), reporter("backend-reviewer")],
        anchor: anchor.into(),
        promoted: false,
        notes: Vec::new(),
        routing: Default::default(),
        rescored: None,
        fresh_eyes: false,
        carried_from: None,
        seen_before: None,
        cwe: None,
    }
}

pub fn realistic_report() -> Report {
    let target = "/home/dev/my project";
    let findings = vec![
        finding(
            "F1",
            Severity::P0,
            "security/injection",
            Some("src/db/users.rs"),
            (Some(42), Some(47)),
            None,
            "src/db/users.rs:L40",
        ),
        finding(
            "F2",
            Severity::P1,
            "Security: Auth & Sessions (CWE-287)",
            Some("src/web/login handler.rs"),
            (Some(7), None),
            Some("LoginHandler::post"),
            "src/web/login handler.rs#LoginHandler::post",
        ),
        finding(
            "F3",
            Severity::P2,
            "performance/allocation",
            Some("src/cache.rs"),
            (None, None),
            Some("Cache::get"),
            "src/cache.rs#Cache::get",
        ),
        // No file at all: a design-level concern.
        finding(
            "F4",
            Severity::P2,
            "architecture",
            None,
            (None, None),
            None,
            "architecture:layering",
        ),
        finding(
            "F5",
            Severity::P3,
            "données/été",
            Some("docs/README (fr).md"),
            (Some(0), Some(0)),
            None,
            "docs/README (fr).md:L0",
        ),
        // End before start, and an absolute path under the target.
        finding(
            "F6",
            Severity::P3,
            "",
            Some("/home/dev/my project/src/main.rs"),
            (Some(20), Some(3)),
            None,
            "src/main.rs:L20",
        ),
        finding(
            "F7",
            Severity::P1,
            "security/injection",
            Some("src\\db\\orders.rs"),
            (Some(3), Some(3)),
            None,
            "src/db/orders.rs:L0",
        ),
    ];
    Report {
        schema_version: SCHEMA_VERSION,
        flow_id: "0f3c2a9e-1b2c-4d5e-8f90-a1b2c3d4e5f6".into(),
        flow: "review".into(),
        status: ReviewStatus::Partial,
        status_reason: "1 of 6 specialist tasks failed after 3 attempts".into(),
        started_at: "2025-03-01T12:00:00Z".into(),
        target: TargetInfo {
            path: target.into(),
            head_sha: Some("9fceb02d0ae598e95dc970b74767f19372d61af8".into()),
            file_count: 118,
            skipped: vec![Skipped {
                path: "assets/logo.png".into(),
                reason: "binary".into(),
            }],
            diff: None,
        },
        classification: Classification {
            domain: "software".into(),
            languages: vec!["rust".into()],
            frameworks: vec!["axum".into()],
            content_types: vec!["source".into()],
            review_focus: vec!["security".into()],
        },
        summary: "The login path is injectable.".into(),
        action_items: vec!["Parameterise SQL".into()],
        team: vec![TeamMember {
            persona: "security-auditor".into(),
            model: "qwen2.5-coder".into(),
            tasks: 2,
            reason: None,
        }],
        findings,
        residual_concerns: vec![],
        pre_existing: vec![],
        unverified_leads: vec![],
        lint: vec![],
        dropped: vec![Dropped {
            title: "Made-up function".into(),
            file: Some("src/nope.rs".into()),
            reason: "file not in pack".into(),
            verdict: Some(Verdict::Hallucinated),
            removed_by: "grounding".into(),
        }],
        tasks: vec![TaskReport {
            id: "t1".into(),
            persona: "security-auditor".into(),
            status: "completed".into(),
            attempts: 1,
            model: "qwen2.5-coder".into(),
            node: "ws-1".into(),
            tokens_in: 5000,
            tokens_out: 800,
            duration_ms: 12_000,
            error_class: None,
            error: None,
            recovery: Some("clean".into()),
            tool_calls: 4,
            text_tool_calls: 0,
            findings: 3,
            notes: Vec::new(),
            files: vec!["src/auth.rs".into()],
            files_total: 1,
            files_digest: None,
            mandate: "authentication and secrets".into(),
            ended: "answered".into(),
            reused_from: None,
            cache: None,
        }],
        usage: Usage {
            llm_calls: 14,
            tokens_in: 60_000,
            tokens_out: 9_000,
            wall_ms: 95_000,
        },
        methodology: Methodology {
            reported: 9,
            dropped: 1,
            merged: 1,
            residual: 0,
            promoted: 0,
            confidence_gate: 0.6,
            verifier_models: vec!["llama3.1".into()],
            verifier_note: "verifier from a different model family".into(),
            rejected_tasks: vec![RejectedTask {
                id: "t9".into(),
                persona: "nobody".into(),
                reason: "unknown persona".into(),
            }],
            profile: String::new(),
        },
        coverage: None,
        rounds: Vec::new(),
        selection: None,
        verification_ledger: Vec::new(),
        safe_fixes: Vec::new(),
        conformance: None,
        adjudication: None,
        panel: None,
        analyzers: Vec::new(),
        insights: None,
        since: None,
    }
}
