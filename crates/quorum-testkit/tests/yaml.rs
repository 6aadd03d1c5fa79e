//! The YAML shape of scripts: what a person writes parses into the same script the builders make,
//! round-trips, and authoring mistakes are refused with a message that points at them.

use quorum_testkit::{Api, Match, Reply, Rule, Script, ScriptError, DEFAULT_MODEL};
use serde_json::json;

const FULL: &str = r#"
models: [scripted-model, qwen2.5-coder:7b]
rules:
  - name: scout
    when:
      system: ["classify the repository"]
      api: ollama
      turn: 0
    replies:
      - json: {domain: code, frameworks: [axum]}
  - name: tool-loop
    when:
      all: [src/lib.rs]
      any: [review, audit]
      none: [verifier]
      regex: 'src/\w+\.rs'
      last_user: ["fn main"]
      model: scripted-model
      has_tools: true
    replies:
      - tool_calls: [{name: file_read, arguments: {path: src/lib.rs}}, {name: list_files}]
      - tool: {name: grep, arguments: {pattern: unsafe}}
      - text: "done"
    times: 3
  - name: faults
    when: {api: openai}
    replies:
      - status: 500
      - status: {code: 429, retry_after: 2}
      - status: {code: 503, body: "busy"}
      - delay: {ms: 200, then: {text: "slow"}}
      - hang
      - held: {text: "after release"}
      - truncated: "cut"
      - repeat: {prefix: "[", line: "again\n"}
      - echo
fallback: {text: "nothing"}
"#;

fn expected() -> Script {
    Script::new()
        .models(["scripted-model", "qwen2.5-coder:7b"])
        .rule(
            Rule::new("scout")
                .when_system(["classify the repository"])
                .when_api(Api::Ollama)
                .turn(0)
                .reply(Reply::json(
                    &json!({"domain": "code", "frameworks": ["axum"]}),
                )),
        )
        .rule(
            Rule::new("tool-loop")
                .when_all(["src/lib.rs"])
                .when_any(["review", "audit"])
                .when_none(["verifier"])
                .when_regex(r"src/\w+\.rs")
                .when_last_user(["fn main"])
                .when_model("scripted-model")
                .when_has_tools(true)
                .reply(Reply::tools([
                    ("file_read", json!({"path": "src/lib.rs"})),
                    ("list_files", json!({})),
                ]))
                .then(Reply::tool("grep", json!({"pattern": "unsafe"})))
                .then(Reply::text("done"))
                .times(3),
        )
        .rule(
            Rule::new("faults")
                .when_api(Api::OpenAi)
                .reply(Reply::status(500))
                .then(Reply::rate_limited(2))
                .then(Reply::status_body(503, "busy"))
                .then(Reply::delay(200, Reply::text("slow")))
                .then(Reply::hang())
                .then(Reply::held(Reply::text("after release")))
                .then(Reply::truncated("cut"))
                .then(Reply::repeat("[", "again\n"))
                .then(Reply::echo()),
        )
        .fallback(Reply::text("nothing"))
}

#[test]
fn the_written_shape_parses_into_what_the_builders_make() {
    let script = Script::from_yaml(FULL).unwrap();
    assert_eq!(script, expected());
}

#[test]
fn scripts_round_trip_through_yaml() {
    let script = expected();
    let yaml = script.to_yaml().unwrap();
    assert_eq!(Script::from_yaml(&yaml).unwrap(), script, "{yaml}");
    // The rendered form is the readable one, not serde's tagged enums.
    assert!(yaml.contains("tool_calls:"), "{yaml}");
    assert!(yaml.contains("- hang"), "{yaml}");
    assert!(!yaml.contains('!'), "{yaml}");
}

#[test]
fn models_default_and_can_be_emptied() {
    let script = Script::from_yaml("fallback: {text: hi}").unwrap();
    assert_eq!(script.models, [DEFAULT_MODEL]);
    assert_eq!(script.rules, []);
    let script = Script::from_yaml("models: []\nfallback: echo").unwrap();
    assert!(script.models.is_empty());
    assert_eq!(script.fallback, Some(Reply::Echo));
}

#[test]
fn a_rule_without_when_matches_everything() {
    let script = Script::from_yaml("rules: [{name: any, replies: [{text: x}]}]").unwrap();
    assert_eq!(script.rules[0].when, Match::default());
}

fn error_of(yaml: &str) -> String {
    match Script::from_yaml(yaml) {
        Ok(script) => panic!("accepted {yaml:?} as {script:?}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn authoring_mistakes_are_refused_with_a_pointer() {
    let err = error_of("rules: [{name: r, replies: [{txt: x}]}]");
    assert!(err.contains("txt"), "{err}");

    let err = error_of("rules: [{name: r, replies: [{text: x, status: 500}]}]");
    assert!(err.contains("exactly one key"), "{err}");

    let err = error_of("rules: [{name: r, replies: [sleep]}]");
    assert!(err.contains("sleep"), "{err}");

    let err = error_of("rules: [{name: r, when: {al: [x]}, replies: [echo]}]");
    assert!(err.contains("al"), "{err}");

    let err = error_of("rules: [{name: lonely, replies: []}]");
    assert!(err.contains("lonely"), "{err}");

    let err = error_of("rules: [{name: rx, when: {regex: '('}, replies: [echo]}]");
    assert!(err.contains("rx") && err.contains("regex"), "{err}");

    let err = error_of("fallback: {status: 1000}");
    assert!(err.contains("1000"), "{err}");

    assert!(matches!(
        Script::from_yaml("rules: [{name: r, replies: [{delay: {ms: 5}}]}]"),
        Err(ScriptError::Yaml(_))
    ));
}

#[test]
fn match_can_be_checked_against_a_request_directly() {
    let yaml = r#"{seq: 0, api: ollama, path: /api/chat, model: m, body: null, text: "a b", system: "",
        last_user: "b", rule: null, has_tools: false, tool_names: [], json_schema: false,
        max_tokens: null, turn: 0, stream: null, authorization: null}"#;
    let req: quorum_testkit::RecordedRequest = serde_yaml::from_str(yaml).unwrap();
    let mut when = Match {
        all: vec!["a".into()],
        last_user: vec!["b".into()],
        ..Match::default()
    };
    assert!(when.matches(&req));
    when.regex = Some("(".into());
    assert!(!when.matches(&req), "an invalid regex never matches");
    when.regex = Some("^a".into());
    assert!(when.matches(&req));
    when.model = Some("m:latest".into());
    assert!(
        when.matches(&req),
        "name and name:latest are the same model"
    );
    when.api = Some(Api::OpenAi);
    assert!(!when.matches(&req));
}
