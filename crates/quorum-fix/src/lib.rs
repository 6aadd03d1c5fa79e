//! quorum-fix: what the fix loop does outside the pure machine.
//!
//! `quorum_core::fixing::fix_loop::FixLoop` decides; this crate carries its commands out on one
//! machine: a private [`worktree::Worktree`] materialized from the review's snapshot, a fix
//! agent per attempt whose only write tools are confined to it ([`tools`]), and the
//! independent oracles ([`oracles`]) — the project's tests under a network-less
//! [`sandbox`], the analyzers re-run on the changed files, and a blind verifier that sees the
//! diff but not the fixer's words. [`driver::run`] ties them together, recording every fact
//! in a [`journal::Journal`] before acting on it, so a killed run resumes where it stopped.
//!
//! `quorum build` runs the build loop (`quorum_core::fixing::build_loop::BuildLoop`) on the
//! same pieces: [`build::run_build`] asks a fresh [`builder`] per increment and gates it with
//! the tests and the [`conformance_judge`].
//!
//! Architecture invariant: nothing here writes outside the worktree and the directory the
//! caller names for it. The target itself is only ever read (through its `ContextPack`); the
//! caller decides what to do with kept fixes (a branch, a patch, a patched copy).

pub mod agent;
pub mod build;
pub mod builder;
pub mod conformance_judge;
pub mod driver;
pub mod error;
pub mod job;
pub mod journal;
pub mod judge;
mod ledger;
pub mod merge;
pub mod oracles;
pub mod pace;
pub mod patch;
pub mod placement;
pub mod remote;
pub mod sandbox;
pub mod tools;
pub mod worktree;

pub use build::{run_build, BuildFact, BuildJob, BuildRun, KeptIncrement};
pub use driver::{run, FixJob, FixRun, KeptFix, ModelRoute};
pub use error::FixError;
