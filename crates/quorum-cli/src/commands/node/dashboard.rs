//! `quorum node --http`: where the dashboard and `/metrics` listen, and starting them.

use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::sync::Arc;

/// The `--http` address, refused on a non-loopback interface without `--insecure` for the same
/// reason as `--api`: the token would cross the network in the clear.
pub fn http_addr(arg: Option<&str>, insecure: bool) -> Result<Option<SocketAddr>> {
    let Some(a) = arg else {
        return Ok(None);
    };
    let addr: SocketAddr = a.parse().with_context(|| {
        format!("invalid --http address {a:?} (expected host:port, e.g. 127.0.0.1:7401)")
    })?;
    if !addr.ip().is_loopback() && !insecure {
        bail!("refusing to serve the dashboard on non-loopback {addr} without TLS; put it behind a TLS proxy or pass --insecure");
    }
    Ok(Some(addr))
}

/// Bind `addr` and serve the dashboard over `api` in the background; returns its base URL.
pub async fn start(
    addr: SocketAddr,
    api: Arc<quorum_node::NodeService>,
    token: &str,
) -> Result<String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for --http"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the dashboard's bound address")?;
    let token = token.to_string();
    tokio::spawn(async move {
        // Open event streams never end a node's shutdown: the server just stops with it.
        if let Err(e) =
            quorum_node::http::serve(listener, api, &token, std::future::pending()).await
        {
            tracing::error!(error = %e, "the dashboard server stopped");
        }
    });
    Ok(format!("http://{bound}/"))
}
