//! A flow's tunables ([`FlowParams`], every one with a documented default and an upper bound),
//! the user's overrides of its verification ([`Overrides`]) and its coverage mode
//! ([`CoverageMode`]).

use crate::review::vote::Threshold;
use serde::{Deserialize, Serialize};

/// Tunables of a review. Every field has a documented default so a flow file may omit it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowParams {
    /// Specialist tasks running at once.
    pub max_concurrent: usize,
    /// Findings below this confidence become residual concerns unless corroborated.
    pub confidence_gate: f64,
    /// Bounds on the planner's task count; extra tasks are cut, too few is accepted if >= 1.
    pub min_tasks: usize,
    pub max_tasks: usize,
    /// Tool-loop iterations per specialist attempt.
    pub max_iterations: u32,
    /// Output-token bound of every model call.
    pub max_output_tokens: u32,
    /// Context window assumed for prompt budgeting (tokens). A model whose server states (or,
    /// by refusing a request, shows) a smaller window is budgeted to that one instead.
    pub context_tokens: u32,
    /// Tool calls executed per model turn; further calls of the same turn are answered
    /// "not run", so one greedy turn cannot flood the conversation.
    pub max_tool_calls_per_turn: u32,
    /// Longest tool result fed back to the model (tokens), cut at a line boundary with a
    /// visible notice.
    pub max_tool_result_tokens: u32,
    /// The share of a specialist's input window its persona's guidance may take; past it the
    /// guidance is shortened by whole sections (heuristic groups, then examples) and says so,
    /// so a small window still shows the material under review.
    pub persona_share: f64,
    /// Extra planner calls when the first plan yields zero valid tasks.
    pub planner_retries: u32,
    /// Attempts per specialist task (first try included).
    pub task_attempts: u32,
    /// The same error class this many times in a row means the retries (which carry the
    /// previous error) are not fixing anything: the task stops as `circular_fix` before its
    /// attempts run out. At least 2 and at most `task_attempts` (when that is above 1).
    pub circular_fix_repeats: u32,
    /// Grounded findings the verifiers check with a model; the rest are reported UNVERIFIED.
    /// It counts findings, not calls: with `verifiers: 3` each checked finding costs 3 calls.
    pub max_verifications: usize,
    /// Independent verifier calls per grounded finding (cross-validation), each blind to the
    /// finder and to the other verifiers; `quorum review --verifiers N` overrides it.
    pub verifiers: usize,
    /// How the verifiers' votes combine (see [`crate::review::vote`]); `--verify-threshold` overrides it.
    pub verify_threshold: crate::review::vote::Threshold,
    /// Grounded findings per verification attempt: batches are placed like specialist tasks,
    /// so verification spreads over the cluster.
    pub verify_batch: usize,
    /// Criteria per judge call of a conformance stage (each call sees the target once).
    pub conformance_batch: usize,
    /// Prior findings per adjudicator call of a finish review.
    pub adjudication_batch: usize,
    /// The per-task budget of a planned task: most files, and most estimated tokens of their
    /// bodies. A task over either (a directory named whole, a long list) is sharded by module
    /// into tasks of the same persona and mandate (`coverage::shard_tasks`), within
    /// `max_tasks`. 0 tokens = no token bound.
    pub max_task_files: usize,
    pub max_task_tokens: u32,
    /// Panel flows: the axes the judges score, in report order (each one of
    /// [`crate::catalog::JUDGE_AXES`]).
    pub panel_axes: Vec<String>,
    /// Panel flows: judges asked per axis (1..=3), the catalog's first by name; an axis whose
    /// catalog has fewer asks those it has.
    pub panel_judges: usize,
    /// Per-call model timeout (seconds).
    pub call_timeout_secs: u64,
    /// Flow budget: total tokens (in + out) after which no new task starts and the review ends
    /// as partial with what it found. 0 = unlimited.
    pub max_tokens: u64,
    /// Flow budget: wall-clock seconds, same effect. 0 = unlimited.
    pub max_wall_secs: u64,
    /// The flow's coverage mode (`full` needs a persona: `full_coverage` or
    /// `directory_coverage`); absent = the configured `coverage`, else sampled.
    /// `quorum review --coverage` overrides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageMode>,
    /// Analyzer hits of harm `style` (formatting, import order, unused imports) are review
    /// candidates too: verified and reported like other leads. Off by default: they are then
    /// counted in the report's `lint` line and kept out of the specialists' prompts.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lint_findings: bool,
}

impl Default for FlowParams {
    fn default() -> Self {
        FlowParams {
            max_concurrent: 4,
            confidence_gate: 0.5,
            min_tasks: 5,
            max_tasks: 20,
            max_iterations: 8,
            max_output_tokens: 2048,
            context_tokens: 8192,
            max_tool_calls_per_turn: 4,
            max_tool_result_tokens: 2000,
            persona_share: 0.5,
            planner_retries: 1,
            task_attempts: 3,
            circular_fix_repeats: 2,
            max_verifications: 200,
            verifiers: 1,
            verify_threshold: crate::review::vote::Threshold::Any,
            verify_batch: 8,
            conformance_batch: 5,
            adjudication_batch: 5,
            max_task_files: 60,
            max_task_tokens: 24_000,
            panel_axes: crate::catalog::JUDGE_AXES
                .iter()
                .map(|a| a.to_string())
                .collect(),
            panel_judges: crate::judging::panel::MAX_JUDGES_PER_AXIS,
            call_timeout_secs: 300,
            max_tokens: 0,
            max_wall_secs: 0,
            coverage: None,
            lint_findings: false,
        }
    }
}

/// The most verifier calls one finding may get: past a handful, more votes of the same few
/// models add cost, not independence.
pub const MAX_VERIFIERS: usize = 9;

/// The user's overrides of a flow's `verifiers` and `verify_threshold` (`quorum review
/// --verifiers N --verify-threshold T`, or a submitted review's options), checked; the error is
/// one line naming the flag and what it accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Overrides {
    pub verifiers: Option<usize>,
    pub verify_threshold: Option<Threshold>,
}

impl Overrides {
    pub fn parse(verifiers: Option<usize>, threshold: Option<&str>) -> Result<Overrides, String> {
        if let Some(n) = verifiers {
            if !(1..=MAX_VERIFIERS).contains(&n) {
                return Err(format!(
                    "--verifiers must be between 1 and {MAX_VERIFIERS} (got {n})"
                ));
            }
        }
        let verify_threshold = match threshold {
            None => None,
            Some(t) => Some(Threshold::parse(t).ok_or_else(|| {
                format!("--verify-threshold must be any, majority or unanimous (got {t:?})")
            })?),
        };
        Ok(Overrides {
            verifiers,
            verify_threshold,
        })
    }

    /// Apply to a flow's parameters (the flag wins over the flow file).
    pub fn apply(&self, p: &mut FlowParams) {
        if let Some(n) = self.verifiers {
            p.verifiers = n;
        }
        if let Some(t) = self.verify_threshold {
            p.verify_threshold = t;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.verifiers.is_none() && self.verify_threshold.is_none()
    }
}

/// How much of the pack a planned review reads (`--coverage`, config `coverage`, a flow's
/// `parameters.coverage`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CoverageMode {
    /// The planner's tasks only: the files it judged worth a specialist.
    #[default]
    Sampled,
    /// The planner's tasks, then directory-batched tasks for every file none of them covers.
    Full,
}

impl CoverageMode {
    pub fn parse(s: &str) -> Option<CoverageMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sampled" => Some(CoverageMode::Sampled),
            "full" => Some(CoverageMode::Full),
            _ => None,
        }
    }

    /// Parse a user's value; the error names `what` (the flag or key) and the accepted values.
    pub fn parse_for(s: &str, what: &str) -> Result<CoverageMode, String> {
        CoverageMode::parse(s).ok_or_else(|| format!("{what} must be full or sampled (got {s:?})"))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CoverageMode::Sampled => "sampled",
            CoverageMode::Full => "full",
        }
    }
}

/// The largest value each numeric parameter may take, read as u64.
/// The largest value each numeric parameter may take, read as u64.
pub(crate) type ParamBound = (&'static str, fn(&FlowParams) -> u64, u64);

pub(crate) const PARAM_BOUNDS: &[ParamBound] = &[
    ("max_concurrent", |p| p.max_concurrent as u64, 1024),
    ("min_tasks", |p| p.min_tasks as u64, 1000),
    ("max_tasks", |p| p.max_tasks as u64, 1000),
    ("max_iterations", |p| p.max_iterations.into(), 100),
    ("max_output_tokens", |p| p.max_output_tokens.into(), 1 << 20),
    ("context_tokens", |p| p.context_tokens.into(), 1 << 24),
    (
        "max_tool_calls_per_turn",
        |p| p.max_tool_calls_per_turn.into(),
        256,
    ),
    (
        "max_tool_result_tokens",
        |p| p.max_tool_result_tokens.into(),
        1 << 20,
    ),
    ("planner_retries", |p| p.planner_retries.into(), 100),
    ("task_attempts", |p| p.task_attempts.into(), 100),
    (
        "circular_fix_repeats",
        |p| p.circular_fix_repeats.into(),
        100,
    ),
    ("verifiers", |p| p.verifiers as u64, MAX_VERIFIERS as u64),
    ("max_verifications", |p| p.max_verifications as u64, 100_000),
    ("conformance_batch", |p| p.conformance_batch as u64, 100),
    ("adjudication_batch", |p| p.adjudication_batch as u64, 100),
    ("max_task_files", |p| p.max_task_files as u64, 10_000),
    ("max_task_tokens", |p| p.max_task_tokens.into(), 1 << 24),
    ("call_timeout_secs", |p| p.call_timeout_secs, 86_400),
    ("max_wall_secs", |p| p.max_wall_secs, 30 * 86_400),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_check_their_range_and_names() {
        let o = Overrides::parse(Some(3), Some("majority")).unwrap();
        let mut p = FlowParams::default();
        o.apply(&mut p);
        assert_eq!((p.verifiers, p.verify_threshold), (3, Threshold::Majority));
        let e = Overrides::parse(Some(0), None).unwrap_err();
        assert!(e.starts_with("--verifiers must be between 1 and"), "{e}");
        assert!(Overrides::parse(Some(10), None).is_err());
        let e = Overrides::parse(None, Some("most")).unwrap_err();
        assert_eq!(
            e,
            "--verify-threshold must be any, majority or unanimous (got \"most\")"
        );
        assert!(Overrides::parse(None, None).unwrap().is_empty());
    }
}
