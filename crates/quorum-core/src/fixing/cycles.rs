//! Circular fixes across self-improvement cycles: a finding whose fix a later cycle's change
//! undid (found again, quoting the same code, after it was fixed), and a file a later cycle
//! returns to the content an earlier cycle had left — kept changes that undo each other.
//!
//! Pure: the caller feeds it each cycle's kept fixes and asks about the next cycle's findings.
//! Rebuilt from the cycles' stored records on a resume, so it needs no store of its own.

use std::collections::BTreeMap;

/// A finding's identity across cycles: its file, its title and the first line of its evidence
/// (each review numbers afresh and lines move as fixes land, but a finding whose code is as it
/// was is quoted as it is). Two findings with one title in one file stay two.
pub type Identity = (String, String, String);

pub fn identity(file: &str, title: &str, evidence: &str) -> Identity {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = evidence
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    (
        file.to_string(),
        squash(title).to_lowercase(),
        squash(first),
    )
}

/// What the cycles so far fixed and left in each file they changed.
#[derive(Debug, Clone, Default)]
pub struct CrossCycle {
    /// Each fixed finding, with the cycle that kept its fix.
    fixed: BTreeMap<Identity, u32>,
    /// Each changed file's contents (digests) in order, with the cycle after which it held
    /// them (0: the target as it was).
    states: BTreeMap<String, Vec<(u32, blake3::Hash)>>,
}

/// A file back at an earlier cycle's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Returned {
    pub file: String,
    /// The cycle after which the file last held this content (0: the target).
    pub earlier: u32,
    pub cycle: u32,
}

impl Returned {
    pub fn describe(&self) -> String {
        let then = if self.earlier == 0 {
            "the target's own".to_string()
        } else {
            format!("its content after cycle {}", self.earlier)
        };
        format!(
            "{} is back to {then} after cycle {}: the fixes of cycles {}-{} undo each other",
            self.file,
            self.cycle,
            self.earlier + 1,
            self.cycle
        )
    }
}

fn digest(text: &str) -> blake3::Hash {
    blake3::hash(text.as_bytes())
}

impl CrossCycle {
    /// The cycle that fixed this finding before, if one did.
    pub fn fixed_in(&self, id: &Identity) -> Option<u32> {
        self.fixed.get(id).copied()
    }

    /// A fix kept in `cycle` for the finding `id`.
    pub fn kept(&mut self, cycle: u32, id: Identity) {
        self.fixed.entry(id).or_insert(cycle);
    }

    /// `file` changed in `cycle` from `before` (None: created) to `after`. Returns the earlier
    /// state it went back to, if it did (the state just before this cycle's does not count).
    pub fn changed(
        &mut self,
        cycle: u32,
        file: &str,
        before: Option<&str>,
        after: &str,
    ) -> Option<Returned> {
        let states = self.states.entry(file.to_string()).or_default();
        if states.is_empty() {
            // A created file's "before" is its absence, which no content equals.
            states.push((0, digest(before.unwrap_or("\u{0}absent"))));
        }
        let now = digest(after);
        // Every state before the one this cycle started from.
        let earlier = states
            .iter()
            .rev()
            .skip(1)
            .find(|(_, d)| *d == now)
            .map(|(c, _)| *c);
        states.push((cycle, now));
        earlier.map(|earlier| Returned {
            file: file.to_string(),
            earlier,
            cycle,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_fixed_once_is_known_in_later_cycles_by_its_quoted_line() {
        let mut x = CrossCycle::default();
        let hash = identity("app.py", "Weak hash", "  return hashlib.md5(data)\n");
        x.kept(1, hash.clone());
        assert_eq!(
            x.fixed_in(&identity(
                "app.py",
                "weak  HASH",
                "return hashlib.md5(data)"
            )),
            Some(1)
        );
        // The same title on other code is another finding.
        assert_eq!(
            x.fixed_in(&identity("app.py", "Weak hash", "return md5(x)")),
            None
        );
        x.kept(3, hash.clone());
        assert_eq!(x.fixed_in(&hash), Some(1), "the first cycle that fixed it");
    }

    #[test]
    fn a_file_back_at_an_earlier_content_is_reported_with_the_cycles() {
        let mut x = CrossCycle::default();
        assert_eq!(x.changed(1, "a.py", Some("A"), "B"), None);
        // B -> C -> B: back to cycle 1's content.
        assert_eq!(x.changed(2, "a.py", Some("B"), "C"), None);
        let r = x.changed(3, "a.py", Some("C"), "B").unwrap();
        assert_eq!((r.earlier, r.cycle), (1, 3));
        assert!(
            r.describe().contains("cycles 2-3 undo each other"),
            "{}",
            r.describe()
        );
        // Back to the target itself.
        let r = x.changed(4, "a.py", Some("B"), "A").unwrap();
        assert_eq!(r.earlier, 0);
        assert!(r.describe().contains("the target's own"));
        // Another file is its own history.
        assert_eq!(x.changed(4, "b.py", None, "new"), None);
    }
}
