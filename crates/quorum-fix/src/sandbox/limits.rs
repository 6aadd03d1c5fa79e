//! Bounds on what a test command may consume: processes, memory, file size and open files.
//!
//! Two mechanisms, both from the kernel: resource limits set in the child before it execs
//! (per process, and `RLIMIT_NPROC` per user namespace — which the kernel does not enforce
//! for root), and a cgroup of its own under this process's cgroup (v2, or v1's `pids` and
//! `memory` controllers) wherever that can be created, which bounds the whole tree, root
//! included, and is removed after the run. What applied is said in the sandbox's line.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What one run of a test command may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads at once (a fork bomb ends as a failed test).
    pub processes: u64,
    /// Bytes of memory: the cgroup's total, else each process's data segment.
    pub memory_bytes: u64,
    /// The largest file it may write, in bytes (a disk filler ends with SIGXFSZ).
    pub file_bytes: u64,
    /// Open files per process.
    pub open_files: u64,
    /// Bytes the run may take from the free space of the filesystem holding the worktree
    /// (watched while it runs; a disk filler is killed and fails).
    pub disk_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            processes: 1024,
            memory_bytes: 8 << 30,
            file_bytes: 2 << 30,
            open_files: 4096,
            disk_bytes: 16 << 30,
        }
    }
}

/// A cgroup made for one run (one directory per controller hierarchy).
#[derive(Debug)]
pub struct RunCgroup {
    dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each, prepared before the fork (no allocation after it).
    procs: Vec<CString>,
    /// Whether the process count is bounded by it, and the memory.
    pub bounds_processes: bool,
    pub bounds_memory: bool,
}

/// The part of a [`RunCgroup`] the forked child uses: paths only, nothing to allocate.
#[derive(Debug, Clone)]
pub struct ChildCgroup {
    procs: Vec<CString>,
    bounds_memory: bool,
}

static RUNS: AtomicU64 = AtomicU64::new(0);

impl RunCgroup {
    /// A fresh cgroup with `limits`, or None where none can be made here (no permission,
    /// no controller): the resource limits are then all there is.
    pub fn create(limits: &Limits) -> Option<RunCgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let name = format!(
            "quorum-sandbox-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let mut cg = RunCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            bounds_processes: false,
            bounds_memory: false,
        };
        let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        for line in own.lines() {
            // "hierarchy-id:controllers:path"
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let rel = path.trim_start_matches('/');
            let (base, pids, memory) = if controllers.is_empty() && unified {
                (
                    Path::new("/sys/fs/cgroup").join(rel),
                    "pids.max",
                    "memory.max",
                )
            } else if controllers.split(',').any(|c| c == "pids") {
                (Path::new("/sys/fs/cgroup/pids").join(rel), "pids.max", "")
            } else if controllers.split(',').any(|c| c == "memory") {
                (
                    Path::new("/sys/fs/cgroup/memory").join(rel),
                    "",
                    "memory.limit_in_bytes",
                )
            } else {
                continue;
            };
            let dir = base.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let mut useful = false;
            if !pids.is_empty()
                && std::fs::write(dir.join(pids), limits.processes.to_string()).is_ok()
            {
                cg.bounds_processes = true;
                useful = true;
            }
            if !memory.is_empty()
                && std::fs::write(dir.join(memory), limits.memory_bytes.to_string()).is_ok()
            {
                cg.bounds_memory = true;
                useful = true;
                // v2: no swapping around the bound.
                let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            }
            let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes()).ok();
            match (useful, procs) {
                (true, Some(procs)) => {
                    cg.procs.push(procs);
                    cg.dirs.push(dir);
                }
                _ => {
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        (!cg.dirs.is_empty()).then_some(cg)
    }

    /// What the child needs to join it, prepared before the fork.
    pub fn for_child(&self) -> ChildCgroup {
        ChildCgroup {
            procs: self.procs.clone(),
            bounds_memory: self.bounds_memory,
        }
    }

    /// Kill what is left in it and remove it (bounded: a process the kernel is still
    /// reaping gets a few tries). Blocking; run it off the async threads.
    pub fn remove(&self) {
        for dir in &self.dirs {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
                for pid in std::fs::read_to_string(dir.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse::<i32>().ok())
                {
                    // SAFETY: signalling a process in the cgroup this run made; no memory is touched.
                    #[cfg(unix)]
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

/// Applies `limits` (and joins `cgroup`) in the forked child, before it execs. Only
/// async-signal-safe calls: everything it needs was prepared before the fork (`nproc` by
/// [`nproc_bound`]).
#[cfg(unix)]
pub fn apply_in_child(
    limits: &Limits,
    cgroup: Option<&ChildCgroup>,
    nproc: Option<u64>,
) -> std::io::Result<()> {
    if let Some(cg) = cgroup {
        for procs in &cg.procs {
            // SAFETY: open/write/close on a path prepared before the fork; "0" moves the
            // calling process.
            let ok = unsafe {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    false
                } else {
                    let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                    n == 1
                }
            };
            if !ok {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    // Never above the hard limit this process has (raising it needs privilege).
    let set = |resource, value: u64| {
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit on this (child) process with valid structs.
        unsafe {
            if libc::getrlimit(resource, &mut now) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let v = (value as libc::rlim_t).min(now.rlim_max);
            let lim = libc::rlimit {
                rlim_cur: v,
                rlim_max: v,
            };
            if libc::setrlimit(resource, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    if let Some(n) = nproc {
        set(libc::RLIMIT_NPROC, n)?;
    }
    set(libc::RLIMIT_FSIZE, limits.file_bytes)?;
    set(libc::RLIMIT_NOFILE, limits.open_files)?;
    set(libc::RLIMIT_CORE, 0)?;
    if cgroup.is_none_or(|c| !c.bounds_memory) {
        set(libc::RLIMIT_DATA, limits.memory_bytes)?;
    }
    Ok(())
}

/// `RLIMIT_NPROC` for a run without a cgroup bounding its processes: the kernel counts all
/// of this user's threads against it (also across its user namespaces), so the bound is
/// the machine's thread count now plus `limits.processes` — at most that many more. None
/// for root, whom the kernel exempts: only a cgroup bounds root's processes.
pub fn nproc_bound(limits: &Limits) -> Option<u64> {
    // SAFETY: geteuid has no preconditions.
    #[cfg(unix)]
    let root = unsafe { libc::geteuid() } == 0;
    #[cfg(not(unix))]
    let root = true;
    if root {
        return None;
    }
    // /proc/loadavg's fourth field: "running/total" scheduling entities (threads).
    let total = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(3)?
                .split('/')
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    Some(total + limits.processes)
}

/// Free bytes (for an unprivileged user) on the filesystem holding `path`. One `statvfs`
/// call: cheap enough to make on a timer.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    #[cfg(unix)]
    {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: statvfs fills the struct it is given for a valid C path.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}
