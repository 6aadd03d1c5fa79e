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
    /// Mutual TLS with node identities ([`ClusterTls::mutual`]): TLS is terminated by this
    /// crate, not ractor_cluster, and a link counts only for the node its certificate names.
    pub(crate) mutual: bool,
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
            mutual: false,
        })
    }

    /// Mutual TLS with node identities: both ends of every link present a certificate that
    /// chains to `ca`, and a link is accepted only for the node its certificate names (subject
    /// alt name = node name, as `quorum cluster issue-cert` makes them). Frames on such links
    /// are authenticated per link (see `node.rs`), so a peer cannot send in another's name.
    pub fn mutual(cert: &Path, key: &Path, ca: &Path) -> Result<ClusterTls, ClusterError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_err("certificate", cert, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| tls_err("certificate", cert, e))?;
        if chain.is_empty() {
            return Err(tls_err("certificate", cert, "no certificate in the file"));
        }
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_err("key", key, e))?;
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).map_err(|e| tls_err("ca", ca, e))? {
            let c = c.map_err(|e| tls_err("ca", ca, e))?;
            roots.add(c).map_err(|e| tls_err("ca", ca, e))?;
        }
        if roots.is_empty() {
            return Err(tls_err("ca", ca, "no certificate in the file"));
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let setup = |e: rustls::Error| ClusterError::Transport(format!("tls setup failed: {e}"));
        let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            provider.clone(),
        )
        .build()
        .map_err(|e| ClusterError::Transport(format!("tls setup failed: {e}")))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(setup)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key_der.clone_key())
            .map_err(|e| tls_err("key", key, e))?;
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(setup)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly { roots, provider }))
            .with_client_auth_cert(chain, key_der)
            .map_err(|e| tls_err("key", key, e))?;
        Ok(ClusterTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            server_name: None,
            mutual: true,
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

/// Whether `cert` (an end-entity certificate that already chained to the cluster CA) names
/// node `name`.
pub(crate) fn names_node(cert: &CertificateDer<'_>, name: &str) -> bool {
    let Ok(parsed) = rustls::server::ParsedCertificate::try_from(cert) else {
        return false;
    };
    let Ok(server_name) = ServerName::try_from(name) else {
        return false;
    };
    rustls::client::verify_server_name(&parsed, &server_name).is_ok()
}

/// A dialing node's check of the peer: the chain must verify against the cluster CA, but the
/// name is checked later, against the node name the peer gives in ractor_cluster's handshake
/// (a join address says nothing about which node answers there).
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// For the listener ractor_cluster insists on starting: in mutual mode links arrive through our
/// own listener, so this one (on loopback) refuses every client.
#[derive(Debug)]
struct RejectAll(Arc<rustls::crypto::CryptoProvider>);

impl rustls::server::danger::ClientCertVerifier for RejectAll {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Err(rustls::Error::General(
            "links arrive on the node's own listener".into(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("refused".into()))
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("refused".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl ClusterTls {
    /// An acceptor for ractor_cluster's own listener in mutual mode: every handshake fails.
    pub(crate) fn decoy_acceptor(&self) -> Result<TlsAcceptor, ClusterError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let resolver = self.acceptor.config().cert_resolver.clone();
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Transport(format!("tls setup failed: {e}")))?
            .with_client_cert_verifier(Arc::new(RejectAll(provider)))
            .with_cert_resolver(resolver);
        Ok(TlsAcceptor::from(Arc::new(server)))
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
