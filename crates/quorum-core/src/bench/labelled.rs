//! An external benchmark's expected results (`quorum bench quality --expected FILE`): one row
//! per labelled file and weakness class, saying whether the file really has it.
//!
//! CSV (`.csv`): lines starting with `#` are comments; the columns are either positional,
//! `file,class,vulnerable[,cwe[,lines]]` (OWASP Benchmark's `expectedresults-*.csv`:
//! `BenchmarkTest00001,pathtraver,true,22`), or named by a header row in any order (`file`,
//! `class`, `cwe`, `vulnerable`, `lines`, and the names OWASP's comment line uses: `test name`,
//! `category`, `real vulnerability`). JSON (`.json`): an array of objects with those keys.
//! A row's `file` is a path relative to the reviewed directory, or a bare name matched to the
//! one file of that name or stem (`BenchmarkTest00001` -> `testcode/BenchmarkTest00001.py`).
//!
//! Every error names the file, the row (its CSV line, its JSON array position) and what is
//! wrong, on one line.

use super::answer_key::BenchError;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One labelled file and class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelledRow {
    /// Where the row is in its file: the CSV line or the JSON array position, 1-based.
    pub row: usize,
    /// As labelled; after [`Labels::resolve`], the path in the reviewed directory.
    pub file: String,
    /// A weakness id of `config/weaknesses.yaml` or the benchmark's own label (`sqli`); empty
    /// when only the CWE names the class.
    pub class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwe: Option<u32>,
    /// True when the file really has a weakness of the class (a true positive to find); false
    /// when it only looks like it (a false positive to avoid).
    pub vulnerable: bool,
    /// First and last line, 1-based, inclusive; absent: anywhere in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<(u32, u32)>,
}

impl LabelledRow {
    /// How reports name the row's class: `sqli (CWE-89)`, `sql-injection`, `CWE-89`.
    pub fn class_label(&self) -> String {
        match (self.class.is_empty(), self.cwe) {
            (false, Some(c)) => format!("{} (CWE-{c})", self.class),
            (false, None) => self.class.clone(),
            (true, Some(c)) => format!("CWE-{c}"),
            (true, None) => String::new(),
        }
    }
}

/// An expected-results file, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// The file it was read from, as errors and reports name it.
    pub path: String,
    pub rows: Vec<LabelledRow>,
}

/// The labels matched to the files of the reviewed directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// The rows whose file is there, `file` set to its path in the directory.
    pub rows: Vec<LabelledRow>,
    /// The rows whose file is not (a subset of a large benchmark was copied): not scored.
    pub missing: Vec<LabelledRow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Column {
    File,
    Class,
    Cwe,
    Vulnerable,
    Lines,
}

/// The positional columns, in OWASP's order, then the optional lines.
const POSITIONAL: [Column; 5] = [
    Column::File,
    Column::Class,
    Column::Vulnerable,
    Column::Cwe,
    Column::Lines,
];

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::File => "file",
            Column::Class => "class",
            Column::Cwe => "cwe",
            Column::Vulnerable => "vulnerable",
            Column::Lines => "lines",
        }
    }
}

fn column_of(name: &str) -> Option<Column> {
    let n = name.trim().to_lowercase().replace(['_', '-'], " ");
    Some(match n.as_str() {
        "file" | "path" | "filename" | "file name" | "test" | "test name" | "name" => Column::File,
        "class" | "category" | "weakness" | "type" => Column::Class,
        "cwe" | "cwe id" => Column::Cwe,
        "vulnerable" | "real vulnerability" | "vulnerability" | "is vulnerable" => {
            Column::Vulnerable
        }
        "lines" | "line" | "line range" => Column::Lines,
        _ => return None,
    })
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_lowercase().as_str() {
        "true" | "yes" | "1" | "y" | "t" => Ok(true),
        "false" | "no" | "0" | "n" | "f" => Ok(false),
        other => Err(format!("`vulnerable` must be true or false, not {other:?}")),
    }
}

fn parse_cwe(s: &str) -> Result<Option<u32>, String> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let digits = t
        .strip_prefix("CWE")
        .or_else(|| t.strip_prefix("cwe"))
        .map(|r| r.trim_start_matches(['-', '_', ' ']))
        .unwrap_or(t);
    match digits.parse::<u32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(format!("`cwe` must be a number or CWE-N, not {t:?}")),
    }
}

fn check_lines(a: u32, b: u32, said: &str) -> Result<Option<(u32, u32)>, String> {
    if a == 0 || a > b {
        return Err(format!("`lines` {said:?} is not a 1-based range"));
    }
    Ok(Some((a, b)))
}

fn parse_lines(s: &str) -> Result<Option<(u32, u32)>, String> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let bad = || format!("`lines` must be N or N-M, not {t:?}");
    let (a, b) = match t.split_once(['-', ':']) {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (t, t),
    };
    let a: u32 = a.parse().map_err(|_| bad())?;
    let b: u32 = b.parse().map_err(|_| bad())?;
    check_lines(a, b, t)
}

/// One CSV line's cells: commas separate, double quotes quote (`""` is a quote inside).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            '"' if quoted => quoted = false,
            '"' if cell.trim().is_empty() => {
                cell.clear();
                quoted = true;
            }
            ',' if !quoted => cells.push(std::mem::take(&mut cell).trim().to_string()),
            c => cell.push(c),
        }
    }
    if quoted {
        return Err("a quoted cell is not closed".into());
    }
    cells.push(cell.trim().to_string());
    Ok(cells)
}

/// A row from its named values; `what` says which are missing or wrong.
fn row_of(
    row: usize,
    file: Option<&str>,
    class: Option<&str>,
    cwe: Result<Option<u32>, String>,
    vulnerable: Option<Result<bool, String>>,
    lines: Result<Option<(u32, u32)>, String>,
) -> Result<LabelledRow, String> {
    let file = file
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .ok_or("`file` is empty")?
        .replace('\\', "/");
    let vulnerable = vulnerable.ok_or("`vulnerable` is missing")??;
    let cwe = cwe?;
    let class = class.unwrap_or_default().trim().to_string();
    if class.is_empty() && cwe.is_none() {
        return Err("names no class: give `class` or `cwe`".into());
    }
    Ok(LabelledRow {
        row,
        file,
        class,
        cwe,
        vulnerable,
        lines: lines?,
    })
}

impl Labels {
    /// Read FILE: `.json` as JSON, anything else as CSV (a file that starts with `[` is JSON).
    pub fn load(path: &Path) -> Result<Labels, BenchError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| BenchError::Read {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
            || text
                .trim_start_matches('\u{feff}')
                .trim_start()
                .starts_with('[');
        if json {
            Labels::parse_json(&text, &shown)
        } else {
            Labels::parse_csv(&text, &shown)
        }
    }

    /// Parse a CSV expected-results file (see the module's doc).
    pub fn parse_csv(text: &str, path: &str) -> Result<Labels, BenchError> {
        let bad = |row: usize, message: String| BenchError::Row {
            path: path.to_string(),
            row,
            message,
        };
        let mut columns: Option<Vec<Option<Column>>> = None;
        let mut positional = false;
        let mut rows = Vec::new();
        for (i, line) in text.trim_start_matches('\u{feff}').lines().enumerate() {
            let n = i + 1;
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let cells = split_csv(t).map_err(|m| bad(n, m))?;
            if columns.is_none() {
                let named: Vec<Option<Column>> = cells.iter().map(|c| column_of(c)).collect();
                let is_header = named.iter().flatten().count() >= 2
                    && cells.get(2).is_none_or(|c| parse_bool(c).is_err());
                if is_header {
                    let has = |c: Column| named.contains(&Some(c));
                    if !has(Column::File) || !has(Column::Vulnerable) {
                        return Err(bad(
                            n,
                            "the header names no `file` or no `vulnerable` column".into(),
                        ));
                    }
                    if !has(Column::Class) && !has(Column::Cwe) {
                        return Err(bad(n, "the header names no `class` or `cwe` column".into()));
                    }
                    let mut seen = BTreeSet::new();
                    if let Some(c) = named.iter().flatten().find(|c| !seen.insert(**c)) {
                        return Err(bad(n, format!("the header names `{}` twice", c.name())));
                    }
                    columns = Some(named);
                    continue;
                }
                columns = Some(POSITIONAL.iter().copied().map(Some).collect());
                positional = true;
            }
            let cols = columns.as_ref().expect("decided above");
            if positional && !(3..=5).contains(&cells.len()) {
                return Err(bad(
                    n,
                    format!(
                        "{} columns; expected file,class,vulnerable[,cwe[,lines]] or a header row",
                        cells.len()
                    ),
                ));
            }
            let get = |c: Column| {
                cols.iter()
                    .position(|x| *x == Some(c))
                    .and_then(|i| cells.get(i))
                    .map(String::as_str)
            };
            let row = row_of(
                n,
                get(Column::File),
                get(Column::Class),
                parse_cwe(get(Column::Cwe).unwrap_or_default()),
                get(Column::Vulnerable).map(parse_bool),
                parse_lines(get(Column::Lines).unwrap_or_default()),
            )
            .map_err(|m| bad(n, m))?;
            rows.push(row);
        }
        Labels::checked(path, rows)
    }

    /// Parse a JSON expected-results file: an array of objects (see the module's doc).
    pub fn parse_json(text: &str, path: &str) -> Result<Labels, BenchError> {
        let value: serde_json::Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
            .map_err(|e| BenchError::Malformed {
                path: path.to_string(),
                message: e.to_string(),
            })?;
        let items = value.as_array().ok_or_else(|| BenchError::Malformed {
            path: path.to_string(),
            message: "expected an array of objects {file, class, cwe, vulnerable, lines}".into(),
        })?;
        let mut rows = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let n = i + 1;
            let bad = |message: String| BenchError::Row {
                path: path.to_string(),
                row: n,
                message,
            };
            let obj = item
                .as_object()
                .ok_or_else(|| bad("is not an object".into()))?;
            let mut named: BTreeMap<Column, &serde_json::Value> = BTreeMap::new();
            for (k, v) in obj {
                if let Some(c) = column_of(k) {
                    if named.insert(c, v).is_some() {
                        return Err(bad(format!("names `{}` twice", c.name())));
                    }
                }
            }
            let text_of = |c: Column| -> Result<Option<String>, String> {
                match named.get(&c) {
                    None | Some(serde_json::Value::Null) => Ok(None),
                    Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                    Some(serde_json::Value::Number(x)) => Ok(Some(x.to_string())),
                    Some(serde_json::Value::Bool(b)) => Ok(Some(b.to_string())),
                    Some(other) => Err(format!("`{}` cannot be {other}", c.name())),
                }
            };
            let lines = match named.get(&Column::Lines) {
                Some(serde_json::Value::Array(a)) => {
                    let nums: Option<Vec<u32>> = a
                        .iter()
                        .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                        .collect();
                    match nums.as_deref() {
                        Some([a]) => check_lines(*a, *a, &format!("{a}")),
                        Some([a, b]) => check_lines(*a, *b, &format!("{a}-{b}")),
                        _ => Err("`lines` must be [first, last]".into()),
                    }
                }
                _ => text_of(Column::Lines).and_then(|s| parse_lines(&s.unwrap_or_default())),
            };
            let vulnerable = match named.get(&Column::Vulnerable) {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::Bool(b)) => Some(Ok(*b)),
                Some(serde_json::Value::String(s)) => Some(parse_bool(s)),
                Some(other) => Some(Err(format!(
                    "`vulnerable` must be true or false, not {other}"
                ))),
            };
            let file = text_of(Column::File).map_err(&bad)?;
            let class = text_of(Column::Class).map_err(&bad)?;
            let cwe = text_of(Column::Cwe).and_then(|s| parse_cwe(&s.unwrap_or_default()));
            let row = row_of(n, file.as_deref(), class.as_deref(), cwe, vulnerable, lines)
                .map_err(&bad)?;
            rows.push(row);
        }
        Labels::checked(path, rows)
    }

    /// At least one row, and no row labelled twice (same file, class, CWE and lines).
    fn checked(path: &str, rows: Vec<LabelledRow>) -> Result<Labels, BenchError> {
        if rows.is_empty() {
            return Err(BenchError::Malformed {
                path: path.to_string(),
                message: "it has no rows".into(),
            });
        }
        type Key<'a> = (&'a str, &'a str, Option<u32>, Option<(u32, u32)>);
        let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
        for r in &rows {
            let key = (r.file.as_str(), r.class.as_str(), r.cwe, r.lines);
            if let Some(first) = seen.insert(key, r.row) {
                return Err(BenchError::Row {
                    path: path.to_string(),
                    row: r.row,
                    message: format!("labels {} {} again (row {first})", r.file, r.class_label()),
                });
            }
        }
        Ok(Labels {
            path: path.to_string(),
            rows,
        })
    }

    /// Match each row to a file of the reviewed directory (`files`: its paths, `/`-separated,
    /// relative to it): the same path, else the one file with that name, else the one file
    /// with that stem — where several share it, the one that is not a page or data file
    /// (OWASP's `templates/web/…/BenchmarkTest00001.html` beside `testcode/BenchmarkTest00001.py`).
    /// A bare name still shared is an error (give the path); a row whose file is not there is
    /// set apart in `missing`.
    pub fn resolve<'a, I>(&self, files: I) -> Result<Resolved, BenchError>
    where
        I: IntoIterator<Item = &'a str>,
    {
        let all: BTreeSet<&str> = files.into_iter().collect();
        let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut by_stem: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for f in &all {
            let name = f.rsplit('/').next().unwrap_or(f);
            by_name.entry(name).or_default().push(f);
            let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
            if !stem.is_empty() {
                by_stem.entry(stem).or_default().push(f);
            }
        }
        let mut out = Resolved::default();
        for r in &self.rows {
            let want = r.file.trim_start_matches("./");
            let found: Option<&str> = if all.contains(want) {
                Some(want)
            } else if want.contains('/') {
                None
            } else {
                let candidates = by_name
                    .get(want)
                    .or_else(|| by_stem.get(want))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let code: Vec<&str> = candidates
                    .iter()
                    .copied()
                    .filter(|f| !is_page_or_data(f))
                    .collect();
                match (candidates, code.as_slice()) {
                    ([], _) => None,
                    ([one], _) | (_, [one]) => Some(*one),
                    (many, _) => {
                        return Err(BenchError::Row {
                            path: self.path.clone(),
                            row: r.row,
                            message: format!(
                                "{} names {} files ({}): give its path",
                                r.file,
                                many.len(),
                                many.join(", ")
                            ),
                        })
                    }
                }
            };
            match found {
                Some(f) => out.rows.push(LabelledRow {
                    file: f.to_string(),
                    ..r.clone()
                }),
                None => out.missing.push(r.clone()),
            }
        }
        Ok(out)
    }
}

/// Files a bare test name does not mean when a source file shares its stem.
fn is_page_or_data(path: &str) -> bool {
    const PAGES: &[&str] = &[
        "html",
        "htm",
        "xml",
        "json",
        "txt",
        "md",
        "csv",
        "yaml",
        "yml",
        "properties",
    ];
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| PAGES.iter().any(|p| ext.eq_ignore_ascii_case(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWASP: &str = "# test name, category, real vulnerability, cwe\n\
        BenchmarkTest00001,pathtraver,true,22\n\
        BenchmarkTest00002,hash,false,328\n\
        BenchmarkTest00003,sqli,true,89\n";

    fn err(r: Result<Labels, BenchError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn owasp_s_expected_results_parse_positionally_past_the_comment_header() {
        let l = Labels::parse_csv(OWASP, "expectedresults-0.1.csv").unwrap();
        assert_eq!(l.rows.len(), 3);
        assert_eq!(
            l.rows[0],
            LabelledRow {
                row: 2,
                file: "BenchmarkTest00001".into(),
                class: "pathtraver".into(),
                cwe: Some(22),
                vulnerable: true,
                lines: None,
            }
        );
        assert!(!l.rows[1].vulnerable);
        assert_eq!(l.rows[1].class_label(), "hash (CWE-328)");
    }

    #[test]
    fn a_header_row_names_the_columns_in_any_order() {
        let text =
            "vulnerable,lines,cwe,file\nno,3-5,CWE-89,src/db.py\n\"yes\",7,,\"src/a, b.py\"\n";
        let err_text = err(Labels::parse_csv(text, "x.csv"));
        assert_eq!(
            err_text,
            "x.csv: row 3: names no class: give `class` or `cwe`"
        );
        let text =
            "vulnerable,lines,cwe,file\nno,3-5,CWE-89,src/db.py\n\"yes\",7,78,\"src/a, b.py\"\n";
        let l = Labels::parse_csv(text, "x.csv").unwrap();
        assert_eq!(l.rows[0].file, "src/db.py");
        assert_eq!(
            (l.rows[0].cwe, l.rows[0].lines, l.rows[0].vulnerable),
            (Some(89), Some((3, 5)), false)
        );
        assert_eq!(l.rows[1].file, "src/a, b.py");
        assert_eq!(
            (l.rows[1].lines, l.rows[1].class.as_str()),
            (Some((7, 7)), "")
        );
        // Positional with lines, no header.
        let l = Labels::parse_csv("a.py,sql-injection,true,89,10-12\n", "y.csv").unwrap();
        assert_eq!(l.rows[0].lines, Some((10, 12)));
    }

    #[test]
    fn a_bad_row_is_one_line_naming_the_file_the_row_and_the_fault() {
        let cases = [
            ("a.py,sqli,maybe,89\n", "x.csv: row 1: `vulnerable` must be true or false, not \"maybe\""),
            ("# c\na.py,sqli,true,eighty\n", "x.csv: row 2: `cwe` must be a number or CWE-N, not \"eighty\""),
            ("a.py,sqli\n", "x.csv: row 1: 2 columns; expected file,class,vulnerable[,cwe[,lines]] or a header row"),
            ("a.py,sqli,true,89,9-3\n", "x.csv: row 1: `lines` \"9-3\" is not a 1-based range"),
            (",sqli,true,89\n", "x.csv: row 1: `file` is empty"),
            ("a.py,sqli,true,89\n\na.py,sqli,false,89\n", "x.csv: row 3: labels a.py sqli (CWE-89) again (row 1)"),
            ("file,cwe,lines\na.py,89,1\n", "x.csv: row 1: the header names no `file` or no `vulnerable` column"),
            ("a.py,\"sqli,true\n", "x.csv: row 1: a quoted cell is not closed"),
            ("# only comments\n", "corpus x.csv is malformed: it has no rows"),
        ];
        for (text, want) in cases {
            let got = err(Labels::parse_csv(text, "x.csv"));
            assert_eq!(got, want, "{text:?}");
            assert_eq!(got.lines().count(), 1);
        }
    }

    #[test]
    fn json_rows_take_the_same_keys_and_report_their_position() {
        let text = r#"[
            {"file": "a.py", "class": "sql-injection", "cwe": 89, "vulnerable": true, "lines": [3, 4]},
            {"file": "b.py", "cwe": "CWE-327", "vulnerable": "false", "lines": "7", "note": "kept"},
            {"test name": "c", "category": "cmdi", "real vulnerability": false}
        ]"#;
        let l = Labels::parse_json(text, "e.json").unwrap();
        assert_eq!(l.rows.len(), 3);
        assert_eq!((l.rows[0].lines, l.rows[0].row), (Some((3, 4)), 1));
        assert_eq!(
            (l.rows[1].cwe, l.rows[1].vulnerable, l.rows[1].lines),
            (Some(327), false, Some((7, 7)))
        );
        assert_eq!((l.rows[2].file.as_str(), l.rows[2].cwe), ("c", None));
        for (text, want) in [
            (r#"[{"file": "a.py", "cwe": 89}]"#, "e.json: row 1: `vulnerable` is missing"),
            (
                r#"[{"file": "a.py", "cwe": 89, "vulnerable": true}, {"file": "b.py", "cwe": 89, "vulnerable": 2}]"#,
                "e.json: row 2: `vulnerable` must be true or false, not 2",
            ),
            (r#"[{"file": "a.py", "cwe": 89, "vulnerable": true, "lines": [1, 2, 3]}]"#, "e.json: row 1: `lines` must be [first, last]"),
            (r#"[3]"#, "e.json: row 1: is not an object"),
            (r#"{"file": "a.py"}"#, "corpus e.json is malformed: expected an array of objects {file, class, cwe, vulnerable, lines}"),
        ] {
            assert_eq!(err(Labels::parse_json(text, "e.json")), want);
        }
    }

    #[test]
    fn load_reads_json_by_extension_or_first_character_and_csv_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("labels.txt");
        std::fs::write(&j, r#"[{"file": "a.py", "cwe": 89, "vulnerable": true}]"#).unwrap();
        assert_eq!(Labels::load(&j).unwrap().rows[0].cwe, Some(89));
        let c = dir.path().join("expected.csv");
        std::fs::write(&c, OWASP).unwrap();
        assert_eq!(Labels::load(&c).unwrap().rows.len(), 3);
        let gone = err(Labels::load(&dir.path().join("none.csv")));
        assert!(gone.starts_with("cannot read the corpus at "), "{gone}");
    }

    #[test]
    fn bare_test_names_match_the_one_file_of_that_stem_and_absent_ones_are_set_apart() {
        let l = Labels::parse_csv(
            &format!("{OWASP}testcode/BenchmarkTest00002.py,hash,true,327\n./README.md,xss,false,79\nmissing/x.py,xss,true,79\n"),
            "e.csv",
        )
        .unwrap();
        let files = [
            "testcode/BenchmarkTest00001.py",
            "testcode/BenchmarkTest00002.py",
            "helpers/utils.py",
            "README.md",
        ];
        let r = l.resolve(files).unwrap();
        let got: Vec<&str> = r.rows.iter().map(|r| r.file.as_str()).collect();
        assert_eq!(
            got,
            [
                "testcode/BenchmarkTest00001.py",
                "testcode/BenchmarkTest00002.py",
                "testcode/BenchmarkTest00002.py",
                "README.md"
            ]
        );
        let missing: Vec<&str> = r.missing.iter().map(|r| r.file.as_str()).collect();
        assert_eq!(missing, ["BenchmarkTest00003", "missing/x.py"]);
        // A page sharing the stem (OWASP's templates) yields to the source file.
        let page = [
            "templates/web/BenchmarkTest00001.html",
            "testcode/BenchmarkTest00001.py",
        ];
        assert_eq!(
            l.resolve(page).unwrap().rows[0].file,
            "testcode/BenchmarkTest00001.py"
        );
        // Two source files with one stem: the row must give the path.
        let two = ["a/BenchmarkTest00001.py", "b/BenchmarkTest00001.py"];
        let e = l.resolve(two).unwrap_err().to_string();
        assert_eq!(
            e,
            "e.csv: row 2: BenchmarkTest00001 names 2 files (a/BenchmarkTest00001.py, b/BenchmarkTest00001.py): give its path"
        );
        // A full name is matched before a stem.
        let two = ["a/BenchmarkTest00001.py", "b/BenchmarkTest00001.html"];
        let named = Labels::parse_csv("BenchmarkTest00001.html,xss,true,79\n", "n.csv").unwrap();
        assert_eq!(
            named.resolve(two).unwrap().rows[0].file,
            "b/BenchmarkTest00001.html"
        );
    }
}
