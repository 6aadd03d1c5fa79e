//! The capability rules a flow file states as data: fixed dimensions, directory and full
//! coverage, the document team, the fresh-eyes lane, two-tier selection, the synthesis mode and
//! the exhaustive rounds. The rules that apply them live in [`crate::flows`]'s other rooms.

use serde::{Deserialize, Serialize};

/// File kinds a dimension may restrict its added task to (as `pack::FileKind` names them).
pub const FILE_KINDS: [&str; 4] = ["code", "config", "doc", "data"];

/// A review dimension every run of the flow covers (correctness, security, ...): the planner is
/// told the dimensions, and after planning the engine adds a task for any required dimension the
/// plan left without one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    pub name: String,
    /// Personas whose tasks count for this dimension; the first one is given the task the
    /// engine adds when the plan has none.
    pub personas: Vec<String>,
    #[serde(default = "yes")]
    pub required: bool,
    /// What a task added for this dimension is asked to do.
    #[serde(default)]
    pub mandate: String,
    /// File kinds (code, config, doc, data) an added task is given; all kinds when empty.
    #[serde(default)]
    pub kinds: Vec<String>,
}

fn yes() -> bool {
    true
}

/// Every directory holding source code must be in some task's files; the engine adds a task,
/// for `persona` with `mandate`, per top-level directory the plan left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryCoverage {
    pub persona: String,
    pub mandate: String,
}

/// Who reads the files no planned task covers when the review runs with `--coverage full`, and
/// in how large directory batches (absent bounds: the flow's `exhaustive` block's, else 40
/// files and a fifth of `context_tokens` of file bodies per task, so every body fits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FullCoverage {
    pub persona: String,
    pub mandate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_files_per_task: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_task: Option<u32>,
}

/// Content signals that call a conditional team member: counted deterministically over the
/// pack's files, case-insensitively.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signals {
    /// Whole words (or phrases) in the text of document files.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Text a heading line (Markdown `#`, or a numbered/underlined heading) contains.
    #[serde(default)]
    pub headings: Vec<String>,
    /// File extensions (without the dot) that are a signal by their presence.
    #[serde(default)]
    pub extensions: Vec<String>,
    /// Signals needed to join (keyword hits + heading hits + files with an extension).
    #[serde(default = "one")]
    pub min_matches: usize,
}

fn one() -> usize {
    1
}

/// A team member the flow sets, not the planner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamMemberRule {
    pub persona: String,
    pub mandate: String,
    /// Absent for an always-on member; for a conditional one, the signals that call it.
    #[serde(default)]
    pub signals: Option<Signals>,
}

/// Who reviews regardless of the planner: always-on members join every run; conditional members
/// join exactly when their signals are present (a planner task for one whose signals are absent
/// is refused, with the reason).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamRules {
    #[serde(default)]
    pub always: Vec<TeamMemberRule>,
    #[serde(default)]
    pub conditional: Vec<TeamMemberRule>,
}

/// The fresh-eyes lane: one more specialist task, added after planning, that sees only the
/// material — the flow's own neutral mandate instead of a planner's, no checker hint, no team
/// blackboard. Findings only it reported are marked `fresh_eyes: true` in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreshEyes {
    pub persona: String,
    pub mandate: String,
    /// File kinds (code, config, doc, data) the task is given; all kinds when empty.
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// Narrow probes (`probes:`): after planning, the catalog's heuristic probes whose pattern
/// matches a line of the pack become tasks of their own — one yes/no question about the lines
/// around the match, one short call without tools ([`crate::flows::probes`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probes {
    /// Most probe tasks a review adds (spread over the probes that matched, round-robin).
    pub max: usize,
    /// Lines shown on each side of the matched line.
    #[serde(default = "probe_context")]
    pub context_lines: u32,
    /// Output-token bound of one probe call.
    #[serde(default = "probe_tokens")]
    pub max_output_tokens: u32,
}

fn probe_context() -> u32 {
    10
}

fn probe_tokens() -> u32 {
    160
}

/// Self-consistency (`consistency:`): after planning, each open specialist task (not a probe)
/// is asked `passes` times, each pass with its files and each file's hunks in another
/// deterministic order, and a finding is kept only when at least `min_votes` passes found its
/// anchor (same file, overlapping lines) — the rest are dropped with `removed_by: consistency`
/// ([`crate::flows::passes`], [`crate::review::consensus`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consistency {
    /// Passes per task, the first included (2-9).
    pub passes: u32,
    /// Passes that must find an anchor (1..=passes; default: a majority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_votes: Option<u32>,
    /// Sampling temperature of every pass's calls (0-2; default 0.6): passes over one file
    /// differ only by sampling, so they need some.
    #[serde(default = "pass_temperature")]
    pub temperature: f32,
}

fn pass_temperature() -> f32 {
    0.6
}

impl Consistency {
    /// The votes a finding needs: `min_votes`, else a majority of the passes.
    pub fn needed(&self) -> u32 {
        self.min_votes.unwrap_or(self.passes / 2 + 1)
    }
}

/// Self-improvement (`improve:`): the flow is run by `quorum fix PATH --flow NAME`, in cycles —
/// review the tree, fix what the review confirmed in a private worktree (each fix kept only when
/// the oracles accept it), review the fixed tree again — until a cycle keeps fewer than
/// `min_kept` fixes or `cycles` cycles have run. Seed 000 §7: each cycle builds on the previous
/// cycle's verified fixes, and the delta threshold stops it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Improve {
    /// Most review-and-fix cycles (1-10).
    pub cycles: u32,
    /// A cycle that keeps fewer fixes than this is the last (at least 1).
    #[serde(default = "one_fix")]
    pub min_kept: u32,
    /// Fix the confirmed findings at or above this severity (P0-P3; default P2).
    #[serde(default = "improve_severity")]
    pub min_severity: String,
    /// Most files one fix may change.
    #[serde(default = "improve_files")]
    pub max_files: usize,
    /// Most lines one fix may change.
    #[serde(default = "improve_lines")]
    pub max_lines: u32,
}

fn one_fix() -> u32 {
    1
}

fn improve_severity() -> String {
    "P2".into()
}

fn improve_files() -> usize {
    3
}

fn improve_lines() -> u32 {
    60
}

/// Two-tier selection of the personas a planner may choose from (seed 002 §4.2): a
/// deterministic prefilter on the pack's signals, then a short interest poll of each survivor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// The question each candidate answers about the material in its poll.
    pub instructions: String,
    /// Poll the prefilter's survivors (false: the prefilter alone decides).
    #[serde(default = "yes")]
    pub interest_poll: bool,
    /// Output-token bound of one poll.
    #[serde(default = "poll_tokens")]
    pub max_output_tokens: u32,
    /// Selection instead of the planner (seed 002 §4.2's bottom-up triage): no planner call;
    /// every selected persona gets one task on the files whose own signals meet its triggers
    /// (`selection::slice_for`), with its own mandate. False: the planner chooses among the
    /// selected.
    #[serde(default)]
    pub instead_of_planner: bool,
    /// Most files in one such task (path order), 1-500.
    #[serde(default = "slice_files")]
    pub max_files_per_task: usize,
}

fn poll_tokens() -> u32 {
    128
}

fn slice_files() -> usize {
    40
}

/// How the findings of a run are synthesised before the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthesisMode {
    /// Anchor merge, confidence gate and corroboration (every flow).
    #[default]
    Standard,
    /// Standard, then the document rules: merge by section and title, contradictions between
    /// reviewers as one combined manual finding, document order.
    Document,
}

/// The flow's `exhaustive` block: what rounds run and when they stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exhaustive {
    /// Lane personas, one per round in order (cycled when there are more rounds than lanes).
    pub personas: Vec<String>,
    /// Mandate of every round task; the batch's directories are appended.
    pub mandate: String,
    /// Most files in one task.
    #[serde(default = "default_files")]
    pub max_files_per_task: usize,
    /// Most estimated tokens of file content in one task, so every body fits the prompt (a
    /// single file over it gets a task of its own).
    #[serde(default = "default_tokens")]
    pub max_tokens_per_task: u32,
    /// Another round runs while a round's new findings are at least this many (seed: 2).
    #[serde(default = "default_threshold")]
    pub threshold: usize,
    /// The most rounds, the first included.
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
    /// Who names the files of the next round: `hot` (the files of the tasks that found
    /// something new) or `model` (a planner-tier call; the hot rule decides when it fails).
    #[serde(default)]
    pub select: Select,
    /// Most files a model-guided selection may name for one round.
    #[serde(default = "default_select_files")]
    pub select_max_files: usize,
    /// The selector's question (absent: [`DEFAULT_SELECT_INSTRUCTIONS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_instructions: Option<String>,
}

/// How the files of the next round are chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    /// The files of the tasks that reported something new (deterministic).
    #[default]
    Hot,
    /// A short model call names them; the hot rule is the fallback.
    Model,
}

/// What the selector is asked when the flow does not say.
pub const DEFAULT_SELECT_INSTRUCTIONS: &str = "You steer an exhaustive review that reads a body \
of work in rounds. From the new findings of the round that just ended and the summary of the \
directories, name the files most worth a second, deeper reading next round: files the findings \
point into, and files whose role (callers, shared helpers, configuration) makes a related defect \
likely. Name only paths from the directory summary, exactly as written.";

fn default_files() -> usize {
    40
}

fn default_tokens() -> u32 {
    6000
}

fn default_threshold() -> usize {
    2
}

fn default_rounds() -> u32 {
    3
}

fn default_select_files() -> usize {
    40
}
