//! Running the target's own code — its test command — contained, the way CI runners and
//! build sandboxes do: bubblewrap with every namespace unshared (no network, no host
//! sockets, no host processes), a filesystem of the system and toolchain directories
//! read-only with the private worktree the only writable project path ([`mounts`]), a
//! private empty `/tmp`, `$HOME` and `/run`, an allow-listed environment, and bounds on
//! time, output, processes, memory, file size and the disk it takes ([`limits`]); the whole
//! tree is killed at a bound.
//!
//! Where bubblewrap cannot run, the caller refuses to run tests unless the user passed
//! `--unsandboxed`, the only way to run them uncontained (a network namespace alone would
//! leave the user's files and sockets open, so it is no fallback).

pub mod limits;
pub mod mounts;

pub use limits::Limits;

use limits::RunCgroup;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How test commands are contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// bubblewrap at this path, with what bounds the process tree on this machine.
    Bwrap { bwrap: PathBuf, tree: TreeBounds },
    /// No isolation at all (only with the user's explicit `--unsandboxed`).
    None,
}

/// What bounds a test command's whole process tree here, found when the sandbox is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TreeBounds {
    /// A cgroup of its own bounds processes / memory.
    pub cgroup_processes: bool,
    pub cgroup_memory: bool,
    /// Without a cgroup, `RLIMIT_NPROC` bounds processes (not for root).
    pub nproc: bool,
}

/// The one line a machine without bubblewrap gets.
pub const NO_SANDBOX: &str = "cannot sandbox the test command: bubblewrap (bwrap) is not installed or cannot create namespaces here; install it (apt install bubblewrap, dnf install bubblewrap) or pass --unsandboxed to run the tests uncontained";

/// Environment variables a test command gets from this process when set (besides PATH,
/// HOME, LANG and the toolchain paths the sandbox sets), unless the name carries a secret.
const PASSED_ENV: &[&str] = &[
    "LC_ALL",
    "TZ",
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "GOFLAGS",
    "GOROOT",
    "JAVA_HOME",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "VIRTUAL_ENV",
    "NODE_OPTIONS",
];

/// Whether a variable's name says it holds a secret: never passed, whatever the list says.
pub fn names_a_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "COOKIE",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| n.contains(w))
}

impl Isolation {
    /// bubblewrap, when it can run the sandbox here (tried with a trivial command).
    pub async fn detect() -> Option<Isolation> {
        let bwrap = on_path("bwrap")?;
        let probe = tempfile_dir()?;
        let plan = mounts::plan(
            &probe,
            std::env::var_os("PATH").as_deref(),
            real_home().as_deref(),
        );
        let ok = tokio::process::Command::new(&bwrap)
            .args(&plan.args)
            .arg("true")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .is_ok_and(|s| s.success());
        let _ = std::fs::remove_dir(&probe);
        if !ok {
            return None;
        }
        let limits = Limits::default();
        let tree = tokio::task::spawn_blocking(move || {
            let cg = RunCgroup::create(&limits);
            let t = TreeBounds {
                cgroup_processes: cg.as_ref().is_some_and(|c| c.bounds_processes),
                cgroup_memory: cg.as_ref().is_some_and(|c| c.bounds_memory),
                nproc: limits::nproc_bound(&limits).is_some(),
            };
            if let Some(cg) = cg {
                cg.remove();
            }
            t
        })
        .await
        .unwrap_or_default();
        Some(Isolation::Bwrap { bwrap, tree })
    }

    /// For the report and the progress line.
    pub fn describe(&self) -> String {
        match self {
            Isolation::Bwrap { tree, .. } => {
                let processes = if tree.cgroup_processes {
                    "processes bounded (cgroup)"
                } else if tree.nproc {
                    "processes bounded (rlimit)"
                } else {
                    "processes NOT bounded (running as root with no cgroup to make)"
                };
                let memory = if tree.cgroup_memory {
                    "memory bounded (cgroup)"
                } else {
                    "memory bounded per process (rlimit)"
                };
                format!(
                    "sandboxed: bubblewrap, no network or host sockets, only the worktree \
                     writable, private /tmp and HOME; {processes}, {memory}, file size bounded"
                )
            }
            Isolation::None => "UNSANDBOXED (--unsandboxed): the tests ran with your files, \
                sockets and network, as you"
                .into(),
        }
    }
}

fn real_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .and_then(|h| h.canonicalize().ok())
}

/// An empty directory for the detection probe.
fn tempfile_dir() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "quorum-sandbox-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).ok()?;
    dir.canonicalize().ok()
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The project's test command and its bounds.
#[derive(Debug, Clone)]
pub struct TestCommand {
    pub command: String,
    pub isolation: Isolation,
    pub timeout: Duration,
    /// Bytes of output kept (the tail).
    pub max_output: usize,
    pub limits: Limits,
}

/// One run of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    /// None when killed (timeout or signal).
    pub exit: Option<i32>,
    pub timed_out: bool,
    /// The output's tail (stdout and stderr interleaved), at most `max_output` bytes.
    pub output: String,
}

impl TestCommand {
    /// Run the command with `dir` (the private worktree) as its working directory. `home`
    /// is its HOME when unsandboxed; in the sandbox HOME is a private tmpfs.
    pub async fn run(&self, dir: &Path, home: &Path) -> std::io::Result<CommandRun> {
        let script = format!("exec 2>&1\n{}", self.command);
        let dir = dir.canonicalize()?;
        let real_home = real_home();
        let (mut cmd, cgroup) = match &self.isolation {
            Isolation::Bwrap { bwrap, .. } => {
                let plan = mounts::plan(
                    &dir,
                    std::env::var_os("PATH").as_deref(),
                    real_home.as_deref(),
                );
                let mut c = tokio::process::Command::new(bwrap);
                c.args(&plan.args).args(["bash", "-c", &script]);
                c.env_clear();
                for (var, path) in &plan.env {
                    c.env(var, path);
                }
                c.env("HOME", mounts::INNER_HOME).env("TMPDIR", "/tmp");
                let limits = self.limits;
                let cg = tokio::task::spawn_blocking(move || RunCgroup::create(&limits))
                    .await
                    .ok()
                    .flatten();
                (c, cg)
            }
            Isolation::None => {
                let mut c = tokio::process::Command::new("bash");
                c.args(["-c", &script]).env_clear().env("HOME", home);
                (c, None)
            }
        };
        for var in PASSED_ENV {
            if let Some(v) = std::env::var_os(var).filter(|_| !names_a_secret(var)) {
                cmd.env(var, v);
            }
        }
        cmd.current_dir(&dir)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("CI", "1")
            .env("CARGO_NET_OFFLINE", "true")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let nproc = if cgroup.as_ref().is_some_and(|c| c.bounds_processes) {
            None
        } else {
            limits::nproc_bound(&self.limits)
        };
        #[cfg(unix)]
        {
            cmd.process_group(0);
            if !matches!(self.isolation, Isolation::None) {
                let limits = self.limits;
                let child_cg = cgroup.as_ref().map(RunCgroup::for_child);
                // SAFETY: the closure runs in the forked child before exec and calls only
                // async-signal-safe functions (open, write, close, getrlimit, setrlimit) on
                // data prepared before the fork.
                unsafe {
                    cmd.pre_exec(move || limits::apply_in_child(&limits, child_cg.as_ref(), nproc));
                }
            }
        }
        let result = self.spawn_and_wait(cmd, &dir).await;
        if let Some(cg) = cgroup {
            let _ = tokio::task::spawn_blocking(move || cg.remove()).await;
        }
        result
    }

    async fn spawn_and_wait(
        &self,
        mut cmd: tokio::process::Command,
        dir: &Path,
    ) -> std::io::Result<CommandRun> {
        let free_at_start = limits::free_bytes(dir);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let cap = self.max_output.max(1024);
        let read = async {
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        tail.extend_from_slice(&buf[..n]);
                        if tail.len() > cap * 2 {
                            tail.drain(..tail.len() - cap);
                        }
                    }
                }
            }
            if tail.len() > cap {
                tail.drain(..tail.len() - cap);
            }
            (tail, child.wait().await)
        };
        // The disk the worktree is on: what the run took of its free space, four times a
        // second (other writers on that disk count too, so the bound is generous).
        let bound = self.limits.disk_bytes;
        let disk = async {
            let Some(start) = free_at_start else {
                return std::future::pending::<u64>().await;
            };
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let taken = limits::free_bytes(dir).map_or(0, |now| start.saturating_sub(now));
                if taken > bound {
                    return taken;
                }
            }
        };
        let watched = async {
            tokio::select! {
                done = read => Ok(done),
                taken = disk => Err(taken),
            }
        };
        match tokio::time::timeout(self.timeout, watched).await {
            Ok(Ok((tail, status))) => {
                let status = status?;
                Ok(CommandRun {
                    exit: status.code(),
                    timed_out: false,
                    output: String::from_utf8_lossy(&tail).into_owned(),
                })
            }
            Ok(Err(taken)) => {
                kill_group(pid);
                Ok(CommandRun {
                    exit: None,
                    timed_out: false,
                    output: format!(
                        "(killed: it took {} MiB of the disk holding the worktree, over its bound of {} MiB)",
                        taken >> 20,
                        bound >> 20
                    ),
                })
            }
            Err(_) => {
                kill_group(pid);
                Ok(CommandRun {
                    exit: None,
                    timed_out: true,
                    output: format!("(killed after {} s)", self.timeout.as_secs()),
                })
            }
        }
    }
}

fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid {
        // SAFETY: signalling a process group this process created; no memory is touched.
        unsafe {
            libc::kill(-(pid as i32), libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(cmd: &str, isolation: Isolation) -> TestCommand {
        TestCommand {
            command: cmd.into(),
            isolation,
            timeout: Duration::from_secs(20),
            max_output: 4096,
            limits: Limits::default(),
        }
    }

    #[tokio::test]
    async fn the_environment_is_cleared_and_the_output_capped() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("QUORUM_FIX_SECRET_PROBE", "leaked");
        let run = command(
            "echo \"[$QUORUM_FIX_SECRET_PROBE]\"; echo err >&2; exit 3",
            Isolation::None,
        )
        .run(dir.path(), dir.path())
        .await
        .unwrap();
        assert_eq!(run.exit, Some(3));
        assert!(run.output.contains("[]"), "{}", run.output);
        assert!(run.output.contains("err"));
        let run = command("head -c 100000 /dev/zero | tr '\\0' x", Isolation::None)
            .run(dir.path(), dir.path())
            .await
            .unwrap();
        assert!(run.output.len() <= 4096);
    }

    #[tokio::test]
    async fn the_process_group_is_killed_at_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let mut c = command(
            &format!("sleep 300 & echo $! > {}; wait", pidfile.display()),
            Isolation::None,
        );
        c.timeout = Duration::from_millis(500);
        let run = c.run(dir.path(), dir.path()).await.unwrap();
        assert!(run.timed_out);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The background child was in the group: it is gone (or a zombie being reaped).
        let gone = (0..100).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let alive = stat
                .split_whitespace()
                .nth(2)
                .is_some_and(|state| state != "Z");
            if alive {
                std::thread::sleep(Duration::from_millis(50));
            }
            !alive
        });
        assert!(gone, "a child of the test command outlived the bound");
    }
}
