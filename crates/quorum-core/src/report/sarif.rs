//! report.sarif: SARIF 2.1.0 for code-scanning tools — one rule per category, target-relative
//! percent-encoded URIs, `partialFingerprints` from the anchor, and the findings without a file
//! listed in the run's properties instead of as results (GitHub rejects a result without a
//! location).

use super::common::{
    anchor_fingerprint, area_of, information_uri, normalize_slashes, one_line, relative_path,
    rule_id, status_str,
};
use super::{Report, ReviewStatus};
use crate::review::finding::{Finding, Severity};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

impl Report {
    /// report.sarif: SARIF 2.1.0 — one rule per category, relative URIs, startLine, and
    /// partialFingerprints derived from the anchor.
    ///
    /// GitHub code scanning rejects a whole upload when any result lacks a physical location
    /// ("locationFromSarifResult: expected at least one location"), so findings without a file
    /// are not emitted as results; they are listed under `run.properties.unlocatedFindings`
    /// instead, and stay in full in report.md and report.json.
    pub fn to_sarif(&self) -> serde_json::Value {
        let target_root = normalize_slashes(&self.target.path);
        let located: Vec<(&Finding, String)> = self
            .findings
            .iter()
            .filter_map(|f| {
                let uri = f
                    .file
                    .as_deref()
                    .and_then(|file| relative_uri(file, &target_root))?;
                Some((f, uri))
            })
            .collect();

        // BTreeMap keeps rule order (and so every ruleIndex) independent of finding order.
        let mut rules: BTreeMap<String, RuleAcc> = BTreeMap::new();
        for (f, _) in &located {
            let acc = rules
                .entry(rule_id(&f.category))
                .or_insert_with(|| RuleAcc {
                    categories: BTreeSet::new(),
                    worst: f.severity,
                    cwes: BTreeSet::new(),
                });
            acc.categories.insert(one_line(&f.category));
            acc.worst = acc.worst.min(f.severity);
            acc.cwes.extend(f.cwe);
        }
        // The CWE taxonomy: one taxon per CWE the located findings name, referenced by index
        // from each result's `taxa` (SARIF 2.1.0 §3.19.3, §3.27.8).
        let cwes: Vec<u32> = located
            .iter()
            .filter_map(|(f, _)| f.cwe)
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        let rule_index: BTreeMap<&str, usize> = rules
            .keys()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();

        let sarif_rules: Vec<Value> = rules.iter().map(|(id, acc)| sarif_rule(id, acc)).collect();
        let results: Vec<Value> = located
            .iter()
            .map(|(f, uri)| {
                let id = rule_id(&f.category);
                let index = rule_index.get(id.as_str()).copied().unwrap_or(0);
                let mut result = sarif_result(f, uri, id, index);
                if let Some(cwe) = f.cwe {
                    result["properties"]["cwe"] = json!(format!("CWE-{cwe}"));
                    let taxon = cwes.iter().position(|c| *c == cwe).unwrap_or(0);
                    result["taxa"] = json!([{
                        "id": cwe.to_string(),
                        "index": taxon,
                        "toolComponent": { "name": CWE_TAXONOMY, "index": 0 },
                    }]);
                }
                // Compared with an earlier review: what it reported already is `unchanged`,
                // the rest `new` (SARIF 2.1.0 §3.27.24), so a code-scanning bot posts only
                // the new ones and the standing alerts stay open.
                if self.since.is_some() {
                    let state = if f.seen_before.is_some() {
                        "unchanged"
                    } else {
                        "new"
                    };
                    result["baselineState"] = json!(state);
                }
                result
            })
            .collect();

        let mut driver = Map::new();
        driver.insert("name".into(), json!("quorum"));
        driver.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
        driver.insert("semanticVersion".into(), json!(env!("CARGO_PKG_VERSION")));
        if let Some(uri) = information_uri() {
            driver.insert("informationUri".into(), json!(uri));
        }
        driver.insert("rules".into(), Value::Array(sarif_rules));

        let mut run = Map::new();
        run.insert("tool".into(), json!({ "driver": Value::Object(driver) }));
        run.insert(
            "automationDetails".into(),
            json!({ "id": format!("quorum/{}/{}", id_segment(&self.flow), id_segment(&self.flow_id)) }),
        );
        if let Some(base) = base_file_uri(&target_root) {
            run.insert(
                "originalUriBaseIds".into(),
                json!({ SRCROOT: { "uri": base } }),
            );
        }
        if !cwes.is_empty() {
            run.insert("taxonomies".into(), json!([cwe_taxonomy(&cwes)]));
        }
        run.insert("invocations".into(), json!([self.sarif_invocation()]));
        run.insert("results".into(), Value::Array(results));
        run.insert("properties".into(), self.sarif_run_properties());

        json!({
            "$schema": SARIF_SCHEMA_URI,
            "version": "2.1.0",
            "runs": [Value::Object(run)],
        })
    }

    fn sarif_invocation(&self) -> Value {
        let mut inv = Map::new();
        inv.insert(
            "executionSuccessful".into(),
            json!(self.status != ReviewStatus::Failed),
        );
        let reason = one_line(&self.status_reason);
        if self.status != ReviewStatus::Completed && !reason.is_empty() {
            let level = if self.status == ReviewStatus::Failed {
                "error"
            } else {
                "warning"
            };
            inv.insert(
                "toolExecutionNotifications".into(),
                json!([{ "level": level, "message": { "text": reason } }]),
            );
        }
        Value::Object(inv)
    }

    fn sarif_run_properties(&self) -> Value {
        let root = normalize_slashes(&self.target.path);
        let unlocated: Vec<Value> = self
            .findings
            .iter()
            .filter(|f| {
                f.file
                    .as_deref()
                    .and_then(|file| relative_uri(file, &root))
                    .is_none()
            })
            .map(|f| {
                json!({
                    "id": f.id,
                    "title": f.title,
                    "severity": f.severity.as_str(),
                    "category": f.category,
                    "symbol": f.symbol,
                    "verdict": f.verdict.as_str(),
                })
            })
            .collect();
        let mut props = Map::new();
        props.insert("flowId".into(), json!(self.flow_id));
        props.insert("flow".into(), json!(self.flow));
        props.insert("status".into(), json!(status_str(self.status)));
        if !self.status_reason.is_empty() {
            props.insert("statusReason".into(), json!(self.status_reason));
        }
        props.insert("startedAt".into(), json!(self.started_at));
        // versionControlProvenance needs a repositoryUri, which a review of a directory does
        // not know; the commit still belongs in the log.
        if let Some(sha) = &self.target.head_sha {
            props.insert("headSha".into(), json!(sha));
        }
        props.insert("fileCount".into(), json!(self.target.file_count));
        props.insert("unlocatedFindings".into(), Value::Array(unlocated));
        Value::Object(props)
    }
}

const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

const SRCROOT: &str = "%SRCROOT%";

const FINGERPRINT_KEY: &str = "quorumAnchor/v1";

/// The name of the CWE taxonomy's tool component.
const CWE_TAXONOMY: &str = "CWE";

/// The CWE taxonomy with the taxa `cwes` (sorted), as a run's `taxonomies` entry.
fn cwe_taxonomy(cwes: &[u32]) -> Value {
    let taxa: Vec<Value> = cwes
        .iter()
        .map(|c| {
            json!({
                "id": c.to_string(),
                "name": format!("CWE-{c}"),
                "helpUri": format!("https://cwe.mitre.org/data/definitions/{c}.html"),
            })
        })
        .collect();
    json!({
        "name": CWE_TAXONOMY,
        "organization": "MITRE",
        "shortDescription": { "text": "The MITRE Common Weakness Enumeration" },
        "informationUri": "https://cwe.mitre.org/",
        "taxa": taxa,
    })
}

/// Severities of the findings filed under one rule.
struct RuleAcc {
    /// Category spellings that map to this rule id (usually one).
    categories: BTreeSet<String>,
    worst: Severity,
    /// The CWEs of its findings (GitHub's `external/cwe/cwe-N` tags).
    cwes: BTreeSet<u32>,
}

fn sarif_level(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 | Severity::P1 => "error",
        Severity::P2 => "warning",
        Severity::P3 => "note",
    }
}

/// GitHub's `security-severity` scale (0-10): critical > 9, high 7-8.9, medium 4-6.9, low < 4.
fn security_severity(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 => "9.5",
        Severity::P1 => "8.0",
        Severity::P2 => "5.5",
        Severity::P3 => "2.0",
    }
}

/// A PascalCase rule name from a rule id ("security/sql-injection" -> "SecuritySqlInjection").
fn rule_name(id: &str) -> String {
    id.split(['/', '-', '_'])
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut cs = s.chars();
            match cs.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn sarif_rule(id: &str, acc: &RuleAcc) -> Value {
    let shown = acc
        .categories
        .iter()
        .find(|c| !c.is_empty())
        .cloned()
        .unwrap_or_else(|| id.to_string());
    let area = rule_id(&area_of(id));
    let mut tags: BTreeSet<String> = BTreeSet::new();
    tags.insert("quorum".to_string());
    tags.insert(id.to_string());
    tags.insert(area.clone());
    tags.extend(acc.categories.iter().filter(|c| !c.is_empty()).cloned());
    // GitHub files an alert under "security" (and reads security-severity) only with this tag.
    if area == "security" {
        tags.insert("security".to_string());
    }
    tags.extend(acc.cwes.iter().map(|c| format!("external/cwe/cwe-{c}")));
    json!({
        "id": id,
        "name": rule_name(id),
        "shortDescription": { "text": format!("quorum: {shown}") },
        "fullDescription": {
            "text": format!(
                "Findings that quorum's specialists reported under the category \"{shown}\" and \
                 that an independent verifier did not reject. Each result carries its own \
                 severity, confidence and verdict."
            )
        },
        "defaultConfiguration": { "level": sarif_level(acc.worst) },
        "properties": {
            "tags": tags.into_iter().collect::<Vec<_>>(),
            "security-severity": security_severity(acc.worst),
        },
    })
}

fn sarif_result(f: &Finding, uri: &str, rule: String, rule_index: usize) -> Value {
    let title = one_line(&f.title);
    let title = if title.is_empty() {
        format!("finding {}", one_line(&f.id))
    } else {
        title
    };
    let why = f.why_it_matters.trim();
    let text = if why.is_empty() {
        title
    } else {
        format!("{title} — {why}")
    };

    let start = f.line_start.or(f.line_end).unwrap_or(1).max(1);
    let mut region = Map::new();
    region.insert("startLine".into(), json!(start));
    if let Some(end) = f.line_end {
        region.insert("endLine".into(), json!(end.max(start)));
    }
    let mut location = Map::new();
    location.insert(
        "physicalLocation".into(),
        json!({
            "artifactLocation": { "uri": uri, "uriBaseId": SRCROOT },
            "region": Value::Object(region),
        }),
    );
    if let Some(sym) = f.symbol.as_deref().map(one_line).filter(|s| !s.is_empty()) {
        location.insert(
            "logicalLocations".into(),
            json!([{ "fullyQualifiedName": sym }]),
        );
    }

    let reporters: BTreeSet<&str> = f.reporters.iter().map(|r| r.persona.as_str()).collect();
    json!({
        "ruleId": rule,
        "ruleIndex": rule_index,
        "level": sarif_level(f.severity),
        "message": { "text": text },
        "locations": [Value::Object(location)],
        "partialFingerprints": { FINGERPRINT_KEY: anchor_fingerprint(f) },
        "properties": {
            "findingId": f.id,
            "severity": f.severity.as_str(),
            "confidence": f.confidence,
            "verdict": f.verdict.as_str(),
            "reporters": reporters.into_iter().collect::<Vec<_>>(),
            "promoted": f.promoted,
            "category": f.category,
        },
    })
}

/// A target-relative, percent-encoded URI for a finding's file, or None when it names nothing.
fn relative_uri(file: &str, target_root: &str) -> Option<String> {
    // ':' is encoded too, so "C:/x" cannot be read as a URI scheme.
    relative_path(file, target_root).map(|rel| percent_encode(&rel, b"/"))
}

/// `file:///abs/path/` for an absolute target path (POSIX or drive-letter), else None.
fn base_file_uri(target_root: &str) -> Option<String> {
    let root = target_root.trim_end_matches('/');
    let bytes = root.as_bytes();
    let path = if root.starts_with('/') {
        root.to_string()
    } else if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        format!("/{root}")
    } else if target_root.starts_with('/') {
        // The filesystem root itself.
        String::new()
    } else {
        return None;
    };
    Some(format!("file://{}/", percent_encode(&path, b"/:")))
}

fn percent_encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// automationDetails.id segments must not add '/' of their own: GitHub reads everything up to
/// the last '/' as the analysis category.
fn id_segment(s: &str) -> String {
    let t: String = s
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if t.is_empty() {
        "unnamed".to_string()
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::report;

    #[test]
    fn rule_ids_are_slugs() {
        assert_eq!(rule_id("security/injection"), "security/injection");
        assert_eq!(
            rule_id("Security / SQL Injection!"),
            "security/sql-injection"
        );
        assert_eq!(rule_id("a//b\\c"), "a/b/c");
        assert_eq!(rule_id("  "), "uncategorized");
        assert_eq!(rule_id("données/été"), "donn-es/t");
        assert_eq!(rule_name("security/sql-injection"), "SecuritySqlInjection");
    }

    #[test]
    fn uris_are_relative_and_encoded() {
        assert_eq!(
            relative_uri("src/a b.rs", "/t").as_deref(),
            Some("src/a%20b.rs")
        );
        assert_eq!(
            relative_uri("./src\\x.rs", "/t").as_deref(),
            Some("src/x.rs")
        );
        assert_eq!(
            relative_uri("/t/src/x.rs", "/t").as_deref(),
            Some("src/x.rs")
        );
        assert_eq!(relative_uri("C:/x.rs", "/t").as_deref(), Some("C%3A/x.rs"));
        assert_eq!(relative_uri("é.rs", "/t").as_deref(), Some("%C3%A9.rs"));
        assert_eq!(relative_uri("", "/t"), None);
        assert_eq!(
            base_file_uri("/srv/my repo").as_deref(),
            Some("file:///srv/my%20repo/")
        );
        assert_eq!(base_file_uri("/srv/x/").as_deref(), Some("file:///srv/x/"));
        assert_eq!(
            base_file_uri("C:/work").as_deref(),
            Some("file:///C:/work/")
        );
        assert_eq!(base_file_uri("/").as_deref(), Some("file:///"));
        assert_eq!(base_file_uri("relative/dir"), None);
    }

    #[test]
    fn sarif_levels_and_rules_follow_severity() {
        let sarif = report().to_sarif();
        let run = &sarif["runs"][0];
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["performance", "security/auth", "security/injection"]);
        let auth = &rules[1];
        assert_eq!(auth["defaultConfiguration"]["level"], "error");
        assert_eq!(auth["properties"]["security-severity"], "9.5");
        let tags = auth["properties"]["tags"].as_array().unwrap();
        assert!(tags.contains(&json!("security")));
        let perf = &rules[0];
        assert_eq!(perf["defaultConfiguration"]["level"], "warning");
        assert!(!perf["properties"]["tags"]
            .as_array()
            .unwrap()
            .contains(&json!("security")));
        let results = run["results"].as_array().unwrap();
        assert_eq!(results[0]["level"], "error");
        assert_eq!(results[2]["level"], "warning");
        assert_eq!(
            results[2]["locations"][0]["physicalLocation"]["region"]["startLine"],
            1
        );
        assert_eq!(
            results[2]["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
            "Cache::get"
        );
        assert_eq!(results[2]["properties"]["promoted"], true);
        assert_eq!(run["automationDetails"]["id"], "quorum/review/flow-123");
        assert_eq!(run["invocations"][0]["executionSuccessful"], true);
        assert_eq!(run["properties"]["headSha"], "abc123");
        assert_eq!(
            run["originalUriBaseIds"]["%SRCROOT%"]["uri"],
            "file:///srv/my%20repo/"
        );
    }

    #[test]
    fn sarif_marks_failed_runs_unsuccessful() {
        let mut r = report();
        r.status = ReviewStatus::Failed;
        r.status_reason = "planner returned nothing usable".into();
        let sarif = r.to_sarif();
        let inv = &sarif["runs"][0]["invocations"][0];
        assert_eq!(inv["executionSuccessful"], false);
        assert_eq!(inv["toolExecutionNotifications"][0]["level"], "error");
    }
}
