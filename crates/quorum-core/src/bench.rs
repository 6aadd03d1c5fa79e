//! Review quality against ground truth: what `quorum bench quality` scores.
//!
//! Two kinds of ground truth, each in its own room:
//! - `answer_key` — a corpus directory's `corpus.yaml`: the defects there are, at line level,
//!   scored by recall, precision and F1 over the report's surviving findings;
//! - `labelled` and `rates` — an external benchmark's expected results (`--expected`, CSV or
//!   JSON: file, class or CWE, vulnerable or not, optional lines), scored at file and class
//!   level by recall (TPR), precision, false-positive rate and Youden's index, for the review's
//!   findings and, in the same run, for the analyzers' raw hits alone; with what the verifier
//!   did with the leads on labelled files.
//!
//! This module only declares them and re-exports their items, so each has one path.
//! Deterministic by construction: the same report, leads and key always give the same score.

mod answer_key;
mod labelled;
mod rates;

pub use answer_key::{
    matches, score, score_parts, Answer, AnswerOutcome, BenchError, Corpus, Score, LINE_SLACK,
};
pub use labelled::{LabelledRow, Labels, Resolved};
pub use rates::{
    agrees, flags_row, score_flags, score_labelled, score_labelled_parts, Calibration, ClassRates,
    Flag, LabelledScore, Rates, RowOutcome,
};
