//! The scheduling core's ways in and out: attempt ids and places, its tunables, the [`Input`]s it is fed, the
//! [`Command`]s it returns, and what it reports of each task.

/// Unique per review and epoch: `epoch << 40 | sequence`.
pub type AttemptId = u64;
/// The caller's handle for a task (the conductor uses its run index).
pub type TaskKey = usize;

/// Where an attempt runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Place {
    Local,
    Peer(String),
}

impl Place {
    pub fn node(&self) -> Option<&str> {
        match self {
            Place::Local => None,
            Place::Peer(n) => Some(n),
        }
    }
}

/// Tunables, all from the flow and the cluster's timings.
#[derive(Debug, Clone)]
pub struct SchedulerParams {
    /// Attempts per specialist task, first try included.
    pub task_attempts: u32,
    /// Attempts per stage run (scout, planner, verifier, synthesizer).
    pub stage_attempts: u32,
    /// The same output-error class this many times in a row stops the task (circular fix).
    pub circular_fix_repeats: u32,
    /// Specialist attempts this node runs at once.
    pub local_capacity: usize,
    /// A remote attempt with no result and no renewal for this long is fenced and re-placed.
    pub lease_ms: u64,
    /// However often renewed, a remote attempt older than this (plus one lease) is fenced.
    pub attempt_ms: u64,
    /// A peer that could not be reached, or refused, is left out of placement this long.
    pub suspect_ms: u64,
    /// A peer that let a lease lapse is left out this long (unless it delivers first).
    pub lapsed_avoid_ms: u64,
    /// Hand-backs beyond this count as failures, so a cluster that keeps losing work still ends.
    pub max_handbacks: u32,
    pub backoff_base_ms: u64,
    pub backoff_cap_ms: u64,
}

impl Default for SchedulerParams {
    fn default() -> Self {
        SchedulerParams {
            task_attempts: 3,
            stage_attempts: 3,
            circular_fix_repeats: 2,
            local_capacity: 4,
            lease_ms: 10_000,
            attempt_ms: 3_000_000,
            suspect_ms: 3_000,
            lapsed_avoid_ms: 60_000,
            max_handbacks: 16,
            backoff_base_ms: 250,
            backoff_cap_ms: 10_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Pending,
    Running,
    Backoff,
    Completed,
    Failed,
    CircularFix,
    /// The review stopped (budget, cancel) before the task ever ran.
    Skipped,
}

impl TaskStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed
                | TaskStatus::Failed
                | TaskStatus::CircularFix
                | TaskStatus::Skipped
        )
    }
}

/// What the scheduler knows of one task.
#[derive(Debug, Clone)]
pub struct TaskView {
    pub status: TaskStatus,
    /// Attempts started, hand-backs included.
    pub started: u32,
    /// Attempts handed back for placement reasons.
    pub handed_back: u32,
    pub error_classes: Vec<String>,
    pub last_error: Option<String>,
    /// May run on a peer.
    pub placeable: bool,
    /// A stage run (scout, planner, synthesizer): its own attempt budget.
    pub stage: bool,
}

impl TaskView {
    /// Attempts charged to the task.
    pub fn charged(&self) -> u32 {
        self.started.saturating_sub(self.handed_back)
    }
}

/// How an attempt ended, as its worker says.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptResult {
    Success,
    Failure {
        class: String,
        message: String,
        retryable: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A task to run (a planned specialist task, or a stage run).
    AddTask {
        key: TaskKey,
        stage: bool,
        placeable: bool,
    },
    /// Where `key` should run when one of these places has room (a verification batch prefers
    /// nodes serving a model family the finders did not use). A preference, never a
    /// requirement: with every preferred place full the task goes wherever has room, so a
    /// preference never costs throughput. Sent before the task's `AddTask`; an empty list
    /// clears it.
    Prefer { key: TaskKey, places: Vec<Place> },
    /// A peer is up (joined, rejoined, or its advert changed).
    PeerUp { node: String, capacity: usize },
    /// A peer is shutting down: it finishes what it runs and is never chosen again.
    PeerDraining { node: String },
    /// Membership declared a peer lost: its attempts are fenced and handed back.
    PeerLost { node: String },
    /// An attempt's result, as delivered by `from`.
    Outcome {
        attempt: AttemptId,
        from: Place,
        result: AttemptResult,
    },
    /// The attempt never reached its peer.
    SendFailed { attempt: AttemptId },
    /// The worker on `from` still works on `attempt`.
    Renew { attempt: AttemptId, from: String },
    /// A task whose attempt `attempt`, started by an earlier conductor of the review, a live
    /// worker on `node` still runs and now answers to this one: the task is running there, under
    /// a fresh lease, and that attempt's result counts. Nothing is started. Instead of
    /// `AddTask` for that task (a known task, or a stopped scheduler, adds it as pending).
    Adopt {
        key: TaskKey,
        attempt: AttemptId,
        node: String,
    },
    /// A task's backoff is over.
    RetryDue { key: TaskKey },
    /// Time passed: leases are checked.
    Tick,
    /// Stop everything: no attempt starts after this; live ones are stopped; unfinished tasks
    /// fail with `class` (`budget_exhausted`, `cancelled`).
    StopAll { class: String, reason: String },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run attempt number `attempt_no` of `key` at `place`.
    Start {
        attempt: AttemptId,
        key: TaskKey,
        place: Place,
        attempt_no: u32,
    },
    /// Stop a live (or just fenced) attempt: kill the local worker, ask the peer to abort.
    Stop { attempt: AttemptId, place: Place },
    /// Deliver `RetryDue { key }` after `delay_ms`.
    RetryAfter { key: TaskKey, delay_ms: u64 },
    /// Count this attempt's result: the task is completed.
    Succeeded { attempt: AttemptId, key: TaskKey },
    /// The attempt failed and is charged to the task; `terminal` says the task will not be
    /// tried again (and with which status).
    Failed {
        attempt: AttemptId,
        key: TaskKey,
        class: String,
        message: String,
        terminal: Option<TaskStatus>,
    },
    /// The attempt is given back (placement failure); the task runs again, uncharged.
    HandedBack {
        attempt: AttemptId,
        key: TaskKey,
        class: String,
        message: String,
    },
    /// A result that is not counted: fenced, late, duplicated, or from the wrong node.
    Ignored {
        attempt: AttemptId,
        from: Place,
        why: &'static str,
    },
}
