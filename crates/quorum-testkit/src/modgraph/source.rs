//! Reading one module's source for the graph: comments, strings and `#[cfg(test)]` items
//! blanked out, then its child modules, the items it defines, what its `use` lines bring in
//! (use trees expanded to leaves) and every qualified path its code names. A text scan, not a
//! parser: it only has to find names and paths, never to understand types.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// One module of the crate: its path (`crate::a::b`), the file it lives in, and what it holds.
#[derive(Debug, Default, Clone)]
pub(super) struct Module {
    pub(super) file: PathBuf,
    pub(super) children: BTreeSet<String>,
    pub(super) items: BTreeSet<String>,
    /// Names brought in by `use`: name → absolute path segments (or `*` globs under `*`).
    pub(super) imports: BTreeMap<String, Vec<String>>,
    pub(super) globs: Vec<Vec<String>>,
    /// Every path the module's code names, relative to the module (first segment unresolved).
    pub(super) paths: Vec<Vec<String>>,
}

/// Source with comments, string and char literals blanked (lengths kept), so braces and
/// paths inside them are not read as code.
pub(super) fn strip_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"..", r#".."#, br#".."#.
        let raw_start = if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
        {
            Some(i + 1)
        } else if c == b'b'
            && b.get(i + 1) == Some(&b'r')
            && (b.get(i + 2) == Some(&b'"') || b.get(i + 2) == Some(&b'#'))
        {
            Some(i + 2)
        } else {
            None
        };
        let prev_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if let (Some(mut j), false) = (raw_start, prev_ident) {
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&b'"') {
                out.extend(std::iter::repeat_n(b' ', j + 1 - i));
                j += 1;
                loop {
                    if j >= b.len() {
                        break;
                    }
                    if b[j] == b'"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&b'#')) {
                        out.extend(std::iter::repeat_n(b' ', 1 + hashes));
                        j += 1 + hashes;
                        break;
                    }
                    out.push(if b[j] == b'\n' { b'\n' } else { b' ' });
                    j += 1;
                }
                i = j;
                continue;
            }
        }
        if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    out.push(b' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
            continue;
        }
        if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') but not a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.extend(std::iter::repeat_n(b' ', j + 1 - i));
                i = j + 1;
                continue;
            }
            if b.get(i + 2) == Some(&b'\'') {
                out.extend_from_slice(b"   ");
                i += 3;
                continue;
            }
            // Multi-byte char: find the closing quote within 5 bytes.
            if let Some(k) = (2..6).find(|&k| b.get(i + k) == Some(&b'\'')) {
                if b[i + 1] >= 0x80 {
                    out.extend(std::iter::repeat_n(b' ', k + 1));
                    i += k + 1;
                    continue;
                }
            }
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The text with every `#[cfg(test)]` (or `cfg(all(test, …))`, `cfg(any(test, …))`) item
/// blanked out.
pub(super) fn strip_tests(src: &str) -> String {
    let mut out = src.as_bytes().to_vec();
    let b = src.as_bytes();
    let mut from = 0;
    while let Some(pos) = src[from..].find("#[cfg(") {
        let at = from + pos;
        let close = match src[at..].find(']') {
            Some(c) => at + c,
            None => break,
        };
        let attr = &src[at..close];
        let is_test = attr.contains("cfg(test")
            || ((attr.contains("cfg(all(") || attr.contains("cfg(any(")) && attr.contains("test"))
                && !attr.contains("not(test");
        if !is_test {
            from = close;
            continue;
        }
        // Skip further attributes, then the item: to its `;` or its matching `}`.
        let mut i = close + 1;
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b.get(i) == Some(&b'#') {
                while i < b.len() && b[i] != b']' {
                    i += 1;
                }
                i += 1;
            } else {
                break;
            }
        }
        let mut depth = 0i32;
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        for x in out.iter_mut().take(i.min(b.len())).skip(at) {
            if *x != b'\n' {
                *x = b' ';
            }
        }
        from = i.min(src.len());
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}
fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Scan a module body: its child modules, items, imports and named paths. Returns the bodies
/// of inline child modules, which are scanned as modules of their own.
pub(super) fn scan_body(src: &str, m: &mut Module) -> BTreeMap<String, String> {
    let b = src.as_bytes();
    let mut inline = BTreeMap::new();
    let mut i = 0;
    let mut depth = 0i32;
    let mut prev_word = String::new();
    while i < b.len() {
        let c = b[i];
        if c == b'{' {
            depth += 1;
            i += 1;
            continue;
        }
        if c == b'}' {
            depth -= 1;
            i += 1;
            continue;
        }
        if !is_ident_start(c) || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b'\'')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        let word = &src[start..i];
        if word == "r" && b.get(i) == Some(&b'#') {
            // r#ident
            i += 1;
            continue;
        }
        match word {
            "mod" if prev_word != "." => {
                let (name, after) = next_ident(b, src, i);
                if let Some(name) = name {
                    let mut j = after;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b';') {
                        if depth == 0 {
                            m.children.insert(name.clone());
                        }
                        i = j + 1;
                    } else if b.get(j) == Some(&b'{') {
                        let end = matching(b, j);
                        if depth == 0 {
                            m.children.insert(name.clone());
                            inline.insert(name.clone(), src[j + 1..end].to_string());
                        }
                        i = end + 1;
                    }
                    prev_word.clear();
                    continue;
                }
            }
            "use" => {
                let end = src[i..].find(';').map(|e| i + e).unwrap_or(b.len());
                let tree: String = src[i..end].split_whitespace().collect::<Vec<_>>().join(" ");
                let mut leaves = Vec::new();
                expand_use(&tree, &mut Vec::new(), &mut leaves);
                for (path, alias) in leaves {
                    let abs = absolutize_use(&path);
                    match alias {
                        UseLeaf::Glob => m.globs.push(abs),
                        UseLeaf::Name(n) => {
                            if n != "_" {
                                m.imports.insert(n, abs);
                            } else {
                                m.paths.push(abs);
                            }
                        }
                    }
                }
                i = end + 1;
                prev_word.clear();
                continue;
            }
            "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                if depth == 0 =>
            {
                let (name, after) = next_ident(b, src, i);
                if let Some(n) = name {
                    if n != "_" {
                        m.items.insert(n);
                    }
                }
                i = after;
                prev_word = word.to_string();
                continue;
            }
            "pub" => {
                // A visibility (`pub(crate)`, `pub(super)`, `pub(in crate::a)`) says who may use
                // an item; it does not use the module it names.
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) == Some(&b'(') {
                    if let Some(close) = src[j..].find(')') {
                        i = j + close + 1;
                    }
                }
                prev_word = word.to_string();
                continue;
            }
            "macro_rules" if depth == 0 && b.get(i) == Some(&b'!') => {
                let (name, after) = next_ident(b, src, i + 1);
                if let Some(n) = name {
                    m.items.insert(n);
                }
                i = after;
                continue;
            }
            _ => {}
        }
        // A qualified path: word(::ident)+
        let mut segs = vec![word.to_string()];
        let mut j = i;
        loop {
            let mut k = j;
            while k < b.len() && b[k].is_ascii_whitespace() {
                k += 1;
            }
            if b.get(k) == Some(&b':') && b.get(k + 1) == Some(&b':') {
                k += 2;
                while k < b.len() && b[k].is_ascii_whitespace() {
                    k += 1;
                }
                if k < b.len() && is_ident_start(b[k]) {
                    let s = k;
                    while k < b.len() && is_ident(b[k]) {
                        k += 1;
                    }
                    segs.push(src[s..k].to_string());
                    j = k;
                    continue;
                }
                if b.get(k) == Some(&b'<') || b.get(k) == Some(&b'{') {
                    break;
                }
            }
            break;
        }
        if segs.len() > 1 || matches!(word, "crate" | "super") {
            m.paths.push(segs);
        }
        i = j;
        prev_word = word.to_string();
    }
    inline
}

fn next_ident(b: &[u8], src: &str, mut i: usize) -> (Option<String>, usize) {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < b.len() && is_ident_start(b[i]) {
        let s = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        return (Some(src[s..i].to_string()), i);
    }
    (None, i)
}

fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0i32;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len().saturating_sub(1)
}

enum UseLeaf {
    Name(String),
    Glob,
}

/// Expand a use tree (`a::{b, c::d as e, f::*}`) into leaf paths with the name they bind.
fn expand_use(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, UseLeaf)>) {
    let tree = tree.trim().trim_start_matches("::").trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::").trim();
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close.max(open + 1)];
        let base = prefix.len();
        prefix.extend(
            head.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        for part in split_top(inner) {
            expand_use(part, prefix, out);
        }
        prefix.truncate(base);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
        None => (tree, None),
    };
    let mut segs: Vec<String> = prefix.clone();
    segs.extend(
        path.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    );
    if segs.last().map(String::as_str) == Some("*") {
        segs.pop();
        out.push((segs, UseLeaf::Glob));
        return;
    }
    if segs.last().map(String::as_str) == Some("self") {
        segs.pop();
    }
    let name = alias.unwrap_or_else(|| segs.last().cloned().unwrap_or_default());
    out.push((segs, UseLeaf::Name(name)));
}

/// Split on commas at brace depth 0.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A use path as written (relative paths are resolved later against the module).
fn absolutize_use(path: &[String]) -> Vec<String> {
    path.to_vec()
}
