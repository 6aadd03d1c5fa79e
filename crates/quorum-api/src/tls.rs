//! TLS for the API: the server's certificate and key, what a client trusts, and the one rustls
//! crypto provider this process uses for both.
//!
//! The build links rustls with both ring (through reqwest) and aws-lc (the cluster links), and
//! rustls then refuses to guess which to use; tonic's server asks for the process default, so it
//! is installed here, as aws-lc, before any TLS config is built.

use std::path::Path;
use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::error::ApiError;

/// How long a connecting client has to finish its TLS handshake; a client that never says hello
/// holds only its own connection, and only this long.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The API server's certificate chain and key.
#[derive(Clone)]
pub struct ServerTls {
    identity: Identity,
}

impl std::fmt::Debug for ServerTls {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, ApiError> {
    let bytes = std::fs::read(path).map_err(|e| {
        ApiError::InvalidArgument(format!(
            "cannot read the tls {what} {}: {e}",
            path.display()
        ))
    })?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN ") {
        return Err(ApiError::InvalidArgument(format!(
            "the tls {what} {} is not PEM (expected a -----BEGIN ...----- block)",
            path.display()
        )));
    }
    Ok(bytes)
}

impl ServerTls {
    /// PEM certificate chain and private key.
    pub fn from_pem(cert: &[u8], key: &[u8]) -> ServerTls {
        ServerTls {
            identity: Identity::from_pem(cert, key),
        }
    }

    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<ServerTls, ApiError> {
        Ok(ServerTls::from_pem(
            &read("certificate", cert)?,
            &read("key", key)?,
        ))
    }

    pub(crate) fn config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .timeout(TLS_HANDSHAKE_TIMEOUT)
    }
}

/// What an `https://` client trusts: the CA given (`--ca`), else the public web roots.
pub(crate) fn client_config(ca_pem: Option<&[u8]>) -> ClientTlsConfig {
    let config = ClientTlsConfig::new().timeout(TLS_HANDSHAKE_TIMEOUT);
    match ca_pem {
        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
        None => config.with_webpki_roots(),
    }
}

/// Reads a CA file for [`crate::ApiClient::connect_with_ca`].
pub fn read_ca(path: &Path) -> Result<Vec<u8>, ApiError> {
    read("ca", path)
}

/// Installs aws-lc as the process's rustls provider unless one is installed already.
pub(crate) fn ensure_provider() {
    if tokio_rustls::rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: some provider is then installed.
        let _ = tokio_rustls::rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}
