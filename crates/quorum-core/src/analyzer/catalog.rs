//! The analyzer catalog as data (`config/analyzers.yaml`, compiled in): each entry's command
//! and arguments, the files it applies to, its output format, how its levels and rules map to
//! severities and areas, and the category of its hits — validated with file and field errors —
//! and what an entry makes of a run's hits: the leads on the pack's files.

use super::formats::{relative_path, Hit, OutputFormat};
use super::leads::{one_line, Lead};
use crate::error::AnalyzerError;
use crate::pack::ContextPack;
use crate::review::finding::Severity;
use crate::weakness::{Harm, Weaknesses};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The shipped catalog, compiled in so the binary works from any directory.
pub const DEFAULT_CATALOG: &str = include_str!("../../../../config/analyzers.yaml");

/// Tool levels and rule ids to severities. The longest rule-id prefix in `rules` wins, then
/// the level (lowercased) in `levels`, then `default`. A prefix ending in a letter ends at a
/// letter: `S` matches `S101` (ruff's bandit rules), not `SIM115`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeverityMap {
    #[serde(default = "p3")]
    pub default: Severity,
    #[serde(default)]
    pub levels: BTreeMap<String, Severity>,
    #[serde(default)]
    pub rules: BTreeMap<String, Severity>,
}

fn p3() -> Severity {
    Severity::P3
}

impl Default for SeverityMap {
    fn default() -> Self {
        SeverityMap {
            default: Severity::P3,
            levels: BTreeMap::new(),
            rules: BTreeMap::new(),
        }
    }
}

impl SeverityMap {
    pub fn of(&self, rule: &str, level: Option<&str>) -> Severity {
        longest_prefix(&self.rules, rule)
            .copied()
            .or_else(|| {
                level.and_then(|l| self.levels.get(&l.trim().to_ascii_lowercase()).copied())
            })
            .unwrap_or(self.default)
    }
}

/// Tool levels and rule ids to the harm a lead can do (see [`crate::weakness::Harm`]). The
/// longest rule-id prefix in `rules` wins, then the weakness class of the rule, then the level
/// in `levels`, then `default`, then what the lead's area says (`security`, `correctness`,
/// `reliability`, `lint` is style, anything else maintainability).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarmMap {
    #[serde(default)]
    pub default: Option<Harm>,
    #[serde(default)]
    pub levels: BTreeMap<String, Harm>,
    #[serde(default)]
    pub rules: BTreeMap<String, Harm>,
}

impl HarmMap {
    pub fn of(&self, rule: &str, level: Option<&str>, area: &str) -> Harm {
        longest_prefix(&self.rules, rule)
            .copied()
            .or_else(|| Weaknesses::shipped().of_rule(rule).map(|w| w.harm))
            .or_else(|| {
                level.and_then(|l| self.levels.get(&l.trim().to_ascii_lowercase()).copied())
            })
            .or(self.default)
            .unwrap_or(match area {
                "security" => Harm::Security,
                "correctness" | "concurrency" => Harm::Correctness,
                "reliability" | "configuration" => Harm::Reliability,
                "lint" | "style" => Harm::Style,
                _ => Harm::Maintainability,
            })
    }
}

/// The value of the longest rule-id prefix of `rule` in `map` (see [`rule_has_prefix`]).
fn longest_prefix<'a, V>(map: &'a BTreeMap<String, V>, rule: &str) -> Option<&'a V> {
    map.iter()
        .filter(|(prefix, _)| rule_has_prefix(rule, prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, v)| v)
}

/// Compiled gitignore-style globs, and whether a pack path matches any of them.
struct Globs(Vec<ignore::gitignore::Gitignore>);

impl Globs {
    fn new(globs: &[String]) -> Globs {
        Globs(
            globs
                .iter()
                .filter_map(|g| crate::pack::glob_matcher(g))
                .collect(),
        )
    }

    fn matches(&self, path: &str) -> bool {
        self.0
            .iter()
            .any(|m| m.matched_path_or_any_parents(path, false).is_ignore())
    }
}

fn rule_has_prefix(rule: &str, prefix: &str) -> bool {
    let Some(rest) = rule.strip_prefix(prefix) else {
        return false;
    };
    let ends_in_letter = prefix
        .chars()
        .last()
        .is_some_and(|c| c.is_ascii_alphabetic());
    !ends_in_letter || !rest.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
}

/// One analyzer of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzerSpec {
    pub name: String,
    /// The program, looked up on PATH.
    pub command: String,
    /// Arguments; `{files}` expands to the matching files (relative paths, one argument each).
    #[serde(default)]
    pub args: Vec<String>,
    /// gitignore-style globs of the files it applies to (`*.py`); empty = every file.
    #[serde(default)]
    pub files: Vec<String>,
    /// gitignore-style globs of files it never gets, even when `files` or `languages` match
    /// (test code for a security scanner: a literal password in a test is a fixture).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Pack languages it applies to (`python`), in addition to `files`.
    #[serde(default)]
    pub languages: Vec<String>,
    /// Globs of which at least one pack file must match for the tool to run at all (its own
    /// configuration, when it cannot run without one).
    #[serde(default)]
    pub requires: Vec<String>,
    pub format: OutputFormat,
    #[serde(default)]
    pub severity: SeverityMap,
    /// The harm its leads can do, which orders their verification and keeps style apart.
    #[serde(default)]
    pub harm: HarmMap,
    /// The tool's own confidence levels (lowercased) to the confidence its leads carry, in
    /// place of `confidence` for a hit that states one (bandit's, semgrep's metadata).
    #[serde(default)]
    pub confidences: BTreeMap<String, f64>,
    /// The category of its findings; the rule id is appended (`lint/F401`).
    #[serde(default = "default_category")]
    pub category: String,
    /// Rule-id prefixes whose findings belong to another area than `category` (ruff's `S`
    /// rules are security, `SIM115` an unclosed file): the longest matching prefix wins, by
    /// the same rule as `severity.rules`, and the rule id is appended (`security/S608`).
    #[serde(default)]
    pub areas: BTreeMap<String, String>,
    /// The confidence its candidate findings carry into the gate.
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// At most this many hits are kept (the rest are counted in the run's note).
    #[serde(default = "default_max_hits")]
    pub max_hits: usize,
    /// Environment variables passed through besides PATH (a toolchain's home, for example);
    /// everything else is cleared. `NAME=VALUE` also sets VALUE when NAME is unset (`{home}`
    /// in it is the user's real HOME: the tool's own HOME is its copy).
    #[serde(default)]
    pub env: Vec<String>,
    /// Its own time bound; the configured one applies when absent.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

fn default_category() -> String {
    "analyzer".into()
}

fn default_confidence() -> f64 {
    0.7
}

fn default_max_hits() -> usize {
    100
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    analyzers: Vec<AnalyzerSpec>,
}

/// The analyzers a review may run, in catalog order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnalyzerCatalog {
    pub analyzers: Vec<AnalyzerSpec>,
}

impl AnalyzerCatalog {
    /// The shipped catalog.
    pub fn shipped() -> Result<AnalyzerCatalog, AnalyzerError> {
        AnalyzerCatalog::parse(DEFAULT_CATALOG, Path::new("config/analyzers.yaml"))
    }

    pub fn load(path: &Path) -> Result<AnalyzerCatalog, AnalyzerError> {
        let text = std::fs::read_to_string(path).map_err(|e| AnalyzerError::Catalog {
            path: path.to_path_buf(),
            message: format!("cannot read it: {e}"),
        })?;
        AnalyzerCatalog::parse(&text, path)
    }

    /// Every `{rules}` in the analyzers' arguments replaced by `dir`, where quorum's rule pack
    /// was written ([`crate::analyzer::RULE_PACK`]).
    pub fn with_rules_dir(mut self, dir: &Path) -> AnalyzerCatalog {
        let dir = dir.display().to_string();
        for a in &mut self.analyzers {
            for arg in &mut a.args {
                if arg.contains(super::RULES_PLACEHOLDER) {
                    *arg = arg.replace(super::RULES_PLACEHOLDER, &dir);
                }
            }
        }
        self
    }

    /// Parse and validate a catalog; errors name the file, the analyzer and the field.
    pub fn parse(yaml: &str, path: &Path) -> Result<AnalyzerCatalog, AnalyzerError> {
        let bad = |message: String| AnalyzerError::Catalog {
            path: path.to_path_buf(),
            message,
        };
        let file: CatalogFile = serde_yaml::from_str(yaml).map_err(|e| bad(e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, a) in file.analyzers.iter().enumerate() {
            let who = if a.name.trim().is_empty() {
                format!("analyzer {}", i + 1)
            } else {
                format!("analyzer {:?}", a.name)
            };
            if a.name.trim().is_empty()
                || !a
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(bad(format!(
                    "{who}: field `name`: use letters, digits, '-' and '_'"
                )));
            }
            if !seen.insert(a.name.clone()) {
                return Err(bad(format!("{who}: field `name`: listed twice")));
            }
            if a.command.trim().is_empty() || a.command.contains('/') {
                return Err(bad(format!(
                    "{who}: field `command`: a program name looked up on PATH, without a path"
                )));
            }
            for e in &a.env {
                let name = e.split_once('=').map_or(e.as_str(), |(n, _)| n).trim();
                if name.is_empty()
                    || name == "PATH"
                    || name == "HOME"
                    || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(bad(format!(
                        "{who}: field `env`: {e:?} is not NAME or NAME=VALUE (PATH and HOME are set by quorum)"
                    )));
                }
            }
            if !(0.0..=1.0).contains(&a.confidence)
                || a.confidences.values().any(|c| !(0.0..=1.0).contains(c))
            {
                return Err(bad(format!("{who}: field `confidence`: between 0 and 1")));
            }
            for g in a.files.iter().chain(&a.requires).chain(&a.exclude) {
                if crate::pack::glob_matcher(g).is_none() {
                    return Err(bad(format!("{who}: invalid glob {g:?}")));
                }
            }
        }
        Ok(AnalyzerCatalog {
            analyzers: file.analyzers,
        })
    }
}

impl AnalyzerSpec {
    /// The pack files this analyzer applies to, in path order, or why it does not run.
    pub fn applicable_files(&self, pack: &ContextPack) -> Result<Vec<String>, String> {
        if self
            .args
            .iter()
            .any(|a| a.contains(super::RULES_PLACEHOLDER))
        {
            return Err(
                "quorum's rule pack was not written for this run ({rules} is unset)".into(),
            );
        }
        if !self.requires.is_empty() {
            let required = Globs::new(&self.requires);
            if !pack.files.keys().any(|f| required.matches(f)) {
                return Err(format!(
                    "no file matching {} in the reviewed files",
                    self.requires.join(", ")
                ));
            }
        }
        let included = Globs::new(&self.files);
        let excluded = Globs::new(&self.exclude);
        let every = self.files.is_empty() && self.languages.is_empty();
        let files: Vec<String> = pack
            .files
            .values()
            .filter(|f| !excluded.matches(&f.path))
            .filter(|f| {
                every
                    || self
                        .languages
                        .iter()
                        .any(|l| l.eq_ignore_ascii_case(&f.language))
                    || included.matches(&f.path)
            })
            .map(|f| f.path.clone())
            .collect();
        if files.is_empty() {
            return Err("no file it applies to in the reviewed files".into());
        }
        Ok(files)
    }

    /// The argument list with `{files}` expanded.
    pub fn expand_args(&self, files: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.args {
            if a == "{files}" {
                out.extend(files.iter().cloned());
            } else {
                out.push(a.clone());
            }
        }
        out
    }

    /// The category a rule's findings belong to: its longest prefix in `areas`, else
    /// `category`.
    pub fn area_of(&self, rule: &str) -> &str {
        longest_prefix(&self.areas, rule).map_or(self.category.as_str(), String::as_str)
    }

    /// Turn parsed hits into leads: paths made relative to the copy's root, hits on files
    /// outside the pack left out, severities mapped, at most `max_hits` kept, most severe first
    /// (a rule's hit per file and line once). Returns the leads and a note on what was left out, if anything.
    pub fn leads(
        &self,
        hits: Vec<Hit>,
        roots: &[&str],
        pack: &ContextPack,
    ) -> (Vec<Lead>, Option<String>) {
        let mut outside = 0usize;
        let mut seen = std::collections::BTreeSet::new();
        let mut leads = Vec::new();
        for h in hits {
            let Some(file) = relative_path(&h.file, roots).filter(|f| pack.get(f).is_some()) else {
                outside += 1;
                continue;
            };
            if !seen.insert((file.clone(), h.line, h.rule.clone())) {
                continue;
            }
            let area = self.area_of(&h.rule);
            let class = Weaknesses::shipped().of_rule(&h.rule);
            let confidence = h
                .confidence
                .as_deref()
                .and_then(|c| self.confidences.get(&c.trim().to_ascii_lowercase()))
                .copied()
                .unwrap_or(self.confidence);
            leads.push(Lead {
                tool: self.name.clone(),
                severity: self.severity.of(&h.rule, h.level.as_deref()),
                harm: self.harm.of(&h.rule, h.level.as_deref(), area),
                cwe: h.cwe.or_else(|| class.and_then(|w| w.cwe)),
                weakness: class.map(|w| w.id.clone()),
                category: area.to_string(),
                confidence,
                file,
                line: h.line,
                end_line: h.end_line.filter(|e| *e > h.line),
                rule: h.rule,
                message: one_line(&h.message, 300),
            });
        }
        // Over the cap, the most harmful and severe are kept (in the tool's order within).
        leads.sort_by_key(|l| (l.harm, l.severity));
        let kept = leads.len().min(self.max_hits);
        let over = leads.len() - kept;
        leads.truncate(kept);
        let mut notes = Vec::new();
        if outside > 0 {
            notes.push(format!("{outside} hits outside the reviewed files ignored"));
        }
        if over > 0 {
            notes.push(format!(
                "{over} more hits left out (max_hits {})",
                self.max_hits
            ));
        }
        (leads, (!notes.is_empty()).then(|| notes.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::parse_output;
    use crate::analyzer::testing::{pack, spec, RUFF};
    use std::path::PathBuf;

    #[test]
    fn leads_are_tied_to_the_pack_bounded_and_mapped() {
        let mut s = spec("ruff", OutputFormat::RuffJson);
        s.severity.rules.insert("F".into(), Severity::P2);
        s.severity.rules.insert("F40".into(), Severity::P1);
        s.max_hits = 1;
        let mut hits = parse_output(OutputFormat::RuffJson, RUFF).unwrap();
        hits.push(Hit {
            file: "/elsewhere/lib.py".into(),
            line: 1,
            end_line: None,
            rule: "E1".into(),
            message: "m".into(),
            level: None,
            ..Default::default()
        });
        let (leads, note) = s.leads(hits.clone(), &["/tmp/quorum-analyzers-x"], &pack());
        assert_eq!(leads.len(), 1);
        assert_eq!(leads[0].file, "app.py");
        assert_eq!(leads[0].rule, "F401");
        assert_eq!(leads[0].severity, Severity::P1, "longest prefix wins");
        assert_eq!(
            note.as_deref(),
            Some("1 hits outside the reviewed files ignored; 1 more hits left out (max_hits 1)")
        );
        // Over the cap the most severe stay, wherever the tool listed them.
        s.severity.rules.insert("syntax-error".into(), Severity::P0);
        let (leads, _) = s.leads(hits, &["/tmp/quorum-analyzers-x"], &pack());
        assert_eq!(leads[0].rule, "syntax-error");
    }

    #[test]
    fn severity_map_order() {
        let mut m = SeverityMap::default();
        m.levels.insert("high".into(), Severity::P1);
        m.rules.insert("B6".into(), Severity::P0);
        assert_eq!(m.of("B602", Some("LOW")), Severity::P0);
        assert_eq!(m.of("B105", Some("HIGH")), Severity::P1);
        assert_eq!(m.of("B105", None), Severity::P3);
        m.rules.insert("S".into(), Severity::P1);
        assert_eq!(m.of("S608", None), Severity::P1);
        assert_eq!(m.of("SIM115", None), Severity::P3, "S is not SIM");
        assert_eq!(m.of("S", None), Severity::P1);
    }

    #[test]
    fn applicability_and_args() {
        let mut s = spec("shellcheck", OutputFormat::ShellcheckJson1);
        s.files = vec!["*.sh".into()];
        s.args = vec!["-f".into(), "json1".into(), "{files}".into()];
        let files = s.applicable_files(&pack()).unwrap();
        assert_eq!(files, vec!["run.sh".to_string()]);
        assert_eq!(s.expand_args(&files), vec!["-f", "json1", "run.sh"]);
        s.requires = vec![".shellcheckrc".into()];
        assert!(s
            .applicable_files(&pack())
            .unwrap_err()
            .contains(".shellcheckrc"));
        let mut r = spec("clippy", OutputFormat::CargoJson);
        r.languages = vec!["rust".into()];
        assert_eq!(
            r.applicable_files(&pack()).unwrap(),
            vec!["src/main.rs".to_string()]
        );
        // exclude wins over files and languages.
        let mut b = spec("bandit", OutputFormat::BanditJson);
        b.files = vec!["*.py".into()];
        assert_eq!(
            b.applicable_files(&pack()).unwrap(),
            vec!["app.py", "long.py"]
        );
        b.exclude = vec!["long.py".into()];
        assert_eq!(b.applicable_files(&pack()).unwrap(), vec!["app.py"]);
        b.exclude = vec!["*.py".into()];
        assert!(b.applicable_files(&pack()).is_err());
        r.exclude = vec!["src/".into()];
        assert!(r.applicable_files(&pack()).is_err());
    }

    #[test]
    fn the_shipped_security_scanner_skips_test_code() {
        let c = AnalyzerCatalog::shipped().unwrap();
        let bandit = c.analyzers.iter().find(|a| a.name == "bandit").unwrap();
        let p = ContextPack::from_files(
            PathBuf::from("/t"),
            None,
            [
                "src/auth.py",
                "tests/test_app.py",
                "pkg/test_util.py",
                "pkg/util_test.py",
                "conftest.py",
                "pkg/testing.py",
            ]
            .iter()
            .map(|p| (p.to_string(), "x = 1\n".to_string()))
            .collect(),
        );
        assert_eq!(
            bandit.applicable_files(&p).unwrap(),
            vec!["pkg/testing.py", "src/auth.py"]
        );
    }

    #[test]
    fn shipped_catalog_parses_and_names_each_format_once_at_least() {
        let c = AnalyzerCatalog::shipped().unwrap();
        let names: Vec<&str> = c.analyzers.iter().map(|a| a.name.as_str()).collect();
        for n in [
            "ruff",
            "bandit",
            "semgrep",
            "shellcheck",
            "clippy",
            "eslint",
        ] {
            assert!(names.contains(&n), "{names:?}");
        }
    }

    #[test]
    fn the_rule_pack_entry_runs_only_once_its_rules_dir_is_known() {
        let pack = ContextPack::from_files(
            "/t".into(),
            None,
            vec![("src/db.py".into(), "x = 1\n".into())],
        );
        let shipped = AnalyzerCatalog::shipped().unwrap();
        let rules = |c: &AnalyzerCatalog| {
            c.analyzers
                .iter()
                .find(|a| a.name == "quorum-rules")
                .cloned()
                .unwrap()
        };
        let unset = rules(&shipped);
        assert!(unset
            .applicable_files(&pack)
            .unwrap_err()
            .contains("rule pack"));
        let set = rules(&shipped.with_rules_dir(Path::new("/data/rules/0123")));
        assert_eq!(set.applicable_files(&pack).unwrap(), vec!["src/db.py"]);
        assert!(set
            .expand_args(&["src/db.py".into()])
            .windows(2)
            .any(|w| w[0] == "--config" && w[1] == "/data/rules/0123/semgrep"));
        assert_eq!(set.area_of("file-opened-without-close"), "reliability");
        assert_eq!(set.area_of("sql-built-from-strings"), "security");
    }

    #[test]
    fn a_rule_s_area_is_its_longest_prefix_in_areas_else_the_category() {
        let c = AnalyzerCatalog::shipped().unwrap();
        let ruff = c.analyzers.iter().find(|a| a.name == "ruff").unwrap();
        assert_eq!(ruff.area_of("S608"), "security");
        assert_eq!(ruff.area_of("SIM115"), "reliability");
        // "S" ends in a letter, so it does not take SIM105.
        assert_eq!(ruff.area_of("SIM105"), "lint");
        assert_eq!(ruff.area_of("F821"), "correctness");
        assert_eq!(ruff.area_of("E501"), "lint");
        let bandit = c.analyzers.iter().find(|a| a.name == "bandit").unwrap();
        assert_eq!(bandit.area_of("B608"), "security");
    }

    #[test]
    fn catalog_errors_name_the_field() {
        let e = AnalyzerCatalog::parse(
            "analyzers:\n  - name: x\n    command: /usr/bin/x\n    format: ruff_json\n",
            Path::new("a.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a.yaml") && e.contains("`command`"), "{e}");
        let e = AnalyzerCatalog::parse(
            "analyzers:\n  - name: x\n    command: x\n    format: pylint\n",
            Path::new("a.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a.yaml"), "{e}");
    }
}
