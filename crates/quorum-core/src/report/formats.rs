//! The report files quorum writes: [`REPORT_FORMATS`], the one list of formats and their file
//! names, and [`Report::render`], which gives the text of each.

use super::Report;
use serde_json::Value;

/// One report file quorum can write: its name in `--format` and config `formats`, and the file
/// it is written to in the output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportFormat {
    pub name: &'static str,
    pub file_name: &'static str,
}

/// Every report format, in the order they are listed and written.
pub const REPORT_FORMATS: &[ReportFormat] = &[
    ReportFormat {
        name: "md",
        file_name: "report.md",
    },
    ReportFormat {
        name: "json",
        file_name: "report.json",
    },
    ReportFormat {
        name: "sarif",
        file_name: "report.sarif",
    },
    ReportFormat {
        name: "rdjson",
        file_name: "report.rdjson",
    },
    ReportFormat {
        name: "gitlab",
        // GitLab's documented artifact name, so `artifacts:reports:codequality` finds it as-is.
        file_name: "gl-code-quality-report.json",
    },
];

/// The format called `name` ("md", "sarif", "gitlab", ...), or None for an unknown name.
pub fn report_format(name: &str) -> Option<ReportFormat> {
    REPORT_FORMATS.iter().copied().find(|f| f.name == name)
}

/// "md, json, sarif, rdjson, gitlab": for messages that say what is accepted.
pub fn report_format_names() -> String {
    REPORT_FORMATS
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Report {
    /// The text of the report file for `format` (a [`ReportFormat::name`]), or None for an
    /// unknown format. `repo_prefix` is the target's directory relative to the root of the
    /// repository it sits in ("" when it is the root or not in a repository): the merge-request
    /// formats name files relative to the repository, the others relative to the target.
    pub fn render(&self, format: &str, repo_prefix: &str) -> Option<String> {
        let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
        Some(match format {
            "md" => self.to_markdown(),
            "json" => self.to_json(),
            "sarif" => pretty(self.to_sarif()),
            "rdjson" => pretty(self.to_rdjson(repo_prefix)),
            "gitlab" => pretty(self.to_gitlab_code_quality(repo_prefix)),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::{empty_report, finding, report};
    use crate::review::finding::{Finding, Severity};
    use std::collections::BTreeSet;

    #[test]
    fn every_format_renders_and_unknown_ones_do_not() {
        let r = report();
        let mut files = BTreeSet::new();
        for f in REPORT_FORMATS {
            let body = r
                .render(f.name, "")
                .unwrap_or_else(|| panic!("{} renders", f.name));
            assert!(files.insert(f.file_name), "one file per format");
            if f.name == "md" {
                assert!(body.starts_with("# quorum review"));
            } else {
                serde_json::from_str::<Value>(&body)
                    .unwrap_or_else(|e| panic!("{} is JSON: {e}", f.name));
            }
        }
        assert_eq!(
            r.render("rdjson", "").unwrap(),
            serde_json::to_string_pretty(&r.to_rdjson("")).unwrap()
        );
        assert!(r.render("html", "").is_none());
        assert!(report_format("MD").is_none(), "names are exact");
        assert_eq!(
            report_format("gitlab").map(|f| f.file_name),
            Some("gl-code-quality-report.json")
        );
        assert_eq!(report_format_names(), "md, json, sarif, rdjson, gitlab");
    }

    #[test]
    fn default_like_report_renders_without_panicking() {
        let mut r = empty_report();
        r.target.path.clear();
        r.flow.clear();
        r.flow_id.clear();
        r.findings.push(Finding {
            title: String::new(),
            category: "///".into(),
            file: Some("./".into()),
            line_start: Some(0),
            line_end: Some(0),
            confidence: f64::NAN,
            anchor: String::new(),
            ..finding("", Severity::P3, "", None)
        });
        let md = r.to_markdown();
        assert!(md.contains("(unnamed target)"));
        let sarif = r.to_sarif();
        // "./" names no file, so the finding is listed as unlocated rather than emitted.
        assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 0);
        assert_eq!(
            sarif["runs"][0]["properties"]["unlocatedFindings"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
