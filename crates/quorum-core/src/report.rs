//! The review report: one data structure (schema_version 1, DESIGN §6) and its renderings —
//! Markdown for people, JSON for scripts, SARIF 2.1.0 for code-scanning tools, and two formats
//! that put findings into merge requests: reviewdog's rdjson and GitLab's code quality
//! report. [`REPORT_FORMATS`] is the one list of them.
//!
//! The rooms: [`Report`] and its parts are data (`schema`); `formats` lists the files and
//! renders each through `markdown`, `sarif`, `rdjson` or `gitlab`; `common` holds what several
//! renderings share (rule ids, fingerprints, repository paths, one-line text). This module only
//! declares them and re-exports the data and the format list, so each item has one path.

mod common;
mod formats;
mod gitlab;
mod markdown;
mod rdjson;
mod sarif;
mod schema;
pub mod since;
#[cfg(test)]
pub(crate) mod testing;

pub use formats::{report_format, report_format_names, ReportFormat, REPORT_FORMATS};
pub use schema::{
    json_schema, strict_json_schema, DiffFile, DiffInfo, Gone, InsightsReport, Methodology,
    OfferedInsight, Report, ReviewStatus, SinceReport, TargetInfo, TaskReport, TeamMember, Usage,
    SCHEMA_VERSION,
};
