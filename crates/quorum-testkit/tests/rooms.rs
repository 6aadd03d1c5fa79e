//! The rooms rule, checked on every test run (issue 19): no module of any crate depends on a
//! module that depends on it, and no source file holds more than 800 lines of non-test code.
//! A newcomer finds one concept per file, and the dependencies point one way.

use quorum_testkit::modgraph::{non_test_lines, workspace_roots, ModuleGraph};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    let roots = workspace_roots(&workspace());
    assert!(roots.len() >= 12, "the crates were not found: {roots:?}");
    for (name, root) in roots {
        let graph = ModuleGraph::read(&root).expect("a crate's source");
        for c in graph.circles() {
            found.push(format!("{name}: {}", c.cycle.join(" -> ")));
        }
    }
    assert!(
        found.is_empty(),
        "import circles (run `cargo run -p quorum-testkit --example modgraph -- -v`):\n{}",
        found.join("\n")
    );
}

/// The most lines of non-test code one source file may hold.
const MAX_LINES: usize = 800;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_source_file_holds_more_than_800_lines_of_non_test_code() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(workspace().join("crates"))
        .expect("crates/")
        .flatten()
    {
        sources(&krate.path().join("src"), &mut files);
    }
    assert!(
        files.len() > 100,
        "the sources were not found: {}",
        files.len()
    );
    let mut over: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = non_test_lines(&std::fs::read_to_string(f).ok()?);
            (n > MAX_LINES).then(|| format!("{n} {}", f.display()))
        })
        .collect();
    over.sort();
    assert!(
        over.is_empty(),
        "over {MAX_LINES} lines of non-test code: split along the concepts they hold:\n{}",
        over.join("\n")
    );
}

#[test]
fn test_code_is_not_counted() {
    let src = "//! doc\nfn a() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
    assert_eq!(non_test_lines(src), 3);
    let mention = "/// see #[cfg(test)] below\nfn a() {}\nfn b() {}\n";
    assert_eq!(
        non_test_lines(mention),
        3,
        "a mention in a comment is not a test module"
    );
}
