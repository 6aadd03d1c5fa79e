//! The crate's one error type. Every variant names the endpoint URL, because the first question an
//! operator asks about a failed model call is "which server?".

use std::time::Duration;

/// How much of an error body is kept: enough to read the server's complaint, not a whole HTML page.
pub(crate) const BODY_SNIPPET_CHARS: usize = 300;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("cannot connect to {url}: {message}")]
    Connect { url: String, message: String },
    #[error("no answer from {url} within {secs}s")]
    Timeout { url: String, secs: u64 },
    #[error("rate limited by {url}{}", retry_after_suffix(.retry_after))]
    RateLimited {
        url: String,
        retry_after: Option<Duration>,
    },
    #[error("server error {status} from {url}: {body}")]
    Server {
        url: String,
        status: u16,
        body: String,
    },
    #[error("request rejected with {status} by {url}: {body}")]
    Client {
        url: String,
        status: u16,
        body: String,
    },
    #[error("malformed response from {url}: {message}")]
    Decode { url: String, message: String },
    #[error("invalid backend config: {0}")]
    Config(String),
}

fn retry_after_suffix(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (retry after {}s)", d.as_secs()),
        None => String::new(),
    }
}

impl LlmError {
    /// Stable short name, used as `error_class` in reports and logs.
    pub fn class(&self) -> &'static str {
        match self {
            LlmError::Connect { .. } => "transport",
            LlmError::Timeout { .. } => "timeout",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Server { .. } => "server_error",
            LlmError::Client { .. } => "client_error",
            LlmError::Decode { .. } => "malformed_response",
            LlmError::Config(_) => "config",
        }
    }

    /// Whether the same request may succeed if sent again. A 4xx (unknown model, bad schema) or a
    /// malformed body will not improve by repetition, so those fail at once.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            LlmError::Connect { .. }
                | LlmError::Timeout { .. }
                | LlmError::RateLimited { .. }
                | LlmError::Server { .. }
        )
    }

    /// The endpoint URL the error concerns, when there is one.
    pub fn url(&self) -> Option<&str> {
        match self {
            LlmError::Connect { url, .. }
            | LlmError::Timeout { url, .. }
            | LlmError::RateLimited { url, .. }
            | LlmError::Server { url, .. }
            | LlmError::Client { url, .. }
            | LlmError::Decode { url, .. } => Some(url),
            LlmError::Config(_) => None,
        }
    }
}

/// The first `BODY_SNIPPET_CHARS` characters of a body, cut on a character boundary.
pub(crate) fn body_snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(BODY_SNIPPET_CHARS) {
        Some((cut, _)) => text[..cut].to_string(),
        None => text.to_string(),
    }
}

/// The innermost cause of an error chain, lowercased: reqwest's outer message ("error sending
/// request for url ...") says nothing the URL field does not; the OS error at the bottom does.
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = err;
    while let Some(next) = cur.source() {
        cur = next;
    }
    lowercase_first(&cur.to_string())
}

pub(crate) fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lowercase_and_name_the_url() {
        let e = LlmError::Connect {
            url: "http://127.0.0.1:11434/api/chat".into(),
            message: "connection refused".into(),
        };
        assert_eq!(
            e.to_string(),
            "cannot connect to http://127.0.0.1:11434/api/chat: connection refused"
        );
        let e = LlmError::RateLimited {
            url: "http://h/v1/chat/completions".into(),
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(
            e.to_string(),
            "rate limited by http://h/v1/chat/completions (retry after 3s)"
        );
    }

    #[test]
    fn classes_and_retryability() {
        let url = || "http://h".to_string();
        let cases = [
            (
                LlmError::Connect {
                    url: url(),
                    message: String::new(),
                },
                "transport",
                true,
            ),
            (
                LlmError::Timeout {
                    url: url(),
                    secs: 1,
                },
                "timeout",
                true,
            ),
            (
                LlmError::RateLimited {
                    url: url(),
                    retry_after: None,
                },
                "rate_limited",
                true,
            ),
            (
                LlmError::Server {
                    url: url(),
                    status: 500,
                    body: String::new(),
                },
                "server_error",
                true,
            ),
            (
                LlmError::Client {
                    url: url(),
                    status: 404,
                    body: String::new(),
                },
                "client_error",
                false,
            ),
            (
                LlmError::Decode {
                    url: url(),
                    message: String::new(),
                },
                "malformed_response",
                false,
            ),
            (LlmError::Config("x".into()), "config", false),
        ];
        for (err, class, retryable) in cases {
            assert_eq!(err.class(), class);
            assert_eq!(err.retryable(), retryable, "{err}");
        }
    }

    #[test]
    fn snippet_cuts_on_char_boundary() {
        let body = "é".repeat(400);
        let s = body_snippet(body.as_bytes());
        assert_eq!(s.chars().count(), BODY_SNIPPET_CHARS);
        assert_eq!(body_snippet(b"  short  "), "short");
    }
}
