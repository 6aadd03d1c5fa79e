//! Tier 0 of two-tier persona selection (seed 002 §4.2): a deterministic, free prefilter.
//!
//! A reviewer survives when one of its declared `triggers` occurs, as whole words, in the
//! review's signals (paths, languages, file kinds, the scout's classification, the documents'
//! text). The personas the flow itself names are an unconditional floor, and a reviewer that
//! declares no trigger cannot be ruled out, so it survives: selection fails open. Tier 1 (the
//! interest poll) is a model call and lives in the runtime.

use crate::catalog::Catalog;
use crate::flows::flow::Flow;
use crate::pack::{ContextPack, FileKind};
use crate::task::Classification;

/// Bound on the document text read for signals, so a huge pack costs a bounded scan.
const MAX_SIGNAL_CHARS: usize = 400_000;

/// Why one persona is a candidate after the prefilter.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub persona: String,
    /// "named by the flow", "no triggers declared", or `trigger "sql"`.
    pub reason: String,
    /// Floor members are not polled: the flow decided.
    pub floor: bool,
}

/// What the interest poll (tier 1) made of one prefilter survivor.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PollOutcome {
    /// Named by the flow: seated without a poll.
    Floor,
    /// The flow polls no one: the prefilter alone decided.
    NotPolled,
    Interested,
    Declined,
    /// The poll erred, timed out or answered unreadably: kept (fail open).
    Failed,
    /// No model could take the poll: kept (fail open).
    NoModel,
}

impl PollOutcome {
    /// Whether the persona stays on the roster: only a clear "no" takes it off.
    pub fn keeps(self) -> bool {
        self != PollOutcome::Declined
    }
}

/// One prefilter survivor and what became of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SelectionDecision {
    pub persona: String,
    /// Why the prefilter kept it ([`Candidate::reason`]).
    pub prefilter: String,
    pub poll: PollOutcome,
    /// The persona's own one-sentence answer to the poll, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Two-tier selection as it ran, recorded before the plan and shown in report.json: every
/// survivor's decision, the reviewers the prefilter ruled out, and the roster the planner got;
/// and, for any flow, the personas the plan's fit refused for this material
/// (`flows::fit::fit_plan`).
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct SelectionRecord {
    pub decisions: Vec<SelectionDecision>,
    /// Reviewers none of whose triggers occur in the material, in catalog order.
    pub ruled_out: Vec<String>,
    /// The planner's roster, in catalog order.
    pub selected: Vec<String>,
    /// Personas the planner chose that the material gives no reason to be on it, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refusal>,
}

/// A persona refused for this material, and why.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Refusal {
    pub persona: String,
    pub reason: String,
}

impl SelectionRecord {
    /// The record of a selection: the roster is every decision that keeps its persona, in
    /// the catalog's order; everything else in the catalog was ruled out by the prefilter.
    pub fn new(catalog: &Catalog, decisions: Vec<SelectionDecision>) -> SelectionRecord {
        let mut decisions = decisions;
        let order: Vec<&str> = catalog.reviewers().map(|p| p.name.as_str()).collect();
        let at = |n: &str| order.iter().position(|o| *o == n).unwrap_or(usize::MAX);
        decisions.sort_by_key(|d| at(&d.persona));
        let selected = decisions
            .iter()
            .filter(|d| d.poll.keeps())
            .map(|d| d.persona.clone())
            .collect();
        let ruled_out = order
            .iter()
            .filter(|n| !decisions.iter().any(|d| d.persona == **n))
            .map(|n| n.to_string())
            .collect();
        SelectionRecord {
            decisions,
            ruled_out,
            selected,
            refused: Vec::new(),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `hay` as whole words.
pub fn contains_phrase(hay: &str, needle: &str) -> bool {
    !needle.is_empty()
        && hay.match_indices(needle).any(|(i, _)| {
            let before = hay[..i].chars().next_back();
            let after = hay[i + needle.len()..].chars().next();
            !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
        })
}

/// The lowercase text the prefilter matches triggers against.
pub fn signal_text(pack: &ContextPack, classification: &Classification) -> String {
    let mut s = String::new();
    for v in [&classification.domain]
        .into_iter()
        .chain(&classification.languages)
        .chain(&classification.frameworks)
        .chain(&classification.content_types)
        .chain(&classification.review_focus)
    {
        s.push_str(v);
        s.push('\n');
    }
    for f in pack.files.values() {
        // Path components and extension as words: "src/auth.py" -> "src auth py".
        s.push_str(&f.path.replace(['/', '.', '-'], " "));
        s.push(' ');
        s.push_str(&f.language);
        s.push('\n');
    }
    for f in pack.files.values().filter(|f| f.kind == FileKind::Doc) {
        if s.len() >= MAX_SIGNAL_CHARS {
            break;
        }
        let room = MAX_SIGNAL_CHARS - s.len();
        let text: String = f.content.chars().take(room).collect();
        s.push_str(&text);
        s.push('\n');
    }
    s.to_lowercase()
}

/// The reviewers that survive the prefilter, in catalog order.
pub fn prefilter(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    classification: &Classification,
) -> Vec<Candidate> {
    let text = signal_text(pack, classification);
    let named: Vec<&str> = flow.named_personas().into_iter().map(|(_, p)| p).collect();
    let mut out = Vec::new();
    for p in catalog.reviewers() {
        let candidate = |reason: String, floor: bool| Candidate {
            persona: p.name.clone(),
            reason,
            floor,
        };
        if named.contains(&p.name.as_str()) {
            out.push(candidate("named by the flow".into(), true));
        } else if p.triggers.is_empty() {
            out.push(candidate("no triggers declared".into(), false));
        } else if let Some(t) = p
            .triggers
            .iter()
            .find(|t| contains_phrase(&text, &t.trim().to_lowercase()))
        {
            out.push(candidate(format!("trigger {:?}", t.trim()), false));
        }
    }
    out
}

/// The signal text of one file: its path words and language, and for a document its text (up
/// to a bound), lowercase — what [`slice_for`] matches a persona's triggers against.
fn file_signals(f: &crate::pack::PackFile) -> String {
    let mut s = f.path.replace(['/', '.', '-'], " ");
    s.push(' ');
    s.push_str(&f.language);
    if f.kind == FileKind::Doc {
        s.push('\n');
        s.extend(f.content.chars().take(MAX_SIGNAL_CHARS / 8));
    }
    s.to_lowercase()
}

/// The files a selected persona reviews when selection replaces the planner (seed 002 §4.2:
/// a file reaches a discretionary specialist only when the file's own signals meet the
/// specialist's): those in whose signals one of its triggers occurs. Every file — a member
/// the flow named, a persona without triggers, or one whose triggers met only the review-wide
/// signals (the scout's classification) — when no file is singled out. At most `max_files`,
/// in path order.
pub fn slice_for(
    persona: &crate::catalog::Persona,
    floor: bool,
    pack: &ContextPack,
    max_files: usize,
) -> Vec<String> {
    let triggers: Vec<String> = persona
        .triggers
        .iter()
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    let matched: Vec<String> = if floor || triggers.is_empty() {
        Vec::new()
    } else {
        pack.files
            .values()
            .filter(|f| {
                let text = file_signals(f);
                triggers.iter().any(|t| contains_phrase(&text, t))
            })
            .map(|f| f.path.clone())
            .collect()
    };
    let files = if matched.is_empty() {
        pack.files.keys().cloned().collect()
    } else {
        matched
    };
    files.into_iter().take(max_files.max(1)).collect()
}

/// The plan when selection replaces the planner: one task per selected persona (catalog
/// order), on its [`slice_for`], with its own mandate; built through the planner's validation
/// so tools and files are checked the same way. A persona the catalog cannot seat is returned
/// as rejected, with why.
pub fn tasks_from_selection(
    record: &SelectionRecord,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    max_files: usize,
) -> (Vec<crate::task::Task>, Vec<crate::task::RejectedTask>) {
    let mut tasks = Vec::new();
    let mut rejected = Vec::new();
    for d in record.decisions.iter().filter(|d| d.poll.keeps()) {
        let Ok(p) = catalog.get(&d.persona) else {
            continue;
        };
        let files = slice_for(p, d.poll == PollOutcome::Floor, pack, max_files);
        let scope = crate::flows::plan::Scope {
            catalog,
            pack,
            stage_tools,
        };
        match crate::flows::plan::engine_task(
            scope,
            format!("s{}", tasks.len() + 1),
            &p.name,
            &files,
            p.mandate.trim(),
            format!("selection: {}", d.prefilter),
        ) {
            Ok(t) => tasks.push(t),
            Err(r) => rejected.push(r),
        }
    }
    (tasks, rejected)
}

/// How many personas the planner sees described; the rest are named in one line. A small
/// model reading a long catalog picks from its top, so the top must be what fits the material.
pub const PLANNER_CATALOG_DESCRIBED: usize = 16;

/// The reviewers in the order the planner should read them: most related to this material
/// first — triggers that occur in its signals (two points each, up to three), then the
/// scout's domain (two points) — and catalog order within a score. Deterministic; a persona
/// nothing matches keeps its place at the end rather than leaving the catalog.
pub fn rank_for_planner<'c>(
    catalog: &'c Catalog,
    pack: &ContextPack,
    classification: &Classification,
    roster: Option<&[String]>,
) -> Vec<&'c crate::catalog::Persona> {
    let text = signal_text(pack, classification);
    let domain = classification.domain.trim().to_lowercase();
    let mut scored: Vec<(usize, usize, &crate::catalog::Persona)> = catalog
        .reviewers()
        .filter(|p| roster.is_none_or(|r| r.contains(&p.name)))
        .enumerate()
        .map(|(i, p)| {
            let hits = p
                .triggers
                .iter()
                .filter(|t| contains_phrase(&text, &t.trim().to_lowercase()))
                .count()
                .min(3);
            let same_domain = !domain.is_empty() && p.domain.trim().to_lowercase() == domain;
            (2 * hits + if same_domain { 2 } else { 0 }, i, p)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, _, p)| p).collect()
}

/// The planner's catalog section: the most related personas described, the rest named.
pub fn planner_catalog(ranked: &[&crate::catalog::Persona]) -> String {
    let mut s = String::new();
    for p in ranked.iter().take(PLANNER_CATALOG_DESCRIBED) {
        s.push_str(&format!(
            "- {} [{}]: {}
",
            p.name,
            p.domain,
            p.summary.trim()
        ));
    }
    if ranked.len() > PLANNER_CATALOG_DESCRIBED {
        let rest: Vec<&str> = ranked[PLANNER_CATALOG_DESCRIBED..]
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        s.push_str(&format!(
            "- Also in the catalog, less related to this material: {}\n",
            rest.join(", ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn without_a_planner_each_selected_persona_reviews_the_files_its_triggers_meet() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let catalog = Catalog::load(&repo.join("personas")).unwrap();
        let pack = ContextPack::from_files(
            "/r".into(),
            None,
            vec![
                ("src/db.py".into(), "def q(): pass\n".into()),
                ("src/auth.py".into(), "def login(): pass\n".into()),
                ("docs/guide.md".into(), "# Guide\nHow to log in.\n".into()),
            ],
        );
        let mut p = catalog.get("software_developer").unwrap().clone();
        p.triggers = vec!["auth".into(), "Guide".into()];
        assert_eq!(
            slice_for(&p, false, &pack, 40),
            ["docs/guide.md", "src/auth.py"],
            "a path word, a document's text; not db.py"
        );
        assert_eq!(
            slice_for(&p, true, &pack, 40).len(),
            3,
            "a floor member sees all"
        );
        p.triggers = vec!["kubernetes".into()];
        assert_eq!(
            slice_for(&p, false, &pack, 2),
            ["docs/guide.md", "src/auth.py"],
            "no file singled out: all, bounded"
        );
        let record = SelectionRecord::new(
            &catalog,
            vec![
                SelectionDecision {
                    persona: "software_developer".into(),
                    prefilter: "named by the flow".into(),
                    poll: PollOutcome::Floor,
                    reason: None,
                },
                SelectionDecision {
                    persona: "security_sentinel".into(),
                    prefilter: "trigger \"auth\"".into(),
                    poll: PollOutcome::Declined,
                    reason: None,
                },
            ],
        );
        let tools = vec!["file_read".to_string()];
        let (tasks, rejected) = tasks_from_selection(&record, &catalog, &pack, &tools, 40);
        assert!(rejected.is_empty(), "{rejected:?}");
        assert_eq!(tasks.len(), 1, "the declined persona gets no task");
        assert_eq!(tasks[0].persona, "software_developer");
        assert_eq!(tasks[0].files.len(), 3);
        assert_eq!(
            tasks[0].origin.as_deref(),
            Some("selection: named by the flow")
        );
    }

    #[test]
    fn a_selection_record_keeps_all_but_the_declined_and_names_what_the_prefilter_ruled_out() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let catalog = Catalog::load(&repo.join("personas")).unwrap();
        let names: Vec<String> = catalog.reviewers().map(|p| p.name.clone()).collect();
        let d = |i: usize, poll| SelectionDecision {
            persona: names[i].clone(),
            prefilter: "trigger \"sql\"".into(),
            poll,
            reason: None,
        };
        // Given out of order: the record is in catalog order whatever order polls finished.
        let rec = SelectionRecord::new(
            &catalog,
            vec![
                d(4, PollOutcome::Failed),
                d(0, PollOutcome::Floor),
                d(2, PollOutcome::Declined),
                d(1, PollOutcome::Interested),
                d(3, PollOutcome::NoModel),
            ],
        );
        let order: Vec<&str> = rec.decisions.iter().map(|d| d.persona.as_str()).collect();
        assert_eq!(
            order,
            [&names[0], &names[1], &names[2], &names[3], &names[4]]
        );
        assert_eq!(
            rec.selected,
            [
                names[0].clone(),
                names[1].clone(),
                names[3].clone(),
                names[4].clone()
            ],
            "only a clear no leaves the roster; a failed poll or no model keeps it (fail open)"
        );
        assert_eq!(rec.ruled_out.len(), names.len() - 5);
        assert!(
            !rec.ruled_out.contains(&names[2]),
            "declined is not ruled out"
        );
        assert_eq!(rec.ruled_out[0], names[5]);
        let json = serde_json::to_value(&rec).unwrap();
        assert_eq!(json["decisions"][2]["poll"], "declined");
        assert!(json["decisions"][2].get("reason").is_none());
    }

    #[test]
    fn the_planner_reads_the_personas_that_fit_the_material_first() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let catalog = Catalog::load(&repo.join("personas")).unwrap();
        let pack = ContextPack::snapshot(
            &repo.join("tests/fixtures/code_project"),
            &crate::pack::PackOptions::default(),
        )
        .unwrap();
        let class = Classification {
            domain: "software".into(),
            content_types: vec!["http api".into(), "database access".into()],
            ..Classification::default()
        };
        let ranked = rank_for_planner(&catalog, &pack, &class, None);
        let names: Vec<&str> = ranked.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names.len(),
            catalog.reviewers().count(),
            "nobody leaves the catalog"
        );
        let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
        assert!(at("security_sentinel") < 6, "{names:?}");
        // Every software persona comes before any financial or legal one on a code project.
        let last_software = names
            .iter()
            .rposition(|n| catalog.get(n).is_ok_and(|p| p.domain == "software"))
            .unwrap();
        assert!(last_software < at("budget_controller") && last_software < at("contract_counsel"));
        let text = planner_catalog(&ranked);
        assert!(text.starts_with(&format!("- {} [", names[0])));
        assert!(text.contains("less related to this material: "));
        assert!(!text.contains("- budget_controller ["), "{text}");
        assert!(text.contains("budget_controller"));
    }

    #[test]
    fn triggers_select_and_the_flow_floor_stays() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let catalog = Catalog::load(&repo.join("personas")).unwrap();
        let flow = Flow::load(&repo.join("flows/document-review.yaml")).unwrap();
        let pack = ContextPack::snapshot(
            &repo.join("tests/fixtures/code_project"),
            &crate::pack::PackOptions::default(),
        )
        .unwrap();
        let class = Classification {
            domain: "software".into(),
            content_types: vec!["http api".into(), "database access".into()],
            ..Classification::default()
        };
        let got = prefilter(&flow, &catalog, &pack, &class);
        let find = |n: &str| got.iter().find(|c| c.persona == n);
        // The flow's own members survive whatever the material.
        assert!(find("coherence").is_some_and(|c| c.floor));
        assert!(find("scope_guardian").is_some_and(|c| c.floor));
        // A code trigger matches a code project; a clinical one does not.
        assert!(
            find("security_sentinel").is_some_and(|c| !c.floor && c.reason.starts_with("trigger"))
        );
        assert!(find("clinical_research_reviewer").is_none());
        assert!(find("employment_counsel").is_none());
        // Whole words only: "sql" does not match inside "mysqlx".
        assert!(!contains_phrase("use mysqlx here", "sql"));
        assert!(contains_phrase("raw sql, here", "sql"));
    }
}
