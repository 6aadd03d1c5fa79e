//! The repository opened at a review target: resolving a change, reading its trees and blobs
//! as a pack and a change set.

use gix::bstr::ByteSlice;
use quorum_core::pack::{ContextPack, PackOptions, Skipped, TreeDecision, TreeRules};
use quorum_core::scope::{ChangeKind, ChangeSet, FileChange};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Hunks of one file are stored up to this many characters (with a visible cut marker); prompts
/// cut them further to their budget.
const MAX_STORED_HUNK_CHARS: usize = 200_000;
/// Lines of context around each hunk, as `git diff` shows by default.
const CONTEXT_LINES: usize = 3;
/// A line diff that takes longer than this settles for an approximate (still correct) diff.
const DIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a change could not be read. Every message is one line saying what to do.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path} is not inside a git repository (--diff needs one): {reason}")]
    NotARepository { path: PathBuf, reason: String },
    #[error("{path} is in a bare repository; --diff needs a checkout")]
    Bare { path: PathBuf },
    #[error("invalid --diff {spec:?}: {reason}")]
    BadRange { spec: String, reason: String },
    #[error("revision {rev:?} does not resolve to a commit in {repo}: {reason}")]
    BadRevision {
        rev: String,
        repo: PathBuf,
        reason: String,
    },
    #[error("cannot read {what} from the repository: {reason}")]
    Read { what: String, reason: String },
    #[error("cannot write {what} into the repository: {reason}")]
    Write { what: String, reason: String },
    #[error("cannot read the target: {0}")]
    Target(String),
    #[error(transparent)]
    Pack(#[from] quorum_core::error::PackError),
}

/// A repository opened at a review target, which may be a subdirectory of its checkout.
pub struct Repo {
    pub(crate) repo: gix::Repository,
    /// The target, canonical.
    target: PathBuf,
    /// The target's directory inside the repository, '/'-separated ("" = the repository root).
    pub(crate) prefix: String,
}

/// Base and head of a change, resolved to commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// As the user wrote it.
    pub spec: String,
    pub base: gix::ObjectId,
    pub head: gix::ObjectId,
}

/// What one traversal of a commit's tree yields (see [`Repo::listing`]).
#[derive(Default)]
struct Listing {
    entries: BTreeMap<String, Entry>,
    skipped: Vec<Skipped>,
    ignore_files: Vec<(String, String)>,
}

/// One non-tree entry of a tree, by path relative to the target.
#[derive(Debug, Clone, Copy)]
struct Entry {
    oid: gix::ObjectId,
    mode: gix::object::tree::EntryMode,
}

impl Repo {
    /// Open the repository that contains `target` (a directory).
    pub fn discover(target: &Path) -> Result<Repo, GitError> {
        let canon = std::fs::canonicalize(target)
            .map_err(|e| GitError::Target(format!("{}: {e}", target.display())))?;
        let repo = gix::discover(&canon).map_err(|e| GitError::NotARepository {
            path: canon.clone(),
            reason: one_line(&e),
        })?;
        let workdir = repo
            .workdir()
            .ok_or_else(|| GitError::Bare {
                path: canon.clone(),
            })?
            .to_path_buf();
        let workdir = std::fs::canonicalize(&workdir).unwrap_or(workdir);
        let rel = canon
            .strip_prefix(&workdir)
            .map_err(|_| GitError::NotARepository {
                path: canon.clone(),
                reason: format!("it is outside the checkout at {}", workdir.display()),
            })?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c.as_os_str().to_str() {
                Some(s) => parts.push(s.to_string()),
                None => {
                    return Err(GitError::Target(format!(
                        "{}: path is not valid UTF-8",
                        canon.display()
                    )))
                }
            }
        }
        Ok(Repo {
            repo,
            target: canon,
            prefix: parts.join("/"),
        })
    }

    /// The repository's working directory (for messages).
    pub fn path(&self) -> &Path {
        self.repo.workdir().unwrap_or_else(|| self.repo.git_dir())
    }

    /// Resolve `BASE..HEAD`, or `BASE` alone meaning `BASE..HEAD`. Each side is anything gix's
    /// rev-parse resolves to a commit: a sha (or a unique prefix), a branch or tag, `HEAD~1`.
    pub fn resolve(&self, spec: &str) -> Result<Range, GitError> {
        let bad = |reason: &str| GitError::BadRange {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let s = spec.trim();
        if s.contains("...") {
            return Err(bad(
                "three-dot (merge-base) ranges are not supported; use BASE..HEAD",
            ));
        }
        let (base, head) = match s.split_once("..") {
            Some((b, h)) => (
                b.trim(),
                if h.trim().is_empty() {
                    "HEAD"
                } else {
                    h.trim()
                },
            ),
            None => (s, "HEAD"),
        };
        if base.is_empty() {
            return Err(bad("the base revision is empty; use BASE..HEAD or BASE"));
        }
        Ok(Range {
            spec: s.to_string(),
            base: self.commit_of(base)?,
            head: self.commit_of(head)?,
        })
    }

    fn commit_of(&self, rev: &str) -> Result<gix::ObjectId, GitError> {
        let bad = |reason: String| GitError::BadRevision {
            rev: rev.to_string(),
            repo: self.path().to_path_buf(),
            reason,
        };
        let id = self
            .repo
            .rev_parse_single(rev)
            .map_err(|e| bad(one_line(&e)))?;
        let commit = id
            .object()
            .map_err(|e| bad(one_line(&e)))?
            .peel_to_commit()
            .map_err(|e| bad(one_line(&e)))?;
        Ok(commit.id)
    }

    pub(crate) fn tree_of(&self, commit: gix::ObjectId) -> Result<gix::Tree<'_>, GitError> {
        let read = |reason: String| GitError::Read {
            what: format!("the tree of {}", short(&commit)),
            reason,
        };
        self.repo
            .find_commit(commit)
            .map_err(|e| read(one_line(&e)))?
            .tree()
            .map_err(|e| read(one_line(&e)))
    }

    /// One traversal of a commit's tree: its non-tree entries under the target (by
    /// target-relative path), the paths left out because their names are not UTF-8, and the
    /// `.gitignore` / `.ignore` files that apply to the target — those under it and those in
    /// the directories above it — as (repository-relative path, content).
    fn listing(&self, commit: gix::ObjectId) -> Result<Listing, GitError> {
        let records = self
            .tree_of(commit)?
            .traverse()
            .breadthfirst
            .files()
            .map_err(|e| GitError::Read {
                what: format!("the tree of {}", short(&commit)),
                reason: one_line(&e),
            })?;
        let mut out = Listing::default();
        for r in records {
            if r.mode.is_tree() {
                continue;
            }
            let Ok(full) = r.filepath.to_str() else {
                out.skipped.push(Skipped {
                    path: r.filepath.to_str_lossy().into_owned(),
                    reason: "file name is not valid utf-8".into(),
                });
                continue;
            };
            let (dir, name) = full.rsplit_once('/').unwrap_or(("", full));
            if r.mode.is_blob() && (name == ".gitignore" || name == ".ignore") {
                let applies = self.prefix.is_empty()
                    || dir.is_empty()
                    || under(dir, &self.prefix)
                    || dir == self.prefix
                    || under(&self.prefix, dir);
                if applies {
                    if let Ok(blob) = self.repo.find_blob(r.oid) {
                        out.ignore_files.push((
                            full.to_string(),
                            String::from_utf8_lossy(&blob.data).into_owned(),
                        ));
                    }
                }
            }
            let rel = if self.prefix.is_empty() {
                full
            } else {
                match full
                    .strip_prefix(self.prefix.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                {
                    Some(r) => r,
                    None => continue,
                }
            };
            out.entries.insert(
                rel.to_string(),
                Entry {
                    oid: r.oid,
                    mode: r.mode,
                },
            );
        }
        Ok(out)
    }

    /// The bytes of a target-relative file at a revision, when it exists there as a blob (for
    /// `.quorum.toml`, which is read from the head tree like everything else reviewed).
    pub fn read_at(&self, commit: gix::ObjectId, rel: &str) -> Result<Option<Vec<u8>>, GitError> {
        let full = if self.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.prefix)
        };
        let read = |reason: String| GitError::Read {
            what: format!("{rel} at {}", short(&commit)),
            reason,
        };
        let Some(entry) = self
            .tree_of(commit)?
            .lookup_entry_by_path(&full)
            .map_err(|e| read(one_line(&e)))?
        else {
            return Ok(None);
        };
        if !entry.mode().is_blob() {
            return Ok(None);
        }
        let blob = self
            .repo
            .find_blob(entry.oid().to_owned())
            .map_err(|e| read(one_line(&e)))?;
        Ok(Some(blob.data.clone()))
    }

    /// A blob's content if the rules admit it (`Err` = the skip reason).
    fn admitted_blob(&self, rules: &TreeRules, e: &Entry) -> Result<Arc<str>, String> {
        if e.mode.is_link() {
            return Err("symlink (not followed in a git tree)".into());
        }
        if e.mode.is_commit() {
            return Err("submodule (not reviewed)".into());
        }
        if let Ok(h) = self.repo.find_header(e.oid) {
            rules.admit_size(h.size())?;
        }
        let blob = self.repo.find_blob(e.oid).map_err(|err| one_line(&err))?;
        rules.admit_content(blob.data.clone())
    }

    /// The head tree as a pack, and the change from base to head over what the pack admits.
    pub fn read_change(
        &self,
        range: &Range,
        opts: &PackOptions,
    ) -> Result<(ContextPack, ChangeSet), GitError> {
        let Listing {
            entries: head,
            mut skipped,
            ignore_files,
        } = self.listing(range.head)?;
        let rules = TreeRules::new(opts, &self.prefix, &ignore_files)?;
        let mut files = Vec::new();
        let mut head_text: BTreeMap<&str, Arc<str>> = BTreeMap::new();
        // The same content budget as a directory snapshot, in path order.
        let mut budgeted: u64 = 0;
        for (path, e) in &head {
            match rules.decide(path) {
                TreeDecision::Ignored => {}
                TreeDecision::Skip(reason) => skipped.push(Skipped {
                    path: path.clone(),
                    reason,
                }),
                TreeDecision::Admit => match self.admitted_blob(&rules, e) {
                    Ok(text)
                        if opts.max_pack_bytes > 0
                            && budgeted.saturating_add(text.len() as u64) > opts.max_pack_bytes =>
                    {
                        skipped.push(Skipped {
                            path: path.clone(),
                            reason: format!(
                                "over the pack budget ({} bytes; raise pack.max_pack_bytes to include it)",
                                opts.max_pack_bytes
                            ),
                        });
                    }
                    Ok(text) => {
                        budgeted += text.len() as u64;
                        head_text.insert(path.as_str(), text.clone());
                        files.push((path.clone(), text));
                    }
                    Err(reason) => skipped.push(Skipped {
                        path: path.clone(),
                        reason,
                    }),
                },
            }
        }

        // The base side is judged by the base tree's own ignore files.
        let base_listing = self.listing(range.base)?;
        let base_rules = TreeRules::new(opts, &self.prefix, &base_listing.ignore_files)?;
        let base = base_listing.entries;
        let base_text = |path: &str, e: &Entry| -> Option<Arc<str>> {
            (base_rules.decide(path) == TreeDecision::Admit)
                .then(|| self.admitted_blob(&base_rules, e).ok())
                .flatten()
        };

        let mut changes = Vec::new();
        let mut added: Vec<&str> = Vec::new();
        for (path, new) in &head_text {
            match base.get(*path) {
                Some(old) if old.oid == head[*path].oid => {}
                Some(old) => {
                    let old_text = base_text(path, old).unwrap_or_else(|| Arc::from(""));
                    changes.push(file_change(
                        path,
                        None,
                        ChangeKind::Modified,
                        &old_text,
                        new,
                    ));
                }
                None => added.push(path),
            }
        }
        let mut deleted: BTreeMap<gix::ObjectId, Vec<(&str, Arc<str>)>> = BTreeMap::new();
        for (path, old) in &base {
            if head.contains_key(path) {
                continue;
            }
            if let Some(text) = base_text(path, old) {
                deleted
                    .entry(old.oid)
                    .or_default()
                    .push((path.as_str(), text));
            }
        }
        let mut unpaired: Vec<&str> = Vec::new();
        for path in added {
            let oid = head[path].oid;
            let renamed_from = deleted.get_mut(&oid).and_then(|v| {
                if v.is_empty() {
                    None
                } else {
                    Some(v.remove(0))
                }
            });
            match renamed_from {
                Some((from, text)) => changes.push(file_change(
                    path,
                    Some(from),
                    ChangeKind::Renamed,
                    &text,
                    &text,
                )),
                None => unpaired.push(path),
            }
        }
        // A file moved and edited: the added and deleted files left are paired by content
        // similarity, as git does, so only the edited lines count as changed.
        let gone: Vec<(&str, Arc<str>)> = deleted.into_values().flatten().collect();
        let new_sides: Vec<(&str, &str)> = unpaired
            .iter()
            .map(|p| (*p, head_text[*p].as_ref()))
            .collect();
        let old_sides: Vec<(&str, &str)> = gone.iter().map(|(p, t)| (*p, t.as_ref())).collect();
        let pairs = similar_renames(&new_sides, &old_sides);
        let mut taken_old = BTreeSet::new();
        for (i, path) in unpaired.iter().enumerate() {
            match pairs.get(&i) {
                Some(&j) => {
                    taken_old.insert(j);
                    let (from, old_text) = &gone[j];
                    changes.push(file_change(
                        path,
                        Some(from),
                        ChangeKind::Renamed,
                        old_text,
                        &head_text[*path],
                    ));
                }
                None => changes.push(file_change(
                    path,
                    None,
                    ChangeKind::Added,
                    "",
                    &head_text[*path],
                )),
            }
        }
        for (j, (path, text)) in gone.iter().enumerate() {
            if !taken_old.contains(&j) {
                changes.push(file_change(path, None, ChangeKind::Deleted, text, ""));
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        let names: BTreeSet<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        debug_assert_eq!(names.len(), changes.len());

        let pack = ContextPack::from_admitted(
            self.target.clone(),
            Some(range.head.to_string()),
            files,
            skipped,
        );
        Ok((
            pack,
            ChangeSet {
                spec: range.spec.clone(),
                base: range.base.to_string(),
                head: range.head.to_string(),
                files: changes,
            },
        ))
    }
}

/// How alike two files must be for an added and a deleted one to be a rename (git's default
/// `-M50%`), by the share of lines they have in common.
pub const RENAME_SIMILARITY: f32 = 0.5;
/// Pairs compared for renames at most (git's `diff.renameLimit` is in files; this bounds the
/// work the same way): past it, unmatched files stay added and deleted.
const MAX_RENAME_PAIRS: usize = 10_000;

/// Added (`new`) and deleted (`old`) files paired by line similarity at or above
/// [`RENAME_SIMILARITY`]: the most similar pair first (ties in path order), each file at most
/// once. Returns new index → old index. Files whose sizes differ by more than 2x cannot reach
/// 50% and are not compared.
fn similar_renames(new: &[(&str, &str)], old: &[(&str, &str)]) -> BTreeMap<usize, usize> {
    let mut pairs = BTreeMap::new();
    if new.is_empty() || old.is_empty() || new.len().saturating_mul(old.len()) > MAX_RENAME_PAIRS {
        return pairs;
    }
    let mut scored: Vec<(f32, usize, usize)> = Vec::new();
    for (i, (_, n)) in new.iter().enumerate() {
        for (j, (_, o)) in old.iter().enumerate() {
            let (a, b) = (n.len().max(1), o.len().max(1));
            if a > 2 * b || b > 2 * a {
                continue;
            }
            let ratio = similar::TextDiff::configure()
                .timeout(DIFF_TIMEOUT)
                .diff_lines(*o, *n)
                .ratio();
            if ratio >= RENAME_SIMILARITY {
                scored.push((ratio, i, j));
            }
        }
    }
    // Highest similarity first; equal scores in (new path, old path) order, so the pairing is
    // the same on every run.
    scored.sort_by(|x, y| {
        y.0.total_cmp(&x.0)
            .then_with(|| new[x.1].0.cmp(new[y.1].0))
            .then_with(|| old[x.2].0.cmp(old[y.2].0))
    });
    let mut used_old = BTreeSet::new();
    for (_, i, j) in scored {
        if !pairs.contains_key(&i) && !used_old.contains(&j) {
            pairs.insert(i, j);
            used_old.insert(j);
        }
    }
    pairs
}

/// One file's change: counts, touched head lines, and the unified diff.
fn file_change(
    path: &str,
    old_path: Option<&str>,
    kind: ChangeKind,
    old: &str,
    new: &str,
) -> FileChange {
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let new_lines = u32::try_from(new.lines().count()).unwrap_or(u32::MAX);
    let mut added = 0u32;
    let mut removed = 0u32;
    let mut touched: Vec<(u32, u32)> = Vec::new();
    let mut touch = |a: u32, b: u32| {
        let (a, b) = (a.max(1), b.min(new_lines));
        if a <= b {
            touched.push((a, b));
        }
    };
    for op in diff.ops() {
        let as_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        match *op {
            similar::DiffOp::Equal { .. } => {}
            similar::DiffOp::Insert {
                new_index, new_len, ..
            } => {
                added = added.saturating_add(as_u32(new_len));
                touch(as_u32(new_index) + 1, as_u32(new_index + new_len));
            }
            similar::DiffOp::Replace {
                old_len,
                new_index,
                new_len,
                ..
            } => {
                added = added.saturating_add(as_u32(new_len));
                removed = removed.saturating_add(as_u32(old_len));
                touch(as_u32(new_index) + 1, as_u32(new_index + new_len));
            }
            similar::DiffOp::Delete {
                old_len, new_index, ..
            } => {
                removed = removed.saturating_add(as_u32(old_len));
                // Nothing is left on the head side: the lines either side of the cut changed
                // meaning (a removed check leaves its neighbours unguarded).
                touch(as_u32(new_index), as_u32(new_index) + 1);
            }
        }
    }
    touched.sort_unstable();
    touched.dedup();
    let from = match kind {
        ChangeKind::Added => "/dev/null".to_string(),
        _ => format!("a/{}", old_path.unwrap_or(path)),
    };
    let to = match kind {
        ChangeKind::Deleted => "/dev/null".to_string(),
        _ => format!("b/{path}"),
    };
    let hunks = if kind == ChangeKind::Renamed && old == new {
        format!(
            "rename from {}\nrename to {path}\n",
            old_path.unwrap_or(path)
        )
    } else {
        diff.unified_diff()
            .context_radius(CONTEXT_LINES)
            .header(&from, &to)
            .to_string()
    };
    let hunks =
        quorum_core::weaver::truncate_at_boundary(&hunks, MAX_STORED_HUNK_CHARS).into_owned();
    FileChange {
        path: path.to_string(),
        kind,
        old_path: old_path.map(String::from),
        added,
        removed,
        touched,
        hunks,
    }
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

fn short(id: &gix::ObjectId) -> String {
    let s = id.to_string();
    s[..s.len().min(12)].to_string()
}

/// gix errors chain their causes; a user sees them on one line.
pub(crate) fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_change_counts_and_touches_head_lines() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nB\nc\nd\ne\nf\ng\nh\nnew\n";
        let c = file_change("x.txt", None, ChangeKind::Modified, old, new);
        assert_eq!((c.added, c.removed), (2, 1));
        assert_eq!(c.touched, vec![(2, 2), (9, 9)]);
        assert!(
            c.hunks.starts_with("--- a/x.txt\n+++ b/x.txt\n"),
            "{}",
            c.hunks
        );
        assert!(c.hunks.contains("-b\n+B\n"), "{}", c.hunks);
        assert!(c.hunks.contains("@@ "), "{}", c.hunks);

        let del = file_change("x.txt", None, ChangeKind::Modified, "a\nb\nc\n", "a\nc\n");
        assert_eq!((del.added, del.removed), (0, 1));
        assert_eq!(
            del.touched,
            vec![(1, 2)],
            "the lines either side of the cut"
        );

        let added = file_change("n.txt", None, ChangeKind::Added, "", "1\n2\n");
        assert_eq!(added.touched, vec![(1, 2)]);
        assert!(added.hunks.starts_with("--- /dev/null\n+++ b/n.txt\n"));

        let gone = file_change("g.txt", None, ChangeKind::Deleted, "1\n2\n", "");
        assert_eq!((gone.added, gone.removed), (0, 2));
        assert!(gone.touched.is_empty());
    }

    #[test]
    fn context_is_three_lines() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let c = file_change("f", None, ChangeKind::Modified, &old, &new);
        assert!(c.hunks.contains(" line 7\n"), "{}", c.hunks);
        assert!(!c.hunks.contains(" line 6\n"), "{}", c.hunks);
        assert!(c.hunks.contains(" line 13\n"), "{}", c.hunks);
        assert!(!c.hunks.contains(" line 14\n"), "{}", c.hunks);
    }
}
