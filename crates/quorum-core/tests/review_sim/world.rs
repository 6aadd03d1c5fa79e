//! What every seed shares (the catalog, the flows, a generated pack, a prior report) and how
//! a simulated stage answers a job: findings that quote the pack, verdicts, scores.

use crate::Rng;
use quorum_core::catalog::{Catalog, PersonaKind};
use quorum_core::flows::flow::Flow;
use quorum_core::judging::adjudication::Prior;
use quorum_core::machine::schedule::Place;
use quorum_core::machine::{
    AttemptStats, Command, Event, Job, MachineConfig, ModelUse, Outcome, Review, ReviewMachine,
    Synthesis,
};
use quorum_core::pack::ContextPack;
use quorum_core::review::finding::{RawFinding, Verdict};
use quorum_core::review::judged::Judged;
use quorum_core::scope::ReviewScope;
use quorum_core::task::{Classification, Task};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What every seed shares: the catalog, the flows, a generated pack, a spec, a prior report.
pub(crate) struct World {
    pub(crate) catalog: Catalog,
    pub(crate) flows: BTreeMap<&'static str, Flow>,
    pub(crate) pack: ContextPack,
    pub(crate) reviewers: Vec<String>,
    pub(crate) prior: Prior,
}

pub(crate) fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let catalog = Catalog::load(&repo_root().join("personas")).expect("the shipped catalog");
        let mut flows = BTreeMap::new();
        for name in [
            "review",
            "quick",
            "comprehensive",
            "exhaustive",
            "conformance",
            "finish-review",
        ] {
            let f = Flow::load(&repo_root().join(format!("flows/{name}.yaml"))).expect("a flow");
            flows.insert(name, f);
        }
        let files: Vec<(String, String)> = (0..12)
            .map(|i| {
                let body: String = (0..30)
                    .map(|j| {
                        format!("def handler_{i}_{j}(request):\n    return request.args[{j}]\n")
                    })
                    .collect();
                (format!("src/mod{}/file{i}.py", i % 3), body)
            })
            .collect();
        let pack = ContextPack::from_files(PathBuf::from("/sim"), Some("abc123".into()), files);
        let reviewers: Vec<String> = catalog
            .personas
            .values()
            .filter(|p| p.kind == PersonaKind::Reviewer)
            .map(|p| p.name.clone())
            .collect();
        let prior_report = prior_report(&catalog, &flows, &pack);
        let prior = Prior::from_texts("prior/report.json", &prior_report, None)
            .expect("a simulated review's report is a valid prior");
        World {
            catalog,
            flows,
            pack,
            reviewers,
            prior,
        }
    })
}

/// A finished review's report.json to serve as the finish review's prior: the default flow
/// simulated once, without faults.
pub(crate) fn prior_report(
    catalog: &Catalog,
    flows: &BTreeMap<&str, Flow>,
    pack: &ContextPack,
) -> String {
    let review = Review {
        flow_id: "prior".into(),
        flow: flows["review"].clone(),
        catalog: catalog.clone(),
        pack: pack.clone(),
        verifier_model: None,
        node: "n0".into(),
        max_concurrent: Some(4),
        started_at: String::new(),
        scope: ReviewScope::default(),
    };
    let reviewers: Vec<String> = catalog
        .personas
        .values()
        .filter(|p| p.kind == PersonaKind::Reviewer)
        .map(|p| p.name.clone())
        .collect();
    let mut m = ReviewMachine::new(Arc::new(review), MachineConfig::default());
    let mut rng = Rng(7);
    let mut queue = vec![Event::Start];
    let mut now = 0;
    while let Some(e) = queue.pop() {
        now += 10;
        for c in m.step(now, e) {
            match c {
                Command::Start { attempt, job, .. } => queue.push(Event::Outcome {
                    attempt,
                    from: Place::Local,
                    outcome: Ok(answer(&mut rng, pack, &reviewers, catalog, &job)),
                }),
                Command::Finish(report) => return report.to_json(),
                _ => {}
            }
        }
    }
    panic!("the prior review did not finish");
}

pub(crate) fn stats(rng: &mut Rng) -> AttemptStats {
    AttemptStats {
        llm_calls: 1,
        tokens_in: 200 + rng.below(1800),
        tokens_out: 50 + rng.below(450),
        output: "answer".into(),
        prompt_hash: format!("{:x}", rng.next()),
        ..AttemptStats::default()
    }
}

pub(crate) fn by(rng: &mut Rng, model: &str) -> ModelUse {
    ModelUse {
        model: model.into(),
        stats: stats(rng),
    }
}

pub(crate) fn task(id: &str, persona: &str, files: Vec<String>) -> Task {
    serde_json::from_value(serde_json::json!({
        "id": id, "persona": persona, "files": files, "mandate": "find defects", "tools": []
    }))
    .expect("a task")
}

/// A finding on `file`: its evidence quotes the pack (grounds), or sometimes does not.
pub(crate) fn finding(rng: &mut Rng, pack: &ContextPack, file: &str) -> RawFinding {
    let lines = pack.get(file).map(|f| f.line_count).unwrap_or(60) as u64;
    let start = 1 + rng.below(lines.saturating_sub(2).max(1)) as u32;
    let evidence = if rng.chance(80) {
        pack.get(file)
            .and_then(|f| {
                f.content
                    .lines()
                    .nth(start as usize - 1)
                    .map(|l| l.trim().to_string())
            })
            .unwrap_or_default()
    } else {
        "this line is not in the file".to_string()
    };
    serde_json::from_value(serde_json::json!({
        "title": format!("untrusted input at line {start}"),
        "severity": *rng.pick(&["P0", "P1", "P2", "P3"]),
        "confidence": 0.5 + rng.below(50) as f64 / 100.0,
        "category": "security/injection",
        "file": file,
        "line_start": start,
        "line_end": start + 1,
        "evidence": evidence,
        "why_it_matters": "attacker controlled",
        "suggested_fix": "validate it",
    }))
    .expect("a finding")
}

/// A stage's answer to `job`.
pub(crate) fn answer(
    rng: &mut Rng,
    pack: &ContextPack,
    reviewers: &[String],
    catalog: &Catalog,
    job: &Job,
) -> Outcome {
    let model = "qwen2.5-sim";
    match job {
        Job::Scout => Outcome::Scout {
            classification: Classification {
                domain: "software".into(),
                languages: vec!["python".into()],
                ..Classification::default()
            },
            by: by(rng, model),
        },
        Job::Plan(_) => {
            let files: Vec<String> = pack.files.keys().cloned().collect();
            let n = 2 + rng.below(5) as usize;
            let tasks = (0..n)
                .map(|i| {
                    let k = 1 + rng.below(3) as usize;
                    let fs: Vec<String> = (0..k).map(|_| rng.pick(&files).clone()).collect();
                    task(&format!("t{i}"), &rng.pick(reviewers).clone(), fs)
                })
                .collect();
            Outcome::Plan {
                tasks,
                rejected: Vec::new(),
                selection: None,
                by: by(rng, model),
            }
        }
        Job::Specialist { task, .. } => {
            let n = rng.below(3);
            let findings = (0..n)
                .filter_map(|_| {
                    let f = task.files.first()?;
                    Some(finding(rng, pack, f))
                })
                .collect();
            Outcome::Specialist {
                findings,
                invalid: 0,
                iterations: 1 + rng.below(3) as u32,
                by: by(rng, model),
            }
        }
        Job::Verify { reported, .. } => Outcome::Verify {
            judged: reported
                .iter()
                .map(|r| Judged {
                    reported: r.clone(),
                    verdict: *rng.pick(&[
                        Verdict::Confirmed,
                        Verdict::Plausible,
                        Verdict::Hallucinated,
                    ]),
                    reason: "simulated verdict".into(),
                    deterministic: false,
                    notes: Vec::new(),
                    ballot: None,
                    rescored: None,
                })
                .collect(),
            degraded: false,
            by: by(rng, "llama3.1-sim"),
        },
        Job::Synthesize { .. } => Outcome::Synthesize {
            synthesis: Synthesis {
                summary: "simulated summary".into(),
                action_items: vec!["fix it".into()],
                fallback: false,
            },
            by: by(rng, model),
        },
        Job::Criteria => Outcome::Criteria {
            criteria: (1..=3)
                .map(|i| {
                    serde_json::from_value(serde_json::json!({
                        "id": format!("AC-{i}"), "text": "the handler validates its input"
                    }))
                    .expect("a criterion")
                })
                .collect(),
            by: by(rng, model),
        },
        Job::Conformance { criteria } => Outcome::Conformance {
            judgments: criteria
                .iter()
                .map(|c| {
                    serde_json::from_value(serde_json::json!({
                        "id": c.id,
                        "status": *rng.pick(&["met", "unmet", "divergent"]),
                        "reason": "simulated"
                    }))
                    .expect("a judgment")
                })
                .collect(),
            by: by(rng, model),
        },
        Job::Adjudicate { findings } => Outcome::Adjudicate {
            rulings: findings
                .iter()
                .map(|f| {
                    serde_json::from_value(serde_json::json!({
                        "id": f.id,
                        "title": f.title,
                        "file": f.file,
                        "severity": "P2",
                        "status": *rng.pick(&["fixed", "still_present"]),
                        "reason": "simulated",
                        "decided_by": "adjudicator",
                    }))
                    .expect("a ruling")
                })
                .collect(),
            by: by(rng, model),
        },
        Job::Judge { judge, .. } => {
            let p = catalog.personas.get(judge);
            Outcome::Judge {
                score: serde_json::from_value(serde_json::json!({
                    "judge": judge,
                    "axis": p.and_then(|p| p.axis.clone()).unwrap_or_default(),
                    "perspective": p.and_then(|p| p.perspective.clone()).unwrap_or_default(),
                    "model": model,
                    "overall": rng.below(11) as f64,
                }))
                .expect("a score"),
                by: by(rng, model),
            }
        }
        Job::MetaJudge { .. } => Outcome::MetaJudge {
            decision: serde_json::from_value(serde_json::json!({
                "verdict": "revise", "by": "meta_judge", "summary": "simulated"
            }))
            .expect("a decision"),
            by: by(rng, model),
        },
    }
}

/// Analyzer leads on random lines of the pack's files, as a tool would report them.
pub(crate) fn leads(rng: &mut Rng, pack: &ContextPack) -> Vec<quorum_core::analyzer::Lead> {
    let files: Vec<String> = pack.files.keys().cloned().collect();
    (0..3 + rng.below(20))
        .map(|_| quorum_core::analyzer::Lead {
            tool: "bandit".into(),
            file: rng.pick(&files).clone(),
            line: 1 + rng.below(58) as u32,
            end_line: None,
            rule: "B307".into(),
            message: "use of a risky call".into(),
            severity: quorum_core::review::finding::Severity::P2,
            category: "security/injection".into(),
            confidence: 0.8,
            harm: Default::default(),
            cwe: None,
            weakness: None,
        })
        .collect()
}
