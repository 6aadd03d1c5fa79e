//! What a fix run has decided so far, as the fix report will tell it: per finding its status
//! and every attempt with what the oracles said, the kept fixes in the order they were kept,
//! and why the run stopped. Fed by the fix loop's commands, live or replayed from the journal.

use crate::job::KeptFix;
use crate::worktree::FileChange;
use quorum_core::fixing::fix_loop::{EditOutcome, FailureClass, Oracles, StopReason, Unfixed};
use quorum_core::fixing::fix_report::{AttemptEntry, FixEntry, FixStatus};
use quorum_core::fixing::select::FixTarget;
use std::collections::BTreeMap;

/// The state of a run as its commands are carried out (live or replayed).
pub(crate) struct Ledger {
    pub(crate) entries: BTreeMap<String, FixEntry>,
    pub(crate) kept: Vec<KeptFix>,
    pub(crate) last_oracles: BTreeMap<String, Oracles>,
    /// The last attempt's agent, by finding, for the report.
    pub(crate) last_agent: BTreeMap<String, AgentNote>,
    pub(crate) stop: StopReason,
}

/// What the report says of an attempt's agent: its tool calls, the start of its final answer,
/// the node it ran on and the node whose tests judged it (None: this machine).
#[derive(Default)]
pub(crate) struct AgentNote {
    pub(crate) calls: Vec<String>,
    pub(crate) said: String,
    pub(crate) node: Option<String>,
    pub(crate) tested_on: Option<String>,
    /// The other fixes its tests ran together with (one test run for a batch).
    pub(crate) tested_with: Vec<String>,
}

impl Ledger {
    pub(crate) fn new(targets: &[FixTarget]) -> Ledger {
        Ledger {
            entries: targets
                .iter()
                .map(|t| {
                    (
                        t.finding.id.clone(),
                        unfixed(
                            &t.finding.id,
                            &t.finding.title,
                            t.finding.file.as_deref().unwrap_or_default(),
                        ),
                    )
                })
                .collect(),
            kept: Vec::new(),
            last_oracles: BTreeMap::new(),
            last_agent: BTreeMap::new(),
            stop: StopReason::Settled,
        }
    }

    /// The last attempt's oracles for `finding` (none recorded: no change).
    fn take_oracles(&mut self, finding: &str) -> Oracles {
        self.last_oracles.remove(finding).unwrap_or(Oracles {
            edit: EditOutcome::NoChange,
            tests: None,
            analyzer: None,
            verifier: None,
        })
    }

    pub(crate) fn entry(&mut self, finding: &str) -> &mut FixEntry {
        self.entries
            .entry(finding.to_string())
            .or_insert_with(|| unfixed(finding, "", ""))
    }

    pub(crate) fn kept(
        &mut self,
        finding: String,
        attempt: u32,
        changes: Vec<FileChange>,
    ) -> String {
        let oracles = self.take_oracles(&finding);
        let note = self.last_agent.remove(&finding).unwrap_or_default();
        let entry = self.entry(&finding);
        entry.status = FixStatus::Kept;
        entry.files = changes.iter().map(|c| c.path.clone()).collect();
        let on = note
            .node
            .as_deref()
            .map(|n| format!(", made on {n}"))
            .unwrap_or_default();
        entry.attempts.push(AttemptEntry {
            attempt,
            oracles,
            kept: true,
            failure: None,
            reason: String::new(),
            tool_calls: note.calls,
            fixer_said: note.said,
            node: note.node,
            tested_on: note.tested_on,
            tested_with: note.tested_with,
        });
        let line = format!("{finding}: kept ({}{on})", entry.files.join(", "));
        let (title, oracles) = (entry.title.clone(), entry.passed_oracles());
        self.kept.push(KeptFix {
            finding_id: finding,
            title,
            changes,
            oracles,
        });
        line
    }

    pub(crate) fn discarded(
        &mut self,
        finding: &str,
        attempt: u32,
        class: FailureClass,
        reason: String,
    ) -> String {
        let oracles = self.take_oracles(finding);
        let line = format!("{finding}: attempt {attempt} discarded ({})", class.kind);
        let note = self.last_agent.remove(finding).unwrap_or_default();
        self.entry(finding).attempts.push(AttemptEntry {
            attempt,
            oracles,
            kept: false,
            failure: Some(class),
            reason,
            tool_calls: note.calls,
            fixer_said: note.said,
            node: note.node,
            tested_on: note.tested_on,
            tested_with: note.tested_with,
        });
        line
    }

    pub(crate) fn given_up(&mut self, finding: &str, why: Unfixed) -> String {
        self.entry(finding).unfixed_because = Some(why);
        format!(
            "{finding}: left unfixed ({})",
            match why {
                Unfixed::CircularFix => "circular fix: the same failure three times",
                Unfixed::Oscillating => "oscillating",
                Unfixed::Backstop => "the attempt backstop was reached",
                Unfixed::Conflicting => {
                    "conflicting: its change clashed with fixes kept meanwhile, and again once rebased"
                }
            }
        )
    }
}

/// A finding's entry before any attempt.
fn unfixed(id: &str, title: &str, file: &str) -> FixEntry {
    FixEntry {
        finding_id: id.to_string(),
        title: title.to_string(),
        file: file.to_string(),
        status: FixStatus::Unfixed,
        cycle: None,
        unfixed_because: None,
        fixed_in_cycle: None,
        commit: None,
        files: Vec::new(),
        attempts: Vec::new(),
    }
}
