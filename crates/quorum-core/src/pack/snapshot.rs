//! The snapshot as data — [`ContextPack`] and its files, the options it was taken with, what
//! it left out — and the queries every agent reads it through: `resolve`, `read_lines`, `grep`,
//! `tree`, `list_directory` and the scout's `facts`. Taking one is [`super::walk`]'s.

use super::classify::{classify, FileKind};
use super::paths::{strip_location_suffix, under};
use super::text::Text;
use crate::error::PackError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// Grep hit text is cut to this many characters.
const GREP_TEXT_CHARS: usize = 200;
/// At most this many key files in [`PackFacts::key_files`].
const MAX_KEY_FILES: usize = 40;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Assemble a pack from files already admitted by [`TreeRules`](super::TreeRules) (a snapshot of a git tree
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::testing::mem;

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
}
