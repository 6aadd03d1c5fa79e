//! Architecture invariant: capability is data. No engine crate names a persona from the
//! catalog — not in code, not in a string, not in a comment — outside its unit tests.
//!
//! If this fails, the engine grew domain knowledge: move it into personas/ or flows/.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some("rs") {
            out.push(p);
        }
    }
}

/// The file without its `#[cfg(test)]` module (by convention the last item of a file).
fn non_test_part(text: &str) -> &str {
    text.find("#[cfg(test)]")
        .map(|i| &text[..i])
        .unwrap_or(text)
}

fn contains_word(hay: &str, word: &str) -> bool {
    hay.match_indices(word).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + word.len()..].chars().next();
        let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !is_ident(before) && !is_ident(after)
    })
}

#[test]
fn engine_crates_name_no_persona() {
    let personas: Vec<String> = std::fs::read_dir(repo().join("personas"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()?.to_str()? == "yaml")
                .then(|| p.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    assert!(personas.len() >= 16, "catalog not found");

    let mut files = Vec::new();
    for krate in std::fs::read_dir(repo().join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        // The testkit is test support, not engine.
        if src.is_dir() && !src.to_string_lossy().contains("quorum-testkit") {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 10);
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for p in &personas {
            if contains_word(non_test_part(&text), p) {
                hits.push(format!("{} names persona {p}", f.display()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "engine code names personas:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_scan_would_catch_a_persona_name() {
    assert!(contains_word(
        "let p = \"security_sentinel\";",
        "security_sentinel"
    ));
    assert!(!contains_word("security_sentinel_x", "security_sentinel"));
    assert_eq!(non_test_part("a\n#[cfg(test)]\nsecurity_sentinel"), "a\n");
}
