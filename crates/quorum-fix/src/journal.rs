//! The fix run's facts (and, with the same file discipline, a build run's), one JSON object per line, each written and synced before the run acts
//! on it: what the run was started with, every event fed to the fix loop (an attempt's result
//! with the changes it made), and the finish. A killed run is resumed by replaying them: kept fixes are never
//! redone, and only the attempt in flight at the kill is asked again.

use crate::worktree::FileChange;
use quorum_core::fixing::fix_loop::Event;
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The journal's file name in the run's output directory.
pub const JOURNAL_FILE: &str = "fix-journal.jsonl";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredChange {
    pub path: String,
    pub before: Option<String>,
    pub after: String,
}

impl From<&FileChange> for StoredChange {
    fn from(c: &FileChange) -> Self {
        StoredChange {
            path: c.path.clone(),
            before: c.before.clone(),
            after: c.after.clone(),
        }
    }
}

impl From<&StoredChange> for FileChange {
    fn from(c: &StoredChange) -> Self {
        FileChange {
            path: c.path.clone(),
            before: c.before.clone(),
            after: c.after.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// The run's identity and inputs, first in every journal.
    Started {
        fix_id: String,
        target: String,
        source_report: String,
        findings: Vec<String>,
        /// A digest of the snapshot the worktree was made from.
        base: String,
    },
    /// An event, recorded before the fix loop steps on it; an attempt's result carries the
    /// changes it made, so a fix the loop keeps can be re-applied on a resume.
    Event {
        event: Event,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<StoredChange>,
    },
    Finished,
}

/// An append-only journal file.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

impl Journal {
    /// Open (creating) the journal at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one fact and sync it to the disk.
    pub fn append(&mut self, fact: &Fact) -> std::io::Result<()> {
        self.append_record(fact)
    }

    /// Append one record of any journal kind (a build run's facts, too) and sync it.
    pub fn append_record<T: Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_string(record).map_err(std::io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()
    }

    /// Every fact of the journal at `path`. A last line cut off by a kill is ignored; any
    /// other unreadable line is an error naming it.
    pub fn read(path: &Path) -> Result<Vec<Fact>, String> {
        Self::read_records(path)
    }

    /// Every record of the journal at `path`, read as `T`, with [`Journal::read`]'s rules.
    pub fn read_records<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut facts = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<T>(line) {
                Ok(f) => facts.push(f),
                Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
                Err(e) => return Err(format!("{} line {}: {e}", path.display(), i + 1)),
            }
        }
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_ignored_and_the_rest_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        let mut j = Journal::open(&path).unwrap();
        let started = Fact::Started {
            fix_id: "fix-1".into(),
            target: "/t".into(),
            source_report: "r.json".into(),
            findings: vec!["F001".into()],
            base: "b".into(),
        };
        j.append(&started).unwrap();
        j.append(&Fact::Event {
            event: Event::Baseline { tests: None },
            changes: vec![],
        })
        .unwrap();
        drop(j);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"fact\": \"event\", \"even").unwrap();
        let facts = Journal::read(&path).unwrap();
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[0], started);
        std::fs::write(&path, "garbage\n{}\n").unwrap();
        assert!(Journal::read(&path).unwrap_err().contains("line 1"));
    }
}
