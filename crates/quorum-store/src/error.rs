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

/// What a failed write means for the user: the disk under the data dir, not the review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageFault {
    /// No space (or quota) left.
    Full,
    /// The filesystem was remounted read-only, or the directory is not writable.
    ReadOnly,
    /// The device failed the write.
    Failing,
}

impl StorageFault {
    /// The fault an operating-system error stands for, if it is one.
    pub fn of(e: &std::io::Error) -> Option<StorageFault> {
        use std::io::ErrorKind;
        let text = e.to_string();
        match e.kind() {
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded => return Some(StorageFault::Full),
            ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied => {
                return Some(StorageFault::ReadOnly)
            }
            _ => {}
        }
        // sled wraps the OS error in a custom one: read it from its words.
        match e.raw_os_error() {
            Some(28) | Some(122) => Some(StorageFault::Full),
            Some(30) | Some(13) => Some(StorageFault::ReadOnly),
            Some(5) => Some(StorageFault::Failing),
            _ if text.contains("os error 28") || text.contains("No space left") => {
                Some(StorageFault::Full)
            }
            _ if text.contains("os error 30") || text.contains("Read-only file system") => {
                Some(StorageFault::ReadOnly)
            }
            _ if text.contains("os error 5)") || text.contains("Input/output error") => {
                Some(StorageFault::Failing)
            }
            _ => None,
        }
    }

    /// What the data dir is, in a sentence's middle: "is out of space".
    pub fn describe(&self) -> &'static str {
        match self {
            StorageFault::Full => "is out of space",
            StorageFault::ReadOnly => "is read-only",
            StorageFault::Failing => "is failing (the device reported an i/o error)",
        }
    }

    /// What the user does about it.
    pub fn remedy(&self) -> &'static str {
        match self {
            StorageFault::Full => "free space",
            StorageFault::ReadOnly => "make it writable",
            StorageFault::Failing => "check the disk (or move the data dir to a healthy one)",
        }
    }
}

impl StoreError {
    /// The storage fault behind this error, when the disk refused a write.
    pub fn storage_fault(&self) -> Option<StorageFault> {
        match self {
            StoreError::Io { source, .. } | StoreError::Write(source) => StorageFault::of(source),
            _ => None,
        }
    }

    /// The path the error is about, when it names one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            StoreError::Io { path, .. }
            | StoreError::Corrupt { path, .. }
            | StoreError::Locked { path }
            | StoreError::NoPack { path } => Some(path),
            _ => None,
        }
    }

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
