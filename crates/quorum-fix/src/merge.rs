//! A change made in one worktree, carried onto another whose files have moved on since: each
//! file three-way merged (diffy) from the text the change started from, the text there now,
//! and the change's result. Parallel fix attempts start from the fixes kept when they began;
//! this is how a later one lands on the fixes kept meanwhile — or is found to conflict.

use crate::worktree::FileChange;
use std::collections::BTreeMap;

/// Where a change landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landed {
    /// The change as it applies to the current files (`before`: their text now).
    Clean(Vec<FileChange>),
    /// These files were changed under it in the same lines (or created by both).
    Conflict(Vec<String>),
}

/// Carry `change` (made on an older version of the files) onto `current`.
pub fn onto(current: &BTreeMap<String, String>, change: &[FileChange]) -> Landed {
    let mut clean = Vec::new();
    let mut conflicts = Vec::new();
    for c in change {
        let now = current.get(&c.path);
        match (c.before.as_deref(), now) {
            (Some(before), Some(now)) if before == now.as_str() => clean.push(c.clone()),
            (Some(before), Some(now)) => match diffy::merge(before, now, &c.after) {
                Ok(merged) => clean.push(FileChange {
                    path: c.path.clone(),
                    before: Some(now.clone()),
                    after: merged,
                }),
                Err(_) => conflicts.push(c.path.clone()),
            },
            (None, None) => clean.push(c.clone()),
            // Created by both, or gone from under it.
            _ => conflicts.push(c.path.clone()),
        }
    }
    if conflicts.is_empty() {
        Landed::Clean(clean)
    } else {
        Landed::Conflict(conflicts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "import hashlib\n\n\ndef digest(data):\n    return hashlib.md5(data).hexdigest()\n\n\ndef check(token, expected):\n    return token == expected\n";

    fn change(before: &str, after: &str) -> Vec<FileChange> {
        vec![FileChange {
            path: "app.py".into(),
            before: Some(before.into()),
            after: after.into(),
        }]
    }

    fn files(text: &str) -> BTreeMap<String, String> {
        [("app.py".to_string(), text.to_string())].into()
    }

    #[test]
    fn a_change_on_the_current_text_lands_as_it_is() {
        let after = BASE.replace("md5", "sha256");
        assert_eq!(
            onto(&files(BASE), &change(BASE, &after)),
            Landed::Clean(change(BASE, &after))
        );
    }

    #[test]
    fn changes_to_other_lines_merge_and_the_same_lines_conflict() {
        let kept = BASE.replace("md5", "sha256");
        let timing = BASE.replace(
            "return token == expected",
            "return hmac.compare_digest(token, expected)",
        );
        let Landed::Clean(merged) = onto(&files(&kept), &change(BASE, &timing)) else {
            panic!("disjoint lines merge");
        };
        assert_eq!(merged[0].before.as_deref(), Some(kept.as_str()));
        assert!(merged[0].after.contains("sha256") && merged[0].after.contains("compare_digest"));
        let truncated = BASE.replace("hexdigest()", "hexdigest()[:16]");
        assert_eq!(
            onto(&files(&kept), &change(BASE, &truncated)),
            Landed::Conflict(vec!["app.py".into()])
        );
    }

    #[test]
    fn a_file_created_by_both_conflicts_and_a_new_file_lands() {
        let new = vec![FileChange {
            path: "new.py".into(),
            before: None,
            after: "x = 1\n".into(),
        }];
        assert_eq!(onto(&files(BASE), &new), Landed::Clean(new.clone()));
        let mut both = files(BASE);
        both.insert("new.py".into(), "y = 2\n".into());
        assert_eq!(onto(&both, &new), Landed::Conflict(vec!["new.py".into()]));
    }
}
