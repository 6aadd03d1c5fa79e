//! Narrow probes: the deterministic half of asking a small model one narrow question at a time.
//!
//! A flow with `probes:` gets, after planning, one task per (code unit, question) pair the
//! catalog's heuristic probes select: a probe's pattern matched on a line of a file in one of
//! its languages, the unit being the lines around the match, the question the probe's yes/no
//! question. Each becomes a specialist task of a persona that lists the heuristic (one already
//! on the plan first, else the first by name), with no tools and a [`Probe`] saying what to ask;
//! the runtime asks it in one short schema-bound call, and a "yes" with a quote is a candidate
//! finding that grounding and the verifier judge like any other.
//!
//! Selection is bounded (`probes.max`) and spread: the matches are taken round-robin over the
//! probes that matched, in catalog order, so one frequent pattern cannot take every slot.

use crate::catalog::{Catalog, ProbeSpec};
use crate::flows::flow::Flow;
use crate::flows::plan::{engine_task, Scope};
use crate::pack::ContextPack;
use crate::task::{Probe, RejectedTask, Task};
use std::collections::BTreeSet;

/// What a probe task's `origin` starts with.
pub const PROBE_ORIGIN: &str = "probe";

/// One pattern match: the probe, where it matched.
struct Match<'a> {
    heuristic: &'a str,
    spec: &'a ProbeSpec,
    file: &'a str,
    line: u32,
    lines: u32,
}

/// Every match of `spec` in the pack, in path and line order.
fn matches<'a>(heuristic: &'a str, spec: &'a ProbeSpec, pack: &'a ContextPack) -> Vec<Match<'a>> {
    let Ok(re) = regex::Regex::new(&spec.pattern) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for f in pack.files.values() {
        if !spec
            .languages
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&f.language))
        {
            continue;
        }
        for (i, line) in f.content.lines().enumerate() {
            if re.is_match(line) {
                out.push(Match {
                    heuristic,
                    spec,
                    file: &f.path,
                    line: i as u32 + 1,
                    lines: f.line_count,
                });
            }
        }
    }
    out
}

/// The persona a heuristic's probes are asked as: one already on the plan, else the first in
/// the catalog that lists the heuristic.
fn persona_for<'a>(catalog: &'a Catalog, heuristic: &str, tasks: &[Task]) -> Option<&'a str> {
    let listing: Vec<&str> = catalog
        .personas
        .values()
        .filter(|p| p.heuristics.iter().any(|h| h == heuristic))
        .map(|p| p.name.as_str())
        .collect();
    listing
        .iter()
        .find(|p| tasks.iter().any(|t| t.persona == **p))
        .or(listing.first())
        .copied()
}

/// Add the flow's probe tasks to `tasks`; returns the ones that could not be built.
pub fn add_probes(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Vec<RejectedTask> {
    let Some(rule) = flow.probes.as_ref().filter(|r| r.max > 0) else {
        return Vec::new();
    };
    // Each probe's matches, in catalog order, then taken round-robin.
    let mut per_probe: Vec<std::collections::VecDeque<Match<'_>>> = catalog
        .heuristics
        .values()
        .flat_map(|h| h.probes.iter().map(move |p| (h.name.as_str(), p)))
        .map(|(h, p)| matches(h, p, pack).into())
        .filter(|m: &std::collections::VecDeque<Match<'_>>| !m.is_empty())
        .collect();
    let mut chosen: Vec<Match<'_>> = Vec::new();
    let mut seen: BTreeSet<(String, String, u32)> = BTreeSet::new();
    while chosen.len() < rule.max && per_probe.iter().any(|q| !q.is_empty()) {
        for queue in per_probe.iter_mut() {
            if chosen.len() >= rule.max {
                break;
            }
            while let Some(m) = queue.pop_front() {
                let key = (
                    format!("{}/{}", m.heuristic, m.spec.id),
                    m.file.to_string(),
                    m.line,
                );
                if seen.insert(key) {
                    chosen.push(m);
                    break;
                }
            }
        }
    }
    let scope = Scope {
        catalog,
        pack,
        stage_tools,
    };
    let mut refused = Vec::new();
    for (n, m) in chosen.into_iter().enumerate() {
        let Some(persona) = persona_for(catalog, m.heuristic, tasks) else {
            continue;
        };
        let rule_name = format!("{}/{}", m.heuristic, m.spec.id);
        let probe = Probe {
            rule: rule_name.clone(),
            question: m.spec.question.trim().to_string(),
            title: m.spec.title.trim().to_string(),
            severity: m.spec.severity.clone(),
            category: m.spec.category.clone(),
            file: m.file.to_string(),
            line: m.line,
            start: m.line.saturating_sub(rule.context_lines).max(1),
            end: (m.line + rule.context_lines).min(m.lines.max(m.line)),
        };
        let origin = format!("{PROBE_ORIGIN}: {rule_name} at {}:{}", m.file, m.line);
        match engine_task(
            scope,
            format!("p{}", n + 1),
            persona,
            &[m.file.to_string()],
            &probe.question,
            origin,
        ) {
            Ok(mut t) => {
                // One question about the lines shown: nothing to look up.
                t.tools.clear();
                t.probe = Some(Box::new(probe));
                tasks.push(t);
            }
            Err(r) => refused.push(r),
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::flow::Probes;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn probes_are_chosen_from_pattern_matches_round_robin_and_bounded() {
        let catalog = Catalog::load(&root().join("personas")).unwrap();
        let pack = ContextPack::snapshot(
            &root().join("tests/fixtures/code_project"),
            &Default::default(),
        )
        .unwrap();
        let mut flow = Flow::load(&root().join("flows/quick.yaml")).unwrap();
        flow.probes = Some(Probes {
            max: 4,
            context_lines: 3,
            max_output_tokens: 100,
        });
        let mut tasks = Vec::new();
        let refused = add_probes(&flow, &catalog, &pack, &["file_read".into()], &mut tasks);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(tasks.len(), 4, "bounded by probes.max");
        let rules: BTreeSet<&str> = tasks
            .iter()
            .map(|t| t.probe.as_ref().unwrap().rule.as_str())
            .collect();
        assert_eq!(
            rules.len(),
            4,
            "one match per probe before any second: {rules:?}"
        );
        for t in &tasks {
            let p = t.probe.as_ref().unwrap();
            assert!(t.tools.is_empty());
            assert_eq!(t.files, std::slice::from_ref(&p.file));
            assert!(p.start <= p.line && p.line <= p.end && p.end - p.start <= 6);
            assert!(t.origin.as_deref().unwrap().starts_with("probe: "));
            let persona = &catalog.personas[&t.persona];
            let heuristic = p.rule.split('/').next().unwrap();
            assert!(persona.heuristics.iter().any(|h| h == heuristic));
        }
        // Deterministic: the same pack and catalog choose the same probes.
        let mut again = Vec::new();
        add_probes(&flow, &catalog, &pack, &["file_read".into()], &mut again);
        assert_eq!(tasks, again);
        // Without `probes:` a flow adds none.
        flow.probes = None;
        let mut none = Vec::new();
        add_probes(&flow, &catalog, &pack, &[], &mut none);
        assert!(none.is_empty());
    }
}
