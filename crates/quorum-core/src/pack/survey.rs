//! The survey of a snapshot: what a review would read, and everything it would leave out with
//! the reason — what `quorum pack` prints, so a user can check the snapshot before spending a
//! model call on it.
//!
//! Nothing here re-decides what enters a pack. The files are the snapshot's own; what it refused
//! after looking at an entry (secret, binary, too large, symlink, unreadable) comes from its
//! `skipped` list; and what the walk never yielded — ignore rules, `pack.exclude` globs,
//! always-excluded directories — is found by listing each directory the walk entered and naming
//! the children it did not yield. Only the *label* of such an entry is worked out here, in the
//! walk's own order of precedence: an always-excluded name, then the exclude globs (the walk's
//! own matcher, applied before ignore files), else an ignore rule. A directory left out is one
//! entry ("build/"), not one per file below it.

use super::walk::WalkTrace;
use super::{ContextPack, PackOptions, Skipped, ALWAYS_EXCLUDED_DIRS};
use crate::error::PackError;
use crate::human::thousands;
use crate::weaver::estimate_tokens;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

/// Why an entry of the target is not in the pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExclusionReason {
    /// A `.gitignore` / `.ignore` rule (or the repository's `info/exclude`).
    Ignored,
    /// A `pack.exclude` glob from the configuration.
    ConfigGlob,
    /// VCS metadata, build output, dependency caches, editor state (see
    /// [`ALWAYS_EXCLUDED_DIRS`]).
    AlwaysExcluded,
    Secret,
    Binary,
    TooLarge,
    /// A symlink leaving the root, into an excluded directory, or to a directory.
    Symlink,
    /// A fifo, socket or device.
    NotRegular,
    /// Anything the walk could not read (permissions, a name that is not UTF-8, ...).
    Unreadable,
    /// Past `pack.max_pack_bytes`, in walk order.
    OverBudget,
}

impl ExclusionReason {
    pub const ALL: [ExclusionReason; 10] = [
        ExclusionReason::Ignored,
        ExclusionReason::ConfigGlob,
        ExclusionReason::AlwaysExcluded,
        ExclusionReason::Secret,
        ExclusionReason::Binary,
        ExclusionReason::TooLarge,
        ExclusionReason::Symlink,
        ExclusionReason::NotRegular,
        ExclusionReason::Unreadable,
        ExclusionReason::OverBudget,
    ];

    /// The kebab-case name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ExclusionReason::Ignored => "ignored",
            ExclusionReason::ConfigGlob => "config-glob",
            ExclusionReason::AlwaysExcluded => "always-excluded",
            ExclusionReason::Secret => "secret",
            ExclusionReason::Binary => "binary",
            ExclusionReason::TooLarge => "too-large",
            ExclusionReason::Symlink => "symlink",
            ExclusionReason::NotRegular => "not-regular",
            ExclusionReason::Unreadable => "unreadable",
            ExclusionReason::OverBudget => "over-budget",
        }
    }

    /// The label of a reason the snapshot wrote into `skipped` (the strings `admit_file`,
    /// `admit_symlink`, `read_checked` and the walk produce).
    pub fn of_skipped(reason: &str) -> ExclusionReason {
        match reason {
            "secret" => ExclusionReason::Secret,
            "binary" => ExclusionReason::Binary,
            "not a regular file" => ExclusionReason::NotRegular,
            r if r.starts_with("too large") => ExclusionReason::TooLarge,
            r if r.starts_with("symlink") => ExclusionReason::Symlink,
            r if r.starts_with("over the pack budget") => ExclusionReason::OverBudget,
            _ => ExclusionReason::Unreadable,
        }
    }
}

/// One entry left out of the pack. Directories end in '/'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    pub path: String,
    pub reason: ExclusionReason,
    /// The snapshot's own words for it ("too large (2000000 bytes > 1048576 bytes)").
    pub detail: String,
}

/// A snapshot and everything it left out.
#[derive(Debug, Clone)]
pub struct PackSurvey {
    pub pack: ContextPack,
    /// Sorted by path; every entry of `pack.skipped` is here too, labelled.
    pub excluded: Vec<Exclusion>,
}

/// `quorum pack --format json`: complete, and stable in shape (README documents it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackListing {
    pub root: String,
    pub head_sha: Option<String>,
    pub totals: PackTotals,
    /// By file count, most first; equal counts by name.
    pub languages: Vec<LanguageTotals>,
    /// Count of excluded entries per reason (only reasons that occur).
    pub excluded_by_reason: BTreeMap<ExclusionReason, usize>,
    /// Sorted by path.
    pub files: Vec<IncludedFile>,
    /// Sorted by path.
    pub excluded: Vec<Exclusion>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackTotals {
    pub files: usize,
    pub bytes: u64,
    pub lines: u64,
    /// Sum over files of [`estimate_tokens`] (about 4 characters a token), as budgets use.
    pub estimated_tokens: u64,
    pub excluded: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LanguageTotals {
    pub language: String,
    pub files: usize,
    pub bytes: u64,
    pub estimated_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncludedFile {
    pub path: String,
    pub bytes: u64,
    pub lines: u32,
    pub language: String,
    pub kind: String,
    pub estimated_tokens: u64,
}

/// Label everything the walk behind `pack` left out; see the module docs.
fn explain(pack: ContextPack, trace: &WalkTrace) -> PackSurvey {
    let mut excluded: Vec<Exclusion> = pack.skipped.iter().map(labelled).collect();
    let yielded: HashSet<&str> = pack
        .files
        .keys()
        .map(String::as_str)
        .chain(pack.skipped.iter().map(|s| s.path.as_str()))
        .collect();
    let walked = std::iter::once("").chain(trace.dirs.iter().map(String::as_str));
    for dir in walked {
        let abs = if dir.is_empty() {
            pack.root.clone()
        } else {
            pack.root.join(dir)
        };
        // A directory the walk could not list is already in `skipped` with its error.
        let Ok(entries) = std::fs::read_dir(&abs) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            // The walk records a name that is not UTF-8 in `skipped` itself.
            let Some(name) = name.to_str() else {
                continue;
            };
            let rel = if dir.is_empty() {
                name.to_string()
            } else {
                format!("{dir}/{name}")
            };
            // file_type does not follow symlinks, as the walk does not.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let seen = if is_dir {
                trace.dirs.contains(&rel)
            } else {
                yielded.contains(rel.as_str())
            };
            if seen {
                continue;
            }
            let (reason, detail) = unwalked(name, &entry.path(), is_dir, trace);
            excluded.push(Exclusion {
                path: if is_dir { format!("{rel}/") } else { rel },
                reason,
                detail: detail.to_string(),
            });
        }
    }
    excluded.sort_by(|a, b| a.path.cmp(&b.path));
    excluded.dedup_by(|a, b| a.path == b.path);
    PackSurvey { pack, excluded }
}

fn labelled(s: &Skipped) -> Exclusion {
    Exclusion {
        path: s.path.clone(),
        reason: ExclusionReason::of_skipped(&s.reason),
        detail: s.reason.clone(),
    }
}

/// Why the walk did not yield an entry, in the walk's order of precedence.
fn unwalked(
    name: &str,
    path: &std::path::Path,
    is_dir: bool,
    trace: &WalkTrace,
) -> (ExclusionReason, &'static str) {
    if name == ".git" || (is_dir && ALWAYS_EXCLUDED_DIRS.contains(&name)) {
        return (
            ExclusionReason::AlwaysExcluded,
            "VCS, build, dependency or editor directory",
        );
    }
    if trace
        .excludes
        .as_ref()
        .is_some_and(|o| o.matched(path, is_dir).is_ignore())
    {
        return (ExclusionReason::ConfigGlob, "matches a pack.exclude glob");
    }
    (
        ExclusionReason::Ignored,
        "matches a .gitignore or .ignore rule",
    )
}

impl PackSurvey {
    /// The complete listing (`quorum pack --format json`).
    pub fn listing(&self) -> PackListing {
        let mut totals = PackTotals {
            excluded: self.excluded.len(),
            ..PackTotals::default()
        };
        let mut languages: BTreeMap<&str, LanguageTotals> = BTreeMap::new();
        let mut files = Vec::with_capacity(self.pack.files.len());
        // Counting reads every file: a spilled tree is handed back as it is counted.
        let mut window = super::ResidentWindow::new();
        for f in self.pack.files.values() {
            let tokens = u64::from(estimate_tokens(&f.content));
            window.done_with(&f.content);
            totals.files += 1;
            totals.bytes += f.size;
            totals.lines += u64::from(f.line_count);
            totals.estimated_tokens += tokens;
            let lang = languages
                .entry(f.language.as_str())
                .or_insert_with(|| LanguageTotals {
                    language: f.language.clone(),
                    files: 0,
                    bytes: 0,
                    estimated_tokens: 0,
                });
            lang.files += 1;
            lang.bytes += f.size;
            lang.estimated_tokens += tokens;
            files.push(IncludedFile {
                path: f.path.clone(),
                bytes: f.size,
                lines: f.line_count,
                language: f.language.clone(),
                kind: f.kind.as_str().to_string(),
                estimated_tokens: tokens,
            });
        }
        let mut languages: Vec<LanguageTotals> = languages.into_values().collect();
        // Stable sort keeps the name order among equal counts.
        languages.sort_by_key(|l| std::cmp::Reverse(l.files));
        let mut excluded_by_reason = BTreeMap::new();
        for e in &self.excluded {
            *excluded_by_reason.entry(e.reason).or_insert(0) += 1;
        }
        PackListing {
            root: self.pack.root.display().to_string(),
            head_sha: self.pack.head_sha.clone(),
            totals,
            languages,
            excluded_by_reason,
            files,
            excluded: self.excluded.clone(),
        }
    }
}

impl PackListing {
    /// The readable summary: totals, languages, the excluded entries with reasons, then the
    /// included files. Each list shows at most `limit` entries and says how many it left out
    /// (`None` shows everything).
    pub fn to_text(&self, limit: Option<usize>) -> String {
        let mut out = String::new();
        let t = &self.totals;
        let _ = writeln!(out, "pack of {}", self.root);
        if let Some(sha) = &self.head_sha {
            let _ = writeln!(out, "git HEAD {sha}");
        }
        let _ = writeln!(
            out,
            "{} {}, {}, {} lines, ~{} tokens (estimated at about 4 characters a token)",
            thousands(t.files as u64),
            plural(t.files, "file", "files"),
            human_bytes(t.bytes),
            thousands(t.lines),
            thousands(t.estimated_tokens),
        );
        let reasons: Vec<String> = self
            .excluded_by_reason
            .iter()
            .map(|(r, n)| format!("{} {n}", reason_words(*r)))
            .collect();
        if reasons.is_empty() {
            let _ = writeln!(out, "nothing excluded");
        } else {
            let _ = writeln!(
                out,
                "{} excluded: {}",
                thousands(t.excluded as u64),
                reasons.join(", ")
            );
        }

        if !self.languages.is_empty() {
            let _ = writeln!(out, "\nlanguages");
            let width = self
                .languages
                .iter()
                .map(|l| l.language.chars().count())
                .max()
                .unwrap_or(0);
            for l in &self.languages {
                let _ = writeln!(
                    out,
                    "  {:width$}  {:>6} {}  {:>10}  ~{} tokens",
                    l.language,
                    thousands(l.files as u64),
                    plural(l.files, "file ", "files"),
                    human_bytes(l.bytes),
                    thousands(l.estimated_tokens),
                );
            }
        }

        if !self.excluded.is_empty() {
            let _ = writeln!(out, "\nexcluded");
            let shown = self.excluded.iter().take(limit.unwrap_or(usize::MAX));
            let width = column_width(self.excluded.iter().map(|e| e.path.as_str()), limit);
            for e in shown {
                let words = reason_words(e.reason);
                let detail = if e.detail.is_empty() || e.detail == words {
                    String::new()
                } else {
                    format!(" — {}", one_line(&e.detail))
                };
                let _ = writeln!(out, "  {:width$}  {words}{detail}", one_line(&e.path));
            }
            more(&mut out, self.excluded.len(), limit);
        }

        let _ = writeln!(out, "\nincluded");
        if self.files.is_empty() {
            let _ = writeln!(out, "  (no files: a review would have nothing to read)");
        }
        let width = column_width(self.files.iter().map(|f| f.path.as_str()), limit);
        for f in self.files.iter().take(limit.unwrap_or(usize::MAX)) {
            let _ = writeln!(
                out,
                "  {:width$}  {:>10}  {:<12}  ~{} tokens",
                one_line(&f.path),
                human_bytes(f.bytes),
                f.language,
                thousands(f.estimated_tokens),
            );
        }
        more(&mut out, self.files.len(), limit);
        out
    }
}

fn reason_words(r: ExclusionReason) -> &'static str {
    match r {
        ExclusionReason::Ignored => "ignored",
        ExclusionReason::ConfigGlob => "excluded by config glob",
        ExclusionReason::AlwaysExcluded => "always excluded",
        ExclusionReason::Secret => "secret",
        ExclusionReason::Binary => "binary",
        ExclusionReason::TooLarge => "too large",
        ExclusionReason::Symlink => "symlink",
        ExclusionReason::NotRegular => "not a regular file",
        ExclusionReason::Unreadable => "unreadable",
        ExclusionReason::OverBudget => "over the pack budget",
    }
}

fn more(out: &mut String, total: usize, limit: Option<usize>) {
    if let Some(limit) = limit {
        if total > limit {
            let _ = writeln!(
                out,
                "  ... and {} more (--all lists every entry)",
                thousands((total - limit) as u64)
            );
        }
    }
}

/// Width of the path column over the rows that will be shown, capped so one long path does
/// not push every other column off the screen.
fn column_width<'a>(paths: impl Iterator<Item = &'a str>, limit: Option<usize>) -> usize {
    paths
        .take(limit.unwrap_or(usize::MAX))
        .map(|p| p.chars().count())
        .max()
        .unwrap_or(0)
        .min(60)
}

/// File names may hold newlines; a listing line must stay one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn human_bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    if f < KIB {
        format!("{n} B")
    } else if f < KIB * KIB {
        format!("{:.1} KiB", f / KIB)
    } else if f < KIB * KIB * KIB {
        format!("{:.1} MiB", f / (KIB * KIB))
    } else {
        format!("{:.1} GiB", f / (KIB * KIB * KIB))
    }
}

impl ContextPack {
    /// The snapshot, plus a reason for every entry it left out — also those it leaves out
    /// silently (ignore rules, `opts.exclude` globs, always-excluded directories). What
    /// `quorum pack` prints; the decisions are the snapshot's own.
    pub fn survey(root: &Path, opts: &PackOptions) -> Result<PackSurvey, PackError> {
        let mut trace = WalkTrace::default();
        let pack = Self::walk(root, opts, Some(&mut trace))?;
        Ok(explain(pack, &trace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::PackOptions;
    use std::fs;
    use std::path::Path;

    fn write(root: &Path, rel: &str, body: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }

    /// A target with one of every kind of exclusion next to ordinary files.
    fn target() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(r, "src/main.rs", b"fn main() {}\n");
        write(r, "src/lib.rs", b"pub fn a() -> u32 { 1 }\npub fn b() {}\n");
        write(r, "README.md", b"# demo\n\nwords words words\n");
        write(r, ".gitignore", b"*.log\ncache/\n");
        write(r, "app.log", b"noise\n");
        write(r, "cache/blob.txt", b"cached\n");
        write(r, ".env", b"TOKEN=hunter2\n");
        write(r, "keys/id_rsa", b"-----BEGIN OPENSSH PRIVATE KEY-----\n");
        write(r, "big.txt", &[b'x'; 200]);
        write(r, "img.png", b"\x89PNG\0\0\0");
        write(r, "target/debug/out.txt", b"built\n");
        write(r, "node_modules/dep/index.js", b"module.exports = 1;\n");
        write(r, "docs/generated/api.md", b"# generated\n");
        write(r, "docs/guide.md", b"# guide\n");
        write(r, "empty/.keep", b"");
        dir
    }

    fn opts() -> PackOptions {
        PackOptions {
            max_file_bytes: 100,
            exclude: vec!["docs/generated/".into()],
            ..PackOptions::default()
        }
    }

    fn reason_of(s: &PackSurvey, path: &str) -> Option<ExclusionReason> {
        s.excluded.iter().find(|e| e.path == path).map(|e| e.reason)
    }

    #[test]
    fn every_exclusion_is_listed_with_its_reason() {
        let dir = target();
        let s = ContextPack::survey(dir.path(), &opts()).unwrap();
        use ExclusionReason::*;
        for (path, reason) in [
            ("app.log", Ignored),
            ("cache/", Ignored),
            ("docs/generated/", ConfigGlob),
            ("target/", AlwaysExcluded),
            ("node_modules/", AlwaysExcluded),
            (".env", Secret),
            ("keys/id_rsa", Secret),
            ("big.txt", TooLarge),
            ("img.png", Binary),
        ] {
            assert_eq!(
                reason_of(&s, path),
                Some(reason),
                "{path}: {:#?}",
                s.excluded
            );
        }
        // A left-out directory is one entry, not one per file below it.
        assert!(!s.excluded.iter().any(|e| e.path.starts_with("cache/b")));
        assert!(!s.excluded.iter().any(|e| e.path.starts_with("target/d")));
        // Walked entries are never reported as excluded.
        for walked in [
            "src/",
            "docs/",
            "empty/",
            "keys/",
            "src/main.rs",
            ".gitignore",
        ] {
            assert_eq!(reason_of(&s, walked), None, "{walked}");
        }
        let too_large = s.excluded.iter().find(|e| e.path == "big.txt").unwrap();
        assert!(
            too_large.detail.contains("200 bytes"),
            "{}",
            too_large.detail
        );
    }

    #[test]
    fn the_survey_decides_nothing_the_snapshot_did_not() {
        let dir = target();
        let snap = ContextPack::snapshot(dir.path(), &opts()).unwrap();
        let s = ContextPack::survey(dir.path(), &opts()).unwrap();
        assert_eq!(
            s.pack.files.keys().collect::<Vec<_>>(),
            snap.files.keys().collect::<Vec<_>>()
        );
        assert_eq!(s.pack.skipped, snap.skipped);
        for skipped in &snap.skipped {
            assert!(s.excluded.iter().any(|e| e.path == skipped.path));
        }
        let files: Vec<&str> = s.pack.files.keys().map(String::as_str).collect();
        assert_eq!(
            files,
            [
                ".gitignore",
                "README.md",
                "docs/guide.md",
                "empty/.keep",
                "src/lib.rs",
                "src/main.rs"
            ]
        );
    }

    #[test]
    fn secrets_never_appear_as_included() {
        let dir = target();
        let s = ContextPack::survey(dir.path(), &opts()).unwrap();
        let listing = s.listing();
        assert!(!listing
            .files
            .iter()
            .any(|f| f.path.ends_with(".env") || f.path.contains("id_rsa")));
        let text = listing.to_text(None);
        let included = &text[text.find("\nincluded").unwrap()..];
        assert!(
            !included.contains(".env") && !included.contains("id_rsa"),
            "{text}"
        );
        // With secret exclusion off, the same files are included: the flag is what decides.
        let open = PackOptions {
            exclude_secrets: false,
            ..opts()
        };
        let s = ContextPack::survey(dir.path(), &open).unwrap();
        assert!(s.pack.files.contains_key(".env"));
    }

    #[test]
    fn listing_totals_agree_with_its_lists() {
        let dir = target();
        let listing = ContextPack::survey(dir.path(), &opts()).unwrap().listing();
        let json = serde_json::to_string(&listing).unwrap();
        let back: PackListing = serde_json::from_str(&json).unwrap();
        assert_eq!(back, listing);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["excluded_by_reason"]["always-excluded"], 2);
        assert!(v["excluded"][0]["reason"].is_string());

        let t = listing.totals;
        assert_eq!(t.files, listing.files.len());
        assert_eq!(t.excluded, listing.excluded.len());
        assert_eq!(t.bytes, listing.files.iter().map(|f| f.bytes).sum::<u64>());
        assert_eq!(
            t.estimated_tokens,
            listing
                .files
                .iter()
                .map(|f| f.estimated_tokens)
                .sum::<u64>()
        );
        assert_eq!(
            t.lines,
            listing
                .files
                .iter()
                .map(|f| u64::from(f.lines))
                .sum::<u64>()
        );
        assert_eq!(
            listing.languages.iter().map(|l| l.files).sum::<usize>(),
            t.files
        );
        assert_eq!(
            listing.excluded_by_reason.values().sum::<usize>(),
            t.excluded
        );
        let lib = listing
            .files
            .iter()
            .find(|f| f.path == "src/lib.rs")
            .unwrap();
        assert_eq!((lib.language.as_str(), lib.kind.as_str()), ("rust", "code"));
        assert_eq!(lib.estimated_tokens, 10, "40 characters at about 4 a token");
        assert_eq!(
            listing.languages[0].language, "markdown",
            "two files, most first"
        );
    }

    #[test]
    fn text_is_bounded_unless_asked_for_everything() {
        let dir = target();
        let listing = ContextPack::survey(dir.path(), &opts()).unwrap().listing();
        let short = listing.to_text(Some(2));
        let n_files = listing.files.len();
        let n_excl = listing.excluded.len();
        assert!(
            short.contains(&format!("... and {} more", n_excl - 2)),
            "{short}"
        );
        assert!(
            short.contains(&format!("... and {} more", n_files - 2)),
            "{short}"
        );
        assert!(!short.contains("src/main.rs"), "beyond the bound: {short}");
        let all = listing.to_text(None);
        assert!(!all.contains("... and"));
        assert!(all.contains("src/main.rs"));
        for needle in [
            "6 files",
            "excluded by config glob",
            "always excluded",
            "secret",
            "too large — too large (200 bytes > 100 bytes)",
            "\nlanguages\n",
            "\nexcluded\n",
            "\nincluded\n",
        ] {
            assert!(all.contains(needle), "{needle:?} missing:\n{all}");
        }
        let at = |s: &str| all.find(s).unwrap();
        assert!(at("\nlanguages") < at("\nexcluded") && at("\nexcluded") < at("\nincluded"));
    }

    #[test]
    fn skipped_reasons_get_their_labels() {
        use ExclusionReason::*;
        assert_eq!(ExclusionReason::of_skipped("secret"), Secret);
        assert_eq!(ExclusionReason::of_skipped("binary"), Binary);
        assert_eq!(
            ExclusionReason::of_skipped("too large (5 bytes > 4 bytes)"),
            TooLarge
        );
        assert_eq!(ExclusionReason::of_skipped("symlink outside root"), Symlink);
        assert_eq!(
            ExclusionReason::of_skipped("symlink to directory (not followed)"),
            Symlink
        );
        assert_eq!(
            ExclusionReason::of_skipped("not a regular file"),
            NotRegular
        );
        assert_eq!(
            ExclusionReason::of_skipped("Permission denied (os error 13)"),
            Unreadable
        );
        for r in ExclusionReason::ALL {
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::json!(r.as_str())
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_the_root_are_listed() {
        let dir = target();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret.txt", b"outside\n");
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            dir.path().join("link.txt"),
        )
        .unwrap();
        std::os::unix::fs::symlink(dir.path().join("src"), dir.path().join("srclink")).unwrap();
        let s = ContextPack::survey(dir.path(), &opts()).unwrap();
        assert_eq!(reason_of(&s, "link.txt"), Some(ExclusionReason::Symlink));
        assert_eq!(reason_of(&s, "srclink"), Some(ExclusionReason::Symlink));
        assert!(!s.pack.files.contains_key("link.txt"));
    }
}
