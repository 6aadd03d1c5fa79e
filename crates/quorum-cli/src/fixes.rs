//! `--apply-safe-fixes DIR`: a copy of the target with the findings' safe_auto replacements
//! applied. The original is never opened for writing; the copy must lie outside it.

use anyhow::{bail, Context, Result};
use quorum_core::judging::docreview::{self, SafeFix};
use quorum_core::pack::ContextPack;
use quorum_core::review::finding::Finding;
use std::path::{Path, PathBuf};

/// The absolute form of `p`, which may not exist yet (its parent must).
fn absolute(p: &Path) -> Result<PathBuf> {
    if p.exists() {
        return p
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", p.display()));
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = p
        .file_name()
        .with_context(|| format!("{} names no directory", p.display()))?;
    let parent = parent.canonicalize().with_context(|| {
        format!(
            "cannot use {}: its parent directory does not exist",
            p.display()
        )
    })?;
    Ok(parent.join(name))
}

/// Refuse, before any model call, a destination that is inside the target, is the target, or
/// already holds files.
pub fn check_destination(target: &Path, dir: &Path) -> Result<()> {
    let target = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    let dest = absolute(dir)?;
    if dest.starts_with(&target) {
        bail!(
            "--apply-safe-fixes {} is inside the target: pass a directory outside {}",
            dir.display(),
            target.display()
        );
    }
    if dest.exists() {
        let empty = std::fs::read_dir(&dest)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            bail!(
                "--apply-safe-fixes {} exists and is not an empty directory: pass a new one",
                dir.display()
            );
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                copy_tree(&entry.path(), &dest)?;
            }
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &dest)
                .with_context(|| format!("cannot copy {}", entry.path().display()))?;
        }
        // Symlinks are not followed: the copy holds only what lies inside the target.
    }
    Ok(())
}

/// Copy the target (as it is on disk, without `.git`) to `dir`, then write the fixed files of
/// the review's snapshot over the copy. Returns every safe fix with whether it was applied.
pub fn write_fixed_copy(
    pack: &ContextPack,
    findings: &[Finding],
    dir: &Path,
) -> Result<Vec<SafeFix>> {
    let (fixes, contents) = docreview::plan_safe_fixes(pack, findings);
    copy_tree(&pack.root, dir)?;
    for (path, text) in &contents {
        let dest = dir.join(path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&dest, text).with_context(|| format!("cannot write {}", dest.display()))?;
    }
    let applied = fixes.iter().filter(|f| f.applied).count();
    eprintln!(
        "quorum: {applied} of {} safe fixes applied to the copy in {}",
        fixes.len(),
        dir.display()
    );
    Ok(fixes)
}
