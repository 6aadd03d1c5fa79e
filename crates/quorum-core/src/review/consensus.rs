//! The vote of a flow's self-consistency passes: a finding one pass reported stands only if
//! enough passes of the same task found it too.
//!
//! Two findings of passes of one task share an anchor when they name the same file and their
//! lines overlap, give or take [`SLACK`] lines (a small model cites the same defect a line or
//! two apart from pass to pass); findings without lines share one when their titles match.
//! Each anchor's votes are the distinct passes that found it. An anchor with at least the
//! task's `min_votes` keeps one finding (the earliest pass's, so the result does not depend on
//! which pass answered first) and the others are duplicates of it; an anchor with fewer is
//! outvoted, every one of its findings dropped with the count in its reason. Findings of tasks
//! without passes are kept as they are.
//!
//! Only what grounding keeps should vote: the caller passes each finding's lines after
//! grounding, or `None` for one grounding will drop (it neither votes nor is outvoted).

use crate::task::Pass;
use std::collections::BTreeMap;

/// How many lines apart two citations of one defect may be.
pub const SLACK: u32 = 2;

/// How a dropped finding's reason begins when too few passes found it.
pub const OUTVOTED_REASON: &str = "found by too few consistency passes: ";

/// One finding as the vote sees it.
#[derive(Debug, Clone)]
pub struct Ballot<'a> {
    /// The pass of the task that reported it, if its task has passes.
    pub pass: Option<&'a Pass>,
    pub file: Option<&'a str>,
    pub title: &'a str,
    /// Its lines after grounding; `None` when grounding will drop it.
    pub lines: Option<(u32, u32)>,
}

/// What the vote makes of one finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Kept: not from a pass, not placed by grounding, or its anchor's chosen finding.
    Keep,
    /// Another pass's report of a kept anchor: left out, the kept one stands for it.
    Duplicate,
    /// Its anchor has too few votes: dropped, saying so.
    Outvoted { reason: String },
}

/// The vote over `ballots` (in report order); one decision each, in the same order.
pub fn vote(ballots: &[Ballot<'_>]) -> Vec<Decision> {
    let mut out = vec![Decision::Keep; ballots.len()];
    // Findings that vote, by task and file (lines) or task and title (no file).
    let mut groups: BTreeMap<(&str, &str, bool), Vec<usize>> = BTreeMap::new();
    for (i, b) in ballots.iter().enumerate() {
        let (Some(pass), Some(_)) = (b.pass, b.lines) else {
            continue;
        };
        let key = match b.file {
            Some(file) => (pass.of.as_str(), file, true),
            None => (pass.of.as_str(), b.title, false),
        };
        groups.entry(key).or_default().push(i);
    }
    for ((_, _, by_lines), mut members) in groups {
        let lines = |i: usize| ballots[i].lines.unwrap_or((0, 0));
        // Anchors: a sweep over the members by first line; titles without a file are one.
        let mut anchors: Vec<Vec<usize>> = Vec::new();
        if by_lines {
            members.sort_by_key(|&i| (lines(i), i));
            let mut end = 0u32;
            for i in members {
                let (a, b) = lines(i);
                match anchors.last_mut() {
                    Some(anchor) if a <= end.saturating_add(SLACK) => {
                        anchor.push(i);
                        end = end.max(b);
                    }
                    _ => {
                        anchors.push(vec![i]);
                        end = b.max(a);
                    }
                }
            }
        } else {
            anchors.push(members);
        }
        for anchor in anchors {
            let pass = |i: usize| ballots[i].pass.expect("only passes vote");
            let mut voters: Vec<u32> = anchor.iter().map(|&i| pass(i).number).collect();
            voters.sort_unstable();
            voters.dedup();
            let p = pass(anchor[0]);
            let votes = voters.len() as u32;
            if votes >= p.min_votes {
                let chosen = *anchor
                    .iter()
                    .min_by_key(|&&i| (pass(i).number, i))
                    .expect("an anchor has a finding");
                for &i in &anchor {
                    if i != chosen {
                        out[i] = Decision::Duplicate;
                    }
                }
            } else {
                let passes: Vec<String> = voters.iter().map(u32::to_string).collect();
                let reason = format!(
                    "{OUTVOTED_REASON}{votes} of {} passes of task {} found it (pass {}); the \
                     flow keeps what at least {} find",
                    p.passes,
                    p.of,
                    passes.join(", "),
                    p.min_votes
                );
                for &i in &anchor {
                    out[i] = Decision::Outvoted {
                        reason: reason.clone(),
                    };
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(of: &str, number: u32) -> Pass {
        Pass {
            of: of.into(),
            number,
            passes: 3,
            min_votes: 2,
            temperature: 0.6,
        }
    }

    fn ballot<'a>(p: &'a Pass, file: &'a str, lines: (u32, u32)) -> Ballot<'a> {
        Ballot {
            pass: Some(p),
            file: Some(file),
            title: "t",
            lines: Some(lines),
        }
    }

    #[test]
    fn an_anchor_two_of_three_passes_found_is_kept_once_and_one_pass_alone_is_outvoted() {
        let (p1, p2, p3) = (pass("t1", 1), pass("t1", 2), pass("t1", 3));
        let ballots = vec![
            // Pass 2 answered first; the defect at 10-11 cited 12-12 by pass 1 (within slack).
            ballot(&p2, "a.py", (10, 11)),
            ballot(&p1, "a.py", (12, 12)),
            // Only pass 3 saw this one.
            ballot(&p3, "a.py", (40, 41)),
            // The same lines in another file are another anchor.
            ballot(&p1, "b.py", (10, 11)),
        ];
        let d = vote(&ballots);
        assert_eq!(
            d[1],
            Decision::Keep,
            "the earliest pass's report stands: {d:?}"
        );
        assert_eq!(d[0], Decision::Duplicate);
        for i in [2, 3] {
            match &d[i] {
                Decision::Outvoted { reason } => {
                    assert!(reason.starts_with(OUTVOTED_REASON), "{reason}");
                    assert!(reason.contains("1 of 3 passes of task t1"), "{reason}");
                }
                other => panic!("{i}: {other:?}"),
            }
        }
    }

    #[test]
    fn one_pass_reporting_an_anchor_twice_is_one_vote() {
        let p1 = pass("t1", 1);
        let d = vote(&[ballot(&p1, "a.py", (10, 10)), ballot(&p1, "a.py", (11, 11))]);
        assert!(
            d.iter().all(|d| matches!(d, Decision::Outvoted { .. })),
            "{d:?}"
        );
    }

    #[test]
    fn what_is_not_a_pass_or_not_placed_by_grounding_keeps_out_of_the_vote() {
        let p1 = pass("t1", 1);
        let plain = Ballot {
            pass: None,
            file: Some("a.py"),
            title: "t",
            lines: Some((1, 1)),
        };
        let unplaced = Ballot {
            lines: None,
            ..ballot(&p1, "a.py", (5, 5))
        };
        assert_eq!(
            vote(&[plain, unplaced]),
            vec![Decision::Keep, Decision::Keep]
        );
    }

    #[test]
    fn passes_of_different_tasks_never_vote_together() {
        let (a, b) = (pass("t1", 1), pass("t2", 2));
        let d = vote(&[ballot(&a, "a.py", (3, 3)), ballot(&b, "a.py", (3, 3))]);
        assert!(
            d.iter().all(|d| matches!(d, Decision::Outvoted { .. })),
            "{d:?}"
        );
    }

    #[test]
    fn findings_without_a_file_vote_by_title() {
        let (p1, p2) = (pass("t1", 1), pass("t1", 2));
        let nofile = |p| Ballot {
            pass: Some(p),
            file: None,
            title: "Missing rate limit",
            lines: Some((0, 0)),
        };
        assert_eq!(
            vote(&[nofile(&p2), nofile(&p1)]),
            vec![Decision::Duplicate, Decision::Keep]
        );
    }
}
