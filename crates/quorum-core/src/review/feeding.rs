//! The code that feeds a cited line: its enclosing unit (the function or method it is in, with
//! the decorators that route a request to it), so a verifier asked "does a value from the
//! request reach this line?" sees where the values come from, not only the line.
//!
//! Indentation-based and language-agnostic: the nearest line above that is less indented and
//! opens a unit (`def`, `async def`, `class`, `fn`, `func`, `function`), its decorators (`@`)
//! above it, down to the cited lines and a few after, within a bound.

use crate::pack::ContextPack;

/// The most lines the unit above a cited line may span before the search gives up.
pub const MAX_UNIT_LINES: u32 = 60;

/// Lines after the cited range that are shown too.
const AFTER: u32 = 3;

/// Lines above the cited range shown when no enclosing unit is found.
const FALLBACK_ABOVE: u32 = 12;

fn indent(line: &str) -> usize {
    line.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

fn opens_unit(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("pub ").unwrap_or(t);
    [
        "def ",
        "async def ",
        "class ",
        "fn ",
        "async fn ",
        "func ",
        "function ",
        "async function ",
    ]
    .iter()
    .any(|k| t.starts_with(k))
}

/// The line range (1-based, inclusive) of the code feeding lines `start..=end` of `file`: from
/// the enclosing unit's first decorator or header to a few lines past `end`, at most
/// [`MAX_UNIT_LINES`] above `start`. `None` when the file is not in the pack.
pub fn feeding_range(pack: &ContextPack, file: &str, start: u32, end: u32) -> Option<(u32, u32)> {
    let f = pack.get(file)?;
    let lines: Vec<&str> = f.content.lines().collect();
    let count = lines.len() as u32;
    if count == 0 {
        return None;
    }
    let start = start.clamp(1, count);
    let end = end.clamp(start, count);
    let cited_indent = indent(lines[start as usize - 1]);
    let floor = start.saturating_sub(MAX_UNIT_LINES).max(1);
    let mut header = None;
    let mut n = start;
    while n >= floor {
        let line = lines[n as usize - 1];
        if !line.trim().is_empty()
            && opens_unit(line)
            && (indent(line) < cited_indent || n == start)
        {
            header = Some(n);
            break;
        }
        if n == 1 {
            break;
        }
        n -= 1;
    }
    let from = match header {
        Some(mut h) => {
            while h > 1 && lines[h as usize - 2].trim_start().starts_with('@') {
                h -= 1;
            }
            h
        }
        None => start.saturating_sub(FALLBACK_ABOVE).max(1),
    };
    Some((from, (end + AFTER).min(count)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::testing::mem as pack_of;

    /// A request handler that builds SQL from a form field (shared with the runtime's
    /// verifier test).
    const HANDLER: &str = include_str!("../../../../tests/fixtures/snippets/flask_sql_handler.py");

    #[test]
    fn the_unit_and_its_decorator_feed_the_line() {
        let p = pack_of(&[("h.py", HANDLER)]);
        // Line 9 executes the SQL built on line 8 from the request read on line 6.
        assert_eq!(feeding_range(&p, "h.py", 9, 9), Some((4, 12)));
    }

    #[test]
    fn a_line_outside_any_unit_gets_the_lines_above() {
        let text: String = (1..=30).map(|i| format!("x{i} = {i}\n")).collect();
        let p = pack_of(&[("m.py", &text)]);
        assert_eq!(feeding_range(&p, "m.py", 20, 20), Some((8, 23)));
        assert_eq!(feeding_range(&p, "m.py", 2, 2), Some((1, 5)));
        assert_eq!(feeding_range(&p, "missing.py", 2, 2), None);
    }
}
