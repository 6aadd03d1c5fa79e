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
    /// The server refused the request because prompt and output bound do not fit its context
    /// window. Sending the same request again cannot help; a smaller one can.
    #[error("the request does not fit the context window of {url}{}: {body}", window_suffix(.n_ctx))]
    ContextOverflow {
        url: String,
        /// The window the server stated in its answer, when it stated one.
        n_ctx: Option<u32>,
        body: String,
    },
    /// The streamed answer stopped saying anything (the same line over and over, no JSON long
    /// after JSON was asked for) and was cut before the output bound. The same prompt would
    /// likely loop again, so the client does not retry; the task's retry carries the reason.
    #[error("the answer from {url} was cut off: {reason}")]
    Degenerate { url: String, reason: String },
    #[error("invalid backend config: {0}")]
    Config(String),
}

fn window_suffix(n_ctx: &Option<u32>) -> String {
    match n_ctx {
        Some(n) => format!(" ({n} tokens)"),
        None => String::new(),
    }
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
            LlmError::ContextOverflow { .. } => "context_overflow",
            LlmError::Degenerate { .. } => "degenerate_output",
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
            | LlmError::Decode { url, .. }
            | LlmError::ContextOverflow { url, .. }
            | LlmError::Degenerate { url, .. } => Some(url),
            LlmError::Config(_) => None,
        }
    }
}

/// Recognises a server's "the request does not fit my context window" answer, whatever the
/// server: llama-server (`exceed_context_size_error`, "exceeds the available context size"),
/// vLLM and OpenAI ("maximum context length is N tokens", `context_length_exceeded`), Ollama
/// ("prompt too long; exceeded max context length"). Returns the window the body states, if any.
pub(crate) fn context_overflow(body: &str) -> Option<Option<u32>> {
    let lower = body.to_ascii_lowercase();
    const SIGNS: [&str; 7] = [
        "exceed_context_size_error",
        "exceeds the available context size",
        "maximum context length is",
        "context_length_exceeded",
        "exceeded max context length",
        "prompt too long",
        "context window exceeded",
    ];
    if !SIGNS.iter().any(|s| lower.contains(s)) {
        return None;
    }
    // llama-server states it as a field: {"error": {..., "n_ctx": 2560}}.
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("error")
                .and_then(|e| e.get("n_ctx"))
                .or_else(|| v.get("n_ctx"))
                .and_then(serde_json::Value::as_u64)
        })
        .and_then(|n| u32::try_from(n).ok());
    let from_text = || {
        let at = lower.find("maximum context length is")? + "maximum context length is".len();
        let digits: String = lower[at..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse::<u32>().ok()
    };
    Some(from_json.or_else(from_text))
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
            (
                LlmError::ContextOverflow {
                    url: url(),
                    n_ctx: Some(2560),
                    body: String::new(),
                },
                "context_overflow",
                false,
            ),
            (LlmError::Config("x".into()), "config", false),
        ];
        for (err, class, retryable) in cases {
            assert_eq!(err.class(), class);
            assert_eq!(err.retryable(), retryable, "{err}");
        }
    }

    /// Real answers of each server to a request larger than its window.
    pub(crate) const OVERFLOW_BODIES: [(&str, &str, Option<u32>); 5] = [
        (
            "llama-server",
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3012,"n_ctx":2560}}"#,
            Some(2560),
        ),
        (
            "llama-server (older)",
            r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"invalid_request_error"}}"#,
            None,
        ),
        (
            "vllm",
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (3000 in the messages, 2000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
            Some(4096),
        ),
        (
            "openai",
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            Some(8192),
        ),
        (
            "ollama",
            r#"{"error":"prompt too long; exceeded max context length by 120 tokens"}"#,
            None,
        ),
    ];

    #[test]
    fn every_servers_overflow_wording_is_recognised_with_its_window() {
        for (server, body, window) in OVERFLOW_BODIES {
            assert_eq!(context_overflow(body), Some(window), "{server}: {body}");
        }
        for other in [
            r#"{"error":"model 'x' not found"}"#,
            r#"{"error":{"message":"invalid schema","code":400}}"#,
            "",
        ] {
            assert_eq!(context_overflow(other), None, "{other}");
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
