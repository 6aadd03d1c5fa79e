//! Errors of the runtime, and the error classes recorded for task attempts.

use quorum_llm::LlmError;

/// Why a task attempt failed. `class()` is what the report's `error_class` shows and what
/// retry decisions key on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AttemptError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The model answered, but nothing usable could be parsed from it.
    #[error("malformed output ({kind}): {detail}")]
    MalformedOutput { kind: String, detail: String },
    /// Parsed, but the content violates the contract (e.g. zero valid tasks).
    #[error("schema violation: {0}")]
    SchemaViolation(String),
    #[error("attempt exceeded its deadline of {0}s")]
    Deadline(u64),
    /// No model can run the task (unknown pinned model, nothing eligible for a sensitive review).
    #[error("{0}")]
    Config(String),
    /// The node running the attempt was declared lost; the attempt is fenced and reassigned.
    #[error("node {0} was lost while running the attempt")]
    NodeLost(String),
    /// The chosen node would not take the attempt (draining, or at capacity): placed elsewhere
    /// without using up one of the task's attempts.
    #[error("node refused the attempt: {0}")]
    Refused(String),
    /// A remote attempt sent neither its result nor a lease renewal in time (a dropped frame,
    /// a dead or wedged worker): fenced and placed elsewhere.
    #[error("attempt lease lapsed on node {0}: no result or renewal in time")]
    LeaseExpired(String),
    /// An attempt that failed on another node, as it reported it.
    #[error("{message}")]
    Remote { class: String, message: String },
    /// The actor running the attempt panicked or died.
    #[error("internal: {0}")]
    Internal(String),
}

impl AttemptError {
    pub fn class(&self) -> &'static str {
        match self {
            AttemptError::Llm(e) => match e.class() {
                "timeout" => "timeout",
                "rate_limited" => "rate_limited",
                // A looping answer cut while streaming is a malformed answer: the retry tells
                // the model why, and the same cut twice in a row is a circular fix.
                "malformed_response" | "degenerate_output" => "malformed_output",
                "context_overflow" => "context_overflow",
                "config" | "client_error" => "config",
                _ => "transport",
            },
            AttemptError::MalformedOutput { .. } => "malformed_output",
            AttemptError::SchemaViolation(_) => "schema_violation",
            AttemptError::Deadline(_) => "timeout",
            AttemptError::Config(_) => "config",
            AttemptError::NodeLost(_) => "node_lost",
            AttemptError::Refused(_) => "refused",
            AttemptError::LeaseExpired(_) => "lease_expired",
            AttemptError::Remote { class, .. } => match class.as_str() {
                "transport" => "transport",
                "timeout" => "timeout",
                "rate_limited" => "rate_limited",
                "malformed_output" => "malformed_output",
                "context_overflow" => "context_overflow",
                "schema_violation" => "schema_violation",
                "tool_error" => "tool_error",
                "config" => "config",
                "node_lost" => "node_lost",
                "refused" => "refused",
                _ => "internal",
            },
            AttemptError::Internal(_) => "internal",
        }
    }

    /// Worth another attempt? Configuration errors (unknown model, bad key) are not, and
    /// neither is a schema violation: the stage already re-asked with the errors in the prompt.
    /// A context overflow is: the client lowered the model's known window when the server
    /// refused, so the next attempt's prompt is built for the smaller one.
    pub fn retryable(&self) -> bool {
        !matches!(self.class(), "config" | "schema_violation")
    }
}

/// Failure to start or run a review at all (as opposed to a task failing inside it).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("no backend configured: pass --backend ollama=http://127.0.0.1:11434 (or openai=URL) or add [[backends]] to the config")]
    NoBackend,
    #[error("no backend serves model {model:?}; configured: {available}")]
    UnknownModel { model: String, available: String },
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error("no model can run this task: {0}")]
    NoModel(String),
    #[error("actor system: {0}")]
    Actor(String),
}
