//! `fix-report.json` and `fix-report.md`: what a `quorum fix` run tried, kept and gave up, and
//! the oracles behind each decision.

use super::fix_loop::{FailureClass, Oracles, StopReason, Unfixed};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

pub const FIX_REPORT_SCHEMA_VERSION: u32 = 1;

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixReport {
    pub schema_version: u32,
    pub fix_id: String,
    /// The report the findings came from (its path and flow id).
    pub source_report: String,
    pub source_flow_id: String,
    pub target: String,
    /// The commit the fixes are based on, when the target is a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// The branch holding one commit per kept fix (git targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The patched copy of the target (targets that are not git repositories).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patched_copy: Option<String>,
    /// The test command and how it ran (`None`: no test command, so no test oracle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_command: Option<String>,
    pub sandbox: String,
    /// Tests that failed on the base before any fix; never blamed on a fix.
    #[serde(default)]
    pub baseline_failing: Vec<String>,
    pub stop: StopReason,
    pub fixes: Vec<FixEntry>,
    pub usage: FixUsage,
    /// The review-and-fix cycles of a self-improvement run (`quorum fix --flow`), in order;
    /// empty for a fix run from one report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycles: Vec<CycleEntry>,
    /// Why a self-improvement run ran no further cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_stop: Option<CyclesStop>,
}

/// One review-and-fix cycle of a self-improvement run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleEntry {
    pub cycle: u32,
    /// The cycle's review (its report.json) and flow id.
    pub review: String,
    pub review_flow_id: String,
    /// Confirmed findings at or above the flow's severity in that review.
    pub found: usize,
    /// Of those, the ones fixed in this cycle.
    pub kept: usize,
    /// Why the cycle's fix loop stopped (absent: there was nothing to fix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopReason>,
}

/// Why a self-improvement run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CyclesStop {
    /// The last review found nothing left to fix.
    NothingToFix,
    /// The last cycle kept fewer fixes than the flow's `min_kept`.
    BelowThreshold,
    /// The flow's `cycles` ran.
    MaxCycles,
    /// A cycle's kept changes returned a file to an earlier cycle's content: fixes that undo
    /// each other (the progress lines name the file and the cycles).
    Circular,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FixUsage {
    pub attempts: u32,
    pub llm_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub wall_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FixStatus {
    Kept,
    Unfixed,
}

/// One finding's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixEntry {
    pub finding_id: String,
    pub title: String,
    pub file: String,
    pub status: FixStatus,
    /// The self-improvement cycle it was found and worked on in (absent: a single run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfixed_because: Option<Unfixed>,
    /// A circular fix across cycles: the cycle that fixed this finding before a later change
    /// undid it (it was found again in `cycle`, quoting the same code), so it is not tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_in_cycle: Option<u32>,
    /// The kept fix's commit on the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The files the kept fix changed.
    #[serde(default)]
    pub files: Vec<String>,
    pub attempts: Vec<AttemptEntry>,
}

/// One attempt: what the oracles said and what was decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEntry {
    pub attempt: u32,
    pub oracles: Oracles,
    pub kept: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The fix agent's tool calls (`edit_file app.py → ok`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<String>,
    /// The start of the fix agent's final answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fixer_said: String,
    /// The cluster node the fix agent ran on (absent: this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node whose test run judged the change, when not this machine: it ran on the tree
    /// the change was kept into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested_on: Option<String>,
    /// The other fixes its tests ran together with: changes ready at once, to disjoint files,
    /// are tested in one run on the tree holding all of them, and kept together when it passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tested_with: Vec<String>,
}

impl FixEntry {
    /// The finding's id, with its cycle in a self-improvement run (`c2/F001`): each cycle's
    /// review numbers its findings afresh.
    pub fn label(&self) -> String {
        match self.cycle {
            Some(c) => format!("c{c}/{}", self.finding_id),
            None => self.finding_id.clone(),
        }
    }

    /// The oracles the kept attempt passed, for its commit message.
    pub fn passed_oracles(&self) -> Vec<&'static str> {
        let Some(a) = self.attempts.iter().find(|a| a.kept) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if a.oracles.tests.is_some() {
            out.push("tests");
        }
        if a.oracles.analyzer.is_some() {
            out.push("analyzer");
        }
        if a.oracles.verifier.is_some() {
            out.push("blind verifier");
        }
        out
    }
}

impl FixReport {
    pub fn kept(&self) -> usize {
        self.fixes
            .iter()
            .filter(|f| f.status == FixStatus::Kept)
            .count()
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
        let _ = writeln!(md, "# quorum fix {}{unsandboxed}\n", self.fix_id);
        let _ = writeln!(
            md,
            "Findings from `{}` (review {}), target `{}`.\n",
            self.source_report, self.source_flow_id, self.target
        );
        let _ = writeln!(
            md,
            "**{} of {} fixed** in {} attempts; stopped: {}.\n",
            self.kept(),
            self.fixes.len(),
            self.usage.attempts,
            stop_text(self.stop)
        );
        if !self.cycles.is_empty() {
            let _ = writeln!(
                md,
                "{} review-and-fix cycle(s); ended: {}.\n",
                self.cycles.len(),
                self.cycles_stop.map(cycles_stop_text).unwrap_or("-")
            );
            md.push_str("| cycle | review | confirmed to fix | kept |\n|---|---|---|---|\n");
            for c in &self.cycles {
                let _ = writeln!(
                    md,
                    "| {} | `{}` | {} | {} |",
                    c.cycle, c.review, c.found, c.kept
                );
            }
            md.push('\n');
        }
        if let Some(b) = &self.branch {
            let _ = writeln!(
                md,
                "Kept fixes are commits on branch `{b}`; the same change is in `fixes.patch`.\n"
            );
        }
        if let Some(c) = &self.patched_copy {
            let _ = writeln!(md, "The target is not a git repository: the patched copy is `{c}`; the change is in `fixes.patch`.\n");
        }
        match &self.test_command {
            Some(t) => {
                let _ = writeln!(md, "Tests: `{t}` ({}).", self.sandbox);
                if !self.baseline_failing.is_empty() {
                    let _ = writeln!(
                        md,
                        " Already failing before any fix (not blamed on one): {}.",
                        self.baseline_failing.join(", ")
                    );
                }
                md.push('\n');
            }
            None => md.push_str("Tests: none configured (pass --test-cmd), so fixes were judged by the analyzers and the blind verifier only.\n\n"),
        }
        md.push_str("| finding | title | status | attempts |\n|---|---|---|---|\n");
        for f in &self.fixes {
            let status = match (f.status, f.unfixed_because) {
                (FixStatus::Kept, _) => "kept".to_string(),
                (FixStatus::Unfixed, Some(Unfixed::CircularFix)) if f.fixed_in_cycle.is_some() => {
                    format!(
                        "unfixed (circular fix across cycles: fixed in cycle {}, found again in cycle {})",
                        f.fixed_in_cycle.unwrap_or(0),
                        f.cycle.unwrap_or(0)
                    )
                }
                (FixStatus::Unfixed, Some(why)) => format!("unfixed ({})", unfixed_text(why)),
                (FixStatus::Unfixed, None) => "unfixed".to_string(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                f.label(),
                f.title.replace('|', "\\|"),
                status,
                f.attempts.len()
            );
        }
        for f in &self.fixes {
            if f.attempts.is_empty() {
                continue;
            }
            let _ = writeln!(md, "\n## {} — {}\n", f.label(), f.title);
            for a in &f.attempts {
                let verdict = if a.kept {
                    "kept".to_string()
                } else {
                    a.failure
                        .as_ref()
                        .map(|c| format!("discarded: {}", c.kind))
                        .unwrap_or_else(|| "discarded".into())
                };
                let first_line = a.reason.lines().next().unwrap_or("");
                // A verdict of the fixer's own model or family is no independent oracle.
                let dependent = a
                    .oracles
                    .verifier
                    .as_ref()
                    .and_then(|v| v.not_independent.as_deref())
                    .map(|why| format!(" (verifier not independent: {why})"))
                    .unwrap_or_default();
                let _ = writeln!(
                    md,
                    "- attempt {}: {verdict}{}{}{dependent}",
                    a.attempt,
                    if first_line.is_empty() { "" } else { " — " },
                    first_line
                );
            }
        }
        md
    }
}

fn stop_text(s: StopReason) -> &'static str {
    match s {
        StopReason::Satisfied => "every fix kept",
        StopReason::Settled => "every finding fixed or given up",
        StopReason::Oscillating => "oscillating (the loop returned to an earlier state)",
        StopReason::Backstop => "the attempt backstop was reached",
    }
}

fn cycles_stop_text(s: CyclesStop) -> &'static str {
    match s {
        CyclesStop::NothingToFix => "the last review found nothing left to fix",
        CyclesStop::BelowThreshold => "the last cycle kept fewer fixes than the flow's min_kept",
        CyclesStop::MaxCycles => "the flow's cycles ran",
        CyclesStop::Circular => "circular: a cycle's fixes undid an earlier cycle's",
    }
}

fn unfixed_text(u: Unfixed) -> &'static str {
    match u {
        Unfixed::CircularFix => "circular fix: the same failure three times",
        Unfixed::Oscillating => "oscillating",
        Unfixed::Backstop => "backstop reached",
        Unfixed::Conflicting => "conflicting: its change clashed with fixes kept meanwhile, twice",
    }
}
