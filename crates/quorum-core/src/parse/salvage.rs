//! The last rung of the ladder: objects recovered one at a time around their id key, a
//! truncated last object closed, objects nested inside an item and fragments with no content
//! beyond a cut-off id left out.

use super::interpret::select_list;
use super::repair::{parse_lenient, parse_truncated};
use super::scan::{balanced_end, json_ish, Balance};
use serde_json::Value;

/// Id keys one salvage looks around, and truncated tails it tries to close. Each costs a scan of
/// the text, so without these a long run of junk (`{"id": 1, {"id": 1, ...`) is quadratic or
/// worse — a hang on one bad answer. Far above any real answer: a plan has at most a few dozen
/// tasks, and a text is cut once, at its end.
const SALVAGE_MAX_KEYS: usize = 1000;
const SALVAGE_MAX_TRUNCATED: usize = 4;

/// Recover objects one at a time around `"id_key":` occurrences; with none, every top-level
/// `{...}` instead. Objects nested inside a recovered
/// object are never returned on their own.
pub(crate) fn salvage_objects(text: &str, array_keys: &[&str], id_key: &str) -> Vec<Value> {
    let (mut found, id_keys_seen) = if id_key.is_empty() {
        (Vec::new(), false)
    } else {
        salvage_by_id(text, array_keys, id_key)
    };
    // Objects that had id keys but could not be recovered around them are lost; rescanning them
    // whole would only bring back the same fragments without their ids.
    if !id_keys_seen {
        found = scan_objects(text);
    }
    let mut out: Vec<Value> = Vec::new();
    for v in found {
        match &v {
            Value::Object(obj) => match select_list(obj, array_keys, id_key, 0) {
                Some(list) => out.extend(list),
                None => out.push(v),
            },
            _ => out.push(v),
        }
    }
    out.retain(has_content);
    out
}

/// Whether a recovered object holds anything: closing a wrapper cut right after `{`, `[` or a
/// key yields `{}`, `{"k": []}` or `{"k": null}`, which are repair artefacts, not data.
fn has_content(v: &Value) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    obj.values().any(|x| match x {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    })
}

/// Objects recovered around `"id_key":`, and whether the text had any such key at all.
fn salvage_by_id(text: &str, array_keys: &[&str], id_key: &str) -> (Vec<Value>, bool) {
    let b = text.as_bytes();
    let needle = format!("\"{id_key}\"");
    // (start, end, value) of recovered objects, kept disjoint.
    let mut spans: Vec<(usize, usize, Value)> = Vec::new();
    let mut from = 0;
    let mut seen = false;
    let (mut keys, mut truncated) = (0usize, 0usize);
    while let Some(rel) = text[from..].find(&needle) {
        let k = from + rel;
        from = k + needle.len();
        if !followed_by_colon(b, from) {
            continue;
        }
        seen = true;
        keys += 1;
        if keys > SALVAGE_MAX_KEYS {
            break;
        }
        if spans.iter().any(|(s, e, _)| *s < k && k < *e) {
            continue;
        }
        let Some(start) = enclosing_open_brace(b, k) else {
            continue;
        };
        if is_nested(b, start, array_keys) {
            continue;
        }
        let recovered = match balanced_end(b, start) {
            Balance::Closed(end) => parse_lenient(&text[start..end]).map(|v| (end, v)),
            Balance::Open if truncated < SALVAGE_MAX_TRUNCATED => {
                truncated += 1;
                parse_truncated(&text[start..]).map(|v| (b.len(), v))
            }
            Balance::Open | Balance::Mismatch(_) => None,
        };
        // Recovered at its id key, an object whose id was cut off, or that holds nothing but an
        // id (typically cut inside the id's own value), is too incomplete to use.
        let usable = |v: &Value| {
            v.get(id_key)
                .is_some_and(|id| !id.is_null() && id.as_str() != Some(""))
                && v.as_object().is_some_and(|o| o.len() > 1)
        };
        if let Some((end, v)) = recovered.filter(|(_, v)| usable(v)) {
            // An id key that appears after a nested object's id means the earlier recovery was
            // the nested one: the outer object replaces it.
            spans.retain(|(s, e, _)| !(start <= *s && *e <= end));
            spans.push((start, end, v));
            from = from.max(end);
        }
    }
    spans.sort_by_key(|(s, _, _)| *s);
    (spans.into_iter().map(|(_, _, v)| v).collect(), seen)
}

/// Every top-level `{...}` that parses (repaired if needed); a final unterminated one is closed.
pub(crate) fn scan_objects(text: &str) -> Vec<Value> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'{' || !json_ish(b, i) {
            i += 1;
            continue;
        }
        match balanced_end(b, i) {
            Balance::Closed(end) => {
                if let Some(v) = parse_lenient(&text[i..end]).filter(Value::is_object) {
                    out.push(v);
                }
                i = end;
            }
            Balance::Open => {
                if let Some(v) = parse_truncated(&text[i..]).filter(Value::is_object) {
                    out.push(v);
                }
                break;
            }
            Balance::Mismatch(at) => i = at + 1,
        }
    }
    out
}

/// Whether the object opening at `start` is a value inside another item (a nested location or
/// reference) rather than an item of the answer's list. Walks out through the unclosed brackets
/// around it: arrays under a preferred key, and objects holding those, are wrappers; the
/// outermost object holding an array under any key is taken for a wrapper too (`{"plan": [..]}`).
/// An object that opens where no key introduces it is a sibling whose predecessor the model
/// forgot to close, not a nested value.
fn is_nested(b: &[u8], start: usize, array_keys: &[&str]) -> bool {
    enum Child {
        Item,
        Array { preferred: bool },
        Wrapper,
    }
    let path = unmatched_openers(b, start);
    let mut child = Child::Item;
    let mut child_pos = start;
    for (idx, &p) in path.iter().enumerate() {
        let outermost = idx + 1 == path.len();
        if b[p] == b'[' {
            let preferred = key_before(b, p).is_some_and(|k| array_keys.contains(&k));
            child = Child::Array { preferred };
        } else {
            match child {
                Child::Array { preferred: true } | Child::Wrapper => child = Child::Wrapper,
                Child::Array { preferred: false } if outermost => return false,
                Child::Item if key_before(b, child_pos).is_none() => return false,
                _ => return true,
            }
        }
        child_pos = p;
    }
    false
}

/// Positions of the brackets still open at `start`, innermost first (string-aware by quote
/// parity, like [`enclosing_open_brace`]).
fn unmatched_openers(b: &[u8], start: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut in_str = false;
    let mut j = start;
    while j > 0 {
        j -= 1;
        let c = b[j];
        if c == b'"' && !is_escaped(b, j) {
            in_str = !in_str;
            continue;
        }
        if in_str {
            continue;
        }
        match c {
            b'}' | b']' => depth += 1,
            b'{' | b'[' if depth == 0 => out.push(j),
            b'{' | b'[' => depth -= 1,
            _ => {}
        }
    }
    out
}

/// The key whose value opens at `pos` (`"key": ` right before it), if any.
fn key_before(b: &[u8], pos: usize) -> Option<&str> {
    let mut j = pos;
    let skip_ws = |mut j: usize| {
        while j > 0 && b[j - 1].is_ascii_whitespace() {
            j -= 1;
        }
        j
    };
    j = skip_ws(j);
    if j == 0 || b[j - 1] != b':' {
        return None;
    }
    j = skip_ws(j - 1);
    if j == 0 || b[j - 1] != b'"' {
        return None;
    }
    let end = j - 1;
    let mut k = end;
    while k > 0 {
        k -= 1;
        if b[k] == b'"' && !is_escaped(b, k) {
            return std::str::from_utf8(&b[k + 1..end]).ok();
        }
    }
    None
}

fn followed_by_colon(b: &[u8], mut i: usize) -> bool {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    b.get(i) == Some(&b':')
}

/// The nearest '{' before `k` that is not closed before `k`, skipping strings. Walking back is
/// string-aware by quote parity, which holds because `k` itself is outside any string.
fn enclosing_open_brace(b: &[u8], k: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut j = k;
    while j > 0 {
        j -= 1;
        let c = b[j];
        if c == b'"' && !is_escaped(b, j) {
            in_str = !in_str;
            continue;
        }
        if in_str {
            continue;
        }
        match c {
            b'}' => depth += 1,
            b'{' if depth == 0 => return Some(j),
            b'{' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn is_escaped(b: &[u8], j: usize) -> bool {
    let mut n = 0;
    let mut i = j;
    while i > 0 && b[i - 1] == b'\\' {
        n += 1;
        i -= 1;
    }
    n % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{extract_objects, Recovery};

    fn ids(v: &[Value]) -> Vec<&str> {
        v.iter().filter_map(|o| o["id"].as_str()).collect()
    }

    #[test]
    fn salvage_prefers_outer_object_over_nested_id() {
        let text = r#"[{"meta": {"id": "inner"}, "id": "outer", "x": 1}, {"id": "b", "x": 2"#;
        let (v, r) = extract_objects(text, &[], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["outer", "b"], Recovery::Salvaged));
    }

    #[test]
    fn salvage_skips_objects_nested_in_a_cut_off_item() {
        let text = r#"[{"id":"a","x":1}, {"refs": [{"id": "r1", "u": 2}], "x": 3"#;
        let (v, r) = extract_objects(text, &["tasks"], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["a"], Recovery::Salvaged));
    }

    #[test]
    fn salvage_sees_through_nested_and_unknown_wrappers() {
        let text = r#"{"result": {"tasks": [{"id": "a", "x": 1}, {"id": "b", "x": 2"#;
        let (v, _) = extract_objects(text, &["tasks"], "id").unwrap();
        assert_eq!(ids(&v), vec!["a", "b"]);
        let text = r#"{"plan": [{"id": "a", "x": 1}, {"id": "b", "x": 2"#;
        let (v, _) = extract_objects(text, &["tasks"], "id").unwrap();
        assert_eq!(ids(&v), vec!["a", "b"]);
    }

    #[test]
    fn salvage_treats_an_unclosed_predecessor_as_a_sibling() {
        // The model forgot t1's closing brace: t1 is lost, t2 is still an item.
        let text = "[{\"id\":\"t1\",\"m\":\"x\"\n {\"id\":\"t2\",\"m\":\"y\"}]";
        let (v, r) = extract_objects(text, &[], "id").unwrap();
        assert_eq!((ids(&v), r), (vec!["t2"], Recovery::Salvaged));
    }

    #[test]
    fn salvage_drops_objects_cut_inside_their_id() {
        let text = r#"[{"id":"t1","m":"x"}, {"id":"t"#;
        let (v, _) = extract_objects(text, &[], "id").unwrap();
        assert_eq!(ids(&v), vec!["t1"]);
    }
}
