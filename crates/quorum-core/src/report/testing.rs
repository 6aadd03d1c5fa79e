//! The reports the renderings' unit tests share: a full one (every section, a finding of each
//! severity, a dropped row that needs escaping) and an empty one.

use super::*;
use crate::pack::Skipped;
use crate::review::finding::{Dropped, Finding, Reporter, Severity, Verdict};
use crate::task::{Classification, RejectedTask};

pub(crate) fn finding(id: &str, sev: Severity, category: &str, file: Option<&str>) -> Finding {
    Finding {
        id: id.to_string(),
        title: format!("title of {id}"),
        severity: sev,
        confidence: 0.8,
        category: category.to_string(),
        file: file.map(str::to_string),
        line_start: Some(10),
        line_end: Some(14),
        symbol: None,
        evidence: format!("evidence of {id}"),
        why_it_matters: format!("why {id} matters"),
        suggested_fix: format!("fix {id}"),
        verdict: Verdict::Confirmed,
        reporters: vec![Reporter {
            persona: "security-auditor".into(),
            model: "model-a".into(),
            node: "node-1".into(),
            carried_from: None,
        }],
        anchor: format!("{}:L10", file.unwrap_or("")),
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

pub(crate) fn report() -> Report {
    let mut sym = finding("F3", Severity::P2, "performance", Some("src/cache.rs"));
    sym.symbol = Some("Cache::get".into());
    sym.line_start = None;
    sym.line_end = None;
    sym.promoted = true;
    Report {
        schema_version: SCHEMA_VERSION,
        flow_id: "flow-123".into(),
        flow: "review".into(),
        status: ReviewStatus::Partial,
        status_reason: "2 of 7 tasks failed".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        target: TargetInfo {
            path: "/srv/my repo".into(),
            head_sha: Some("abc123".into()),
            file_count: 42,
            skipped: vec![Skipped {
                path: "big.bin".into(),
                reason: "binary".into(),
            }],
            diff: None,
        },
        classification: Classification {
            domain: "software".into(),
            languages: vec!["rust".into()],
            frameworks: vec!["axum".into()],
            content_types: vec![],
            review_focus: vec!["security".into()],
        },
        summary: "Two serious problems.".into(),
        action_items: vec![
            "Parameterise the login query".into(),
            "Add a cache bound".into(),
        ],
        team: vec![TeamMember {
            persona: "security-auditor".into(),
            model: "model-a".into(),
            tasks: 3,
            reason: None,
        }],
        findings: vec![
            finding("F1", Severity::P1, "security/injection", Some("src/db.rs")),
            finding("F2", Severity::P0, "security/auth", Some("src/login.rs")),
            sym,
        ],
        residual_concerns: vec![finding("R1", Severity::P3, "style", Some("src/x.rs"))],
        pre_existing: vec![],
        unverified_leads: vec![],
        lint: vec![],
        dropped: vec![Dropped {
            title: "a | b".into(),
            file: Some("src/p|q.rs".into()),
            reason: "evidence not found | at all".into(),
            verdict: Some(Verdict::Hallucinated),
            removed_by: "grounding".into(),
        }],
        tasks: vec![TaskReport {
            id: "t1".into(),
            persona: "security-auditor".into(),
            status: "failed".into(),
            attempts: 3,
            model: "model-a".into(),
            node: "node-1".into(),
            tokens_in: 12_345,
            tokens_out: 678,
            duration_ms: 65_000,
            error_class: Some("timeout".into()),
            error: None,
            recovery: None,
            tool_calls: 0,
            text_tool_calls: 0,
            findings: 0,
            notes: Vec::new(),
            files: vec!["src/auth.rs".into(), "src/a|b.rs".into()],
            files_total: 2,
            files_digest: None,
            mandate: "token handling | session expiry".into(),
            ended: "failed: timeout".into(),
            reused_from: None,
            cache: None,
        }],
        usage: Usage {
            llm_calls: 9,
            tokens_in: 1_234_567,
            tokens_out: 89_000,
            wall_ms: 3_725_000,
        },
        methodology: Methodology {
            reported: 6,
            dropped: 1,
            merged: 1,
            residual: 1,
            promoted: 1,
            confidence_gate: 0.6,
            verifier_models: vec!["model-b".into()],
            verifier_note: "verifier is a different model family".into(),
            rejected_tasks: vec![RejectedTask {
                id: "t9".into(),
                persona: "ghost".into(),
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

pub(crate) fn empty_report() -> Report {
    let mut r = report();
    r.status = ReviewStatus::Completed;
    r.status_reason.clear();
    r.target.file_count = 0;
    r.target.skipped.clear();
    r.target.head_sha = None;
    r.summary.clear();
    r.action_items.clear();
    r.team.clear();
    r.findings.clear();
    r.residual_concerns.clear();
    r.dropped.clear();
    r.tasks.clear();
    r.usage = Usage::default();
    r.methodology = Methodology::default();
    r
}
