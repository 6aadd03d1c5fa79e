//! The persona catalog: personas/*.yaml plus the heuristics they reference, loaded and validated.
//!
//! Capability is data. A persona is a YAML file; the engine only ever sees it through this module
//! and never names one. Authoring errors fail fast and name the file and the field.

use crate::error::CatalogError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The read-only file tools a specialist may be given. Anything else in a persona is an error.
pub const KNOWN_TOOLS: [&str; 4] = ["file_tree", "list_directory", "file_read", "file_grep"];

/// Team tools: the shared blackboard. Granted by the flow stage, not by personas — they give
/// access to teammates' notes, never to files.
pub const TEAM_TOOLS: [&str; 2] = ["team_bb_publish", "team_bb_read"];

/// Domains a persona may declare.
pub const PERSONA_DOMAINS: [&str; 9] = [
    "software",
    "security",
    "documents",
    "product",
    "legal",
    "financial",
    "scientific",
    "operations",
    "general",
];

/// The axes a judge scores an output on. Each judge scores exactly one; a meta-judge scores none
/// and combines the others' scores.
pub const JUDGE_AXES: [&str; 4] = ["grounding", "coverage", "actionability", "calibration"];

/// What a catalog entry is for. Reviewers are what a planner may assign to review tasks; judges
/// and meta-judges score outputs (a review's findings, a summary) and are never given a review
/// task, so they stay out of the planner's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PersonaKind {
    #[default]
    Reviewer,
    Judge,
    MetaJudge,
}

impl PersonaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PersonaKind::Reviewer => "reviewer",
            PersonaKind::Judge => "judge",
            PersonaKind::MetaJudge => "meta_judge",
        }
    }
}

/// What HIGH, MODERATE and LOW confidence mean for this persona.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    pub high: String,
    pub moderate: String,
    pub low: String,
}

/// Per-phase model preferences ("auto" lets the runtime choose).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrefs {
    #[serde(default = "auto")]
    pub planning: String,
    #[serde(default = "auto")]
    pub execution: String,
}

fn auto() -> String {
    "auto".to_string()
}

impl Default for ModelPrefs {
    fn default() -> Self {
        ModelPrefs {
            planning: auto(),
            execution: auto(),
        }
    }
}

/// A worked example shown in the cacheable prefix (at most 3 are used).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub situation: String,
    pub finding: String,
}

/// A persona as authored in personas/NAME.yaml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persona {
    pub name: String,
    pub domain: String,
    /// One line for the planner's personas_list.
    pub summary: String,
    pub mandate: String,
    /// Names of files under personas/heuristics/ (without .yaml).
    pub heuristics: Vec<String>,
    pub directives: Vec<String>,
    pub tools: Vec<String>,
    pub confidence: Calibration,
    /// What this persona must not flag.
    pub suppress: Vec<String>,
    #[serde(default)]
    pub models: ModelPrefs,
    #[serde(default)]
    pub examples: Vec<Example>,
    /// Content types / keywords that make this persona relevant (a hint for the planner).
    #[serde(default)]
    pub triggers: Vec<String>,
    /// Reviewer (the default), judge or meta-judge.
    #[serde(default, skip_serializing_if = "is_reviewer")]
    pub kind: PersonaKind,
    /// The one axis a judge scores (one of [`JUDGE_AXES`]); absent for every other kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<String>,
    /// The stance a judge takes on its axis (for example "skeptic"); judges only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perspective: Option<String>,
}

fn is_reviewer(kind: &PersonaKind) -> bool {
    *kind == PersonaKind::Reviewer
}

impl Persona {
    pub fn is_reviewer(&self) -> bool {
        self.kind == PersonaKind::Reviewer
    }
}

/// The catalog's judges, grouped for a flow that scores outputs: per axis, its judges (one per
/// perspective), and the meta-judges that combine their scores into a verdict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JudgePanel<'a> {
    pub axes: BTreeMap<&'a str, Vec<&'a Persona>>,
    pub meta: Vec<&'a Persona>,
}

impl JudgePanel<'_> {
    pub fn judges(&self) -> usize {
        self.axes.values().map(Vec::len).sum()
    }
}

/// A heuristic set as authored in personas/heuristics/NAME.yaml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heuristic {
    pub name: String,
    pub title: String,
    /// Concrete checks, each a sentence a reviewer can act on.
    pub checks: Vec<String>,
    /// Narrow probes: code patterns that call for one of these checks, each asked as one
    /// yes/no question about the lines around a match (a flow with `probes:` asks them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeSpec>,
}

/// One probe of a heuristic: where it applies (languages, a line pattern) and what is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Unique within the heuristic.
    pub id: String,
    /// Pack languages the pattern is meant for ("python", "rust", ...).
    pub languages: Vec<String>,
    /// A regular expression matched against each line.
    pub pattern: String,
    /// A yes/no question about the code shown, answerable from those lines alone.
    pub question: String,
    /// The finding's title when the answer is yes.
    pub title: String,
    /// P0..P3.
    pub severity: String,
    pub category: String,
}

/// The loaded, validated catalog.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub dir: PathBuf,
    pub personas: BTreeMap<String, Persona>,
    pub heuristics: BTreeMap<String, Heuristic>,
}

fn invalid(path: &Path, field: &str, message: impl Into<String>) -> CatalogError {
    CatalogError::Invalid {
        path: path.to_path_buf(),
        field: field.to_string(),
        message: message.into(),
    }
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    let rd = std::fs::read_dir(dir).map_err(|source| CatalogError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml") | Some("yml")
                )
        })
        .collect();
    out.sort();
    Ok(out)
}

fn read_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, CatalogError> {
    let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|e| CatalogError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

impl Catalog {
    /// Load `dir/*.yaml` as personas and `dir/heuristics/*.yaml` as heuristics, validating all.
    pub fn load(dir: &Path) -> Result<Catalog, CatalogError> {
        let mut heuristics = BTreeMap::new();
        let hdir = dir.join("heuristics");
        if hdir.is_dir() {
            for path in yaml_files(&hdir)? {
                let h: Heuristic = read_yaml(&path)?;
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                if h.name != stem {
                    return Err(invalid(
                        &path,
                        "name",
                        format!("must match the file name {stem:?}, found {:?}", h.name),
                    ));
                }
                if h.title.trim().is_empty() {
                    return Err(invalid(&path, "title", "must not be empty"));
                }
                if h.checks.is_empty() {
                    return Err(invalid(&path, "checks", "must list at least one check"));
                }
                if let Some(i) = h.checks.iter().position(|c| c.trim().len() < 12) {
                    return Err(invalid(
                        &path,
                        &format!("checks[{i}]"),
                        "is too short to be actionable (write a full sentence)",
                    ));
                }
                for (i, probe) in h.probes.iter().enumerate() {
                    let field = |f: &str| format!("probes[{i}].{f}");
                    if let Err(e) = regex::Regex::new(&probe.pattern) {
                        return Err(invalid(
                            &path,
                            &field("pattern"),
                            format!("invalid regular expression: {e}"),
                        ));
                    }
                    if !["P0", "P1", "P2", "P3"].contains(&probe.severity.as_str()) {
                        return Err(invalid(
                            &path,
                            &field("severity"),
                            "must be P0, P1, P2 or P3",
                        ));
                    }
                    if probe.languages.is_empty() {
                        return Err(invalid(
                            &path,
                            &field("languages"),
                            "must name at least one language",
                        ));
                    }
                    if !probe.question.trim().ends_with('?') {
                        return Err(invalid(
                            &path,
                            &field("question"),
                            "must be a yes/no question (ending with '?')",
                        ));
                    }
                    if h.probes[..i].iter().any(|p| p.id == probe.id) || probe.id.trim().is_empty()
                    {
                        return Err(invalid(
                            &path,
                            &field("id"),
                            "must be a unique, non-empty id",
                        ));
                    }
                }
                heuristics.insert(h.name.clone(), h);
            }
        }
        let mut personas = BTreeMap::new();
        for path in yaml_files(dir)? {
            let p: Persona = read_yaml(&path)?;
            validate_persona(&path, &p, &heuristics)?;
            personas.insert(p.name.clone(), p);
        }
        if personas.is_empty() {
            return Err(CatalogError::Empty(dir.to_path_buf()));
        }
        Ok(Catalog {
            dir: dir.to_path_buf(),
            personas,
            heuristics,
        })
    }

    pub fn get(&self, name: &str) -> Result<&Persona, CatalogError> {
        self.personas
            .get(name)
            .ok_or_else(|| CatalogError::UnknownPersona(name.to_string()))
    }

    /// Personas a planner may assign review tasks to (judges excluded).
    pub fn reviewers(&self) -> impl Iterator<Item = &Persona> {
        self.personas.values().filter(|p| p.is_reviewer())
    }

    /// The judge panel: every judge by axis, and the meta-judges.
    pub fn judge_panel(&self) -> JudgePanel<'_> {
        let mut panel = JudgePanel::default();
        for p in self.personas.values() {
            match (p.kind, p.axis.as_deref()) {
                (PersonaKind::Judge, Some(axis)) => panel.axes.entry(axis).or_default().push(p),
                (PersonaKind::MetaJudge, _) => panel.meta.push(p),
                _ => {}
            }
        }
        panel
    }

    /// The planner's view of the catalog: one line per reviewer, "name [domain]: summary".
    /// Judges are left out: they score outputs and are never assigned a review task.
    pub fn personas_list(&self) -> String {
        self.personas_list_among(None)
    }

    /// The planner's view restricted to `roster` (when given), e.g. after persona selection.
    pub fn personas_list_among(&self, roster: Option<&[String]>) -> String {
        let mut s = String::new();
        for p in self
            .reviewers()
            .filter(|p| roster.is_none_or(|r| r.contains(&p.name)))
        {
            s.push_str(&format!(
                "- {} [{}]: {}\n",
                p.name,
                p.domain,
                p.summary.trim()
            ));
        }
        s
    }

    /// Heuristics a persona references, in its order.
    pub fn heuristics_of(&self, persona: &Persona) -> Vec<&Heuristic> {
        persona
            .heuristics
            .iter()
            .filter_map(|h| self.heuristics.get(h))
            .collect()
    }
}

fn validate_persona(
    path: &Path,
    p: &Persona,
    heuristics: &BTreeMap<String, Heuristic>,
) -> Result<(), CatalogError> {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if !is_identifier(&p.name) {
        return Err(invalid(
            path,
            "name",
            "must be lowercase letters, digits, '_' or '-'",
        ));
    }
    if p.name != stem {
        return Err(invalid(
            path,
            "name",
            format!("must match the file name {stem:?}, found {:?}", p.name),
        ));
    }
    if !PERSONA_DOMAINS.contains(&p.domain.as_str()) {
        return Err(invalid(
            path,
            "domain",
            format!(
                "{:?} is not one of {}",
                p.domain,
                PERSONA_DOMAINS.join(", ")
            ),
        ));
    }
    for (field, value) in [
        ("summary", &p.summary),
        ("mandate", &p.mandate),
        ("confidence.high", &p.confidence.high),
        ("confidence.moderate", &p.confidence.moderate),
        ("confidence.low", &p.confidence.low),
    ] {
        if value.trim().is_empty() {
            return Err(invalid(path, field, "must not be empty"));
        }
    }
    if p.heuristics.is_empty() {
        return Err(invalid(
            path,
            "heuristics",
            "must reference at least one heuristic",
        ));
    }
    for (i, h) in p.heuristics.iter().enumerate() {
        if !heuristics.contains_key(h) {
            return Err(invalid(
                path,
                &format!("heuristics[{i}]"),
                format!("no heuristic {h:?} in personas/heuristics/"),
            ));
        }
    }
    if p.directives.is_empty() {
        return Err(invalid(
            path,
            "directives",
            "must list at least one directive",
        ));
    }
    if p.tools.is_empty() {
        return Err(invalid(path, "tools", "must allow at least one tool"));
    }
    for (i, t) in p.tools.iter().enumerate() {
        if !KNOWN_TOOLS.contains(&t.as_str()) {
            return Err(invalid(
                path,
                &format!("tools[{i}]"),
                format!("unknown tool {t:?}; known: {}", KNOWN_TOOLS.join(", ")),
            ));
        }
    }
    if p.suppress.is_empty() {
        return Err(invalid(
            path,
            "suppress",
            "must say at least one thing this persona does not flag",
        ));
    }
    if p.examples.len() > 3 {
        return Err(invalid(path, "examples", "at most 3 examples are allowed"));
    }
    match p.kind {
        PersonaKind::Judge => match p.axis.as_deref() {
            Some(axis) if JUDGE_AXES.contains(&axis) => {}
            Some(axis) => {
                return Err(invalid(
                    path,
                    "axis",
                    format!("{axis:?} is not one of {}", JUDGE_AXES.join(", ")),
                ))
            }
            None => {
                return Err(invalid(
                    path,
                    "axis",
                    format!(
                        "a judge must name the axis it scores, one of {}",
                        JUDGE_AXES.join(", ")
                    ),
                ))
            }
        },
        PersonaKind::Reviewer | PersonaKind::MetaJudge => {
            if p.axis.is_some() {
                return Err(invalid(
                    path,
                    "axis",
                    format!(
                        "only a judge scores an axis, and this is a {}",
                        p.kind.as_str()
                    ),
                ));
            }
        }
    }
    if p.kind == PersonaKind::Judge {
        if p.perspective.as_deref().is_none_or(|s| !is_identifier(s)) {
            return Err(invalid(
                path,
                "perspective",
                "a judge must name its perspective as a lowercase word (for example skeptic)",
            ));
        }
    } else if p.perspective.is_some() {
        return Err(invalid(
            path,
            "perspective",
            "only a judge takes a perspective",
        ));
    }
    Ok(())
}
