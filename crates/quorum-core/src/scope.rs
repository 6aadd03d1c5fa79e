//! What a review is scoped to beyond its snapshot: the change under review (`--diff`), the
//! repository owner's guidance (`.quorum.toml`) and the review profile — and the one pure rule
//! that applies them to gated findings.
//!
//! A [`ReviewScope`] is decided once, before the review starts, recorded in the review's store
//! and shipped with remote attempts, so a resumed or distributed review sees the same change and
//! the same guidance. Everything here is data; prompt text built from it lives in the runtime's
//! `stages`, and every string that came from the target is delimited there as untrusted.

use crate::report::{DiffFile, DiffInfo};
use crate::review::dedup::{renumber, Gated};
use crate::review::finding::{Dropped, Finding, Severity};
use serde::{Deserialize, Serialize};

/// How a file differs between the base and the head revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    Renamed,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Renamed => "renamed",
        }
    }
}

/// One changed file, with paths relative to the review target (as in the pack).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChange {
    /// The head path (the base path for a deleted file).
    pub path: String,
    pub kind: ChangeKind,
    /// The base path of a renamed file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// Lines added and removed.
    pub added: u32,
    pub removed: u32,
    /// Head-side line ranges (1-based, inclusive) the change touched: added or replaced lines,
    /// and the lines either side of a pure deletion. Empty for a deleted file.
    #[serde(default)]
    pub touched: Vec<(u32, u32)>,
    /// Unified diff of the file with 3 lines of context (may end in a visible cut marker).
    #[serde(default)]
    pub hunks: String,
}

impl FileChange {
    /// Whether head lines `start..=end` overlap a touched range.
    pub fn touches(&self, start: u32, end: u32) -> bool {
        let (lo, hi) = if start <= end {
            (start, end)
        } else {
            (end, start)
        };
        self.touched.iter().any(|&(a, b)| a <= hi && lo <= b)
    }
}

/// The change under review: the head tree is the pack; these are the files that differ from
/// the base tree. Files the pack excludes (secrets, ignored, binary, too large, excluded globs)
/// are never listed here, so their content cannot reach a prompt through a hunk either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeSet {
    /// The revision range as the user wrote it ("main..feature", "HEAD~1").
    pub spec: String,
    /// Full commit ids.
    pub base: String,
    pub head: String,
    /// Sorted by path.
    pub files: Vec<FileChange>,
}

impl ChangeSet {
    pub fn file(&self, path: &str) -> Option<&FileChange> {
        self.files.iter().find(|f| f.path == path)
    }

    /// Whether a finding at this location is on the change. A finding belongs to the change
    /// when its file was added, modified or renamed and it cites a touched line; a finding on a
    /// changed file that cites no line is kept with the change (it is about the file as
    /// changed). Findings without a file, or on files the change did not touch, are not.
    pub fn covers(
        &self,
        file: Option<&str>,
        line_start: Option<u32>,
        line_end: Option<u32>,
    ) -> bool {
        let Some(change) = file.and_then(|f| self.file(f)) else {
            return false;
        };
        if change.kind == ChangeKind::Deleted {
            return false;
        }
        match (line_start, line_end) {
            (Some(a), Some(b)) => change.touches(a, b),
            (Some(a), None) | (None, Some(a)) => change.touches(a, a),
            (None, None) => true,
        }
    }
}

/// The change as report.json shows it (`target.diff`): counts per file, no hunks.
impl From<&ChangeSet> for DiffInfo {
    fn from(c: &ChangeSet) -> Self {
        DiffInfo {
            spec: c.spec.clone(),
            base: c.base.clone(),
            head: c.head.clone(),
            files_changed: c.files.len(),
            files: c
                .files
                .iter()
                .map(|f| DiffFile {
                    path: f.path.clone(),
                    change: f.kind.as_str().to_string(),
                    old_path: f.old_path.clone(),
                    added: f.added,
                    removed: f.removed,
                })
                .collect(),
        }
    }
}

/// Per-path guidance from `.quorum.toml`: reaches only the specialists whose files match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathGuidance {
    /// gitignore-syntax glob, relative to the target root.
    pub glob: String,
    pub instructions: String,
}

/// The repository owner's guidance. Shown to specialists as the owner's words, delimited as
/// untrusted content: it can steer what they look at, never their tools or output format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Guidance {
    /// Where it came from, for the prompt's introduction and for errors (".quorum.toml").
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub instructions: String,
    #[serde(default)]
    pub paths: Vec<PathGuidance>,
}

impl Guidance {
    pub fn is_empty(&self) -> bool {
        self.instructions.trim().is_empty() && self.paths.is_empty()
    }

    /// The path guidance whose glob matches at least one of `files`, in file order. Globs were
    /// validated when the guidance was parsed; one that no longer compiles matches nothing.
    pub fn for_files(&self, files: &[String]) -> Vec<&PathGuidance> {
        self.paths
            .iter()
            .filter(|p| {
                let Some(m) = crate::pack::glob_matcher(&p.glob) else {
                    return false;
                };
                files
                    .iter()
                    .any(|f| m.matched_path_or_any_parents(f.as_str(), false).is_ignore())
            })
            .collect()
    }
}

/// How strict a review is: its confidence gate and the lowest severity it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// The flow's gate, every severity (today's behaviour).
    Default,
    /// Gate 0.7; P3 findings are dropped ("below profile floor").
    Chill,
    /// Gate 0.4; everything is kept.
    Assertive,
}

impl Profile {
    pub const NAMES: &'static str = "default, chill, assertive";

    pub fn parse(s: &str) -> Option<Profile> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "default" => Some(Profile::Default),
            "chill" => Some(Profile::Chill),
            "assertive" => Some(Profile::Assertive),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Chill => "chill",
            Profile::Assertive => "assertive",
        }
    }

    /// The confidence gate, given the flow's own.
    pub fn gate(self, flow_gate: f64) -> f64 {
        match self {
            Profile::Default => flow_gate,
            Profile::Chill => 0.7,
            Profile::Assertive => 0.4,
        }
    }

    /// The least severe level still reported (`None` = every level).
    pub fn floor(self) -> Option<Severity> {
        match self {
            Profile::Chill => Some(Severity::P2),
            Profile::Default | Profile::Assertive => None,
        }
    }
}

/// Everything that scopes one review beyond its pack. `Default` = a whole-tree review with no
/// repository guidance and the default profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewScope {
    #[serde(default)]
    pub change: Option<ChangeSet>,
    #[serde(default)]
    pub guidance: Guidance,
    #[serde(default = "default_profile")]
    pub profile: Profile,
    /// The acceptance contract of a conformance review (`--spec`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<crate::judging::conformance::Spec>,
    /// The prior review a finish review adjudicates (`--prior`, `--dispositions`); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior: Option<Box<crate::judging::adjudication::Prior>>,
    /// What the deterministic analyzers found (and which did not run, and why): leads for the
    /// specialists and candidate findings for the verifier.
    #[serde(default, skip_serializing_if = "crate::analyzer::Leads::is_empty")]
    pub analyzers: crate::analyzer::Leads,
    /// Working memory (`[memory]`): its parameters, the target's identity and the insights
    /// of earlier reviews offered to the planner — decided once and recorded, so a resume
    /// offers the same. Absent when memory is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Box<MemoryScope>>,
}

/// What a review's working memory is: see [`crate::memory`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryScope {
    /// The target's identity: earlier reviews' insights are kept under it.
    pub repository: String,
    /// Insights offered per prompt.
    pub k: usize,
    pub base_rate: f64,
    /// The earlier reviews' insights offered to the planner (top-k by decayed score, oldest
    /// first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offered: Vec<crate::memory::Offered>,
}

/// The part of a review's scope a client decides: the change under review (`--diff`), the
/// repository's guidance (`.quorum.toml`) and the profile. It travels with a review submitted
/// to a cluster (the node decides the rest: analyzers, memory, spec and prior checks);
/// unknown fields are refused, so a client cannot slip anything else into the scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientScope {
    #[serde(default)]
    pub change: Option<ChangeSet>,
    #[serde(default)]
    pub guidance: Guidance,
    #[serde(default = "default_profile")]
    pub profile: Profile,
}

/// The most a submitted [`ClientScope`] may weigh (its change's hunks dominate it).
pub const MAX_CLIENT_SCOPE_BYTES: usize = 16 << 20;

impl ClientScope {
    pub fn of(scope: &ReviewScope) -> ClientScope {
        ClientScope {
            change: scope.change.clone(),
            guidance: scope.guidance.clone(),
            profile: scope.profile,
        }
    }

    /// Read one from its JSON, bounded; a change may only name the pack's files (it is the
    /// head tree the client sent).
    pub fn parse(json: &str, pack: &crate::pack::ContextPack) -> Result<ClientScope, String> {
        if json.len() > MAX_CLIENT_SCOPE_BYTES {
            return Err(format!(
                "the review's scope is {} bytes, over the limit of {MAX_CLIENT_SCOPE_BYTES}",
                json.len()
            ));
        }
        let c: ClientScope = serde_json::from_str(json)
            .map_err(|e| format!("the review's scope is invalid: {e}"))?;
        if let Some(change) = &c.change {
            if let Some(f) = change.files.iter().find(|f| {
                f.kind != ChangeKind::Deleted && !f.hunks.is_empty() && pack.get(&f.path).is_none()
            }) {
                return Err(format!(
                    "the change's file {} is not in the submitted files",
                    f.path
                ));
            }
        }
        Ok(c)
    }

    /// Put it into a scope the node builds.
    pub fn apply_to(self, scope: &mut ReviewScope) {
        scope.change = self.change;
        scope.guidance = self.guidance;
        scope.profile = self.profile;
    }

    /// Whether it says anything a default scope does not.
    pub fn is_default(&self) -> bool {
        self.change.is_none()
            && self.guidance == Guidance::default()
            && self.profile == Profile::Default
    }
}

fn default_profile() -> Profile {
    Profile::Default
}

impl Default for ReviewScope {
    fn default() -> Self {
        ReviewScope {
            change: None,
            guidance: Guidance::default(),
            profile: Profile::Default,
            spec: None,
            prior: None,
            analyzers: Default::default(),
            memory: None,
        }
    }
}

/// The reason recorded on findings the profile's severity floor removes.
pub const BELOW_FLOOR: &str = "below profile floor";

impl ReviewScope {
    /// The scope one specialist task needs: its own files' hunks only (all of them for a task
    /// with no files) and the analyzer leads on its files, so a remote attempt does not carry
    /// the whole change.
    pub fn for_task(&self, files: &[String]) -> ReviewScope {
        let mut scope = self.clone();
        // Only the conductor's judge reads the spec; a specialist's attempt does not carry it.
        scope.spec = None;
        scope.prior = None;
        scope.analyzers = self.analyzers.for_files(files);
        // Earlier reviews' insights are the planner's; a task gets its teammates' with its
        // attempt. The parameters travel (they are not content).
        if let Some(m) = &mut scope.memory {
            m.offered.clear();
        }
        if let Some(change) = &mut scope.change {
            if !files.is_empty() {
                for f in &mut change.files {
                    if !files.contains(&f.path) {
                        f.hunks.clear();
                    }
                }
            }
        }
        scope
    }

    /// The confidence gate this review applies, given the flow's own.
    pub fn gate(&self, flow_gate: f64) -> f64 {
        self.profile.gate(flow_gate)
    }

    /// Apply the profile's severity floor, then (for a change review) move findings and
    /// residual concerns on lines the change did not touch to `pre_existing`. Survivors are
    /// renumbered so ids stay dense: F001.. findings, R001.. residual, E001.. pre-existing.
    pub fn apply(&self, gated: Gated) -> Gated {
        let Gated {
            findings,
            residual,
            mut dropped,
            merged,
            mut pre_existing,
            unverified,
        } = gated;
        let floor = self.profile.floor();
        let mut keep = |list: Vec<Finding>| -> Vec<Finding> {
            let mut kept = Vec::new();
            for f in list {
                if floor.is_some_and(|floor| f.severity > floor) {
                    dropped.push(Dropped {
                        title: f.title.clone(),
                        file: f.file.clone(),
                        reason: BELOW_FLOOR.to_string(),
                        verdict: Some(f.verdict),
                        removed_by: "profile".into(),
                    });
                } else {
                    kept.push(f);
                }
            }
            kept
        };
        let findings = keep(findings);
        let residual = keep(residual);
        let (findings, residual) = match &self.change {
            None => (findings, residual),
            Some(change) => {
                let mut on = |list: Vec<Finding>| -> Vec<Finding> {
                    let (on, off): (Vec<Finding>, Vec<Finding>) = list
                        .into_iter()
                        .partition(|f| change.covers(f.file.as_deref(), f.line_start, f.line_end));
                    pre_existing.extend(off);
                    on
                };
                (on(findings), on(residual))
            }
        };
        Gated {
            findings: renumber(findings, "F"),
            residual: renumber(residual, "R"),
            dropped,
            merged,
            pre_existing: renumber(pre_existing, "E"),
            unverified: renumber(unverified, "U"),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_scope_travels_whole_and_nothing_else_gets_in() {
        let pack = crate::pack::ContextPack::from_files(
            "/r".into(),
            None,
            vec![("src/app.py".into(), "x = 1\n".into())],
        );
        let change = |path: &str, kind: ChangeKind| ChangeSet {
            spec: "base..main".into(),
            base: "a".repeat(40),
            head: "b".repeat(40),
            files: vec![FileChange {
                path: path.into(),
                kind,
                old_path: None,
                added: 1,
                removed: 1,
                touched: vec![(1, 1)],
                hunks: "@@ -1 +1 @@\n-x = 0\n+x = 1\n".into(),
            }],
        };
        let sent = ClientScope {
            change: Some(change("src/app.py", ChangeKind::Modified)),
            guidance: Guidance {
                source: ".quorum.toml".into(),
                instructions: "Focus on the API.".into(),
                paths: Vec::new(),
            },
            profile: Profile::Chill,
        };
        let json = serde_json::to_string(&sent).unwrap();
        let got = ClientScope::parse(&json, &pack).unwrap();
        assert_eq!(got, sent);
        let mut scope = ReviewScope::default();
        got.apply_to(&mut scope);
        assert_eq!(scope.profile, Profile::Chill);
        assert!(scope.change.is_some() && scope.spec.is_none());
        // A change naming a file the client did not send; a deleted file may be absent.
        let ghost = ClientScope {
            change: Some(change("src/ghost.py", ChangeKind::Modified)),
            ..sent.clone()
        };
        let err = ClientScope::parse(&serde_json::to_string(&ghost).unwrap(), &pack).unwrap_err();
        assert!(err.contains("src/ghost.py"), "{err}");
        let gone = ClientScope {
            change: Some(change("src/gone.py", ChangeKind::Deleted)),
            ..sent
        };
        assert!(ClientScope::parse(&serde_json::to_string(&gone).unwrap(), &pack).is_ok());
        // Anything else in the scope (a spec, analyzers' leads) is refused, not ignored.
        let sneaky = r#"{"profile":"default","spec":{"path":"s","text":"t"}}"#;
        assert!(ClientScope::parse(sneaky, &pack)
            .unwrap_err()
            .contains("unknown field"));
        assert!(ClientScope::parse(&" ".repeat(MAX_CLIENT_SCOPE_BYTES + 1), &pack).is_err());
    }

    use super::*;
    use crate::review::finding::Verdict;

    fn finding(
        title: &str,
        sev: Severity,
        file: Option<&str>,
        lines: Option<(u32, u32)>,
    ) -> Finding {
        Finding {
            id: String::new(),
            title: title.into(),
            severity: sev,
            confidence: 0.9,
            category: "c".into(),
            file: file.map(String::from),
            line_start: lines.map(|l| l.0),
            line_end: lines.map(|l| l.1),
            symbol: None,
            evidence: String::new(),
            why_it_matters: String::new(),
            suggested_fix: String::new(),
            verdict: Verdict::Confirmed,
            reporters: Vec::new(),
            anchor: title.into(),
            promoted: false,
            notes: Vec::new(),
            routing: Default::default(),
            rescored: None,
            fresh_eyes: false,
            carried_from: None,
            seen_before: None,
            cwe: None,
        }
    }

    fn change() -> ChangeSet {
        ChangeSet {
            spec: "a..b".into(),
            base: "a".repeat(40),
            head: "b".repeat(40),
            files: vec![
                FileChange {
                    path: "src/a.rs".into(),
                    kind: ChangeKind::Modified,
                    old_path: None,
                    added: 2,
                    removed: 1,
                    touched: vec![(10, 11), (30, 30)],
                    hunks: String::new(),
                },
                FileChange {
                    path: "gone.rs".into(),
                    kind: ChangeKind::Deleted,
                    old_path: None,
                    added: 0,
                    removed: 5,
                    touched: Vec::new(),
                    hunks: String::new(),
                },
            ],
        }
    }

    #[test]
    fn covers_touched_lines_only() {
        let c = change();
        assert!(c.covers(Some("src/a.rs"), Some(11), Some(14)));
        assert!(c.covers(Some("src/a.rs"), Some(30), None));
        assert!(
            c.covers(Some("src/a.rs"), None, None),
            "file-level finding on a changed file"
        );
        assert!(!c.covers(Some("src/a.rs"), Some(12), Some(29)));
        assert!(
            !c.covers(Some("src/b.rs"), Some(10), Some(10)),
            "untouched file"
        );
        assert!(!c.covers(None, None, None), "unlocated");
        assert!(!c.covers(Some("gone.rs"), Some(1), Some(1)), "deleted file");
        assert!(
            c.covers(Some("src/a.rs"), Some(11), Some(9)),
            "reversed range"
        );
    }

    #[test]
    fn apply_splits_pre_existing_and_renumbers() {
        let scope = ReviewScope {
            change: Some(change()),
            ..ReviewScope::default()
        };
        let gated = Gated {
            findings: vec![
                finding("on", Severity::P1, Some("src/a.rs"), Some((10, 10))),
                finding("off", Severity::P0, Some("src/a.rs"), Some((20, 22))),
                finding("elsewhere", Severity::P2, Some("src/b.rs"), Some((1, 1))),
            ],
            residual: vec![finding("low", Severity::P3, Some("src/b.rs"), Some((2, 2)))],
            ..Gated::default()
        };
        let out = scope.apply(gated);
        let titles = |l: &[Finding]| {
            l.iter()
                .map(|f| (f.id.clone(), f.title.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(titles(&out.findings), vec![("F001".into(), "on".into())]);
        assert!(out.residual.is_empty());
        assert_eq!(
            titles(&out.pre_existing),
            vec![
                ("E001".to_string(), "off".to_string()),
                ("E002".to_string(), "elsewhere".to_string()),
                ("E003".to_string(), "low".to_string())
            ]
        );
        assert!(out.dropped.is_empty());
    }

    #[test]
    fn chill_drops_below_the_floor_default_keeps() {
        let gated = Gated {
            findings: vec![
                finding("major", Severity::P1, Some("a"), Some((1, 1))),
                finding("nit", Severity::P3, Some("a"), Some((2, 2))),
            ],
            ..Gated::default()
        };
        let kept = ReviewScope::default().apply(gated.clone());
        assert_eq!(kept.findings.len(), 2);
        let chill = ReviewScope {
            profile: Profile::Chill,
            ..ReviewScope::default()
        }
        .apply(gated);
        assert_eq!(chill.findings.len(), 1);
        assert_eq!(chill.findings[0].title, "major");
        assert_eq!(chill.dropped.len(), 1);
        assert_eq!(chill.dropped[0].reason, BELOW_FLOOR);
        assert_eq!(chill.dropped[0].title, "nit");
    }

    #[test]
    fn a_task_scope_keeps_only_its_files_hunks() {
        let mut c = change();
        for f in &mut c.files {
            f.hunks = format!("hunks of {}", f.path);
        }
        let scope = ReviewScope {
            change: Some(c),
            ..ReviewScope::default()
        };
        let mine = scope.for_task(&["src/a.rs".to_string()]);
        let files = &mine.change.as_ref().unwrap().files;
        assert_eq!(files.len(), 2, "every changed file stays listed");
        assert_eq!(files[0].hunks, "hunks of src/a.rs");
        assert!(files[1].hunks.is_empty());
        assert_eq!(
            scope.for_task(&[]),
            scope,
            "a task without files sees the whole change"
        );
    }

    #[test]
    fn a_task_scope_keeps_only_its_files_leads() {
        let lead = |file: &str| crate::analyzer::Lead {
            tool: "t".into(),
            file: file.into(),
            line: 1,
            end_line: None,
            rule: "R1".into(),
            message: "m".into(),
            severity: Severity::P3,
            category: "lint".into(),
            confidence: 0.6,
            harm: Default::default(),
            cwe: None,
            weakness: None,
        };
        let scope = ReviewScope {
            analyzers: crate::analyzer::Leads {
                runs: vec![crate::analyzer::AnalyzerRun::skipped("x", "not on PATH")],
                leads: vec![lead("a.py"), lead("b.py")],
            },
            ..ReviewScope::default()
        };
        let mine = scope.for_task(&["b.py".to_string()]);
        assert_eq!(mine.analyzers.leads, vec![lead("b.py")]);
        assert_eq!(mine.analyzers.runs.len(), 1);
        assert!(scope.for_task(&[]).analyzers.leads.is_empty());
    }

    #[test]
    fn profiles_parse_and_set_gates() {
        assert_eq!(Profile::parse("Chill"), Some(Profile::Chill));
        assert_eq!(Profile::parse("assertive"), Some(Profile::Assertive));
        assert_eq!(Profile::parse(""), Some(Profile::Default));
        assert_eq!(Profile::parse("lax"), None);
        assert_eq!(Profile::Default.gate(0.55), 0.55);
        assert_eq!(Profile::Chill.gate(0.55), 0.7);
        assert_eq!(Profile::Assertive.gate(0.55), 0.4);
        assert_eq!(Profile::Assertive.floor(), None);
    }

    #[test]
    fn path_guidance_matches_by_glob() {
        let g = Guidance {
            source: ".quorum.toml".into(),
            instructions: String::new(),
            paths: vec![
                PathGuidance {
                    glob: "src/api/**".into(),
                    instructions: "api".into(),
                },
                PathGuidance {
                    glob: "*.sql".into(),
                    instructions: "sql".into(),
                },
            ],
        };
        let hit = g.for_files(&["src/api/v1/users.py".into()]);
        assert_eq!(hit.len(), 1);
        assert_eq!(hit[0].instructions, "api");
        let hit = g.for_files(&["db/schema.sql".into(), "src/api/x.py".into()]);
        assert_eq!(hit.len(), 2);
        assert!(g.for_files(&["src/core/x.py".into()]).is_empty());
        assert!(g.for_files(&[]).is_empty());
    }
}
