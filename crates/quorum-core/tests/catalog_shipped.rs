//! Checks the shipped persona catalog and the review fixtures: the catalog loads, covers every
//! domain, has no orphaned heuristics, rejects broken copies by file and field, and the fixtures'
//! answer keys point at the exact lines they describe.

use quorum_core::catalog::{Catalog, PersonaKind, JUDGE_AXES, KNOWN_TOOLS, PERSONA_DOMAINS};
use serde::Deserialize;
use serde_yaml::{Mapping, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn personas_dir() -> PathBuf {
    repo_root().join("personas")
}

fn fixtures_dir() -> PathBuf {
    repo_root().join("tests/fixtures")
}

fn shipped() -> Catalog {
    let dir = personas_dir();
    Catalog::load(&dir).unwrap_or_else(|e| panic!("shipped catalog must load: {e}"))
}

/// Personas other parts of quorum, its docs and its tests rely on being present.
const REQUIRED_PERSONAS: [&str; 19] = [
    "principal_engineer",
    "security_sentinel",
    "software_developer",
    "tech_writer",
    "assessor",
    "performance_engineer",
    "test_engineer",
    "concurrency_specialist",
    "api_designer",
    "coherence",
    "feasibility",
    "product_lens",
    "design_lens",
    "security_lens",
    "scope_guardian",
    "contract_counsel",
    "privacy_counsel",
    "financial_analyst",
    "research_methodologist",
];

#[test]
fn shipped_catalog_has_the_required_personas() {
    let catalog = shipped();
    assert!(
        catalog.personas.len() >= 16,
        "only {} personas",
        catalog.personas.len()
    );
    for name in REQUIRED_PERSONAS {
        assert!(catalog.get(name).is_ok(), "persona {name} is missing");
    }
}

/// The seven review domains the catalog must staff, each as the catalog domains that count for
/// it, with the fewest reviewers it needs. Documents and product share one review domain.
const REVIEW_DOMAINS: [(&str, &[&str], usize); 7] = [
    ("software", &["software"], 8),
    ("security", &["security"], 5),
    ("documents/product", &["documents", "product", "general"], 8),
    ("legal", &["legal"], 5),
    ("financial", &["financial"], 5),
    ("scientific", &["scientific"], 5),
    ("operations/infrastructure", &["operations"], 5),
];

#[test]
fn the_full_catalog_staffs_seven_domains() {
    let catalog = shipped();
    let reviewers: Vec<_> = catalog.reviewers().collect();
    assert!(
        reviewers.len() >= 43,
        "only {} reviewer personas",
        reviewers.len()
    );
    for (domain, catalog_domains, min) in REVIEW_DOMAINS {
        let n = reviewers
            .iter()
            .filter(|p| catalog_domains.contains(&p.domain.as_str()))
            .count();
        assert!(n >= min, "domain {domain} has {n} reviewers, want {min}");
    }
    // Every catalog domain is one of the seven (general is the cross-document editor's).
    for p in &reviewers {
        assert!(
            REVIEW_DOMAINS
                .iter()
                .any(|(_, ds, _)| ds.contains(&p.domain.as_str())),
            "{} has domain {} outside the seven",
            p.name,
            p.domain
        );
    }
    for name in catalog.personas.keys() {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{name}: persona names are lowercase_with_underscores"
        );
    }
}

#[test]
fn the_judge_panel_has_three_perspectives_on_every_axis_and_a_meta_judge() {
    let catalog = shipped();
    let panel = catalog.judge_panel();
    assert_eq!(panel.axes.len(), JUDGE_AXES.len());
    assert_eq!(panel.judges(), 12);
    for axis in JUDGE_AXES {
        let judges = &panel.axes[axis];
        let perspectives: BTreeSet<&str> = judges
            .iter()
            .filter_map(|j| j.perspective.as_deref())
            .collect();
        assert_eq!(judges.len(), 3, "axis {axis}");
        assert_eq!(perspectives.len(), 3, "axis {axis} repeats a perspective");
    }
    assert_eq!(panel.meta.len(), 1);
    // Judges score outputs; the planner never sees them and may not assign them.
    let list = catalog.personas_list();
    for judge in panel.axes.values().flatten().chain(panel.meta.iter()) {
        assert!(
            !list.contains(&format!("- {} [", judge.name)),
            "{} is offered to the planner",
            judge.name
        );
        assert_ne!(judge.kind, PersonaKind::Reviewer);
    }
}

#[test]
fn every_shipped_flow_loads_and_names_only_catalog_reviewers() {
    let catalog = shipped();
    let dir = repo_root().join("flows");
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let flow =
                quorum_core::flows::flow::Flow::load(&path).unwrap_or_else(|e| panic!("{e}"));
            flow.check_personas(&catalog)
                .unwrap_or_else(|e| panic!("{e}"));
            names.insert(flow.name.clone());
        }
    }
    for expected in [
        "review",
        "quick",
        "comprehensive",
        "security-audit",
        "document-review",
        "targeted",
        "bottom-up",
    ] {
        assert!(names.contains(expected), "flow {expected} is not shipped");
    }
    let bottom_up = quorum_core::flows::flow::Flow::load(&dir.join("bottom-up.yaml")).unwrap();
    assert!(
        bottom_up
            .selection
            .as_ref()
            .is_some_and(|s| s.instead_of_planner && s.interest_poll),
        "bottom-up selects instead of planning"
    );
    let comprehensive =
        quorum_core::flows::flow::Flow::load(&dir.join("comprehensive.yaml")).unwrap();
    let dims: Vec<&str> = comprehensive
        .dimensions
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        dims,
        [
            "correctness",
            "security",
            "performance",
            "tests",
            "docs",
            "architecture"
        ]
    );
    assert!(comprehensive.dimensions.iter().all(|d| d.required));
    assert_eq!(
        (
            comprehensive.parameters.min_tasks,
            comprehensive.parameters.max_tasks
        ),
        (15, 25)
    );
    assert!(comprehensive.directory_coverage.is_some());
    let audit = quorum_core::flows::flow::Flow::load(&dir.join("security-audit.yaml")).unwrap();
    assert!(audit.dimensions.len() >= 5 && audit.directory_coverage.is_some());
    let docs = quorum_core::flows::flow::Flow::load(&dir.join("document-review.yaml")).unwrap();
    let team = docs.team.as_ref().expect("document-review sets a team");
    assert_eq!(team.always.len(), 2);
    assert_eq!(team.conditional.len(), 4);
}

#[test]
fn a_flow_naming_a_judge_or_an_unknown_persona_is_refused_by_field() {
    let catalog = shipped();
    let path = repo_root().join("flows/comprehensive.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    for (swap, needle) in [
        ("personas: [test_engineer]", "no persona \"nobody_here\""),
        ("personas: [test_engineer]", "meta_judge"),
    ] {
        let replacement = if needle.contains("nobody") {
            "personas: [nobody_here]"
        } else {
            "personas: [meta_jury]"
        };
        let flow =
            quorum_core::flows::flow::Flow::parse(&text.replace(swap, replacement), &path).unwrap();
        let e = flow.check_personas(&catalog).unwrap_err().to_string();
        assert!(
            e.contains("comprehensive.yaml")
                && e.contains("dimensions[3].personas[0]")
                && e.contains(needle),
            "{e}"
        );
    }
}

#[test]
fn a_panel_flow_needs_a_judge_on_each_of_its_axes_and_a_meta_judge() {
    let catalog = shipped();
    let flow = quorum_core::flows::flow::Flow::load(&repo_root().join("flows/comprehensive.yaml"))
        .unwrap();
    assert!(flow.has(quorum_core::flows::flow::Role::Panel));
    assert_eq!(flow.parameters.panel_axes, JUDGE_AXES);
    flow.check_personas(&catalog).unwrap();
    let mut no_coverage = catalog.clone();
    no_coverage
        .personas
        .retain(|_, p| p.axis.as_deref() != Some("coverage"));
    let e = flow.check_personas(&no_coverage).unwrap_err().to_string();
    assert!(
        e.contains("parameters.panel_axes[1]") && e.contains("no judge"),
        "{e}"
    );
    let mut no_meta = catalog.clone();
    no_meta
        .personas
        .retain(|_, p| p.kind != PersonaKind::MetaJudge);
    let e = flow.check_personas(&no_meta).unwrap_err().to_string();
    assert!(e.contains("meta-judge"), "{e}");
}

#[test]
fn every_domain_has_a_persona() {
    let catalog = shipped();
    let used: BTreeSet<&str> = catalog
        .personas
        .values()
        .map(|p| p.domain.as_str())
        .collect();
    for domain in PERSONA_DOMAINS {
        assert!(used.contains(domain), "no persona covers domain {domain}");
    }
}

#[test]
fn every_heuristic_is_referenced_and_well_sized() {
    let catalog = shipped();
    assert!(
        catalog.heuristics.len() >= 25,
        "only {} heuristics",
        catalog.heuristics.len()
    );
    let referenced: BTreeSet<&str> = catalog
        .personas
        .values()
        .flat_map(|p| p.heuristics.iter().map(String::as_str))
        .collect();
    for (name, h) in &catalog.heuristics {
        assert!(
            referenced.contains(name.as_str()),
            "heuristic {name} is not referenced by any persona"
        );
        assert!(
            (5..=12).contains(&h.checks.len()),
            "heuristic {name} has {} checks, want 5-12",
            h.checks.len()
        );
        let mut seen = BTreeSet::new();
        for check in &h.checks {
            assert!(
                seen.insert(check.as_str()),
                "heuristic {name} repeats a check"
            );
            assert!(
                check.trim_end().ends_with('.'),
                "heuristic {name}: check is not a full sentence: {check:?}"
            );
        }
    }
}

#[test]
fn personas_are_discriminating_and_complete() {
    let catalog = shipped();
    let mut summaries: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, p) in &catalog.personas {
        if let Some(other) = summaries.insert(p.summary.trim(), name) {
            panic!("{name} and {other} share a summary");
        }
        assert!(
            !p.summary.trim().contains('\n'),
            "{name}: summary must be one line"
        );
        assert!(
            (2..=4).contains(&p.heuristics.len()),
            "{name}: {} heuristics, want 2-4",
            p.heuristics.len()
        );
        assert!(
            p.directives.len() >= 4,
            "{name}: {} directives, want at least 4",
            p.directives.len()
        );
        assert!(
            p.suppress.len() >= 3,
            "{name}: {} suppress entries, want at least 3",
            p.suppress.len()
        );
        assert!(
            p.tools.iter().any(|t| t == "file_read"),
            "{name}: every persona needs file_read"
        );
        assert!(p.tools.iter().all(|t| KNOWN_TOOLS.contains(&t.as_str())));
        assert!(
            p.examples.len() <= 2,
            "{name}: at most 2 examples are shipped"
        );
        assert!(!p.triggers.is_empty(), "{name}: no triggers");
        assert_eq!(p.models.planning, "auto", "{name}: planning model");
        assert_eq!(p.models.execution, "auto", "{name}: execution model");
        // A mandate of one sentence does not tell the model what "done" means.
        let sentences = p.mandate.matches(". ").count() + 1;
        assert!(sentences >= 3, "{name}: mandate is too thin");
        for level in [
            &p.confidence.high,
            &p.confidence.moderate,
            &p.confidence.low,
        ] {
            assert!(
                level.len() >= 40,
                "{name}: confidence level too vague: {level:?}"
            );
        }
        assert_eq!(catalog.heuristics_of(p).len(), p.heuristics.len());
    }
    let list = catalog.personas_list();
    assert_eq!(list.lines().count(), catalog.reviewers().count());
}

// ---- broken copies fail with the file and the field ----

fn copy_catalog(dst: &Path) {
    let src = personas_dir();
    std::fs::create_dir_all(dst.join("heuristics")).unwrap();
    for sub in ["", "heuristics"] {
        for entry in std::fs::read_dir(src.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && path.extension().is_some_and(|e| e == "yaml") {
                std::fs::copy(&path, dst.join(sub).join(path.file_name().unwrap())).unwrap();
            }
        }
    }
}

fn key(k: &str) -> Value {
    Value::String(k.to_string())
}

fn push(map: &mut Mapping, field: &str, item: &str) {
    map.get_mut(key(field))
        .and_then(Value::as_sequence_mut)
        .unwrap_or_else(|| panic!("field {field} is not a list"))
        .push(key(item));
}

type Mutation = Box<dyn Fn(&mut Mapping)>;

/// Copies the catalog, applies `mutate` to one file, loads it, and returns the error text.
fn load_broken(file: &str, mutate: &Mutation) -> String {
    let tmp = tempfile::tempdir().unwrap();
    copy_catalog(tmp.path());
    let path = tmp.path().join(file);
    let mut value: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    mutate(value.as_mapping_mut().unwrap());
    std::fs::write(&path, serde_yaml::to_string(&value).unwrap()).unwrap();
    match Catalog::load(tmp.path()) {
        Ok(_) => panic!("catalog with a broken {file} loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broken_copies_fail_naming_file_and_field() {
    let cases: Vec<(&str, Mutation, &[&str])> = vec![
        (
            "security_sentinel.yaml",
            Box::new(|m| push(m, "tools", "shell_exec")),
            &["security_sentinel.yaml", "tools[4]", "shell_exec"],
        ),
        (
            "coherence.yaml",
            Box::new(|m| {
                m.remove(key("mandate"));
            }),
            &["coherence.yaml", "mandate"],
        ),
        (
            "financial_analyst.yaml",
            Box::new(|m| push(m, "heuristics", "no_such_heuristic")),
            &[
                "financial_analyst.yaml",
                "heuristics[3]",
                "no_such_heuristic",
            ],
        ),
        (
            "tech_writer.yaml",
            Box::new(|m| {
                m.insert(key("name"), key("technical_writer"));
            }),
            &["tech_writer.yaml", "name", "technical_writer"],
        ),
        (
            "api_designer.yaml",
            Box::new(|m| {
                m.insert(key("temperature"), Value::from(0.2));
            }),
            &["api_designer.yaml", "temperature"],
        ),
        (
            "privacy_counsel.yaml",
            Box::new(|m| {
                m.insert(key("domain"), key("medical"));
            }),
            &["privacy_counsel.yaml", "domain", "medical"],
        ),
        (
            "test_engineer.yaml",
            Box::new(|m| {
                m.insert(key("suppress"), Value::Sequence(Vec::new()));
            }),
            &["test_engineer.yaml", "suppress"],
        ),
        (
            "judge_grounding_skeptic.yaml",
            Box::new(|m| {
                m.remove(key("axis"));
            }),
            &["judge_grounding_skeptic.yaml", "axis", "grounding"],
        ),
        (
            "judge_coverage_auditor.yaml",
            Box::new(|m| {
                m.insert(key("axis"), key("vibes"));
            }),
            &["judge_coverage_auditor.yaml", "axis", "vibes"],
        ),
        (
            "meta_jury.yaml",
            Box::new(|m| {
                m.insert(key("kind"), key("referee"));
            }),
            &["meta_jury.yaml", "kind", "referee"],
        ),
        (
            "site_reliability_engineer.yaml",
            Box::new(|m| {
                m.insert(key("axis"), key("coverage"));
            }),
            &["site_reliability_engineer.yaml", "axis", "reviewer"],
        ),
        (
            "heuristics/injection.yaml",
            Box::new(|m| {
                m.insert(key("name"), key("sql_injection"));
            }),
            &["injection.yaml", "name", "sql_injection"],
        ),
        (
            "heuristics/flaky_tests.yaml",
            Box::new(|m| {
                let checks = m
                    .get_mut(key("checks"))
                    .and_then(Value::as_sequence_mut)
                    .unwrap();
                checks[0] = key("sleep");
            }),
            &["flaky_tests.yaml", "checks[0]"],
        ),
    ];
    for (file, mutate, expected) in &cases {
        let message = load_broken(file, mutate);
        for needle in *expected {
            assert!(
                message.contains(needle),
                "breaking {file}: error {message:?} does not mention {needle:?}"
            );
        }
    }
}

#[test]
fn unmodified_copy_loads() {
    let tmp = tempfile::tempdir().unwrap();
    copy_catalog(tmp.path());
    let copy = Catalog::load(tmp.path()).unwrap();
    let original = shipped();
    assert_eq!(copy.personas, original.personas);
    assert_eq!(copy.heuristics, original.heuristics);
}

// ---- the fixtures' answer keys stay honest ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Defect {
    id: String,
    file: String,
    line_start: usize,
    line_end: usize,
    symbol: String,
    category: String,
    severity: String,
    evidence: String,
    description: String,
}

/// `tests/fixtures/NAME.defects.yaml` describes the files under `tests/fixtures/NAME/`.
fn check_answer_key(name: &str, min_defects: usize) {
    let key_path = fixtures_dir().join(format!("{name}.defects.yaml"));
    let root = fixtures_dir().join(name);
    let defects: Vec<Defect> =
        serde_yaml::from_str(&std::fs::read_to_string(&key_path).unwrap()).unwrap();
    assert!(
        defects.len() >= min_defects,
        "{name}: only {} defects",
        defects.len()
    );
    let mut ids = BTreeSet::new();
    for d in &defects {
        assert!(ids.insert(d.id.as_str()), "{name}: duplicate id {}", d.id);
        assert!(
            ["P0", "P1", "P2", "P3"].contains(&d.severity.as_str()),
            "{}: severity {}",
            d.id,
            d.severity
        );
        for (field, value) in [
            ("symbol", &d.symbol),
            ("category", &d.category),
            ("evidence", &d.evidence),
            ("description", &d.description),
        ] {
            assert!(!value.trim().is_empty(), "{}: empty {field}", d.id);
        }
        assert!(
            !d.file.starts_with('/') && !d.file.split('/').any(|c| c == ".."),
            "{}: file must be relative to the fixture root",
            d.id
        );
        let text = std::fs::read_to_string(root.join(&d.file))
            .unwrap_or_else(|e| panic!("{}: cannot read {}: {e}", d.id, d.file));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            d.line_start >= 1 && d.line_start <= d.line_end && d.line_end <= lines.len(),
            "{}: lines {}-{} outside {} ({} lines)",
            d.id,
            d.line_start,
            d.line_end,
            d.file,
            lines.len()
        );
        let range = &lines[d.line_start - 1..d.line_end];
        assert!(
            range.iter().any(|l| l.contains(d.evidence.as_str())),
            "{}: evidence {:?} is not on lines {}-{} of {}",
            d.id,
            d.evidence,
            d.line_start,
            d.line_end,
            d.file
        );
    }
}

#[test]
fn code_project_answer_key_matches_its_lines() {
    check_answer_key("code_project", 8);
}

#[test]
fn contracts_answer_key_matches_its_lines() {
    check_answer_key("contracts", 8);
}

#[test]
fn plan_doc_answer_key_matches_its_lines() {
    check_answer_key("plan_doc", 4);
}

#[test]
fn code_project_carries_files_the_pack_must_exclude() {
    let root = fixtures_dir().join("code_project");
    let env = std::fs::read_to_string(root.join(".env")).unwrap();
    assert!(env.contains("INVENTORY_SECRET_KEY="));
    let logo = std::fs::read(root.join("static/logo.png")).unwrap();
    assert!(logo.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(
        std::str::from_utf8(&logo).is_err(),
        "logo.png must not be valid UTF-8, or it would not exercise binary exclusion"
    );
    // The answer key must live outside the reviewed tree.
    assert!(!root.join("code_project.defects.yaml").exists());
}
