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
}

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
        }
    }
}
