//! Paths inside a pack: '/'-separated and relative to its root, whatever the platform wrote
//! or an agent asked for.

use std::path::{Component, Path};

/// '/'-separated path of `path` relative to `root`; None when a component is not UTF-8.
pub(crate) fn rel_path(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?),
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

pub(crate) fn rel_display(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// "src/a.rs:12", "src/a.rs:12-20", "src/a.rs:12:5" or "src/a.rs#L12-L20" without the location.
pub(crate) fn strip_location_suffix(s: &str) -> Option<&str> {
    if let Some(i) = s.rfind("#L") {
        let loc = &s[i + 2..];
        if i > 0
            && !loc.is_empty()
            && loc
                .chars()
                .all(|c| c.is_ascii_digit() || c == '-' || c == 'L')
        {
            return Some(&s[..i]);
        }
    }
    let mut cur = s;
    for _ in 0..2 {
        match cur.rfind(':') {
            Some(i)
                if i > 0
                    && i + 1 < cur.len()
                    && cur[i + 1..].chars().all(|c| c.is_ascii_digit() || c == '-') =>
            {
                cur = &cur[..i];
            }
            _ => break,
        }
    }
    (cur.len() < s.len()).then_some(cur)
}

/// Whether `path` is the file `prefix` or lies under the directory `prefix` ("" = everything).
pub(crate) fn under(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}
