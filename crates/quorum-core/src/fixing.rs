//! The fix and build loops as data and pure functions: which findings to fix, what an edit may touch,
//! the loops' keep-or-discard decisions, the build history, and the reports.
//!
//! `quorum fix` turns confirmed findings into verified changes. Everything here is pure; the
//! worktree, the sandboxed test command and the model calls live in `quorum-fix`.

pub mod build_history;
pub mod build_loop;
pub mod build_report;
pub mod cycles;
pub mod edit;
pub mod fix_loop;
pub mod fix_report;
pub mod select;
