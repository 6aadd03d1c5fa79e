//! Near-JSON read as JSON: small repairs (trailing and missing commas, raw newlines inside
//! strings, `True`/`None`, `//` comments) and a truncated value closed, or cut back to its last
//! complete part.

use super::scan::StrScan;
use serde_json::Value;

/// How many cut points (commas) back from the end a truncated value is retried at. Each retry is
/// one parse of the tail, so this bounds the cost on long garbage.
const TRUNCATION_RETRIES: usize = 16;

pub(crate) fn parse_lenient(s: &str) -> Option<Value> {
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
pub(crate) fn repair(s: &str) -> String {
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
pub(crate) fn parse_truncated(s: &str) -> Option<Value> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
