//! A run: everything the review machine knows about one stage run or specialist task across
//! its attempts, and how it shows in report.json's `tasks`.

use crate::machine::job::AttemptStats;
use crate::report::TaskReport;
use crate::task::Task;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Pending,
    Running,
    Backoff,
    Completed,
    Failed,
    CircularFix,
}

impl TaskState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::CircularFix
        )
    }

    fn as_str(self) -> &'static str {
        match self {
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::CircularFix => "circular_fix",
            // A run still pending when the review ended was never executed.
            TaskState::Pending | TaskState::Running | TaskState::Backoff => "skipped",
        }
    }
}

/// Everything known about one run (a stage or a specialist task) across its attempts.
#[derive(Debug, Clone)]
pub struct TaskRun {
    pub id: String,
    pub persona: String,
    pub task: Option<Task>,
    pub state: TaskState,
    pub attempts: u32,
    pub model: String,
    pub error_classes: Vec<String>,
    pub last_error: Option<String>,
    /// Counts over the attempts that were counted (calls, tokens, tool calls).
    pub stats: AttemptStats,
    pub findings: usize,
    pub invalid_findings: usize,
    /// When the run's first attempt started (the machine's clock, ms).
    pub started_ms: Option<u64>,
    pub duration_ms: u64,
    /// Scheduling notes worth showing (e.g. a planner-requested model that was replaced).
    pub notes: Vec<String>,
    /// The node that ran the latest attempt.
    pub node: String,
    /// Attempts handed back for placement reasons (node lost, refused, lease lapsed): they
    /// do not count against the task's attempt budget.
    pub handed_back: u32,
    /// Attempts recorded before this conductor resumed the review: numbering continues.
    pub resumed_attempts: u32,
    /// Attempts whose streamed answer was cut because it stopped saying anything.
    pub cuts: u32,
}

/// What the model client's error for an answer cut while streaming says (quorum-llm's
/// `LlmError::Degenerate`): how a failed attempt is known to have been a repetition cut.
pub const CUT_MARKER: &str = "was cut off:";

impl TaskRun {
    pub fn stage(name: &str) -> TaskRun {
        TaskRun {
            id: name.to_string(),
            persona: name.to_string(),
            task: None,
            state: TaskState::Pending,
            attempts: 0,
            model: String::new(),
            error_classes: Vec::new(),
            last_error: None,
            stats: AttemptStats::default(),
            findings: 0,
            invalid_findings: 0,
            started_ms: None,
            duration_ms: 0,
            notes: Vec::new(),
            node: String::new(),
            handed_back: 0,
            resumed_attempts: 0,
            cuts: 0,
        }
    }

    pub fn specialist(task: Task) -> TaskRun {
        let mut r = TaskRun::stage(&task.id);
        r.persona = task.persona.clone();
        r.task = Some(task);
        r
    }

    pub fn complete(&mut self, model: &str, stats: &AttemptStats) {
        self.state = TaskState::Completed;
        self.model = model.to_string();
        self.stats.add_counts(stats);
    }

    /// Time since the run's first attempt started, at `now_ms`.
    pub fn elapsed(&self, now_ms: u64) -> u64 {
        self.started_ms
            .map(|s| now_ms.saturating_sub(s))
            .unwrap_or(0)
    }

    pub fn to_report(&self, default_node: &str) -> TaskReport {
        let node = if self.node.is_empty() {
            default_node
        } else {
            self.node.as_str()
        };
        TaskReport {
            id: self.id.clone(),
            persona: self.persona.clone(),
            status: self.state.as_str().to_string(),
            // Attempts handed back (node lost, refused, lease lapsed) were not the task's.
            attempts: self.attempts.saturating_sub(self.handed_back),
            model: self.model.clone(),
            node: node.to_string(),
            tokens_in: self.stats.tokens_in,
            tokens_out: self.stats.tokens_out,
            duration_ms: self.duration_ms,
            error_class: if self.state == TaskState::Completed {
                None
            } else if self.state == TaskState::CircularFix {
                Some("circular_fix".into())
            } else {
                self.error_classes.last().cloned()
            },
            error: if self.state == TaskState::Completed {
                None
            } else {
                self.last_error.clone()
            },
            recovery: self.stats.recovery.clone(),
            tool_calls: self.stats.tool_calls,
            text_tool_calls: self.stats.text_tool_calls,
            findings: self.findings,
            notes: self.notes.clone(),
            files: self
                .task
                .as_ref()
                .map(|t| t.files.iter().take(SHOWN_FILES).cloned().collect())
                .unwrap_or_default(),
            files_total: self.task.as_ref().map_or(0, |t| t.files.len()),
            files_digest: self
                .task
                .as_ref()
                .filter(|t| t.files.len() > SHOWN_FILES)
                .map(|t| files_digest(&t.files)),
            mandate: self
                .task
                .as_ref()
                .map(|t| t.mandate.clone())
                .unwrap_or_default(),
            ended: self.ended(),
            reused_from: self.stats.reused_from.clone(),
            cache: self.stats.cache.clone(),
        }
    }

    /// Why the run ended, in words a report reader reads.
    pub fn ended(&self) -> String {
        let charged = self.attempts.saturating_sub(self.handed_back);
        let cut_last = self
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains(CUT_MARKER));
        match self.state {
            TaskState::Completed => {
                let mut ended = if charged > 1 {
                    format!("answered on attempt {charged}")
                } else {
                    "answered".to_string()
                };
                match self.cuts {
                    0 => {}
                    1 => ended.push_str(" after a repetition cut"),
                    n => ended.push_str(&format!(" after {n} repetition cuts")),
                }
                if self.stats.bound_hits > 0 {
                    ended.push_str("; the output bound cut a response");
                }
                ended
            }
            TaskState::CircularFix if self.cuts > 1 => {
                format!("circular fix: repetition cut {} times", self.cuts)
            }
            TaskState::CircularFix => "circular fix".to_string(),
            TaskState::Failed => {
                let class = self
                    .error_classes
                    .last()
                    .map(String::as_str)
                    .unwrap_or("error");
                if cut_last {
                    format!("failed: {class} (repetition cut)")
                } else {
                    format!("failed: {class}")
                }
            }
            TaskState::Pending | TaskState::Running | TaskState::Backoff => "not run".to_string(),
        }
    }
}

/// A report lists at most this many of a task's files; past it, the count and a digest.
const SHOWN_FILES: usize = 20;

/// blake3 of a task's file list (newline-joined, in its order), hex, first 16 characters.
fn files_digest(files: &[String]) -> String {
    let mut h = blake3::Hasher::new();
    for f in files {
        h.update(f.as_bytes());
        h.update(b"\n");
    }
    h.finalize().to_hex()[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(files: usize) -> Task {
        Task {
            id: "t1".into(),
            persona: "security-auditor".into(),
            files: (0..files).map(|i| format!("src/f{i}.rs")).collect(),
            mandate: "check the session handling".into(),
            tools: Vec::new(),
            verification: String::new(),
            model: None,
            dimension: None,
            origin: None,
            probe: None,
            pass: None,
        }
    }

    #[test]
    fn a_report_says_why_each_run_ended() {
        let mut run = TaskRun::specialist(task(2));
        assert_eq!(run.ended(), "not run");
        run.attempts = 1;
        run.complete("m", &AttemptStats::default());
        assert_eq!(run.ended(), "answered");
        run.attempts = 3;
        run.handed_back = 1;
        assert_eq!(run.ended(), "answered on attempt 2");
        run.stats.bound_hits = 1;
        assert_eq!(
            run.ended(),
            "answered on attempt 2; the output bound cut a response"
        );
        run.cuts = 1;
        assert_eq!(
            run.ended(),
            "answered on attempt 2 after a repetition cut; the output bound cut a response"
        );
        run.state = TaskState::Failed;
        run.error_classes = vec!["timeout".into(), "malformed_output".into()];
        run.last_error = Some("could not parse".into());
        assert_eq!(run.ended(), "failed: malformed_output");
        run.last_error = Some(format!("the answer from http://h {CUT_MARKER} it looped"));
        assert_eq!(run.ended(), "failed: malformed_output (repetition cut)");
        run.state = TaskState::CircularFix;
        assert_eq!(run.ended(), "circular fix");
        run.cuts = 2;
        assert_eq!(run.ended(), "circular fix: repetition cut 2 times");
    }

    #[test]
    fn a_task_report_carries_its_files_and_mandate() {
        let small = TaskRun::specialist(task(3)).to_report("node");
        assert_eq!(small.files, vec!["src/f0.rs", "src/f1.rs", "src/f2.rs"]);
        assert_eq!(small.files_total, 3);
        assert_eq!(small.files_digest, None);
        assert_eq!(small.mandate, "check the session handling");
        assert_eq!(small.ended, "not run");

        // A large task: the first files, the count and a digest naming the whole list.
        let large = TaskRun::specialist(task(45)).to_report("node");
        assert_eq!(large.files.len(), SHOWN_FILES);
        assert_eq!(large.files_total, 45);
        let digest = large
            .files_digest
            .clone()
            .expect("a large task has a digest");
        assert_eq!(digest.len(), 16);
        let other = TaskRun::specialist(task(46)).to_report("node");
        assert_ne!(other.files_digest, Some(digest));

        // A stage has no files and no mandate; they stay out of report.json.
        let scout = TaskRun::stage("scout").to_report("node");
        let json = serde_json::to_value(&scout).unwrap();
        for absent in ["files", "files_total", "files_digest", "mandate"] {
            assert!(json.get(absent).is_none(), "{absent} in {json}");
        }
        assert_eq!(json["ended"], "not run");
    }
}
