//! Running the target's own code — its test command — without network, with a cleared
//! environment, a time bound and an output cap; the whole process group is killed at the bound.
//!
//! Isolation comes from the distribution: bubblewrap (`bwrap --unshare-net`) where present,
//! else a new user and network namespace (`unshare -rn`). Where neither works the caller must
//! refuse to run tests unless the user passed `--unsandboxed`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How test commands are isolated from the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    Bwrap(PathBuf),
    Unshare(PathBuf),
    /// No isolation (only with the user's explicit `--unsandboxed`).
    None,
}

impl Isolation {
    /// The first isolation that works on this machine, tried with a trivial command.
    pub async fn detect() -> Option<Isolation> {
        if let Some(bwrap) = on_path("bwrap") {
            let ok = tokio::process::Command::new(&bwrap)
                .args(["--unshare-net", "--dev-bind", "/", "/", "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await
                .is_ok_and(|s| s.success());
            if ok {
                return Some(Isolation::Bwrap(bwrap));
            }
        }
        if let Some(unshare) = on_path("unshare") {
            let ok = tokio::process::Command::new(&unshare)
                .args(["-rn", "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await
                .is_ok_and(|s| s.success());
            if ok {
                return Some(Isolation::Unshare(unshare));
            }
        }
        None
    }

    /// For the report and the progress line.
    pub fn describe(&self) -> String {
        match self {
            Isolation::Bwrap(_) => "sandboxed: bubblewrap, no network".into(),
            Isolation::Unshare(_) => "sandboxed: network namespace (unshare), no network".into(),
            Isolation::None => {
                "UNSANDBOXED (--unsandboxed): the tests could reach the network".into()
            }
        }
    }
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
    /// Run the command with `dir` as its working directory and `home` as its HOME.
    pub async fn run(&self, dir: &Path, home: &Path) -> std::io::Result<CommandRun> {
        let script = format!("exec 2>&1\n{}", self.command);
        let mut cmd = match &self.isolation {
            Isolation::Bwrap(bwrap) => {
                let mut c = tokio::process::Command::new(bwrap);
                c.args([
                    "--unshare-net",
                    "--die-with-parent",
                    "--dev-bind",
                    "/",
                    "/",
                    "--chdir",
                ])
                .arg(dir)
                .args(["bash", "-c", &script]);
                c
            }
            Isolation::Unshare(unshare) => {
                let mut c = tokio::process::Command::new(unshare);
                c.args(["-rn", "--", "bash", "-c", &script]);
                c
            }
            Isolation::None => {
                let mut c = tokio::process::Command::new("bash");
                c.args(["-c", &script]);
                c
            }
        };
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("CI", "1")
            .env("CARGO_NET_OFFLINE", "true")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // The toolchains stay where they are installed, though HOME moved.
        if let Some(real_home) = std::env::var_os("HOME") {
            let real_home = PathBuf::from(real_home);
            for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
                let v = std::env::var_os(var)
                    .map(PathBuf::from)
                    .unwrap_or_else(|| real_home.join(default));
                if v.exists() {
                    cmd.env(var, v);
                }
            }
        }
        #[cfg(unix)]
        cmd.process_group(0);
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
            let status = child.wait().await;
            (tail, status)
        };
        match tokio::time::timeout(self.timeout, read).await {
            Ok((tail, status)) => {
                let status = status?;
                Ok(CommandRun {
                    exit: status.code(),
                    timed_out: false,
                    output: String::from_utf8_lossy(&tail).into_owned(),
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
