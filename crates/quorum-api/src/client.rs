//! A client for the API, used by `quorum review PATH --cluster URL`: connects once, then every
//! call carries the bearer token and comes back as [`ApiError`] rather than a raw status. The
//! connection is pinged ([`Keepalive`]), so a silent node fails its calls instead of hanging.

use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use tokio_stream::StreamExt;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::error::ApiError;
use crate::keepalive::Keepalive;
use crate::pb;
use crate::pb::quorum_client::QuorumClient;
use crate::server::{error_chain, MAX_MESSAGE_BYTES};

/// How long `connect` waits for the server before giving up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A review's events as the client receives them; an error ends the stream.
pub type ClientEventStream =
    Pin<Box<dyn Stream<Item = Result<pb::ReviewEvent, ApiError>> + Send + 'static>>;

/// A connection to one node's API. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct ApiClient {
    client: QuorumClient<Channel>,
    authorization: MetadataValue<Ascii>,
    url: String,
}

impl std::fmt::Debug for ApiClient {
    // The token stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient").field("url", &self.url).finish()
    }
}

impl ApiClient {
    /// Connects to the API at `url` (`http://host:port`; a bare `host:port` means http). Fails
    /// within [`CONNECT_TIMEOUT`] if nothing answers, with an error that names the URL.
    pub async fn connect(url: &str, token: &str) -> Result<ApiClient, ApiError> {
        ApiClient::connect_with_ca(url, token, None).await
    }

    /// [`ApiClient::connect`], also to `https://` URLs: the server's certificate must chain to
    /// `ca_pem` when given (a private CA, `--ca FILE`), else to the public web roots.
    pub async fn connect_with_ca(
        url: &str,
        token: &str,
        ca_pem: Option<&[u8]>,
    ) -> Result<ApiClient, ApiError> {
        ApiClient::connect_with(url, token, ca_pem, Keepalive::default()).await
    }

    /// [`ApiClient::connect_with_ca`], pinging the connection at `keepalive`'s cadence: a node
    /// that goes silent without closing the connection (frozen, unplugged) fails every call on
    /// it, a watch included, within [`Keepalive::dead_within`] instead of hanging.
    pub async fn connect_with(
        url: &str,
        token: &str,
        ca_pem: Option<&[u8]>,
        keepalive: Keepalive,
    ) -> Result<ApiClient, ApiError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(ApiError::InvalidArgument(
                "no api token: set QUORUM_API_TOKEN or pass --token-file".into(),
            ));
        }
        let authorization: MetadataValue<Ascii> =
            format!("Bearer {token}").parse().map_err(|_| {
                ApiError::InvalidArgument(
                    "the api token has characters that cannot travel in a header".into(),
                )
            })?;

        let url = if url.contains("://") {
            url.to_string()
        } else {
            format!("http://{url}")
        };
        let tls = url.starts_with("https://");
        if !tls && !url.starts_with("http://") {
            return Err(ApiError::InvalidArgument(format!(
                "unsupported api url {url}: use http:// or https://"
            )));
        }
        if !tls && ca_pem.is_some() {
            return Err(ApiError::InvalidArgument(format!(
                "a CA was given but {url} is not https://; use https:// or drop --ca"
            )));
        }
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| ApiError::InvalidArgument(format!("invalid api url {url}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(keepalive.interval)
            .keep_alive_timeout(keepalive.timeout)
            .keep_alive_while_idle(true);
        if tls {
            crate::tls::ensure_provider();
            endpoint = endpoint
                .tls_config(crate::tls::client_config(ca_pem))
                .map_err(|e| {
                    ApiError::InvalidArgument(format!(
                        "invalid tls setup for {url}: {}",
                        error_chain(&e)
                    ))
                })?;
        }
        // The endpoint's own timeout covers only the TCP connect; this also covers a peer that
        // accepts the connection and then never speaks HTTP/2.
        let channel = match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => {
                let chain = error_chain(&e);
                if chain.contains("invalid peer certificate") {
                    return Err(ApiError::Unavailable(format!(
                        "cannot connect to the api at {url}: its tls certificate is not trusted ({}); pass --ca with the CA that signed it",
                        chain.rsplit(": ").next().unwrap_or(&chain)
                    )));
                }
                return Err(ApiError::Unavailable(format!(
                    "cannot connect to the api at {url}: {chain}"
                )));
            }
            Err(_) => {
                return Err(ApiError::Unavailable(format!(
                    "cannot connect to the api at {url}: no answer within {}s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        };
        let client = QuorumClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
            .accept_compressed(CompressionEncoding::Gzip);
        Ok(ApiClient {
            client,
            authorization,
            url,
        })
    }

    /// The URL this client talks to, normalised (with its scheme).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Uploads a pack and starts its review; returns the flow id.
    pub async fn submit(&self, req: pb::SubmitReviewRequest) -> Result<String, ApiError> {
        let response = self
            .client
            .clone()
            .submit_review(self.request(req))
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner().flow_id)
    }

    /// Follows a review's events from its first one; the stream ends after the `finished` event.
    pub async fn watch(&self, flow_id: &str) -> Result<ClientEventStream, ApiError> {
        let request = self.request(pb::WatchReviewRequest {
            flow_id: flow_id.to_string(),
        });
        let stream = self
            .client
            .clone()
            .watch_review(request)
            .await
            .map_err(|s| self.error(s))?
            .into_inner();
        let url = self.url.clone();
        Ok(Box::pin(
            stream.map(move |item| item.map_err(|s| status_error(&url, s))),
        ))
    }

    /// The report of a review that has ended; [`ApiError::Running`] while it runs.
    pub async fn report(&self, flow_id: &str) -> Result<pb::GetReportResponse, ApiError> {
        let request = self.request(pb::GetReportRequest {
            flow_id: flow_id.to_string(),
        });
        let response = self
            .client
            .clone()
            .get_report(request)
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner())
    }

    /// Cancels a review; `false` when it had already ended.
    pub async fn cancel(&self, flow_id: &str) -> Result<bool, ApiError> {
        let request = self.request(pb::CancelReviewRequest {
            flow_id: flow_id.to_string(),
        });
        let response = self
            .client
            .clone()
            .cancel_review(request)
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner().cancelled)
    }

    /// The reviews the node knows about.
    pub async fn list(&self) -> Result<Vec<pb::ReviewSummary>, ApiError> {
        let response = self
            .client
            .clone()
            .list_reviews(self.request(pb::ListReviewsRequest {}))
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner().reviews)
    }

    /// The cluster's nodes, models and load as the node sees them.
    pub async fn cluster_status(&self) -> Result<Vec<pb::NodeStatus>, ApiError> {
        Ok(self.status().await?.nodes)
    }

    /// The name of the node this client reached (empty from a node that does not say): a
    /// client that dials a URL the cluster's status listed checks it reached the node it meant.
    pub async fn answered_by(&self) -> Result<String, ApiError> {
        Ok(self.status().await?.answered_by)
    }

    async fn status(&self) -> Result<pb::ClusterStatusResponse, ApiError> {
        let response = self
            .client
            .clone()
            .cluster_status(self.request(pb::ClusterStatusRequest {}))
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner())
    }

    /// Changes the control plane's voters; the voters after the change.
    pub async fn change_voters(
        &self,
        add: Vec<String>,
        remove: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        let response = self
            .client
            .clone()
            .change_voters(self.request(pb::ChangeVotersRequest { add, remove }))
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner().voters)
    }

    /// Runs one fix attempt on the node; `missing` in the answer names contents to send.
    pub async fn fix_attempt(
        &self,
        req: pb::FixAttemptRequest,
    ) -> Result<pb::FixAttemptResponse, ApiError> {
        let response = self
            .client
            .clone()
            .run_fix_attempt(self.request(req))
            .await
            .map_err(|s| self.error(s))?;
        Ok(response.into_inner())
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.authorization.clone());
        request
    }

    fn error(&self, status: Status) -> ApiError {
        status_error(&self.url, status)
    }
}

/// Maps a status to [`ApiError`], naming the server where the failure is about the server
/// rather than about the request.
fn status_error(url: &str, status: Status) -> ApiError {
    match ApiError::from(status) {
        ApiError::Unauthenticated(m) => {
            ApiError::Unauthenticated(format!("the api at {url} refused the token: {m}"))
        }
        ApiError::Unavailable(m) => ApiError::Unavailable(format!("the api at {url}: {m}")),
        ApiError::Internal(m) => ApiError::Internal(format!("the api at {url}: {m}")),
        other => other,
    }
}
