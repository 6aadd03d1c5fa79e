//! Module dependency graph of a crate, read from its source, and the circles in it.
//!
//! The rooms-without-circles rule (ARCHITECTURE.md) says no module of a crate may depend,
//! directly or through others, on a module that depends on it. `cargo modules dependencies
//! --acyclic` checks that with rust-analyzer; this is the same check from the source text, cheap
//! enough to run in every test run: every `use` (anywhere in a module's non-test code) and
//! every qualified path in its code (`crate::a::b`, `super::x`, `child::f`, a path through an
//! imported module) is an edge from the module to the module that defines the named item,
//! following re-exports (`pub use`) to the definition, as rust-analyzer's resolution does.
//! A module's `mod` declarations are ownership, not use, and a visibility (`pub(crate)`,
//! `pub(super)`) is not a use of the module it names. Code under `#[cfg(test)]` is left
//! out. Paths into other crates are not edges: cargo already keeps crates acyclic.

mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source::{scan_body, strip_comments_and_strings, strip_tests, Module};

/// The graph: modules by path (`crate`, `crate::a`, …) and the edges between them.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    modules: BTreeMap<String, Module>,
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// A circle: the modules of one strongly connected component, and one cycle through them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    pub modules: Vec<String>,
    pub cycle: Vec<String>,
}

impl ModuleGraph {
    /// Read the crate whose root file is `root` (`src/lib.rs` or `src/main.rs`).
    pub fn read(root: &Path) -> std::io::Result<ModuleGraph> {
        let mut g = ModuleGraph::default();
        let text = std::fs::read_to_string(root)?;
        g.add_module("crate", root, true, &text)?;
        g.resolve_edges();
        Ok(g)
    }

    /// Module paths, for reports.
    pub fn modules(&self) -> impl Iterator<Item = (&str, &Path)> {
        self.modules
            .iter()
            .map(|(k, m)| (k.as_str(), m.file.as_path()))
    }

    fn add_module(
        &mut self,
        path: &str,
        file: &Path,
        owns_dir: bool,
        text: &str,
    ) -> std::io::Result<()> {
        let clean = strip_tests(&strip_comments_and_strings(text));
        let mut m = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let inline = scan_body(&clean, &mut m);
        let dir = if owns_dir {
            file.parent().unwrap_or(Path::new(".")).to_path_buf()
        } else {
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            file.parent().unwrap_or(Path::new(".")).join(stem)
        };
        for child in m.children.clone() {
            let child_path = format!("{path}::{child}");
            if let Some(body) = inline.get(&child) {
                // An inline module: its files (if any) live under dir/child.
                let fake = dir.join(format!("{child}.rs"));
                self.add_inline(&child_path, &fake, body)?;
                continue;
            }
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            if flat.exists() {
                let t = std::fs::read_to_string(&flat)?;
                self.add_module(&child_path, &flat, false, &t)?;
            } else if nested.exists() {
                let t = std::fs::read_to_string(&nested)?;
                self.add_module(&child_path, &nested, true, &t)?;
            }
        }
        self.modules.insert(path.to_string(), m);
        Ok(())
    }

    fn add_inline(&mut self, path: &str, file: &Path, clean: &str) -> std::io::Result<()> {
        let mut m = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let inline = scan_body(clean, &mut m);
        for child in m.children.clone() {
            if let Some(body) = inline.get(&child) {
                self.add_inline(&format!("{path}::{child}"), file, body)?;
            }
        }
        self.modules.insert(path.to_string(), m);
        Ok(())
    }

    /// The module a path names from module `from`, following imports; None for another crate.
    fn resolve(&self, from: &str, segs: &[String], depth: usize) -> Option<String> {
        if segs.is_empty() || depth > 16 {
            return None;
        }
        let abs = self.absolute(from, segs)?;
        self.resolve_abs(&abs, depth)
    }

    /// Turn a path relative to `from` into one from `crate`; None when it leaves the crate.
    fn absolute(&self, from: &str, segs: &[String]) -> Option<Vec<String>> {
        let mut cur: Vec<String> = from.split("::").map(str::to_string).collect();
        let mut rest = segs;
        match rest[0].as_str() {
            "crate" => {
                cur = vec!["crate".into()];
                rest = &rest[1..];
            }
            "self" => rest = &rest[1..],
            "super" => {
                while rest.first().map(String::as_str) == Some("super") {
                    if cur.len() > 1 {
                        cur.pop();
                    }
                    rest = &rest[1..];
                }
                if rest.first().map(String::as_str) == Some("self") {
                    rest = &rest[1..];
                }
            }
            first => {
                let m = self.modules.get(from)?;
                if m.children.contains(first) {
                    // A child module of this one (2018 uniform paths).
                } else if let Some(target) = m.imports.get(first) {
                    if target.first().map(String::as_str) == Some(first) {
                        // `use other_crate;` or `use other_crate::x as other_crate`.
                        return None;
                    }
                    let mut p = self.absolute(from, target)?;
                    p.extend(rest[1..].iter().cloned());
                    return Some(p);
                } else {
                    // An item of this module (`Type::method`), a prelude name or another crate.
                    return None;
                }
            }
        }
        cur.extend(rest.iter().cloned());
        Some(cur)
    }

    fn resolve_abs(&self, abs: &[String], depth: usize) -> Option<String> {
        if abs.first().map(String::as_str) != Some("crate") {
            return None;
        }
        let mut here = "crate".to_string();
        let mut i = 1;
        while i < abs.len() {
            let m = self.modules.get(&here)?;
            let seg = &abs[i];
            if m.children.contains(seg) {
                here = format!("{here}::{seg}");
                i += 1;
                continue;
            }
            if m.items.contains(seg) {
                return Some(here);
            }
            if let Some(target) = m.imports.get(seg) {
                // A re-export or import: follow it to the definition (none when it is another
                // crate's item).
                let mut p = self.absolute(&here, target)?;
                p.extend(abs[i + 1..].iter().cloned());
                if depth > 16 {
                    return Some(here);
                }
                return self.resolve_abs(&p, depth + 1);
            }
            for g in &m.globs {
                let Some(g) = self.absolute(&here, g) else {
                    continue;
                };
                if self
                    .resolve_abs(&g, depth + 1)
                    .is_some_and(|src| self.defines(&src, seg))
                {
                    let mut p = g.clone();
                    p.extend(abs[i..].iter().cloned());
                    return self.resolve_abs(&p, depth + 1);
                }
            }
            return Some(here);
        }
        Some(here)
    }

    fn defines(&self, module: &str, name: &str) -> bool {
        self.modules
            .get(module)
            .is_some_and(|m| m.items.contains(name) || m.children.contains(name))
    }

    fn resolve_edges(&mut self) {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (path, m) in &self.modules {
            let mut out = BTreeSet::new();
            let mut all: Vec<Vec<String>> = m.paths.clone();
            for target in m.imports.values() {
                all.push(target.clone());
            }
            for g in &m.globs {
                all.push(g.clone());
            }
            for segs in all {
                let resolved = if segs.first().map(String::as_str) == Some("crate") {
                    self.resolve_abs(&segs, 0)
                } else {
                    self.resolve(path, &segs, 0)
                };
                if let Some(t) = resolved {
                    if &t != path {
                        out.insert(t);
                    }
                }
            }
            edges.insert(path.clone(), out);
        }
        self.edges = edges;
    }

    /// The circles: strongly connected components of more than one module.
    pub fn circles(&self) -> Vec<Circle> {
        let nodes: Vec<&String> = self.modules.keys().collect();
        let index: BTreeMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let adj: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| {
                self.edges
                    .get(*n)
                    .into_iter()
                    .flatten()
                    .filter_map(|t| index.get(t.as_str()).copied())
                    .collect()
            })
            .collect();
        let mut out = Vec::new();
        for comp in tarjan(&adj) {
            if comp.len() < 2 {
                continue;
            }
            let set: BTreeSet<usize> = comp.iter().copied().collect();
            let mut modules: Vec<String> = comp.iter().map(|&i| nodes[i].clone()).collect();
            modules.sort();
            let start = *set.iter().next().unwrap_or(&0);
            let cycle = shortest_cycle(&adj, &set, start)
                .into_iter()
                .map(|i| nodes[i].clone())
                .collect();
            out.push(Circle { modules, cycle });
        }
        out.sort_by(|a, b| a.modules.cmp(&b.modules));
        out
    }
}

/// The shortest cycle through `start` inside `set` (BFS back to start).
fn shortest_cycle(adj: &[Vec<usize>], set: &BTreeSet<usize>, start: usize) -> Vec<usize> {
    let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &m in &adj[n] {
            if !set.contains(&m) {
                continue;
            }
            if m == start {
                let mut path = vec![n];
                let mut cur = n;
                while cur != start {
                    cur = prev[&cur];
                    path.push(cur);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if m != start && !prev.contains_key(&m) {
                prev.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    vec![start]
}

fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct T<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T<'_>, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.adj[v] {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            t.out.push(comp);
        }
    }
    let n = adj.len();
    let mut t = T {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}
/// Lines of a source file that are not test code: every line but those of `#[cfg(test)]`
/// items (a test module, a test-only function), however they are placed in the file.
pub fn non_test_lines(src: &str) -> usize {
    let clean = strip_comments_and_strings(src);
    let stripped = strip_tests(&clean);
    // A line is test code when stripping blanked all of it but was not blank before.
    clean
        .lines()
        .zip(stripped.lines())
        .filter(|(before, after)| before.trim().is_empty() || !after.trim().is_empty())
        .count()
        + src.lines().count().saturating_sub(clean.lines().count())
}

/// Every crate root under `crates/`: (crate name, root file) for each lib and bin target.
pub fn workspace_roots(workspace: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(workspace.join("crates")) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = dirs.flatten().map(|d| d.path()).collect();
    dirs.sort();
    for d in dirs {
        let name = d
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        for root in ["src/lib.rs", "src/main.rs"] {
            let p = d.join(root);
            if p.exists() {
                out.push((format!("{name} ({root})"), p));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> ModuleGraph {
        let dir = tempfile_dir();
        for (p, t) in files {
            let path = dir.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        }
        ModuleGraph::read(&dir.join("lib.rs")).unwrap()
    }

    fn tempfile_dir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "modgraph-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_parent_and_child_that_use_each_other_are_a_circle() {
        let g = graph(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                "mod inner;\npub struct State;\nfn f() { inner::go(); }\n",
            ),
            (
                "a/inner.rs",
                "use super::State;\npub fn go() {}\n// crate::b::x in a comment\n",
            ),
            ("b.rs", "pub fn x() { let s = \"crate::a::State\"; }\n"),
        ]);
        let c = g.circles();
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].modules, vec!["crate::a", "crate::a::inner"]);
    }

    #[test]
    fn re_exports_are_followed_to_the_definition_and_tests_are_left_out() {
        let g = graph(&[
            ("lib.rs", "mod a;\nmod b;\npub use a::Thing;\n"),
            ("a.rs", "pub struct Thing;\n"),
            (
                "b.rs",
                "use crate::Thing;\n#[cfg(test)]\nmod tests { use crate::b; }\npub fn f(_: Thing) {}\n",
            ),
        ]);
        assert!(g.circles().is_empty(), "{:?}", g.circles());
        assert!(g.edges["crate::b"].contains("crate::a"));
        assert!(!g.edges["crate::b"].contains("crate"));
    }

    #[test]
    fn a_visibility_is_not_a_use_of_the_module_it_names() {
        let g = graph(&[
            ("lib.rs", "mod a;\npub use a::Thing;\n"),
            (
                "a.rs",
                "mod inner;\npub struct Thing;\npub(crate) fn f() { inner::g(); }\n",
            ),
            (
                "a/inner.rs",
                "pub(super) fn g() {}\npub(in crate::a) struct S;\npub (crate) const N: u8 = 1;\n",
            ),
        ]);
        assert!(g.circles().is_empty(), "{:?}", g.circles());
        assert!(!g.edges["crate::a"].contains("crate"));
        assert!(g.edges["crate::a::inner"].is_empty());
        // A path inside a function is still an edge.
        let g = graph(&[
            ("lib.rs", "mod a;\npub fn top() {}\n"),
            ("a.rs", "pub(crate) fn f() { crate::top(); }\n"),
        ]);
        assert!(g.edges["crate::a"].contains("crate"));
    }

    #[test]
    fn grouped_and_qualified_paths_are_edges() {
        let g = graph(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::{b::{self, Y}, c::*};\npub fn f() {}\n"),
            ("b.rs", "pub struct Y;\npub fn g() { crate::c::h(); }\n"),
            ("c.rs", "pub fn h() { super::a::f(); }\n"),
        ]);
        let c = g.circles();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].modules.len(), 3);
    }
}
