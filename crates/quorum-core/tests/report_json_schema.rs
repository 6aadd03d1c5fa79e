//! report.json has a JSON Schema generated from the report types and shipped in
//! `tests/schemas/report.schema.json`: the shipped copy must be the generated one
//! (`QUORUM_BLESS=1` rewrites it), and reports validate against it, strictly (no field the
//! schema does not name; the strict form is the shipped one, closed). The CLI tests validate every report.json they read against it too.

mod common;

use common::realistic_report;
use quorum_core::report::{json_schema, strict_json_schema, SCHEMA_VERSION};
use serde_json::Value;
use std::path::PathBuf;

const SHIPPED: &str = "../../tests/schemas/report.schema.json";

fn shipped_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(SHIPPED)
}

fn shipped() -> Value {
    if std::env::var("QUORUM_BLESS").as_deref() == Ok("1") {
        return json_schema(); // the file is being rewritten by the test beside this one
    }
    let text = std::fs::read_to_string(shipped_path())
        .unwrap_or_else(|e| panic!("read {}: {e}", shipped_path().display()));
    serde_json::from_str(&text).unwrap()
}

fn errors(schema: &Value, doc: &Value) -> Vec<String> {
    let v = jsonschema::validator_for(schema).unwrap();
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

#[test]
fn the_shipped_schema_is_the_generated_one() {
    let generated = serde_json::to_string_pretty(&json_schema()).unwrap() + "\n";
    if std::env::var("QUORUM_BLESS").as_deref() == Ok("1") {
        std::fs::write(shipped_path(), &generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(shipped_path()).unwrap_or_default();
    assert!(
        on_disk == generated,
        "tests/schemas/report.schema.json is stale (the report types changed); regenerate it with \
         QUORUM_BLESS=1 cargo test -p quorum-core --test report_json_schema"
    );
}

#[test]
fn the_schema_names_the_contract_fields_of_design_section_6() {
    let schema = shipped();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for field in [
        "schema_version",
        "flow_id",
        "status",
        "target",
        "summary",
        "team",
        "findings",
        "dropped",
        "tasks",
        "usage",
        "methodology",
    ] {
        assert!(
            required.contains(&field),
            "report.json must require {field}: {required:?}"
        );
    }
    let finding = &schema["$defs"]["Finding"];
    for field in [
        "id",
        "title",
        "severity",
        "confidence",
        "file",
        "line_start",
        "line_end",
    ] {
        assert!(
            finding["properties"].get(field).is_some(),
            "a finding must have {field}: {finding}"
        );
    }
    assert!(schema["description"]
        .as_str()
        .unwrap()
        .contains(&format!("schema_version {SCHEMA_VERSION}")));
}

#[test]
fn a_realistic_report_validates_strictly() {
    let report = serde_json::to_value(realistic_report()).unwrap();
    let errs = errors(&strict_json_schema(), &report);
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn the_schema_rejects_what_the_contract_forbids() {
    let good = serde_json::to_value(realistic_report()).unwrap();
    let schema = strict_json_schema();

    let mut bad = good.clone();
    bad["findings"][0]["severity"] = "P9".into();
    assert!(
        !errors(&schema, &bad).is_empty(),
        "an unknown severity must fail"
    );

    let mut bad = good.clone();
    bad.as_object_mut().unwrap().remove("findings");
    assert!(
        !errors(&schema, &bad).is_empty(),
        "a report without findings must fail"
    );

    let mut bad = good.clone();
    bad["status"] = "done".into();
    assert!(
        !errors(&schema, &bad).is_empty(),
        "an unknown status must fail"
    );

    let mut bad = good;
    bad["usage"]["surprise"] = 1.into();
    assert!(
        !errors(&schema, &bad).is_empty(),
        "the strict schema must refuse unknown fields"
    );
}
