//! The crate's one error type, and its single mapping to and from gRPC status codes.
//!
//! A `ReviewApi` implementation returns `ApiError`; the server turns it into a `tonic::Status`
//! at the edge and nowhere else, and the client turns a `Status` back into the same variants,
//! so callers on both sides match on one enum instead of on status codes.

use tonic::{Code, Status};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// No such review (or other named thing). gRPC `NOT_FOUND`.
    #[error("{0}")]
    NotFound(String),
    /// The review exists but has not finished, so it has no report yet. gRPC `FAILED_PRECONDITION`.
    #[error("{0}")]
    Running(String),
    /// The request, a URL or a token was malformed or missing. gRPC `INVALID_ARGUMENT`.
    #[error("{0}")]
    InvalidArgument(String),
    /// The bearer token was missing or wrong. gRPC `UNAUTHENTICATED`.
    #[error("{0}")]
    Unauthenticated(String),
    /// The server could not be reached, or cannot take the request now. gRPC `UNAVAILABLE`.
    #[error("{0}")]
    Unavailable(String),
    /// The server is at capacity for this kind of work; ask again later. gRPC
    /// `RESOURCE_EXHAUSTED`.
    #[error("{0}")]
    Busy(String),
    /// Anything else: a bug or a failure the caller cannot fix. gRPC `INTERNAL`.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The gRPC code this error travels as.
    pub fn code(&self) -> Code {
        match self {
            ApiError::NotFound(_) => Code::NotFound,
            ApiError::Running(_) => Code::FailedPrecondition,
            ApiError::InvalidArgument(_) => Code::InvalidArgument,
            ApiError::Unauthenticated(_) => Code::Unauthenticated,
            ApiError::Unavailable(_) => Code::Unavailable,
            ApiError::Busy(_) => Code::ResourceExhausted,
            ApiError::Internal(_) => Code::Internal,
        }
    }

    /// The message without the variant.
    pub fn message(&self) -> &str {
        match self {
            ApiError::NotFound(m)
            | ApiError::Running(m)
            | ApiError::InvalidArgument(m)
            | ApiError::Unauthenticated(m)
            | ApiError::Unavailable(m)
            | ApiError::Busy(m)
            | ApiError::Internal(m) => m,
        }
    }
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        Status::new(err.code(), err.message())
    }
}

impl From<Status> for ApiError {
    fn from(status: Status) -> ApiError {
        let message = status.message().to_string();
        match status.code() {
            Code::NotFound => ApiError::NotFound(message),
            Code::FailedPrecondition => ApiError::Running(message),
            Code::InvalidArgument => ApiError::InvalidArgument(message),
            Code::Unauthenticated => ApiError::Unauthenticated(message),
            // A deadline hit on the way is, to the caller, the server not answering.
            Code::Unavailable | Code::DeadlineExceeded => ApiError::Unavailable(message),
            Code::ResourceExhausted => ApiError::Busy(message),
            code => ApiError::Internal(format!("{}: {message}", code.description())),
        }
    }
}
