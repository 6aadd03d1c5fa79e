//! quorum-git: reads a change from a git repository for a change review (`--diff`) — the
//! head tree as a [`ContextPack`] and what differs from the base tree as a [`ChangeSet`] —
//! from git objects through gitoxide, without a git binary and without the working directory.
//!
//! Invariants:
//! - Nothing here reads the working tree: the pack is the head *commit's* tree, so uncommitted
//!   edits, untracked files and a dirty checkout cannot change what is reviewed.
//! - The pack obeys the same exclusion rules as a directory snapshot ([`TreeRules`]): secrets,
//!   ignored paths (the tree's own `.gitignore`/`.ignore` files), `exclude` globs, binaries and
//!   files over the size limit never enter it, and `.quorum.toml` is never reviewed content.
//! - A file only appears in the change set when it is reviewable at its side of the change
//!   (in the pack, or — deleted — admissible by the same rules at the base), so no hunk can carry
//!   content the pack would have refused.
//! - A rename is the same blob at both paths, or an added and a deleted file at least half of
//!   whose lines are the same ([`RENAME_SIMILARITY`], git's default); then only the edited
//!   lines of the moved file count as changed.
//! - The only writes are `quorum fix`'s: new objects and one new branch ([`FixCommit`]s on
//!   `refs/heads/quorum/fix-…`); never the index, HEAD or the working tree.

mod branch;
mod repo;

pub use branch::FixCommit;
pub use repo::{GitError, Range, Repo, RENAME_SIMILARITY};
