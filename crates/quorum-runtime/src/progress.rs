//! Where a review's progress goes (a channel to the CLI, WatchReview or the dashboard), the
//! progress a watcher rebuilds from replicated facts, and what a follower that switched nodes
//! has already shown. The events themselves are the review
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

/// What a follower shows of a review whose events may arrive twice: a client that loses its
/// stream (the conductor died, or went silent) picks the review up on another node, which
/// replays it from the replicated facts. Each event is known by what it says (the stage, the
/// task and its attempt, the finding), not by a sequence number, because each node numbers
/// its own stream; the k-th event with one identity in a stream is shown only if fewer than
/// k were shown before. So after a switch nothing is shown twice, and nothing the facts hold
/// is missed. Bounded by the review: one count per distinct event.
#[derive(Debug, Default)]
pub struct ProgressReplay {
    shown: std::collections::HashMap<String, usize>,
    in_stream: std::collections::HashMap<String, usize>,
}

impl ProgressReplay {
    /// A new stream begins (from its first event); counts of what was shown are kept.
    pub fn new_stream(&mut self) {
        self.in_stream.clear();
    }

    /// Whether `p`, the next event of the current stream, is new to the user.
    pub fn admit(&mut self, p: &Progress) -> bool {
        let Some(key) = identity(p) else {
            return true;
        };
        let n = self.in_stream.entry(key.clone()).or_insert(0);
        *n += 1;
        let shown = self.shown.entry(key).or_insert(0);
        if *n > *shown {
            *shown += 1;
            true
        } else {
            false
        }
    }
}

/// What makes two events the same event on any node: a node's own stream carries details
/// (the model, token counts) that a replica's stream, derived from facts, does not. `None`
/// for events that are snapshots (usage totals), which are always worth showing.
fn identity(p: &Progress) -> Option<String> {
    Some(match p {
        Progress::Stage { stage } => format!("stage {stage}"),
        Progress::Planned { .. } => "planned".into(),
        Progress::TaskStarted { task, attempt, .. } => format!("started {task} {attempt}"),
        Progress::TaskFinished { task, ok, .. } => format!("finished {task} {ok}"),
        Progress::Verified { done, total } => format!("verified {done}/{total}"),
        Progress::Finding { id, .. } => format!("finding {id}"),
        Progress::Finished { .. } => "end".into(),
        Progress::Usage { .. } | Progress::Waiting { .. } => return None,
    })
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

#[cfg(test)]
mod replay_tests {
    use super::*;

    fn started(task: &str, attempt: u32, node: &str) -> Progress {
        Progress::TaskStarted {
            task: task.into(),
            persona: "p".into(),
            attempt,
            node: node.into(),
            model: String::new(),
        }
    }

    fn finished(task: &str, ok: bool, model: &str) -> Progress {
        Progress::TaskFinished {
            task: task.into(),
            persona: "p".into(),
            ok,
            findings: 0,
            error: None,
            error_class: None,
            model: model.into(),
            tokens_in: 0,
            tokens_out: 0,
        }
    }

    #[test]
    fn a_replayed_stream_shows_only_what_was_not_shown() {
        let mut r = ProgressReplay::default();
        // The conductor's own stream, with its details, lost after t1's first failure.
        let first = [
            Progress::Stage {
                stage: "specialists".into(),
            },
            started("t1", 1, "n1"),
            finished("t1", false, "m"),
        ];
        assert!(first.iter().all(|p| r.admit(p)));
        // A replica's replay from the facts: the same events without the details, then the
        // ones the first stream never carried. Two failures of t1 are two events.
        r.new_stream();
        let replay = [
            Progress::Stage {
                stage: "specialists".into(),
            },
            started("t1", 1, "n1"),
            finished("t1", false, ""),
            started("t1", 2, "n2"),
            finished("t1", false, ""),
            started("t1", 3, "n2"),
            finished("t1", true, ""),
        ];
        let shown: Vec<bool> = replay.iter().map(|p| r.admit(p)).collect();
        assert_eq!(shown, [false, false, false, true, true, true, true]);
        // A third stream from yet another node shows nothing again.
        r.new_stream();
        assert!(replay.iter().all(|p| !r.admit(p)));
        // Usage totals are snapshots: always shown.
        let usage = Progress::Usage {
            llm_calls: 1,
            tokens_in: 2,
            tokens_out: 3,
        };
        assert!(r.admit(&usage) && r.admit(&usage));
    }

    #[test]
    fn within_one_stream_repeats_are_events_of_their_own() {
        let mut r = ProgressReplay::default();
        assert!(r.admit(&finished("t1", false, "")));
        assert!(r.admit(&finished("t1", false, "")));
        r.new_stream();
        assert!(!r.admit(&finished("t1", false, "")));
        assert!(!r.admit(&finished("t1", false, "")));
        assert!(r.admit(&finished("t1", false, "")));
    }
}
