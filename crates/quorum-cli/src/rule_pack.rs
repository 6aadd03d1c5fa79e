//! Writes quorum's embedded semgrep rule pack into the data dir, where the analyzer catalog's
//! `{rules}` points, so a binary installed without its source tree still has it.

use quorum_core::analyzer::{rule_pack_digest, RULE_PACK};
use std::io;
use std::path::{Path, PathBuf};

/// `<data_root>/rules/<digest>/`, holding every file of the pack; written once per pack
/// version (beside it first, then renamed into place, so a reader never sees half a pack).
pub fn write_rule_pack(data_root: &Path) -> io::Result<PathBuf> {
    let rules = data_root.join("rules");
    let dir = rules.join(rule_pack_digest());
    if RULE_PACK.iter().all(|(path, _)| dir.join(path).is_file()) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&rules)?;
    let staging = rules.join(format!(
        ".{}-{}-{}",
        rule_pack_digest(),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    for (path, text) in RULE_PACK {
        let at = staging.join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(at, text)?;
    }
    match std::fs::rename(&staging, &dir) {
        Ok(()) => Ok(dir),
        // Another process put the same pack there first: theirs is as good as ours.
        Err(_) if dir.is_dir() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(dir)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pack_is_written_once_and_whole() {
        let root = tempfile::tempdir().unwrap();
        let dir = write_rule_pack(root.path()).unwrap();
        for (path, text) in RULE_PACK {
            assert_eq!(std::fs::read_to_string(dir.join(path)).unwrap(), *text);
        }
        assert_eq!(write_rule_pack(root.path()).unwrap(), dir);
        let entries: Vec<_> = std::fs::read_dir(root.path().join("rules"))
            .unwrap()
            .collect();
        assert_eq!(entries.len(), 1, "no staging directory left behind");
    }
}
