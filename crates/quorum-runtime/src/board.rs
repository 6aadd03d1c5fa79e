//! The team blackboard as the runtime sees it: specialists publish short notes and read their
//! teammates' notes while they work (tools `team_bb_publish` / `team_bb_read`).
//!
//! The runtime only knows this trait. A single process uses [`MemoryBoard`]; a cluster node
//! adapts its replicated, grow-only blackboard to it. Notes are model output: when read back
//! they are delimited as untrusted data like any reviewed content.

use std::collections::HashMap;
use std::sync::Mutex;

/// One note on the board.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub author: String,
    pub topic: String,
    pub body: String,
}

pub trait TeamBoard: Send + Sync + std::fmt::Debug + 'static {
    /// Publish a note; returns its id.
    fn publish(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<String, String>;
    /// Notes of a flow (optionally one topic), oldest first.
    fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<Note>;
}

/// Flows an in-process board keeps notes for; past that the least recently used flow's notes
/// go (a review needs its notes only while it runs).
pub const MEMORY_BOARD_FLOWS: usize = 64;

/// An in-process board for reviews that run on one node, bounded to [`MEMORY_BOARD_FLOWS`] flows.
#[derive(Debug, Default)]
pub struct MemoryBoard {
    inner: Mutex<Flows>,
}

#[derive(Debug, Default)]
struct Flows {
    tick: u64,
    /// flow id -> (last used, notes oldest first).
    notes: HashMap<String, (u64, Vec<Note>)>,
}

impl MemoryBoard {
    /// Flows whose notes are held now.
    pub fn flows(&self) -> usize {
        self.inner.lock().map(|f| f.notes.len()).unwrap_or(0)
    }
}

impl TeamBoard for MemoryBoard {
    fn publish(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<String, String> {
        let mut f = self
            .inner
            .lock()
            .map_err(|_| "blackboard lock poisoned".to_string())?;
        f.tick += 1;
        let tick = f.tick;
        let entry = f.notes.entry(flow_id.to_string()).or_default();
        entry.0 = tick;
        entry.1.push(Note {
            author: author.to_string(),
            topic: topic.to_string(),
            body: body.to_string(),
        });
        let n = entry.1.len();
        while f.notes.len() > MEMORY_BOARD_FLOWS {
            let Some(lru) = f
                .notes
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            f.notes.remove(&lru);
        }
        Ok(format!("{flow_id}/local/{n}"))
    }

    fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<Note> {
        let Ok(mut f) = self.inner.lock() else {
            return Vec::new();
        };
        f.tick += 1;
        let tick = f.tick;
        match f.notes.get_mut(flow_id) {
            Some((used, notes)) => {
                *used = tick;
                notes
                    .iter()
                    .filter(|note| topic.is_none_or(|t| note.topic == t))
                    .cloned()
                    .collect()
            }
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_least_recently_used_flow_goes() {
        let b = MemoryBoard::default();
        b.publish("first", "a", "t", "kept: read below").unwrap();
        b.publish("second", "a", "t", "oldest unused").unwrap();
        for i in 0..MEMORY_BOARD_FLOWS - 2 {
            b.publish(&format!("f{i}"), "a", "t", "x").unwrap();
        }
        assert_eq!(b.flows(), MEMORY_BOARD_FLOWS);
        assert_eq!(b.read("first", None).len(), 1);
        b.publish("one-more", "a", "t", "y").unwrap();
        assert_eq!(b.flows(), MEMORY_BOARD_FLOWS);
        assert!(b.read("second", None).is_empty());
        assert_eq!(b.read("first", Some("t")).len(), 1);
        assert_eq!(b.read("one-more", None).len(), 1);
    }
}
