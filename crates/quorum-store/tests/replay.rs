//! Folding an event log into resume state: the precedence rules of `Replay::from_events`.

mod common;

use common::{finding, task};
use quorum_core::task::Classification;
use quorum_store::{status_of, DerivedStatus, Event, Replay, StoredEvent};

fn log(events: Vec<Event>) -> Vec<StoredEvent> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| StoredEvent {
            seq: i as u64 + 1,
            at_ms: 100 + i as u64,
            event,
        })
        .collect()
}

fn succeeded(task_id: &str, attempt: u32, titles: &[&str]) -> Event {
    Event::AttemptSucceeded {
        task_id: task_id.to_string(),
        attempt,
        findings: titles.iter().map(|t| finding(t)).collect(),
    }
}

#[test]
fn an_empty_log_is_an_interrupted_flow_with_nothing_done() {
    let replay = Replay::from_events::<StoredEvent>(&[]);
    assert_eq!(replay, Replay::default());
    assert_eq!(status_of(&replay), DerivedStatus::Interrupted);
    assert!(replay.unfinished_tasks().is_empty());
}

#[test]
fn the_first_success_of_a_task_wins() {
    let replay = Replay::from_events(&log(vec![
        Event::PlanCompleted {
            tasks: vec![task("t1")],
            rejected: vec![],
        },
        succeeded("t1", 1, &["first"]),
        // A fenced attempt that woke up after the task was reassigned and done.
        succeeded("t1", 2, &["second", "third"]),
    ]));
    assert_eq!(replay.completed.len(), 1);
    assert_eq!(replay.completed["t1"], vec![finding("first")]);
    assert_eq!(replay.attempts["t1"], 2);
    assert!(replay.unfinished_tasks().is_empty());
}

#[test]
fn the_first_classification_and_plan_win() {
    let scout = |domain: &str, fallback| Event::ScoutCompleted {
        classification: Classification {
            domain: domain.to_string(),
            ..Classification::default()
        },
        fallback,
    };
    let replay = Replay::from_events(&log(vec![
        scout("software", false),
        Event::PlanCompleted {
            tasks: vec![task("t1"), task("t2")],
            rejected: vec![],
        },
        scout("legal", true),
        Event::PlanCompleted {
            tasks: vec![task("x")],
            rejected: vec![],
        },
    ]));
    let (classification, fallback) = replay.classification.unwrap();
    assert_eq!(classification.domain, "software");
    assert!(!fallback);
    let ids: Vec<String> = replay.plan.unwrap().0.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["t1", "t2"]);
}

#[test]
fn attempts_track_the_highest_number_from_any_attempt_event() {
    let replay = Replay::from_events(&log(vec![
        Event::AttemptStarted {
            task_id: "t1".into(),
            attempt: 1,
            node: "a".into(),
        },
        Event::AttemptFailed {
            task_id: "t1".into(),
            attempt: 1,
            error_class: "timeout".into(),
            error: "slow".into(),
        },
        Event::AttemptStarted {
            task_id: "t1".into(),
            attempt: 2,
            node: "b".into(),
        },
        // Out of order: a late report of attempt 1.
        Event::AttemptFailed {
            task_id: "t1".into(),
            attempt: 1,
            error_class: "timeout".into(),
            error: "slow".into(),
        },
        Event::AttemptFailed {
            task_id: "t2".into(),
            attempt: 4,
            error_class: "transport".into(),
            error: "reset".into(),
        },
    ]));
    assert_eq!(replay.attempts["t1"], 2);
    assert_eq!(replay.attempts["t2"], 4);
    assert!(replay.completed.is_empty());
}

#[test]
fn unfinished_tasks_are_planned_tasks_neither_completed_nor_abandoned() {
    let replay = Replay::from_events(&log(vec![
        Event::PlanCompleted {
            tasks: vec![task("t1"), task("t2"), task("t3"), task("t4")],
            rejected: vec![],
        },
        succeeded("scout", 1, &[]),
        succeeded("t2", 1, &["x"]),
        Event::TaskAbandoned {
            task_id: "t3".into(),
            reason: "circular_fix".into(),
        },
    ]));
    let ids: Vec<&str> = replay
        .unfinished_tasks()
        .iter()
        .map(|t| t.id.as_str())
        .collect();
    assert_eq!(ids, ["t1", "t4"]);
}

#[test]
fn events_after_a_finish_are_folded_in_but_the_finish_stands() {
    let replay = Replay::from_events(&log(vec![
        Event::PlanCompleted {
            tasks: vec![task("t1"), task("t2")],
            rejected: vec![],
        },
        succeeded("t1", 1, &["a"]),
        Event::FlowFinished {
            status: "partial".into(),
            reason: "flow budget exhausted".into(),
        },
        succeeded("t2", 1, &["late"]),
        Event::Note {
            message: "late result recorded".into(),
        },
    ]));
    assert_eq!(
        replay.finished,
        Some(("partial".to_string(), "flow budget exhausted".to_string()))
    );
    assert_eq!(status_of(&replay), DerivedStatus::Partial);
    assert_eq!(replay.completed["t2"], vec![finding("late")]);
    assert_eq!(replay.last_seq, 5);
}

#[test]
fn a_resume_clears_the_finish_and_a_new_finish_sets_it_again() {
    let finished = |status: &str| Event::FlowFinished {
        status: status.into(),
        reason: String::new(),
    };
    let events = log(vec![
        finished("partial"),
        Event::Resumed { from_seq: 1 },
        finished("completed"),
    ]);
    assert_eq!(
        status_of(&Replay::from_events(&events[..1])),
        DerivedStatus::Partial
    );
    assert_eq!(
        status_of(&Replay::from_events(&events[..2])),
        DerivedStatus::Interrupted
    );
    assert_eq!(
        status_of(&Replay::from_events(&events)),
        DerivedStatus::Completed
    );
}

#[test]
fn verification_and_synthesis_take_the_latest_and_unknown_finishes_are_reported() {
    let replay = Replay::from_events(&log(vec![
        Event::VerifyCompleted { judged: vec![] },
        Event::SynthesisCompleted {
            summary: "first".into(),
            action_items: vec![],
            fallback: true,
        },
        Event::SynthesisCompleted {
            summary: "second".into(),
            action_items: vec!["fix it".into()],
            fallback: false,
        },
        Event::FlowFinished {
            status: "done".into(),
            reason: String::new(),
        },
    ]));
    assert_eq!(replay.judged, Some(vec![]));
    assert_eq!(
        replay.synthesis,
        Some(("second".to_string(), vec!["fix it".to_string()], false))
    );
    assert!(matches!(status_of(&replay), DerivedStatus::Corrupt(m) if m.contains("done")));
}

#[test]
fn events_serialise_with_a_snake_case_kind_tag() {
    let json = serde_json::to_value(Event::TaskAbandoned {
        task_id: "t1".into(),
        reason: "circular_fix".into(),
    })
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"kind": "task_abandoned", "task_id": "t1", "reason": "circular_fix"})
    );
}

#[test]
fn the_first_recorded_selection_wins_and_survives_a_round_trip() {
    use quorum_core::flows::selection::{PollOutcome, SelectionDecision, SelectionRecord};
    let record = |persona: &str, poll| SelectionRecord {
        decisions: vec![SelectionDecision {
            persona: persona.into(),
            prefilter: "trigger \"sql\"".into(),
            poll,
            reason: Some("it has queries".into()),
        }],
        ruled_out: vec!["employment_counsel".into()],
        selected: vec![persona.into()],
        refused: Vec::new(),
    };
    let first = record("security_sentinel", PollOutcome::Interested);
    let events = log(vec![
        Event::SelectionRecorded {
            selection: first.clone(),
        },
        // A resumed conductor that planned again must not replace what the report shows.
        Event::SelectionRecorded {
            selection: record("software_developer", PollOutcome::Failed),
        },
    ]);
    let json = serde_json::to_string(&events).unwrap();
    let back: Vec<StoredEvent> = serde_json::from_str(&json).unwrap();
    assert_eq!(Replay::from_events(&back).selection, Some(first));
}

#[test]
fn a_tasks_first_offered_insights_win_and_survive_a_round_trip() {
    use quorum_core::memory::{Insight, Kind, Offered, Provenance};
    let offered = |id: &str| Offered {
        insight: Insight {
            id: id.into(),
            title: "SQL built by concatenation".into(),
            content: "finder found injection in db.py:2 (P1, grounded)".into(),
            tags: vec!["injection".into()],
            confidence: 0.9,
            kind: Kind::Insight,
            importance: 0.72,
            provenance: Provenance {
                flow_id: "f".into(),
                task_id: "t1".into(),
                persona: "finder".into(),
                findings: vec!["t1#0".into()],
                target: "path:/r".into(),
                created_ms: 5,
            },
            access_count: 0,
        },
        score: 0.72,
    };
    let events = log(vec![
        Event::InsightsOffered {
            task_id: "t2".into(),
            insights: vec![offered("I-first")],
        },
        // A later attempt (or a resumed conductor) must offer what the first attempt got.
        Event::InsightsOffered {
            task_id: "t2".into(),
            insights: vec![offered("I-second")],
        },
    ]);
    let json = serde_json::to_string(&events).unwrap();
    let back: Vec<StoredEvent> = serde_json::from_str(&json).unwrap();
    let replay = Replay::from_events(&back);
    assert_eq!(replay.offered.len(), 1);
    assert_eq!(replay.offered["t2"][0].insight.id, "I-first");
}
