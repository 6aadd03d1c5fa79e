//! Error enums of the core crate, one per concern, each rendering as one lowercase line.

use std::path::PathBuf;

/// Failure to snapshot a target into a [`crate::pack::ContextPack`], or to resolve a path in it.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("target {0} does not exist")]
    Missing(PathBuf),
    #[error("target {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A path requested by an agent that is not in the pack (outside the root, excluded, absent).
    #[error("path {0:?} is not in the review's snapshot")]
    NotInPack(String),
    #[error("invalid pattern {pattern:?}: {reason}")]
    BadPattern { pattern: String, reason: String },
}

/// An authoring error in the persona catalog: always names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read persona catalog {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: field `{field}`: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("persona catalog {0} holds no personas")]
    Empty(PathBuf),
    #[error("unknown persona {0:?}")]
    UnknownPersona(String),
}

/// An authoring error in a flow file: names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("cannot read flow {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: field `{field}`: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("no flow named {name:?} (looked in {searched})")]
    NotFound { name: String, searched: String },
}

/// An unreadable or invalid `.quorum.toml` in a reviewed repository: names the file, and the
/// line when the error has a position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepoConfigError {
    #[error("{file}:{line}: {message}")]
    At {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{file}: {message}")]
    File { file: String, message: String },
}

impl RepoConfigError {
    /// The 1-based line the error is on, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            RepoConfigError::At { line, .. } => Some(*line),
            RepoConfigError::File { .. } => None,
        }
    }
}

/// An authoring error in the analyzer catalog (`config/analyzers.yaml` or the file
/// `[analyzers] catalog` names): names the file, the analyzer and the field.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzerError {
    #[error("analyzer catalog {path}: {message}")]
    Catalog { path: PathBuf, message: String },
}

/// A prior report or dispositions file a finish review cannot use: says which and why.
#[derive(Debug, thiserror::Error)]
pub enum PriorError {
    #[error("the prior report cannot be used: {0}")]
    Report(String),
    #[error("the dispositions file cannot be used: {0}")]
    Dispositions(String),
}
