//! Running the analyzer catalog's tools on a temporary copy of the pack, bounded in time and
//! output, and turning what they print into the review's leads.
//!
//! What the tools see: a fresh temporary directory per tool holding exactly the pack's files
//! (never the user's tree; the pack already left out secrets, ignored and binary files), as
//! the current directory and as HOME; an environment cleared of everything but PATH and the
//! variables the catalog entry names (so proxies and credentials are gone); stdin closed.
//! What bounds them: a timeout per tool, after which its whole process group is killed, and a
//! cap on the bytes read from its output. "No network" is best effort: the catalog passes each
//! tool's offline switches and nothing here is an OS sandbox (no namespaces, no seccomp) — a
//! tool can still do whatever its user can. All of it runs on tokio's process and blocking
//! pools, never on the async threads.
//!
//! The engine names no tool: what to run, on which files and how to read it is the catalog's
//! (`quorum_core::analyzer`). A tool that is missing, has nothing to look at, fails, hangs or
//! prints something unreadable is recorded as not run, with the reason; it never fails the
//! review.

use quorum_core::analyzer::{parse_output, AnalyzerCatalog, AnalyzerRun, AnalyzerSpec, Leads};
use quorum_core::pack::ContextPack;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Most bytes of a tool's stdout that are read; a tool that prints more is stopped.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// Most bytes of stderr kept, for the reason of a failed run.
const MAX_STDERR_BYTES: usize = 16 * 1024;

/// A catalog and how to run it: what a node runs on the reviews it accepts.
#[derive(Debug, Clone)]
pub struct AnalyzerSetup {
    pub catalog: AnalyzerCatalog,
    pub options: RunOptions,
}

impl AnalyzerSetup {
    pub async fn run(&self, pack: &ContextPack) -> Leads {
        run_all(&self.catalog, pack, &self.options).await
    }

    /// [`AnalyzerSetup::run`], telling `on_run` about each analyzer as it finishes.
    pub async fn run_reporting(
        &self,
        pack: &ContextPack,
        on_run: impl FnMut(&AnalyzerRun),
    ) -> Leads {
        run_all_reporting(&self.catalog, pack, &self.options, on_run).await
    }
}

/// How the tools are run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Each tool's bound unless its catalog entry sets its own.
    pub timeout: Duration,
    /// The PATH tools are looked up in and run with; `None` = this process's PATH.
    pub path: Option<OsString>,
    /// Cap on the bytes of stdout read from one tool.
    pub max_output_bytes: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(60),
            path: None,
            max_output_bytes: MAX_OUTPUT_BYTES,
        }
    }
}

/// Run every analyzer of `catalog` that applies to `pack` and is on PATH, one after another.
/// Never fails: each analyzer's outcome is in the returned runs.
pub async fn run_all(catalog: &AnalyzerCatalog, pack: &ContextPack, opts: &RunOptions) -> Leads {
    run_all_reporting(catalog, pack, opts, |_| {}).await
}

/// [`run_all`], telling `on_run` about each analyzer as it finishes (a slow tool's neighbours
/// are not held back from the user).
pub async fn run_all_reporting(
    catalog: &AnalyzerCatalog,
    pack: &ContextPack,
    opts: &RunOptions,
    mut on_run: impl FnMut(&AnalyzerRun),
) -> Leads {
    let path = opts
        .path
        .clone()
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    let mut out = Leads::default();
    for spec in &catalog.analyzers {
        let (run, mut leads) = run_one(spec, pack, &path, opts).await;
        match &run.skipped_reason {
            Some(why) => tracing::info!(analyzer = %spec.name, reason = %why, "analyzer skipped"),
            None => {
                tracing::info!(analyzer = %spec.name, hits = run.hits, ms = run.duration_ms, "analyzer ran")
            }
        }
        on_run(&run);
        out.runs.push(run);
        out.leads.append(&mut leads);
    }
    out
}

async fn run_one(
    spec: &AnalyzerSpec,
    pack: &ContextPack,
    path: &OsString,
    opts: &RunOptions,
) -> (AnalyzerRun, Vec<quorum_core::analyzer::Lead>) {
    let files = match spec.applicable_files(pack) {
        Ok(f) => f,
        Err(why) => return (AnalyzerRun::skipped(&spec.name, why), Vec::new()),
    };
    let Some(program) = find_on_path(&spec.command, path) else {
        return (
            AnalyzerRun::skipped(&spec.name, format!("{} is not on PATH", spec.command)),
            Vec::new(),
        );
    };
    let started = Instant::now();
    let copy = match PackCopy::create(pack).await {
        Ok(c) => c,
        Err(e) => {
            return (
                AnalyzerRun::skipped(
                    &spec.name,
                    format!("cannot make a temporary copy of the reviewed files: {e}"),
                ),
                Vec::new(),
            )
        }
    };
    let timeout = spec
        .timeout_secs
        .map(Duration::from_secs)
        .unwrap_or(opts.timeout);
    let result = execute(spec, &program, &files, &copy.dir, path, timeout, opts).await;
    let roots = copy.roots();
    let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
    let mut run = AnalyzerRun {
        name: spec.name.clone(),
        ran: false,
        skipped_reason: None,
        hits: 0,
        note: None,
        duration_ms: 0,
    };
    let mut leads = Vec::new();
    match result.and_then(|out| read_hits(spec, &out)) {
        Ok(hits) => {
            let (kept, note) = spec.leads(hits, &roots, pack);
            run.ran = true;
            run.hits = kept.len();
            run.note = note;
            leads = kept;
        }
        Err(why) => run.skipped_reason = Some(why),
    }
    run.duration_ms = started.elapsed().as_millis() as u64;
    copy.remove().await;
    (run, leads)
}

/// The tool's hits, or why its output cannot be used.
fn read_hits(spec: &AnalyzerSpec, out: &Output) -> Result<Vec<quorum_core::analyzer::Hit>, String> {
    let hits = parse_output(spec.format, &out.stdout).map_err(|e| {
        let mut why = format!("its output could not be read ({e})");
        if !out.status_ok {
            why.push_str(&format!("; {}", out.exit_text()));
        }
        why
    })?;
    // No output and a failing exit: the tool did not run properly (bad flags, no config),
    // which is not the same as "no hits".
    if hits.is_empty() && out.stdout.trim().is_empty() && !out.status_ok {
        return Err(out.exit_text());
    }
    Ok(hits)
}

struct Output {
    stdout: String,
    stderr: String,
    status_ok: bool,
    code: Option<i32>,
}

impl Output {
    fn exit_text(&self) -> String {
        let first = self
            .stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message");
        let first: String = first.chars().take(200).collect();
        match self.code {
            Some(c) => format!("it exited with status {c}: {first}"),
            None => format!("it was killed by a signal: {first}"),
        }
    }
}

async fn execute(
    spec: &AnalyzerSpec,
    program: &Path,
    files: &[String],
    dir: &Path,
    path: &OsString,
    timeout: Duration,
    opts: &RunOptions,
) -> Result<Output, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(spec.expand_args(files))
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env("TMPDIR", dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for entry in &spec.env {
        let (name, fallback) = env_entry(entry);
        match (std::env::var_os(name), fallback) {
            (Some(v), _) => {
                cmd.env(name, v);
            }
            (None, Some(value)) => {
                cmd.env(name, value);
            }
            (None, None) => {}
        }
    }
    // Its own process group, so a timeout kills what the tool started too.
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{} could not be started: {e}", program.display()))?;
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let cap = opts.max_output_bytes;
    let work = async {
        let read_out = async {
            let mut buf = Vec::new();
            if let Some(s) = stdout.as_mut() {
                // One byte past the cap says the output did not fit.
                let _ = s.take(cap as u64 + 1).read_to_end(&mut buf).await;
            }
            buf
        };
        let read_err = async {
            let mut buf = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(MAX_STDERR_BYTES as u64).read_to_end(&mut buf).await;
            }
            buf
        };
        tokio::pin!(read_out, read_err);
        // Both pipes are drained together (a tool blocked on a full stderr never closes its
        // stdout), but stdout past the cap ends the wait at once: the tool may print forever.
        let mut err = None;
        let out = loop {
            tokio::select! {
                out = &mut read_out => break out,
                e = &mut read_err, if err.is_none() => err = Some(e),
            }
        };
        if out.len() > cap {
            return Err(format!("its output was larger than {cap} bytes (stopped)"));
        }
        let err = match err {
            Some(e) => e,
            None => read_err.await,
        };
        let status = child.wait().await.map_err(|e| e.to_string())?;
        Ok(Output {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            status_ok: status.success(),
            code: status.code(),
        })
    };
    let result = tokio::time::timeout(timeout, work).await;
    let outcome = match result {
        Ok(r) => r,
        Err(_) => Err(format!(
            "timed out after {} s (killed)",
            timeout.as_secs_f64()
        )),
    };
    if outcome.is_err() {
        kill_group(pid);
        let _ = child.kill().await;
    }
    outcome
}

/// One `env` entry of the catalog: `NAME` passes this process's value through when it is set;
/// `NAME=VALUE` also supplies VALUE when it is not, `{home}` in it being the user's real HOME
/// (the tool's own HOME is the copy, so a toolchain found through HOME needs this).
fn env_entry(entry: &str) -> (&str, Option<OsString>) {
    match entry.split_once('=') {
        None => (entry.trim(), None),
        Some((name, value)) => {
            let value = if value.contains("{home}") {
                std::env::var_os("HOME")
                    .map(|h| OsString::from(value.replace("{home}", &h.to_string_lossy())))
            } else {
                Some(OsString::from(value))
            };
            (name.trim(), value)
        }
    }
}

/// SIGKILL the tool's process group (it is its leader), so children it started die with it.
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is shared.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// The program's path in `path`'s directories, if it is there and executable.
pub fn find_on_path(program: &str, path: &OsString) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    true
}

/// A temporary copy of the pack's files, removed when the tool is done (or dropped).
struct PackCopy {
    dir: PathBuf,
}

impl PackCopy {
    async fn create(pack: &ContextPack) -> std::io::Result<PackCopy> {
        let dir = std::env::temp_dir().join(format!(
            "quorum-analyzers-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let files: Vec<(String, quorum_core::pack::Text)> = pack
            .files
            .values()
            .map(|f| (f.path.clone(), f.content.clone()))
            .collect();
        let target = dir.clone();
        let made = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            // Only this user may read the copy: it is the code under review.
            let mut dir = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
            dir.create(&target)?;
            // Copying reads every file: a spilled pack is handed back as it is copied.
            let mut window = quorum_core::pack::ResidentWindow::new();
            for (rel, content) in files {
                // Pack paths are relative and normalised; refuse anything else anyway.
                if rel.starts_with('/') || rel.split('/').any(|c| c == ".." || c.is_empty()) {
                    continue;
                }
                let p = target.join(&rel);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&p, content.as_bytes())?;
                window.done_with(&content);
            }
            Ok(())
        })
        .await
        .map_err(std::io::Error::other)?;
        let copy = PackCopy { dir };
        made?;
        Ok(copy)
    }

    /// The copy's path as written and canonical (macOS /tmp is /private/tmp): tools print
    /// either.
    fn roots(&self) -> Vec<String> {
        let mut r = vec![self.dir.display().to_string()];
        if let Ok(c) = self.dir.canonicalize() {
            let c = c.display().to_string();
            if !r.contains(&c) {
                r.push(c);
            }
        }
        r
    }

    async fn remove(mut self) {
        let dir = std::mem::take(&mut self.dir);
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
    }
}

impl Drop for PackCopy {
    fn drop(&mut self) {
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
