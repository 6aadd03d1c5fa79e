//! ContextPack: the immutable snapshot of a review target that every agent reads instead of the
//! filesystem.
//!
//! Architecture invariant: after [`ContextPack::snapshot`] returns, nothing in quorum reads the
//! target directory again. Tools resolve paths against the pack's manifest, so a path outside the
//! root, a symlink escape, an excluded secret or a file added later simply does not exist.
//!
//! What a snapshot admits:
//! - every regular, UTF-8 text file under the root up to `max_file_bytes`;
//! - never the contents of [`ALWAYS_EXCLUDED_DIRS`] (VCS metadata, build output, dependency
//!   caches, editor state, quorum's own output), nor `opts.exclude` globs (gitignore syntax);
//! - `.gitignore` / `.ignore` rules when `respect_gitignore` (also outside a git checkout);
//!   ignored files are left out silently;
//! - never a secret-looking file when `exclude_secrets` (see [`is_secret_file_name`]);
//! - a symlinked file only when its canonical target stays inside the canonical root and is
//!   itself a file the walk admits as a path (so `.gitignore`, `pack.exclude` and the
//!   always-excluded directories apply to what a link names); symlinked directories are not
//!   descended into (their targets inside the root are walked anyway);
//! - files are read through handles opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so a fifo never
//!   blocks), and admitted only when the handle is a regular file, the same inode the walk saw,
//!   and within the size limit: a path swapped between the walk and the read is refused.
//!
//! Everything left out for a reason other than an ignore rule is listed in `skipped`;
//! [`ContextPack::survey`] also names what ignore rules, exclude globs and always-excluded
//! directories left out (for `quorum pack`).
//!
//! Each file gets a language (by file name, then extension, then shebang) and a kind, decided by
//! this rule: build manifests, lockfiles, dotfile configuration, Dockerfiles and Makefiles are
//! [`FileKind::Config`] whatever their syntax; otherwise programming languages (including SQL,
//! HTML/CSS, Terraform and Protobuf) are `Code`; yaml/toml/json/xml/ini and similar are `Config`;
//! prose formats (markdown, reStructuredText, plain text, LaTeX, AsciiDoc) and LICENSE-like files
//! are `Doc`; tabular or record data (csv, tsv, jsonl, logs) and anything unrecognised are `Data`.
//!
//! The rooms: the snapshot as data and its queries (`snapshot`), taking one from a directory
//! (`walk`), what is admitted (`rules`, also for a git tree's listing: [`TreeRules`]), language
//! and kind (`classify`), the git checkout read without git (`git`), paths inside a pack
//! (`paths`), what `quorum pack` prints (`survey`), the planner's view of a large pack
//! ([`atlas`]) and a file's text on the heap or in a spill (`text`). This module only declares
//! them and re-exports their items, so each has one path (`pack::ContextPack`).

pub mod atlas;
mod classify;
mod git;
mod paths;
mod rules;
mod snapshot;
mod survey;
#[cfg(test)]
pub(crate) mod testing;
mod text;
mod walk;

pub use classify::FileKind;
pub use git::{git_head_sha, git_work_tree_prefix};
pub(crate) use rules::glob_matcher;
pub use rules::{
    is_secret_file_name, TreeDecision, TreeRules, ALWAYS_EXCLUDED_DIRS, REPO_CONFIG_FILE,
};
pub use snapshot::{ContextPack, GrepHit, PackFacts, PackFile, PackOptions, Skipped};
pub use survey::{Exclusion, ExclusionReason, PackSurvey};
pub use text::{ResidentWindow, Text};
