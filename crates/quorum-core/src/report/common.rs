//! What every rendering of a report shares: one-line text and inline code that model text
//! cannot break out of, a category's rule id, a finding's stable fingerprint and its path
//! relative to the target or the repository, the tool's home page and the status word.

use super::ReviewStatus;
use crate::review::finding::Finding;

pub(crate) fn information_uri() -> Option<&'static str> {
    [env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_HOMEPAGE")]
        .into_iter()
        .find(|u| !u.trim().is_empty())
}

pub(crate) fn status_str(status: ReviewStatus) -> &'static str {
    match status {
        ReviewStatus::Completed => "completed",
        ReviewStatus::Partial => "partial",
        ReviewStatus::Failed => "failed",
    }
}

/// Rule id from a category: lowercase, only `[a-z0-9/_-]`, no empty path segments.
pub(crate) fn rule_id(category: &str) -> String {
    let segments: Vec<String> = category
        .split(['/', '\\'])
        .filter_map(|seg| {
            let mut s = String::new();
            for c in seg.chars().flat_map(char::to_lowercase) {
                let c = if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '-'
                };
                if c == '-' && (s.is_empty() || s.ends_with('-')) {
                    continue;
                }
                s.push(c);
            }
            let s = s.trim_end_matches('-').to_string();
            (!s.is_empty()).then_some(s)
        })
        .collect();
    if segments.is_empty() {
        "uncategorized".to_string()
    } else {
        segments.join("/")
    }
}

/// Stable across runs for the same anchor, so code scanning tracks an alert across commits.
pub(crate) fn anchor_fingerprint(f: &Finding) -> String {
    let key = if f.anchor.trim().is_empty() {
        // A finding should always carry an anchor; fall back to what identifies it otherwise.
        format!(
            "{}|{}|{}|{}",
            f.category,
            f.file.as_deref().unwrap_or(""),
            f.symbol.as_deref().unwrap_or(""),
            f.title
        )
    } else {
        f.anchor.clone()
    };
    blake3::hash(key.as_bytes()).to_hex().to_string()
}

pub(crate) fn normalize_slashes(p: &str) -> String {
    p.trim().replace('\\', "/")
}

/// A finding's file as a '/'-separated path relative to the target root (an absolute path
/// under the root loses the root; "." and empty segments go), or None when it names nothing.
pub(crate) fn relative_path(file: &str, target_root: &str) -> Option<String> {
    let file = normalize_slashes(file);
    let root = target_root.trim_end_matches('/');
    let rel = if !root.is_empty() && file.starts_with(&format!("{root}/")) {
        &file[root.len() + 1..]
    } else {
        file.as_str()
    };
    let segments: Vec<&str> = rel
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.is_empty() {
        return None;
    }
    Some(segments.join("/"))
}

/// A finding's file relative to the repository root: `repo_prefix` (the target's directory
/// inside its repository, "" for the root) joined with its target-relative path. None when the
/// finding names no file.
pub(crate) fn repo_path(f: &Finding, target_root: &str, repo_prefix: &str) -> Option<String> {
    let rel = relative_path(f.file.as_deref()?, target_root)?;
    let prefix: Vec<&str> = repo_prefix
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if prefix.is_empty() {
        Some(rel)
    } else {
        Some(format!("{}/{rel}", prefix.join("/")))
    }
}

/// Collapses whitespace (newlines included) so model text cannot break a heading or a list item.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn longest_backtick_run(s: &str) -> usize {
    let mut best = 0;
    let mut cur = 0;
    for c in s.chars() {
        if c == '`' {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// An inline code span that survives backticks inside `s` (CommonMark: a longer delimiter run,
/// padded with a space when the content touches a backtick).
pub(crate) fn code(s: &str) -> String {
    let s = one_line(s);
    let fence = "`".repeat(longest_backtick_run(&s) + 1);
    if s.starts_with('`') || s.ends_with('`') {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

/// The area a category belongs to: the part before the first '/', or the whole category.
pub(crate) fn area_of(category: &str) -> String {
    let c = category.trim();
    let area = c.split('/').next().unwrap_or("").trim();
    if area.is_empty() {
        "uncategorized".to_string()
    } else {
        one_line(area)
    }
}
