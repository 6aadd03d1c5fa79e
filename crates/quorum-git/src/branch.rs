//! Writing `quorum fix`'s result into the repository: a branch with one commit per kept fix,
//! built from objects alone — the user's checkout, index and HEAD are never touched.

use crate::repo::{one_line, GitError, Repo};
use gix::object::tree::EntryKind;

/// One commit to write: its message and the files it sets (target-relative path, content).
#[derive(Debug, Clone)]
pub struct FixCommit {
    pub message: String,
    pub files: Vec<(String, Vec<u8>)>,
}

fn write_err(what: &str, e: impl std::error::Error) -> GitError {
    GitError::Write {
        what: what.to_string(),
        reason: one_line(&e),
    }
}

impl Repo {
    /// The commit HEAD points at.
    pub fn head_commit_id(&self) -> Result<gix::ObjectId, GitError> {
        self.repo
            .head_id()
            .map(|id| id.detach())
            .map_err(|e| GitError::Read {
                what: "HEAD".into(),
                reason: one_line(&e),
            })
    }

    /// Write `commits` in order on a new branch `refs/heads/{branch}` starting at `base`.
    /// Returns the commit ids. Fails, writing no reference, when the branch exists.
    pub fn write_branch(
        &self,
        base: gix::ObjectId,
        branch: &str,
        commits: &[FixCommit],
    ) -> Result<Vec<String>, GitError> {
        let reference = format!("refs/heads/{branch}");
        if self
            .repo
            .try_find_reference(reference.as_str())
            .ok()
            .flatten()
            .is_some()
        {
            return Err(GitError::Write {
                what: format!("branch {branch}"),
                reason: "it already exists; delete it or pass another --branch".into(),
            });
        }
        let signature = gix::actor::Signature {
            name: "quorum".into(),
            email: "quorum@localhost".into(),
            time: gix::date::Time::now_local_or_utc(),
        };
        let mut time_buf = gix::date::parse::TimeBuf::default();
        let sig = signature.to_ref(&mut time_buf);
        let mut parent = base;
        let mut ids = Vec::new();
        for c in commits {
            let parent_tree = self.tree_of(parent)?.id;
            let mut editor = self
                .repo
                .edit_tree(parent_tree)
                .map_err(|e| write_err("a tree", e))?;
            for (rel, bytes) in &c.files {
                let full = if self.prefix.is_empty() {
                    rel.clone()
                } else {
                    format!("{}/{rel}", self.prefix)
                };
                // An existing file keeps its mode (an executable stays executable).
                let kind = self
                    .tree_of(parent)?
                    .lookup_entry_by_path(&full)
                    .ok()
                    .flatten()
                    .map(|e| e.mode().kind())
                    .filter(|k| matches!(k, EntryKind::Blob | EntryKind::BlobExecutable))
                    .unwrap_or(EntryKind::Blob);
                let blob = self.repo.write_blob(bytes).map_err(|e| write_err(rel, e))?;
                editor
                    .upsert(full.as_str(), kind, blob.detach())
                    .map_err(|e| write_err(rel, e))?;
            }
            let tree = editor.write().map_err(|e| write_err("a tree", e))?;
            let id = self
                .repo
                .commit_as(
                    sig,
                    sig,
                    reference.as_str(),
                    &c.message,
                    tree.detach(),
                    [parent],
                )
                .map_err(|e| write_err(&format!("branch {branch}"), e))?;
            parent = id.detach();
            ids.push(parent.to_string());
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn a_branch_of_fix_commits_leaves_the_checkout_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("app/src")).unwrap();
        std::fs::write(root.join("app/src/a.py"), "x = 1\n").unwrap();
        std::fs::write(root.join("app/run.sh"), "echo hi\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            root.join("app/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        git(root, &["init", "-q"]);
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "base"]);
        let head_before = git(root, &["rev-parse", "HEAD"]);
        // The target is a subdirectory of the checkout.
        let repo = Repo::discover(&root.join("app")).unwrap();
        let base = repo.head_commit_id().unwrap();
        let ids = repo
            .write_branch(
                base,
                "quorum/fix-1",
                &[
                    FixCommit {
                        message: "fix F1".into(),
                        files: vec![("src/a.py".into(), b"x = 2\n".to_vec())],
                    },
                    FixCommit {
                        message: "fix F2".into(),
                        files: vec![
                            ("run.sh".into(), b"echo bye\n".to_vec()),
                            ("src/new.py".into(), b"y = 1\n".to_vec()),
                        ],
                    },
                ],
            )
            .unwrap();
        assert_eq!(ids.len(), 2);
        assert_eq!(git(root, &["rev-parse", "quorum/fix-1"]), ids[1]);
        assert_eq!(git(root, &["show", "quorum/fix-1~1:app/src/a.py"]), "x = 2");
        assert_eq!(git(root, &["show", "quorum/fix-1:app/src/new.py"]), "y = 1");
        assert_eq!(
            git(root, &["log", "--format=%s", "quorum/fix-1"]),
            "fix F2\nfix F1\nbase"
        );
        assert!(git(root, &["ls-tree", "quorum/fix-1", "app/run.sh"]).starts_with("100755"));
        // Nothing of the checkout moved.
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
        assert_eq!(
            std::fs::read_to_string(root.join("app/src/a.py")).unwrap(),
            "x = 1\n"
        );
        assert_eq!(git(root, &["status", "--porcelain"]), "");
        // A second run cannot overwrite the branch.
        assert!(matches!(
            repo.write_branch(base, "quorum/fix-1", &[]),
            Err(GitError::Write { .. })
        ));
    }
}
