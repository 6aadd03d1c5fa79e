//! Unified diffs of fixes: one per attempt (for the blind verifier) and `fixes.patch`, which
//! `git apply` / `patch -p1` take at the target's root.

use crate::worktree::FileChange;
use similar::TextDiff;

/// The unified diff of `changes`, with `a/` and `b/` prefixes.
pub fn unified(changes: &[FileChange]) -> String {
    let mut out = String::new();
    for c in changes {
        let before = c.before.as_deref().unwrap_or("");
        let old_name = if c.before.is_some() {
            format!("a/{}", c.path)
        } else {
            "/dev/null".to_string()
        };
        let diff = TextDiff::from_lines(before, c.after.as_str());
        let body = diff
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &format!("b/{}", c.path))
            .to_string();
        if c.before.is_none() {
            out.push_str(&format!(
                "diff --git a/{0} b/{0}\nnew file mode 100644\n",
                c.path
            ));
        } else {
            out.push_str(&format!("diff --git a/{0} b/{0}\n", c.path));
        }
        out.push_str(&body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The first line (1-based) where `after` differs from `before`.
pub fn first_changed_line(before: &str, after: &str) -> usize {
    before
        .lines()
        .zip(after.lines())
        .take_while(|(a, b)| a == b)
        .count()
        + 1
}

/// The final state of each file over several kept fixes in order: the first `before`, the
/// last `after` — what `fixes.patch` shows.
pub fn squash(fixes: &[Vec<FileChange>]) -> Vec<FileChange> {
    let mut out: Vec<FileChange> = Vec::new();
    for changes in fixes {
        for c in changes {
            match out.iter_mut().find(|o| o.path == c.path) {
                Some(o) => o.after = c.after.clone(),
                None => out.push(c.clone()),
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_names_both_sides_and_new_files() {
        let changes = vec![
            FileChange {
                path: "src/a.py".into(),
                before: Some("x = 1\ny = 2\n".into()),
                after: "x = 1\ny = 3\n".into(),
            },
            FileChange {
                path: "src/n.py".into(),
                before: None,
                after: "z\n".into(),
            },
        ];
        let p = unified(&changes);
        assert!(p.contains("--- a/src/a.py\n+++ b/src/a.py\n"), "{p}");
        assert!(p.contains("-y = 2\n+y = 3\n"));
        assert!(p.contains("new file mode 100644\n--- /dev/null\n+++ b/src/n.py"));
        assert_eq!(first_changed_line("x = 1\ny = 2\n", "x = 1\ny = 3\n"), 2);
    }

    #[test]
    fn squashing_keeps_the_first_before_and_the_last_after() {
        let one = vec![FileChange {
            path: "a".into(),
            before: Some("1\n".into()),
            after: "2\n".into(),
        }];
        let two = vec![FileChange {
            path: "a".into(),
            before: Some("2\n".into()),
            after: "3\n".into(),
        }];
        let s = squash(&[one, two]);
        assert_eq!(s[0].before.as_deref(), Some("1\n"));
        assert_eq!(s[0].after, "3\n");
    }
}
