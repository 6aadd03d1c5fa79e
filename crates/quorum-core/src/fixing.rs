//! The fix loop as data and pure functions: which findings to fix, what an edit may touch,
//! the loop's keep-or-discard decisions, and the fix report.
//!
//! `quorum fix` turns confirmed findings into verified changes. Everything here is pure; the
//! worktree, the sandboxed test command and the model calls live in `quorum-fix`.

pub mod edit;
pub mod fix_loop;
pub mod fix_report;
pub mod select;
