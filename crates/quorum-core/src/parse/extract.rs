//! The public ladder: [`extract_objects`] and [`extract_object`] with the [`Recovery`] they
//! report or the [`ParseError`] they fail with, reasoning dropped first, then the candidates
//! (the first fenced block, else the whole text), then salvage.

use super::interpret::{interpret_top_level, objects_of, select_list, top_level_values};
use super::salvage::{salvage_objects, scan_objects};
use super::scan::json_ish;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a value was obtained from the raw text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// The text was exactly valid JSON.
    Clean,
    /// Fences/prose stripped, then the outermost array/object parsed.
    Extracted,
    /// Objects recovered one by one (some may have been repaired or lost).
    Salvaged,
}

/// Parse failure: nothing usable in the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty output")]
    Empty,
    #[error("no json found in output")]
    NoJson,
    #[error("json is truncated and nothing could be recovered")]
    Truncated,
}

/// Extract a list of JSON objects. Accepts: a bare array; an object holding an array under any
/// key (e.g. {"tasks": [...]} or {"findings": [...]}) — `array_keys` lists the preferred keys;
/// a single object (returned as a one-element list); fenced / prose-wrapped variants of these;
/// and, failing all that, objects recovered one by one at `"id_key"` boundaries (walk back to '{',
/// follow brace depth forward, repair a missing closing brace). Returns objects in order.
pub fn extract_objects(
    text: &str,
    array_keys: &[&str],
    id_key: &str,
) -> Result<(Vec<Value>, Recovery), ParseError> {
    without_reasoning(text, |t| objects_from(t, array_keys, id_key, true))
}

/// Extract one JSON object (fenced, wrapped in prose, or the first balanced `{...}` that parses).
pub fn extract_object(text: &str) -> Result<(Value, Recovery), ParseError> {
    without_reasoning(text, |t| object_from(t, true))
}

/// Deduplicate objects by the string value at `key`, keeping the first occurrence.
///
/// Numbers count by their rendering (`1` and `"1"` collide); values without the key, or with a
/// null/structured value there, are always kept since they cannot be compared.
pub fn dedup_by_key(values: Vec<Value>, key: &str) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    values
        .into_iter()
        .filter(|v| match v.get(key) {
            Some(Value::String(s)) => seen.insert(s.trim().to_string()),
            Some(Value::Number(n)) => seen.insert(n.to_string()),
            _ => true,
        })
        .collect()
}

/// Runs `f` on the text without its reasoning blocks.
fn without_reasoning<T>(
    text: &str,
    f: impl Fn(&str) -> Result<(T, Recovery), ParseError>,
) -> Result<(T, Recovery), ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    f(&strip_think(text))
}

fn objects_from(
    text: &str,
    array_keys: &[&str],
    id_key: &str,
    allow_nested_string: bool,
) -> Result<(Vec<Value>, Recovery), ParseError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ParseError::Empty);
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        match v {
            Value::Array(items) => return Ok((objects_of(items), Recovery::Clean)),
            Value::Object(obj) => {
                let list = select_list(&obj, array_keys, id_key, 0)
                    .unwrap_or_else(|| vec![Value::Object(obj)]);
                return Ok((list, Recovery::Clean));
            }
            // JSON encoded twice: the answer is a string holding the JSON.
            Value::String(inner) if allow_nested_string => {
                if let Ok((list, _)) = objects_from(&inner, array_keys, id_key, false) {
                    return Ok((list, Recovery::Extracted));
                }
            }
            _ => {}
        }
    }
    let candidates = candidates(t);
    for cand in &candidates {
        if let Some(list) = interpret_top_level(cand, array_keys, id_key) {
            return Ok((list, Recovery::Extracted));
        }
    }
    for cand in &candidates {
        let list = salvage_objects(cand, array_keys, id_key);
        if !list.is_empty() {
            return Ok((list, Recovery::Salvaged));
        }
    }
    Err(nothing_found(t))
}

fn object_from(text: &str, allow_nested_string: bool) -> Result<(Value, Recovery), ParseError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ParseError::Empty);
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        match v {
            Value::Object(_) => return Ok((v, Recovery::Clean)),
            Value::Array(items) => {
                if let Some(first) = objects_of(items).into_iter().next() {
                    return Ok((first, Recovery::Extracted));
                }
            }
            Value::String(inner) if allow_nested_string => {
                if let Ok((v, _)) = object_from(&inner, false) {
                    return Ok((v, Recovery::Extracted));
                }
            }
            _ => {}
        }
    }
    let candidates = candidates(t);
    for cand in &candidates {
        let top = top_level_values(cand);
        let first = top.values.into_iter().find_map(|v| match v {
            Value::Object(_) => Some(v),
            Value::Array(items) => objects_of(items).into_iter().next(),
            _ => None,
        });
        if let Some(v) = first {
            return Ok((v, Recovery::Extracted));
        }
    }
    for cand in &candidates {
        if let Some(v) = scan_objects(cand).into_iter().next() {
            return Ok((v, Recovery::Salvaged));
        }
    }
    Err(nothing_found(t))
}

/// Texts to look in, best first: the first fenced block that holds JSON, then the whole text.
/// List markers ("1. {", "- {") are removed from both.
fn candidates(text: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(2);
    if let Some(block) = fenced_block(text) {
        out.push(strip_list_markers(block));
    }
    let whole = strip_list_markers(text);
    if !out.contains(&whole) {
        out.push(whole);
    }
    out
}

fn nothing_found(text: &str) -> ParseError {
    let b = text.as_bytes();
    if (0..b.len()).any(|i| matches!(b[i], b'{' | b'[') && json_ish(b, i)) {
        ParseError::Truncated
    } else {
        ParseError::NoJson
    }
}

/// Remove `<think>...</think>` blocks. A closing tag with no opener means the chat template
/// opened the block in the prompt, so everything before it is reasoning. An unterminated block
/// means the model ran out of tokens while reasoning: it never answered, and any JSON in there
/// is a draft it had not committed to, so the block is dropped to the end of the text.
fn strip_think(text: &str) -> String {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    // ASCII lowercasing keeps byte offsets, so indices found in `lower` slice `text`.
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    if let Some(close) = lower.find(CLOSE) {
        if !lower[..close].contains(OPEN) {
            pos = close + CLOSE.len();
        }
    }
    while let Some(rel) = lower[pos..].find(OPEN) {
        let open = pos + rel;
        out.push_str(&text[pos..open]);
        let body = open + OPEN.len();
        match lower[body..].find(CLOSE) {
            Some(r) => pos = body + r + CLOSE.len(),
            None => return out,
        }
    }
    out.push_str(&text[pos..]);
    out
}

/// The content of the first fenced block that holds JSON, preferring blocks tagged `json`; an
/// unterminated fence runs to the end of the text.
fn fenced_block(text: &str) -> Option<&str> {
    let mut blocks: Vec<(&str, &str)> = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find("```") {
        let open = pos + rel + 3;
        let info_len = text[open..]
            .bytes()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
            .count();
        let info = &text[open..open + info_len];
        let body = open + info_len;
        match text[body..].find("```") {
            Some(r) => {
                blocks.push((info, &text[body..body + r]));
                pos = body + r + 3;
            }
            None => {
                blocks.push((info, &text[body..]));
                break;
            }
        }
    }
    let holds_json = |b: &str| b.contains('{') || b.contains('[');
    blocks
        .iter()
        .find(|(info, b)| info.eq_ignore_ascii_case("json") && holds_json(b))
        .or_else(|| blocks.iter().find(|(_, b)| holds_json(b)))
        .map(|(_, b)| *b)
}

/// Drop list markers ("1. ", "2) ", "- ", "* ", "• ") that start a line right before a JSON
/// value. A raw newline cannot occur inside a valid JSON string, so a line start is outside one.
fn strip_list_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_start_matches([' ', '\t']);
        let indent = &line[..line.len() - body.len()];
        let after_marker = if let Some(r) = body.strip_prefix(['-', '*', '+', '•']) {
            Some(r)
        } else {
            let digits = body.bytes().take_while(u8::is_ascii_digit).count();
            if (1..=3).contains(&digits) {
                body[digits..].strip_prefix(['.', ')'])
            } else {
                None
            }
        };
        match after_marker {
            Some(r) if r.starts_with([' ', '\t']) => {
                let value = r.trim_start_matches([' ', '\t']);
                if value.starts_with(['{', '[']) {
                    out.push_str(indent);
                    out.push_str(value);
                    continue;
                }
                out.push_str(line);
            }
            _ => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(v: &[Value]) -> Vec<&str> {
        v.iter().filter_map(|o| o["id"].as_str()).collect()
    }

    #[test]
    fn clean_array_and_wrapper() {
        let (v, r) = extract_objects(r#"[{"id":"a"},{"id":"b"}, 3]"#, &["tasks"], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["a", "b"], Recovery::Clean));
        let (v, r) = extract_objects(r#"{"tasks":[{"id":"a"}]}"#, &["tasks"], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["a"], Recovery::Clean));
        let (v, r) = extract_objects(r#"{"findings": []}"#, &["findings"], "title").unwrap();
        assert_eq!((v.len(), r), (0, Recovery::Clean));
    }

    #[test]
    fn single_object_with_id_is_an_item_even_with_object_arrays() {
        let text = r#"{"id":"t1","steps":[{"n":1},{"n":2}]}"#;
        let (v, r) = extract_objects(text, &["tasks"], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["t1"], Recovery::Clean));
    }

    #[test]
    fn unknown_wrapper_key_and_nested_wrapper() {
        let (v, _) =
            extract_objects(r#"{"plan":[{"id":"a"},{"id":"b"}]}"#, &["tasks"], "id").unwrap();
        assert_eq!(ids(&v), vec!["a", "b"]);
        let (v, _) =
            extract_objects(r#"{"result":{"tasks":[{"id":"a"}]}}"#, &["tasks"], "id").unwrap();
        assert_eq!(ids(&v), vec!["a"]);
    }

    #[test]
    fn double_encoded_json_is_extracted() {
        let text = serde_json::to_string(&json!(r#"[{"id":"a"}]"#)).unwrap();
        let (v, r) = extract_objects(&text, &[], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["a"], Recovery::Extracted));
    }

    #[test]
    fn prose_brackets_before_json_are_skipped() {
        let text = "Plan [draft] for {repo}:\n[{\"id\":\"a\"}]\nDone [1].";
        let (v, r) = extract_objects(text, &[], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["a"], Recovery::Extracted));
    }

    #[test]
    fn empty_array_in_prose_means_none() {
        let (v, r) = extract_objects("No issues found.\n\n[]\n", &["findings"], "title").unwrap();
        assert_eq!((v.len(), r), (0, Recovery::Extracted));
    }

    #[test]
    fn errors() {
        assert_eq!(extract_objects("  \n", &[], "id"), Err(ParseError::Empty));
        assert_eq!(
            extract_objects("I found nothing of note.", &[], "id"),
            Err(ParseError::NoJson)
        );
        assert_eq!(
            extract_objects("See [the docs] and {this}.", &[], "id"),
            Err(ParseError::NoJson)
        );
        assert_eq!(
            extract_objects("[{\"id", &[], "id"),
            Err(ParseError::Truncated)
        );
        assert_eq!(extract_object(""), Err(ParseError::Empty));
        assert_eq!(extract_object("nothing"), Err(ParseError::NoJson));
    }

    #[test]
    fn extract_object_ladder() {
        let (v, r) = extract_object(r#"{"verdict":"CONFIRMED"}"#).unwrap();
        assert_eq!(
            (v["verdict"].as_str(), r),
            (Some("CONFIRMED"), Recovery::Clean)
        );
        let text = "Verdict below.\n```json\n{\"verdict\": \"PLAUSIBLE\", \"reason\": \"x\",}\n```";
        let (v, r) = extract_object(text).unwrap();
        assert_eq!(
            (v["verdict"].as_str(), r),
            (Some("PLAUSIBLE"), Recovery::Extracted)
        );
        let (v, r) =
            extract_object("{\"verdict\": \"HALLUCINATED\", \"reason\": \"no such li").unwrap();
        assert_eq!(
            v,
            json!({"verdict": "HALLUCINATED", "reason": "no such li"})
        );
        assert_eq!(r, Recovery::Salvaged);
        let (v, r) =
            extract_object("<think>is it {real}?</think>{\"verdict\":\"CONFIRMED\"}").unwrap();
        assert_eq!(
            (v["verdict"].as_str(), r),
            (Some("CONFIRMED"), Recovery::Clean)
        );
    }

    #[test]
    fn reasoning_is_never_the_answer() {
        // Cut off while reasoning: the draft inside is not an answer.
        let cut = "<think>maybe {\"verdict\": \"PLAUSIBLE\"} but let me check line";
        assert_eq!(extract_object(cut), Err(ParseError::Empty));
        let two = "<think>a</think>{\"x\":1}<THINK>[{\"id\":\"draft\"}]</THINK>";
        assert_eq!(
            extract_objects(two, &[], "id"),
            Ok((vec![json!({"x": 1})], Recovery::Clean))
        );
        // Reasoning opened by the chat template: only the closing tag is in the output.
        let (v, r) =
            extract_objects("so [maybe] {x}\n</think>\n[{\"id\":\"a\"}]", &[], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["a"], Recovery::Clean));
    }

    #[test]
    fn dedup_keeps_first_and_keyless() {
        let v = vec![
            json!({"id": "a", "n": 1}),
            json!({"n": 2}),
            json!({"id": "a", "n": 3}),
            json!({"id": 7}),
            json!({"id": "7"}),
            json!({"n": 4}),
        ];
        let out = dedup_by_key(v, "id");
        let ns: Vec<_> = out.iter().map(|o| o.get("n").cloned()).collect();
        assert_eq!(
            ns,
            vec![Some(json!(1)), Some(json!(2)), None, Some(json!(4))]
        );
    }

    #[test]
    fn list_markers_only_before_values() {
        let text = "1. {\"a\":1}\n  - [1]\n- plain prose\n10) {\"b\":2}\n-1";
        assert_eq!(
            strip_list_markers(text),
            "{\"a\":1}\n  [1]\n- plain prose\n{\"b\":2}\n-1"
        );
    }

    #[test]
    fn fences_prefer_json_tag_and_tolerate_no_end() {
        let text = "```rust\nfn a() {}\n```\n```json\n[1]\n```";
        assert_eq!(fenced_block(text), Some("\n[1]\n"));
        assert_eq!(fenced_block("```\n{\"a\":1}"), Some("\n{\"a\":1}"));
        assert_eq!(fenced_block("no fence"), None);
    }
}
