//! Memory across reviews reads a finished report: only a completed review's verified findings
//! become insights, with the review as their provenance, and the report renders its memory.

mod common;

use common::realistic_report;
use quorum_core::memory;
use quorum_core::report::{InsightsReport, OfferedInsight, ReviewStatus};
use quorum_core::review::finding::Verdict;

#[test]
fn a_partial_review_leaves_no_memory() {
    let r = realistic_report();
    assert_eq!(r.status, ReviewStatus::Partial);
    assert!(memory::distill_report(&r, "path:/x", 1).is_empty());
}

#[test]
fn only_confirmed_and_plausible_findings_are_remembered() {
    let mut r = realistic_report();
    r.status = ReviewStatus::Completed;
    assert!(r.findings.len() >= 3, "the fixture changed");
    r.findings[0].verdict = Verdict::Confirmed;
    r.findings[1].verdict = Verdict::Unverified;
    r.findings[2].verdict = Verdict::Unverifiable;
    for f in r.findings.iter_mut().skip(3) {
        f.verdict = Verdict::Plausible;
    }
    let out = memory::distill_report(&r, "path:/x", 42);
    assert_eq!(out.len(), r.findings.len() - 2);
    let titles: Vec<&str> = out.iter().map(|i| i.title.as_str()).collect();
    assert!(titles.contains(&r.findings[0].title.as_str()));
    assert!(!titles.contains(&r.findings[1].title.as_str()));
    assert!(!titles.contains(&r.findings[2].title.as_str()));
    let first = &out[0];
    assert_eq!(first.provenance.flow_id, r.flow_id);
    assert_eq!(first.provenance.target, "path:/x");
    assert_eq!(first.provenance.created_ms, 42);
    assert_eq!(first.provenance.findings, [r.findings[0].id.clone()]);
    assert_eq!(first.provenance.task_id, "t1");
    assert!(first.content.contains("CONFIRMED"), "{}", first.content);
    // The same issue in the same target keeps its id from review to review.
    assert_eq!(memory::distill_report(&r, "path:/x", 99)[0].id, first.id);
    assert_ne!(memory::distill_report(&r, "path:/y", 42)[0].id, first.id);
}

#[test]
fn the_report_says_what_memory_did() {
    let mut r = realistic_report();
    let json = r.to_json();
    assert!(!json.contains("\"insights\""), "absent when memory is off");
    r.insights = Some(InsightsReport {
        offered: vec![OfferedInsight {
            id: "I-1".into(),
            title: "SQL by concatenation".into(),
            from_flow: "flow-earlier".into(),
            score: 0.72,
        }],
        recorded: 2,
    });
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["insights"]["offered"][0]["from_flow"], "flow-earlier");
    assert_eq!(v["insights"]["recorded"], 2);
    let md = r.to_markdown();
    assert!(
        md.contains("offered 1 insights from earlier reviews (flow-earlier)"),
        "{md}"
    );
    assert!(
        md.contains("2 insights from this review's verified findings"),
        "{md}"
    );
}
