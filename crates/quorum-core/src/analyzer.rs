//! Deterministic analyzers (linters, security scanners) as data, and their hits as leads.
//!
//! An analyzer is a catalog entry (`config/analyzers.yaml`): the command and its arguments,
//! the files it applies to, the shape of its JSON output, how its levels and rules map to
//! severities, and the category its hits belong to. Nothing in the engine names a tool: the
//! only tool-shaped code is one parser per output *format* ([`OutputFormat`]), each a pure
//! function from the tool's stdout to [`Hit`]s, unit-tested on real-looking samples below.
//!
//! A hit becomes a [`Lead`] (file, line, rule, message, tool). Leads are recorded with the
//! review's scope, so a resumed or distributed review sees the same ones; they reach the
//! prompts of specialists whose files they touch (delimited as untrusted content: tool output
//! quotes the code under review), and each one is also a candidate finding
//! ([`Lead::to_finding`]) that grounding and the verifier must confirm like any other.
//! Running the tools is the runtime's business (`quorum_runtime::analyzers`); this module
//! decides what to run on which files and what the output means.

use crate::error::AnalyzerError;
use crate::pack::ContextPack;
use crate::review::finding::{Dropped, RawFinding, Severity, Verdict};
use crate::review::judged::Judged;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The shipped catalog, compiled in so the binary works from any directory.
pub const DEFAULT_CATALOG: &str = include_str!("../../../config/analyzers.yaml");

/// How many leads one specialist prompt lists before saying how many more there are.
pub const MAX_LEADS_PER_PROMPT: usize = 20;

/// The reporter persona that credits a tool: `analyzer:<name>`.
pub const REPORTER_PREFIX: &str = "analyzer:";

/// The JSON shapes quorum can read. Each names an output format, not a tool: any tool that
/// writes the same shape can use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputFormat {
    /// An array of `{code, message, filename, location: {row}, end_location: {row}}`.
    RuffJson,
    /// `{results: [{filename, line_number, line_range, test_id, issue_text, issue_severity}]}`.
    BanditJson,
    /// `{results: [{check_id, path, start: {line}, end: {line}, extra: {message, severity}}]}`.
    SemgrepJson,
    /// `{comments: [{file, line, endLine, level, code, message}]}` (`-f json1`).
    ShellcheckJson1,
    /// JSON lines of cargo's `--message-format json`: `compiler-message` records whose primary
    /// span locates the diagnostic.
    CargoJson,
    /// An array of `{filePath, messages: [{ruleId, severity: 1|2, message, line, endLine}]}`.
    EslintJson,
}

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
            if !(0.0..=1.0).contains(&a.confidence) {
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
            leads.push(Lead {
                tool: self.name.clone(),
                severity: self.severity.of(&h.rule, h.level.as_deref()),
                category: self.area_of(&h.rule).to_string(),
                confidence: self.confidence,
                file,
                line: h.line,
                end_line: h.end_line.filter(|e| *e > h.line),
                rule: h.rule,
                message: one_line(&h.message, 300),
            });
        }
        // Over the cap, the most severe are kept (in the tool's order within a severity).
        leads.sort_by_key(|l| l.severity);
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

/// One diagnostic as a parser read it, before it is tied to the pack.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// As the tool wrote it (absolute, `./`-prefixed or relative).
    pub file: String,
    pub line: u32,
    pub end_line: Option<u32>,
    pub rule: String,
    pub message: String,
    /// The tool's own level ("error", "warning", "HIGH"), when it has one.
    pub level: Option<String>,
}

/// Parse a tool's stdout in `format`. An answer that is not the expected shape is an error
/// (the run is reported as failed, with the reason); an empty answer is no hits.
pub fn parse_output(format: OutputFormat, stdout: &str) -> Result<Vec<Hit>, String> {
    let text = stdout.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let json = |parse: fn(&Value) -> Option<Vec<Hit>>| {
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("output is not JSON: {e}"))?;
        parse(&v).ok_or_else(|| format!("output is JSON but not {format:?} (unexpected shape)"))
    };
    match format {
        OutputFormat::CargoJson => Ok(parse_cargo(text)),
        OutputFormat::RuffJson => json(parse_ruff),
        OutputFormat::BanditJson => json(parse_bandit),
        OutputFormat::SemgrepJson => json(parse_semgrep),
        OutputFormat::ShellcheckJson1 => json(parse_shellcheck),
        OutputFormat::EslintJson => json(parse_eslint),
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn line_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

fn parse_ruff(v: &Value) -> Option<Vec<Hit>> {
    let items = v.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|d| {
                Some(Hit {
                    file: str_of(d, "filename")?.to_string(),
                    line: line_of(d.pointer("/location/row"))?,
                    end_line: line_of(d.pointer("/end_location/row")),
                    // Syntax errors have no code.
                    rule: str_of(d, "code").unwrap_or("syntax-error").to_string(),
                    message: str_of(d, "message").unwrap_or_default().to_string(),
                    level: None,
                })
            })
            .collect(),
    )
}

fn parse_bandit(v: &Value) -> Option<Vec<Hit>> {
    let items = v.get("results")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|d| {
                let line = line_of(d.get("line_number"))?;
                let end = d
                    .get("line_range")
                    .and_then(Value::as_array)
                    .and_then(|r| line_of(r.last()));
                Some(Hit {
                    file: str_of(d, "filename")?.to_string(),
                    line,
                    end_line: end,
                    rule: str_of(d, "test_id").unwrap_or("bandit").to_string(),
                    message: str_of(d, "issue_text").unwrap_or_default().to_string(),
                    level: str_of(d, "issue_severity").map(str::to_string),
                })
            })
            .collect(),
    )
}

fn parse_semgrep(v: &Value) -> Option<Vec<Hit>> {
    let items = v.get("results")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|d| {
                Some(Hit {
                    file: str_of(d, "path")?.to_string(),
                    line: line_of(d.pointer("/start/line"))?,
                    end_line: line_of(d.pointer("/end/line")),
                    rule: str_of(d, "check_id").unwrap_or("semgrep").to_string(),
                    message: d
                        .pointer("/extra/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    level: d
                        .pointer("/extra/severity")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect(),
    )
}

fn parse_shellcheck(v: &Value) -> Option<Vec<Hit>> {
    let items = v.get("comments")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|d| {
                let code = match d.get("code") {
                    Some(Value::Number(n)) => format!("SC{n}"),
                    Some(Value::String(s)) => s.clone(),
                    _ => "shellcheck".to_string(),
                };
                Some(Hit {
                    file: str_of(d, "file")?.to_string(),
                    line: line_of(d.get("line"))?,
                    end_line: line_of(d.get("endLine")),
                    rule: code,
                    message: str_of(d, "message").unwrap_or_default().to_string(),
                    level: str_of(d, "level").map(str::to_string),
                })
            })
            .collect(),
    )
}

fn parse_eslint(v: &Value) -> Option<Vec<Hit>> {
    let files = v.as_array()?;
    let mut hits = Vec::new();
    for f in files {
        let Some(path) = str_of(f, "filePath") else {
            continue;
        };
        for m in f
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(line) = line_of(m.get("line")) else {
                continue;
            };
            let level = match m.get("severity").and_then(Value::as_u64) {
                Some(2) => "error",
                Some(1) => "warning",
                _ => "off",
            };
            hits.push(Hit {
                file: path.to_string(),
                line,
                end_line: line_of(m.get("endLine")),
                // Parse errors have no rule.
                rule: str_of(m, "ruleId").unwrap_or("parse-error").to_string(),
                message: str_of(m, "message").unwrap_or_default().to_string(),
                level: Some(level.to_string()),
            });
        }
    }
    Some(hits)
}

/// cargo writes one JSON record per line, interleaved with artifacts and build results; a
/// line that is not JSON (a panic message, a progress line) is skipped, not fatal.
fn parse_cargo(text: &str) -> Vec<Hit> {
    let mut hits = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        if str_of(&v, "reason") != Some("compiler-message") {
            continue;
        }
        let Some(msg) = v.get("message") else {
            continue;
        };
        let level = str_of(msg, "level").unwrap_or("warning");
        if !matches!(level, "warning" | "error") {
            continue;
        }
        let Some(span) = msg.get("spans").and_then(Value::as_array).and_then(|s| {
            s.iter()
                .find(|sp| sp.get("is_primary").and_then(Value::as_bool) == Some(true))
        }) else {
            // "aborting due to N previous errors" and summaries have no span.
            continue;
        };
        let Some(file) = str_of(span, "file_name") else {
            continue;
        };
        let Some(start) = line_of(span.get("line_start")) else {
            continue;
        };
        hits.push(Hit {
            file: file.to_string(),
            line: start,
            end_line: line_of(span.get("line_end")),
            rule: msg
                .pointer("/code/code")
                .and_then(Value::as_str)
                .unwrap_or("rustc")
                .to_string(),
            message: str_of(msg, "message").unwrap_or_default().to_string(),
            level: Some(level.to_string()),
        });
    }
    hits
}

/// A tool's path relative to the copy it ran in: `roots` (the copy's path, as given and
/// canonical) stripped, `./` dropped, separators made '/'. `None` for a path elsewhere.
pub fn relative_path(path: &str, roots: &[&str]) -> Option<String> {
    let p = path.replace('\\', "/");
    let mut rel = p.as_str();
    for root in roots {
        let root = root.trim_end_matches('/');
        if root.is_empty() {
            continue;
        }
        if let Some(rest) = p.strip_prefix(root) {
            if let Some(rest) = rest.strip_prefix('/') {
                rel = rest;
                break;
            }
        }
    }
    while let Some(rest) = rel.strip_prefix("./") {
        rel = rest;
    }
    if rel.is_empty() || rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(rel.to_string())
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// One analyzer hit tied to a file of the pack: a place a specialist should look, and a
/// candidate finding the verifier must confirm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lead {
    /// The analyzer's catalog name.
    pub tool: String,
    pub file: String,
    pub line: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    pub rule: String,
    pub message: String,
    pub severity: Severity,
    pub category: String,
    pub confidence: f64,
}

impl Lead {
    /// The reporter persona that credits this lead's tool.
    pub fn reporter_name(&self) -> String {
        format!("{REPORTER_PREFIX}{}", self.tool)
    }

    /// The lead as a candidate finding. Its evidence is the cited lines as the pack holds them
    /// (extended by a line or two when they are too short to locate anything), so grounding
    /// checks the location like any finding's; a line outside the file quotes nothing and
    /// grounding refuses it.
    pub fn to_finding(&self, pack: &ContextPack) -> RawFinding {
        let end = self.end_line.unwrap_or(self.line).max(self.line);
        let evidence = pack
            .get(&self.file)
            .filter(|f| self.line >= 1 && self.line <= f.line_count)
            .map(|f| {
                let lines: Vec<&str> = f.content.lines().collect();
                let from = self.line as usize - 1;
                let mut to = (end as usize).min(lines.len()).min(from + 3);
                let chars = |a: usize, b: usize| {
                    lines[a..b]
                        .iter()
                        .map(|l| l.chars().filter(|c| !c.is_whitespace()).count())
                        .sum::<usize>()
                };
                while chars(from, to) < crate::review::grounding::MIN_EVIDENCE_CHARS
                    && to < lines.len()
                    && to < from + 3
                {
                    to += 1;
                }
                lines[from..to].join("\n")
            })
            .unwrap_or_default();
        RawFinding {
            title: one_line(&format!("{}: {}", self.rule, self.message), 120),
            severity: self.severity,
            confidence: self.confidence,
            category: format!("{}/{}", self.category, self.rule),
            file: Some(self.file.clone()),
            line_start: Some(self.line),
            line_end: Some(end),
            symbol: None,
            evidence,
            // The verifier sees this; it names the rule, never who reported it.
            why_it_matters: format!("rule {}: {}", self.rule, self.message),
            suggested_fix: String::new(),
            routing: Default::default(),
        }
    }
}

/// What happened to one analyzer of the catalog in this review (the report's `analyzers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalyzerRun {
    pub name: String,
    /// True when the tool ran and its output was read.
    pub ran: bool,
    /// Why it did not run, or why its output could not be used (not on PATH, no matching
    /// files, timed out and killed, unreadable output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_reason: Option<String>,
    /// Leads kept from its output.
    pub hits: usize,
    /// What was left out of its output (hits outside the reviewed files, over `max_hits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default)]
    pub duration_ms: u64,
}

impl AnalyzerRun {
    pub fn skipped(name: &str, why: impl Into<String>) -> AnalyzerRun {
        AnalyzerRun {
            name: name.to_string(),
            ran: false,
            skipped_reason: Some(why.into()),
            hits: 0,
            note: None,
            duration_ms: 0,
        }
    }

    /// One line for progress output and the report's methodology.
    pub fn describe(&self) -> String {
        let mut s = match (&self.skipped_reason, self.ran) {
            (Some(why), false) => format!("{} skipped: {why}", self.name),
            _ => format!("{}: {} hits", self.name, self.hits),
        };
        if let Some(n) = &self.note {
            let _ = write!(s, " ({n})");
        }
        s
    }
}

/// The analyzers' outcome for a review: every catalog entry's run and the leads they gave.
/// Decided once before the first stage and recorded with the review's scope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Leads {
    #[serde(default)]
    pub runs: Vec<AnalyzerRun>,
    #[serde(default)]
    pub leads: Vec<Lead>,
}

impl Leads {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.leads.is_empty()
    }

    /// The leads on any of `files`, in file and line order.
    pub fn on_files(&self, files: &[String]) -> Vec<&Lead> {
        let mut out: Vec<&Lead> = self
            .leads
            .iter()
            .filter(|l| files.contains(&l.file))
            .collect();
        out.sort_by(|a, b| (&a.file, a.line, &a.tool).cmp(&(&b.file, b.line, &b.tool)));
        out
    }

    /// Only the leads on `files` (the runs stay: they are what the report says).
    pub fn for_files(&self, files: &[String]) -> Leads {
        Leads {
            runs: self.runs.clone(),
            leads: self.on_files(files).into_iter().cloned().collect(),
        }
    }
}

/// Analyzer candidates no model checked (over `max_verifications`, the budget spent, the
/// verifier unavailable) leave the findings for `dropped`: a tool's hit becomes a finding only
/// once the verifier confirmed it, unlike a specialist's claim, which stays UNVERIFIED and
/// marked. Without this, a noisy tool would fill the report with unchecked findings.
pub fn take_unchecked_leads(judged: Vec<Judged>) -> (Vec<Judged>, Vec<Dropped>) {
    let mut kept = Vec::with_capacity(judged.len());
    let mut dropped = Vec::new();
    for j in judged {
        if j.verdict == Verdict::Unverified
            && j.reported.reporter.persona.starts_with(REPORTER_PREFIX)
        {
            dropped.push(Dropped {
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                reason: format!("analyzer lead not confirmed: {}", j.reason),
                verdict: Some(Verdict::Unverified),
                removed_by: "unconfirmed_lead".into(),
            });
        } else {
            kept.push(j);
        }
    }
    (kept, dropped)
}

/// A tool's hit inside the lines of a finding someone else reported is the same problem seen
/// twice: the candidate takes that finding's anchor (its symbol, else its first line), so
/// dedup merges the two — one finding, both reporters, the tool corroborating — instead of
/// listing it again under the rule's name. It also takes no more confidence than that report,
/// so when both are judged alike the merged finding keeps the reviewer's words (dedup keeps
/// the best-verdict, most confident report's text). Hallucinated reports anchor nothing.
pub fn anchor_to_overlapping(judged: &mut [Judged]) {
    let is_tool = |j: &Judged| j.reported.reporter.persona.starts_with(REPORTER_PREFIX);
    type Anchor = (String, u32, u32, Option<String>, f64);
    let anchors: Vec<Anchor> = judged
        .iter()
        .filter(|j| !is_tool(j) && j.verdict != Verdict::Hallucinated)
        .filter_map(|j| {
            let f = &j.reported.finding;
            let start = f.line_start?;
            let end = f.line_end.unwrap_or(start).max(start);
            Some((f.file.clone()?, start, end, f.symbol.clone(), f.confidence))
        })
        .collect();
    for j in judged.iter_mut().filter(|j| is_tool(j)) {
        let f = &mut j.reported.finding;
        let (Some(file), Some(line)) = (f.file.as_deref(), f.line_start) else {
            continue;
        };
        let Some((_, start, _, symbol, confidence)) = anchors
            .iter()
            .find(|(af, s, e, _, _)| af == file && *s <= line && line <= *e)
        else {
            continue;
        };
        f.confidence = f.confidence.min(*confidence);
        match symbol {
            Some(s) => f.symbol = Some(s.clone()),
            None => {
                let end = f.line_end.unwrap_or(line).max(*start);
                f.line_start = Some(*start);
                f.line_end = Some(end);
            }
        }
    }
}

/// The list of leads for a prompt, at most `max` of them, then a visible count of the rest.
/// The caller delimits it as untrusted content: messages quote the code under review.
pub fn leads_list(leads: &[&Lead], max: usize) -> String {
    let mut out = String::new();
    for l in leads.iter().take(max) {
        let lines = match l.end_line {
            Some(e) if e > l.line => format!("{}-{e}", l.line),
            _ => l.line.to_string(),
        };
        let _ = writeln!(
            out,
            "- {}:{lines} [{} {}] {}",
            l.file, l.tool, l.rule, l.message
        );
    }
    if leads.len() > max {
        let _ = writeln!(
            out,
            "- … {} more leads on these files not shown",
            leads.len() - max
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn pack() -> ContextPack {
        ContextPack::from_files(
            PathBuf::from("/t"),
            None,
            vec![
                (
                    "app.py".to_string(),
                    "import os\nimport sys\n\npassword = \"hunter2hunter2\"\nx = 1\n".to_string(),
                ),
                ("run.sh".to_string(), "#!/bin/sh\necho $1\n".to_string()),
                (
                    "long.py".to_string(),
                    "a = 1\nb = 2\nc = 3\npassword = \"hunter2hunter2\"\ne = 5\nf = 6\ng = 7\nh = 8\n\
                     i = 9\nj = 10\ntoken = \"abcdefabcdef\"\nl = 12\n"
                        .to_string(),
                ),
                (
                    "src/main.rs".to_string(),
                    "fn main() {\n    return;\n}\n".to_string(),
                ),
                ("web/app.js".to_string(), "var unused = 1;\n".to_string()),
            ],
        )
    }

    const RUFF: &str = r#"[
      {"cell": null, "code": "F401", "end_location": {"column": 10, "row": 1},
       "filename": "/tmp/quorum-analyzers-x/app.py", "fix": {"applicability": "safe",
       "edits": [], "message": "Remove unused import: `os`"}, "location": {"column": 8, "row": 1},
       "message": "`os` imported but unused", "noqa_row": 1,
       "url": "https://docs.astral.sh/ruff/rules/unused-import"},
      {"cell": null, "code": null, "end_location": {"column": 1, "row": 3},
       "filename": "/tmp/quorum-analyzers-x/app.py", "fix": null,
       "location": {"column": 1, "row": 3}, "message": "SyntaxError: unexpected indent",
       "noqa_row": null, "url": null}
    ]"#;

    #[test]
    fn ruff_json() {
        let hits = parse_output(OutputFormat::RuffJson, RUFF).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].rule, "F401");
        assert_eq!(hits[0].line, 1);
        assert_eq!(hits[0].end_line, Some(1));
        assert_eq!(hits[0].message, "`os` imported but unused");
        assert_eq!(hits[1].rule, "syntax-error");
    }

    #[test]
    fn bandit_json() {
        let out = r#"{"errors": [], "generated_at": "2026-01-01T00:00:00Z",
          "metrics": {"_totals": {"loc": 5}},
          "results": [{"code": "3 \n4 password = \"hunter2hunter2\"\n", "col_offset": 11,
            "end_col_offset": 27, "filename": "./app.py", "issue_confidence": "MEDIUM",
            "issue_cwe": {"id": 259, "link": "https://cwe.mitre.org/data/definitions/259.html"},
            "issue_severity": "LOW", "issue_text": "Possible hardcoded password: 'hunter2hunter2'",
            "line_number": 4, "line_range": [4], "more_info": "https://bandit.readthedocs.io/",
            "test_id": "B105", "test_name": "hardcoded_password_string"}]}"#;
        let hits = parse_output(OutputFormat::BanditJson, out).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].file, "./app.py");
        assert_eq!(hits[0].rule, "B105");
        assert_eq!(hits[0].level.as_deref(), Some("LOW"));
        assert_eq!(hits[0].end_line, Some(4));
    }

    #[test]
    fn semgrep_json() {
        let out = r#"{"errors": [], "paths": {"scanned": ["app.py"]}, "version": "1.90.0",
          "results": [{"check_id": "python.lang.security.audit.hardcoded-password",
            "path": "app.py", "start": {"col": 1, "line": 4, "offset": 21},
            "end": {"col": 28, "line": 4, "offset": 48},
            "extra": {"lines": "password = \"hunter2hunter2\"", "message": "Hardcoded password",
              "metadata": {}, "severity": "WARNING", "fingerprint": "requires login"}}]}"#;
        let hits = parse_output(OutputFormat::SemgrepJson, out).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            hits[0].rule,
            "python.lang.security.audit.hardcoded-password"
        );
        assert_eq!(hits[0].level.as_deref(), Some("WARNING"));
        assert_eq!((hits[0].line, hits[0].end_line), (4, Some(4)));
    }

    #[test]
    fn shellcheck_json1() {
        let out = r#"{"comments": [{"file": "run.sh", "line": 2, "endLine": 2, "column": 6,
          "endColumn": 8, "level": "info", "code": 2086,
          "message": "Double quote to prevent globbing and word splitting.",
          "fix": {"replacements": []}}]}"#;
        let hits = parse_output(OutputFormat::ShellcheckJson1, out).unwrap();
        assert_eq!(hits[0].rule, "SC2086");
        assert_eq!(hits[0].level.as_deref(), Some("info"));
    }

    #[test]
    fn cargo_json_lines() {
        let out = concat!(
            r#"{"reason":"compiler-artifact","package_id":"x 0.1.0","target":{"name":"x"}}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"x 0.1.0","manifest_path":"/tmp/c/Cargo.toml","message":{"rendered":"warning: unneeded `return` statement","$message_type":"diagnostic","children":[],"code":{"code":"clippy::needless_return","explanation":null},"level":"warning","message":"unneeded `return` statement","spans":[{"byte_end":20,"byte_start":13,"column_end":12,"column_start":5,"expansion":null,"file_name":"src/main.rs","is_primary":true,"label":null,"line_end":2,"line_start":2,"suggested_replacement":null,"suggestion_applicability":null,"text":[]}]}}"#,
            "\n",
            "warning: build failed, waiting for other jobs to finish...\n",
            r#"{"reason":"compiler-message","package_id":"x 0.1.0","message":{"code":null,"level":"warning","message":"1 warning emitted","spans":[]}}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#
        );
        let hits = parse_output(OutputFormat::CargoJson, out).unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].rule, "clippy::needless_return");
        assert_eq!(hits[0].file, "src/main.rs");
        assert_eq!(hits[0].line, 2);
    }

    #[test]
    fn eslint_json() {
        let out = r#"[{"filePath": "/tmp/quorum-analyzers-x/web/app.js", "errorCount": 1,
          "warningCount": 0, "messages": [{"ruleId": "no-unused-vars", "severity": 2,
          "message": "'unused' is assigned a value but never used.", "line": 1, "column": 5,
          "nodeType": "Identifier", "endLine": 1, "endColumn": 11}], "source": "var unused = 1;"}]"#;
        let hits = parse_output(OutputFormat::EslintJson, out).unwrap();
        assert_eq!(hits[0].rule, "no-unused-vars");
        assert_eq!(hits[0].level.as_deref(), Some("error"));
        let spec = spec("eslint", OutputFormat::EslintJson);
        let (leads, note) = spec.leads(hits, &["/tmp/quorum-analyzers-x"], &pack());
        assert_eq!(leads[0].file, "web/app.js");
        assert!(note.is_none());
    }

    #[test]
    fn unexpected_output_is_an_error_empty_is_no_hits() {
        assert!(parse_output(OutputFormat::RuffJson, "error: unknown flag").is_err());
        assert!(parse_output(OutputFormat::BanditJson, "[1, 2]").is_err());
        assert_eq!(
            parse_output(OutputFormat::RuffJson, "  \n").unwrap(),
            Vec::new()
        );
    }

    fn spec(name: &str, format: OutputFormat) -> AnalyzerSpec {
        let yaml = format!(
            "analyzers:\n  - name: {name}\n    command: {name}\n    format: {}\n",
            serde_json::to_value(format).unwrap().as_str().unwrap()
        );
        AnalyzerCatalog::parse(&yaml, Path::new("t.yaml"))
            .unwrap()
            .analyzers
            .remove(0)
    }

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
    fn relative_paths() {
        let roots = ["/tmp/c", "/private/tmp/c"];
        assert_eq!(
            relative_path("/tmp/c/a/b.py", &roots).as_deref(),
            Some("a/b.py")
        );
        assert_eq!(
            relative_path("/private/tmp/c/x.py", &roots).as_deref(),
            Some("x.py")
        );
        assert_eq!(relative_path("./x.py", &roots).as_deref(), Some("x.py"));
        assert_eq!(relative_path("/tmp/cc/x.py", &roots), None);
        assert_eq!(relative_path("../x.py", &roots), None);
    }

    #[test]
    fn a_lead_is_a_candidate_finding_with_the_lines_as_evidence() {
        let p = pack();
        let lead = Lead {
            tool: "bandit".into(),
            file: "app.py".into(),
            line: 4,
            end_line: None,
            rule: "B105".into(),
            message: "Possible hardcoded password".into(),
            severity: Severity::P2,
            category: "security".into(),
            confidence: 0.7,
        };
        let f = lead.to_finding(&p);
        assert_eq!(f.evidence, "password = \"hunter2hunter2\"");
        assert_eq!(f.category, "security/B105");
        assert!(matches!(
            crate::review::grounding::ground(&f, &p),
            crate::review::grounding::Grounding::Grounded { .. }
        ));
        // A short line borrows the next one so the quote locates something.
        let short = Lead {
            line: 5,
            ..lead.clone()
        };
        assert_eq!(short.to_finding(&p).evidence, "x = 1");
        let outside = Lead { line: 99, ..lead };
        let f = outside.to_finding(&p);
        assert!(f.evidence.is_empty());
        assert!(matches!(
            crate::review::grounding::ground(&f, &p),
            crate::review::grounding::Grounding::Decided {
                verdict: crate::review::finding::Verdict::Hallucinated,
                ..
            }
        ));
    }

    #[test]
    fn unchecked_analyzer_candidates_are_dropped_specialists_kept() {
        use crate::review::finding::{Reported, Reporter};
        let p = pack();
        let judged = |persona: &str, verdict: Verdict| Judged {
            reported: Reported {
                task_id: "t".into(),
                reporter: Reporter {
                    persona: persona.into(),
                    model: String::new(),
                    node: "n".into(),
                },
                finding: Lead {
                    tool: "bandit".into(),
                    file: "app.py".into(),
                    line: 4,
                    end_line: None,
                    rule: "B105".into(),
                    message: "password".into(),
                    severity: Severity::P2,
                    category: "security".into(),
                    confidence: 0.7,
                }
                .to_finding(&p),
            },
            verdict,
            reason: "over the flow's max_verifications (4)".into(),
            deterministic: false,
            notes: Vec::new(),
            ballot: None,
            rescored: None,
        };
        let (kept, dropped) = take_unchecked_leads(vec![
            judged("analyzer:bandit", Verdict::Unverified),
            judged("analyzer:bandit", Verdict::Confirmed),
            judged("security_reviewer", Verdict::Unverified),
        ]);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].verdict, Verdict::Confirmed);
        assert_eq!(kept[1].reported.reporter.persona, "security_reviewer");
        assert_eq!(dropped.len(), 1);
        assert_eq!(
            dropped[0].reason,
            "analyzer lead not confirmed: over the flow's max_verifications (4)"
        );
    }

    #[test]
    fn a_hit_inside_a_reported_finding_merges_into_it() {
        use crate::review::finding::{Reported, Reporter};
        let p = pack();
        let judged = |persona: &str, finding: RawFinding| Judged {
            reported: Reported {
                task_id: "t".into(),
                reporter: Reporter {
                    persona: persona.into(),
                    model: "m".into(),
                    node: "n".into(),
                },
                finding,
            },
            verdict: Verdict::Confirmed,
            reason: String::new(),
            deterministic: false,
            notes: Vec::new(),
            ballot: None,
            rescored: None,
        };
        let lead = |line: u32| Lead {
            tool: "bandit".into(),
            file: "long.py".into(),
            line,
            end_line: None,
            rule: "B105".into(),
            message: "Possible hardcoded password".into(),
            severity: Severity::P3,
            category: "security".into(),
            confidence: 0.7,
        };
        let mut mine = lead(4).to_finding(&p);
        mine.title = "Hard-coded password".into();
        mine.severity = Severity::P1;
        // Less sure than the tool, and still the words that are kept.
        mine.confidence = 0.55;
        mine.line_start = Some(3);
        mine.line_end = Some(4);
        let mut all = vec![
            judged("security_reviewer", mine.clone()),
            judged("analyzer:bandit", lead(4).to_finding(&p)),
            judged("analyzer:bandit", lead(11).to_finding(&p)),
        ];
        anchor_to_overlapping(&mut all);
        let gated = crate::review::dedup::merge_and_gate(all.clone(), 0.5);
        assert_eq!(gated.findings.len(), 2, "{:?}", gated.findings);
        let merged = &gated.findings[0];
        assert_eq!(merged.title, "Hard-coded password");
        let who: Vec<&str> = merged
            .reporters
            .iter()
            .map(|r| r.persona.as_str())
            .collect();
        assert_eq!(who, ["analyzer:bandit", "security_reviewer"]);
        assert_eq!(
            gated.findings[1].line_start,
            Some(11),
            "a hit elsewhere stays its own"
        );
        // With a symbol, the symbol is the anchor.
        mine.symbol = Some("password".into());
        let mut all = vec![
            judged("security_reviewer", mine),
            judged("analyzer:bandit", lead(4).to_finding(&p)),
        ];
        anchor_to_overlapping(&mut all);
        assert_eq!(all[1].reported.finding.symbol.as_deref(), Some("password"));
        assert_eq!(
            crate::review::dedup::merge_and_gate(all, 0.5)
                .findings
                .len(),
            1
        );
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
    fn prompt_list_is_bounded_with_a_visible_rest() {
        let leads: Vec<Lead> = (1..=25)
            .map(|i| Lead {
                tool: "ruff".into(),
                file: "app.py".into(),
                line: i,
                end_line: None,
                rule: "E501".into(),
                message: format!("line {i} too long"),
                severity: Severity::P3,
                category: "lint".into(),
                confidence: 0.6,
            })
            .collect();
        let all = Leads {
            runs: Vec::new(),
            leads,
        };
        let mine = all.on_files(&["app.py".to_string()]);
        let text = leads_list(&mine, MAX_LEADS_PER_PROMPT);
        assert_eq!(text.lines().count(), 21);
        assert!(text.contains("- app.py:1 [ruff E501] line 1 too long"));
        assert!(text.contains("… 5 more leads on these files not shown"));
        assert!(all.on_files(&["other.py".to_string()]).is_empty());
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
