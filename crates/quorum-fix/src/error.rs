//! What can stop a fix or build run before the loop decides anything.

/// A fix run that could not be carried out. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FixError {
    #[error("cannot prepare the worktree in {dir}: {reason}")]
    Worktree { dir: String, reason: String },
    #[error("cannot record the run's facts in {path}: {reason}")]
    Journal { path: String, reason: String },
    #[error("cannot run the test command: {0}")]
    TestCommand(String),
    #[error("the conformance judge could not rule on any criterion of the base ({0}); check the judge's model with `quorum models list`, or pass --judge-model")]
    Judge(String),
}
