//! Corpus of real-shaped model output: each file in `tests/corpus/` pins how many objects the
//! resilient parser recovers, which ones, and by which strategy, so a broken strategy shows up
//! as a changed count or [`Recovery`] rather than as a silently worse review.

use quorum_core::parse::{dedup_by_key, extract_object, extract_objects, ParseError, Recovery};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

const PLANNER: (&[&str], &str) = (&["tasks"], "id");
const FINDINGS: (&[&str], &str) = (&["findings"], "title");

/// What one corpus file must yield.
struct Case {
    file: &'static str,
    shape: (&'static [&'static str], &'static str),
    expect: Result<(&'static [&'static str], Recovery), ParseError>,
}

const CASES: &[Case] = &[
    Case {
        file: "planner_clean.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t3"], Recovery::Clean)),
    },
    Case {
        file: "planner_fenced.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2"], Recovery::Extracted)),
    },
    Case {
        file: "planner_prose_wrapped.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t3"], Recovery::Extracted)),
    },
    Case {
        file: "planner_missing_commas.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t3"], Recovery::Extracted)),
    },
    Case {
        file: "planner_truncated_last.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t3"], Recovery::Salvaged)),
    },
    Case {
        file: "planner_truncated_in_key.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2"], Recovery::Salvaged)),
    },
    Case {
        file: "planner_duplicate_ids.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t2", "t3"], Recovery::Clean)),
    },
    Case {
        file: "planner_think_block.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2"], Recovery::Clean)),
    },
    Case {
        file: "planner_list_markers.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t3"], Recovery::Extracted)),
    },
    Case {
        file: "planner_list_markers_in_array.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2"], Recovery::Extracted)),
    },
    Case {
        file: "planner_object_wrapper.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2"], Recovery::Clean)),
    },
    Case {
        file: "planner_single_task.txt",
        shape: PLANNER,
        expect: Ok((&["t1"], Recovery::Clean)),
    },
    Case {
        file: "planner_code_fence_first.txt",
        shape: PLANNER,
        expect: Ok((&["t1"], Recovery::Extracted)),
    },
    Case {
        file: "planner_unterminated_fence.txt",
        shape: PLANNER,
        expect: Ok((&["t1", "t2", "t3"], Recovery::Salvaged)),
    },
    Case {
        file: "planner_cut_immediately.txt",
        shape: PLANNER,
        expect: Err(ParseError::Truncated),
    },
    Case {
        file: "planner_single_quotes.txt",
        shape: PLANNER,
        expect: Err(ParseError::Truncated),
    },
    Case {
        file: "findings_trailing_commas.txt",
        shape: FINDINGS,
        expect: Ok((
            &[
                "Token compared with non-constant-time equality",
                "Session never expires",
            ],
            Recovery::Extracted,
        )),
    },
    Case {
        file: "findings_nested_objects.txt",
        shape: FINDINGS,
        expect: Ok((
            &[
                "SQL built with format!",
                "Password logged on failed login",
                "Unbounded request body",
            ],
            Recovery::Salvaged,
        )),
    },
    Case {
        file: "findings_empty.txt",
        shape: FINDINGS,
        expect: Ok((&[], Recovery::Extracted)),
    },
    Case {
        file: "findings_raw_newlines.txt",
        shape: FINDINGS,
        expect: Ok((&["unwrap on user input"], Recovery::Extracted)),
    },
    Case {
        file: "findings_python_literals.txt",
        shape: FINDINGS,
        expect: Ok((
            &["Debug mode enabled in production config"],
            Recovery::Extracted,
        )),
    },
    Case {
        file: "brace_in_string.txt",
        shape: FINDINGS,
        expect: Ok((
            &[
                "Format string with braces {} is user-controlled",
                "Array index [i + 1] may overflow",
            ],
            Recovery::Extracted,
        )),
    },
    Case {
        file: "brace_in_string_truncated.txt",
        shape: FINDINGS,
        expect: Ok((
            &[
                "Template braces } not escaped",
                "Closing ] in regex char class",
            ],
            Recovery::Salvaged,
        )),
    },
    Case {
        file: "prose_only.txt",
        shape: FINDINGS,
        expect: Err(ParseError::NoJson),
    },
    Case {
        file: "empty.txt",
        shape: PLANNER,
        expect: Err(ParseError::Empty),
    },
    Case {
        file: "think_only.txt",
        shape: PLANNER,
        expect: Err(ParseError::Empty),
    },
];

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(corpus_dir().join(file)).unwrap()
}

fn extract(file: &str, shape: (&[&str], &str)) -> Result<(Vec<Value>, Recovery), ParseError> {
    extract_objects(&read(file), shape.0, shape.1)
}

fn keys_of<'a>(values: &'a [Value], key: &str) -> Vec<&'a str> {
    values
        .iter()
        .map(|v| v[key].as_str().unwrap_or("<missing>"))
        .collect()
}

#[test]
fn every_case_yields_exactly_the_expected_objects() {
    let mut failures = Vec::new();
    for case in CASES {
        let got = extract(case.file, case.shape).map(|(v, r)| {
            let ids: Vec<String> = keys_of(&v, case.shape.1)
                .into_iter()
                .map(String::from)
                .collect();
            (ids, r)
        });
        let want = case
            .expect
            .clone()
            .map(|(ids, r)| (ids.iter().map(|s| s.to_string()).collect::<Vec<_>>(), r));
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", case.file));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_corpus_file_has_a_case() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let covered: BTreeSet<String> = CASES.iter().map(|c| c.file.to_string()).collect();
    assert_eq!(on_disk, covered);
}

#[test]
fn truncated_last_task_keeps_its_partial_mandate() {
    let (v, _) = extract("planner_truncated_last.txt", PLANNER).unwrap();
    assert_eq!(v[2]["mandate"], "Find N+1 queries in the monthly rep");
    assert_eq!(v[2]["files"][0], "src/report.rs");
    assert!(v[2].get("verification").is_none());
}

#[test]
fn truncated_key_is_cut_back_to_the_last_complete_member() {
    let (v, _) = extract("planner_truncated_in_key.txt", PLANNER).unwrap();
    let t2 = v[1].as_object().unwrap();
    let keys: Vec<&str> = t2.keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["files", "id", "mandate", "persona", "tools"]);
}

#[test]
fn unterminated_fence_recovers_the_cut_task() {
    let (v, _) = extract("planner_unterminated_fence.txt", PLANNER).unwrap();
    assert_eq!(v[2]["files"], serde_json::json!(["docs/"]));
    assert_eq!(v[2]["persona"], "docs_reviewer");
}

#[test]
fn duplicate_ids_dedup_to_the_first() {
    let (v, _) = extract("planner_duplicate_ids.txt", PLANNER).unwrap();
    let v = dedup_by_key(v, "id");
    assert_eq!(keys_of(&v, "id"), vec!["t1", "t2", "t3"]);
    assert_eq!(v[1]["persona"], "correctness_auditor");
}

#[test]
fn reasoning_block_contents_never_leak_into_tasks() {
    let (v, _) = extract("planner_think_block.txt", PLANNER).unwrap();
    assert!(v.iter().all(|t| t["persona"] != "x"));
}

#[test]
fn preferred_array_key_wins_over_other_object_arrays() {
    let (v, _) = extract("planner_object_wrapper.txt", PLANNER).unwrap();
    assert!(v.iter().all(|t| t.get("n").is_none()));
}

#[test]
fn nested_objects_stay_inside_their_finding() {
    let (v, _) = extract("findings_nested_objects.txt", FINDINGS).unwrap();
    assert_eq!(v[0]["location"]["line_start"], 31);
    assert_eq!(v[0]["references"][0]["title"], "CWE-89");
    assert_eq!(v[1]["references"][0]["title"], "CWE-532");
    assert_eq!(v[1]["location"]["file"], "src/auth.rs");
    assert_eq!(v[2]["location"]["file"], "src/routes.rs");
    assert_eq!(
        v[2]["evidence"],
        "let body = hyper::body::to_bytes(req.into_bo"
    );
}

#[test]
fn strings_with_brackets_survive_intact() {
    let (v, _) = extract("brace_in_string.txt", FINDINGS).unwrap();
    assert_eq!(
        v[0]["evidence"],
        "let s = template.replace(\"{name}\", user); // ] } [ {"
    );
    let (v, _) = extract("brace_in_string_truncated.txt", FINDINGS).unwrap();
    assert_eq!(v[1]["evidence"], "Regex::new(\"[^\\]{]+\")");
    assert_eq!(v[1]["suggested_fix"], "Escape the br");
}

#[test]
fn repaired_values_keep_their_content() {
    let (v, _) = extract("findings_raw_newlines.txt", FINDINGS).unwrap();
    assert_eq!(
        v[0]["evidence"],
        "let n: u32 = args[1]\n    .parse()\n    .unwrap();"
    );
    let (v, _) = extract("findings_python_literals.txt", FINDINGS).unwrap();
    assert_eq!(v[0]["symbol"], Value::Null);
    assert_eq!(v[0]["is_default"], false);
    let (v, _) = extract("findings_trailing_commas.txt", FINDINGS).unwrap();
    assert_eq!(v[1]["confidence"], "80%");
}

#[test]
fn single_object_extraction_over_the_corpus() {
    let (v, r) = extract_object(&read("planner_single_task.txt")).unwrap();
    assert_eq!((v["id"].as_str(), r), (Some("t1"), Recovery::Clean));
    let (v, r) = extract_object(&read("findings_trailing_commas.txt")).unwrap();
    assert_eq!(r, Recovery::Extracted);
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        extract_object(&read("planner_cut_immediately.txt")),
        Err(ParseError::Truncated)
    );
    assert_eq!(
        extract_object(&read("prose_only.txt")),
        Err(ParseError::NoJson)
    );
    assert_eq!(extract_object(&read("empty.txt")), Err(ParseError::Empty));
}

/// Every prefix of every corpus file is what a model stopped at max tokens would produce: none
/// may panic, and an id on whatever comes back first must be (a possibly cut-off prefix of) the
/// first expected object's id, never one from a draft or a nested object.
#[test]
fn every_prefix_is_handled_without_panicking() {
    for case in CASES {
        let text = read(case.file);
        let Ok((expected, _)) = &case.expect else {
            continue;
        };
        for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
            let prefix = &text[..end];
            let _ = extract_object(prefix);
            let Ok((got, _)) = extract_objects(prefix, case.shape.0, case.shape.1) else {
                continue;
            };
            let (Some(first), Some(want)) = (got.first(), expected.first()) else {
                continue;
            };
            let Some(id) = first[case.shape.1].as_str() else {
                continue;
            };
            assert!(
                !id.is_empty() && want.starts_with(id),
                "{} cut at {end}: first id {id:?}, want {want:?}",
                case.file
            );
        }
    }
}
