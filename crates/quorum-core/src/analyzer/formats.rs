//! One pure parser per output *format* (ruff, bandit, semgrep, shellcheck json1, cargo
//! `--message-format json`, eslint JSON) from a tool's stdout to [`Hit`]s, and a tool's paths
//! made relative to the copy it ran in. Formats, never tools: any tool that writes one of these
//! shapes can use it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// One diagnostic as a parser read it, before it is tied to the pack.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hit {
    /// As the tool wrote it (absolute, `./`-prefixed or relative).
    pub file: String,
    pub line: u32,
    pub end_line: Option<u32>,
    pub rule: String,
    pub message: String,
    /// The tool's own level ("error", "warning", "HIGH"), when it has one.
    pub level: Option<String>,
    /// The tool's own confidence in the hit ("HIGH", "medium"), when it has one.
    pub confidence: Option<String>,
    /// The CWE the tool names for its rule, when it names one.
    pub cwe: Option<u32>,
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
                    ..Default::default()
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
                    confidence: str_of(d, "issue_confidence").map(str::to_string),
                    cwe: d
                        .pointer("/issue_cwe/id")
                        .and_then(Value::as_u64)
                        .and_then(|n| u32::try_from(n).ok()),
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
                    // semgrep prefixes a local rule's id with its directory (which differs
                    // per machine); a rule that names itself in metadata.rule_id keeps that.
                    rule: d
                        .pointer("/extra/metadata/rule_id")
                        .and_then(Value::as_str)
                        .or_else(|| str_of(d, "check_id"))
                        .unwrap_or("semgrep")
                        .to_string(),
                    message: d
                        .pointer("/extra/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    level: d
                        .pointer("/extra/severity")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    confidence: d
                        .pointer("/extra/metadata/confidence")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    // `metadata.cwe` is one "CWE-89: ..." string or a list of them.
                    cwe: d.pointer("/extra/metadata/cwe").and_then(|c| match c {
                        Value::String(s) => crate::weakness::cwe_in(s),
                        Value::Array(a) => a
                            .iter()
                            .filter_map(Value::as_str)
                            .find_map(crate::weakness::cwe_in),
                        _ => None,
                    }),
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
                    ..Default::default()
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
                ..Default::default()
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
            ..Default::default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::testing::{pack, spec, RUFF};

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
    fn semgrep_json_takes_a_local_rule_s_own_id_from_its_metadata() {
        let out = r#"{"errors": [], "results": [{
            "check_id": "home.me.share.quorum.rules.0123abcd.semgrep.sql-built-from-strings",
            "path": "src/db.py", "start": {"line": 54}, "end": {"line": 54},
            "extra": {"message": "SQL text built with string formatting", "severity": "ERROR",
              "metadata": {"rule_id": "sql-built-from-strings"}}}]}"#;
        let hits = parse_output(OutputFormat::SemgrepJson, out).unwrap();
        assert_eq!(hits[0].rule, "sql-built-from-strings");
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
}
