//! Deterministic analyzers (linters, security scanners) as data, and their hits as leads.
//!
//! An analyzer is a catalog entry (`config/analyzers.yaml`): the command and its arguments,
//! the files it applies to, the shape of its JSON output, how its levels and rules map to
//! severities, and the category its hits belong to. Nothing in the engine names a tool: the
//! only tool-shaped code is one parser per output *format* ([`OutputFormat`]), each a pure
//! function from the tool's stdout to [`Hit`]s, unit-tested on real-looking samples.
//!
//! A hit becomes a [`Lead`] (file, line, rule, message, tool). Leads are recorded with the
//! review's scope, so a resumed or distributed review sees the same ones; they reach the
//! prompts of specialists whose files they touch (delimited as untrusted content: tool output
//! quotes the code under review), and each one is also a candidate finding
//! ([`Lead::to_finding`]) that grounding and the verifier must confirm like any other.
//! Running the tools is the runtime's business (`quorum_runtime::analyzers`); this module
//! decides what to run on which files and what the output means.
//!
//! The rooms: the catalog and what an entry makes of a run (`catalog`), the output formats
//! (`formats`), leads as prompt material and candidate findings (`leads`), and quorum's own
//! semgrep rule pack, embedded (`rule_pack`). This module only
//! declares them and re-exports their items, so each has one path.

mod catalog;
mod formats;
mod leads;
mod rule_pack;
#[cfg(test)]
mod testing;

pub use catalog::{AnalyzerCatalog, AnalyzerSpec, HarmMap, SeverityMap, DEFAULT_CATALOG};
pub use formats::{parse_output, relative_path, Hit, OutputFormat};
pub use leads::{
    anchor_to_overlapping, is_lead, leads_list, review_order, take_unchecked_leads, AnalyzerRun,
    Lead, Leads, LintCount, Unchecked, MAX_LEADS_PER_PROMPT, REPORTER_PREFIX,
};
pub use rule_pack::{rule_pack_digest, RULES_PLACEHOLDER, RULE_PACK};
