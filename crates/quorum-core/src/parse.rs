//! Resilient extraction of JSON from model output: fences, prose, list markers, truncation.
//!
//! Models wrap JSON in prose, fence it, drop commas, stop mid-object. These functions recover as
//! much structured data as the text honestly contains, and say how they got it ([`Recovery`]), so
//! the report can count outputs that needed repair.
//!
//! The ladder, cheapest and most faithful first:
//! 1. the whole text (after dropping `<think>` blocks) is valid JSON: [`Recovery::Clean`];
//! 2. the first fenced block, or failing that the whole text, holds complete top-level JSON
//!    values among prose, possibly after small repairs (trailing commas, missing commas between
//!    values, raw newlines inside strings, `True`/`None`, `//` comments): [`Recovery::Extracted`];
//! 3. objects are recovered one at a time around their id key, closing a truncated last object:
//!    [`Recovery::Salvaged`]. Objects nested inside an item (a finding's `location`, its
//!    `references`) are never returned as items, and fragments with no content beyond a cut-off
//!    id are dropped rather than handed on as data.
//!
//! Reasoning is never mistaken for the answer: `<think>` blocks are removed, and a block the
//! model never closed (it ran out of tokens while thinking) is dropped to the end of the text,
//! so such output is [`ParseError::Empty`] even when its drafts contain JSON. Text that looks
//! like JSON but yields nothing is [`ParseError::Truncated`]; single-quoted pseudo-JSON lands
//! there too, deliberately unrepaired: telling a quote from an apostrophe needs guesses that
//! would corrupt as much as they recover.
//!
//! All scanning is byte-oriented on ASCII delimiters, so every slice boundary is a char boundary.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// How many cut points (commas) back from the end a truncated value is retried at. Each retry is
/// one parse of the tail, so this bounds the cost on long garbage.
const TRUNCATION_RETRIES: usize = 16;

/// Id keys one salvage looks around, and truncated tails it tries to close. Each costs a scan of
/// the text, so without these a long run of junk (`{"id": 1, {"id": 1, ...`) is quadratic or
/// worse — a hang on one bad answer. Far above any real answer: a plan has at most a few dozen
/// tasks, and a text is cut once, at its end.
const SALVAGE_MAX_KEYS: usize = 1000;
const SALVAGE_MAX_TRUNCATED: usize = 4;

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

/// A 0..=1 score from what models write: `0.8`, `"0.8"`, `80`, `"80%"`, `"high"`.
///
/// Numbers above 1 and up to 100 are read as percentages; the result is clamped to 0..=1.
pub fn lenient_f64(v: &Value) -> Option<f64> {
    let x = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => {
            let t = s.trim().to_ascii_lowercase();
            match t.as_str() {
                "very high" | "certain" => return Some(0.95),
                "high" => return Some(0.85),
                "moderate" | "medium" => return Some(0.6),
                "low" => return Some(0.3),
                "very low" => return Some(0.15),
                _ => {}
            }
            if let Some(p) = t.strip_suffix('%') {
                let p: f64 = p.trim().parse().ok()?;
                return p.is_finite().then(|| (p / 100.0).clamp(0.0, 1.0));
            }
            t.parse().ok()?
        }
        _ => return None,
    };
    if !x.is_finite() {
        return None;
    }
    let x = if x > 1.0 && x <= 100.0 { x / 100.0 } else { x };
    Some(x.clamp(0.0, 1.0))
}

/// A line number from what models write: `12`, `"12"`, `"L12"`, `"12-14"` (the start),
/// `"line 12"`, `[12, 14]` (the first).
pub fn lenient_u32(v: &Value) -> Option<u32> {
    match v {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u32::try_from(u).ok()
            } else {
                let f = n.as_f64()?;
                (f.is_finite() && f >= 0.0 && f <= f64::from(u32::MAX)).then_some(f as u32)
            }
        }
        Value::String(s) => {
            let digits: String = s
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().ok()
        }
        Value::Array(a) => a.first().and_then(lenient_u32),
        _ => None,
    }
}

/// A text field from what models write: strings as they are, numbers and booleans rendered;
/// null, empty or whitespace-only strings, arrays and objects give `None`.
pub fn lenient_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Ladder drivers

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

// ---------------------------------------------------------------------------------------------
// Interpreting values

fn objects_of(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().filter(Value::is_object).collect()
}

/// The list an object wraps, if it is a wrapper rather than an item: whatever objects sit under a
/// preferred key (possibly none: `{"findings": []}`); else, for objects without the id key, the
/// first non-empty array of objects; else the inside of a single-key object such as
/// `{"result": {"tasks": [...]}}`.
fn select_list(
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
fn interpret_top_level(text: &str, array_keys: &[&str], id_key: &str) -> Option<Vec<Value>> {
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

// ---------------------------------------------------------------------------------------------
// Salvage

/// Recover objects one at a time around `"id_key":` occurrences; with none, every top-level
/// `{...}` instead. Objects nested inside a recovered
/// object are never returned on their own.
fn salvage_objects(text: &str, array_keys: &[&str], id_key: &str) -> Vec<Value> {
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
fn scan_objects(text: &str) -> Vec<Value> {
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

// ---------------------------------------------------------------------------------------------
// Scanning

/// Complete JSON values found at the top level of a text, in order, up to the first one that
/// looks like JSON but is damaged (`broken`).
struct TopLevel {
    values: Vec<Value>,
    broken: bool,
}

fn top_level_values(text: &str) -> TopLevel {
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

/// Whether the bracket at `i` plausibly opens JSON rather than prose ("[as requested]",
/// "{file}"): an object must open with a key (or close at once), an array with a value that can
/// hold objects.
fn json_ish(b: &[u8], i: usize) -> bool {
    let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
    matches!(
        (b[i], next),
        (b'{', Some(b'"' | b'\'' | b'}')) | (b'[', Some(b'{' | b'[' | b'"' | b']'))
    )
}

enum Balance {
    /// Exclusive end of the matching closer.
    Closed(usize),
    /// The text ended first (truncated).
    Open,
    /// A closer of the wrong kind at this index.
    Mismatch(usize),
}

/// Byte-level JSON string tracking for bracket scans: brackets inside strings do not count.
#[derive(Default)]
struct StrScan {
    in_str: bool,
    esc: bool,
}

impl StrScan {
    /// Feed one byte; true when it is part of a string literal (including its closing quote),
    /// false for structural bytes. An opening quote returns true and enters the string.
    fn inside(&mut self, c: u8) -> bool {
        if self.in_str {
            if self.esc {
                self.esc = false;
            } else if c == b'\\' {
                self.esc = true;
            } else if c == b'"' {
                self.in_str = false;
            }
            return true;
        }
        if c == b'"' {
            self.in_str = true;
            return true;
        }
        false
    }
}

fn balanced_end(b: &[u8], start: usize) -> Balance {
    let mut stack: Vec<u8> = Vec::new();
    let mut strings = StrScan::default();
    for (i, &c) in b.iter().enumerate().skip(start) {
        if strings.inside(c) {
            continue;
        }
        match c {
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                if stack.pop() != Some(c) {
                    return Balance::Mismatch(i);
                }
                if stack.is_empty() {
                    return Balance::Closed(i + 1);
                }
            }
            _ => {}
        }
    }
    Balance::Open
}

// ---------------------------------------------------------------------------------------------
// Repairs

fn parse_lenient(s: &str) -> Option<Value> {
    serde_json::from_str(s)
        .ok()
        .or_else(|| serde_json::from_str(&repair(s)).ok())
}

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    None,
    Open,
    Close,
    StrEnd,
    Literal,
    Punct,
}

/// Fix the damage that is unambiguous once strings are known: trailing commas, missing commas
/// between values, raw control characters inside strings, Python literals, `//` comments. Each
/// rewrite only touches text that is invalid JSON, so valid input passes through unchanged.
fn repair(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut in_str = false;
    let mut esc = false;
    let mut last = Tok::None;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if in_str {
            if esc {
                esc = false;
                out.push(c);
                continue;
            }
            match c {
                '\\' => {
                    esc = true;
                    out.push(c);
                }
                '"' => {
                    in_str = false;
                    last = Tok::StrEnd;
                    out.push(c);
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                if matches!(last, Tok::Close | Tok::StrEnd | Tok::Literal) {
                    out.push(',');
                }
                in_str = true;
                out.push(c);
            }
            '{' | '[' => {
                if last == Tok::Close {
                    out.push(',');
                }
                last = Tok::Open;
                out.push(c);
            }
            '}' | ']' => {
                let kept = out.trim_end().len();
                if out[..kept].ends_with(',') {
                    out.truncate(kept - 1);
                }
                last = Tok::Close;
                out.push(c);
            }
            '/' if s[i + 1..].starts_with('/') => {
                while chars.peek().is_some_and(|(_, n)| *n != '\n') {
                    chars.next();
                }
            }
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.' | '_') => {
                let mut word = String::from(c);
                while let Some(&(_, n)) = chars.peek() {
                    if n.is_ascii_alphanumeric() || matches!(n, '-' | '+' | '.' | '_') {
                        word.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push_str(match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    w => w,
                });
                last = Tok::Literal;
            }
            c if c.is_whitespace() => out.push(c),
            c => {
                last = Tok::Punct;
                out.push(c);
            }
        }
    }
    out
}

/// Parse a value whose text ended early: close the open string and containers; failing that,
/// cut back to each of the last few commas (dropping the partial member) and close there.
fn parse_truncated(s: &str) -> Option<Value> {
    // Whitespace the model emitted just before stopping carries nothing, even inside a string.
    let s = s.trim_end();
    let b = s.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut strings = StrScan::default();
    // Indices of the last few commas. Their closers are computed only when tried: building them
    // at every comma costs the nesting depth each time, cubic over a salvage of deep junk.
    let mut cuts: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    for (i, &c) in b.iter().enumerate() {
        if strings.inside(c) {
            continue;
        }
        match c {
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if cuts.len() == TRUNCATION_RETRIES {
                    cuts.pop_front();
                }
                cuts.push_back(i);
            }
            _ => {}
        }
    }
    let mut whole = s.to_string();
    if strings.in_str {
        if strings.esc {
            whole.pop();
        }
        whole.push('"');
    }
    let kept = whole.trim_end().len();
    whole.truncate(kept);
    if whole.ends_with(',') {
        whole.pop();
    } else if whole.ends_with(':') {
        whole.push_str("null");
    }
    whole.push_str(&closers(&stack));
    if let Some(v) = parse_lenient(&whole) {
        return Some(v);
    }
    cuts.iter().rev().find_map(|&at| {
        let mut cut = s[..at].to_string();
        cut.push_str(&closers(&open_stack(&b[..at])));
        parse_lenient(&cut)
    })
}

/// The closers still owed at the end of `b` (string-aware, as in [`parse_truncated`]).
fn open_stack(b: &[u8]) -> Vec<u8> {
    let mut stack = Vec::new();
    let mut strings = StrScan::default();
    for &c in b {
        if strings.inside(c) {
            continue;
        }
        match c {
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack
}

fn closers(stack: &[u8]) -> String {
    stack.iter().rev().map(|&c| c as char).collect()
}

// ---------------------------------------------------------------------------------------------
// Text clean-up

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
    fn repair_fixes_commas_newlines_and_python_literals() {
        let broken = "{\"a\": [1, 2,], \"b\": \"x\ny\" \"c\": True, // note\n \"d\": None}";
        let v: Value = serde_json::from_str(&repair(broken)).unwrap();
        assert_eq!(v, json!({"a": [1, 2], "b": "x\ny", "c": true, "d": null}));
        let v: Value = serde_json::from_str(&repair(r#"[{"a":1} {"a":2}]"#)).unwrap();
        assert_eq!(v, json!([{"a": 1}, {"a": 2}]));
        // Valid JSON is untouched, including look-alikes inside strings.
        let valid = r#"{"s": "} {  True // x ,]"}"#;
        assert_eq!(repair(valid), valid);
    }

    #[test]
    fn truncated_values_are_closed_or_cut() {
        assert_eq!(
            parse_truncated(r#"{"id":"t2","files":["src/a"#),
            Some(json!({"id":"t2","files":["src/a"]}))
        );
        assert_eq!(
            parse_truncated(r#"{"id":"t2","mand"#),
            Some(json!({"id":"t2"}))
        );
        assert_eq!(
            parse_truncated(r#"{"id":"t2","x":"#),
            Some(json!({"id":"t2","x":null}))
        );
        assert_eq!(
            parse_truncated(r#"{"id":"t2","c": tru"#),
            Some(json!({"id":"t2"}))
        );
        assert_eq!(parse_truncated(r#"{"id":"a\"#), Some(json!({"id":"a"})));
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
    fn lenient_numbers() {
        assert_eq!(lenient_f64(&json!(0.7)), Some(0.7));
        assert_eq!(lenient_f64(&json!("0.7")), Some(0.7));
        assert_eq!(lenient_f64(&json!(80)), Some(0.8));
        assert_eq!(lenient_f64(&json!("80%")), Some(0.8));
        assert_eq!(lenient_f64(&json!(" 5 % ")), Some(0.05));
        assert_eq!(lenient_f64(&json!("High")), Some(0.85));
        assert_eq!(lenient_f64(&json!("medium")), Some(0.6));
        assert_eq!(lenient_f64(&json!("moderate")), Some(0.6));
        assert_eq!(lenient_f64(&json!("low")), Some(0.3));
        assert_eq!(lenient_f64(&json!(1)), Some(1.0));
        assert_eq!(lenient_f64(&json!(250)), Some(1.0));
        assert_eq!(lenient_f64(&json!(-0.2)), Some(0.0));
        assert_eq!(lenient_f64(&json!("sure")), None);
        assert_eq!(lenient_f64(&json!(null)), None);

        assert_eq!(lenient_u32(&json!(12)), Some(12));
        assert_eq!(lenient_u32(&json!(12.0)), Some(12));
        assert_eq!(lenient_u32(&json!("12")), Some(12));
        assert_eq!(lenient_u32(&json!("L12")), Some(12));
        assert_eq!(lenient_u32(&json!("12-14")), Some(12));
        assert_eq!(lenient_u32(&json!("line 40")), Some(40));
        assert_eq!(lenient_u32(&json!([3, 9])), Some(3));
        assert_eq!(lenient_u32(&json!(-3)), None);
        assert_eq!(lenient_u32(&json!("n/a")), None);
        assert_eq!(lenient_u32(&json!(99_999_999_999u64)), None);

        assert_eq!(lenient_string(&json!("x")), Some("x".into()));
        assert_eq!(lenient_string(&json!(3)), Some("3".into()));
        assert_eq!(lenient_string(&json!(true)), Some("true".into()));
        assert_eq!(lenient_string(&json!("  ")), None);
        assert_eq!(lenient_string(&json!(null)), None);
        assert_eq!(lenient_string(&json!(["a"])), None);
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
