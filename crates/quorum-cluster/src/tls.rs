//! TLS for cluster links: ractor_cluster encrypts a link when the node server accepts with a
//! rustls acceptor and the dialing side connects with a connector. The cookie still authenticates
//! nodes; TLS adds encryption and lets the dialing node verify whom it reached.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::error::ClusterError;

/// TLS settings for [`crate::Cluster::start_tls`]: this node's certificate and key, the roots
/// peers' certificates must chain to, and the name they must carry.
#[derive(Clone)]
pub struct ClusterTls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

fn tls_err(what: &str, path: &Path, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Transport(format!("cannot load tls {what} {}: {e}", path.display()))
}

impl ClusterTls {
    /// Load PEM files.
    ///
    /// * `cert`, `key`: this node's certificate chain and private key (PKCS#8, SEC1 or PKCS#1).
    /// * `ca`: the roots a peer's certificate must chain to; `None` trusts `cert` itself, for a
    ///   cluster whose nodes share one self-signed certificate (which must not be a CA).
    /// * `server_name`: the DNS name every peer's certificate carries (e.g. one shared name such
    ///   as "quorum-cluster"); `None` checks the host of the address being dialed instead, which
    ///   then must be in the certificate (an IP address needs an IP subject alt name).
    ///
    /// Peers are not asked for client certificates: the cookie authenticates them.
    pub fn from_pem_files(
        cert: &Path,
        key: &Path,
        ca: Option<&Path>,
        server_name: Option<&str>,
    ) -> Result<ClusterTls, ClusterError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_err("certificate", cert, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| tls_err("certificate", cert, e))?;
        if chain.is_empty() {
            return Err(tls_err("certificate", cert, "no certificate in the file"));
        }
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_err("key", key, e))?;
        let roots_path = ca.unwrap_or(cert);
        let mut roots = RootCertStore::empty();
        for c in
            CertificateDer::pem_file_iter(roots_path).map_err(|e| tls_err("ca", roots_path, e))?
        {
            let c = c.map_err(|e| tls_err("ca", roots_path, e))?;
            roots.add(c).map_err(|e| tls_err("ca", roots_path, e))?;
        }
        let server_name = server_name
            .map(|n| {
                ServerName::try_from(n.to_string()).map_err(|e| {
                    ClusterError::Transport(format!("invalid tls server name {n}: {e}"))
                })
            })
            .transpose()?;

        // Other crates in the build may enable rustls' ring provider too; naming the provider
        // avoids depending on a process-wide default.
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Transport(format!("tls setup failed: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| tls_err("key", key, e))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Transport(format!("tls setup failed: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClusterTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            server_name,
        })
    }

    /// The name to verify when dialing `addr` (`host:port`).
    pub(crate) fn name_for(&self, addr: &str) -> Result<ServerName<'static>, String> {
        if let Some(n) = &self.server_name {
            return Ok(n.clone());
        }
        let host = match addr.parse::<std::net::SocketAddr>() {
            Ok(sa) => sa.ip().to_string(),
            Err(_) => addr
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(addr)
                .trim_matches(|c| c == '[' || c == ']')
                .to_string(),
        };
        ServerName::try_from(host.clone())
            .map_err(|e| format!("invalid tls server name {host}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
    }

    #[test]
    fn loads_pem_files_and_names_servers() {
        let tls = ClusterTls::from_pem_files(
            &fixture("cluster-node.pem"),
            &fixture("cluster-node.key"),
            Some(&fixture("cluster-ca.pem")),
            None,
        )
        .unwrap();
        assert_eq!(
            tls.name_for("127.0.0.1:7000").unwrap(),
            ServerName::try_from("127.0.0.1").unwrap()
        );
        assert_eq!(
            tls.name_for("ws1.lan:7000").unwrap(),
            ServerName::try_from("ws1.lan").unwrap()
        );
        let fixed = ClusterTls::from_pem_files(
            &fixture("self.pem"),
            &fixture("self.key"),
            None,
            Some("quorum-cluster"),
        )
        .unwrap();
        assert_eq!(
            fixed.name_for("127.0.0.1:7000").unwrap(),
            ServerName::try_from("quorum-cluster").unwrap()
        );
    }

    #[test]
    fn missing_or_bad_files_are_errors_naming_the_file() {
        let err = ClusterTls::from_pem_files(
            &fixture("absent.pem"),
            &fixture("cluster-node.key"),
            None,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("absent.pem"), "{err}");
        let err = ClusterTls::from_pem_files(
            &fixture("cluster-node.pem"),
            &fixture("cluster-ca.pem"),
            None,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("cluster-ca.pem"), "{err}");
    }
}
