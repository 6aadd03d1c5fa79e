//! Taking a snapshot of a directory: one ignore-aware walk that decides, in order and on one
//! thread, what enters the pack, then reads, checks and hashes the admitted files on every core
//! (through handles opened without following a link, checked to be the inode the walk saw),
//! spilling past `spill_above_bytes` to a mapped file. The rules it applies are
//! in [`super::rules`]; [`ContextPack::survey`] runs the same walk and explains it.

use super::git::{find_git_dir, read_head_sha};
use super::paths::{rel_display, rel_path};
use super::rules::{is_always_excluded_dir, is_secret_file_name, text_of, REPO_CONFIG_FILE};
use super::text::{Spill, Text};
use super::{ContextPack, PackFile, PackOptions, Skipped};
use crate::error::PackError;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of content read (and held) at once while a pack is spilled.
const SPILL_GROUP_BYTES: u64 = 16 * 1024 * 1024;

impl ContextPack {
    /// Walk `root` once and capture every admissible file. Errors only for a missing or
    /// non-directory root, an unreadable root, or an invalid `opts.exclude` glob
    /// (`BadPattern`); unreadable individual files are recorded in `skipped`.
    ///
    /// The pack's `root` is the canonical (absolute, symlink-free) form of `root`.
    pub fn snapshot(root: &Path, opts: &PackOptions) -> Result<ContextPack, PackError> {
        Self::walk(root, opts, None)
    }

    /// The one walk behind [`ContextPack::snapshot`]; `trace` (when given) learns which
    /// directories it entered and the exclude globs it applied, for [`ContextPack::survey`].
    pub(crate) fn walk(
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
}

/// What [`ContextPack::survey`] needs to know about a walk beyond the pack it produced.
#[derive(Default)]
pub(crate) struct WalkTrace {
    /// Directories the walk entered, relative to the root ("" is not recorded).
    pub(crate) dirs: BTreeSet<String>,
    pub(crate) excludes: Option<ignore::overrides::Override>,
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
    let mut spill = Spill::create(&std::env::temp_dir())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::testing::{reason_for, snap, write};
    use crate::pack::{FileKind, ALWAYS_EXCLUDED_DIRS};
    use std::fs;

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
                .filter(|e| e.reason == crate::pack::ExclusionReason::OverBudget)
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
}
