//! Markdown text that model output cannot break: table cells, fenced blocks longer than any
//! backtick run inside, locations, lists and severity words.

use crate::report::common::{code, longest_backtick_run, one_line};
use crate::review::finding::Severity;

/// A table cell: one line, with '|' escaped so it cannot end the cell.
pub(crate) fn cell(s: &str) -> String {
    let t = one_line(s).replace('|', "\\|");
    if t.is_empty() {
        "—".to_string()
    } else {
        t
    }
}

/// A fenced block whose fence is longer than any backtick run in the content.
pub(crate) fn fenced(s: &str) -> String {
    let fence = "`".repeat((longest_backtick_run(s) + 1).max(3));
    let body = s.trim_end_matches(['\n', '\r']);
    format!("{fence}\n{body}\n{fence}\n")
}

/// `file:start-end`, `file:line`, `file`, with the symbol after it; "not located" when neither.
pub(crate) fn location_text(
    file: Option<&str>,
    start: Option<u32>,
    end: Option<u32>,
    symbol: Option<&str>,
) -> String {
    let file = file.map(str::trim).filter(|f| !f.is_empty());
    let symbol = symbol.map(str::trim).filter(|s| !s.is_empty());
    let mut parts = Vec::new();
    if let Some(file) = file {
        let range = match (start, end) {
            (Some(s), Some(e)) if e > s => format!(":{s}-{e}"),
            (Some(s), _) => format!(":{s}"),
            (None, Some(e)) => format!(":{e}"),
            (None, None) => String::new(),
        };
        parts.push(code(&format!("{file}{range}")));
    }
    if let Some(sym) = symbol {
        parts.push(format!("symbol {}", code(sym)));
    }
    if parts.is_empty() {
        "not located".to_string()
    } else {
        parts.join(" · ")
    }
}

pub(crate) fn list_or_dash(items: &[String]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|s| one_line(s))
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        "—".to_string()
    } else {
        items.join(", ")
    }
}

pub(crate) fn severity_word(sev: Severity) -> &'static str {
    match sev {
        Severity::P0 => "critical",
        Severity::P1 => "high",
        Severity::P2 => "medium",
        Severity::P3 => "low",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_inline_code_survives_backticks() {
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x"), "`` `x ``");
        assert_eq!(fenced("plain"), "```\nplain\n```\n");
    }
}
