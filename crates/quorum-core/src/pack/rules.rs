//! What a snapshot admits, as rules both a directory walk and a git tree listing apply: the
//! always-excluded directories, secret-looking file names, `.quorum.toml`, binary and UTF-8
//! checks, gitignore-syntax globs, and [`TreeRules`] — the whole rule set for a listing that is
//! not a directory walk.

use super::PackOptions;
use crate::error::PackError;
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

/// The rules of [`ContextPack::snapshot`](super::ContextPack::snapshot) for a file listing that does not come from walking a
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

    /// Check content as [`ContextPack::snapshot`](super::ContextPack::snapshot) checks a file: size, binary, UTF-8.
    pub fn admit_content(&self, bytes: Vec<u8>) -> Result<Arc<str>, String> {
        self.admit_size(bytes.len() as u64)?;
        text_of(bytes)
    }
}

/// Bytes as pack text, or the `skipped` reason ("binary").
pub(crate) fn text_of(buf: Vec<u8>) -> Result<Arc<str>, String> {
    if buf[..buf.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return Err("binary".to_string());
    }
    let text = String::from_utf8(buf).map_err(|_| "binary".to_string())?;
    Ok(Arc::from(text))
}

pub(crate) fn is_always_excluded_dir(name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
