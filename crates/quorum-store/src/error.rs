//! The one error type of the store, with messages that name the path involved.
//!
//! Opening a database distinguishes three failures because callers act differently on each:
//! [`StoreError::Locked`] means another process is running that review (a fact, not a
//! failure), [`StoreError::Corrupt`] means a person has to look at the files, and
//! [`StoreError::Io`] is everything the operating system refused.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("i/o error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "store at {} is corrupt or unreadable: {message}; move it aside or delete it (it is never reset automatically)",
        path.display()
    )]
    Corrupt { path: PathBuf, message: String },
    #[error("store at {} is locked: a running review holds it", path.display())]
    Locked { path: PathBuf },
    #[error("no stored flow with id {flow_id:?}")]
    NotFound { flow_id: String },
    #[error("a flow with id {flow_id:?} already exists")]
    AlreadyExists { flow_id: String },
    #[error(
        "invalid flow id {flow_id:?}: use letters, digits, '.', '_' and '-', not starting with '.'"
    )]
    InvalidFlowId { flow_id: String },
    #[error("store at {} holds no pack snapshot", path.display())]
    NoPack { path: PathBuf },
    #[error("could not encode a record for the store: {0}")]
    Encode(String),
    #[error("could not decode {what}: {message}")]
    Decode { what: String, message: String },
    #[error("could not write trace output: {0}")]
    Write(#[source] std::io::Error),
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, message: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: path.into(),
            message: message.into(),
        }
    }
}
