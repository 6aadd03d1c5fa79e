//! Analyzer leads under a wall-time budget: verified a batch per free place while time is
//! left, the rest dropped unverified once the lead deadline has passed, and the review
//! completed — never cut partial by its budget because of leads. Security leads go first, and
//! those left unchecked are reported apart as unverified leads, never dropped. The review machine is driven
//! directly, every verification batch held until the test answers it at a time it chooses.

use quorum_core::analyzer::{Lead, Leads};
use quorum_core::catalog::{Catalog, PersonaKind};
use quorum_core::flows::flow::Flow;
use quorum_core::machine::schedule::{AttemptId, Place};
use quorum_core::machine::{
    AttemptStats, Command, Event, Job, MachineConfig, ModelUse, Outcome, Review, ReviewMachine,
    Synthesis,
};
use quorum_core::pack::ContextPack;
use quorum_core::report::ReviewStatus;
use quorum_core::review::finding::{Severity, Verdict};
use quorum_core::review::judged::Judged;
use quorum_core::scope::ReviewScope;
use quorum_core::task::{Classification, Task};
use quorum_core::weakness::Harm;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const LEADS: u32 = 10;

/// The ten eval leads, twelve lines apart, so dedup keeps each lead its own finding.
fn eval_leads() -> Vec<Lead> {
    (0..LEADS)
        .map(|k| lead(1 + 12 * k, "B307", Harm::Security))
        .collect()
}

fn lead(line: u32, rule: &str, harm: Harm) -> Lead {
    Lead {
        tool: "bandit".into(),
        file: "app.py".into(),
        line,
        end_line: None,
        rule: rule.into(),
        message: format!("rule {rule}"),
        severity: Severity::P1,
        category: "security/injection".into(),
        confidence: 0.8,
        harm,
        cwe: None,
        weakness: None,
    }
}

fn review(wall_secs: u64, leads: Vec<Lead>) -> Arc<Review> {
    let catalog = Catalog::load(&repo().join("personas")).expect("the shipped catalog");
    let mut flow = Flow::load(&repo().join("flows/quick.yaml")).expect("the quick flow");
    flow.probes = None;
    let p = &mut flow.parameters;
    p.max_wall_secs = wall_secs;
    p.max_verifications = 64;
    p.verify_batch = 1;
    let body: String = (1..=180)
        .map(|i| format!("value_{i} = eval(data[{i}])\n"))
        .collect();
    let pack = ContextPack::from_files(
        PathBuf::from("/t"),
        None,
        vec![("app.py".to_string(), body)],
    );
    let scope = ReviewScope {
        analyzers: Leads {
            runs: Vec::new(),
            leads,
        },
        ..ReviewScope::default()
    };
    Arc::new(Review {
        flow_id: "pacing".into(),
        flow,
        catalog,
        pack,
        verifier_model: None,
        node: "n0".into(),
        max_concurrent: Some(1),
        started_at: String::new(),
        scope,
    })
}

fn by(model: &str) -> ModelUse {
    ModelUse {
        model: model.into(),
        stats: AttemptStats {
            llm_calls: 1,
            ..AttemptStats::default()
        },
    }
}

/// The machine, with every stage but verification answered at once (no specialist finds
/// anything: every candidate is a lead) and each verification batch held for the test.
struct Drive {
    machine: ReviewMachine,
    review: Arc<Review>,
    now: u64,
    held: VecDeque<(AttemptId, Job)>,
    report: Option<quorum_core::report::Report>,
    /// Specialist attempts started so far.
    specialists: usize,
}

impl Drive {
    fn new(wall_secs: u64) -> Drive {
        Drive::with(wall_secs, eval_leads())
    }

    fn with(wall_secs: u64, leads: Vec<Lead>) -> Drive {
        let review = review(wall_secs, leads);
        let machine = ReviewMachine::new(review.clone(), MachineConfig::default());
        let mut d = Drive {
            machine,
            review,
            now: 0,
            held: VecDeque::new(),
            report: None,
            specialists: 0,
        };
        d.step(Event::Start);
        d
    }

    fn step(&mut self, first: Event) {
        let mut events = VecDeque::from([first]);
        while let Some(e) = events.pop_front() {
            for c in self.machine.step(self.now, e) {
                match c {
                    Command::Start { attempt, job, .. } => match self.answer(&job) {
                        Some(outcome @ Outcome::Specialist { .. }) => {
                            self.specialists += 1;
                            events.push_back(Event::Outcome {
                                attempt,
                                from: Place::Local,
                                outcome: Ok(outcome),
                            })
                        }
                        Some(outcome) => events.push_back(Event::Outcome {
                            attempt,
                            from: Place::Local,
                            outcome: Ok(outcome),
                        }),
                        None => self.held.push_back((attempt, *job)),
                    },
                    Command::Finish(report) => self.report = Some(*report),
                    _ => {}
                }
            }
        }
    }

    fn answer(&self, job: &Job) -> Option<Outcome> {
        Some(match job {
            Job::Scout => Outcome::Scout {
                classification: Classification::default(),
                by: by("m"),
            },
            Job::Plan(_) => {
                let persona = self
                    .review
                    .catalog
                    .personas
                    .values()
                    .find(|p| p.kind == PersonaKind::Reviewer)
                    .expect("a reviewer")
                    .name
                    .clone();
                let task: Task = serde_json::from_value(serde_json::json!({
                    "id": "t1", "persona": persona, "files": ["app.py"],
                    "mandate": "find defects", "tools": []
                }))
                .expect("a task");
                Outcome::Plan {
                    tasks: vec![task],
                    rejected: Vec::new(),
                    selection: None,
                    by: by("m"),
                }
            }
            Job::Specialist { .. } => Outcome::Specialist {
                findings: Vec::new(),
                invalid: 0,
                iterations: 1,
                by: by("m"),
            },
            Job::Synthesize { .. } => Outcome::Synthesize {
                synthesis: Synthesis {
                    summary: "summary".into(),
                    action_items: Vec::new(),
                    fallback: false,
                },
                by: by("m"),
            },
            Job::Verify { .. } => return None,
            other => panic!("unexpected job {other:?}"),
        })
    }

    /// Answer the oldest held verification batch at `at_ms`: every lead in it confirmed.
    fn confirm_next(&mut self, at_ms: u64) {
        let (attempt, job) = self
            .held
            .pop_front()
            .expect("a verification batch in flight");
        let Job::Verify { reported, .. } = job else {
            unreachable!()
        };
        let judged = reported
            .into_iter()
            .map(|r| Judged {
                reported: r,
                verdict: Verdict::Confirmed,
                reason: "the line calls eval on input".into(),
                deterministic: false,
                notes: Vec::new(),
                ballot: None,
                rescored: None,
            })
            .collect();
        self.now = at_ms;
        self.step(Event::Outcome {
            attempt,
            from: Place::Local,
            outcome: Ok(Outcome::Verify {
                judged,
                degraded: false,
                by: by("v"),
            }),
        });
    }
}

#[test]
fn leads_are_verified_while_the_wall_budget_allows_and_the_rest_are_dropped_unverified() {
    // 100 s budget: leads stop being handed out once 80 s are spent.
    let mut d = Drive::new(100);
    // One place, one lead batch in flight at a time, not all ten queued at once.
    assert_eq!(d.held.len(), 1, "one lead batch in flight");
    d.confirm_next(10_000);
    assert_eq!(d.held.len(), 1, "the next lead batch follows the first");
    d.confirm_next(20_000);
    assert_eq!(d.held.len(), 1);
    // This batch ends past the lead deadline: no more leads go out, the review goes on.
    d.confirm_next(81_000);
    assert!(d.held.is_empty(), "no lead batch after the deadline");
    let report = d.report.expect("the review finished");
    assert_eq!(
        report.status,
        ReviewStatus::Completed,
        "{}",
        report.status_reason
    );
    assert_eq!(report.findings.len(), 3, "the three verified leads");
    // Security leads the budget left unchecked are reported apart, never dropped unreported.
    assert!(report
        .dropped
        .iter()
        .all(|x| x.removed_by != "unconfirmed_lead"));
    assert_eq!(report.unverified_leads.len(), (LEADS - 3) as usize);
    let u = &report.unverified_leads[0];
    assert_eq!(u.verdict, Verdict::Unverified);
    assert!(u.id.starts_with('U'), "{}", u.id);
    assert!(
        u.notes
            .iter()
            .any(|n| n.contains("wall-time budget (100s)")),
        "{:?}",
        u.notes
    );
}

#[test]
fn under_a_short_budget_security_leads_are_checked_before_lint_and_none_is_lost() {
    // In file order the maintainability and style hits come first, the security ones last.
    let mut leads = Vec::new();
    for k in 0..6 {
        leads.push(lead(1 + 12 * k, "E722", Harm::Maintainability));
    }
    for k in 6..10 {
        leads.push(lead(1 + 12 * k, "F401", Harm::Style));
    }
    for k in 0..4 {
        leads.push(lead(121 + 12 * k, "B307", Harm::Security));
    }
    let mut d = Drive::with(100, leads);
    // The security leads did not wait for the specialist: their batch took the one place
    // first, and the specialist ran once it was free.
    assert_eq!(d.specialists, 0, "the lead batch goes first");
    let mut checked = Vec::new();
    for at in [10_000, 20_000, 81_000] {
        let (_, Job::Verify { reported, .. }) = d.held.front().expect("a batch").clone() else {
            unreachable!()
        };
        checked.extend(reported.iter().map(|r| r.finding.category.clone()));
        d.confirm_next(at);
    }
    assert_eq!(
        checked,
        ["security/injection/B307"; 3].map(String::from),
        "the budget went to the security leads first"
    );
    assert_eq!(d.specialists, 1);
    let report = d.report.expect("the review finished");
    assert_eq!(report.status, ReviewStatus::Completed);
    assert_eq!(report.findings.len(), 3);
    // The fourth security lead: unchecked, reported. The six maintainability ones: dropped.
    assert_eq!(report.unverified_leads.len(), 1);
    assert_eq!(report.unverified_leads[0].line_start, Some(157));
    let dropped = report
        .dropped
        .iter()
        .filter(|x| x.removed_by == "unconfirmed_lead")
        .count();
    assert_eq!(dropped, 6);
    // Style hits were never candidates: counted in the lint line instead.
    assert_eq!(report.lint.len(), 1);
    assert_eq!(
        (report.lint[0].rule.as_str(), report.lint[0].count),
        ("F401", 4)
    );
    assert!(report.to_markdown().contains("## Unverified leads"));
    assert!(report.to_markdown().contains("**Lint:** 4 style hit(s)"));
}

#[test]
fn no_lead_batch_starts_that_would_end_past_the_deadline() {
    let mut d = Drive::new(100);
    // Each batch takes 30 s: at 60 s another would end at 90 s, past the 80 s deadline.
    d.confirm_next(30_000);
    d.confirm_next(60_000);
    assert!(
        d.held.is_empty(),
        "a batch was started that could not end in time"
    );
    let report = d.report.expect("the review finished");
    assert_eq!(report.status, ReviewStatus::Completed);
    assert_eq!(report.findings.len(), 2);
}

#[test]
fn without_a_wall_budget_every_lead_within_max_verifications_is_verified() {
    let mut d = Drive::new(0);
    let mut answered = 0;
    while !d.held.is_empty() {
        answered += 1;
        d.confirm_next(answered * 1_000_000);
    }
    assert_eq!(answered, u64::from(LEADS));
    let report = d.report.expect("the review finished");
    assert_eq!(report.status, ReviewStatus::Completed);
    assert_eq!(
        report.findings.len(),
        LEADS as usize,
        "{:?}",
        report
            .dropped
            .iter()
            .map(|x| (&x.removed_by, &x.reason))
            .collect::<Vec<_>>()
    );
}
