//! A change read from a real repository: commits are made with the `git` binary in a tempdir
//! (the library under test never runs it), then the head tree, the change set and the
//! revision errors are checked.

use quorum_core::pack::PackOptions;
use quorum_core::scope::ChangeKind;
use quorum_git::{GitError, Repo};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn app(changed: bool) -> String {
    (1..=20)
        .map(|i| {
            if changed && i == 10 {
                "    return eval(user_input)  # changed\n".to_string()
            } else {
                format!("line_{i} = {i}\n")
            }
        })
        .collect()
}

/// base: app.py, old.txt, same.txt, README, .gitignore, a committed .env;
/// head: app.py line 10 changed, new.py added, old.txt deleted, same.txt -> moved.txt,
/// .env changed, a force-added ignored log, .quorum.toml; plus an uncommitted edit.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    git(r, &["init", "-q", "-b", "main"]);
    write(r, "src/app.py", app(false).as_bytes());
    write(r, "old.txt", b"to be deleted\n");
    write(r, "same.txt", b"moves unchanged\n");
    write(r, "README.md", b"# demo\n");
    write(r, ".gitignore", b"*.log\n");
    write(r, ".env", b"TOKEN=base-secret\n");
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "base"]);
    git(r, &["tag", "v1"]);

    write(r, "src/app.py", app(true).as_bytes());
    write(r, "src/new.py", b"def added():\n    pass\n");
    std::fs::remove_file(r.join("old.txt")).unwrap();
    std::fs::rename(r.join("same.txt"), r.join("moved.txt")).unwrap();
    write(r, ".env", b"TOKEN=head-secret\n");
    write(r, "debug.log", b"tracked but ignored\n");
    write(r, ".quorum.toml", b"instructions = \"be kind\"\n");
    write(r, "blob.bin", b"\x00\x01\x02binary");
    write(r, "src/.gitignore", b"gen_*.py\n");
    write(r, "src/gen_x.py", b"generated = True\n");
    git(r, &["add", "-A"]);
    git(r, &["add", "-f", "debug.log", "src/gen_x.py"]);
    git(r, &["commit", "-q", "-m", "head"]);
    // Not committed: must not be reviewed.
    write(r, "src/app.py", b"WORKING TREE EDIT\n");
    write(r, "untracked.py", b"x = 1\n");
    dir
}

#[test]
fn head_tree_is_the_pack_and_the_change_lists_reviewable_files() {
    let dir = fixture();
    let repo = Repo::discover(dir.path()).unwrap();
    let range = repo.resolve("v1..main").unwrap();
    let (pack, change) = repo.read_change(&range, &PackOptions::default()).unwrap();

    let paths: Vec<&str> = pack.files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        vec![
            ".gitignore",
            "README.md",
            "moved.txt",
            "src/.gitignore",
            "src/app.py",
            "src/new.py"
        ]
    );
    assert_eq!(
        &*pack.files["src/app.py"].content,
        app(true),
        "head commit, not the working tree"
    );
    assert_eq!(
        pack.head_sha.as_deref(),
        Some(range.head.to_string().as_str())
    );
    assert!(
        pack.skipped
            .iter()
            .any(|s| s.path == ".env" && s.reason == "secret"),
        "{:?}",
        pack.skipped
    );
    assert!(pack
        .skipped
        .iter()
        .any(|s| s.path == "blob.bin" && s.reason == "binary"));

    let kinds: Vec<(&str, ChangeKind, Option<&str>)> = change
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.kind, f.old_path.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("moved.txt", ChangeKind::Renamed, Some("same.txt")),
            ("old.txt", ChangeKind::Deleted, None),
            ("src/.gitignore", ChangeKind::Added, None),
            ("src/app.py", ChangeKind::Modified, None),
            ("src/new.py", ChangeKind::Added, None),
        ],
        "no secret, ignored, binary or config file is part of the change"
    );
    let app_change = change.file("src/app.py").unwrap();
    assert_eq!((app_change.added, app_change.removed), (1, 1));
    assert_eq!(app_change.touched, vec![(10, 10)]);
    assert!(app_change
        .hunks
        .contains("+    return eval(user_input)  # changed"));
    assert!(
        app_change.hunks.contains(" line_7 = 7\n"),
        "3 lines of context"
    );
    assert!(
        !app_change.hunks.contains("line_6 = 6"),
        "{}",
        app_change.hunks
    );
    for f in &change.files {
        assert!(!f.hunks.contains("secret"), "{}", f.hunks);
    }
    assert_eq!(change.base.len(), 40);
    assert_eq!(change.spec, "v1..main");

    assert_eq!(
        repo.read_at(range.head, ".quorum.toml").unwrap().as_deref(),
        Some(&b"instructions = \"be kind\"\n"[..])
    );
    assert_eq!(repo.read_at(range.base, ".quorum.toml").unwrap(), None);
}

#[test]
fn revisions_resolve_like_git() {
    let dir = fixture();
    let repo = Repo::discover(dir.path()).unwrap();
    let a = repo.resolve("HEAD~1").unwrap();
    let b = repo.resolve("v1..HEAD").unwrap();
    assert_eq!(a.base, b.base);
    assert_eq!(a.head, b.head);
    let sha = a.base.to_string();
    assert_eq!(
        repo.resolve(&sha[..10]).unwrap().base,
        a.base,
        "a short sha"
    );
    assert_eq!(
        repo.resolve(&format!("{sha}..")).unwrap().head,
        a.head,
        "empty head = HEAD"
    );

    let e = repo.resolve("no-such-branch").unwrap_err();
    assert!(matches!(e, GitError::BadRevision { .. }), "{e}");
    assert!(e.to_string().contains("no-such-branch"), "{e}");
    assert!(!e.to_string().contains('\n'));
    assert!(matches!(
        repo.resolve("v1...main").unwrap_err(),
        GitError::BadRange { .. }
    ));
    assert!(matches!(
        repo.resolve("..main").unwrap_err(),
        GitError::BadRange { .. }
    ));
}

#[test]
fn a_subdirectory_target_sees_its_own_files() {
    let dir = fixture();
    let repo = Repo::discover(&dir.path().join("src")).unwrap();
    let range = repo.resolve("v1").unwrap();
    let (pack, change) = repo.read_change(&range, &PackOptions::default()).unwrap();
    let paths: Vec<&str> = pack.files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        vec![".gitignore", "app.py", "new.py"],
        "the target's own ignore file applies"
    );
    let changed: Vec<&str> = change.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(changed, vec![".gitignore", "app.py", "new.py"]);
}

#[test]
fn exclude_globs_keep_files_out_of_pack_and_change() {
    let dir = fixture();
    let repo = Repo::discover(dir.path()).unwrap();
    let range = repo.resolve("v1").unwrap();
    let opts = PackOptions {
        exclude: vec!["src/new.py".into()],
        ..PackOptions::default()
    };
    let (pack, change) = repo.read_change(&range, &opts).unwrap();
    assert!(pack.get("src/new.py").is_none());
    assert!(change.file("src/new.py").is_none());
}

#[test]
fn the_pack_budget_binds_a_change_review_too() {
    let dir = fixture();
    let repo = Repo::discover(dir.path()).unwrap();
    let range = repo.resolve("v1").unwrap();
    let (all, _) = repo.read_change(&range, &PackOptions::default()).unwrap();
    let first = all.files.values().next().unwrap();
    let opts = PackOptions {
        max_pack_bytes: first.size,
        ..PackOptions::default()
    };
    let (pack, change) = repo.read_change(&range, &opts).unwrap();
    assert_eq!(pack.len(), 1, "only what fits the budget, in path order");
    assert!(pack.get(&first.path).is_some());
    let over: Vec<&str> = pack
        .skipped
        .iter()
        .filter(|s| s.reason.starts_with("over the pack budget"))
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(over.len(), all.len() - 1, "{:?}", pack.skipped);
    for path in over {
        assert!(
            change.file(path).is_none(),
            "{path} is out of the pack and the change"
        );
    }
}

#[test]
fn not_a_repository_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    match Repo::discover(dir.path()) {
        Err(e @ GitError::NotARepository { .. }) => {
            assert!(e.to_string().contains("not inside a git repository"), "{e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a tempdir is not a repository"),
    }
}

/// A file moved and edited in one commit is a rename (git's 50% similarity), so only its
/// edited line is changed; files that merely appear and disappear stay added and deleted.
#[test]
fn a_file_moved_and_edited_is_a_rename_whose_edit_alone_is_changed() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    git(r, &["init", "-q", "-b", "main"]);
    write(r, "src/service.py", app(false).as_bytes());
    write(r, "notes/todo.txt", b"buy milk\ncall home\n");
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "base"]);
    std::fs::remove_file(r.join("src/service.py")).unwrap();
    std::fs::remove_file(r.join("notes/todo.txt")).unwrap();
    write(r, "src/core/service.py", app(true).as_bytes());
    write(r, "src/unrelated.py", b"def other():\n    return 42\n");
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "move and edit"]);

    let repo = Repo::discover(r).unwrap();
    let range = repo.resolve("HEAD~1").unwrap();
    let (_, change) = repo.read_change(&range, &PackOptions::default()).unwrap();
    let kinds: Vec<(&str, ChangeKind, Option<&str>)> = change
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.kind, f.old_path.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("notes/todo.txt", ChangeKind::Deleted, None),
            (
                "src/core/service.py",
                ChangeKind::Renamed,
                Some("src/service.py")
            ),
            ("src/unrelated.py", ChangeKind::Added, None),
        ]
    );
    let moved = change.file("src/core/service.py").unwrap();
    assert_eq!((moved.added, moved.removed), (1, 1));
    assert_eq!(moved.touched, vec![(10, 10)]);
    assert!(
        moved.hunks.contains("--- a/src/service.py"),
        "{}",
        moved.hunks
    );
    assert!(
        moved.hunks.contains("+++ b/src/core/service.py"),
        "{}",
        moved.hunks
    );
    assert!(moved
        .hunks
        .contains("+    return eval(user_input)  # changed"));
}
