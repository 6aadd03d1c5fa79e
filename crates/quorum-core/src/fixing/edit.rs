//! What a fix agent's edit may touch and how it applies: exact, unique replacements and new
//! files, on paths inside the worktree that are not secret files, within the task's bounds.

use crate::pack::is_secret_file_name;
use std::fmt;

/// Why an edit was refused; the text goes back to the fix agent as a tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// Absolute, `..`, empty, or naming the VCS directory.
    OutsideWorktree(String),
    /// A secrets file (`.env`, keys, credentials) is never read or written.
    SecretFile(String),
    NoSuchFile(String),
    FileExists(String),
    /// `old` was not found in the file.
    NotFound {
        path: String,
    },
    /// `old` occurs more than once: the edit must name one place.
    Ambiguous {
        path: String,
        count: usize,
    },
    EmptyOld,
    /// The attempt would touch more files or lines than the flow allows.
    OverBound(String),
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::OutsideWorktree(p) => {
                write!(f, "{p:?} is outside the worktree: use a path relative to its root")
            }
            EditError::SecretFile(p) => write!(f, "{p:?} is a secrets file and is never edited"),
            EditError::NoSuchFile(p) => write!(f, "{p:?} does not exist; use write_file for a new file"),
            EditError::FileExists(p) => write!(f, "{p:?} exists; change it with edit_file"),
            EditError::NotFound { path } => write!(
                f,
                "the old text was not found in {path:?}; read the file again and copy the lines exactly"
            ),
            EditError::Ambiguous { path, count } => write!(
                f,
                "the old text occurs {count} times in {path:?}; include more surrounding lines so it names one place"
            ),
            EditError::EmptyOld => write!(f, "old must not be empty"),
            EditError::OverBound(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for EditError {}

/// A worktree-relative path made canonical (`./a//b.py` → `a/b.py`), or why it is refused.
pub fn confine(path: &str) -> Result<String, EditError> {
    let trimmed = path.trim().replace('\\', "/");
    if trimmed.starts_with('/') || trimmed.contains('\0') {
        return Err(EditError::OutsideWorktree(path.to_string()));
    }
    let mut parts = Vec::new();
    for seg in trimmed.split('/') {
        match seg {
            "" | "." => continue,
            ".." => return Err(EditError::OutsideWorktree(path.to_string())),
            ".git" | ".hg" | ".svn" => return Err(EditError::OutsideWorktree(path.to_string())),
            s => parts.push(s),
        }
    }
    let Some(name) = parts.last() else {
        return Err(EditError::OutsideWorktree(path.to_string()));
    };
    if is_secret_file_name(name) {
        return Err(EditError::SecretFile(path.to_string()));
    }
    Ok(parts.join("/"))
}

/// `text` with the one occurrence of `old` replaced by `new`.
pub fn replace_exact(path: &str, text: &str, old: &str, new: &str) -> Result<String, EditError> {
    if old.is_empty() {
        return Err(EditError::EmptyOld);
    }
    match text.matches(old).count() {
        0 => Err(EditError::NotFound {
            path: path.to_string(),
        }),
        1 => Ok(text.replacen(old, new, 1)),
        count => Err(EditError::Ambiguous {
            path: path.to_string(),
            count,
        }),
    }
}

/// Lines that differ between two versions of a file: the larger of the removed and added
/// blocks once the common head and tail are set aside. A bound, not a diff.
pub fn changed_lines(before: &str, after: &str) -> u32 {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let removed = a.len() - head - tail;
    let added = b.len() - head - tail;
    removed.max(added) as u32
}

/// How much one attempt may change (from the flow; the defaults suit one finding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EditBounds {
    pub max_files: usize,
    pub max_changed_lines: u32,
}

impl Default for EditBounds {
    fn default() -> Self {
        EditBounds {
            max_files: 3,
            max_changed_lines: 60,
        }
    }
}

impl EditBounds {
    /// Refuse an attempt whose files (`touched`, after this edit) or lines exceed the bounds.
    pub fn check(&self, touched: usize, lines: u32) -> Result<(), EditError> {
        if touched > self.max_files {
            return Err(EditError::OverBound(format!(
                "a fix may change at most {} files; this edit would make it {touched}",
                self.max_files
            )));
        }
        if lines > self.max_changed_lines {
            return Err(EditError::OverBound(format!(
                "a fix may change at most {} lines; this edit would make it {lines}: keep the fix minimal",
                self.max_changed_lines
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_confined_to_the_worktree() {
        assert_eq!(confine("./src//a.py").unwrap(), "src/a.py");
        for bad in [
            "../x",
            "/etc/passwd",
            "a/../../b",
            "",
            ".git/config",
            "src/.git/HEAD",
        ] {
            assert!(
                matches!(confine(bad), Err(EditError::OutsideWorktree(_))),
                "{bad} accepted"
            );
        }
        assert!(matches!(
            confine("config/.env"),
            Err(EditError::SecretFile(_))
        ));
    }

    #[test]
    fn a_replacement_must_name_exactly_one_place() {
        let t = "a = 1\nb = 1\n";
        assert_eq!(
            replace_exact("f", t, "b = 1", "b = 2").unwrap(),
            "a = 1\nb = 2\n"
        );
        assert!(matches!(
            replace_exact("f", t, "= 1", "= 2"),
            Err(EditError::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            replace_exact("f", t, "c", "d"),
            Err(EditError::NotFound { .. })
        ));
        assert_eq!(replace_exact("f", t, "", "d"), Err(EditError::EmptyOld));
    }

    #[test]
    fn changed_lines_counts_the_middle_block() {
        assert_eq!(changed_lines("a\nb\nc\n", "a\nB\nc\n"), 1);
        assert_eq!(changed_lines("a\nc\n", "a\nb1\nb2\nc\n"), 2);
        assert_eq!(changed_lines("a\n", "a\n"), 0);
        let bounds = EditBounds::default();
        assert!(bounds.check(3, 60).is_ok());
        assert!(bounds.check(4, 1).is_err());
        assert!(bounds.check(1, 61).is_err());
    }
}
