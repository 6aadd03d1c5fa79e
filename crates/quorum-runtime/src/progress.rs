//! Where a review's progress goes (a channel to the CLI, WatchReview or the dashboard), and the
//! progress a watcher rebuilds from replicated facts. The events themselves are the review
//! machine's ([`Progress`]).

pub use quorum_core::machine::progress::Progress;

pub type ProgressSender = tokio::sync::mpsc::UnboundedSender<Progress>;

/// Progress rebuilt from a review's replicated facts, for a watcher on a node that does not
/// conduct the review: any node can show a running review, and its view does not break when
/// the conductor changes, because the facts outlive every conductor.
///
/// Feed it the facts in order; each yields the progress it implies. The stream is coarser than
/// the conductor's own (no token usage, no live findings) but says the same about tasks.
#[derive(Debug, Default)]
pub struct ProgressFromFacts {
    personas: std::collections::HashMap<String, String>,
    finished: Option<String>,
}

impl ProgressFromFacts {
    /// The progress one fact implies (none for facts a watcher has no use for).
    pub fn next(&mut self, fact: &crate::facts::ReplicatedFact) -> Vec<Progress> {
        use quorum_store::Event;
        let crate::facts::ReplicatedFact::Event { event } = fact else {
            return Vec::new();
        };
        let persona = |me: &Self, task: &str| me.personas.get(task).cloned().unwrap_or_default();
        match event {
            Event::FlowStarted { .. } => vec![Progress::Stage {
                stage: "scout".into(),
            }],
            Event::ScoutCompleted { .. } => vec![Progress::Stage {
                stage: "planner".into(),
            }],
            Event::PlanCompleted { tasks, rejected } => {
                for t in tasks {
                    self.personas.insert(t.id.clone(), t.persona.clone());
                }
                vec![
                    Progress::Planned {
                        tasks: tasks.len(),
                        rejected: rejected.len(),
                    },
                    Progress::Stage {
                        stage: "specialists".into(),
                    },
                ]
            }
            Event::AttemptStarted {
                task_id,
                attempt,
                node,
            } => vec![Progress::TaskStarted {
                task: task_id.clone(),
                persona: persona(self, task_id),
                attempt: *attempt,
                node: node.clone(),
                model: String::new(),
            }],
            Event::AttemptSucceeded {
                task_id, findings, ..
            } => vec![Progress::TaskFinished {
                task: task_id.clone(),
                persona: persona(self, task_id),
                ok: true,
                findings: findings.len(),
                error: None,
                error_class: None,
                model: String::new(),
                tokens_in: 0,
                tokens_out: 0,
            }],
            Event::AttemptFailed {
                task_id,
                error_class,
                error,
                ..
            } => vec![Progress::TaskFinished {
                task: task_id.clone(),
                persona: persona(self, task_id),
                ok: false,
                findings: 0,
                error: Some(error.clone()),
                error_class: Some(error_class.clone()),
                model: String::new(),
                tokens_in: 0,
                tokens_out: 0,
            }],
            Event::VerifyCompleted { judged } => vec![Progress::Verified {
                done: judged.len(),
                total: judged.len(),
            }],
            Event::FlowFinished { status, .. } => {
                self.finished = Some(status.clone());
                vec![Progress::Finished {
                    status: status.clone(),
                }]
            }
            _ => Vec::new(),
        }
    }

    /// The review's final status, once a fact said it finished.
    pub fn finished(&self) -> Option<&str> {
        self.finished.as_deref()
    }
}

#[cfg(test)]
mod from_facts_tests {
    use super::*;
    use crate::facts::ReplicatedFact;
    use quorum_core::task::Task;
    use quorum_store::Event;

    fn ev(event: Event) -> ReplicatedFact {
        ReplicatedFact::Event { event }
    }

    #[test]
    fn a_fact_sequence_yields_the_progress_a_conductor_would_show() {
        let task: Task = serde_json::from_value(serde_json::json!(
            {"id": "t1", "persona": "p", "files": ["a.py"], "mandate": "m", "tools": []}
        ))
        .unwrap();
        let facts = [
            ev(Event::FlowStarted {
                flow_id: "f".into(),
            }),
            ev(Event::PlanCompleted {
                tasks: vec![task],
                rejected: vec![],
            }),
            ev(Event::AttemptStarted {
                task_id: "t1".into(),
                attempt: 1,
                node: "n2".into(),
            }),
            ev(Event::AttemptFailed {
                task_id: "t1".into(),
                attempt: 1,
                error_class: "timeout".into(),
                error: "slow".into(),
            }),
            ev(Event::AttemptSucceeded {
                task_id: "t1".into(),
                attempt: 2,
                findings: vec![],
            }),
            ReplicatedFact::Report { json: "{}".into() },
            ev(Event::FlowFinished {
                status: "completed".into(),
                reason: String::new(),
            }),
        ];
        let mut p = ProgressFromFacts::default();
        let out: Vec<Progress> = facts.iter().flat_map(|f| p.next(f)).collect();
        assert!(matches!(&out[0], Progress::Stage { stage } if stage == "scout"));
        assert!(matches!(
            &out[1],
            Progress::Planned {
                tasks: 1,
                rejected: 0
            }
        ));
        assert!(out.iter().any(|e| matches!(e, Progress::TaskStarted { task, persona, node, .. } if task == "t1" && persona == "p" && node == "n2")));
        assert!(out.iter().any(|e| matches!(e, Progress::TaskFinished { ok: false, error_class: Some(c), .. } if c == "timeout")));
        assert!(out.iter().any(
            |e| matches!(e, Progress::TaskFinished { ok: true, persona, .. } if persona == "p")
        ));
        assert_eq!(p.finished(), Some("completed"));
        assert!(matches!(out.last(), Some(Progress::Finished { status }) if status == "completed"));
    }
}
