//! ContextPack: the immutable snapshot of a review target that every agent reads instead of the
//! filesystem.
//!
//! Architecture invariant: after [`ContextPack::snapshot`] returns, nothing in quorum reads the
//! target directory again. Tools resolve paths against the pack's manifest, so a path outside the
//! root, a symlink escape, an excluded secret or a file added later simply does not exist.

use crate::error::PackError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What kind of content a file holds, for routing and prompt hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Code,
    Config,
    Doc,
    Data,
}

/// One file in the snapshot. Content is valid UTF-8 text (binaries are skipped).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackFile {
    /// Relative to the root, '/'-separated, no leading "./".
    pub path: String,
    /// blake3 of the content, hex.
    pub hash: String,
    pub size: u64,
    pub line_count: u32,
    /// e.g. "rust", "python", "markdown", "text"; "unknown" when nothing matched.
    pub language: String,
    pub kind: FileKind,
    #[serde(skip)]
    pub content: Arc<str>,
}

/// A file the snapshot left out, and why ("secret", "binary", "too large (2.3 MiB > 1 MiB)",
/// "symlink outside root", "excluded by .gitignore" is NOT recorded — ignored files are silent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// Options for taking a snapshot. `Default` gives the documented defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackOptions {
    /// Files larger than this are skipped (default 1 MiB).
    pub max_file_bytes: u64,
    /// Honour .gitignore / .ignore files (default true).
    pub respect_gitignore: bool,
    /// Skip secret-looking files (default true).
    pub exclude_secrets: bool,
    /// Extra glob patterns to exclude, relative to the root.
    pub exclude: Vec<String>,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            max_file_bytes: 1024 * 1024,
            respect_gitignore: true,
            exclude_secrets: true,
            exclude: Vec::new(),
        }
    }
}

/// One grep hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepHit {
    pub path: String,
    pub line: u32,
    pub text: String,
}

/// The immutable snapshot. Cheap to clone (files are shared).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextPack {
    pub root: PathBuf,
    /// git HEAD sha when the root is (inside) a git checkout.
    pub head_sha: Option<String>,
    /// Sorted by path.
    pub files: BTreeMap<String, PackFile>,
    pub skipped: Vec<Skipped>,
}

impl ContextPack {
    /// Walk `root` once and capture every admissible file. Errors only for a missing or
    /// non-directory root; unreadable individual files are recorded in `skipped`.
    pub fn snapshot(root: &Path, opts: &PackOptions) -> Result<ContextPack, PackError> {
        let _ = (root, opts);
        todo!("helper: implement")
    }

    /// Build a pack from in-memory files (tests, and packs received over the wire).
    pub fn from_files(root: PathBuf, head_sha: Option<String>, files: Vec<(String, String)>) -> ContextPack {
        let _ = (root, head_sha, files);
        todo!("helper: implement")
    }

    /// Normalise an agent-supplied path ("./src/a.rs", "src//a.rs", "/src/a.rs" relative to root)
    /// and return the file, or `NotInPack` for anything absent, outside the root ("..") or excluded.
    pub fn resolve(&self, path: &str) -> Result<&PackFile, PackError> {
        let _ = path;
        todo!("helper: implement")
    }

    pub fn get(&self, path: &str) -> Option<&PackFile> {
        self.resolve(path).ok()
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Lines `start..=end` (1-based, clamped to the file) rendered as "{n:>5} | {line}\n".
    pub fn read_lines(&self, path: &str, start: u32, end: u32) -> Result<String, PackError> {
        let _ = (path, start, end);
        todo!("helper: implement")
    }

    /// Regex search over files whose path starts with `path_prefix` (empty = all). At most `cap` hits.
    pub fn grep(&self, pattern: &str, path_prefix: &str, cap: usize) -> Result<Vec<GrepHit>, PackError> {
        let _ = (pattern, path_prefix, cap);
        todo!("helper: implement")
    }

    /// Indented tree of at most `max_entries` entries and `max_depth` levels; ends with
    /// "… N more entries" when capped.
    pub fn tree(&self, max_entries: usize, max_depth: usize) -> String {
        let _ = (max_entries, max_depth);
        todo!("helper: implement")
    }

    /// Immediate children of a directory ("" = root): files and subdirectories (with trailing '/').
    pub fn list_directory(&self, dir: &str) -> Result<Vec<String>, PackError> {
        let _ = dir;
        todo!("helper: implement")
    }

    /// Deterministic scout facts: language histogram, kind counts, key files (README, manifests,
    /// entry points), total lines.
    pub fn facts(&self) -> PackFacts {
        todo!("helper: implement")
    }
}

/// Deterministic facts the scout computes without a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PackFacts {
    pub file_count: usize,
    pub total_lines: u64,
    pub total_bytes: u64,
    /// language -> file count, sorted by count desc.
    pub languages: Vec<(String, usize)>,
    pub kinds: BTreeMap<String, usize>,
    pub key_files: Vec<String>,
    pub skipped_count: usize,
}
