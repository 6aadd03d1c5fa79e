//! The private worktree a fix run edits: the review's snapshot written into a directory the
//! run owns, with the current text of every file held in memory.
//!
//! Reads come from memory, never from disk, so nothing a test command leaves behind (a
//! symlink, a generated file) is shown to an agent. Writes go to memory and then to disk,
//! refusing any path whose components are symlinks, so a test cannot redirect a later write
//! outside the worktree. An attempt's changes are recorded so they can be undone exactly.

use quorum_core::fixing::edit::{changed_lines, confine, replace_exact, EditBounds, EditError};
use quorum_core::pack::ContextPack;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// One file changed by an attempt: its text before (None: created) and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub before: Option<String>,
    pub after: String,
}

pub struct Worktree {
    root: PathBuf,
    files: BTreeMap<String, String>,
    /// Files the current attempt touched, with their text before it.
    attempt: BTreeMap<String, Option<String>>,
    bounds: EditBounds,
}

impl Worktree {
    /// Write every file of `pack` under `root` (created; must be empty or absent).
    pub fn materialize(
        pack: &ContextPack,
        root: PathBuf,
        bounds: EditBounds,
    ) -> io::Result<Worktree> {
        std::fs::create_dir_all(&root)?;
        let mut files = BTreeMap::new();
        for (path, f) in &pack.files {
            let text = f.content.to_string();
            write_confined(&root, path, &text)?;
            keep_executable(&pack.root.join(path), &root.join(path))?;
            files.insert(path.clone(), text);
        }
        Ok(Worktree {
            root,
            files,
            attempt: BTreeMap::new(),
            bounds,
        })
    }

    /// Write `files` (path, text, executable) under `root` (created; must be empty or
    /// absent): a tree shipped from another node, which carries its modes with it.
    pub fn from_files(
        files: Vec<(String, String, bool)>,
        root: PathBuf,
        bounds: EditBounds,
    ) -> io::Result<Worktree> {
        std::fs::create_dir_all(&root)?;
        let mut map = BTreeMap::new();
        for (path, text, executable) in files {
            write_confined(&root, &path, &text)?;
            #[cfg(unix)]
            if executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(root.join(&path), std::fs::Permissions::from_mode(0o755))?;
            }
            #[cfg(not(unix))]
            let _ = executable;
            map.insert(path, text);
        }
        Ok(Worktree {
            root,
            files: map,
            attempt: BTreeMap::new(),
            bounds,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The current text of every file (base, kept fixes, and the attempt in progress).
    pub fn files(&self) -> &BTreeMap<String, String> {
        &self.files
    }

    pub fn read(&self, path: &str) -> Result<&str, EditError> {
        let p = confine(path)?;
        self.files
            .get(&p)
            .map(String::as_str)
            .ok_or(EditError::NoSuchFile(p))
    }

    /// Replace the one occurrence of `old` in `path` by `new`.
    pub fn edit(&mut self, path: &str, old: &str, new: &str) -> Result<(), EditError> {
        let p = confine(path)?;
        let current = self
            .files
            .get(&p)
            .ok_or_else(|| EditError::NoSuchFile(p.clone()))?;
        let next = replace_exact(&p, current, old, new)?;
        self.set(p, next)
    }

    /// Create a new file.
    pub fn create(&mut self, path: &str, content: &str) -> Result<(), EditError> {
        let p = confine(path)?;
        if self.files.contains_key(&p) {
            return Err(EditError::FileExists(p));
        }
        self.set(p, content.to_string())
    }

    fn set(&mut self, path: String, text: String) -> Result<(), EditError> {
        let before = match self.attempt.get(&path) {
            Some(b) => b.clone(),
            None => self.files.get(&path).cloned(),
        };
        let touched = self.attempt.len() + usize::from(!self.attempt.contains_key(&path));
        let lines: u32 = self
            .attempt
            .iter()
            .filter(|(p, _)| **p != path)
            .map(|(p, b)| changed_lines(b.as_deref().unwrap_or(""), &self.files[p]))
            .sum::<u32>()
            + changed_lines(before.as_deref().unwrap_or(""), &text);
        self.bounds.check(touched, lines)?;
        write_confined(&self.root, &path, &text)
            .map_err(|e| EditError::OverBound(format!("cannot write {path}: {e}")))?;
        self.attempt.entry(path.clone()).or_insert(before);
        self.files.insert(path, text);
        Ok(())
    }

    /// The current attempt's changes, by path (a file edited back to its text is left out).
    pub fn changes(&self) -> Vec<FileChange> {
        self.attempt
            .iter()
            .filter(|(p, before)| before.as_deref() != Some(self.files[*p].as_str()))
            .map(|(p, before)| FileChange {
                path: p.clone(),
                before: before.clone(),
                after: self.files[p].clone(),
            })
            .collect()
    }

    /// Keep the attempt: its changes become the base of the next. Returns them.
    pub fn keep(&mut self) -> Vec<FileChange> {
        let out = self.changes();
        self.attempt.clear();
        out
    }

    /// Re-apply a kept fix recorded by an earlier run (a resume): its files take their
    /// recorded text, which becomes the base of the next attempt. No bounds apply: the fix was
    /// checked when it was kept.
    pub fn apply_recorded(&mut self, changes: &[FileChange]) -> io::Result<()> {
        for c in changes {
            write_confined(&self.root, &c.path, &c.after)?;
            self.files.insert(c.path.clone(), c.after.clone());
        }
        self.attempt.clear();
        Ok(())
    }

    /// Make `changes` — made in another worktree and carried onto this one — the current
    /// attempt, tracked like an agent's own edits so it is kept or rolled back the same way.
    /// No bounds apply: they were checked where the change was made.
    pub fn apply_as_attempt(&mut self, changes: &[FileChange]) -> io::Result<()> {
        for c in changes {
            let before = self.files.get(&c.path).cloned();
            write_confined(&self.root, &c.path, &c.after)?;
            self.attempt.entry(c.path.clone()).or_insert(before);
            self.files.insert(c.path.clone(), c.after.clone());
        }
        Ok(())
    }

    /// Undo the attempt, in memory and on disk.
    pub fn rollback(&mut self) -> io::Result<()> {
        for (path, before) in std::mem::take(&mut self.attempt) {
            match before {
                Some(text) => {
                    write_confined(&self.root, &path, &text)?;
                    self.files.insert(path, text);
                }
                None => {
                    self.files.remove(&path);
                    let p = self.root.join(&path);
                    if std::fs::symlink_metadata(&p).is_ok() {
                        std::fs::remove_file(&p)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A script the target marks executable stays executable in the worktree (a test command
/// may run it directly). The pack carries no modes, so the target's file is asked.
fn keep_executable(original: &Path, copy: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let executable = std::fs::symlink_metadata(original)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if executable {
            std::fs::set_permissions(copy, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (original, copy);
    Ok(())
}

/// Write `rel` under `root`, creating directories, refusing symlinked components and never
/// following a symlink at the file itself (it is replaced).
pub fn write_confined(root: &Path, rel: &str, text: &str) -> io::Result<()> {
    let rel =
        confine(rel).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut dir = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain directory of the worktree", dir.display()),
                ))
            }
            Ok(_) => {}
            Err(_) => std::fs::create_dir(&dir)?,
        }
    }
    let file = dir.join(parts[parts.len() - 1]);
    if let Ok(m) = std::fs::symlink_metadata(&file) {
        if m.file_type().is_symlink() {
            std::fs::remove_file(&file)?;
        }
    }
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW);
    }
    opts.open(&file)?.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Worktree) {
        let dir = tempfile::tempdir().unwrap();
        let pack = ContextPack::from_files(
            "/t".into(),
            None,
            vec![("src/a.py".into(), "x = 1\ny = 2\n".into())],
        );
        let wt =
            Worktree::materialize(&pack, dir.path().join("wt"), EditBounds::default()).unwrap();
        (dir, wt)
    }

    #[test]
    fn an_attempt_is_undone_exactly_in_memory_and_on_disk() {
        let (_d, mut wt) = tree();
        wt.edit("src/a.py", "x = 1", "x = 3").unwrap();
        wt.create("src/new.py", "z = 0\n").unwrap();
        assert_eq!(wt.changes().len(), 2);
        wt.rollback().unwrap();
        assert_eq!(
            std::fs::read_to_string(wt.root().join("src/a.py")).unwrap(),
            "x = 1\ny = 2\n"
        );
        assert!(!wt.root().join("src/new.py").exists());
        assert!(wt.changes().is_empty());
        wt.edit("src/a.py", "y = 2", "y = 5").unwrap();
        let kept = wt.keep();
        assert_eq!(kept[0].before.as_deref(), Some("x = 1\ny = 2\n"));
        assert_eq!(wt.read("src/a.py").unwrap(), "x = 1\ny = 5\n");
    }

    #[test]
    fn writes_outside_the_worktree_or_through_a_symlink_are_refused() {
        let (d, mut wt) = tree();
        assert!(matches!(
            wt.create("../escape.py", "x"),
            Err(EditError::OutsideWorktree(_))
        ));
        assert!(!d.path().join("escape.py").exists());
        assert!(matches!(
            wt.create(".env", "K=1"),
            Err(EditError::SecretFile(_))
        ));
        // A test run left a symlinked directory pointing out of the worktree.
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, wt.root().join("link")).unwrap();
        assert!(wt.create("link/x.py", "x").is_err());
        assert!(!outside.join("x.py").exists());
    }

    #[test]
    fn an_executable_script_stays_executable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("run.sh"), "echo ok\n").unwrap();
        std::fs::set_permissions(
            target.join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(target.join("a.py"), "x = 1\n").unwrap();
        let pack = ContextPack::from_files(
            target.clone(),
            None,
            vec![
                ("run.sh".into(), "echo ok\n".into()),
                ("a.py".into(), "x = 1\n".into()),
            ],
        );
        let wt =
            Worktree::materialize(&pack, dir.path().join("wt"), EditBounds::default()).unwrap();
        let mode = |p: &str| {
            std::fs::metadata(wt.root().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o111
        };
        assert_ne!(mode("run.sh"), 0);
        assert_eq!(mode("a.py"), 0);
    }

    #[test]
    fn an_attempt_over_its_bounds_is_refused() {
        let (_d, mut wt) = tree();
        let big: String = (0..100).map(|k| format!("v{k} = {k}\n")).collect();
        assert!(matches!(
            wt.create("src/big.py", &big),
            Err(EditError::OverBound(_))
        ));
        assert!(wt.changes().is_empty());
    }
}
