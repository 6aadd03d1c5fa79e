//! What the analyzer's unit tests share: a small pack, a ruff sample, and a catalog entry of
//! one format.

use super::{AnalyzerCatalog, AnalyzerSpec, OutputFormat};
use crate::pack::ContextPack;
use std::path::{Path, PathBuf};

pub(crate) fn pack() -> ContextPack {
    ContextPack::from_files(
        PathBuf::from("/t"),
        None,
        vec![
            (
                "app.py".to_string(),
                "import os\nimport sys\n\npassword = \"hunter2hunter2\"\nx = 1\n".to_string(),
            ),
            ("run.sh".to_string(), "#!/bin/sh\necho $1\n".to_string()),
            (
                "long.py".to_string(),
                "a = 1\nb = 2\nc = 3\npassword = \"hunter2hunter2\"\ne = 5\nf = 6\ng = 7\nh = 8\n\
                 i = 9\nj = 10\ntoken = \"abcdefabcdef\"\nl = 12\n"
                    .to_string(),
            ),
            (
                "src/main.rs".to_string(),
                "fn main() {\n    return;\n}\n".to_string(),
            ),
            ("web/app.js".to_string(), "var unused = 1;\n".to_string()),
        ],
    )
}

pub(crate) const RUFF: &str = r#"[
  {"cell": null, "code": "F401", "end_location": {"column": 10, "row": 1},
   "filename": "/tmp/quorum-analyzers-x/app.py", "fix": {"applicability": "safe",
   "edits": [], "message": "Remove unused import: `os`"}, "location": {"column": 8, "row": 1},
   "message": "`os` imported but unused", "noqa_row": 1,
   "url": "https://docs.astral.sh/ruff/rules/unused-import"},
  {"cell": null, "code": null, "end_location": {"column": 1, "row": 3},
   "filename": "/tmp/quorum-analyzers-x/app.py", "fix": null,
   "location": {"column": 1, "row": 3}, "message": "SyntaxError: unexpected indent",
   "noqa_row": null, "url": null}
]"#;

pub(crate) fn spec(name: &str, format: OutputFormat) -> AnalyzerSpec {
    let yaml = format!(
        "analyzers:\n  - name: {name}\n    command: {name}\n    format: {}\n",
        serde_json::to_value(format).unwrap().as_str().unwrap()
    );
    AnalyzerCatalog::parse(&yaml, Path::new("t.yaml"))
        .unwrap()
        .analyzers
        .remove(0)
}
