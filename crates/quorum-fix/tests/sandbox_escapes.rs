//! The test-command sandbox against the escapes a hostile repository would try: writing into
//! the user's checkout, `/tmp` or `$HOME`, reading a file under `$HOME`, reaching a unix
//! socket (path or abstract) or a TCP port outside, a fork bomb, a memory hog and a disk
//! filler. Run on the real sandbox; where bubblewrap cannot run, the refusal line is
//! checked instead (CI installs bubblewrap, so there the real path runs).
#![cfg(target_os = "linux")]

use quorum_fix::sandbox::{Isolation, Limits, TestCommand, NO_SANDBOX};
use std::path::{Path, PathBuf};
use std::time::Duration;

async fn sandbox() -> Option<Isolation> {
    let found = Isolation::detect().await;
    if found.is_none() {
        assert!(NO_SANDBOX.contains("install") && NO_SANDBOX.contains("--unsandboxed"));
        eprintln!("SKIP: bubblewrap cannot run here; checked the refusal line instead");
    }
    found
}

fn command(isolation: &Isolation, cmd: &str, limits: Limits) -> TestCommand {
    TestCommand {
        command: cmd.into(),
        isolation: isolation.clone(),
        timeout: Duration::from_secs(60),
        max_output: 16 * 1024,
        limits,
    }
}

/// A directory outside `/tmp` (the sandbox's `/tmp` is private, so a path there would
/// prove less): cargo's per-target temporary directory, in the build tree.
fn outside_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn has_python() -> bool {
    std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn writes_land_only_in_the_worktree() {
    let Some(iso) = sandbox().await else { return };
    let work = tempfile::tempdir().unwrap();
    let checkout = outside_dir("checkout");
    let stamp = format!("quorum-escape-{}", std::process::id());
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let cmd = format!(
        "echo x > {c}/escaped; echo x > /tmp/{stamp}; echo x > {h}/{stamp}; echo x > \"$HOME/inner\"; \
         echo ok > kept; ls {c} 2>&1; true",
        c = checkout.display(),
        h = home.display()
    );
    let run = command(&iso, &cmd, Limits::default())
        .run(work.path(), work.path())
        .await
        .unwrap();
    assert_eq!(run.exit, Some(0), "{}", run.output);
    assert_eq!(
        std::fs::read_to_string(work.path().join("kept")).unwrap(),
        "ok\n"
    );
    assert!(
        !checkout.join("escaped").exists(),
        "wrote into the checkout"
    );
    assert!(!Path::new("/tmp").join(&stamp).exists(), "wrote into /tmp");
    assert!(!home.join(&stamp).exists(), "wrote into $HOME");
    // The checkout is not even visible.
    assert!(run.output.contains("No such file"), "{}", run.output);
}

#[tokio::test]
async fn files_under_home_are_not_readable() {
    let Some(iso) = sandbox().await else { return };
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let secret = home.join(format!(".quorum-sandbox-secret-{}", std::process::id()));
    std::fs::write(&secret, "SECRET-CONTENT-4711").unwrap();
    let work = tempfile::tempdir().unwrap();
    let run = command(
        &iso,
        &format!("cat {} 2>&1; ls ~/.ssh 2>&1; true", secret.display()),
        Limits::default(),
    )
    .run(work.path(), work.path())
    .await
    .unwrap();
    let _ = std::fs::remove_file(&secret);
    assert!(
        !run.output.contains("SECRET-CONTENT-4711"),
        "{}",
        run.output
    );
}

#[tokio::test]
async fn sockets_outside_are_unreachable() {
    let Some(iso) = sandbox().await else { return };
    if !has_python() {
        eprintln!("SKIP: no python3 to open sockets with");
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let dir = outside_dir("sockets");
    let path_sock = dir.join("outside.sock");
    let tmp_sock = PathBuf::from(format!("/tmp/quorum-outside-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&tmp_sock);
    let abstract_name = format!("quorum-outside-{}", std::process::id());
    let listeners = [
        std::os::unix::net::UnixListener::bind(&path_sock).unwrap(),
        std::os::unix::net::UnixListener::bind(&tmp_sock).unwrap(),
        std::os::unix::net::UnixListener::bind_addr(
            &std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap(),
        )
        .unwrap(),
    ];
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    for l in &listeners {
        l.set_nonblocking(true).unwrap();
    }
    tcp.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\n\
         reached = []\n\
         for addr in [{p:?}, {t:?}, '\\0{a}']:\n\
         \ttry:\n\
         \t\ts = socket.socket(socket.AF_UNIX); s.connect(addr); reached.append(addr)\n\
         \texcept OSError as e:\n\
         \t\tprint('refused', e)\n\
         try:\n\
         \tsocket.create_connection(('127.0.0.1', {port}), timeout=2); reached.append('tcp')\n\
         except OSError as e:\n\
         \tprint('refused', e)\n\
         print('reached', reached)\n",
        p = path_sock.display().to_string(),
        t = tmp_sock.display().to_string(),
        a = abstract_name,
    );
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("probe.py"), script).unwrap();
    let run = command(&iso, "python3 probe.py", Limits::default())
        .run(work.path(), work.path())
        .await
        .unwrap();
    let _ = std::fs::remove_file(&tmp_sock);
    assert!(run.output.contains("reached []"), "{}", run.output);
    for l in &listeners {
        assert!(
            l.accept().is_err(),
            "a connection reached a listener outside"
        );
    }
    assert!(tcp.accept().is_err(), "a connection reached the TCP port");
}

#[tokio::test]
async fn a_fork_bomb_a_memory_hog_and_a_disk_filler_end_as_failed_tests() {
    let Some(iso) = sandbox().await else { return };
    if !has_python() {
        eprintln!("SKIP: no python3");
        return;
    }
    let Isolation::Bwrap { tree, .. } = &iso else {
        unreachable!()
    };
    let limits = Limits {
        processes: 64,
        memory_bytes: 256 << 20,
        file_bytes: 1 << 20,
        open_files: 256,
        disk_bytes: 8 << 20,
    };
    let work = tempfile::tempdir().unwrap();
    if tree.cgroup_processes || tree.nproc {
        // Bounded by the test too (400 forks), so a sandbox that failed here could not take
        // the machine down.
        std::fs::write(
            work.path().join("bomb.py"),
            "import os, sys, time\nn = 0\ntry:\n    while n < 400:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    print('forks bounded at', n)\n    sys.exit(3)\nprint('forked', n)\n",
        )
        .unwrap();
        let run = command(&iso, "python3 bomb.py", limits)
            .run(work.path(), work.path())
            .await
            .unwrap();
        assert_eq!(run.exit, Some(3), "{}", run.output);
        assert!(run.output.contains("forks bounded at"), "{}", run.output);
    } else {
        eprintln!(
            "SKIP: processes cannot be bounded here (root, no cgroup): {}",
            iso.describe()
        );
    }
    let run = command(
        &iso,
        "python3 -c 'b = bytearray(1 << 30); print(len(b))'",
        limits,
    )
    .run(work.path(), work.path())
    .await
    .unwrap();
    assert_ne!(
        run.exit,
        Some(0),
        "allocated 1 GiB under a 256 MiB bound: {}",
        run.output
    );
    let run = command(&iso, "head -c 5000000 /dev/zero > big", limits)
        .run(work.path(), work.path())
        .await
        .unwrap();
    assert_ne!(run.exit, Some(0), "{}", run.output);
    let size = std::fs::metadata(work.path().join("big")).map_or(0, |m| m.len());
    assert!(size <= 1 << 20, "the file grew to {size} bytes");
    // Many files, each under the size bound: the disk bound ends it (100 MB written over 5 s
    // unbounded; 8 MiB allowed).
    let run = command(
        &iso,
        "for i in $(seq 1 100); do head -c 1000000 /dev/zero > f$i || exit 1; sync; sleep 0.05; done; echo all-written",
        limits,
    )
    .run(work.path(), work.path())
    .await
    .unwrap();
    assert!(!run.output.contains("all-written"), "{}", run.output);
    assert!(
        run.output.contains("of the disk holding the worktree"),
        "{}",
        run.output
    );
    let written = std::fs::read_dir(work.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('f')
        })
        .count();
    assert!(written < 100, "{written} files written");
}

#[tokio::test]
async fn the_environment_is_an_allow_list() {
    let Some(iso) = sandbox().await else { return };
    let work = tempfile::tempdir().unwrap();
    let run = command(&iso, "env", Limits::default())
        .run(work.path(), work.path())
        .await
        .unwrap();
    for line in run.output.lines() {
        let name = line.split('=').next().unwrap_or_default();
        assert!(
            !quorum_fix::sandbox::names_a_secret(name),
            "a secret-named variable reached the test: {line}"
        );
    }
    assert!(run.output.contains("HOME=/tmp/home"), "{}", run.output);
    assert!(iso.describe().starts_with("sandboxed: bubblewrap"));
}
