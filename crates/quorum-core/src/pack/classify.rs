//! A file's language and kind, decided from its name, then its extension, then its shebang:
//! build manifests, lockfiles, dotfile configuration, Dockerfiles and Makefiles are `Config`
//! whatever their syntax; programming languages are `Code`; prose is `Doc`; records and
//! anything unrecognised are `Data` (the rule in full is in the [`crate::pack`] docs).

use serde::{Deserialize, Serialize};

/// What kind of content a file holds, for routing and prompt hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Code,
    Config,
    Doc,
    Data,
}

impl FileKind {
    /// The lowercase name used in serialised output and [`PackFacts::kinds`](super::PackFacts::kinds).
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Code => "code",
            FileKind::Config => "config",
            FileKind::Doc => "doc",
            FileKind::Data => "data",
        }
    }
}

/// Language and kind of a file, by file name, then extension, then shebang (see the module doc
/// for the kind rule).
pub(crate) fn classify(path: &str, content: &str) -> (&'static str, FileKind) {
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some(found) = classify_by_name(name) {
        return found;
    }
    let ext = name
        .rfind('.')
        .filter(|&i| i > 0 && i + 1 < name.len())
        .map(|i| name[i + 1..].to_ascii_lowercase());
    if let Some(lang) = ext.as_deref().and_then(language_by_extension) {
        return (lang, kind_of_language(lang));
    }
    if let Some(lang) = language_by_shebang(content) {
        return (lang, kind_of_language(lang));
    }
    ("unknown", FileKind::Data)
}

fn classify_by_name(name: &str) -> Option<(&'static str, FileKind)> {
    use FileKind::{Code, Config, Doc};
    let found = match name {
        "Dockerfile" | "dockerfile" | "Containerfile" => ("dockerfile", Config),
        "Makefile" | "makefile" | "GNUmakefile" => ("makefile", Config),
        "CMakeLists.txt" => ("cmake", Config),
        "Gemfile" | "Podfile" | "Brewfile" => ("ruby", Config),
        "Rakefile" | "Vagrantfile" | "Guardfile" | "Fastfile" => ("ruby", Code),
        "Jenkinsfile" => ("groovy", Config),
        "BUILD" | "BUILD.bazel" | "WORKSPACE" | "WORKSPACE.bazel" | "MODULE.bazel" => {
            ("starlark", Config)
        }
        "go.mod" | "go.sum" | "go.work" => ("go-module", Config),
        "Cargo.lock" | "poetry.lock" | "uv.lock" | "Pipfile" => ("toml", Config),
        "Pipfile.lock" | "composer.lock" | "flake.lock" => ("json", Config),
        ".gitignore" | ".dockerignore" | ".npmignore" | ".prettierignore" | ".eslintignore"
        | ".ignore" | ".helmignore" => ("gitignore", Config),
        ".gitattributes" => ("gitattributes", Config),
        ".gitmodules" | ".editorconfig" => ("ini", Config),
        ".bashrc" | ".bash_profile" | ".zshrc" | ".profile" => ("shell", Code),
        "CODEOWNERS" | "OWNERS" => ("codeowners", Config),
        "NOTICE" | "AUTHORS" | "CONTRIBUTORS" | "CHANGELOG" | "CHANGES" | "README" | "VERSION"
        | "TODO" => ("text", Doc),
        _ => {
            let lower = name.to_ascii_lowercase();
            let upper = name.to_ascii_uppercase();
            if name.starts_with("Dockerfile.") || lower.ends_with(".dockerfile") {
                ("dockerfile", Config)
            } else if lower.starts_with(".env") {
                ("dotenv", Config)
            } else if lower.starts_with("requirements") && lower.ends_with(".txt") {
                ("text", Config)
            } else if lower.ends_with(".gradle.kts") {
                ("kotlin", Config)
            } else if lower.ends_with(".gradle") {
                ("groovy", Config)
            } else if lower.ends_with(".lock") {
                ("lockfile", Config)
            } else if lower.ends_with("-lock.json") {
                ("json", Config)
            } else if lower.ends_with("-lock.yaml") {
                ("yaml", Config)
            } else if (upper.starts_with("LICEN") || upper.starts_with("COPYING"))
                && !name.contains('.')
            {
                ("text", Doc)
            } else {
                return None;
            }
        }
    };
    Some(found)
}

fn language_by_extension(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "rs" => "rust",
        "py" | "pyi" | "pyw" | "pyx" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "tsx" | "mts" | "cts" => "typescript",
        "go" => "go",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" | "inl" | "cu"
        | "cuh" => "cpp",
        "cs" => "csharp",
        "fs" | "fsx" | "fsi" => "fsharp",
        "vb" => "vb",
        "rb" | "rake" | "gemspec" | "ru" => "ruby",
        "php" | "phtml" => "php",
        "swift" => "swift",
        "scala" | "sc" | "sbt" => "scala",
        "sh" | "bash" | "zsh" | "ksh" | "fish" => "shell",
        "ps1" | "psm1" | "psd1" => "powershell",
        "bat" | "cmd" => "batch",
        "pl" | "pm" => "perl",
        "sql" | "psql" | "ddl" => "sql",
        "html" | "htm" | "xhtml" => "html",
        "css" => "css",
        "scss" | "sass" => "scss",
        "less" => "less",
        "vue" => "vue",
        "svelte" => "svelte",
        "dart" => "dart",
        "zig" => "zig",
        "nim" => "nim",
        "ml" | "mli" => "ocaml",
        "clj" | "cljs" | "cljc" => "clojure",
        "elm" => "elm",
        "groovy" | "gvy" => "groovy",
        "m" => "objective-c",
        "mm" => "objective-cpp",
        "asm" | "s" => "assembly",
        "f" | "f90" | "f95" | "f03" | "for" => "fortran",
        "r" => "r",
        "jl" => "julia",
        "lua" => "lua",
        "hs" | "lhs" => "haskell",
        "ex" | "exs" => "elixir",
        "erl" | "hrl" => "erlang",
        "tf" | "tfvars" => "terraform",
        "proto" => "protobuf",
        "sol" => "solidity",
        "vy" => "vyper",
        "move" => "move",
        "cairo" => "cairo",
        "graphql" | "gql" => "graphql",
        "awk" => "awk",
        "tcl" => "tcl",
        "ipynb" => "jupyter",
        "diff" | "patch" => "diff",
        "wat" => "webassembly",
        "md" | "markdown" | "mdx" => "markdown",
        "rst" => "restructuredtext",
        "txt" | "text" => "text",
        "adoc" | "asciidoc" => "asciidoc",
        "org" => "org",
        "tex" | "sty" | "cls" | "ltx" => "latex",
        "bib" => "bibtex",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        "json" | "json5" | "jsonc" => "json",
        "xml" | "xsd" | "xsl" | "xslt" | "plist" | "csproj" | "vbproj" | "fsproj" | "props"
        | "targets" | "pom" | "wsdl" => "xml",
        "hcl" => "hcl",
        "nix" => "nix",
        "cmake" => "cmake",
        "mk" | "mak" => "makefile",
        "dockerfile" => "dockerfile",
        "ini" | "cfg" | "conf" | "cnf" => "ini",
        "properties" => "properties",
        "env" => "dotenv",
        "jsonl" | "ndjson" => "jsonl",
        "csv" => "csv",
        "tsv" | "tab" => "tsv",
        "svg" => "svg",
        "log" => "log",
        _ => return None,
    })
}

fn language_by_shebang(content: &str) -> Option<&'static str> {
    let first = content.lines().next()?.strip_prefix("#!")?;
    let mut words = first.split_whitespace();
    let interpreter = words.next()?;
    let mut program = interpreter.rsplit('/').next().unwrap_or(interpreter);
    if program == "env" {
        // "#!/usr/bin/env -S python3 -u", "#!/usr/bin/env VAR=1 node"
        program = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        program = program.rsplit('/').next().unwrap_or(program);
    }
    if program.starts_with("python") || program.starts_with("pypy") {
        return Some("python");
    }
    if program.starts_with("perl") {
        return Some("perl");
    }
    Some(match program {
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "fish" => "shell",
        "node" | "nodejs" | "deno" | "bun" => "javascript",
        "ts-node" | "tsx" => "typescript",
        "ruby" | "jruby" => "ruby",
        "php" => "php",
        "lua" | "luajit" => "lua",
        "Rscript" => "r",
        "julia" => "julia",
        "awk" | "gawk" => "awk",
        "tclsh" | "wish" => "tcl",
        "elixir" => "elixir",
        "escript" => "erlang",
        "scala" => "scala",
        "groovy" => "groovy",
        "pwsh" => "powershell",
        "swift" => "swift",
        "runghc" | "runhaskell" => "haskell",
        _ => return None,
    })
}

fn kind_of_language(language: &str) -> FileKind {
    match language {
        "yaml" | "toml" | "json" | "xml" | "ini" | "properties" | "dotenv" | "hcl" | "nix"
        | "cmake" | "makefile" | "dockerfile" | "starlark" | "go-module" | "lockfile"
        | "gitignore" | "gitattributes" | "codeowners" => FileKind::Config,
        "markdown" | "restructuredtext" | "text" | "asciidoc" | "org" | "latex" | "bibtex" => {
            FileKind::Doc
        }
        "csv" | "tsv" | "jsonl" | "svg" | "log" | "unknown" => FileKind::Data,
        _ => FileKind::Code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::PackFile;
    use std::sync::Arc;

    #[test]
    fn languages_and_kinds() {
        let cases = [
            ("a.py", "", "python", FileKind::Code),
            ("web/app.tsx", "", "typescript", FileKind::Code),
            ("Dockerfile", "", "dockerfile", FileKind::Config),
            ("Makefile", "", "makefile", FileKind::Config),
            ("x.yml", "", "yaml", FileKind::Config),
            ("package-lock.json", "", "json", FileKind::Config),
            ("yarn.lock", "", "lockfile", FileKind::Config),
            ("requirements-dev.txt", "", "text", FileKind::Config),
            ("notes.txt", "", "text", FileKind::Doc),
            ("doc.rst", "", "restructuredtext", FileKind::Doc),
            ("paper.tex", "", "latex", FileKind::Doc),
            ("rows.csv", "", "csv", FileKind::Data),
            ("events.jsonl", "", "jsonl", FileKind::Data),
            ("schema.proto", "", "protobuf", FileKind::Code),
            ("Token.sol", "", "solidity", FileKind::Code),
            ("main.tf", "", "terraform", FileKind::Code),
            (
                "bin/tool",
                "#!/usr/bin/env python3\nprint(1)\n",
                "python",
                FileKind::Code,
            ),
            ("bin/run", "#!/bin/bash\necho\n", "shell", FileKind::Code),
            (
                "bin/srv",
                "#!/usr/bin/env -S node --harmony\n",
                "javascript",
                FileKind::Code,
            ),
            ("bin/r", "#!/usr/bin/ruby -w\n", "ruby", FileKind::Code),
            ("bin/p", "#!/usr/bin/perl\n", "perl", FileKind::Code),
            ("mystery", "plain words\n", "unknown", FileKind::Data),
            (".gitignore", "", "gitignore", FileKind::Config),
            ("LICENSE", "", "text", FileKind::Doc),
        ];
        for (path, content, lang, kind) in cases {
            let f = PackFile::new(path.to_string(), Arc::from(content));
            assert_eq!((f.language.as_str(), f.kind), (lang, kind), "{path}");
        }
    }
}
