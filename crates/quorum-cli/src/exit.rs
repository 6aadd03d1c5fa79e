//! Exit codes (DESIGN §6) and the error type that carries one to `main`.

use std::fmt;

/// 0 completed clean, 1 completed with findings at/above --fail-on, 2 usage/config/input error
/// (nothing was run), 3 the review ended partial or failed (or could not reach a backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    Clean = 0,
    Findings = 1,
    Usage = 2,
    Incomplete = 3,
}

/// An error that decides the process's exit code. Anything else that reaches `main` is a
/// usage/input error (2): runtime failures are turned into reports, not errors.
#[derive(Debug)]
pub struct Coded {
    pub code: ExitCode,
    pub message: String,
}

impl fmt::Display for Coded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Coded {}

pub fn incomplete(message: impl Into<String>) -> anyhow::Error {
    Coded {
        code: ExitCode::Incomplete,
        message: message.into(),
    }
    .into()
}

/// The one line a user sees for an error: the whole cause chain, without repeats.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}

/// Store errors are input errors (exit 2): a corrupt store is named, never silently reset. A
/// disk that refuses the store (full, read-only, failing) is said as such, with what to do.
pub fn store_err(e: quorum_store::StoreError) -> anyhow::Error {
    match (e.storage_fault(), e.path()) {
        (Some(fault), Some(path)) => anyhow::anyhow!(
            "the data dir at {} {}: {}",
            path.display(),
            fault.describe(),
            fault.remedy()
        ),
        _ => anyhow::anyhow!("{e}"),
    }
}
