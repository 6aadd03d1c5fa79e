//! The API's bearer token: where a node or client reads it from, and the check every API call
//! passes through on the server.
//!
//! Tokens come from the environment or a file, never from a command-line flag, because flags
//! show up in `ps` and shell history. The server compares blake3 digests of the presented and
//! expected tokens; `blake3::Hash` equality is constant-time, and hashing first also hides the
//! expected token's length.

use std::path::Path;

use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::error::ApiError;

/// Reads the API token: the environment variable `env_var` if it is set and not blank, else the
/// trimmed contents of `file`. A missing or empty token is an error, never an open server.
pub fn load_token(env_var: &str, file: Option<&Path>) -> Result<String, ApiError> {
    if let Ok(value) = std::env::var(env_var) {
        let value = value.trim();
        if !value.is_empty() {
            return Ok(value.to_string());
        }
    }
    let Some(path) = file else {
        return Err(ApiError::InvalidArgument(format!(
            "no api token: set {env_var} or pass --token-file"
        )));
    };
    let contents = std::fs::read_to_string(path).map_err(|e| {
        ApiError::InvalidArgument(format!("reading api token file {}: {e}", path.display()))
    })?;
    let token = contents.trim();
    if token.is_empty() {
        return Err(ApiError::InvalidArgument(format!(
            "no api token: token file {} is empty; set {env_var} or pass --token-file",
            path.display()
        )));
    }
    warn_if_readable_by_others(path);
    Ok(token.to_string())
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "api token file is readable by other users; chmod 600 it");
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

/// Rejects any call whose `authorization` metadata is not `Bearer <the token>`.
#[derive(Clone)]
pub(crate) struct BearerAuth {
    expected: blake3::Hash,
}

impl BearerAuth {
    pub(crate) fn new(token: &str) -> Self {
        BearerAuth {
            expected: blake3::hash(token.as_bytes()),
        }
    }

    fn check(&self, header: Option<&[u8]>) -> Result<(), &'static str> {
        let header = header.ok_or(
            "missing api token: send metadata 'authorization: Bearer <token>' \
             (the token is the node's QUORUM_API_TOKEN)",
        )?;
        // The scheme is case-insensitive (RFC 6750 via RFC 7235); the token is not.
        let token = match header.split_at_checked(7) {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"bearer ") => rest,
            _ => return Err("malformed authorization metadata: expected 'Bearer <token>'"),
        };
        if blake3::hash(token) == self.expected {
            Ok(())
        } else {
            Err("invalid api token")
        }
    }
}

impl Interceptor for BearerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request
            .metadata()
            .get("authorization")
            .map(|value| value.as_bytes());
        match self.check(header) {
            Ok(()) => Ok(request),
            Err(reason) => {
                tracing::warn!(remote = ?request.remote_addr(), reason, "api call rejected");
                Err(Status::unauthenticated(reason))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_exact_token_with_a_bearer_scheme() {
        let auth = BearerAuth::new("s3cret");
        assert_eq!(auth.check(Some(b"Bearer s3cret")), Ok(()));
        assert_eq!(auth.check(Some(b"bearer s3cret")), Ok(()));
        assert_eq!(
            auth.check(Some(b"Bearer s3cret ")),
            Err("invalid api token")
        );
        assert_eq!(auth.check(Some(b"Bearer S3cret")), Err("invalid api token"));
        assert_eq!(auth.check(Some(b"Bearer ")), Err("invalid api token"));
        assert!(auth
            .check(Some(b"s3cret"))
            .unwrap_err()
            .starts_with("malformed"));
        assert!(auth
            .check(Some(b"Basic s3cret"))
            .unwrap_err()
            .starts_with("malformed"));
        assert!(auth
            .check(Some(b"Bearer"))
            .unwrap_err()
            .starts_with("malformed"));
        assert!(auth
            .check(None)
            .unwrap_err()
            .starts_with("missing api token"));
    }
}
