//! `build-report.json` and `build-report.md`: what a build run did — every criterion's state,
//! every increment with what judged it, why the loop stopped, and the backstop it had.

use crate::fixing::build_history::Backstop;
use crate::fixing::build_loop::{BuildFailure, BuildStop};
use crate::fixing::fix_report::FixUsage;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

pub const BUILD_REPORT_SCHEMA_VERSION: u32 = 1;

/// One acceptance criterion at the end of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildCriterion {
    pub id: String,
    pub text: String,
    pub met: bool,
    /// The iteration whose kept increment met it (0: the base already met it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_at: Option<u32>,
    /// The judge's last reason when it is not met.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One increment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationEntry {
    pub iteration: u32,
    /// The criterion it worked toward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    pub kept: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newly_met: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<BuildFailure>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Files the increment changed.
    #[serde(default)]
    pub files: Vec<String>,
    /// The tests' result on it (absent: not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_passed: Option<bool>,
    /// Criteria met with it, as the judge saw them (absent: not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_met: Option<usize>,
    /// The builder's own summary of its change.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    #[serde(default)]
    pub tool_calls: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildReport {
    pub schema_version: u32,
    pub build_id: String,
    pub target: String,
    pub spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// `quorum/build-<id>`: one commit per kept increment (git targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The target with every kept increment (targets that are not git checkouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patched_copy: Option<String>,
    pub builder_model: String,
    pub judge_model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_command: Option<String>,
    pub sandbox: String,
    #[serde(default)]
    pub baseline_failing: Vec<String>,
    pub backstop: Backstop,
    pub stop: BuildStop,
    /// Every criterion met.
    pub satisfied: bool,
    pub criteria: Vec<BuildCriterion>,
    pub iterations: Vec<IterationEntry>,
    pub usage: FixUsage,
}

impl BuildReport {
    pub fn met(&self) -> usize {
        self.criteria.iter().filter(|c| c.met).count()
    }

    pub fn kept(&self) -> usize {
        self.iterations.iter().filter(|i| i.kept).count()
    }

    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        // Tests that ran uncontained are said in the first line, not only beside the command.
        let unsandboxed = if self.test_command.is_some() && self.sandbox.starts_with("UNSANDBOXED")
        {
            " — UNSANDBOXED: the tests ran with your files, sockets and network"
        } else {
            ""
        };
        let _ = writeln!(md, "# quorum build {}{unsandboxed}\n", self.build_id);
        let _ = writeln!(
            md,
            "**{} of {} criteria met** of `{}` in `{}`; stopped: **{}** after {} increment(s), {} kept.\n",
            self.met(),
            self.criteria.len(),
            self.spec,
            self.target,
            self.stop.as_str(),
            self.iterations.len(),
            self.kept()
        );
        if let Some(b) = &self.branch {
            let _ = writeln!(md, "Branch: `{b}` (one commit per kept increment).\n");
        }
        if let Some(c) = &self.patched_copy {
            let _ = writeln!(md, "Patched copy: `{c}`.\n");
        }
        let _ = writeln!(
            md,
            "Builder: `{}`; judge: `{}`; tests: {}; backstop: {}.\n",
            self.builder_model,
            self.judge_model,
            self.test_command
                .as_deref()
                .map(|c| format!("`{c}` ({})", self.sandbox))
                .unwrap_or_else(|| "none".into()),
            self.backstop.describe(self.criteria.len())
        );
        let _ = writeln!(
            md,
            "## Criteria\n\n| id | met | at | criterion | why not |\n|---|---|---|---|---|"
        );
        for c in &self.criteria {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                c.id,
                if c.met { "yes" } else { "no" },
                c.met_at
                    .map(|i| if i == 0 {
                        "base".to_string()
                    } else {
                        i.to_string()
                    })
                    .unwrap_or_default(),
                cell(&c.text),
                cell(&c.reason)
            );
        }
        let _ = writeln!(md, "\n## Increments\n\n| # | toward | kept | met | tests | files | why |\n|---|---|---|---|---|---|---|");
        for i in &self.iterations {
            let why = match (&i.failure, i.kept) {
                (_, true) => format!("met {}", i.newly_met.join(", ")),
                (Some(f), false) => format!("{}: {}", f.kind, i.reason),
                (None, false) => i.reason.clone(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                i.iteration,
                i.focus.as_deref().unwrap_or(""),
                if i.kept { "yes" } else { "no" },
                i.judged_met.map(|n| n.to_string()).unwrap_or_default(),
                match i.tests_passed {
                    Some(true) => "pass",
                    Some(false) => "fail",
                    None => "",
                },
                cell(&i.files.join(", ")),
                cell(&why)
            );
        }
        let _ = writeln!(
            md,
            "\n{} model call(s), {} tokens in, {} out, {:.1} s.",
            self.usage.llm_calls,
            self.usage.tokens_in,
            self.usage.tokens_out,
            self.usage.wall_ms as f64 / 1000.0
        );
        md
    }
}

/// A markdown table cell: one line, pipes escaped, at most 200 characters.
fn cell(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one.chars().take(200).collect();
    if one.chars().count() > 200 {
        out.push('…');
    }
    out.replace('|', "\\|")
}
