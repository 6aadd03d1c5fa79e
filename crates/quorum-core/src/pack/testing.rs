//! Helpers the pack's unit tests share: files written under a temporary root, a snapshot with
//! the default options, the reason a path was left out, and a pack built in memory.

use super::{ContextPack, PackOptions};
use std::fs;
use std::path::{Path, PathBuf};

pub(crate) fn write(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, content).unwrap();
}

pub(crate) fn snap(root: &Path) -> ContextPack {
    ContextPack::snapshot(root, &PackOptions::default()).unwrap()
}

pub(crate) fn reason_for<'a>(pack: &'a ContextPack, path: &str) -> Option<&'a str> {
    pack.skipped
        .iter()
        .find(|s| s.path == path)
        .map(|s| s.reason.as_str())
}

pub(crate) fn mem(files: &[(&str, &str)]) -> ContextPack {
    ContextPack::from_files(
        PathBuf::from("/repo"),
        None,
        files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect(),
    )
}
