//! Self-consistency passes: the deterministic half of asking one task several times and
//! keeping what most of the passes agree on (as Cursor Bugbot does over shuffled diffs).
//!
//! A flow with `consistency:` gets, after planning, each open specialist task (every task but
//! the narrow probes) repeated: pass 1 keeps the planned task and its id, pass k is
//! `{id}.p{k}` with the task's files — and, in a change review, each file's hunks — in another
//! order, fixed by the task id and the pass number so a resumed or re-run review asks the same.
//! Every pass samples at the flow's `consistency.temperature`. The vote on what the passes
//! found is [`crate::review::consensus`]'s.

use crate::flows::flow::Flow;
use crate::task::{Pass, Task};

/// Repeat every open task of `tasks` in the flow's passes; the number of tasks added. Pass
/// copies follow their task in the list, so the plan reads task by task.
pub fn add_passes(flow: &Flow, tasks: &mut Vec<Task>) -> usize {
    let Some(rule) = &flow.consistency else {
        return 0;
    };
    let taken: std::collections::BTreeSet<String> = tasks.iter().map(|t| t.id.clone()).collect();
    let mut out = Vec::with_capacity(tasks.len() * rule.passes as usize);
    let mut added = 0;
    for mut task in std::mem::take(tasks) {
        if task.probe.is_some() || task.pass.is_some() {
            out.push(task);
            continue;
        }
        let pass = |number| Pass {
            of: task.id.clone(),
            number,
            passes: rule.passes,
            min_votes: rule.needed(),
            temperature: rule.temperature,
        };
        task.pass = Some(pass(1));
        let mut copies = Vec::new();
        for k in 2..=rule.passes {
            let id = format!("{}.p{k}", task.id);
            if taken.contains(&id) {
                continue;
            }
            let mut copy = task.clone();
            copy.id = id;
            copy.files = shuffled(&task.files, &task.id, k);
            copy.pass = Some(pass(k));
            copies.push(copy);
        }
        added += copies.len();
        out.push(task);
        out.extend(copies);
    }
    *tasks = out;
    added
}

/// `items` in the order of pass `number` of task `task_id`: pass 1 as given, every other pass
/// sorted by a hash of the task, the pass and the item — a permutation that depends on nothing
/// but its inputs.
pub fn shuffled<T: AsRef<str> + Clone>(items: &[T], task_id: &str, number: u32) -> Vec<T> {
    let mut out = items.to_vec();
    if number > 1 {
        out.sort_by_cached_key(|item| {
            blake3::hash(format!("{task_id}\u{0}{number}\u{0}{}", item.as_ref()).as_bytes())
                .as_bytes()
                .to_owned()
        });
    }
    out
}

/// A unified diff's hunks in the order of pass `number` of task `task_id` (the text before the
/// first `@@` stays first): each hunk keeps its own header, so its line numbers still say where
/// it is.
pub fn shuffled_hunks(diff: &str, task_id: &str, number: u32) -> String {
    if number <= 1 {
        return diff.to_string();
    }
    let mut head = String::new();
    let mut hunks: Vec<String> = Vec::new();
    for line in diff.split_inclusive('\n') {
        if line.starts_with("@@") {
            hunks.push(String::new());
        }
        match hunks.last_mut() {
            Some(h) => h.push_str(line),
            None => head.push_str(line),
        }
    }
    head + &shuffled(&hunks, task_id, number).concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Probe;

    fn task(id: &str, files: &[&str]) -> Task {
        Task::new(id, "p", files, "m")
    }

    /// The shipped quick flow, with `consistency` as given (YAML, empty for none).
    fn flow(consistency: &str) -> Flow {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows/quick.yaml");
        let mut flow = Flow::load(&path).unwrap();
        flow.consistency =
            (!consistency.is_empty()).then(|| serde_yaml::from_str(consistency).unwrap());
        flow
    }

    #[test]
    fn every_open_task_gets_its_passes_right_after_it_and_probes_get_none() {
        let files = ["a.py", "b.py", "c.py", "d.py", "e.py"];
        let mut probe = task("probe-1", &["a.py"]);
        probe.probe = Some(Box::new(Probe {
            rule: "h/p".into(),
            question: "q".into(),
            title: "t".into(),
            severity: "P2".into(),
            category: "c".into(),
            file: "a.py".into(),
            line: 1,
            start: 1,
            end: 2,
        }));
        let mut tasks = vec![task("t1", &files), task("t2", &["x.py"]), probe];
        let added = add_passes(&flow("{passes: 3}"), &mut tasks);
        assert_eq!(added, 4);
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            ["t1", "t1.p2", "t1.p3", "t2", "t2.p2", "t2.p3", "probe-1"]
        );
        assert_eq!(tasks[0].files, files, "pass 1 keeps the planned order");
        for t in &tasks[..3] {
            let p = t.pass.as_ref().unwrap();
            assert_eq!((p.of.as_str(), p.passes, p.min_votes), ("t1", 3, 2));
            let mut sorted = t.files.clone();
            sorted.sort();
            assert_eq!(sorted, files, "a pass sees the same files");
        }
        assert_ne!(
            tasks[1].files, tasks[0].files,
            "pass 2 reads them in another order"
        );
        assert_ne!(tasks[2].files, tasks[1].files, "and pass 3 in yet another");
        assert!(
            tasks[6].pass.is_none(),
            "a probe is one narrow question, asked once"
        );
        // Deterministic: the same plan gives the same passes.
        let mut again = vec![task("t1", &files), task("t2", &["x.py"])];
        add_passes(&flow("{passes: 3}"), &mut again);
        assert_eq!(again[1].files, tasks[1].files);
        // No consistency: nothing changes.
        let mut plain = vec![task("t1", &files)];
        assert_eq!(add_passes(&flow(""), &mut plain), 0);
        assert!(plain[0].pass.is_none());
    }

    #[test]
    fn hunks_are_reordered_whole_with_their_headers() {
        let diff = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n@@ -10,2 +10,2 @@\n-c\n+d\n@@ -20 +20 @@\n-e\n+f\n";
        assert_eq!(shuffled_hunks(diff, "t1", 1), diff);
        let orders: std::collections::BTreeSet<String> =
            (2..8).map(|k| shuffled_hunks(diff, "t1", k)).collect();
        assert!(orders.len() > 1, "passes see the hunks in different orders");
        for o in &orders {
            assert!(o.starts_with("--- a/x\n+++ b/x\n@@"), "{o}");
            for hunk in [
                "@@ -1,2 +1,2 @@\n-a\n+b\n",
                "@@ -10,2 +10,2 @@\n-c\n+d\n",
                "@@ -20 +20 @@\n-e\n+f\n",
            ] {
                assert!(o.contains(hunk), "{o}");
            }
            assert_eq!(o.len(), diff.len());
        }
    }
}
