//! The planner's view of a pack too large to list file by file: directories with their sizes
//! and languages, and the rule that a task may name a directory (`src/api/`) for the files
//! under it.
//!
//! Deterministic: the same pack always gives the same summary and the same expansion.

use super::ContextPack;
use std::collections::BTreeMap;

/// Beyond this many files the planner sees directories, not paths.
pub const LIST_FILES_UP_TO: usize = 200;
/// How many files one directory entry in a task expands to at most. The per-task budget is
/// not this: a task over the flow's `max_task_files`/`max_task_tokens` is sharded by module
/// afterwards (`coverage::shard_tasks`); this only bounds what one entry can name.
pub const FILES_PER_DIRECTORY_ENTRY: usize = 2000;

#[derive(Default)]
struct DirStats {
    files: usize,
    lines: u64,
    languages: BTreeMap<String, usize>,
}

/// One line per directory, at the deepest level that still fits `max_lines` lines: path with a
/// trailing `/`, files, lines and the main languages. Files at the root are counted under `./`.
pub fn directory_summary(pack: &ContextPack, max_lines: usize) -> String {
    let max_lines = max_lines.max(1);
    let deepest = pack
        .files
        .keys()
        .map(|p| p.matches('/').count())
        .max()
        .unwrap_or(0);
    let mut chosen = group(pack, 1);
    for depth in 2..=deepest {
        let g = group(pack, depth);
        if g.len() > max_lines {
            break;
        }
        chosen = g;
    }
    let mut out = String::new();
    for (dir, s) in chosen.iter().take(max_lines) {
        let mut langs: Vec<(&String, &usize)> = s.languages.iter().collect();
        langs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let langs: Vec<String> = langs
            .iter()
            .take(3)
            .map(|(l, n)| format!("{l} {n}"))
            .collect();
        out.push_str(&format!(
            "- {dir} ({} files, {} lines: {})\n",
            s.files,
            s.lines,
            langs.join(", ")
        ));
    }
    if chosen.len() > max_lines {
        out.push_str(&format!(
            "- … {} more directories\n",
            chosen.len() - max_lines
        ));
    }
    out
}

fn group(pack: &ContextPack, depth: usize) -> BTreeMap<String, DirStats> {
    let mut groups: BTreeMap<String, DirStats> = BTreeMap::new();
    for f in pack.files.values() {
        let parts: Vec<&str> = f.path.split('/').collect();
        let dirs = &parts[..parts.len() - 1];
        let key = if dirs.is_empty() {
            "./".to_string()
        } else {
            format!("{}/", dirs[..dirs.len().min(depth)].join("/"))
        };
        let s = groups.entry(key).or_default();
        s.files += 1;
        s.lines += u64::from(f.line_count);
        *s.languages.entry(f.language.clone()).or_default() += 1;
    }
    groups
}

/// The pack files a task's `dir/` entry stands for, in path order, at most
/// [`FILES_PER_DIRECTORY_ENTRY`]; empty when nothing in the pack is under it.
pub fn expand_directory(pack: &ContextPack, entry: &str) -> Vec<String> {
    let dir = entry.trim().trim_start_matches("./").trim_end_matches('/');
    if dir.is_empty() || dir.split('/').any(|s| s == "..") {
        return Vec::new();
    }
    let prefix = format!("{dir}/");
    pack.files
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .take(FILES_PER_DIRECTORY_ENTRY)
        .map(|(p, _)| p.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn pack(n: usize) -> ContextPack {
        let files = (0..n)
            .map(|i| {
                (
                    format!("svc{}/mod{}/f{i}.py", i % 3, i % 7),
                    "x = 1\ny = 2\n".to_string(),
                )
            })
            .chain([("README.md".to_string(), "# r\n".to_string())])
            .collect();
        ContextPack::from_files(PathBuf::from("/t"), None, files)
    }

    #[test]
    fn the_summary_goes_as_deep_as_its_line_budget_allows() {
        let p = pack(300);
        let shallow = directory_summary(&p, 5);
        assert!(
            shallow.contains("- svc0/ (100 files, 200 lines: python 100)"),
            "{shallow}"
        );
        assert!(shallow.contains("- ./ (1 files"), "{shallow}");
        let deep = directory_summary(&p, 40);
        assert!(deep.contains("- svc0/mod0/ ("), "{deep}");
        assert!(!deep.contains("f12.py"), "no single path: {deep}");
        let cut = directory_summary(&p, 2);
        assert!(cut.contains("… 2 more directories"), "{cut}");
    }

    #[test]
    fn a_directory_entry_expands_to_its_files_boundedly_and_never_climbs_out() {
        let p = pack(300);
        let got = expand_directory(&p, "svc1/");
        assert_eq!(got.len(), 100, "every file under it");
        assert_eq!(
            expand_directory(&pack(6100), "svc1/").len(),
            FILES_PER_DIRECTORY_ENTRY
        );
        assert!(got.iter().all(|f| f.starts_with("svc1/")));
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(got, sorted);
        assert_eq!(expand_directory(&p, "./svc2/mod3").len(), 14);
        assert!(
            expand_directory(&p, "svc").is_empty(),
            "a prefix is not a directory"
        );
        assert!(expand_directory(&p, "../etc/").is_empty());
        assert!(expand_directory(&p, "/").is_empty());
    }
}
