//! What comes back from an attempt run on another node: the stage's output or its error, as the
//! wire carries it and as the conductor takes it.

use crate::error::AttemptError;
use crate::stages::{Plan, SpecialistOutput, StageStats};
use crate::worker::{JobOutcome, VerifyOutput};
use quorum_core::machine::Synthesis;
use quorum_core::task::Classification;
use serde::{Deserialize, Serialize};

/// What comes back: the specialist's output, a verification batch's verdicts, or the error as
/// class + message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RemoteOutcome {
    Ok(SpecialistOutput),
    Verified(VerifyOutput),
    Scouted(Classification, StageStats),
    Planned(Plan),
    Synthesized(Synthesis, StageStats),
    Err { class: String, message: String },
}

impl RemoteOutcome {
    pub fn from_result(r: Result<SpecialistOutput, AttemptError>) -> Self {
        match r {
            Ok(o) => RemoteOutcome::Ok(o),
            Err(e) => RemoteOutcome::Err {
                class: e.class().to_string(),
                message: e.to_string(),
            },
        }
    }

    pub fn into_result(self) -> Result<SpecialistOutput, AttemptError> {
        match self {
            RemoteOutcome::Ok(o) => Ok(o),
            RemoteOutcome::Verified(_)
            | RemoteOutcome::Scouted(..)
            | RemoteOutcome::Planned(_)
            | RemoteOutcome::Synthesized(..) => Err(AttemptError::Internal(
                "a stage's result where a specialist's was expected".into(),
            )),
            RemoteOutcome::Err { class, message } => Err(AttemptError::Remote { class, message }),
        }
    }

    /// As the conductor takes it: a specialist's or a verification batch's outcome.
    pub fn into_job_outcome(self) -> JobOutcome {
        match self {
            RemoteOutcome::Verified(v) => JobOutcome::Verify(Ok(v)),
            RemoteOutcome::Scouted(c, st) => JobOutcome::Scout(Ok((c, st))),
            RemoteOutcome::Planned(p) => JobOutcome::Plan(Ok(p)),
            RemoteOutcome::Synthesized(s, st) => JobOutcome::Synthesize(Ok((s, st))),
            other => JobOutcome::Specialist(other.into_result()),
        }
    }
}
