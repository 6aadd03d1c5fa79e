//! Each repository's insights in the node database: kept with provenance, offered top-k with
//! an access counted, bounded, pruned, and separate per repository.

use quorum_core::memory::{Insight, Kind, Provenance, BASE_RATE, PER_REPOSITORY};
use quorum_store::DataDir;

const DAY: u64 = 86_400_000;

fn insight(id: &str, importance: f64, created_ms: u64) -> Insight {
    Insight {
        id: id.into(),
        title: format!("title {id}"),
        content: "finder found x in a.py:1 (P1, CONFIRMED)".into(),
        tags: vec!["x".into()],
        confidence: 1.0,
        kind: Kind::Insight,
        importance,
        provenance: Provenance {
            flow_id: "flow-a".into(),
            task_id: "t1".into(),
            persona: "finder".into(),
            findings: vec!["F001".into()],
            target: "path:/repo".into(),
            created_ms,
        },
        access_count: 0,
    }
}

#[test]
fn insights_are_kept_per_repository_offered_with_an_access_and_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::new(tmp.path());
    let node = data.open_node().unwrap();
    let now = 100 * DAY;
    node.record_insights(
        "path:/repo",
        vec![insight("a", 0.8, now), insight("b", 0.2, now - 50 * DAY)],
        now,
        BASE_RATE,
    )
    .unwrap();
    assert!(node.insights("path:/other").unwrap().is_empty());

    let offered = node
        .offer_insights("path:/repo", now, 1, BASE_RATE)
        .unwrap();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].insight.id, "a");
    assert_eq!(offered[0].insight.provenance.flow_id, "flow-a");
    let kept = node.insights("path:/repo").unwrap();
    let a = kept.iter().find(|i| i.id == "a").unwrap();
    let b = kept.iter().find(|i| i.id == "b").unwrap();
    assert_eq!((a.access_count, b.access_count), (1, 0));
    assert!(node
        .offer_insights("path:/other", now, 5, BASE_RATE)
        .unwrap()
        .is_empty());

    // Across a reopen.
    drop(node);
    let node = data.open_node().unwrap();
    assert_eq!(node.insights("path:/repo").unwrap().len(), 2);
    // "b" is 50 days old: pruned by age; "a" stays.
    assert_eq!(
        node.prune_insights(now, BASE_RATE, 0.0, Some(30 * DAY))
            .unwrap(),
        1
    );
    assert_eq!(node.insights("path:/repo").unwrap()[0].id, "a");
    // A threshold above every score takes the rest.
    assert_eq!(node.prune_insights(now, BASE_RATE, 5.0, None).unwrap(), 1);
    assert!(node.insights("path:/repo").unwrap().is_empty());
}

#[test]
fn a_repository_holds_a_bounded_number_of_insights() {
    let tmp = tempfile::tempdir().unwrap();
    let node = DataDir::new(tmp.path()).open_node().unwrap();
    let many: Vec<Insight> = (0..PER_REPOSITORY + 5)
        .map(|n| insight(&format!("n{n}"), 0.5, n as u64))
        .collect();
    let held = node
        .record_insights("path:/repo", many, DAY, BASE_RATE)
        .unwrap();
    assert_eq!(held, PER_REPOSITORY);
}
