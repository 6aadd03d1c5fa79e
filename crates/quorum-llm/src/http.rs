//! The HTTP plumbing both backends share: one reqwest client with connect and per-call timeouts,
//! an optional bearer key, and the single place where transport failures and HTTP statuses become
//! `LlmError`s.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{body_snippet, context_overflow, root_cause, LlmError};
use crate::types::BackendConfig;

pub(crate) struct Http {
    client: reqwest::Client,
    timeout_secs: u64,
    bearer: Option<String>,
    stream: bool,
}

// Hand-written so the bearer key can never reach a log line through `{:?}`.
impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http")
            .field("timeout_secs", &self.timeout_secs)
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Http {
    pub(crate) fn new(cfg: &BackendConfig) -> Result<Self, LlmError> {
        if cfg.timeout_secs == 0 {
            return Err(LlmError::Config(format!(
                "backend {}: timeout_secs must be at least 1",
                cfg.url
            )));
        }
        if cfg.connect_timeout_secs == 0 {
            return Err(LlmError::Config(format!(
                "backend {}: connect_timeout_secs must be at least 1",
                cfg.url
            )));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(cfg.connect_timeout_secs))
            .timeout(Duration::from_secs(cfg.timeout_secs))
            .build()
            .map_err(|e| {
                LlmError::Config(format!("cannot build http client: {}", root_cause(&e)))
            })?;
        let bearer = match &cfg.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.trim().is_empty() => Some(key.trim().to_string()),
                _ => {
                    tracing::warn!(
                        url = %cfg.url,
                        api_key_env = %var,
                        "api key variable is unset or empty; calling without authorization"
                    );
                    None
                }
            },
            None => None,
        };
        Ok(Http {
            client,
            timeout_secs: cfg.timeout_secs,
            bearer,
            stream: cfg.stream,
        })
    }

    /// Whether chat answers are streamed (the backend's `stream` setting).
    pub(crate) fn streams(&self) -> bool {
        self.stream
    }

    /// Sends `body` and hands back the answer line by line as it arrives (NDJSON or SSE). An
    /// error status is read whole and mapped as [`Http::post_json`] maps it.
    pub(crate) async fn post_lines(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<Lines, LlmError> {
        let mut builder = self.client.post(url).json(body);
        if let Some(key) = &self.bearer {
            builder = builder.bearer_auth(key);
        }
        let resp = builder
            .send()
            .await
            .map_err(|e| self.transport_error(url, &e))?;
        let status = resp.status();
        if !status.is_success() {
            let retry_after = parse_retry_after(resp.headers());
            let bytes = resp.bytes().await.unwrap_or_default();
            return Err(status_error(url, status, retry_after, &bytes));
        }
        let json = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        Ok(Lines {
            resp,
            buf: Vec::new(),
            ended: false,
            url: url.to_string(),
            timeout_secs: self.timeout_secs,
            json,
        })
    }

    pub(crate) async fn post_json<T: DeserializeOwned>(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<T, LlmError> {
        self.execute(url, self.client.post(url).json(body)).await
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, LlmError> {
        self.execute(url, self.client.get(url)).await
    }

    async fn execute<T: DeserializeOwned>(
        &self,
        url: &str,
        mut builder: reqwest::RequestBuilder,
    ) -> Result<T, LlmError> {
        if let Some(key) = &self.bearer {
            builder = builder.bearer_auth(key);
        }
        let resp = builder
            .send()
            .await
            .map_err(|e| self.transport_error(url, &e))?;
        let status = resp.status();
        let retry_after = parse_retry_after(resp.headers());
        let bytes = resp.bytes().await.map_err(|e| {
            if e.is_timeout() {
                self.timeout(url)
            } else {
                // The server hung up mid-body: what arrived cannot be parsed, like truncated JSON.
                LlmError::Decode {
                    url: url.to_string(),
                    message: format!("incomplete response body: {}", root_cause(&e)),
                }
            }
        })?;
        if !status.is_success() {
            return Err(status_error(url, status, retry_after, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| LlmError::Decode {
            url: url.to_string(),
            message: format!("{e} in body: {}", body_snippet(&bytes)),
        })
    }

    fn timeout(&self, url: &str) -> LlmError {
        LlmError::Timeout {
            url: url.to_string(),
            secs: self.timeout_secs,
        }
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error) -> LlmError {
        // A connect timeout is a reachability problem, so it is reported as a connect failure.
        if e.is_timeout() && !e.is_connect() {
            self.timeout(url)
        } else {
            LlmError::Connect {
                url: url.to_string(),
                message: root_cause(e),
            }
        }
    }
}

/// The longest streamed line accepted: one chunk of an answer is a few bytes, and a whole
/// non-streamed answer (a server that ignored `stream`) stays well under it.
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// A streamed answer, line by line. Dropping it closes the connection, which tells the server to
/// stop generating.
pub(crate) struct Lines {
    resp: reqwest::Response,
    buf: Vec<u8>,
    ended: bool,
    url: String,
    timeout_secs: u64,
    json: bool,
}

impl Lines {
    /// Whether the server answered with one JSON document instead of a stream (it ignored
    /// `stream: true`, as some proxies do).
    pub(crate) fn is_plain_json(&self) -> bool {
        self.json
    }

    /// The next line without its line ending; `None` once the body has ended.
    pub(crate) async fn next_line(&mut self) -> Result<Option<String>, LlmError> {
        loop {
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=at).collect();
                let text = String::from_utf8_lossy(&line);
                return Ok(Some(text.trim_end_matches(['\n', '\r']).to_string()));
            }
            if self.ended {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let rest = std::mem::take(&mut self.buf);
                return Ok(Some(String::from_utf8_lossy(&rest).trim_end().to_string()));
            }
            match self.resp.chunk().await {
                Ok(Some(bytes)) => {
                    if self.buf.len() + bytes.len() > MAX_LINE_BYTES {
                        return Err(LlmError::Decode {
                            url: self.url.clone(),
                            message: format!(
                                "a streamed line longer than {} MiB",
                                MAX_LINE_BYTES >> 20
                            ),
                        });
                    }
                    self.buf.extend_from_slice(&bytes);
                }
                Ok(None) => self.ended = true,
                Err(e) if e.is_timeout() => {
                    return Err(LlmError::Timeout {
                        url: self.url.clone(),
                        secs: self.timeout_secs,
                    })
                }
                Err(e) => {
                    // The server hung up mid-answer: what arrived is incomplete.
                    return Err(LlmError::Decode {
                        url: self.url.clone(),
                        message: format!("incomplete streamed answer: {}", root_cause(&e)),
                    });
                }
            }
        }
    }

    /// The rest of the body, for a server that answered with one JSON document.
    pub(crate) async fn rest(mut self) -> Result<String, LlmError> {
        let mut all = String::new();
        while let Some(line) = self.next_line().await? {
            all.push_str(&line);
            all.push('\n');
        }
        Ok(all)
    }
}

fn status_error(
    url: &str,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
) -> LlmError {
    let url = url.to_string();
    let code = status.as_u16();
    // Servers answer an oversized request with 400 (llama-server, vLLM), 413 or, for some
    // builds, 500: the body, not the status, says what happened.
    if status != StatusCode::TOO_MANY_REQUESTS {
        if let Some(n_ctx) = context_overflow(&String::from_utf8_lossy(body)) {
            return LlmError::ContextOverflow {
                url,
                n_ctx,
                body: body_snippet(body),
            };
        }
    }
    if status == StatusCode::TOO_MANY_REQUESTS {
        LlmError::RateLimited { url, retry_after }
    } else if status.is_client_error() {
        LlmError::Client {
            url,
            status: code,
            body: body_snippet(body),
        }
    } else {
        LlmError::Server {
            url,
            status: code,
            body: body_snippet(body),
        }
    }
}

/// `Retry-After` in seconds (integer or fractional). The HTTP-date form is not used by model
/// servers and is ignored, which falls back to ordinary backoff.
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let raw = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let secs: f64 = raw.parse().ok()?;
    if secs.is_finite() && secs >= 0.0 {
        Some(Duration::from_secs_f64(secs.min(86_400.0)))
    } else {
        None
    }
}

/// The base URL without trailing slashes, after checking it is an absolute http(s) URL.
pub(crate) fn validated_base_url(raw: &str) -> Result<String, LlmError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed)
        .map_err(|e| LlmError::Config(format!("invalid backend url '{raw}': {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(LlmError::Config(format!(
            "invalid backend url '{raw}': expected http:// or https:// with a host"
        )));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn retry_after_seconds() {
        assert_eq!(
            parse_retry_after(&headers("2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(&headers("0.5")),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after(&headers("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(parse_retry_after(&headers("-1")), None);
        assert_eq!(parse_retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn statuses_map_to_variants() {
        let u = "http://h/api/chat";
        assert!(matches!(
            status_error(u, StatusCode::TOO_MANY_REQUESTS, None, b""),
            LlmError::RateLimited { .. }
        ));
        assert!(matches!(
            status_error(u, StatusCode::NOT_FOUND, None, b"model 'x' not found"),
            LlmError::Client { status: 404, .. }
        ));
        assert!(matches!(
            status_error(u, StatusCode::BAD_GATEWAY, None, b""),
            LlmError::Server { status: 502, .. }
        ));
    }

    #[test]
    fn base_urls_are_validated_and_trimmed() {
        assert_eq!(
            validated_base_url("http://127.0.0.1:8080/v1/").unwrap(),
            "http://127.0.0.1:8080/v1"
        );
        assert!(validated_base_url("127.0.0.1:11434").is_err());
        assert!(validated_base_url("ftp://h").is_err());
        assert!(validated_base_url("").is_err());
    }

    #[test]
    fn debug_redacts_the_key() {
        let var = "QUORUM_LLM_TEST_DEBUG_REDACTS_KEY";
        std::env::set_var(var, "sk-secret");
        let mut cfg = BackendConfig::new(crate::BackendKind::OpenAi, "http://h/v1");
        cfg.api_key_env = Some(var.to_string());
        let http = Http::new(&cfg).unwrap();
        let dbg = format!("{http:?}");
        assert!(!dbg.contains("sk-secret"), "{dbg}");
        assert!(dbg.contains("redacted"));
    }
}

/// The assistant message of a chat reply. Ollama and OpenAI-compatible servers share this shape;
/// they differ in how `arguments` is encoded (object vs JSON string), which each backend handles.
#[derive(Deserialize)]
pub(crate) struct ReplyMessage {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ReplyToolCall>>,
}

#[derive(Deserialize)]
pub(crate) struct ReplyToolCall {
    #[serde(default)]
    pub(crate) id: Option<String>,
    pub(crate) function: ReplyFunction,
}

#[derive(Deserialize)]
pub(crate) struct ReplyFunction {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) arguments: Value,
}
