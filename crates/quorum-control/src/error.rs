//! Why a control-plane operation failed: misconfiguration, the store, no majority, a stopped
//! plane, or a command too large to replicate.

/// Why a control-plane operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("control plane misconfigured: {0}")]
    Config(String),
    #[error("cannot open the control-plane store at {path}: {message}")]
    Store { path: String, message: String },
    /// No leader could be reached, or no majority acknowledged in time.
    #[error("control plane unavailable: {0} (is a majority of the voters up?)")]
    Unavailable(String),
    #[error("control plane stopped: {0}")]
    Stopped(String),
    /// The request itself cannot be carried out (a voter change that would leave 2 voters).
    #[error("{0}")]
    Refused(String),
    #[error("cannot encode the command: {0}")]
    Encode(String),
    #[error("command of {bytes} bytes exceeds the control plane's limit of {max} bytes")]
    TooLarge { bytes: usize, max: usize },
}
