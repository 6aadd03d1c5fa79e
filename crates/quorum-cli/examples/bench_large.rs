//! A large tree, packed and reviewed twice against the scripted model server, in one run:
//! wall time, each process's peak resident memory and the data dir's growth per review, next
//! to `git ls-files` + blake3 of the same files.
//!
//! ```sh
//! cargo build --release -p quorum-cli && cargo run --release -p quorum-cli --example bench_large
//! cargo run --release -p quorum-cli --example bench_large -- --files 100000   # about 1 GB
//! cargo run --release -p quorum-cli --example bench_large -- --tree ~/src/big   # a real tree
//! cargo run --release -p quorum-cli --example bench_large -- --bin /tmp/old/quorum   # another build
//! ```
//!
//! The generated tree is a git repository of `--files` Python files (default 20,000) of about
//! `--file-kib` KiB each (default 11: about 215 MB), every file distinct, all of it reviewed
//! (`pack.max_pack_bytes` lifted). Peak memory is each
//! child's own high-water mark (`wait4`), so the pack, the first and the second review are
//! measured apart. Store growth is what the data dir gained on disk (bytes of files, not
//! blocks): the first review stores the contents, a second review of the unchanged tree only
//! its own facts.

#[path = "../../../tests/support/mod.rs"]
mod support;

use quorum_testkit::ScriptedServer;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use support::*;

struct Args {
    files: usize,
    file_kib: usize,
    tree: Option<PathBuf>,
    bin: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        files: 20_000,
        file_kib: 11,
        tree: None,
        bin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--files" => a.files = value.parse().expect("--files N"),
            "--file-kib" => a.file_kib = value.parse().expect("--file-kib N"),
            "--tree" => a.tree = Some(PathBuf::from(value)),
            "--bin" => a.bin = Some(PathBuf::from(value)),
            other => {
                eprintln!(
                    "bench_large: unknown flag {other}; use --files N, --file-kib N, --tree DIR or --bin QUORUM"
                );
                std::process::exit(2);
            }
        }
    }
    a
}

/// The `quorum` binary built beside this example (`target/<profile>/quorum`).
fn quorum_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("quorum"))
        .expect("target dir");
    if !bin.is_file() {
        eprintln!(
            "bench_large: no quorum binary at {}; build it first: cargo build --release -p quorum-cli",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

fn generate(root: &Path, files: usize, file_kib: usize) -> u64 {
    let mut bytes = 0u64;
    for i in 0..files {
        let dir = root.join(format!("pkg{:03}/mod{:03}", i / 10_000, (i / 100) % 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).expect("create dir");
        }
        let mut body = String::with_capacity(file_kib * 1024 + 128);
        let mut line = 0;
        while body.len() < file_kib * 1024 {
            body.push_str(&format!(
                "def f{i}_{line}(x, y):\n    \"\"\"Step {line} of module {i}.\"\"\"\n    return (x * {line} + y) % {}\n\n",
                i + 7
            ));
            line += 1;
        }
        let mut f = std::fs::File::create(dir.join(format!("file{i:06}.py"))).expect("create");
        f.write_all(body.as_bytes()).expect("write");
        bytes += body.len() as u64;
    }
    bytes
}

fn git(root: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(root)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?} failed");
}

/// The floor: list what git tracks, read and hash every file, one after another.
fn baseline(root: &Path) -> (f64, u64) {
    let t = Instant::now();
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files");
    let mut bytes = 0u64;
    for rel in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = root.join(String::from_utf8_lossy(rel).as_ref());
        if let Ok(content) = std::fs::read(&path) {
            bytes += content.len() as u64;
            std::hint::black_box(blake3::hash(&content));
        }
    }
    (t.elapsed().as_secs_f64(), bytes)
}

/// One process's run: wall seconds, its own peak resident memory (MiB, from `wait4`), the
/// largest heap and file-backed parts seen while sampling it every 10 ms, and its exit code.
struct Measured {
    secs: f64,
    peak: f64,
    anon: f64,
    file: f64,
    code: i32,
}

/// `RssAnon` and `RssFile` of `pid` in MiB, while it runs.
fn rss_parts(pid: i32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
    };
    Some((field("RssAnon:")?, field("RssFile:")?))
}

/// Runs `cmd` to its end and measures it.
fn measured(cmd: &mut Command) -> Measured {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let t = Instant::now();
    let child = cmd.spawn().expect("spawn quorum");
    let pid = child.id() as libc::pid_t;
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut anon, mut file) = (0f64, 0f64);
            while !done.load(Ordering::Relaxed) {
                if let Some((a, f)) = rss_parts(pid) {
                    anon = anon.max(a);
                    file = file.max(f);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            (anon, file)
        })
    };
    let mut status = 0;
    // SAFETY: rusage is plain data, and wait4 reaps exactly this child, which `child` (never
    // waited on through std) does not reap again.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 failed");
    std::mem::forget(child);
    done.store(true, Ordering::Relaxed);
    let (anon, file) = sampler.join().unwrap_or_default();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Measured {
        secs: t.elapsed().as_secs_f64(),
        peak: usage.ru_maxrss as f64 / 1024.0,
        anon,
        file,
        code,
    }
}

/// Bytes of every file under `dir` (their lengths).
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let bin = a.bin.clone().unwrap_or_else(quorum_bin);
    let work = tempfile::tempdir().expect("tempdir");
    let tree = match &a.tree {
        Some(t) => t.clone(),
        None => {
            let root = work.path().join("tree");
            std::fs::create_dir_all(&root).unwrap();
            let t = Instant::now();
            let bytes = generate(&root, a.files, a.file_kib);
            git(&root, &["init", "-q"]);
            git(&root, &["add", "-A"]);
            git(&root, &["commit", "-q", "-m", "tree"]);
            println!(
                "generated {} files, {:.1} MiB, committed to git in {:.1} s",
                a.files,
                mib(bytes),
                t.elapsed().as_secs_f64()
            );
            root
        }
    };

    let (base_s, base_bytes) = baseline(&tree);
    println!(
        "git ls-files + blake3: {base_s:>7.2} s  ({:.1} MiB read)",
        mib(base_bytes)
    );

    let quiet = |c: &mut Command| {
        // The whole tree: no `pack.max_pack_bytes` cut (256 MiB by default).
        c.env("QUORUM_HOME", repo_root())
            .env("QUORUM_PACK__MAX_PACK_BYTES", "0")
            .env("QUORUM_ANALYZERS__ENABLED", "false")
            .env("HOME", work.path())
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null());
        if std::env::var_os("BENCH_LARGE_VERBOSE").is_none() {
            c.stderr(std::process::Stdio::null());
        }
    };
    let mut pack = Command::new(&bin);
    pack.args(["pack", tree.to_str().unwrap(), "--format", "json"]);
    quiet(&mut pack);
    let p = measured(&mut pack);
    let pack_s = p.secs;
    println!(
        "pack:            {:>7.2} s  peak {:>7.1} MiB (heap {:.1}, file-backed {:.1})  (exit {})",
        p.secs, p.peak, p.anon, p.file, p.code
    );

    let server = ScriptedServer::start(six_task_script(0, false))
        .await
        .expect("scripted server");
    let data = work.path().join("data");
    let backend = format!("ollama={}", server.ollama_url());
    let mut grown = Vec::new();
    for run in ["first", "second"] {
        let before = dir_bytes(&data);
        let out = work.path().join(format!("out-{run}"));
        let mut review = Command::new(&bin);
        review.args([
            "review",
            tree.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ]);
        review.env("QUORUM_DATA_DIR", &data);
        quiet(&mut review);
        let server_clone = &server;
        let m = tokio::task::block_in_place(|| measured(&mut review));
        let code = m.code;
        drop(server_clone.take_requests());
        if code > 1 {
            let why = std::fs::read_to_string(out.join("report.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .map(|r| format!("{}: {}", r["status"], r["status_reason"]))
                .unwrap_or_else(|| "no report".into());
            println!("  the {run} review did not complete ({why})");
        }
        let growth = dir_bytes(&data).saturating_sub(before);
        grown.push(growth);
        println!(
            "review ({run}): {:>7.2} s  peak {:>7.1} MiB (heap {:.1}, file-backed {:.1})  store +{:.1} MiB  (exit {code})",
            m.secs,
            m.peak,
            m.anon,
            m.file,
            mib(growth)
        );
    }
    println!(
        "ratios: pack / baseline {:.2}x; first review's store / content read {:.2}x; second review's store growth / first's {:.3}",
        pack_s / base_s.max(1e-9),
        grown[0] as f64 / base_bytes.max(1) as f64,
        grown[1] as f64 / grown[0].max(1) as f64
    );
}
