//! Numbers written for a person: a duration in the largest unit that reads well, and digit
//! groups. Shared by the report's Markdown and `quorum pack`'s listing, so both say "1,234".

/// "999 ms", "1.5 s", "1 min 01 s", "2 h 01 min".
pub fn human_duration(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    if ms < 60_000 {
        return format!("{:.1} s", ms as f64 / 1_000.0);
    }
    let secs = ms / 1_000;
    if secs < 3_600 {
        return format!("{} min {:02} s", secs / 60, secs % 60);
    }
    format!("{} h {:02} min", secs / 3_600, (secs % 3_600) / 60)
}

/// "12,345,678": thousands separated by commas.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let head = digits.len() % 3;
    let mut groups: Vec<&str> = Vec::new();
    if head > 0 {
        groups.push(&digits[..head]);
    }
    let mut at = head;
    while at < digits.len() {
        groups.push(&digits[at..at + 3]);
        at += 3;
    }
    groups.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_numbers_are_human_readable() {
        assert_eq!(human_duration(0), "0 ms");
        assert_eq!(human_duration(999), "999 ms");
        assert_eq!(human_duration(1_500), "1.5 s");
        assert_eq!(human_duration(61_000), "1 min 01 s");
        assert_eq!(human_duration(7_260_000), "2 h 01 min");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
