//! The YAML (and JSON) shape of a [`Reply`], written by hand so scripts read naturally:
//!
//! ```yaml
//! replies:
//!   - text: "plain answer"
//!   - json: {findings: []}              # serialised compactly as the content
//!   - tool_calls: [{name: file_read, arguments: {path: a.rs}}]
//!   - tool: {name: grep, arguments: {pattern: x}}
//!   - status: 500                       # or {code: 429, body: "...", retry_after: 2}
//!   - delay: {ms: 200, then: {text: ".."}}
//!   - hang
//!   - held: {text: ".."}                # answered once the test releases the server
//!   - truncated: "cut me"
//!   - repeat: {prefix: "{\"findings\": [", line: "again\n"}   # loops to the output bound
//!   - echo
//! ```
//!
//! serde's derived enum shape would spell tool calls as nested lists and, in serde_yaml 0.9, use
//! `!tags`; neither is what a person writes.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::script::Reply;

const KEYS: &[&str] = &[
    "text",
    "json",
    "tool_calls",
    "tool",
    "status",
    "delay",
    "hang",
    "held",
    "truncated",
    "repeat",
    "echo",
];

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallSpec {
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusFull {
    code: u16,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StatusSpec {
    Code(u16),
    Full(StatusFull),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepeatSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    prefix: String,
    line: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DelaySpec {
    ms: u64,
    then: Reply,
}

impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Reply::Hang => serializer.serialize_str("hang"),
            Reply::Echo => serializer.serialize_str("echo"),
            other => {
                let mut map = serializer.serialize_map(Some(1))?;
                match other {
                    Reply::Text(text) => map.serialize_entry("text", text)?,
                    Reply::Truncated(text) => map.serialize_entry("truncated", text)?,
                    Reply::ToolCalls(calls) => {
                        let specs: Vec<ToolCallSpec> = calls
                            .iter()
                            .map(|(name, arguments)| ToolCallSpec {
                                name: name.clone(),
                                arguments: arguments.clone(),
                            })
                            .collect();
                        map.serialize_entry("tool_calls", &specs)?;
                    }
                    Reply::Status {
                        code,
                        body,
                        retry_after,
                    } => map.serialize_entry(
                        "status",
                        &StatusFull {
                            code: *code,
                            body: body.clone(),
                            retry_after: *retry_after,
                        },
                    )?,
                    Reply::Delay { ms, then } => map.serialize_entry(
                        "delay",
                        &DelaySpec {
                            ms: *ms,
                            then: (**then).clone(),
                        },
                    )?,
                    Reply::Held(then) => map.serialize_entry("held", &**then)?,
                    Reply::Repeat { prefix, line } => map.serialize_entry(
                        "repeat",
                        &RepeatSpec {
                            prefix: prefix.clone(),
                            line: line.clone(),
                        },
                    )?,
                    Reply::Hang | Reply::Echo => {}
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Reply {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Reply, D::Error> {
        deserializer.deserialize_any(ReplyVisitor)
    }
}

struct ReplyVisitor;

impl<'de> Visitor<'de> for ReplyVisitor {
    type Value = Reply;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a reply: `hang`, `echo`, or a map with one of the keys ")?;
        f.write_str(&KEYS.join(", "))
    }

    fn visit_str<E: de::Error>(self, word: &str) -> Result<Reply, E> {
        match word {
            "hang" => Ok(Reply::Hang),
            "echo" => Ok(Reply::Echo),
            other => Err(E::unknown_variant(other, &["hang", "echo"])),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Reply, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::invalid_length(0, &self));
        };
        let reply = match key.as_str() {
            "text" => Reply::Text(map.next_value()?),
            "json" => Reply::Text(map.next_value::<Value>()?.to_string()),
            "truncated" => Reply::Truncated(map.next_value()?),
            "tool_calls" => Reply::ToolCalls(
                map.next_value::<Vec<ToolCallSpec>>()?
                    .into_iter()
                    .map(|spec| (spec.name, spec.arguments))
                    .collect(),
            ),
            "tool" => {
                let spec: ToolCallSpec = map.next_value()?;
                Reply::ToolCalls(vec![(spec.name, spec.arguments)])
            }
            "status" => match map.next_value::<StatusSpec>()? {
                StatusSpec::Code(code) => Reply::status(code),
                StatusSpec::Full(full) => Reply::Status {
                    code: full.code,
                    body: full.body,
                    retry_after: full.retry_after,
                },
            },
            "delay" => {
                let spec: DelaySpec = map.next_value()?;
                Reply::Delay {
                    ms: spec.ms,
                    then: Box::new(spec.then),
                }
            }
            "held" => Reply::Held(Box::new(map.next_value()?)),
            "repeat" => {
                let spec: RepeatSpec = map.next_value()?;
                Reply::Repeat {
                    prefix: spec.prefix,
                    line: spec.line,
                }
            }
            "hang" => {
                map.next_value::<IgnoredAny>()?;
                Reply::Hang
            }
            "echo" => {
                map.next_value::<IgnoredAny>()?;
                Reply::Echo
            }
            other => return Err(de::Error::unknown_field(other, KEYS)),
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format_args!(
                "a reply has exactly one key, found `{key}` and `{extra}`"
            )));
        }
        Ok(reply)
    }
}
