//! Byte-level scanning of JSON-ish text: whether a bracket plausibly opens JSON rather than
//! prose, where a balanced value ends (brackets inside strings do not count), and string
//! tracking for every other scan.

/// Whether the bracket at `i` plausibly opens JSON rather than prose ("[as requested]",
/// "{file}"): an object must open with a key (or close at once), an array with a value that can
/// hold objects.
pub(crate) fn json_ish(b: &[u8], i: usize) -> bool {
    let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
    matches!(
        (b[i], next),
        (b'{', Some(b'"' | b'\'' | b'}')) | (b'[', Some(b'{' | b'[' | b'"' | b']'))
    )
}

pub(crate) enum Balance {
    /// Exclusive end of the matching closer.
    Closed(usize),
    /// The text ended first (truncated).
    Open,
    /// A closer of the wrong kind at this index.
    Mismatch(usize),
}

/// Byte-level JSON string tracking for bracket scans: brackets inside strings do not count.
#[derive(Default)]
pub(crate) struct StrScan {
    pub(crate) in_str: bool,
    pub(crate) esc: bool,
}

impl StrScan {
    /// Feed one byte; true when it is part of a string literal (including its closing quote),
    /// false for structural bytes. An opening quote returns true and enters the string.
    pub(crate) fn inside(&mut self, c: u8) -> bool {
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

pub(crate) fn balanced_end(b: &[u8], start: usize) -> Balance {
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
