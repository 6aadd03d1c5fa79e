//! Serving the API: the `Quorum` service behind the bearer-token check, plus gRPC reflection.
//!
//! Reflection is deliberately served without a token: it exposes only the schema in
//! `proto/quorum.proto`, which is public, and it lets `grpcurl list` and `grpcurl describe` work
//! before a user has found the token. Every `quorum.v1.Quorum` method needs the token.
//!
//! A review's pack is uploaded in one message, so the server accepts requests up to
//! [`MAX_MESSAGE_BYTES`] (256 MiB, counted after gzip decompression). Gzip is accepted on
//! requests and used for responses when the client accepts it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::codec::CompressionEncoding;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::auth::BearerAuth;
use crate::error::ApiError;
use crate::keepalive::Keepalive;
use crate::pb;
use crate::pb::quorum_server::QuorumServer;
use crate::service::{QuorumService, ReviewApi};
use crate::tls::ServerTls;

/// The largest message either side accepts: a whole pack travels in one `SubmitReviewRequest`.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// How a server is run besides its service and token.
#[derive(Debug, Default)]
pub struct ServeOptions {
    /// Serve over TLS: clients then connect with `https://`.
    pub tls: Option<ServerTls>,
    /// Ping every connection, so a watcher that went silent without closing its stream (a
    /// frozen or unplugged client) is noticed and its stream's resources are released.
    pub keepalive: Keepalive,
}

/// Binds `addr` and serves the API until `shutdown` completes. `token` must not be empty.
pub async fn serve(
    addr: SocketAddr,
    api: Arc<dyn ReviewApi>,
    token: String,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ApiError::Unavailable(format!("binding api address {addr}: {e}")))?;
    serve_with_listener(listener, api, token, shutdown).await
}

/// Serves the API on an already bound listener until `shutdown` completes; in-flight calls are
/// allowed to finish. `token` must not be empty.
pub async fn serve_with_listener(
    listener: TcpListener,
    api: Arc<dyn ReviewApi>,
    token: String,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    serve_with_tls(listener, api, token, None, shutdown).await
}

/// [`serve_with_listener`], over TLS when `tls` is given: clients then connect with `https://`.
/// Each connection's handshake is bounded by [`crate::TLS_HANDSHAKE_TIMEOUT`].
pub async fn serve_with_tls(
    listener: TcpListener,
    api: Arc<dyn ReviewApi>,
    token: String,
    tls: Option<ServerTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let options = ServeOptions {
        tls,
        ..ServeOptions::default()
    };
    serve_with_options(listener, api, token, options, shutdown).await
}

/// [`serve_with_tls`], with every option: TLS and the keepalive cadence.
pub async fn serve_with_options(
    listener: TcpListener,
    api: Arc<dyn ReviewApi>,
    token: String,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let ServeOptions { tls, keepalive } = options;
    if token.trim().is_empty() {
        return Err(ApiError::InvalidArgument(
            "no api token: refusing to serve the api without one".into(),
        ));
    }
    let local = listener
        .local_addr()
        .map_err(|e| ApiError::Internal(format!("reading the api listener's address: {e}")))?;

    // grpcurl asks v1 first and falls back to v1alpha; older clients only know v1alpha.
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| ApiError::Internal(format!("building the reflection service: {e}")))?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| ApiError::Internal(format!("building the reflection service: {e}")))?;

    let quorum = QuorumServer::new(QuorumService::new(api))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip);
    let quorum = InterceptedService::new(quorum, BearerAuth::new(token.trim()));

    let mut builder = Server::builder();
    if let Some(tls) = &tls {
        crate::tls::ensure_provider();
        builder = builder.tls_config(tls.config()).map_err(|e| {
            ApiError::InvalidArgument(format!(
                "invalid api tls certificate or key: {}",
                error_chain(&e)
            ))
        })?;
    }
    tracing::info!(addr = %local, tls = tls.is_some(), "serving the quorum api");
    builder
        .http2_keepalive_interval(Some(keepalive.interval))
        .http2_keepalive_timeout(Some(keepalive.timeout))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(quorum)
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
        .map_err(|e| ApiError::Internal(format!("api server on {local}: {}", error_chain(&e))))
}

/// Renders an error with its sources, because tonic's transport errors say little on their own.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !out.ends_with(&cause_text) {
            out.push_str(": ");
            out.push_str(&cause_text);
        }
        source = cause.source();
    }
    out
}
