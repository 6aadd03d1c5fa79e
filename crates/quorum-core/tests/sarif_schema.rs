//! report.sarif against the official SARIF 2.1.0 schema (vendored under tests/schemas/) and the
//! extra rules GitHub code scanning applies on upload.

mod common;

use common::realistic_report;
use quorum_core::report::ReviewStatus;
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;

fn schema() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/schemas/sarif-schema-2.1.0.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn validator() -> jsonschema::Validator {
    let schema = schema();
    // The OASIS schema is draft-04; the validator must pick that draft up from `$schema`.
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-04/schema#");
    jsonschema::validator_for(&schema).unwrap()
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

fn results(sarif: &Value) -> &Vec<Value> {
    sarif["runs"][0]["results"].as_array().unwrap()
}

#[test]
fn realistic_report_is_valid_sarif() {
    let sarif = realistic_report().to_sarif();
    let errs = errors(&validator(), &sarif);
    assert!(errs.is_empty(), "schema errors: {errs:#?}");
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(
        sarif["$schema"],
        "https://json.schemastore.org/sarif-2.1.0.json"
    );
    assert_eq!(sarif["runs"].as_array().unwrap().len(), 1);
}

#[test]
fn empty_and_failed_reports_are_valid_sarif() {
    let mut r = realistic_report();
    r.findings.clear();
    r.target.file_count = 0;
    r.target.head_sha = None;
    r.status = ReviewStatus::Failed;
    r.target.path = "relative/dir".into();
    let sarif = r.to_sarif();
    let errs = errors(&validator(), &sarif);
    assert!(errs.is_empty(), "schema errors: {errs:#?}");
    assert!(results(&sarif).is_empty());
    assert!(sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .is_empty());
    // A relative target path cannot become an absolute file URI, so no base is claimed.
    assert!(sarif["runs"][0].get("originalUriBaseIds").is_none());
    assert_eq!(
        sarif["runs"][0]["invocations"][0]["executionSuccessful"],
        false
    );
}

#[test]
fn the_validator_rejects_broken_sarif() {
    let v = validator();
    let good = realistic_report().to_sarif();
    assert!(v.is_valid(&good));

    let mut no_version = good.clone();
    no_version.as_object_mut().unwrap().remove("version");
    assert!(!v.is_valid(&no_version), "missing version must fail");

    let mut wrong_version = good.clone();
    wrong_version["version"] = "2.0.0".into();
    assert!(!v.is_valid(&wrong_version));

    // Deep in the tree, behind several $refs: result.level is an enum, region.startLine >= 1.
    let mut bad_level = good.clone();
    bad_level["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!v.is_valid(&bad_level), "bad result level must fail");

    let mut bad_line = good.clone();
    bad_line["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
        0.into();
    assert!(!v.is_valid(&bad_line), "startLine 0 must fail");

    let mut extra = good;
    extra["runs"][0]["results"][0]["logicalLocations"] = serde_json::json!([]);
    assert!(!v.is_valid(&extra), "unknown result property must fail");
}

#[test]
fn locations_are_what_github_needs() {
    let sarif = realistic_report().to_sarif();
    let run = &sarif["runs"][0];
    let results = results(&sarif);
    // F4 has no file: GitHub rejects a whole upload over one unlocated result, so it is
    // listed in run properties instead of emitted.
    assert_eq!(results.len(), 6);
    let unlocated = run["properties"]["unlocatedFindings"].as_array().unwrap();
    assert_eq!(unlocated.len(), 1);
    assert_eq!(unlocated[0]["id"], "F4");

    for r in results {
        let locs = r["locations"]
            .as_array()
            .expect("every result has locations");
        assert!(!locs.is_empty());
        let phys = &locs[0]["physicalLocation"];
        let uri = phys["artifactLocation"]["uri"].as_str().unwrap();
        assert!(!uri.is_empty());
        assert!(!uri.contains("file:"), "{uri}");
        assert!(!uri.starts_with('/'), "{uri}");
        assert!(!uri.contains('\\'), "{uri}");
        assert!(
            uri.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~/%".contains(&b)),
            "uri has characters that need encoding: {uri}"
        );
        assert_eq!(phys["artifactLocation"]["uriBaseId"], "%SRCROOT%");
        let start = phys["region"]["startLine"].as_u64().unwrap();
        assert!(start >= 1);
        if let Some(end) = phys["region"]["endLine"].as_u64() {
            assert!(end >= start);
        }
    }
    let uris: Vec<&str> = results
        .iter()
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(uris.contains(&"src/web/login%20handler.rs"));
    assert!(uris.contains(&"docs/README%20%28fr%29.md"));
    assert!(uris.contains(&"src/main.rs"), "absolute path made relative");
    assert!(uris.contains(&"src/db/orders.rs"), "backslashes normalised");

    let base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert_eq!(base, "file:///home/dev/my%20project/");
    assert!(base.ends_with('/'));
}

#[test]
fn every_result_points_at_its_rule() {
    let sarif = realistic_report().to_sarif();
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let unique: HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "rule ids are unique: {ids:?}");
    for id in &ids {
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/_-".contains(&b)),
            "rule id {id:?} is a slug"
        );
    }
    assert!(ids.contains(&"security-auth-sessions-cwe-287"));
    assert!(ids.contains(&"uncategorized"));
    for r in results(&sarif) {
        let rule_id = r["ruleId"].as_str().unwrap();
        let index = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(ids.get(index), Some(&rule_id), "ruleIndex of {rule_id}");
    }
    // Two findings share security/injection; the rule takes the worse severity.
    let injection = rules
        .iter()
        .find(|r| r["id"] == "security/injection")
        .unwrap();
    assert_eq!(injection["properties"]["security-severity"], "9.5");
    assert_eq!(injection["defaultConfiguration"]["level"], "error");
    for rule in rules {
        assert!(rule["shortDescription"]["text"].as_str().is_some());
        assert!(rule["fullDescription"]["text"].as_str().is_some());
        assert!(rule["properties"]["tags"].as_array().is_some());
    }
}

#[test]
fn fingerprints_are_stable_and_distinct() {
    let report = realistic_report();
    let a = report.to_sarif();
    let b = report.clone().to_sarif();
    assert_eq!(a, b, "rendering is deterministic");
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );

    let prints: Vec<&str> = results(&a)
        .iter()
        .map(|r| {
            r["partialFingerprints"]["quorumAnchor/v1"]
                .as_str()
                .expect("partialFingerprints present")
        })
        .collect();
    for p in &prints {
        assert_eq!(p.len(), 64);
        assert!(p.bytes().all(|c| c.is_ascii_hexdigit()));
    }
    let unique: HashSet<&&str> = prints.iter().collect();
    assert_eq!(
        unique.len(),
        prints.len(),
        "distinct anchors, distinct prints"
    );

    // The fingerprint follows the anchor, not the wording or the line.
    let mut moved = report.clone();
    moved.findings[0].title = "Reworded".into();
    moved.findings[0].line_start = Some(50);
    moved.findings[0].line_end = Some(55);
    let c = moved.to_sarif();
    assert_eq!(
        results(&c)[0]["partialFingerprints"],
        results(&a)[0]["partialFingerprints"]
    );
}

#[test]
fn results_carry_the_review_judgement() {
    let sarif = realistic_report().to_sarif();
    let f1 = &results(&sarif)[0];
    assert_eq!(f1["level"], "error");
    assert_eq!(f1["properties"]["severity"], "P0");
    assert_eq!(f1["properties"]["verdict"], "CONFIRMED");
    assert_eq!(f1["properties"]["confidence"], 0.75);
    assert_eq!(f1["properties"]["promoted"], false);
    assert_eq!(
        f1["properties"]["reporters"],
        serde_json::json!(["backend-reviewer", "security-auditor"])
    );
    let text = f1["message"]["text"].as_str().unwrap();
    assert!(text.contains("Problem F1") && text.contains("An attacker controls"));
    let run = &sarif["runs"][0];
    assert_eq!(
        run["automationDetails"]["id"],
        "quorum/review/0f3c2a9e-1b2c-4d5e-8f90-a1b2c3d4e5f6"
    );
    assert_eq!(
        run["properties"]["headSha"],
        "9fceb02d0ae598e95dc970b74767f19372d61af8"
    );
    assert_eq!(run["tool"]["driver"]["name"], "quorum");
    assert_eq!(
        run["tool"]["driver"]["semanticVersion"],
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn findings_name_their_weakness_as_cwe_taxa_valid_against_the_schema() {
    let mut r = realistic_report();
    r.findings[0].cwe = Some(89);
    r.findings[1].cwe = Some(287);
    let sarif = r.to_sarif();
    let errs = errors(&validator(), &sarif);
    assert!(errs.is_empty(), "schema errors: {errs:#?}");
    let run = &sarif["runs"][0];
    let taxa = run["taxonomies"][0]["taxa"].as_array().unwrap();
    assert_eq!(run["taxonomies"][0]["name"], "CWE");
    let ids: Vec<&str> = taxa.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["89", "287"],
        "one taxon per CWE named, in numeric order"
    );
    let f1 = results(&sarif)
        .iter()
        .find(|x| x["properties"]["findingId"] == "F1")
        .unwrap();
    assert_eq!(f1["taxa"][0]["id"], "89");
    assert_eq!(f1["taxa"][0]["toolComponent"]["name"], "CWE");
    // The reference points at the taxon it names.
    let index = f1["taxa"][0]["index"].as_u64().unwrap() as usize;
    assert_eq!(taxa[index]["id"], "89");
    assert_eq!(f1["properties"]["cwe"], "CWE-89");
    let rule = &run["tool"]["driver"]["rules"][f1["ruleIndex"].as_u64().unwrap() as usize];
    let tags: Vec<&str> = rule["properties"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tags.contains(&"external/cwe/cwe-89"), "{tags:?}");
    // A finding of no known class carries no taxa; a report with none has no taxonomy.
    let f3 = results(&sarif)
        .iter()
        .find(|x| x["properties"]["findingId"] == "F3")
        .unwrap();
    assert!(f3.get("taxa").is_none());
    assert!(realistic_report().to_sarif()["runs"][0]
        .get("taxonomies")
        .is_none());
}
