//! ContextPack: the immutable snapshot of a review target that every agent reads instead of the
//! filesystem.
//!
//! Architecture invariant: after [`ContextPack::snapshot`] returns, nothing in quorum reads the
//! target directory again. Tools resolve paths against the pack's manifest, so a path outside the
//! root, a symlink escape, an excluded secret or a file added later simply does not exist.
//!
//! What a snapshot admits:
//! - every regular, UTF-8 text file under the root up to `max_file_bytes`;
//! - never the contents of [`ALWAYS_EXCLUDED_DIRS`] (VCS metadata, build output, dependency
//!   caches, editor state, quorum's own output), nor `opts.exclude` globs (gitignore syntax);
//! - `.gitignore` / `.ignore` rules when `respect_gitignore` (also outside a git checkout);
//!   ignored files are left out silently;
//! - never a secret-looking file when `exclude_secrets` (see [`is_secret_file_name`]);
//! - a symlinked file only when its canonical target stays inside the canonical root and is
//!   itself a file the walk admits as a path (so `.gitignore`, `pack.exclude` and the
//!   always-excluded directories apply to what a link names); symlinked directories are not
//!   descended into (their targets inside the root are walked anyway);
//! - files are read through handles opened with `O_NOFOLLOW` (and `O_NONBLOCK`, so a fifo never
//!   blocks), and admitted only when the handle is a regular file, the same inode the walk saw,
//!   and within the size limit: a path swapped between the walk and the read is refused.
//!
//! Everything left out for a reason other than an ignore rule is listed in `skipped`;
//! [`ContextPack::survey`] also names what ignore rules, exclude globs and always-excluded
//! directories left out (for `quorum pack`).
//!
//! Each file gets a language (by file name, then extension, then shebang) and a kind, decided by
//! this rule: build manifests, lockfiles, dotfile configuration, Dockerfiles and Makefiles are
//! [`FileKind::Config`] whatever their syntax; otherwise programming languages (including SQL,
//! HTML/CSS, Terraform and Protobuf) are `Code`; yaml/toml/json/xml/ini and similar are `Config`;
//! prose formats (markdown, reStructuredText, plain text, LaTeX, AsciiDoc) and LICENSE-like files
//! are `Doc`; tabular or record data (csv, tsv, jsonl, logs) and anything unrecognised are `Data`.

pub mod atlas;
mod survey;
pub mod text;
pub use text::Text;

pub use survey::{Exclusion, ExclusionReason, PackSurvey};

use crate::error::PackError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Directory names never walked into, wherever they appear below the root.
pub const ALWAYS_EXCLUDED_DIRS: &[&str] = &[
    ".git",
    "target",
    "node_modules",
    "dist",
    "build",
    "out",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    ".idea",
    ".vscode",
    ".gradle",
    ".next",
    "coverage",
    ".terraform",
    "quorum-out",
];

/// The repository's review configuration (`.quorum.toml`, read by [`crate::repo_config`]), at
/// the target's root: it configures the review and is never reviewed, so no pack holds it.
pub const REPO_CONFIG_FILE: &str = ".quorum.toml";

/// Bytes inspected for a NUL when deciding that a file is binary.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Grep hit text is cut to this many characters.
const GREP_TEXT_CHARS: usize = 200;
/// At most this many key files in [`PackFacts::key_files`].
const MAX_KEY_FILES: usize = 40;

/// What kind of content a file holds, for routing and prompt hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Code,
    Config,
    Doc,
    Data,
}

impl FileKind {
    /// The lowercase name used in serialised output and [`PackFacts::kinds`].
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Code => "code",
            FileKind::Config => "config",
            FileKind::Doc => "doc",
            FileKind::Data => "data",
        }
    }
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
    pub content: Text,
}

impl PackFile {
    /// Build a file entry from its path and content: hash, size, line count, language and kind.
    pub fn new(path: String, content: impl Into<Text>) -> PackFile {
        let content: Text = content.into();
        let (language, kind) = classify(&path, &content);
        PackFile {
            hash: blake3::hash(content.as_bytes()).to_hex().to_string(),
            size: content.len() as u64,
            line_count: u32::try_from(content.lines().count()).unwrap_or(u32::MAX),
            language: language.to_string(),
            kind,
            path,
            content,
        }
    }
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
    /// The most bytes of file content one pack holds (default 256 MiB, the most a cluster
    /// node accepts in one submission): files past it, in walk order, are skipped as "over the
    /// pack budget", so a review of a multi-GB tree holds a bounded amount in memory and says
    /// what it left out. 0 means no bound.
    #[serde(default = "default_max_pack_bytes")]
    pub max_pack_bytes: u64,
    /// A pack whose content passes this many bytes is spilled: read in bounded groups and
    /// written once to a private, unlinked spill file that is mapped read-only, so the
    /// process holds a group at a time, not the tree (default 64 MiB; 0 = never spill).
    #[serde(default = "default_spill_above_bytes")]
    pub spill_above_bytes: u64,
}

fn default_spill_above_bytes() -> u64 {
    64 * 1024 * 1024
}

/// Bytes of content read (and held) at once while a pack is spilled.
const SPILL_GROUP_BYTES: u64 = 16 * 1024 * 1024;

fn default_max_pack_bytes() -> u64 {
    256 * 1024 * 1024
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            max_file_bytes: 1024 * 1024,
            respect_gitignore: true,
            exclude_secrets: true,
            exclude: Vec::new(),
            max_pack_bytes: default_max_pack_bytes(),
            spill_above_bytes: default_spill_above_bytes(),
        }
    }
}

/// What [`ContextPack::survey`] needs to know about a walk beyond the pack it produced.
#[derive(Default)]
struct WalkTrace {
    /// Directories the walk entered, relative to the root ("" is not recorded).
    dirs: BTreeSet<String>,
    excludes: Option<ignore::overrides::Override>,
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
    /// non-directory root, an unreadable root, or an invalid `opts.exclude` glob
    /// (`BadPattern`); unreadable individual files are recorded in `skipped`.
    ///
    /// The pack's `root` is the canonical (absolute, symlink-free) form of `root`.
    pub fn snapshot(root: &Path, opts: &PackOptions) -> Result<ContextPack, PackError> {
        Self::walk(root, opts, None)
    }

    /// The snapshot, plus a reason for every entry it left out — also those it leaves out
    /// silently (ignore rules, `opts.exclude` globs, always-excluded directories). What
    /// `quorum pack` prints; the decisions are the snapshot's own.
    pub fn survey(root: &Path, opts: &PackOptions) -> Result<PackSurvey, PackError> {
        let mut trace = WalkTrace::default();
        let pack = Self::walk(root, opts, Some(&mut trace))?;
        Ok(survey::explain(pack, &trace))
    }

    /// The one walk behind [`ContextPack::snapshot`]; `trace` (when given) learns which
    /// directories it entered and the exclude globs it applied, for [`ContextPack::survey`].
    fn walk(
        root: &Path,
        opts: &PackOptions,
        mut trace: Option<&mut WalkTrace>,
    ) -> Result<ContextPack, PackError> {
        let meta = std::fs::metadata(root).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                PackError::Missing(root.to_path_buf())
            } else {
                PackError::Io {
                    path: root.to_path_buf(),
                    source: e,
                }
            }
        })?;
        if !meta.is_dir() {
            return Err(PackError::NotADirectory(root.to_path_buf()));
        }
        let canon = std::fs::canonicalize(root).map_err(|e| PackError::Io {
            path: root.to_path_buf(),
            source: e,
        })?;
        let git_dir = find_git_dir(&canon);
        let head_sha = git_dir.as_deref().and_then(read_head_sha);

        let mut overrides = ignore::overrides::OverrideBuilder::new(&canon);
        // The repository's review configuration configures the review; it is not reviewed.
        overrides
            .add(&format!("!/{REPO_CONFIG_FILE}"))
            .map_err(|e| PackError::BadPattern {
                pattern: REPO_CONFIG_FILE.to_string(),
                reason: e.to_string(),
            })?;
        for pattern in &opts.exclude {
            let glob = pattern.trim().trim_start_matches('!');
            if glob.is_empty() {
                continue;
            }
            // Overrides without '!' would whitelist (and so exclude everything else).
            overrides
                .add(&format!("!{glob}"))
                .map_err(|e| PackError::BadPattern {
                    pattern: pattern.clone(),
                    reason: e.to_string(),
                })?;
        }
        let overrides = overrides.build().map_err(|e| PackError::BadPattern {
            pattern: opts.exclude.join(", "),
            reason: e.to_string(),
        })?;
        if let Some(t) = trace.as_deref_mut() {
            t.excludes = Some(overrides.clone());
        }

        let respect = opts.respect_gitignore;
        let mut builder = ignore::WalkBuilder::new(&canon);
        builder
            .hidden(false)
            .ignore(respect)
            .git_ignore(respect)
            .git_exclude(respect)
            // A user's global excludes would make the snapshot depend on who runs the review.
            .git_global(false)
            .require_git(false)
            // Parent ignore files matter when reviewing a subdirectory of a checkout; outside a
            // checkout they would be arbitrary files in the user's home.
            .parents(respect && git_dir.is_some())
            .follow_links(false)
            .overrides(overrides)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|entry| {
                if entry.depth() == 0 {
                    return true;
                }
                let name = entry.file_name();
                if name == ".git" {
                    return false;
                }
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                !(is_dir && name.to_str().is_some_and(is_always_excluded_dir))
            });

        let mut files = BTreeMap::new();
        let mut skipped = Vec::new();
        // Regular files the walk admitted as paths (not ignored, not excluded), with the inode it
        // saw: a symlink may only point at one of these, and every read must find that inode.
        let mut walked: BTreeMap<String, FileId> = BTreeMap::new();
        let mut regular: Vec<(String, PathBuf)> = Vec::new();
        // Bytes the walk has admitted so far, against `opts.max_pack_bytes`, decided from the
        // sizes the walk saw (in walk order, before anything is read), so which files are over
        // the budget does not depend on timing.
        let mut budgeted: u64 = 0;
        // Content the walk admitted, budget or not: past `spill_above_bytes` it is spilled.
        let mut sizes: Vec<u64> = Vec::new();
        let mut links: Vec<(String, PathBuf)> = Vec::new();
        for item in builder.build() {
            let entry = match item {
                Ok(entry) => entry,
                Err(err) => {
                    let path = walk_error_path(&err)
                        .map(|p| rel_display(&canon, &p))
                        .unwrap_or_else(|| ".".to_string());
                    skipped.push(Skipped {
                        path,
                        reason: err.to_string(),
                    });
                    continue;
                }
            };
            if entry.depth() == 0 {
                continue;
            }
            let Some(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                if let (Some(t), Some(rel)) = (trace.as_deref_mut(), rel_path(&canon, entry.path()))
                {
                    t.dirs.insert(rel);
                }
                continue;
            }
            let Some(rel) = rel_path(&canon, entry.path()) else {
                skipped.push(Skipped {
                    path: rel_display(&canon, entry.path()),
                    reason: "file name is not valid utf-8".to_string(),
                });
                continue;
            };
            if file_type.is_symlink() {
                links.push((rel, entry.path().to_path_buf()));
                continue;
            }
            if !file_type.is_file() {
                // Opening a fifo or a device could block or stream forever.
                skipped.push(Skipped {
                    path: rel,
                    reason: "not a regular file".to_string(),
                });
                continue;
            }
            match entry.metadata() {
                Ok(meta) => {
                    walked.insert(rel.clone(), FileId::of(&meta));
                    // Files that will be skipped anyway (too large, secret) cost no budget.
                    let name = rel.rsplit('/').next().unwrap_or(&rel);
                    let counts = meta.len() <= opts.max_file_bytes
                        && !(opts.exclude_secrets && is_secret_file_name(name));
                    if counts && opts.max_pack_bytes > 0 {
                        if budgeted.saturating_add(meta.len()) > opts.max_pack_bytes {
                            skipped.push(Skipped {
                                path: rel,
                                reason: format!(
                                    "over the pack budget ({} bytes; raise pack.max_pack_bytes to include it)",
                                    opts.max_pack_bytes
                                ),
                            });
                            continue;
                        }
                        budgeted += meta.len();
                    }
                    sizes.push(if counts { meta.len() } else { 0 });
                    regular.push((rel, entry.path().to_path_buf()));
                }
                Err(e) => skipped.push(Skipped {
                    path: rel,
                    reason: e.to_string(),
                }),
            }
        }
        let total: u64 = sizes.iter().sum();
        if opts.spill_above_bytes > 0 && total > opts.spill_above_bytes {
            let spilled =
                admit_spilled(regular, &sizes, &walked, opts).map_err(|source| PackError::Io {
                    path: std::env::temp_dir(),
                    source,
                })?;
            for (rel, admitted) in spilled {
                match admitted {
                    Ok(file) => {
                        files.insert(rel, file);
                    }
                    Err(reason) => skipped.push(Skipped { path: rel, reason }),
                }
            }
        } else {
            for (rel, admitted) in admit_in_parallel(regular, &walked, opts) {
                match admitted {
                    Ok(file) => {
                        files.insert(rel, file);
                    }
                    Err(reason) => skipped.push(Skipped { path: rel, reason }),
                }
            }
        }
        for (rel, path) in links {
            match admit_symlink(&canon, &path, &rel, &walked, opts) {
                Ok(content) => {
                    files.insert(rel.clone(), PackFile::new(rel, content));
                }
                Err(reason) => skipped.push(Skipped { path: rel, reason }),
            }
        }
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(ContextPack {
            root: canon,
            head_sha,
            files,
            skipped,
        })
    }

    /// Assemble a pack from files already admitted by [`TreeRules`] (a snapshot of a git tree
    /// rather than of a directory). Paths are taken as given: the rules produced them.
    pub fn from_admitted(
        root: PathBuf,
        head_sha: Option<String>,
        files: Vec<(String, Arc<str>)>,
        mut skipped: Vec<Skipped>,
    ) -> ContextPack {
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        ContextPack {
            root,
            head_sha,
            files: files
                .into_iter()
                .map(|(path, content)| (path.clone(), PackFile::new(path, content)))
                .collect(),
            skipped,
        }
    }

    /// Build a pack from in-memory files (tests, and packs received over the wire).
    ///
    /// Paths are normalised like [`ContextPack::resolve`] does; a path that cannot be (empty, or
    /// with a ".." segment) is recorded in `skipped` instead. A later duplicate path wins.
    pub fn from_files(
        root: PathBuf,
        head_sha: Option<String>,
        files: Vec<(String, String)>,
    ) -> ContextPack {
        let mut pack = ContextPack {
            root,
            head_sha,
            files: BTreeMap::new(),
            skipped: Vec::new(),
        };
        for (path, content) in files {
            match pack.normalize(&path) {
                Some(norm) if !norm.is_empty() => {
                    let file = PackFile::new(norm.clone(), Arc::from(content));
                    pack.files.insert(norm, file);
                }
                _ => pack.skipped.push(Skipped {
                    path,
                    reason: "invalid path".to_string(),
                }),
            }
        }
        pack
    }

    /// Normalise an agent-supplied path ("./src/a.rs", "src//a.rs", "/src/a.rs" relative to root)
    /// and return the file, or `NotInPack` for anything absent, outside the root ("..") or excluded.
    ///
    /// Also accepted: surrounding whitespace and quotes, an absolute path under the pack root,
    /// backslash separators, and a trailing ":LINE" or ":LINE-LINE" location suffix.
    pub fn resolve(&self, path: &str) -> Result<&PackFile, PackError> {
        let not_in_pack = || PackError::NotInPack(path.to_string());
        let norm = self.normalize(path).ok_or_else(not_in_pack)?;
        if let Some(file) = self.files.get(&norm) {
            return Ok(file);
        }
        if path.contains('\\') {
            if let Some(file) = self
                .normalize(&path.replace('\\', "/"))
                .and_then(|p| self.files.get(&p))
            {
                return Ok(file);
            }
        }
        if let Some(stripped) = strip_location_suffix(&norm) {
            if let Some(file) = self.files.get(stripped) {
                return Ok(file);
            }
        }
        Err(not_in_pack())
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
    ///
    /// `start` 0 counts as 1; a reversed range is swapped; a range starting past the end yields
    /// the single line "(file has N lines)".
    pub fn read_lines(&self, path: &str, start: u32, end: u32) -> Result<String, PackError> {
        let file = self.resolve(path)?;
        let (mut start, mut end) = (start.max(1), end.max(1));
        if end < start {
            std::mem::swap(&mut start, &mut end);
        }
        if start > file.line_count {
            return Ok(format!("(file has {} lines)\n", file.line_count));
        }
        let end = end.min(file.line_count);
        let mut out = String::new();
        for (n, line) in (start..=end).zip(file.content.lines().skip(start as usize - 1)) {
            let _ = writeln!(out, "{n:>5} | {line}");
        }
        Ok(out)
    }

    /// Regex search over files under `path_prefix` (a directory or a file; empty = all). At most
    /// `cap` hits, in path then line order. Each hit's text is trimmed and cut to 200 characters
    /// around the match.
    pub fn grep(
        &self,
        pattern: &str,
        path_prefix: &str,
        cap: usize,
    ) -> Result<Vec<GrepHit>, PackError> {
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .dfa_size_limit(1 << 20)
            .build()
            .map_err(|e| PackError::BadPattern {
                pattern: pattern.to_string(),
                reason: e
                    .to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            })?;
        let prefix = self
            .normalize(path_prefix)
            .ok_or_else(|| PackError::NotInPack(path_prefix.to_string()))?;
        let mut hits = Vec::new();
        if cap == 0 {
            return Ok(hits);
        }
        for file in self.files.values().filter(|f| under(&f.path, &prefix)) {
            for (idx, line) in file.content.lines().enumerate() {
                let Some(m) = re.find(line) else { continue };
                hits.push(GrepHit {
                    path: file.path.clone(),
                    line: u32::try_from(idx + 1).unwrap_or(u32::MAX),
                    text: clip_around(line, m.start(), GREP_TEXT_CHARS),
                });
                if hits.len() >= cap {
                    return Ok(hits);
                }
            }
        }
        Ok(hits)
    }

    /// Indented tree of at most `max_entries` entries and `max_depth` levels; ends with
    /// "… N more entries" when capped.
    ///
    /// Directories come before files at each level, both in byte order of their names;
    /// directories carry a trailing '/' and each level indents by two spaces. Entries deeper than
    /// `max_depth` are neither shown nor counted.
    pub fn tree(&self, max_entries: usize, max_depth: usize) -> String {
        let mut root = TreeNode::default();
        for path in self.files.keys() {
            root.insert(path);
        }
        let mut sink = TreeSink {
            max_entries,
            shown: 0,
            hidden: 0,
            out: String::new(),
        };
        root.render(0, max_depth, &mut sink);
        if sink.hidden > 0 {
            let _ = writeln!(sink.out, "… {} more entries", sink.hidden);
        }
        sink.out
    }

    /// Immediate children of a directory ("" = root): files and subdirectories (with trailing '/').
    ///
    /// Subdirectories first, then files, each sorted; "", "." and "/" name the root. A path that
    /// is not a directory of the pack is `NotInPack`.
    pub fn list_directory(&self, dir: &str) -> Result<Vec<String>, PackError> {
        let norm = self
            .normalize(dir)
            .ok_or_else(|| PackError::NotInPack(dir.to_string()))?;
        let prefix = if norm.is_empty() {
            String::new()
        } else {
            format!("{norm}/")
        };
        let mut dirs = BTreeSet::new();
        let mut files = Vec::new();
        for path in self
            .files
            .range::<str, _>((
                std::ops::Bound::Included(prefix.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
        {
            let rest = &path[prefix.len()..];
            match rest.split_once('/') {
                Some((sub, _)) => {
                    dirs.insert(format!("{sub}/"));
                }
                None => files.push(rest.to_string()),
            }
        }
        if !norm.is_empty() && dirs.is_empty() && files.is_empty() {
            return Err(PackError::NotInPack(dir.to_string()));
        }
        let mut out: Vec<String> = dirs.into_iter().collect();
        out.extend(files);
        Ok(out)
    }

    /// Deterministic scout facts: language histogram, kind counts, key files (README, manifests,
    /// entry points), total lines.
    pub fn facts(&self) -> PackFacts {
        let mut languages: BTreeMap<&str, usize> = BTreeMap::new();
        let mut kinds = BTreeMap::new();
        let mut total_lines = 0u64;
        let mut total_bytes = 0u64;
        let mut key_files = Vec::new();
        for file in self.files.values() {
            *languages.entry(file.language.as_str()).or_default() += 1;
            *kinds.entry(file.kind.as_str().to_string()).or_default() += 1;
            total_lines += u64::from(file.line_count);
            total_bytes += file.size;
            if is_key_file(&file.path) {
                key_files.push(file.path.clone());
            }
        }
        let mut languages: Vec<(String, usize)> = languages
            .into_iter()
            .map(|(l, n)| (l.to_string(), n))
            .collect();
        // Stable sort keeps the name order among equal counts.
        languages.sort_by_key(|l| std::cmp::Reverse(l.1));
        key_files.sort_by(|a, b| {
            let depth = |p: &str| p.matches('/').count();
            depth(a).cmp(&depth(b)).then_with(|| a.cmp(b))
        });
        key_files.truncate(MAX_KEY_FILES);
        PackFacts {
            file_count: self.files.len(),
            total_lines,
            total_bytes,
            languages,
            kinds,
            key_files,
            skipped_count: self.skipped.len(),
        }
    }

    /// The '/'-separated path relative to the root that `raw` names, "" for the root itself, or
    /// None when it cannot name anything inside the pack.
    fn normalize(&self, raw: &str) -> Option<String> {
        let quotes: &[char] = &['"', '\'', '`'];
        let mut s = raw.trim();
        loop {
            let t = s.trim_matches(quotes).trim();
            if t.len() == s.len() {
                break;
            }
            s = t;
        }
        if s.contains('\0') || s.starts_with('\\') {
            return None;
        }
        let b = s.as_bytes();
        if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
            return None;
        }
        if s.starts_with('/') {
            if let Some(root) = self.root.to_str() {
                let root = root.trim_end_matches('/');
                if !root.is_empty() {
                    if s == root {
                        s = "";
                    } else if let Some(rest) = s.strip_prefix(root).filter(|r| r.starts_with('/')) {
                        s = rest;
                    }
                }
            }
        }
        let mut parts = Vec::new();
        for seg in s.split('/') {
            match seg {
                "" | "." => {}
                ".." => return None,
                seg => parts.push(seg),
            }
        }
        Some(parts.join("/"))
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

/// What [`TreeRules::decide`] says about one path of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeDecision {
    /// Read its content and check it with [`TreeRules::admit_content`].
    Admit,
    /// Left out silently, as a walk leaves out ignored files and excluded directories.
    Ignored,
    /// Left out and listed in `skipped` with this reason.
    Skip(String),
}

/// The rules of [`ContextPack::snapshot`] for a file listing that does not come from walking a
/// directory — a git tree: excluded directories, the `.gitignore` / `.ignore` files found in
/// the listing itself, `exclude` globs, secrets, `.quorum.toml`, and (on content) size, binary
/// and UTF-8. A change review's pack and its hunks go through these, so a file a snapshot would
/// leave out never reaches a prompt from a tree either.
#[derive(Debug)]
pub struct TreeRules {
    opts: PackOptions,
    base: String,
    overrides: ignore::overrides::Override,
    /// (directory of the ignore file relative to the listing's root, "" = root, its matcher),
    /// deepest directory first so the nearest ignore file decides, as in a walk.
    ignores: Vec<(String, ignore::gitignore::Gitignore)>,
}

impl TreeRules {
    /// `base` is the target's directory inside the listing ("" = its root), so ignore files
    /// above the target apply as they do to a subdirectory walk of a checkout.
    /// `ignore_files`: (path relative to the listing's root, content) of every `.gitignore` and
    /// `.ignore` on the way to and under the target; used only when `opts.respect_gitignore`.
    pub fn new(
        opts: &PackOptions,
        base: &str,
        ignore_files: &[(String, String)],
    ) -> Result<TreeRules, PackError> {
        let mut overrides = ignore::overrides::OverrideBuilder::new("");
        let mut add = |glob: &str, shown: &str| {
            overrides
                .add(&format!("!{glob}"))
                .map(|_| ())
                .map_err(|e| PackError::BadPattern {
                    pattern: shown.to_string(),
                    reason: e.to_string(),
                })
        };
        add(&format!("/{REPO_CONFIG_FILE}"), REPO_CONFIG_FILE)?;
        for pattern in &opts.exclude {
            let glob = pattern.trim().trim_start_matches('!');
            if !glob.is_empty() {
                add(glob, pattern)?;
            }
        }
        let overrides = overrides.build().map_err(|e| PackError::BadPattern {
            pattern: opts.exclude.join(", "),
            reason: e.to_string(),
        })?;
        let mut ignores = Vec::new();
        if opts.respect_gitignore {
            for (path, content) in ignore_files {
                let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                let mut b = ignore::gitignore::GitignoreBuilder::new("");
                for line in content.lines() {
                    // A bad line is skipped, as git and the directory walk skip it.
                    let _ = b.add_line(None, line);
                }
                if let Ok(gi) = b.build() {
                    ignores.push((dir.to_string(), gi));
                }
            }
            ignores.sort_by_key(|(dir, _)| {
                std::cmp::Reverse(dir.matches('/').count() + usize::from(!dir.is_empty()))
            });
        }
        Ok(TreeRules {
            opts: opts.clone(),
            base: base.trim_matches('/').to_string(),
            overrides,
            ignores,
        })
    }

    /// Decide on a path ('/'-separated, relative to the target root) before reading it.
    pub fn decide(&self, path: &str) -> TreeDecision {
        let parts: Vec<&str> = path.split('/').collect();
        let (dirs, name) = parts.split_at(parts.len().saturating_sub(1));
        let name = name.first().copied().unwrap_or_default();
        if dirs
            .iter()
            .any(|d| *d == ".git" || is_always_excluded_dir(d))
            || name == ".git"
        {
            return TreeDecision::Ignored;
        }
        // Directories first (a walk never descends into an excluded one), then the file.
        for i in 1..=dirs.len() {
            let dir = dirs[..i].join("/");
            if self.overrides.matched(&dir, true).is_ignore() || self.ignored(&dir, true) {
                return TreeDecision::Ignored;
            }
        }
        if self.overrides.matched(path, false).is_ignore() || self.ignored(path, false) {
            return TreeDecision::Ignored;
        }
        if self.opts.exclude_secrets && is_secret_file_name(name) {
            return TreeDecision::Skip("secret".to_string());
        }
        TreeDecision::Admit
    }

    /// The nearest ignore file with an opinion on `path` decides.
    fn ignored(&self, path: &str, is_dir: bool) -> bool {
        let full;
        let path = if self.base.is_empty() {
            path
        } else {
            full = format!("{}/{path}", self.base);
            full.as_str()
        };
        for (dir, gi) in &self.ignores {
            let rel = if dir.is_empty() {
                path
            } else if let Some(rest) = path
                .strip_prefix(dir.as_str())
                .and_then(|r| r.strip_prefix('/'))
            {
                rest
            } else {
                continue;
            };
            if rel.is_empty() {
                continue;
            }
            match gi.matched(rel, is_dir) {
                ignore::Match::Ignore(_) => return true,
                ignore::Match::Whitelist(_) => return false,
                ignore::Match::None => {}
            }
        }
        false
    }

    /// Whether a blob of `size` bytes may be read at all (`Err` = the skip reason).
    pub fn admit_size(&self, size: u64) -> Result<(), String> {
        if size > self.opts.max_file_bytes {
            return Err(format!(
                "too large ({size} bytes > {} bytes)",
                self.opts.max_file_bytes
            ));
        }
        Ok(())
    }

    /// Check content as [`ContextPack::snapshot`] checks a file: size, binary, UTF-8.
    pub fn admit_content(&self, bytes: Vec<u8>) -> Result<Arc<str>, String> {
        self.admit_size(bytes.len() as u64)?;
        text_of(bytes)
    }
}

/// Bytes as pack text, or the `skipped` reason ("binary").
fn text_of(buf: Vec<u8>) -> Result<Arc<str>, String> {
    if buf[..buf.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return Err("binary".to_string());
    }
    let text = String::from_utf8(buf).map_err(|_| "binary".to_string())?;
    Ok(Arc::from(text))
}

fn is_always_excluded_dir(name: &str) -> bool {
    ALWAYS_EXCLUDED_DIRS.contains(&name)
}

/// A gitignore-syntax matcher for one glob, rooted at the target ("" = relative paths).
pub(crate) fn glob_matcher(glob: &str) -> Option<ignore::gitignore::Gitignore> {
    let mut b = ignore::gitignore::GitignoreBuilder::new("");
    b.add_line(None, glob.trim()).ok()?;
    b.build().ok()
}

/// Whether a file name looks like it holds credentials or keys. Such files never enter a pack
/// (when `exclude_secrets`), so no agent can read them and no prompt can carry them.
pub fn is_secret_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower == ".env" {
        return true;
    }
    if let Some(variant) = lower.strip_prefix(".env.") {
        // Templates are committed on purpose and hold no values.
        return !matches!(variant, "example" | "sample" | "template");
    }
    const EXACT: &[&str] = &[
        "credentials",
        "credentials.json",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "secrets.yaml",
        "secrets.yml",
        "secrets.json",
        ".htpasswd",
    ];
    const SUFFIXES: &[&str] = &[
        ".pem",
        ".key",
        ".p12",
        ".pfx",
        ".keystore",
        ".jks",
        ".credentials",
        ".secret",
    ];
    const PREFIXES: &[&str] = &["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];
    EXACT.contains(&lower.as_str())
        || SUFFIXES.iter().any(|s| lower.ends_with(s))
        || PREFIXES.iter().any(|p| lower.starts_with(p))
        || (lower.starts_with("service-account") && lower.ends_with(".json"))
}

/// The identity of a file as the walk saw it, checked again on the opened handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    /// A deleted file's inode number can be reused at once; the change time tells them apart.
    ctime: (i64, i64),
}

impl FileId {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    #[cfg(not(unix))]
    fn of(_meta: &std::fs::Metadata) -> FileId {
        FileId {
            dev: 0,
            ino: 0,
            ctime: (0, 0),
        }
    }
}

/// Decide whether one walked regular file enters the pack; `Err` carries the `skipped` reason.
/// Read, check and hash the walked regular files on every core: the walk decides (in order,
/// on one thread); reading and blake3 are the bulk of a pack's cost and are independent per
/// file. The result comes back in the walk's order, so the pack does not depend on timing.
fn admit_in_parallel(
    regular: Vec<(String, PathBuf)>,
    walked: &BTreeMap<String, FileId>,
    opts: &PackOptions,
) -> Vec<(String, Result<PackFile, String>)> {
    let admit = |(rel, path): &(String, PathBuf)| {
        let id = walked.get(rel).copied();
        admit_file(path, rel, id, opts).map(|content| PackFile::new(rel.clone(), content))
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(16);
    // Few files are not worth a thread each.
    if threads <= 1 || regular.len() < 64 {
        return regular.iter().map(|f| (f.0.clone(), admit(f))).collect();
    }
    let chunk = regular.len().div_ceil(threads);
    let mut out: Vec<Vec<(String, Result<PackFile, String>)>> = Vec::new();
    std::thread::scope(|scope| {
        let workers: Vec<_> = regular
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|f| (f.0.clone(), admit(f)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for w in workers {
            // A worker panics only on a bug; its files are then reported, not lost silently.
            out.push(w.join().unwrap_or_default());
        }
    });
    let mut all: Vec<_> = out.into_iter().flatten().collect();
    // A panicked chunk would leave files unaccounted for; say so rather than drop them.
    if all.len() < regular.len() {
        let seen: std::collections::BTreeSet<&str> = all.iter().map(|(r, _)| r.as_str()).collect();
        let missing: Vec<String> = regular
            .iter()
            .filter(|(r, _)| !seen.contains(r.as_str()))
            .map(|(r, _)| r.clone())
            .collect();
        for rel in missing {
            all.push((rel, Err("internal error while reading".to_string())));
        }
    }
    all
}

/// [`admit_in_parallel`] for a pack too large to hold: the files are read in groups of about
/// [`SPILL_GROUP_BYTES`] (in walk order), each group's texts appended to one spill file and
/// dropped, and the file mapped at the end, so at most a group is on the heap at a time.
fn admit_spilled(
    regular: Vec<(String, PathBuf)>,
    sizes: &[u64],
    walked: &BTreeMap<String, FileId>,
    opts: &PackOptions,
) -> std::io::Result<Vec<(String, Result<PackFile, String>)>> {
    let mut spill = text::Spill::create(&std::env::temp_dir())?;
    let mut out: Vec<(String, Result<PackFile, String>)> = Vec::with_capacity(regular.len());
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut group: Vec<(String, PathBuf)> = Vec::new();
    let mut group_bytes = 0u64;
    let mut flush = |group: &mut Vec<(String, PathBuf)>,
                     out: &mut Vec<(String, Result<PackFile, String>)>|
     -> std::io::Result<()> {
        for (rel, admitted) in admit_in_parallel(std::mem::take(group), walked, opts) {
            let admitted = match admitted {
                Ok(mut file) => {
                    let at = spill.push(&file.content)?;
                    slots.push((out.len(), at));
                    file.content = Text::default();
                    Ok(file)
                }
                Err(e) => Err(e),
            };
            out.push((rel, admitted));
        }
        Ok(())
    };
    for (entry, size) in regular.into_iter().zip(sizes.iter().copied()) {
        group.push(entry);
        group_bytes += size;
        if group_bytes >= SPILL_GROUP_BYTES {
            flush(&mut group, &mut out)?;
            group_bytes = 0;
        }
    }
    flush(&mut group, &mut out)?;
    let texts = spill.finish()?;
    for (i, at) in slots {
        if let (Some((_, Ok(file))), Some(text)) = (out.get_mut(i), texts.get(at)) {
            file.content = text.clone();
        }
    }
    Ok(out)
}

fn admit_file(
    path: &Path,
    rel: &str,
    id: Option<FileId>,
    opts: &PackOptions,
) -> Result<Arc<str>, String> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if opts.exclude_secrets && is_secret_file_name(name) {
        return Err("secret".to_string());
    }
    read_checked(path, id, opts.max_file_bytes)
}

/// Decide whether one walked symlink enters the pack: only when it points at a regular file the
/// walk itself admitted as a path — so a link obeys `.gitignore`, `pack.exclude` and the
/// always-excluded directories exactly like the file it names.
fn admit_symlink(
    canon_root: &Path,
    path: &Path,
    rel: &str,
    walked: &BTreeMap<String, FileId>,
    opts: &PackOptions,
) -> Result<Arc<str>, String> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if opts.exclude_secrets && is_secret_file_name(name) {
        return Err("secret".to_string());
    }
    {
        let target = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
        let Ok(target_rel) = target.strip_prefix(canon_root) else {
            return Err("symlink outside root".to_string());
        };
        let meta = std::fs::metadata(&target).map_err(|e| e.to_string())?;
        if meta.is_dir() {
            // Its contents inside the root are walked under their real path.
            return Err("symlink to directory (not followed)".to_string());
        }
        // A link must not smuggle in what the walk itself refuses.
        let mut dirs = target_rel.components().rev().skip(1);
        if dirs.any(|c| {
            c.as_os_str()
                .to_str()
                .is_some_and(|d| d == ".git" || is_always_excluded_dir(d))
        }) {
            return Err("symlink into excluded directory".to_string());
        }
        let target_name = target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if opts.exclude_secrets && is_secret_file_name(target_name) {
            return Err("secret".to_string());
        }
        if !meta.is_file() {
            return Err("not a regular file".to_string());
        }
        let target_rel = target_rel.to_str().map(|t| t.replace('\\', "/"));
        let Some(id) = target_rel.as_deref().and_then(|t| walked.get(t)) else {
            return Err(
                "symlink to an ignored or excluded path (.gitignore or pack.exclude)".to_string(),
            );
        };
        read_checked(&target, Some(*id), opts.max_file_bytes)
    }
}

/// Open without following a symlink in the last component (a fifo does not block the open
/// either), then decide on the handle, not the path: it must be a regular file, the very inode
/// the walk saw, and within the size limit. Nothing swapped in between the walk and the read —
/// a symlink, another file, a fifo — is read.
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    opts.open(path)
}

fn read_checked(path: &Path, id: Option<FileId>, max_bytes: u64) -> Result<Arc<str>, String> {
    let file = open_no_follow(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return "became a symlink while the snapshot was taken (not followed)".to_string();
        }
        e.to_string()
    })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    if id.is_some_and(|id| FileId::of(&meta) != id) {
        return Err("replaced while the snapshot was taken (not read)".to_string());
    }
    let too_large = |n: u64| format!("too large ({n} bytes > {max_bytes} bytes)");
    if meta.len() > max_bytes {
        return Err(too_large(meta.len()));
    }
    let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow between stat and read; never read past the limit.
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    if buf.len() as u64 > max_bytes {
        return Err(too_large(buf.len() as u64));
    }
    text_of(buf)
}

/// The path an ignore-walk error is about, when it names one.
fn walk_error_path(err: &ignore::Error) -> Option<PathBuf> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithLineNumber { err, .. } | ignore::Error::WithDepth { err, .. } => {
            walk_error_path(err)
        }
        ignore::Error::Partial(errs) => errs.iter().find_map(walk_error_path),
        ignore::Error::Loop { child, .. } => Some(child.clone()),
        _ => None,
    }
}

/// '/'-separated path of `path` relative to `root`; None when a component is not UTF-8.
fn rel_path(root: &Path, path: &Path) -> Option<String> {
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

fn rel_display(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// "src/a.rs:12", "src/a.rs:12-20", "src/a.rs:12:5" or "src/a.rs#L12-L20" without the location.
fn strip_location_suffix(s: &str) -> Option<&str> {
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
fn under(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// `line` trimmed and, when longer than `max` characters, cut to a `max`-character window that
/// shows the match starting at byte `match_start` (elided ends marked with '…').
fn clip_around(line: &str, match_start: usize, max: usize) -> String {
    let lead = line.len() - line.trim_start().len();
    let t = line.trim();
    let total = t.chars().count();
    if total <= max {
        return t.to_string();
    }
    let ms = match_start.saturating_sub(lead).min(t.len());
    let match_char = t.char_indices().take_while(|(i, _)| *i < ms).count();
    let start = match_char.saturating_sub(max / 4).min(total - max);
    let lead_mark = start > 0;
    let trail_mark = start + max < total;
    let body_start = start + usize::from(lead_mark);
    let body_len = max - usize::from(lead_mark) - usize::from(trail_mark);
    let mut out = String::new();
    if lead_mark {
        out.push('…');
    }
    out.extend(t.chars().skip(body_start).take(body_len));
    if trail_mark {
        out.push('…');
    }
    out
}

#[derive(Default)]
struct TreeNode {
    dirs: BTreeMap<String, TreeNode>,
    files: Vec<String>,
}

impl TreeNode {
    fn insert(&mut self, path: &str) {
        let mut node = self;
        let mut segs = path.split('/').peekable();
        while let Some(seg) = segs.next() {
            if segs.peek().is_none() {
                node.files.push(seg.to_string());
            } else {
                node = node.dirs.entry(seg.to_string()).or_default();
            }
        }
    }

    fn render(&self, depth: usize, max_depth: usize, sink: &mut TreeSink) {
        if depth >= max_depth {
            return;
        }
        for (name, child) in &self.dirs {
            sink.emit(depth, name, "/");
            child.render(depth + 1, max_depth, sink);
        }
        for name in &self.files {
            sink.emit(depth, name, "");
        }
    }
}

/// Collects tree lines up to a cap and counts the ones left out.
struct TreeSink {
    max_entries: usize,
    shown: usize,
    hidden: usize,
    out: String,
}

impl TreeSink {
    fn emit(&mut self, depth: usize, name: &str, suffix: &str) {
        if self.shown < self.max_entries {
            let _ = writeln!(self.out, "{:indent$}{name}{suffix}", "", indent = depth * 2);
            self.shown += 1;
        } else {
            self.hidden += 1;
        }
    }
}

/// README/LICENSE-like documents, build manifests and conventional entry points.
fn is_key_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let upper = name.to_ascii_uppercase();
    const DOC_PREFIXES: &[&str] = &[
        "README",
        "LICENSE",
        "LICENCE",
        "CONTRIBUTING",
        "SECURITY",
        "ARCHITECTURE",
    ];
    if DOC_PREFIXES.iter().any(|p| {
        upper
            .strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-', '_']))
    }) {
        return true;
    }
    const EXACT: &[&str] = &[
        "Cargo.toml",
        "package.json",
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "Pipfile",
        "go.mod",
        "pom.xml",
        "Makefile",
        "CMakeLists.txt",
        "Dockerfile",
        "compose.yml",
        "compose.yaml",
        "Gemfile",
        "composer.json",
        "foundry.toml",
        "main.rs",
        "lib.rs",
        "main.py",
        "__main__.py",
        "app.py",
        "index.js",
        "index.ts",
        "main.go",
        "Main.java",
    ];
    EXACT.contains(&name)
        || name.starts_with("build.gradle")
        || name.starts_with("hardhat.config.")
        || (name.starts_with("docker-compose")
            && (name.ends_with(".yml") || name.ends_with(".yaml")))
        || (name.starts_with("requirements") && name.ends_with(".txt"))
}

/// The HEAD commit of the git checkout containing `start`, read from the repository files
/// without running git. None when `start` is not in a checkout or anything is unreadable.
pub fn git_head_sha(start: &Path) -> Option<String> {
    find_git_dir(start).as_deref().and_then(read_head_sha)
}

/// Where `start` sits inside the git work tree containing it: '/'-separated and relative to the
/// work tree's root ("" for the root itself), for reports that name files relative to the
/// repository. None when `start` is not in a checkout. The path is taken as given (canonicalize
/// it first for a symlinked checkout).
pub fn git_work_tree_prefix(start: &Path) -> Option<String> {
    let top = start
        .ancestors()
        .find(|dir| std::fs::metadata(dir.join(".git")).is_ok())?;
    rel_path(top, start)
}

/// The git directory of the checkout containing `start`: `.git` itself, or the directory a
/// `.git` file ("gitdir: …", worktrees and submodules) points to.
fn find_git_dir(start: &Path) -> Option<PathBuf> {
    for dir in start.ancestors() {
        let dotgit = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dotgit) else {
            continue;
        };
        if meta.is_dir() {
            return Some(dotgit);
        }
        let text = std::fs::read_to_string(&dotgit).ok()?;
        let target = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("gitdir:"))?
            .trim();
        let target = Path::new(target);
        return Some(if target.is_absolute() {
            target.to_path_buf()
        } else {
            dir.join(target)
        });
    }
    None
}

fn read_head_sha(git_dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    // Linked worktrees keep HEAD locally but branch refs in the common directory.
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .map(|c| {
            let p = Path::new(c.trim());
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                git_dir.join(p)
            }
        })
        .unwrap_or_else(|| git_dir.to_path_buf());
    resolve_git_ref(head.trim(), git_dir, &common, 0)
}

fn resolve_git_ref(value: &str, git_dir: &Path, common: &Path, depth: u32) -> Option<String> {
    if depth > 5 {
        return None;
    }
    let Some(name) = value.strip_prefix("ref:") else {
        return is_sha(value).then(|| value.to_ascii_lowercase());
    };
    let name = name.trim();
    if name.is_empty()
        || name.starts_with('/')
        || name.split('/').any(|s| s == ".." || s.is_empty())
    {
        return None;
    }
    for dir in [git_dir, common] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            return resolve_git_ref(text.trim(), git_dir, common, depth + 1);
        }
    }
    for dir in [common, git_dir] {
        let Ok(packed) = std::fs::read_to_string(dir.join("packed-refs")) else {
            continue;
        };
        let found = packed.lines().find_map(|line| {
            let (sha, refname) = line.trim().split_once(' ')?;
            (refname.trim() == name && is_sha(sha)).then(|| sha.to_ascii_lowercase())
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

fn is_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Language and kind of a file, by file name, then extension, then shebang (see the module doc
/// for the kind rule).
fn classify(path: &str, content: &str) -> (&'static str, FileKind) {
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some(found) = classify_by_name(name) {
        return found;
    }
    let ext = name
        .rfind('.')
        .filter(|&i| i > 0 && i + 1 < name.len())
        .map(|i| name[i + 1..].to_ascii_lowercase());
    if let Some(lang) = ext.as_deref().and_then(language_by_extension) {
        return (lang, kind_of_language(lang));
    }
    if let Some(lang) = language_by_shebang(content) {
        return (lang, kind_of_language(lang));
    }
    ("unknown", FileKind::Data)
}

fn classify_by_name(name: &str) -> Option<(&'static str, FileKind)> {
    use FileKind::{Code, Config, Doc};
    let found = match name {
        "Dockerfile" | "dockerfile" | "Containerfile" => ("dockerfile", Config),
        "Makefile" | "makefile" | "GNUmakefile" => ("makefile", Config),
        "CMakeLists.txt" => ("cmake", Config),
        "Gemfile" | "Podfile" | "Brewfile" => ("ruby", Config),
        "Rakefile" | "Vagrantfile" | "Guardfile" | "Fastfile" => ("ruby", Code),
        "Jenkinsfile" => ("groovy", Config),
        "BUILD" | "BUILD.bazel" | "WORKSPACE" | "WORKSPACE.bazel" | "MODULE.bazel" => {
            ("starlark", Config)
        }
        "go.mod" | "go.sum" | "go.work" => ("go-module", Config),
        "Cargo.lock" | "poetry.lock" | "uv.lock" | "Pipfile" => ("toml", Config),
        "Pipfile.lock" | "composer.lock" | "flake.lock" => ("json", Config),
        ".gitignore" | ".dockerignore" | ".npmignore" | ".prettierignore" | ".eslintignore"
        | ".ignore" | ".helmignore" => ("gitignore", Config),
        ".gitattributes" => ("gitattributes", Config),
        ".gitmodules" | ".editorconfig" => ("ini", Config),
        ".bashrc" | ".bash_profile" | ".zshrc" | ".profile" => ("shell", Code),
        "CODEOWNERS" | "OWNERS" => ("codeowners", Config),
        "NOTICE" | "AUTHORS" | "CONTRIBUTORS" | "CHANGELOG" | "CHANGES" | "README" | "VERSION"
        | "TODO" => ("text", Doc),
        _ => {
            let lower = name.to_ascii_lowercase();
            let upper = name.to_ascii_uppercase();
            if name.starts_with("Dockerfile.") || lower.ends_with(".dockerfile") {
                ("dockerfile", Config)
            } else if lower.starts_with(".env") {
                ("dotenv", Config)
            } else if lower.starts_with("requirements") && lower.ends_with(".txt") {
                ("text", Config)
            } else if lower.ends_with(".gradle.kts") {
                ("kotlin", Config)
            } else if lower.ends_with(".gradle") {
                ("groovy", Config)
            } else if lower.ends_with(".lock") {
                ("lockfile", Config)
            } else if lower.ends_with("-lock.json") {
                ("json", Config)
            } else if lower.ends_with("-lock.yaml") {
                ("yaml", Config)
            } else if (upper.starts_with("LICEN") || upper.starts_with("COPYING"))
                && !name.contains('.')
            {
                ("text", Doc)
            } else {
                return None;
            }
        }
    };
    Some(found)
}

fn language_by_extension(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "rs" => "rust",
        "py" | "pyi" | "pyw" | "pyx" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "tsx" | "mts" | "cts" => "typescript",
        "go" => "go",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" | "inl" | "cu"
        | "cuh" => "cpp",
        "cs" => "csharp",
        "fs" | "fsx" | "fsi" => "fsharp",
        "vb" => "vb",
        "rb" | "rake" | "gemspec" | "ru" => "ruby",
        "php" | "phtml" => "php",
        "swift" => "swift",
        "scala" | "sc" | "sbt" => "scala",
        "sh" | "bash" | "zsh" | "ksh" | "fish" => "shell",
        "ps1" | "psm1" | "psd1" => "powershell",
        "bat" | "cmd" => "batch",
        "pl" | "pm" => "perl",
        "sql" | "psql" | "ddl" => "sql",
        "html" | "htm" | "xhtml" => "html",
        "css" => "css",
        "scss" | "sass" => "scss",
        "less" => "less",
        "vue" => "vue",
        "svelte" => "svelte",
        "dart" => "dart",
        "zig" => "zig",
        "nim" => "nim",
        "ml" | "mli" => "ocaml",
        "clj" | "cljs" | "cljc" => "clojure",
        "elm" => "elm",
        "groovy" | "gvy" => "groovy",
        "m" => "objective-c",
        "mm" => "objective-cpp",
        "asm" | "s" => "assembly",
        "f" | "f90" | "f95" | "f03" | "for" => "fortran",
        "r" => "r",
        "jl" => "julia",
        "lua" => "lua",
        "hs" | "lhs" => "haskell",
        "ex" | "exs" => "elixir",
        "erl" | "hrl" => "erlang",
        "tf" | "tfvars" => "terraform",
        "proto" => "protobuf",
        "sol" => "solidity",
        "vy" => "vyper",
        "move" => "move",
        "cairo" => "cairo",
        "graphql" | "gql" => "graphql",
        "awk" => "awk",
        "tcl" => "tcl",
        "ipynb" => "jupyter",
        "diff" | "patch" => "diff",
        "wat" => "webassembly",
        "md" | "markdown" | "mdx" => "markdown",
        "rst" => "restructuredtext",
        "txt" | "text" => "text",
        "adoc" | "asciidoc" => "asciidoc",
        "org" => "org",
        "tex" | "sty" | "cls" | "ltx" => "latex",
        "bib" => "bibtex",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        "json" | "json5" | "jsonc" => "json",
        "xml" | "xsd" | "xsl" | "xslt" | "plist" | "csproj" | "vbproj" | "fsproj" | "props"
        | "targets" | "pom" | "wsdl" => "xml",
        "hcl" => "hcl",
        "nix" => "nix",
        "cmake" => "cmake",
        "mk" | "mak" => "makefile",
        "dockerfile" => "dockerfile",
        "ini" | "cfg" | "conf" | "cnf" => "ini",
        "properties" => "properties",
        "env" => "dotenv",
        "jsonl" | "ndjson" => "jsonl",
        "csv" => "csv",
        "tsv" | "tab" => "tsv",
        "svg" => "svg",
        "log" => "log",
        _ => return None,
    })
}

fn language_by_shebang(content: &str) -> Option<&'static str> {
    let first = content.lines().next()?.strip_prefix("#!")?;
    let mut words = first.split_whitespace();
    let interpreter = words.next()?;
    let mut program = interpreter.rsplit('/').next().unwrap_or(interpreter);
    if program == "env" {
        // "#!/usr/bin/env -S python3 -u", "#!/usr/bin/env VAR=1 node"
        program = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        program = program.rsplit('/').next().unwrap_or(program);
    }
    if program.starts_with("python") || program.starts_with("pypy") {
        return Some("python");
    }
    if program.starts_with("perl") {
        return Some("perl");
    }
    Some(match program {
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "fish" => "shell",
        "node" | "nodejs" | "deno" | "bun" => "javascript",
        "ts-node" | "tsx" => "typescript",
        "ruby" | "jruby" => "ruby",
        "php" => "php",
        "lua" | "luajit" => "lua",
        "Rscript" => "r",
        "julia" => "julia",
        "awk" | "gawk" => "awk",
        "tclsh" | "wish" => "tcl",
        "elixir" => "elixir",
        "escript" => "erlang",
        "scala" => "scala",
        "groovy" => "groovy",
        "pwsh" => "powershell",
        "swift" => "swift",
        "runghc" | "runhaskell" => "haskell",
        _ => return None,
    })
}

fn kind_of_language(language: &str) -> FileKind {
    match language {
        "yaml" | "toml" | "json" | "xml" | "ini" | "properties" | "dotenv" | "hcl" | "nix"
        | "cmake" | "makefile" | "dockerfile" | "starlark" | "go-module" | "lockfile"
        | "gitignore" | "gitattributes" | "codeowners" => FileKind::Config,
        "markdown" | "restructuredtext" | "text" | "asciidoc" | "org" | "latex" | "bibtex" => {
            FileKind::Doc
        }
        "csv" | "tsv" | "jsonl" | "svg" | "log" | "unknown" => FileKind::Data,
        _ => FileKind::Code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, content: &[u8]) {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, content).unwrap();
    }

    fn snap(root: &Path) -> ContextPack {
        ContextPack::snapshot(root, &PackOptions::default()).unwrap()
    }

    fn reason_for<'a>(pack: &'a ContextPack, path: &str) -> Option<&'a str> {
        pack.skipped
            .iter()
            .find(|s| s.path == path)
            .map(|s| s.reason.as_str())
    }

    fn mem(files: &[(&str, &str)]) -> ContextPack {
        ContextPack::from_files(
            PathBuf::from("/repo"),
            None,
            files
                .iter()
                .map(|(p, c)| (p.to_string(), c.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_pack_past_the_spill_bound_is_the_same_pack_read_from_a_mapped_spill() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..300 {
            write(
                dir.path(),
                &format!("src/m{:03}.py", i),
                format!("def f{i}():\n    return \"{}\"\n", "é".repeat(i % 7)).as_bytes(),
            );
        }
        write(dir.path(), ".env", b"SECRET=1\n");
        write(dir.path(), "blob.bin", b"\0\x01\x02");
        let held = ContextPack::snapshot(dir.path(), &PackOptions::default()).unwrap();
        let opts = PackOptions {
            spill_above_bytes: 1,
            ..PackOptions::default()
        };
        let spilled = ContextPack::snapshot(dir.path(), &opts).unwrap();
        assert_eq!(spilled.len(), 300);
        assert_eq!(
            spilled.skipped, held.skipped,
            "the same exclusions, for the same reasons"
        );
        for (path, f) in &held.files {
            let s = spilled.get(path).unwrap();
            assert!(s.content.is_spilled(), "{path}");
            assert!(!f.content.is_spilled());
            assert_eq!(&*s.content, &*f.content, "{path}");
            assert_eq!(
                (&s.hash, s.size, s.line_count),
                (&f.hash, f.size, f.line_count)
            );
        }
        let hits = spilled.grep("return", "src/", 1000).unwrap();
        assert_eq!(hits.len(), 300, "tools read spilled text like any other");
        // Spilled texts outlive the pack they came from and the snapshot leaves no file.
        let one = spilled.get("src/m005.py").unwrap().content.clone();
        drop(spilled);
        assert!(one.contains("def f5()"));
    }

    #[test]
    fn past_the_pack_budget_files_are_skipped_in_walk_order_and_say_why() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..10 {
            write(dir.path(), &format!("src/m{i}.py"), &[b'a'; 100]);
        }
        // Neither a secret nor a file over max_file_bytes spends the budget.
        write(dir.path(), ".env", &[b's'; 500]);
        write(dir.path(), "a_big.txt", &[b'b'; 2000]);
        let opts = PackOptions {
            max_file_bytes: 1000,
            max_pack_bytes: 450,
            ..PackOptions::default()
        };
        let pack = ContextPack::snapshot(dir.path(), &opts).unwrap();
        let kept: Vec<&str> = pack.files.keys().map(String::as_str).collect();
        assert_eq!(kept, ["src/m0.py", "src/m1.py", "src/m2.py", "src/m3.py"]);
        let over: Vec<&str> = pack
            .skipped
            .iter()
            .filter(|s| s.reason.starts_with("over the pack budget"))
            .map(|s| s.path.as_str())
            .collect();
        assert_eq!(over.len(), 6, "{:?}", pack.skipped);
        assert_eq!(over[0], "src/m4.py");
        assert!(reason_for(&pack, "src/m9.py")
            .unwrap()
            .contains("raise pack.max_pack_bytes"));
        assert_eq!(reason_for(&pack, ".env"), Some("secret"));
        assert!(reason_for(&pack, "a_big.txt")
            .unwrap()
            .starts_with("too large"));
        let survey = ContextPack::survey(dir.path(), &opts).unwrap();
        assert_eq!(
            survey
                .excluded
                .iter()
                .filter(|e| e.reason == survey::ExclusionReason::OverBudget)
                .count(),
            6
        );
        // 0 is no bound.
        let all = ContextPack::snapshot(
            dir.path(),
            &PackOptions {
                max_pack_bytes: 0,
                ..opts
            },
        )
        .unwrap();
        assert_eq!(all.len(), 10);
    }

    #[test]
    fn missing_and_non_directory_roots_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(matches!(
            ContextPack::snapshot(&missing, &PackOptions::default()),
            Err(PackError::Missing(_))
        ));
        write(dir.path(), "f.txt", b"x");
        assert!(matches!(
            ContextPack::snapshot(&dir.path().join("f.txt"), &PackOptions::default()),
            Err(PackError::NotADirectory(_))
        ));
    }

    #[test]
    fn snapshot_captures_text_files_with_metadata() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "src/main.rs",
            b"fn main() {\n    println!(\"hi\");\n}\n",
        );
        write(dir.path(), "README.md", b"# demo\n");
        let pack = snap(dir.path());
        assert_eq!(pack.root, fs::canonicalize(dir.path()).unwrap());
        assert_eq!(pack.len(), 2);
        let main = pack.resolve("src/main.rs").unwrap();
        assert_eq!(main.line_count, 3);
        assert_eq!(main.size, 34);
        assert_eq!(main.language, "rust");
        assert_eq!(main.kind, FileKind::Code);
        assert_eq!(
            main.hash,
            blake3::hash(b"fn main() {\n    println!(\"hi\");\n}\n")
                .to_hex()
                .to_string()
        );
        assert_eq!(pack.resolve("README.md").unwrap().kind, FileKind::Doc);
        assert!(pack.skipped.is_empty(), "{:?}", pack.skipped);
    }

    #[test]
    fn gitignore_is_honoured_without_a_git_repo() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".gitignore", b"*.log\ngenerated/\n");
        write(dir.path(), "app.log", b"noise\n");
        write(dir.path(), "generated/x.rs", b"fn x() {}\n");
        write(dir.path(), "keep.rs", b"fn k() {}\n");
        write(dir.path(), ".ignore", b"scratch.txt\n");
        write(dir.path(), "scratch.txt", b"tmp\n");
        let pack = snap(dir.path());
        assert!(pack.get("keep.rs").is_some());
        assert!(pack.get(".gitignore").is_some());
        assert!(pack.get("app.log").is_none());
        assert!(pack.get("generated/x.rs").is_none());
        assert!(pack.get("scratch.txt").is_none());
        // Ignored files are left out silently.
        assert!(pack.skipped.is_empty(), "{:?}", pack.skipped);

        let opts = PackOptions {
            respect_gitignore: false,
            ..PackOptions::default()
        };
        let all = ContextPack::snapshot(dir.path(), &opts).unwrap();
        assert!(all.get("app.log").is_some());
        assert!(all.get("generated/x.rs").is_some());
        assert!(all.get("scratch.txt").is_some());
    }

    #[test]
    fn default_excluded_dirs_and_exclude_globs() {
        let dir = tempfile::tempdir().unwrap();
        for d in ALWAYS_EXCLUDED_DIRS {
            write(dir.path(), &format!("{d}/inner.txt"), b"x\n");
            write(dir.path(), &format!("nested/{d}/inner.txt"), b"x\n");
        }
        write(dir.path(), "vendor/lib.go", b"package lib\n");
        write(dir.path(), "build.rs", b"fn main() {}\n");
        write(dir.path(), "docs/guide.md", b"# guide\n");
        write(dir.path(), "Cargo.lock", b"# lock\n");
        let opts = PackOptions {
            exclude: vec!["docs/".to_string(), "*.lock".to_string()],
            ..PackOptions::default()
        };
        let pack = ContextPack::snapshot(dir.path(), &opts).unwrap();
        let paths: Vec<&str> = pack.files.keys().map(String::as_str).collect();
        assert_eq!(paths, vec!["build.rs", "vendor/lib.go"]);

        let bad = PackOptions {
            exclude: vec!["a[".to_string()],
            ..PackOptions::default()
        };
        assert!(matches!(
            ContextPack::snapshot(dir.path(), &bad),
            Err(PackError::BadPattern { .. })
        ));
    }

    #[test]
    fn root_named_like_an_excluded_dir_is_still_walked() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "build/a.rs", b"fn a() {}\n");
        let pack = snap(&dir.path().join("build"));
        assert!(pack.get("a.rs").is_some());
    }

    #[test]
    fn secrets_are_skipped_and_templates_kept() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = [
            ".env",
            ".env.local",
            ".env.production",
            "tls/server.pem",
            "server.key",
            "cert.p12",
            "cert.pfx",
            "app.keystore",
            "release.jks",
            "id_rsa",
            "id_rsa.pub",
            "id_dsa",
            "id_ecdsa",
            "id_ed25519",
            "credentials",
            "aws/credentials.json",
            "prod.credentials",
            ".netrc",
            ".npmrc",
            ".pypirc",
            "secrets.yaml",
            "secrets.yml",
            "secrets.json",
            "token.secret",
            "service-account-prod.json",
            ".htpasswd",
        ];
        for s in secrets {
            write(dir.path(), s, b"hunter2\n");
        }
        for keep in [".env.example", ".env.sample", ".env.template", "keys.rs"] {
            write(dir.path(), keep, b"KEY=\n");
        }
        let pack = snap(dir.path());
        for s in secrets {
            assert!(pack.get(s).is_none(), "{s} leaked into the pack");
            assert_eq!(reason_for(&pack, s), Some("secret"), "{s}");
        }
        for keep in [".env.example", ".env.sample", ".env.template", "keys.rs"] {
            assert!(pack.get(keep).is_some(), "{keep} missing");
        }
        assert_eq!(pack.resolve(".env.example").unwrap().language, "dotenv");

        let opts = PackOptions {
            exclude_secrets: false,
            ..PackOptions::default()
        };
        assert!(ContextPack::snapshot(dir.path(), &opts)
            .unwrap()
            .get(".env")
            .is_some());
    }

    #[test]
    fn binary_and_too_large_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "img.png", b"\x89PNG\r\n\x1a\n\0\0\0");
        write(dir.path(), "latin1.txt", b"caf\xe9\n");
        write(dir.path(), "big.txt", &vec![b'a'; 2048]);
        write(dir.path(), "small.txt", b"ok\n");
        let opts = PackOptions {
            max_file_bytes: 1024,
            ..PackOptions::default()
        };
        let pack = ContextPack::snapshot(dir.path(), &opts).unwrap();
        assert_eq!(pack.files.keys().collect::<Vec<_>>(), vec!["small.txt"]);
        assert_eq!(reason_for(&pack, "img.png"), Some("binary"));
        assert_eq!(reason_for(&pack, "latin1.txt"), Some("binary"));
        assert_eq!(
            reason_for(&pack, "big.txt"),
            Some("too large (2048 bytes > 1024 bytes)")
        );
        let paths: Vec<&str> = pack.skipped.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, vec!["big.txt", "img.png", "latin1.txt"]);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_inside_are_followed_and_escapes_skipped() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "passwd", b"root:x:0:0\n");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "real/a.rs", b"fn a() {}\n");
        write(root, ".env", b"SECRET=1\n");
        write(root, ".git/config", b"[core]\n");
        symlink(root.join("real/a.rs"), root.join("link.rs")).unwrap();
        symlink(outside.path().join("passwd"), root.join("escape.txt")).unwrap();
        symlink(outside.path(), root.join("outdir")).unwrap();
        symlink(root.join("real"), root.join("realdir")).unwrap();
        symlink(root.join(".env"), root.join("innocent.txt")).unwrap();
        symlink(root.join(".git/config"), root.join("gitconfig")).unwrap();
        symlink(root.join("gone"), root.join("dangling")).unwrap();

        let pack = snap(root);
        assert_eq!(&*pack.resolve("link.rs").unwrap().content, "fn a() {}\n");
        assert!(pack.get("real/a.rs").is_some());
        assert!(pack.get("escape.txt").is_none());
        assert_eq!(
            reason_for(&pack, "escape.txt"),
            Some("symlink outside root")
        );
        assert_eq!(reason_for(&pack, "outdir"), Some("symlink outside root"));
        assert!(pack.get("realdir/a.rs").is_none());
        assert!(reason_for(&pack, "realdir").is_some());
        assert_eq!(reason_for(&pack, "innocent.txt"), Some("secret"));
        assert_eq!(
            reason_for(&pack, "gitconfig"),
            Some("symlink into excluded directory")
        );
        assert!(reason_for(&pack, "dangling").is_some());
        assert!(!pack
            .files
            .keys()
            .any(|k| k.contains("passwd") || k.starts_with(".git/")));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_obey_gitignore_and_pack_exclude_like_any_path() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", b"private/\n");
        write(root, "private/notes.txt", b"do not share\n");
        write(root, "drafts/plan.txt", b"not for review\n");
        write(root, "src/a.rs", b"fn a() {}\n");
        symlink(root.join("private/notes.txt"), root.join("notes.txt")).unwrap();
        symlink(root.join("drafts/plan.txt"), root.join("plan.txt")).unwrap();
        symlink(root.join("src/a.rs"), root.join("a_link.rs")).unwrap();
        let opts = PackOptions {
            exclude: vec!["drafts/**".into()],
            ..PackOptions::default()
        };
        let pack = ContextPack::snapshot(root, &opts).unwrap();
        let why = "symlink to an ignored or excluded path (.gitignore or pack.exclude)";
        assert_eq!(reason_for(&pack, "notes.txt"), Some(why));
        assert_eq!(reason_for(&pack, "plan.txt"), Some(why));
        assert!(pack.get("notes.txt").is_none() && pack.get("plan.txt").is_none());
        assert!(!pack
            .files
            .values()
            .any(|f| f.content.contains("do not share") || f.content.contains("not for review")));
        // A link to an admitted file still works.
        assert_eq!(&*pack.resolve("a_link.rs").unwrap().content, "fn a() {}\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_swapped_between_walk_and_read_is_refused() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "a.rs", b"fn a() {}\n");
        write(root, "private/key.txt", b"secret material\n");
        let seen = FileId::of(&fs::symlink_metadata(root.join("a.rs")).unwrap());
        assert!(read_checked(&root.join("a.rs"), Some(seen), 1 << 20).is_ok());

        // Swapped for a symlink after the walk: O_NOFOLLOW refuses to open it.
        fs::remove_file(root.join("a.rs")).unwrap();
        symlink(root.join("private/key.txt"), root.join("a.rs")).unwrap();
        let err = read_checked(&root.join("a.rs"), Some(seen), 1 << 20).unwrap_err();
        assert!(err.contains("symlink"), "{err}");

        // Swapped for another regular file: the handle's inode is not the one the walk saw.
        fs::remove_file(root.join("a.rs")).unwrap();
        fs::copy(root.join("private/key.txt"), root.join("other")).unwrap();
        fs::rename(root.join("other"), root.join("a.rs")).unwrap();
        let err = read_checked(&root.join("a.rs"), Some(seen), 1 << 20).unwrap_err();
        assert!(err.contains("replaced"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_swapped_in_does_not_block_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "a.rs", b"fn a() {}\n");
        let seen = FileId::of(&fs::symlink_metadata(root.join("a.rs")).unwrap());
        fs::remove_file(root.join("a.rs")).unwrap();
        let c = std::ffi::CString::new(root.join("a.rs").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open would wait for a writer forever.
        let err = read_checked(&root.join("a.rs"), Some(seen), 1 << 20).unwrap_err();
        assert_eq!(err, "not a regular file");
    }

    fn fake_git(root: &Path, head: &str) -> PathBuf {
        let git = root.join(".git");
        fs::create_dir_all(&git).unwrap();
        fs::write(git.join("HEAD"), head).unwrap();
        git
    }

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn head_sha_from_loose_ref() {
        let dir = tempfile::tempdir().unwrap();
        let git = fake_git(dir.path(), "ref: refs/heads/main\n");
        write(&git, "refs/heads/main", format!("{SHA}\n").as_bytes());
        write(dir.path(), "sub/a.rs", b"fn a() {}\n");
        let pack = snap(dir.path());
        assert_eq!(pack.head_sha.as_deref(), Some(SHA));
        assert!(!pack.files.keys().any(|k| k.starts_with(".git")));
        // A subdirectory of the checkout finds the same HEAD.
        assert_eq!(snap(&dir.path().join("sub")).head_sha.as_deref(), Some(SHA));
    }

    #[test]
    fn work_tree_prefix_locates_a_subdirectory() {
        let dir = tempfile::tempdir().unwrap();
        fake_git(dir.path(), "ref: refs/heads/main\n");
        write(dir.path(), "services/api/a.rs", b"fn a() {}\n");
        assert_eq!(git_work_tree_prefix(dir.path()).as_deref(), Some(""));
        let api = dir.path().join("services/api");
        assert_eq!(git_work_tree_prefix(&api).as_deref(), Some("services/api"));
        // A linked worktree or submodule has a `.git` file, and is its own root.
        write(&api, ".git", b"gitdir: /elsewhere\n");
        assert_eq!(git_work_tree_prefix(&api).as_deref(), Some(""));
        let outside = tempfile::tempdir().unwrap();
        assert_eq!(git_work_tree_prefix(outside.path()), None);
    }

    #[test]
    fn head_sha_from_packed_refs() {
        let dir = tempfile::tempdir().unwrap();
        let git = fake_git(dir.path(), "ref: refs/heads/dev\n");
        let packed = format!(
            "# pack-refs with: peeled fully-peeled sorted\n\
             ffffffffffffffffffffffffffffffffffffffff refs/heads/main\n\
             {SHA} refs/heads/dev\n^eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\n"
        );
        fs::write(git.join("packed-refs"), packed).unwrap();
        assert_eq!(git_head_sha(dir.path()).as_deref(), Some(SHA));
    }

    #[test]
    fn head_sha_detached_worktree_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        fake_git(dir.path(), &format!("{}\n", SHA.to_uppercase()));
        assert_eq!(git_head_sha(dir.path()).as_deref(), Some(SHA));

        // A worktree: ".git" is a file pointing at the real git dir.
        let wt = tempfile::tempdir().unwrap();
        let gitdir = dir.path().join(".git/worktrees/wt");
        write(&gitdir, "HEAD", b"ref: refs/heads/feature\n");
        write(&gitdir, "commondir", b"../..\n");
        write(
            &dir.path().join(".git"),
            "refs/heads/feature",
            format!("{SHA}\n").as_bytes(),
        );
        fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        assert_eq!(git_head_sha(wt.path()).as_deref(), Some(SHA));

        // Unborn branch and garbage HEAD.
        let unborn = tempfile::tempdir().unwrap();
        fake_git(unborn.path(), "ref: refs/heads/main\n");
        assert_eq!(git_head_sha(unborn.path()), None);
        let garbage = tempfile::tempdir().unwrap();
        fake_git(garbage.path(), "not a sha\n");
        assert_eq!(snap(garbage.path()).head_sha, None);
        let escape = tempfile::tempdir().unwrap();
        fake_git(escape.path(), "ref: ../../etc/passwd\n");
        assert_eq!(git_head_sha(escape.path()), None);
    }

    #[test]
    fn resolve_normalises_and_refuses_traversal() {
        let pack = mem(&[("src/a.rs", "a\n"), ("README.md", "r\n")]);
        for ok in [
            "src/a.rs",
            "./src/a.rs",
            "/src/a.rs",
            "src//a.rs",
            "src/./a.rs",
            "  \"src/a.rs\" ",
            "`src/a.rs`",
            "/repo/src/a.rs",
            "src\\a.rs",
            "src/a.rs:12",
            "src/a.rs:12-14",
            "src/a.rs#L3-L5",
        ] {
            assert_eq!(pack.resolve(ok).unwrap().path, "src/a.rs", "{ok}");
        }
        for bad in [
            "../etc/passwd",
            "/etc/passwd",
            "src/../../x",
            "src/../a.rs",
            "src/a.rs\0",
            "\\src\\a.rs",
            "C:\\src\\a.rs",
            "src/b.rs",
            "src",
            "",
            "/repository/src/a.rs",
        ] {
            match pack.resolve(bad) {
                Err(PackError::NotInPack(p)) => assert_eq!(p, bad),
                other => panic!("{bad:?} resolved to {other:?}"),
            }
        }
    }

    #[test]
    fn from_files_normalises_and_rejects_bad_paths() {
        let pack = mem(&[("./a/b.rs", "x\ny"), ("../evil", "z"), ("", "e")]);
        assert_eq!(pack.files.keys().collect::<Vec<_>>(), vec!["a/b.rs"]);
        assert_eq!(pack.resolve("a/b.rs").unwrap().line_count, 2);
        assert_eq!(pack.skipped.len(), 2);
    }

    #[test]
    fn read_lines_formats_and_clamps() {
        let pack = mem(&[("a.txt", "one\ntwo\r\nthree\nfour\n")]);
        assert_eq!(
            pack.read_lines("a.txt", 2, 3).unwrap(),
            "    2 | two\n    3 | three\n"
        );
        assert_eq!(pack.read_lines("a.txt", 0, 1).unwrap(), "    1 | one\n");
        assert_eq!(pack.read_lines("a.txt", 3, 99).unwrap().lines().count(), 2);
        assert_eq!(
            pack.read_lines("a.txt", 2, 1).unwrap(),
            "    1 | one\n    2 | two\n"
        );
        assert_eq!(
            pack.read_lines("a.txt", 9, 12).unwrap(),
            "(file has 4 lines)\n"
        );
        assert!(matches!(
            pack.read_lines("b.txt", 1, 2),
            Err(PackError::NotInPack(_))
        ));
    }

    #[test]
    fn grep_caps_filters_and_rejects_bad_patterns() {
        let long = format!("{}needle{}", "x".repeat(300), "y".repeat(300));
        let pack = mem(&[
            ("src/a.rs", "let needle = 1;\nnone\n  needle again  \n"),
            ("src2/b.rs", "needle\n"),
            ("docs/long.md", long.as_str()),
        ]);
        let hits = pack.grep("needle", "", 100).unwrap();
        assert_eq!(hits.len(), 4);
        assert_eq!(hits[0].path, "docs/long.md");
        assert_eq!(
            hits[2],
            GrepHit {
                path: "src/a.rs".to_string(),
                line: 3,
                text: "needle again".to_string()
            }
        );
        let clipped = &hits[0].text;
        assert_eq!(clipped.chars().count(), 200);
        assert!(clipped.contains("needle"));
        assert!(clipped.starts_with('…') && clipped.ends_with('…'));

        assert_eq!(pack.grep("needle", "", 2).unwrap().len(), 2);
        assert!(pack.grep("needle", "", 0).unwrap().is_empty());
        let scoped = pack.grep("needle", "./src/", 10).unwrap();
        assert_eq!(scoped.len(), 2);
        assert!(scoped.iter().all(|h| h.path == "src/a.rs"));
        assert_eq!(pack.grep("^needle$", "src2/b.rs", 10).unwrap().len(), 1);
        assert!(matches!(
            pack.grep("(unclosed", "", 10),
            Err(PackError::BadPattern { .. })
        ));
        assert!(matches!(
            pack.grep("a{1000}{1000}", "", 10),
            Err(PackError::BadPattern { .. })
        ));
    }

    #[test]
    fn clip_is_char_boundary_safe() {
        let line = "é".repeat(500);
        let clipped = clip_around(&line, 600, 200);
        assert_eq!(clipped.chars().count(), 200);
    }

    #[test]
    fn tree_orders_indents_and_caps() {
        let pack = mem(&[
            ("README.md", ""),
            ("src/main.rs", ""),
            ("src/util/mod.rs", ""),
            ("Cargo.toml", ""),
            ("tests/it.rs", ""),
        ]);
        assert_eq!(
            pack.tree(100, 10),
            "src/\n  util/\n    mod.rs\n  main.rs\ntests/\n  it.rs\nCargo.toml\nREADME.md\n"
        );
        assert_eq!(
            pack.tree(3, 10),
            "src/\n  util/\n    mod.rs\n… 5 more entries\n"
        );
        assert_eq!(pack.tree(100, 1), "src/\ntests/\nCargo.toml\nREADME.md\n");
        assert_eq!(pack.tree(0, 1), "… 4 more entries\n");
    }

    #[test]
    fn list_directory_children() {
        let pack = mem(&[
            ("README.md", ""),
            ("src/main.rs", ""),
            ("src/util/mod.rs", ""),
            ("src2/x.rs", ""),
        ]);
        let root = vec!["src/", "src2/", "README.md"];
        assert_eq!(pack.list_directory("").unwrap(), root);
        assert_eq!(pack.list_directory(".").unwrap(), root);
        assert_eq!(pack.list_directory("/").unwrap(), root);
        assert_eq!(
            pack.list_directory("./src/").unwrap(),
            vec!["util/", "main.rs"]
        );
        assert!(matches!(
            pack.list_directory("nope"),
            Err(PackError::NotInPack(_))
        ));
        assert!(matches!(
            pack.list_directory("README.md"),
            Err(PackError::NotInPack(_))
        ));
        assert!(matches!(
            pack.list_directory("../"),
            Err(PackError::NotInPack(_))
        ));
    }

    #[test]
    fn facts_summarise_the_pack() {
        let pack = mem(&[
            ("README.md", "# x\n\nmore\n"),
            ("Cargo.toml", "[package]\n"),
            ("src/main.rs", "fn main() {}\n"),
            ("src/lib.rs", "pub fn a() {}\npub fn b() {}\n"),
            ("crates/x/Cargo.toml", ""),
            ("data/points.csv", "a,b\n1,2\n"),
            ("docs/LICENSE-MIT", "mit\n"),
        ]);
        let facts = pack.facts();
        assert_eq!(facts.file_count, 7);
        assert_eq!(facts.total_lines, 3 + 1 + 1 + 2 + 2 + 1);
        assert_eq!(
            facts.total_bytes,
            pack.files.values().map(|f| f.size).sum::<u64>()
        );
        assert_eq!(facts.languages[0], ("rust".to_string(), 2));
        assert_eq!(facts.languages[1], ("toml".to_string(), 2));
        assert_eq!(facts.kinds.get("code"), Some(&2));
        assert_eq!(facts.kinds.get("config"), Some(&2));
        assert_eq!(facts.kinds.get("doc"), Some(&2));
        assert_eq!(facts.kinds.get("data"), Some(&1));
        assert_eq!(
            facts.key_files,
            vec![
                "Cargo.toml",
                "README.md",
                "docs/LICENSE-MIT",
                "src/lib.rs",
                "src/main.rs",
                "crates/x/Cargo.toml"
            ]
        );
        assert_eq!(facts.skipped_count, 0);
    }

    #[test]
    fn languages_and_kinds() {
        let cases = [
            ("a.py", "", "python", FileKind::Code),
            ("web/app.tsx", "", "typescript", FileKind::Code),
            ("Dockerfile", "", "dockerfile", FileKind::Config),
            ("Makefile", "", "makefile", FileKind::Config),
            ("x.yml", "", "yaml", FileKind::Config),
            ("package-lock.json", "", "json", FileKind::Config),
            ("yarn.lock", "", "lockfile", FileKind::Config),
            ("requirements-dev.txt", "", "text", FileKind::Config),
            ("notes.txt", "", "text", FileKind::Doc),
            ("doc.rst", "", "restructuredtext", FileKind::Doc),
            ("paper.tex", "", "latex", FileKind::Doc),
            ("rows.csv", "", "csv", FileKind::Data),
            ("events.jsonl", "", "jsonl", FileKind::Data),
            ("schema.proto", "", "protobuf", FileKind::Code),
            ("Token.sol", "", "solidity", FileKind::Code),
            ("main.tf", "", "terraform", FileKind::Code),
            (
                "bin/tool",
                "#!/usr/bin/env python3\nprint(1)\n",
                "python",
                FileKind::Code,
            ),
            ("bin/run", "#!/bin/bash\necho\n", "shell", FileKind::Code),
            (
                "bin/srv",
                "#!/usr/bin/env -S node --harmony\n",
                "javascript",
                FileKind::Code,
            ),
            ("bin/r", "#!/usr/bin/ruby -w\n", "ruby", FileKind::Code),
            ("bin/p", "#!/usr/bin/perl\n", "perl", FileKind::Code),
            ("mystery", "plain words\n", "unknown", FileKind::Data),
            (".gitignore", "", "gitignore", FileKind::Config),
            ("LICENSE", "", "text", FileKind::Doc),
        ];
        for (path, content, lang, kind) in cases {
            let f = PackFile::new(path.to_string(), Arc::from(content));
            assert_eq!((f.language.as_str(), f.kind), (lang, kind), "{path}");
        }
    }

    #[test]
    fn repo_review_config_is_not_reviewed_content() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".quorum.toml", b"instructions = \"x\"\n");
        write(dir.path(), "sub/.quorum.toml", b"not the root one\n");
        write(dir.path(), "a.rs", b"fn a() {}\n");
        let pack = snap(dir.path());
        assert!(pack.get(".quorum.toml").is_none());
        assert!(
            pack.get("sub/.quorum.toml").is_some(),
            "only the root file configures"
        );
        assert!(pack.get("a.rs").is_some());
    }

    #[test]
    fn tree_rules_match_the_walk() {
        let opts = PackOptions {
            exclude: vec!["vendor/".into(), "*.gen.rs".into()],
            max_file_bytes: 10,
            ..PackOptions::default()
        };
        let ignores = vec![
            (".gitignore".to_string(), "*.log\nbuildx/\n".to_string()),
            (
                "sub/.gitignore".to_string(),
                "local.txt\n!keep.log\n".to_string(),
            ),
        ];
        let rules = TreeRules::new(&opts, "", &ignores).unwrap();
        let nested = TreeRules::new(&PackOptions::default(), "sub", &ignores).unwrap();
        assert_eq!(
            nested.decide("local.txt"),
            TreeDecision::Ignored,
            "parent rules apply"
        );
        assert_eq!(nested.decide("x.log"), TreeDecision::Ignored);
        assert_eq!(nested.decide("keep.log"), TreeDecision::Admit);
        let d = |p: &str| rules.decide(p);
        assert_eq!(d("src/a.rs"), TreeDecision::Admit);
        assert_eq!(d(".quorum.toml"), TreeDecision::Ignored);
        assert_eq!(d("sub/.quorum.toml"), TreeDecision::Admit);
        assert_eq!(d("vendor/lib/x.rs"), TreeDecision::Ignored);
        assert_eq!(d("src/x.gen.rs"), TreeDecision::Ignored);
        assert_eq!(d("app.log"), TreeDecision::Ignored);
        assert_eq!(d("buildx/out.txt"), TreeDecision::Ignored);
        assert_eq!(d("sub/local.txt"), TreeDecision::Ignored);
        assert_eq!(
            d("local.txt"),
            TreeDecision::Admit,
            "a nested rule stays in its directory"
        );
        assert_eq!(
            d("sub/keep.log"),
            TreeDecision::Admit,
            "the nearest ignore file decides"
        );
        assert_eq!(d("node_modules/x/index.js"), TreeDecision::Ignored);
        assert_eq!(d("config/.env"), TreeDecision::Skip("secret".into()));
        assert_eq!(d(".env.example"), TreeDecision::Admit);
        assert!(rules
            .admit_content(b"0123456789ab".to_vec())
            .unwrap_err()
            .starts_with("too large"));
        assert_eq!(rules.admit_content(b"a\0b".to_vec()).unwrap_err(), "binary");
        assert_eq!(&*rules.admit_content(b"ok\n".to_vec()).unwrap(), "ok\n");

        let no_ignore = TreeRules::new(
            &PackOptions {
                respect_gitignore: false,
                ..PackOptions::default()
            },
            "",
            &ignores,
        )
        .unwrap();
        assert_eq!(no_ignore.decide("app.log"), TreeDecision::Admit);
        assert!(TreeRules::new(
            &PackOptions {
                exclude: vec!["a/{b".into()],
                ..PackOptions::default()
            },
            "",
            &[]
        )
        .is_err());
    }
}
