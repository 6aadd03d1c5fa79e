//! A plan bounded by the material: how many specialist tasks what there is to read is worth,
//! which personas the material gives a reason to be on it, and the planner's answer fitted to
//! both.
//!
//! The planner is a model's judgment; whether its plan is sane for the material is not. Given a
//! 79-line service, a small model filled its bound with twenty tasks, legal and financial
//! reviewers among them and four personas twice. Here: the task budget grows with the
//! material's lines (logarithmically: a handful for a small service, the flow's `max_tasks`
//! for a large tree) and the scout's review focus, and the flow's `min_tasks`/`max_tasks` stay
//! the ceiling; a persona whose domain fits neither the scout's classification nor any of its
//! triggers occurs in the material is refused (unless the flow names it); two tasks of one
//! persona over overlapping files become one; and what is over the budget is left out, each
//! persona's first task kept before anyone's second. Every refusal is said, with its reason.

use crate::catalog::{Catalog, Persona};
use crate::flows::flow::Flow;
use crate::flows::selection::{contains_phrase, signal_text, Refusal};
use crate::pack::ContextPack;
use crate::task::{Classification, RejectedTask, Task};
use std::collections::BTreeSet;

/// How many tasks the material is worth, and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBudget {
    /// At most this many planned tasks.
    pub tasks: usize,
    /// The planner is asked for at least this many (the flow's floor, never above `tasks`).
    pub min_tasks: usize,
    pub files: usize,
    pub lines: u64,
}

impl PlanBudget {
    /// The budget of `pack` under `flow`: 2 + 1.5·log2(1 + lines/50) tasks (a 79-line service
    /// 4, a 1,000-line project 9, 10,000 lines 14, 100,000 lines 18), one more per two items of
    /// the scout's review focus (at most 2), within the flow's `max_tasks`.
    pub fn for_material(flow: &Flow, pack: &ContextPack, classification: &Classification) -> Self {
        let lines: u64 = pack.files.values().map(|f| f.line_count as u64).sum();
        let by_lines = 2.0 + 1.5 * (1.0 + lines as f64 / 50.0).log2();
        let focus = (classification.review_focus.len() / 2).min(2);
        let max = flow.parameters.max_tasks.max(1);
        let tasks = (by_lines.round() as usize + focus).clamp(1, max);
        PlanBudget {
            tasks,
            min_tasks: flow.parameters.min_tasks.clamp(1, tasks),
            files: pack.len(),
            lines,
        }
    }

    /// The sentence the planner reads: what the material is and what that allows.
    pub fn describe(&self) -> String {
        format!(
            "The material is {} files, {} lines: plan between {} and {} tasks, no more than it \
             needs; give a persona one task (not two over the same files), and only a persona \
             the material gives a reason to be on it.",
            self.files, self.lines, self.min_tasks, self.tasks
        )
    }
}

/// The persona domains that fit a classified domain ("general" fits everything, and a mixed
/// or unknown domain fits every persona).
fn domain_fits(persona_domain: &str, classified: &str) -> bool {
    let fits: &[&str] = match classified {
        "software" => &["software", "security", "operations", "general"],
        "legal" => &["legal", "documents", "general"],
        "financial" => &["financial", "documents", "general"],
        "scientific" => &["scientific", "documents", "general"],
        "documentation" => &["documents", "product", "general"],
        _ => return true,
    };
    fits.contains(&persona_domain)
}

/// Why `persona` has no business on this material, if it has none: its domain fits neither
/// the scout's classification and none of its triggers occurs in the signals (`signals` as
/// [`signal_text`] makes them).
pub fn irrelevant(
    persona: &Persona,
    classification: &Classification,
    signals: &str,
) -> Option<String> {
    if domain_fits(persona.domain.trim(), classification.domain.trim()) {
        return None;
    }
    if persona
        .triggers
        .iter()
        .any(|t| contains_phrase(signals, &t.trim().to_lowercase()))
    {
        return None;
    }
    Some(format!(
        "its domain ({}) does not fit the material ({}) and none of its triggers occurs in it",
        persona.domain.trim(),
        classification.domain.trim()
    ))
}

/// What fitting a plan decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fitted {
    pub tasks: Vec<Task>,
    pub rejected: Vec<RejectedTask>,
    /// Personas refused for this material (one entry a persona).
    pub refused: Vec<Refusal>,
}

/// Fit the planner's `tasks` to the material: refuse personas with no business here (the
/// flow's own named personas are never refused), merge one persona's tasks over overlapping
/// files, and keep at most `budget.tasks`, each persona's first task before anyone's second.
pub fn fit_plan(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    classification: &Classification,
    budget: &PlanBudget,
    tasks: Vec<Task>,
) -> Fitted {
    let signals = signal_text(pack, classification);
    let named: BTreeSet<&str> = flow.named_personas().into_iter().map(|(_, p)| p).collect();
    let mut out = Fitted::default();
    let mut kept: Vec<Task> = Vec::new();
    for t in tasks {
        let why = catalog
            .personas
            .get(&t.persona)
            .filter(|_| !named.contains(t.persona.as_str()))
            .and_then(|p| irrelevant(p, classification, &signals));
        if let Some(why) = why {
            if !out.refused.iter().any(|r| r.persona == t.persona) {
                out.refused.push(Refusal {
                    persona: t.persona.clone(),
                    reason: why.clone(),
                });
            }
            out.rejected.push(RejectedTask {
                id: t.id,
                persona: t.persona,
                reason: format!("refused for this material: {why}"),
            });
            continue;
        }
        // One persona over overlapping files is one task: the first takes the other in.
        if let Some(into) = kept
            .iter_mut()
            .find(|k| k.persona == t.persona && k.files.iter().any(|f| t.files.contains(f)))
        {
            merge_into(into, &t);
            out.rejected.push(RejectedTask {
                id: t.id,
                persona: t.persona,
                reason: format!("merged into {} (same persona, overlapping files)", into.id),
            });
            continue;
        }
        kept.push(t);
    }
    // Over the budget: each persona's first task before anyone's second, in planner order.
    if kept.len() > budget.tasks {
        let mut seen = BTreeSet::new();
        let mut order: Vec<(bool, usize)> = kept
            .iter()
            .enumerate()
            .map(|(i, t)| (!seen.insert(t.persona.clone()), i))
            .collect();
        order.sort();
        let keep: BTreeSet<usize> = order.iter().take(budget.tasks).map(|(_, i)| *i).collect();
        let mut fitted = Vec::new();
        for (i, t) in kept.into_iter().enumerate() {
            if keep.contains(&i) {
                fitted.push(t);
            } else {
                out.rejected.push(RejectedTask {
                    id: t.id,
                    persona: t.persona,
                    reason: format!(
                        "over the plan's budget for this material ({} tasks for {} files, {} lines)",
                        budget.tasks, budget.files, budget.lines
                    ),
                });
            }
        }
        kept = fitted;
    }
    out.tasks = kept;
    out
}

/// `into` takes `other`'s files (in order, once), tools and mandate.
fn merge_into(into: &mut Task, other: &Task) {
    for f in &other.files {
        if !into.files.contains(f) {
            into.files.push(f.clone());
        }
    }
    for t in &other.tools {
        if !into.tools.contains(t) {
            into.tools.push(t.clone());
        }
    }
    let (a, b) = (into.mandate.trim(), other.mandate.trim());
    if !b.is_empty() && a != b {
        into.mandate = if a.is_empty() {
            b.to_string()
        } else {
            format!("{a} Also: {b}")
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::flow::Flow;

    fn root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn service() -> ContextPack {
        // Six files, 79 lines of a small Python service.
        let files = (0..6)
            .map(|i| {
                let n = if i < 1 { 14 } else { 13 };
                let body: String = (0..n).map(|j| format!("x_{i}_{j} = {j}\n")).collect();
                (format!("svc/mod{i}.py"), body)
            })
            .collect();
        ContextPack::from_files("/svc".into(), None, files)
    }

    fn software() -> Classification {
        Classification {
            domain: "software".into(),
            languages: vec!["python".into()],
            ..Classification::default()
        }
    }

    fn task(id: &str, persona: &str, files: &[&str]) -> Task {
        serde_json::from_value(serde_json::json!({
            "id": id, "persona": persona, "files": files, "mandate": format!("mandate of {id}"),
            "tools": []
        }))
        .unwrap()
    }

    #[test]
    fn the_budget_grows_with_the_material_within_the_flows_bounds() {
        let flow = Flow::load(&root().join("flows/review.yaml")).unwrap();
        let b = PlanBudget::for_material(&flow, &service(), &software());
        assert_eq!(b.lines, 79);
        assert_eq!(b.tasks, 4, "{b:?}");
        assert_eq!(
            b.min_tasks, 4,
            "the flow's floor never above the material's budget"
        );
        let big: Vec<(String, String)> = (0..400)
            .map(|i| (format!("d{}/f{i}.rs", i % 20), "fn f() {}\n".repeat(2500)))
            .collect();
        let big = ContextPack::from_files("/big".into(), None, big);
        let b = PlanBudget::for_material(&flow, &big, &software());
        assert_eq!(
            b.tasks, 20,
            "a million lines get the flow's max_tasks: {b:?}"
        );
        let quick = Flow::load(&root().join("flows/quick.yaml")).unwrap();
        assert_eq!(PlanBudget::for_material(&quick, &big, &software()).tasks, 2);
    }

    #[test]
    fn a_twenty_task_plan_for_six_files_is_fitted_to_a_handful() {
        let flow = Flow::load(&root().join("flows/review.yaml")).unwrap();
        let catalog = Catalog::load(&root().join("personas")).unwrap();
        let pack = service();
        let budget = PlanBudget::for_material(&flow, &pack, &software());
        let personas = [
            "security_sentinel",
            "financial_analyst",
            "ip_counsel",
            "principal_engineer",
            "software_developer",
            "security_sentinel",
            "test_engineer",
            "ip_counsel",
            "performance_engineer",
            "principal_engineer",
        ];
        let tasks: Vec<Task> = (0..20)
            .map(|i| {
                let p = personas[i % personas.len()];
                let f = format!("svc/mod{}.py", i % 6);
                task(&format!("t{i}"), p, &[f.as_str(), "svc/mod0.py"])
            })
            .collect();
        let fitted = fit_plan(&flow, &catalog, &pack, &software(), &budget, tasks);
        assert!(fitted.tasks.len() <= budget.tasks, "{:?}", fitted.tasks);
        // No persona twice over the same files.
        let mut seen = BTreeSet::new();
        for t in &fitted.tasks {
            assert!(seen.insert(t.persona.clone()), "{} twice", t.persona);
        }
        // Legal and financial reviewers of a software service are refused, saying why.
        for p in ["financial_analyst", "ip_counsel"] {
            assert!(fitted.tasks.iter().all(|t| t.persona != p));
            let r = fitted.refused.iter().find(|r| r.persona == p).unwrap();
            assert!(
                r.reason.contains("does not fit the material (software)"),
                "{r:?}"
            );
        }
        // Every dropped task is accounted for.
        assert_eq!(fitted.tasks.len() + fitted.rejected.len(), 20);
        assert!(fitted
            .rejected
            .iter()
            .any(|r| r.reason.starts_with("merged into")));
    }

    #[test]
    fn a_named_persona_or_a_trigger_in_the_material_keeps_a_persona() {
        let catalog = Catalog::load(&root().join("personas")).unwrap();
        let legal = &catalog.personas["ip_counsel"];
        let signals = "src app py\nthis project is under the apache license\n";
        assert!(
            irrelevant(legal, &software(), signals).is_none(),
            "a trigger occurs"
        );
        assert!(irrelevant(legal, &software(), "src app py\n").is_some());
        let mixed = Classification {
            domain: "mixed".into(),
            ..Classification::default()
        };
        assert!(
            irrelevant(legal, &mixed, "").is_none(),
            "a mixed target fits everyone"
        );
    }
}
