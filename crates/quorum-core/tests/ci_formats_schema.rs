//! report.rdjson against reviewdog's own schema (vendored under tests/schemas/, and a strict copy
//! of it that admits only proto fields), and gl-code-quality-report.json against the shape
//! GitLab documents, plus what neither schema can say: one entry per located finding, unique
//! and stable fingerprints, repository-relative paths.

mod common;

use common::realistic_report;
use quorum_core::report::Report;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::PathBuf;

fn load_schema(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/schemas")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn rdjson_validator() -> jsonschema::Validator {
    let schema = load_schema("rdjson-DiagnosticResult.json");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-04/schema#");
    jsonschema::validator_for(&schema).unwrap()
}

/// Every object schema closed (`additionalProperties: false`): reviewdog reads rdjson with
/// protojson and drops unknown fields, so a field outside the proto would be lost silently.
fn strict_rdjson_validator() -> jsonschema::Validator {
    fn close(v: &mut Value) {
        match v {
            Value::Object(map) => {
                if map.contains_key("properties") {
                    map.insert("additionalProperties".into(), Value::Bool(false));
                }
                for child in map.values_mut() {
                    close(child);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(close),
            _ => {}
        }
    }
    let mut schema = load_schema("rdjson-DiagnosticResult.json");
    close(&mut schema);
    jsonschema::validator_for(&schema).unwrap()
}

fn gitlab_validator() -> jsonschema::Validator {
    jsonschema::validator_for(&load_schema("gitlab-code-quality-report.json")).unwrap()
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

fn diagnostics(rd: &Value) -> &Vec<Value> {
    rd["diagnostics"].as_array().unwrap()
}

fn issues(gl: &Value) -> &Vec<Value> {
    gl.as_array().unwrap()
}

/// Located findings of the realistic report, in report order (F4 names no file).
const LOCATED: [&str; 6] = ["F1", "F2", "F3", "F5", "F6", "F7"];

#[test]
fn realistic_report_is_valid_rdjson_with_only_proto_fields() {
    let rd = realistic_report().to_rdjson("");
    let errs = errors(&rdjson_validator(), &rd);
    assert!(errs.is_empty(), "schema errors: {errs:#?}");
    let errs = errors(&strict_rdjson_validator(), &rd);
    assert!(errs.is_empty(), "fields outside the proto: {errs:#?}");
    assert_eq!(rd["source"]["name"], "quorum");
    assert_eq!(rd["severity"], "ERROR", "the worst diagnostic is a P0");
}

#[test]
fn the_rdjson_validators_reject_broken_documents() {
    let good = realistic_report().to_rdjson("");
    let (v, strict) = (rdjson_validator(), strict_rdjson_validator());
    assert!(v.is_valid(&good) && strict.is_valid(&good));

    let mut bad_severity = good.clone();
    bad_severity["diagnostics"][0]["severity"] = "FATAL".into();
    assert!(!v.is_valid(&bad_severity), "severity is an enum");

    let mut bad_line = good.clone();
    bad_line["diagnostics"][0]["location"]["range"]["start"]["line"] = "42".into();
    assert!(!v.is_valid(&bad_line), "a line is an integer");

    let mut extra = good.clone();
    extra["diagnostics"][0]["location"]["file"] = "src/x.rs".into();
    assert!(v.is_valid(&extra), "reviewdog's schema is open");
    assert!(!strict.is_valid(&extra), "the strict copy is not");
}

#[test]
fn one_diagnostic_per_located_finding_with_linewise_ranges() {
    let report = realistic_report();
    let rd = report.to_rdjson("");
    let diags = diagnostics(&rd);
    assert_eq!(diags.len(), LOCATED.len(), "F4 has no file and is left out");

    let paths: Vec<&str> = diags
        .iter()
        .map(|d| d["location"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "src/db/users.rs",
            "src/web/login handler.rs",
            "src/cache.rs",
            "docs/README (fr).md",
            "src/main.rs",
            "src/db/orders.rs",
        ],
        "plain relative paths: not URI-encoded, absolute made relative, backslashes normalised"
    );

    // F1 cites 42-47: linewise, no columns.
    assert_eq!(
        diags[0]["location"]["range"],
        json!({ "start": { "line": 42 }, "end": { "line": 47 } })
    );
    // F2 cites only a start line.
    assert_eq!(
        diags[1]["location"]["range"],
        json!({ "start": { "line": 7 }, "end": { "line": 7 } })
    );
    // F3 (symbol only) and F5 (line 0) cite no usable line: a file-level diagnostic.
    assert!(diags[2]["location"].get("range").is_none());
    assert!(diags[3]["location"].get("range").is_none());
    // F6 has its end before its start.
    assert_eq!(
        diags[4]["location"]["range"],
        json!({ "start": { "line": 20 }, "end": { "line": 20 } })
    );

    let severities: Vec<&str> = diags
        .iter()
        .map(|d| d["severity"].as_str().unwrap())
        .collect();
    assert_eq!(
        severities,
        ["ERROR", "ERROR", "WARNING", "INFO", "INFO", "ERROR"]
    );
    for d in diags {
        assert_eq!(d["source"]["name"], "quorum");
        assert!(
            d.get("suggestions").is_none(),
            "a prose fix is no code suggestion"
        );
    }
    assert_eq!(diags[0]["code"]["value"], "security/injection");
    assert_eq!(diags[1]["code"]["value"], "security-auth-sessions-cwe-287");
    assert_eq!(diags[4]["code"]["value"], "uncategorized");

    let msg = diags[0]["message"].as_str().unwrap();
    for needle in [
        "**Problem F1**",
        "P0",
        "confidence 0.75",
        "CONFIRMED",
        "An attacker controls `name`.",
        "**Suggested fix:** Use a bound parameter.",
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from {msg:?}");
    }
    assert!(diags[1]["message"]
        .as_str()
        .unwrap()
        .contains("`LoginHandler::post`"));
}

#[test]
fn empty_report_is_valid_in_both_formats() {
    let mut r = realistic_report();
    r.findings.clear();
    let rd = r.to_rdjson("");
    assert!(errors(&rdjson_validator(), &rd).is_empty());
    assert!(diagnostics(&rd).is_empty());
    assert_eq!(rd["severity"], "INFO");
    let gl = r.to_gitlab_code_quality("");
    assert!(errors(&gitlab_validator(), &gl).is_empty());
    assert_eq!(gl, json!([]));
}

#[test]
fn realistic_report_is_a_valid_gitlab_code_quality_report() {
    let gl = realistic_report().to_gitlab_code_quality("");
    let errs = errors(&gitlab_validator(), &gl);
    assert!(errs.is_empty(), "schema errors: {errs:#?}");
    let issues = issues(&gl);
    assert_eq!(
        issues.len(),
        LOCATED.len(),
        "F4 has no file and is left out"
    );

    let severities: Vec<&str> = issues
        .iter()
        .map(|i| i["severity"].as_str().unwrap())
        .collect();
    assert_eq!(
        severities,
        ["critical", "major", "minor", "info", "info", "major"],
        "P0 critical, P1 major, P2 minor, P3 info"
    );
    assert_eq!(issues[0]["check_name"], "security/injection");
    assert_eq!(
        issues[0]["description"],
        "Problem F1 — An attacker controls `name`."
    );
    assert_eq!(issues[0]["location"]["path"], "src/db/users.rs");
    assert_eq!(
        issues[0]["location"]["lines"],
        json!({ "begin": 42, "end": 47 })
    );
    // Symbol-only (F3) and line-0 (F5) findings point at line 1; F6's inverted range is fixed.
    assert_eq!(issues[2]["location"]["lines"]["begin"], 1);
    assert_eq!(issues[3]["location"]["lines"]["begin"], 1);
    assert_eq!(
        issues[4]["location"]["lines"],
        json!({ "begin": 20, "end": 20 })
    );
    for i in issues {
        let path = i["location"]["path"].as_str().unwrap();
        assert!(
            !path.starts_with("./") && !path.starts_with('/') && !path.contains('\\'),
            "{path}"
        );
    }
}

#[test]
fn the_gitlab_validator_rejects_broken_reports() {
    let v = gitlab_validator();
    let good = realistic_report().to_gitlab_code_quality("");
    assert!(v.is_valid(&good));
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut doc = good.clone();
        edit(&mut doc[0]);
        doc
    };
    assert!(!v.is_valid(&broken(&|i| i["severity"] = "high".into())));
    assert!(!v.is_valid(&broken(&|i| i["location"]["lines"]["begin"] = 0.into())));
    assert!(!v.is_valid(&broken(&|i| i["location"]["path"] = "./src/a.rs".into())));
    assert!(!v.is_valid(&broken(&|i| {
        i.as_object_mut().unwrap().remove("fingerprint");
    })));
    assert!(!v.is_valid(&broken(&|i| {
        i["location"].as_object_mut().unwrap().remove("lines");
    })));
    assert!(
        !v.is_valid(&json!({ "issues": [] })),
        "the report is an array"
    );
}

#[test]
fn gitlab_fingerprints_are_unique_and_follow_the_anchor() {
    let report = realistic_report();
    let a = report.to_gitlab_code_quality("");
    assert_eq!(
        a,
        report.clone().to_gitlab_code_quality(""),
        "deterministic"
    );
    let prints: Vec<&str> = issues(&a)
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    let unique: HashSet<&&str> = prints.iter().collect();
    assert_eq!(unique.len(), prints.len(), "{prints:?}");
    for p in &prints {
        assert_eq!(p.len(), 64);
        assert!(p.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    // Reworded and moved, but the same anchor: GitLab must see the same finding.
    let mut moved = report.clone();
    moved.findings[0].title = "Reworded".into();
    moved.findings[0].line_start = Some(80);
    moved.findings[0].line_end = Some(81);
    moved.findings.swap(0, 1);
    let b = moved.to_gitlab_code_quality("");
    assert_eq!(issues(&b)[1]["fingerprint"], issues(&a)[0]["fingerprint"]);
    assert_eq!(issues(&b)[0]["fingerprint"], issues(&a)[1]["fingerprint"]);

    // Two findings with one anchor still get two fingerprints, the first keeping its own.
    let mut twins = report.clone();
    twins.findings[1].anchor = twins.findings[0].anchor.clone();
    let c = twins.to_gitlab_code_quality("");
    assert_eq!(issues(&c)[0]["fingerprint"], issues(&a)[0]["fingerprint"]);
    assert_ne!(issues(&c)[1]["fingerprint"], issues(&c)[0]["fingerprint"]);
    let unique: HashSet<&str> = issues(&c)
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(unique.len(), LOCATED.len());
}

#[test]
fn a_target_below_the_repository_root_gets_prefixed_paths() {
    let report: Report = realistic_report();
    for prefix in ["services/api", "./services/api/", "services\\api"] {
        let gl = report.to_gitlab_code_quality(prefix);
        assert_eq!(
            issues(&gl)[0]["location"]["path"],
            "services/api/src/db/users.rs",
            "{prefix:?}"
        );
        assert!(gitlab_validator().is_valid(&gl));
        let rd = report.to_rdjson(prefix);
        assert_eq!(
            diagnostics(&rd)[4]["location"]["path"],
            "services/api/src/main.rs",
            "{prefix:?}"
        );
    }
}
