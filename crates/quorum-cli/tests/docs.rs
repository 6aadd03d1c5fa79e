//! The documentation cannot rot silently: the book's CLI reference is generated from the
//! binary's own `--help` (a stale page fails here; `QUORUM_BLESS=1` rewrites it), every
//! relative link and anchor in README.md and the book resolves, every page is in the book's
//! summary, and the README stays a short front door that keeps its two commands.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const CLI_PAGE: &str = "docs/src/reference/cli.md";

/// `quorum ARGS --help` with no inherited environment: an `env`-backed flag shows the
/// variable's current value in its help, which must not leak into the page.
fn help(path: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(path)
        .arg("--help")
        .env_clear()
        .env("HOME", home.path())
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success(), "quorum {path:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists (not `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.trim_end() == "Commands:" {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            if let Some(name) = line.split_whitespace().next() {
                if name != "help" {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

fn render(page: &mut String, path: &mut Vec<String>) {
    let args: Vec<&str> = path.iter().map(String::as_str).collect();
    let text = help(&args);
    let title = std::iter::once("quorum")
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let level = if path.is_empty() { "##" } else { "###" };
    page.push_str(&format!(
        "{level} {title}\n\n```text\n{}\n```\n\n",
        text.trim_end()
    ));
    for sub in subcommands(&text) {
        path.push(sub);
        render(page, path);
        path.pop();
    }
}

#[test]
fn the_cli_reference_is_generated_from_the_cli_itself() {
    let mut page = String::from(
        "<!-- generated: quorum-cli tests/docs.rs writes this page from the CLI's own --help; do not edit -->\n\n# CLI reference\n\nEvery command's `--help`, as the binary prints it. Regenerate with `QUORUM_BLESS=1 cargo test -p quorum-cli --test docs`.\n\n",
    );
    render(&mut page, &mut Vec::new());
    let at = repo_root().join(CLI_PAGE);
    if std::env::var("QUORUM_BLESS").as_deref() == Ok("1") {
        std::fs::write(&at, &page).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&at).unwrap_or_default();
    assert!(
        on_disk == page,
        "{CLI_PAGE} is stale (the CLI changed); regenerate it with QUORUM_BLESS=1 cargo test -p quorum-cli --test docs"
    );
}

/// A heading's anchor as GitHub and mdBook make it.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Markdown text without fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                continue;
            }
            if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every `](target)` of a markdown text.
fn link_targets(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        if let Some(end) = after.find(')') {
            out.push(after[..end].trim().to_string());
        }
        rest = &rest[i + 2..];
    }
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

fn book_pages() -> Vec<PathBuf> {
    let mut pages = Vec::new();
    markdown_files(&repo_root().join("docs/src"), &mut pages);
    pages.sort();
    pages
}

#[test]
fn every_link_in_the_readme_and_the_book_resolves() {
    let mut broken = Vec::new();
    let mut files = vec![repo_root().join("README.md")];
    files.extend(book_pages());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target} (no such file)", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if resolved.extension().is_some_and(|x| x == "md") {
                    let heads = anchors(&std::fs::read_to_string(&resolved).unwrap());
                    if !heads.contains(anchor) {
                        broken.push(format!("{}: {target} (no such heading)", file.display()));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_book_page_is_in_the_summary() {
    let src = repo_root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = link_targets(&summary)
        .into_iter()
        .map(|t| src.join(t.split('#').next().unwrap()))
        .collect();
    let missing: Vec<String> = book_pages()
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "SUMMARY.md") && !listed.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "pages not in SUMMARY.md: {missing:?}");
}

#[test]
fn the_readme_is_a_short_front_door_with_its_two_commands() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 160,
        "README.md has {lines} lines; move detail into docs/src"
    );
    for command in ["deploy/quickstart.sh", "cargo test --workspace"] {
        assert!(readme.contains(command), "README.md lost `{command}`");
    }
}

/// Every Rust source under crates/*/src, concatenated.
fn sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
                out.push('\n');
            }
        }
    }
    let mut all = String::new();
    for krate in std::fs::read_dir(repo_root().join("crates"))
        .unwrap()
        .flatten()
    {
        walk(&krate.path().join("src"), &mut all);
    }
    all
}

/// The troubleshooting page quotes the lines quorum prints: every quoted piece (between the
/// `…` that stand for values) is still in the code, so a reworded message cannot leave a stale
/// entry behind.
#[test]
fn every_line_the_troubleshooting_page_quotes_is_one_quorum_prints() {
    let page = std::fs::read_to_string(repo_root().join("docs/src/troubleshooting.md")).unwrap();
    let code = sources();
    let mut quoted = 0;
    let mut missing = Vec::new();
    let mut in_text = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_text = line.trim() == "```text";
            continue;
        }
        if !in_text {
            continue;
        }
        for piece in line.split('…').map(str::trim) {
            if piece.chars().count() < 8 {
                continue;
            }
            quoted += 1;
            if !code.contains(piece) {
                missing.push(piece.to_string());
            }
        }
    }
    assert!(quoted >= 20, "only {quoted} quoted pieces on the page");
    assert!(
        missing.is_empty(),
        "quoted on docs/src/troubleshooting.md but printed nowhere:\n{}",
        missing.join("\n")
    );
}

const GUIDE: &str = "docs/src/writing-personas-and-flows.md";

/// The code blocks of a page that open with `# file: PATH`: (PATH, the block's text).
fn file_blocks(page: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("```") {
            continue;
        }
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        if let Some(path) = body.first().and_then(|l| l.strip_prefix("# file: ")) {
            blocks.push((path.trim().to_string(), body.join("\n") + "\n"));
        }
    }
    blocks
}

/// `quorum personas check` with the catalog of `root` (its personas/ and flows/).
fn check_catalog(root: &Path) -> std::process::Output {
    let config = root.join("q.toml");
    std::fs::write(
        &config,
        format!(
            "personas_dir = {:?}\nflows_dir = {:?}\n",
            root.join("personas").to_str().unwrap(),
            root.join("flows").to_str().unwrap()
        ),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    Command::new(BIN)
        .args(["personas", "check", "--config", config.to_str().unwrap()])
        .env_clear()
        .env("HOME", home.path())
        .output()
        .unwrap()
}

/// The persona-and-flow guide's files are real: added to a copy of the shipped catalog, they
/// pass `quorum personas check`, which then counts the new persona and lists the new flow;
/// and the page's example error is the one a misspelt persona gives.
#[test]
fn the_guide_to_writing_personas_and_flows_checks_out() {
    let page = std::fs::read_to_string(repo_root().join(GUIDE)).unwrap();
    let blocks = file_blocks(&page);
    let paths: Vec<&str> = blocks.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "personas/heuristics/schema_migrations.yaml",
            "personas/migration_reviewer.yaml",
            "flows/migrations.yaml"
        ],
        "the guide's files"
    );
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    copy_dir(&repo_root().join("personas"), &root.join("personas"));
    copy_dir(&repo_root().join("flows"), &root.join("flows"));
    let shipped = check_catalog(root);
    assert!(
        shipped.status.success(),
        "{}",
        String::from_utf8_lossy(&shipped.stderr)
    );
    for (path, text) in &blocks {
        std::fs::write(root.join(path), text).unwrap();
    }
    let o = check_catalog(root);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{}{}",
        out,
        String::from_utf8_lossy(&o.stderr)
    );
    let count = |s: &str| {
        s.split_once(" personas (")
            .and_then(|(head, _)| head.rsplit(' ').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    };
    assert_eq!(
        count(&out),
        count(&String::from_utf8_lossy(&shipped.stdout)) + 1,
        "{out}"
    );
    let flows_line = out
        .lines()
        .find(|l| l.contains(" flows in "))
        .unwrap_or_default();
    assert!(flows_line.contains("migrations"), "{out}");

    // The page's example of a failed check, with the persona name misspelt in the flow.
    let flow = root.join("flows/migrations.yaml");
    let text = std::fs::read_to_string(&flow).unwrap();
    std::fs::write(
        &flow,
        text.replace(
            "persona: migration_reviewer",
            "persona: migrations_reviewer",
        ),
    )
    .unwrap();
    let o = check_catalog(root);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    let shown = page
        .lines()
        .find(|l| l.starts_with("quorum: invalid flow"))
        .expect("the guide shows a failed check");
    let expected = shown.replace(
        "/home/me/quorum/flows/migrations.yaml",
        flow.to_str().unwrap(),
    );
    assert_eq!(
        err.trim_end(),
        expected,
        "the guide's example error is stale"
    );
}
