//! The team blackboard as the runtime sees it: specialists publish short notes and read their
//! teammates' notes while they work (tools `team_bb_publish` / `team_bb_read`).
//!
//! The runtime only knows this trait. A single process uses [`MemoryBoard`]; a cluster node
//! adapts its replicated, grow-only blackboard to it. Notes are model output: when read back
//! they are delimited as untrusted data like any reviewed content.

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

/// An in-process board for reviews that run on one node.
#[derive(Debug, Default)]
pub struct MemoryBoard {
    notes: Mutex<Vec<(String, Note)>>,
}

impl TeamBoard for MemoryBoard {
    fn publish(
        &self,
        flow_id: &str,
        author: &str,
        topic: &str,
        body: &str,
    ) -> Result<String, String> {
        let mut notes = self
            .notes
            .lock()
            .map_err(|_| "blackboard lock poisoned".to_string())?;
        notes.push((
            flow_id.to_string(),
            Note {
                author: author.to_string(),
                topic: topic.to_string(),
                body: body.to_string(),
            },
        ));
        Ok(format!("{flow_id}/local/{}", notes.len()))
    }

    fn read(&self, flow_id: &str, topic: Option<&str>) -> Vec<Note> {
        self.notes
            .lock()
            .map(|n| {
                n.iter()
                    .filter(|(f, note)| f == flow_id && topic.is_none_or(|t| note.topic == t))
                    .map(|(_, note)| note.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}
