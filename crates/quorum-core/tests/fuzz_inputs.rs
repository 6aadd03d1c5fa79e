//! Property fuzzing of everything that turns outside text into data: the planner/specialist
//! output parsers, the schema normalisers, flow files and persona files. Each must return a value
//! or an error for any input — never panic, never run unbounded — so a model, a submitted flow or
//! a persona directory cannot take a node down. Inputs are bounded (a few KiB) and the case
//! counts keep the whole file to a few seconds.

use proptest::prelude::*;
use quorum_core::catalog::Catalog;
use quorum_core::flows::flow::Flow;
use quorum_core::pack::ContextPack;
use quorum_core::parse::{extract_object, extract_objects};
use quorum_core::schema::{
    normalize_classification, normalize_finding, normalize_verdict, validate_tasks,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fragments models actually emit, so random text reaches the parsers' deeper paths (fences,
/// reasoning blocks, id-keyed salvage, truncation) instead of failing at the first byte.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\n",
    " ",
    "```json\n",
    "```",
    "<think>",
    "</think>",
    "\"id\": ",
    "\"title\": ",
    "\"tasks\": ",
    "\"findings\": ",
    "\"persona\": \"security_sentinel\"",
    "\"files\": [\"src/a.rs\"]",
    "\"line_start\": 4294967296",
    "\"severity\": \"P0\"",
    "\"confidence\": 1e400",
    "True",
    "None",
    "// c\n",
    "-",
    "1",
    "1. ",
    "'",
    "x",
    "\u{e9}",
    "\u{1F600}",
];

/// Model-like text: fragments and random characters. Built from plain integers because
/// composite string strategies are slow to generate in a debug build.
fn model_text() -> impl Strategy<Value = String> {
    prop::collection::vec((0..FRAGMENTS.len() + 4, any::<char>()), 0..120).prop_map(|v| {
        v.into_iter()
            .map(|(i, c)| match FRAGMENTS.get(i) {
                Some(f) => f.to_string(),
                None => c.to_string(),
            })
            .collect()
    })
}

/// Arbitrary JSON values, bounded in depth and breadth.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)),
        prop::collection::vec(any::<char>(), 0..40)
            .prop_map(|c| Value::String(c.into_iter().collect())),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("id".to_string()),
                    Just("title".to_string()),
                    Just("persona".to_string()),
                    Just("files".to_string()),
                    Just("mandate".to_string()),
                    Just("tools".to_string()),
                    Just("file".to_string()),
                    Just("line_start".to_string()),
                    Just("line_end".to_string()),
                    Just("severity".to_string()),
                    Just("confidence".to_string()),
                    Just("evidence".to_string()),
                    Just("verdict".to_string()),
                    Just("domain".to_string()),
                    Just("languages".to_string()),
                    prop::collection::vec(prop::char::range('a', 'z'), 1..10)
                        .prop_map(String::from_iter),
                ],
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn catalog() -> &'static Catalog {
    static C: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    C.get_or_init(|| Catalog::load(&repo_root().join("personas")).unwrap())
}

fn pack() -> ContextPack {
    ContextPack::from_files(
        PathBuf::from("/t"),
        None,
        vec![
            ("src/a.rs".into(), "fn main() {}\n".into()),
            ("README.md".into(), "# t\n".into()),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn model_output_parsers_never_panic(text in model_text()) {
        let _ = extract_objects(&text, &["tasks"], "id");
        let _ = extract_objects(&text, &["findings"], "title");
        let _ = extract_object(&text);
    }

    #[test]
    fn parsed_output_feeds_the_normalisers_without_panic(text in model_text()) {
        let pack = pack();
        let tools = vec!["file_read".to_string(), "file_grep".to_string()];
        if let Ok((values, _)) = extract_objects(&text, &["tasks"], "id") {
            let (tasks, _) = validate_tasks(&values, catalog(), &pack, &tools, 20);
            prop_assert!(tasks.len() <= 20);
            for t in &tasks {
                prop_assert!(t.files.iter().all(|f| pack.files.contains_key(f)));
            }
        }
        if let Ok((values, _)) = extract_objects(&text, &["findings"], "title") {
            for v in &values {
                let _ = normalize_finding(v);
            }
        }
    }

    #[test]
    fn normalisers_accept_any_json(v in json_value()) {
        let _ = normalize_classification(&v);
        let _ = normalize_finding(&v);
        let _ = normalize_verdict(&v);
        let pack = pack();
        let values = match &v {
            Value::Array(a) => a.clone(),
            other => vec![other.clone()],
        };
        let (tasks, _) = validate_tasks(&values, catalog(), &pack, &["file_read".to_string()], 5);
        prop_assert!(tasks.len() <= 5);
        for t in &tasks {
            prop_assert!(t.tools.iter().all(|x| x == "file_read"));
        }
    }
}

const GOOD_FLOW: &str = r#"
name: t
parameters: { max_concurrent: 2, call_timeout_secs: 30 }
stages:
  - { id: scout, role: scout, instructions: "look" }
  - { id: plan, role: planner, needs: [scout], instructions: "plan" }
  - { id: work, role: specialist, needs: [plan], tools: [file_read] }
  - { id: verify, role: verifier, needs: [work], instructions: "check" }
  - { id: synth, role: synthesizer, needs: [verify], instructions: "sum" }
"#;

/// Byte-level edits of a valid document: the loaders see near-valid input, the hard case.
fn mutated(doc: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<char>(), 0..3),
            0usize..4,
        ),
        0..8,
    )
    .prop_map(move |edits| {
        let mut s: Vec<char> = doc.chars().collect();
        for (at, insert, delete) in edits {
            if s.is_empty() {
                break;
            }
            let i = at.index(s.len());
            let end = (i + delete).min(s.len());
            s.splice(i..end, insert);
        }
        s.into_iter().collect()
    })
}

fn yaml_number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        Just("18446744073709551616".to_string()),
        Just(".nan".to_string()),
        Just("-.inf".to_string()),
    ]
}

const PARAMS: &[&str] = &[
    "max_concurrent",
    "confidence_gate",
    "min_tasks",
    "max_tasks",
    "max_iterations",
    "max_output_tokens",
    "context_tokens",
    "max_tool_calls_per_turn",
    "max_tool_result_tokens",
    "planner_retries",
    "task_attempts",
    "circular_fix_repeats",
    "max_verifications",
    "call_timeout_secs",
    "max_tokens",
    "max_wall_secs",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn flow_loader_never_panics_on_edited_flows(text in mutated(GOOD_FLOW)) {
        let _ = Flow::parse(&text, Path::new("fuzz.yaml"));
    }

    /// Any parameter values: either an error naming the file, or a flow whose deadline
    /// arithmetic (timeout x turns) cannot overflow.
    #[test]
    fn flow_parameters_are_bounded(
        values in prop::collection::vec((prop::sample::select(PARAMS), yaml_number()), 1..6)
    ) {
        let params: Vec<String> = values.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let text = GOOD_FLOW.replace(
            "{ max_concurrent: 2, call_timeout_secs: 30 }",
            &format!("{{ {} }}", params.join(", ")),
        );
        match Flow::parse(&text, Path::new("fuzz.yaml")) {
            Err(e) => prop_assert!(e.to_string().contains("fuzz.yaml"), "{e}"),
            Ok(f) => {
                let p = &f.parameters;
                let turns = u64::from(p.max_iterations) + 2;
                prop_assert!(p.call_timeout_secs.checked_mul(turns).is_some());
                prop_assert!(p.call_timeout_secs.checked_mul(2 * (u64::from(p.planner_retries) + 1)).is_some());
                prop_assert!(p.context_tokens.checked_add(p.max_output_tokens).is_some());
                prop_assert!(p.max_concurrent >= 1);
            }
        }
    }
}

const GOOD_PERSONA_PATH: &str = "security_sentinel.yaml";

proptest! {
    // Each case writes a directory; fewer cases keep the file fast.
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn persona_loader_never_panics_on_edited_personas(text in mutated(include_str!("../../../personas/security_sentinel.yaml"))) {
        let dir = tempfile::tempdir().unwrap();
        // The shipped heuristics, so an intact persona gets past reference checks into the rest.
        std::os::unix::fs::symlink(repo_root().join("personas/heuristics"), dir.path().join("heuristics")).unwrap();
        std::fs::write(dir.path().join(GOOD_PERSONA_PATH), text).unwrap();
        let _ = Catalog::load(dir.path());
    }
}

/// Runs of junk that once made salvage cubic in the text's length (tens of seconds for 40 KB in
/// release, a hung review in practice). The guard is a hang detector, far above the
/// milliseconds these take now, not a timing assertion.
#[test]
fn long_runs_of_junk_do_not_hang_the_parser() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for unit in [
            "{\"id\": 1, ",
            "{\"tasks\": [{\"id\": ",
            "{\"id\": \"x\", \"title\": [",
            "[{\"id\":1},",
        ] {
            let text = unit.repeat(4000);
            let _ = extract_objects(&text, &["tasks"], "id");
            let _ = extract_objects(&text, &["findings"], "title");
            let _ = extract_object(&text);
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("the parser did not finish on 40-70 KB of junk");
}
