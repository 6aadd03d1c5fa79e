//! The git checkout a target sits in, read from the repository files without running git:
//! the HEAD commit (loose or packed refs, worktrees and submodules) and where the target sits
//! in the work tree.

use super::paths::rel_path;
use std::path::{Path, PathBuf};

/// The HEAD commit of the git checkout containing `start`, read from the repository files
/// without running git. None when `start` is not in a checkout or anything is unreadable.
pub fn git_head_sha(start: &Path) -> Option<String> {
    find_git_dir(start).as_deref().and_then(read_head_sha)
}

/// Where `start` sits inside the git work tree containing it: '/'-separated and relative to the
/// work tree's root ("" for the root itself), for reports that name files relative to the
/// repository. None when `start` is not in a checkout. The path is taken as given (canonicalize
/// it first for a symlinked checkout).
pub fn git_work_tree_prefix(start: &Path) -> Option<String> {
    let top = start
        .ancestors()
        .find(|dir| std::fs::metadata(dir.join(".git")).is_ok())?;
    rel_path(top, start)
}

/// The git directory of the checkout containing `start`: `.git` itself, or the directory a
/// `.git` file ("gitdir: …", worktrees and submodules) points to.
pub(crate) fn find_git_dir(start: &Path) -> Option<PathBuf> {
    for dir in start.ancestors() {
        let dotgit = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dotgit) else {
            continue;
        };
        if meta.is_dir() {
            return Some(dotgit);
        }
        let text = std::fs::read_to_string(&dotgit).ok()?;
        let target = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("gitdir:"))?
            .trim();
        let target = Path::new(target);
        return Some(if target.is_absolute() {
            target.to_path_buf()
        } else {
            dir.join(target)
        });
    }
    None
}

pub(crate) fn read_head_sha(git_dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    // Linked worktrees keep HEAD locally but branch refs in the common directory.
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .map(|c| {
            let p = Path::new(c.trim());
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                git_dir.join(p)
            }
        })
        .unwrap_or_else(|| git_dir.to_path_buf());
    resolve_git_ref(head.trim(), git_dir, &common, 0)
}

fn resolve_git_ref(value: &str, git_dir: &Path, common: &Path, depth: u32) -> Option<String> {
    if depth > 5 {
        return None;
    }
    let Some(name) = value.strip_prefix("ref:") else {
        return is_sha(value).then(|| value.to_ascii_lowercase());
    };
    let name = name.trim();
    if name.is_empty()
        || name.starts_with('/')
        || name.split('/').any(|s| s == ".." || s.is_empty())
    {
        return None;
    }
    for dir in [git_dir, common] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            return resolve_git_ref(text.trim(), git_dir, common, depth + 1);
        }
    }
    for dir in [common, git_dir] {
        let Ok(packed) = std::fs::read_to_string(dir.join("packed-refs")) else {
            continue;
        };
        let found = packed.lines().find_map(|line| {
            let (sha, refname) = line.trim().split_once(' ')?;
            (refname.trim() == name && is_sha(sha)).then(|| sha.to_ascii_lowercase())
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

fn is_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::testing::{snap, write};
    use std::fs;

    fn fake_git(root: &Path, head: &str) -> PathBuf {
        let git = root.join(".git");
        fs::create_dir_all(&git).unwrap();
        fs::write(git.join("HEAD"), head).unwrap();
        git
    }

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn head_sha_from_loose_ref() {
        let dir = tempfile::tempdir().unwrap();
        let git = fake_git(dir.path(), "ref: refs/heads/main\n");
        write(&git, "refs/heads/main", format!("{SHA}\n").as_bytes());
        write(dir.path(), "sub/a.rs", b"fn a() {}\n");
        let pack = snap(dir.path());
        assert_eq!(pack.head_sha.as_deref(), Some(SHA));
        assert!(!pack.files.keys().any(|k| k.starts_with(".git")));
        // A subdirectory of the checkout finds the same HEAD.
        assert_eq!(snap(&dir.path().join("sub")).head_sha.as_deref(), Some(SHA));
    }

    #[test]
    fn work_tree_prefix_locates_a_subdirectory() {
        let dir = tempfile::tempdir().unwrap();
        fake_git(dir.path(), "ref: refs/heads/main\n");
        write(dir.path(), "services/api/a.rs", b"fn a() {}\n");
        assert_eq!(git_work_tree_prefix(dir.path()).as_deref(), Some(""));
        let api = dir.path().join("services/api");
        assert_eq!(git_work_tree_prefix(&api).as_deref(), Some("services/api"));
        // A linked worktree or submodule has a `.git` file, and is its own root.
        write(&api, ".git", b"gitdir: /elsewhere\n");
        assert_eq!(git_work_tree_prefix(&api).as_deref(), Some(""));
        let outside = tempfile::tempdir().unwrap();
        assert_eq!(git_work_tree_prefix(outside.path()), None);
    }

    #[test]
    fn head_sha_from_packed_refs() {
        let dir = tempfile::tempdir().unwrap();
        let git = fake_git(dir.path(), "ref: refs/heads/dev\n");
        let packed = format!(
            "# pack-refs with: peeled fully-peeled sorted\n\
             ffffffffffffffffffffffffffffffffffffffff refs/heads/main\n\
             {SHA} refs/heads/dev\n^eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\n"
        );
        fs::write(git.join("packed-refs"), packed).unwrap();
        assert_eq!(git_head_sha(dir.path()).as_deref(), Some(SHA));
    }

    #[test]
    fn head_sha_detached_worktree_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        fake_git(dir.path(), &format!("{}\n", SHA.to_uppercase()));
        assert_eq!(git_head_sha(dir.path()).as_deref(), Some(SHA));

        // A worktree: ".git" is a file pointing at the real git dir.
        let wt = tempfile::tempdir().unwrap();
        let gitdir = dir.path().join(".git/worktrees/wt");
        write(&gitdir, "HEAD", b"ref: refs/heads/feature\n");
        write(&gitdir, "commondir", b"../..\n");
        write(
            &dir.path().join(".git"),
            "refs/heads/feature",
            format!("{SHA}\n").as_bytes(),
        );
        fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        assert_eq!(git_head_sha(wt.path()).as_deref(), Some(SHA));

        // Unborn branch and garbage HEAD.
        let unborn = tempfile::tempdir().unwrap();
        fake_git(unborn.path(), "ref: refs/heads/main\n");
        assert_eq!(git_head_sha(unborn.path()), None);
        let garbage = tempfile::tempdir().unwrap();
        fake_git(garbage.path(), "not a sha\n");
        assert_eq!(snap(garbage.path()).head_sha, None);
        let escape = tempfile::tempdir().unwrap();
        fake_git(escape.path(), "ref: ../../etc/passwd\n");
        assert_eq!(git_head_sha(escape.path()), None);
    }
}
