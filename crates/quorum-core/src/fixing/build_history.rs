//! What past build runs teach the next one: each finished run's facts (criteria, iterations,
//! the last iteration that met a new criterion), and the backstop learned from them.
//!
//! Seed 002 §6: with no history, the backstop is a placeholder, max(3, 3 × criteria); once
//! [`MIN_RUNS`] finished runs of a spec of about the same size exist, it is the point of
//! diminishing returns they showed — the latest iteration at which any of them still met a new
//! criterion, plus one of slack. The constant is scaffolding that replaces itself with data.

use crate::fixing::build_loop::BuildStop;
use serde::{Deserialize, Serialize};

/// Finished runs of one size bucket needed before the backstop is learned.
pub const MIN_RUNS: usize = 3;
/// Runs a history keeps (the oldest are dropped first).
pub const MAX_RUNS: usize = 500;
/// The learned backstop never goes beyond this.
pub const MAX_BACKSTOP: u32 = 100;

/// One finished build run, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRunFacts {
    pub build_id: String,
    pub criteria: usize,
    /// Criteria met at the end, and on the base before any increment.
    pub met: usize,
    pub met_on_base: usize,
    pub iterations: u32,
    /// The last iteration whose kept increment met a new criterion (0: none did).
    pub last_progress: u32,
    pub stop: BuildStop,
    /// The backstop the run had.
    pub backstop: u32,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub wall_ms: u64,
}

/// Specs of about the same size learn from each other: 1-2, 3-5, 6-10, 11-20, 21+ criteria.
pub fn size_bucket(criteria: usize) -> (usize, usize) {
    match criteria {
        0..=2 => (1, 2),
        3..=5 => (3, 5),
        6..=10 => (6, 10),
        11..=20 => (11, 20),
        _ => (21, usize::MAX),
    }
}

/// Where a run's backstop came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "source")]
pub enum BackstopSource {
    /// `--max-iterations`.
    Flag,
    /// max(3, 3 × criteria): too few earlier runs of this size.
    Placeholder { runs_of_this_size: usize },
    /// The point of diminishing returns of earlier runs of this size.
    Learned { runs_of_this_size: usize },
    /// A resumed run keeps the backstop it started with.
    Recorded,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backstop {
    pub iterations: u32,
    #[serde(flatten)]
    pub source: BackstopSource,
}

impl Backstop {
    /// One line for the user.
    pub fn describe(&self, criteria: usize) -> String {
        match self.source {
            BackstopSource::Flag => format!("{} (--max-iterations)", self.iterations),
            BackstopSource::Placeholder { runs_of_this_size } => format!(
                "{} (max(3, 3 × {criteria} criteria); learned once {MIN_RUNS} runs of this size are recorded, {runs_of_this_size} so far)",
                self.iterations
            ),
            BackstopSource::Recorded => format!(
                "{} (as recorded when the build started)",
                self.iterations
            ),
            BackstopSource::Learned { runs_of_this_size } => format!(
                "{} (learned from {runs_of_this_size} earlier runs of this size: the last iteration that still met a new criterion, plus one)",
                self.iterations
            ),
        }
    }
}

/// The seed's placeholder: max(3, 3 × criteria).
pub fn placeholder_backstop(criteria: usize) -> u32 {
    (3 * criteria.min(MAX_BACKSTOP as usize) as u32).max(3)
}

/// The backstop for a spec of `criteria` criteria: the flag's, else learned from `history`,
/// else the placeholder.
pub fn choose_backstop(history: &[BuildRunFacts], criteria: usize, flag: Option<u32>) -> Backstop {
    if let Some(n) = flag {
        return Backstop {
            iterations: n.max(1),
            source: BackstopSource::Flag,
        };
    }
    let bucket = size_bucket(criteria);
    let alike: Vec<&BuildRunFacts> = history
        .iter()
        .filter(|r| size_bucket(r.criteria) == bucket)
        .collect();
    if alike.len() < MIN_RUNS {
        return Backstop {
            iterations: placeholder_backstop(criteria),
            source: BackstopSource::Placeholder {
                runs_of_this_size: alike.len(),
            },
        };
    }
    let inflection = alike.iter().map(|r| r.last_progress).max().unwrap_or(0);
    Backstop {
        iterations: (inflection + 1).clamp(3, MAX_BACKSTOP),
        source: BackstopSource::Learned {
            runs_of_this_size: alike.len(),
        },
    }
}

/// Read a history (one JSON object per line); lines that are not a run's facts are skipped.
pub fn parse_history(text: &str) -> Vec<BuildRunFacts> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l.trim()).ok())
        .collect()
}

/// The history with `run` added, as its file's text: at most [`MAX_RUNS`] runs, newest last.
pub fn with_run(mut history: Vec<BuildRunFacts>, run: BuildRunFacts) -> String {
    history.push(run);
    let skip = history.len().saturating_sub(MAX_RUNS);
    history[skip..]
        .iter()
        .filter_map(|r| serde_json::to_string(r).ok())
        .map(|l| l + "\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(criteria: usize, last_progress: u32) -> BuildRunFacts {
        BuildRunFacts {
            build_id: "b".into(),
            criteria,
            met: criteria,
            met_on_base: 0,
            iterations: last_progress + 2,
            last_progress,
            stop: BuildStop::Satisfied,
            backstop: 12,
            tokens_in: 1,
            tokens_out: 1,
            wall_ms: 1,
        }
    }

    #[test]
    fn the_placeholder_holds_until_three_runs_of_the_size_exist() {
        let b = choose_backstop(&[], 4, None);
        assert_eq!(b.iterations, 12);
        assert_eq!(
            b.source,
            BackstopSource::Placeholder {
                runs_of_this_size: 0
            }
        );
        assert_eq!(placeholder_backstop(0), 3);
        // Two runs of this size and one of another size are not enough.
        let history = vec![run(4, 2), run(5, 3), run(12, 9)];
        assert_eq!(choose_backstop(&history, 3, None).iterations, 9);
    }

    #[test]
    fn three_runs_of_the_size_teach_the_backstop() {
        let history = vec![run(4, 2), run(5, 5), run(12, 9), run(3, 4)];
        let b = choose_backstop(&history, 4, None);
        assert_eq!(b.iterations, 6);
        assert_eq!(
            b.source,
            BackstopSource::Learned {
                runs_of_this_size: 3
            }
        );
        // Never below 3, and the flag wins.
        let quick = vec![run(1, 0), run(2, 1), run(1, 1)];
        assert_eq!(choose_backstop(&quick, 2, None).iterations, 3);
        assert_eq!(choose_backstop(&quick, 2, Some(7)).iterations, 7);
    }

    #[test]
    fn the_history_file_is_bounded_and_tolerates_bad_lines() {
        let mut text = String::from("not json\n");
        for i in 0..(MAX_RUNS + 5) {
            let history = parse_history(&text);
            text = with_run(history, run(3, (i % 7) as u32));
        }
        let history = parse_history(&text);
        assert_eq!(history.len(), MAX_RUNS);
        assert_eq!(
            history.last().map(|r| r.last_progress),
            Some(((MAX_RUNS + 4) % 7) as u32)
        );
    }
}
