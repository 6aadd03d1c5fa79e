//! Analyzer leads under a wall-time budget: verified a batch per free place while time is
//! left, the rest dropped unverified once the lead deadline has passed, and the review
//! completed — never cut partial by its budget because of leads. The review machine is driven
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
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const LEADS: u32 = 10;

fn review(wall_secs: u64) -> Arc<Review> {
    let catalog = Catalog::load(&repo().join("personas")).expect("the shipped catalog");
    let mut flow = Flow::load(&repo().join("flows/quick.yaml")).expect("the quick flow");
    flow.probes = None;
    let p = &mut flow.parameters;
    p.max_wall_secs = wall_secs;
    p.max_verifications = 64;
    p.verify_batch = 1;
    let body: String = (1..=130)
        .map(|i| format!("value_{i} = eval(data[{i}])\n"))
        .collect();
    let pack = ContextPack::from_files(
        PathBuf::from("/t"),
        None,
        vec![("app.py".to_string(), body)],
    );
    // Twelve lines apart, so dedup keeps each lead its own finding.
    let leads = (0..LEADS)
        .map(|k| 1 + 12 * k)
        .map(|line| Lead {
            tool: "bandit".into(),
            file: "app.py".into(),
            line,
            end_line: None,
            rule: "B307".into(),
            message: "use of possibly insecure function eval".into(),
            severity: Severity::P1,
            category: "security/injection".into(),
            confidence: 0.8,
        })
        .collect();
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
}

impl Drive {
    fn new(wall_secs: u64) -> Drive {
        let review = review(wall_secs);
        let machine = ReviewMachine::new(review.clone(), MachineConfig::default());
        let mut d = Drive {
            machine,
            review,
            now: 0,
            held: VecDeque::new(),
            report: None,
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
    let unverified: Vec<_> = report
        .dropped
        .iter()
        .filter(|x| x.removed_by == "unconfirmed_lead")
        .collect();
    assert_eq!(unverified.len(), (LEADS - 3) as usize);
    assert!(
        unverified[0].reason.contains("wall-time budget (100s)"),
        "{}",
        unverified[0].reason
    );
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
