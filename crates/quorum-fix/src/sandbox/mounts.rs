//! What a sandboxed test command sees: bubblewrap's argument list for a filesystem of the
//! system directories and toolchains read-only, the private worktree the only writable
//! project path, and a private, empty `/tmp`, `$HOME` and `/run`.
//!
//! The user's own files are not visible at all (not even read-only): the root is a fresh
//! tmpfs and only what is listed here is bound into it. A unix socket on a read-only mount
//! still accepts connections, so "read-only" alone would not close the host's sockets.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The system directories a test command's toolchain lives in, bound read-only where they
/// exist (a symlink, as `/bin` → `usr/bin` on merged-/usr systems, is recreated as one).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
];

/// Caches under the real home a build reads from, bound read-only when present, and the
/// variable that points a tool at them.
const HOME_CACHES: &[(&str, Option<&str>)] = &[
    (".cargo", Some("CARGO_HOME")),
    (".rustup", Some("RUSTUP_HOME")),
    (".cache/pip", Some("PIP_CACHE_DIR")),
    (".npm", None),
    (".m2", None),
    ("go/pkg/mod", Some("GOMODCACHE")),
];

/// Where the test command's private home is, inside the sandbox.
pub const INNER_HOME: &str = "/tmp/home";

/// The mounts and the toolchain variables for one run in `worktree`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountPlan {
    pub args: Vec<OsString>,
    /// Variables naming toolchain paths (CARGO_HOME, RUSTUP_HOME, …) as seen inside.
    pub env: Vec<(String, PathBuf)>,
}

/// The plan for `worktree`, from the machine's `PATH` and the real `$HOME`.
pub fn plan(
    worktree: &Path,
    path_var: Option<&std::ffi::OsStr>,
    real_home: Option<&Path>,
) -> MountPlan {
    let mut plan = MountPlan::default();
    let mut bound: Vec<PathBuf> = Vec::new();
    let arg = |plan: &mut MountPlan, parts: &[&std::ffi::OsStr]| {
        plan.args.extend(parts.iter().map(|p| p.to_os_string()));
    };
    arg(
        &mut plan,
        &[
            "--unshare-all".as_ref(),
            "--die-with-parent".as_ref(),
            "--new-session".as_ref(),
            "--dev".as_ref(),
            "/dev".as_ref(),
            "--proc".as_ref(),
            "/proc".as_ref(),
            "--tmpfs".as_ref(),
            "/tmp".as_ref(),
            "--dir".as_ref(),
            INNER_HOME.as_ref(),
            "--tmpfs".as_ref(),
            "/run".as_ref(),
        ],
    );
    for dir in SYSTEM_DIRS {
        let p = Path::new(dir);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    arg(
                        &mut plan,
                        &["--symlink".as_ref(), target.as_os_str(), p.as_os_str()],
                    );
                }
            }
            Ok(m) if m.is_dir() => {
                arg(
                    &mut plan,
                    &["--ro-bind".as_ref(), p.as_os_str(), p.as_os_str()],
                );
                bound.push(p.to_path_buf());
            }
            _ => {}
        }
    }
    // The toolchains the PATH names: under the real home its top folder (~/.pyenv for
    // ~/.pyenv/shims, ~/.cargo for ~/.cargo/bin), elsewhere a `bin` folder's parent (a
    // virtual environment needs its lib/) or the folder itself.
    let mut roots: Vec<PathBuf> = Vec::new();
    for dir in path_var.map(std::env::split_paths).into_iter().flatten() {
        let Ok(dir) = dir.canonicalize() else {
            continue;
        };
        let root = match real_home.and_then(|h| dir.strip_prefix(h).ok().map(|rest| (h, rest))) {
            Some((home, rest)) => match rest.components().next() {
                Some(first) => home.join(first),
                None => continue,
            },
            None if dir.file_name().is_some_and(|n| n == "bin") => {
                dir.parent().map(Path::to_path_buf).unwrap_or(dir)
            }
            None => dir,
        };
        if root == Path::new("/") || real_home.is_some_and(|h| h == root) {
            continue;
        }
        roots.push(root);
    }
    if let Some(home) = real_home {
        for (rel, var) in HOME_CACHES {
            let p = home.join(rel);
            if p.is_dir() {
                roots.push(p.clone());
                if let Some(var) = var {
                    plan.env.push((var.to_string(), p));
                }
            }
        }
    }
    roots.sort();
    roots.dedup();
    for root in roots {
        if bound.iter().any(|b| root.starts_with(b)) || root.starts_with(worktree) {
            continue;
        }
        arg(
            &mut plan,
            &["--ro-bind".as_ref(), root.as_os_str(), root.as_os_str()],
        );
        bound.push(root);
    }
    arg(
        &mut plan,
        &[
            "--bind".as_ref(),
            worktree.as_os_str(),
            worktree.as_os_str(),
            "--chdir".as_ref(),
            worktree.as_os_str(),
        ],
    );
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(plan: &MountPlan, flag: &str) -> Vec<String> {
        plan.args
            .windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn toolchains_are_read_only_and_the_worktree_the_only_writable_path() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        for d in [".pyenv/shims", ".cargo/bin", ".rustup", "secrets"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        let venv = tempfile::tempdir().unwrap();
        let v = venv.path().canonicalize().unwrap();
        std::fs::create_dir_all(v.join("bin")).unwrap();
        let path =
            std::env::join_paths([h.join(".pyenv/shims"), h.join(".cargo/bin"), v.join("bin")])
                .unwrap();
        let work = tempfile::tempdir().unwrap();
        let plan = plan(work.path(), Some(&path), Some(&h));
        let ro = pairs(&plan, "--ro-bind");
        for want in [
            h.join(".pyenv"),
            h.join(".cargo"),
            h.join(".rustup"),
            v.clone(),
        ] {
            assert!(
                ro.contains(&want.to_string_lossy().into_owned()),
                "{want:?} in {ro:?}"
            );
        }
        // The rest of the home, and the home itself, are not there at all.
        assert!(
            !ro.iter()
                .any(|p| p.ends_with("secrets") || Path::new(p) == h),
            "{ro:?}"
        );
        assert_eq!(
            pairs(&plan, "--bind"),
            [work.path().to_string_lossy().into_owned()]
        );
        assert!(pairs(&plan, "--tmpfs").contains(&"/tmp".to_string()));
        assert!(plan.args.iter().any(|a| a == "--unshare-all"));
        assert!(plan
            .env
            .iter()
            .any(|(k, p)| k == "CARGO_HOME" && *p == h.join(".cargo")));
    }
}
