//! The testkit's one error enum: everything that can be wrong with a script before it is served.

/// A script that cannot be served as written. Raised when loading YAML and when a server starts,
/// so an authoring mistake in a test fails at setup with the rule's name, not as a puzzling
/// "no rule matched" later.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("invalid script yaml: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("rule {rule:?}: invalid regex: {source}")]
    Regex {
        rule: String,
        #[source]
        source: regex::Error,
    },
    #[error("rule {0:?} has no replies")]
    NoReplies(String),
    #[error("{place}: invalid http status {code}")]
    Status { place: String, code: u16 },
}
