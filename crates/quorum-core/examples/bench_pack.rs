//! Pack build against `git ls-files` + blake3 of the same files, on a generated tree, in one
//! run: `cargo run --release -p quorum-core --example bench_pack [FILES]` (default 100,000).
//!
//! The baseline is the floor for "list what git tracks and hash it": the index read by git,
//! then every file read and hashed with the same blake3 crate, one after another. The pack does
//! more (ignore rules, secrets, binary and size checks, symlink rules, line counts, language and
//! kind), on every core for the reading and hashing. Peak resident memory is the process's
//! high-water mark after each step (the baseline runs first and holds one file at a time).

use quorum_core::pack::{ContextPack, PackOptions};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn generate(root: &Path, files: usize) -> u64 {
    let mut bytes = 0u64;
    for i in 0..files {
        let dir = root.join(format!("pkg{:03}/mod{:03}", i / 10_000, (i / 100) % 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).expect("create dir");
        }
        let mut f = std::fs::File::create(dir.join(format!("file{i:06}.py"))).expect("create");
        let mut body = String::new();
        for line in 0..20 {
            body.push_str(&format!(
                "def f{i}_{line}(x):\n    return x * {line} + {i}\n"
            ));
        }
        bytes += body.len() as u64;
        f.write_all(body.as_bytes()).expect("write");
    }
    bytes
}

fn git(root: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?} failed");
    out.stdout
}

/// Resident memory now (VmRSS), MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<f64>().ok())
            })
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(0.0)
}

fn main() {
    let files: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let t = Instant::now();
    let bytes = generate(root, files);
    eprintln!(
        "generated {files} files ({:.1} MiB) in {:.1} s; indexing them with git",
        bytes as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);

    let t = Instant::now();
    let listed = git(root, &["ls-files", "-z"]);
    let mut hashed = 0usize;
    for path in listed.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = std::str::from_utf8(path).expect("utf-8 path");
        let content = std::fs::read(root.join(path)).expect("read");
        std::hint::black_box(blake3::hash(&content));
        hashed += 1;
    }
    let baseline = t.elapsed().as_secs_f64();
    let rss_baseline = peak_rss_mib();

    // The default options: a pack past 64 MiB is spilled (read in groups, mapped read-only).
    let t = Instant::now();
    let pack = ContextPack::snapshot(root, &PackOptions::default()).expect("pack");
    let packed = t.elapsed().as_secs_f64();
    let rss_pack = peak_rss_mib();
    let rss_spilled_now = rss_mib();
    assert_eq!(pack.len(), hashed, "the pack and git disagree on the files");
    let spilled = pack
        .files
        .values()
        .filter(|f| f.content.is_spilled())
        .count();
    drop(pack);

    // The same pack held on the heap (spilling off), for comparison.
    let t = Instant::now();
    let held = ContextPack::snapshot(
        root,
        &PackOptions {
            spill_above_bytes: 0,
            ..PackOptions::default()
        },
    )
    .expect("pack");
    let held_secs = t.elapsed().as_secs_f64();
    let rss_held_now = rss_mib();
    let rss_held_peak = peak_rss_mib();
    assert_eq!(held.len(), hashed);

    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "files: {files} ({:.1} MiB), cores: {cores}",
        bytes as f64 / 1048576.0
    );
    println!("git ls-files + blake3: {baseline:.2} s (peak rss {rss_baseline:.0} MiB)");
    println!(
        "quorum pack (spilled):  {packed:.2} s (peak rss {rss_pack:.0} MiB; {rss_spilled_now:.0} MiB resident with the pack alive; {spilled} of {hashed} files spilled)"
    );
    println!(
        "quorum pack (held):     {held_secs:.2} s (peak rss {rss_held_peak:.0} MiB; {rss_held_now:.0} MiB resident with the pack alive)"
    );
    println!(
        "ratio pack / baseline: {:.2}x (spilled), {:.2}x (held)",
        packed / baseline,
        held_secs / baseline
    );
    println!(
        "resident with the pack alive, spilled / held: {:.2}x",
        rss_spilled_now / rss_held_now.max(1.0)
    );
}
