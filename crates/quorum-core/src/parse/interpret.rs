//! What the JSON in a text holds: its complete top-level values, and the list of objects they
//! give — the array under one of the expected keys, a top-level array, or an object that is
//! itself the item.

use super::repair::parse_lenient;
use super::scan::{balanced_end, json_ish, Balance};
use serde_json::{Map, Value};

/// Complete JSON values found at the top level of a text, in order, up to the first one that
/// looks like JSON but is damaged (`broken`).
pub(crate) struct TopLevel {
    pub(crate) values: Vec<Value>,
    pub(crate) broken: bool,
}

pub(crate) fn top_level_values(text: &str) -> TopLevel {
    let b = text.as_bytes();
    let mut values = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !matches!(b[i], b'{' | b'[') || !json_ish(b, i) {
            i += 1;
            continue;
        }
        match balanced_end(b, i) {
            Balance::Closed(end) => match parse_lenient(&text[i..end]) {
                Some(v) => {
                    values.push(v);
                    i = end;
                }
                None => {
                    return TopLevel {
                        values,
                        broken: true,
                    }
                }
            },
            Balance::Open | Balance::Mismatch(_) => {
                return TopLevel {
                    values,
                    broken: true,
                }
            }
        }
    }
    TopLevel {
        values,
        broken: false,
    }
}

pub(crate) fn objects_of(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().filter(Value::is_object).collect()
}

/// The list an object wraps, if it is a wrapper rather than an item: whatever objects sit under a
/// preferred key (possibly none: `{"findings": []}`); else, for objects without the id key, the
/// first non-empty array of objects; else the inside of a single-key object such as
/// `{"result": {"tasks": [...]}}`.
pub(crate) fn select_list(
    obj: &Map<String, Value>,
    array_keys: &[&str],
    id_key: &str,
    depth: usize,
) -> Option<Vec<Value>> {
    for k in array_keys {
        match obj.get(*k) {
            Some(Value::Array(items)) => return Some(objects_of(items.clone())),
            // `{"tasks": null}` or a wrapper cut right after its key: a wrapper holding nothing.
            Some(_) => return Some(Vec::new()),
            None => {}
        }
    }
    if !id_key.is_empty() && obj.contains_key(id_key) {
        return None;
    }
    for v in obj.values() {
        if let Value::Array(items) = v {
            if !items.is_empty() && items.iter().all(Value::is_object) {
                return Some(items.clone());
            }
        }
    }
    if depth < 2 && obj.len() == 1 {
        if let Some(Value::Object(inner)) = obj.values().next() {
            return select_list(inner, array_keys, id_key, depth + 1);
        }
    }
    None
}

/// Step 2 of the ladder on one candidate text. The first array of objects or wrapper object
/// found at top level is the answer; otherwise consecutive item objects are collected. Any
/// JSON-looking value that does not parse sends the text to salvage instead, so a damaged
/// answer is never reported as merely extracted.
pub(crate) fn interpret_top_level(
    text: &str,
    array_keys: &[&str],
    id_key: &str,
) -> Option<Vec<Value>> {
    let top = top_level_values(text);
    let mut items = Vec::new();
    let mut saw_empty_array = false;
    for v in top.values {
        match v {
            Value::Array(arr) => {
                if arr.is_empty() {
                    saw_empty_array = true;
                    continue;
                }
                let objs = objects_of(arr);
                if objs.is_empty() {
                    continue;
                }
                if items.is_empty() {
                    return Some(objs);
                }
                items.extend(objs);
            }
            Value::Object(obj) => match select_list(&obj, array_keys, id_key, 0) {
                Some(list) if items.is_empty() => return Some(list),
                Some(list) => items.extend(list),
                None => items.push(Value::Object(obj)),
            },
            _ => {}
        }
    }
    if top.broken {
        return None;
    }
    if !items.is_empty() {
        return Some(items);
    }
    saw_empty_array.then(Vec::new)
}
