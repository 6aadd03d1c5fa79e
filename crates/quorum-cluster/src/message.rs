//! Application messages between nodes: the [`Envelope`] they travel in and the
//! [`MessageHandler`] that receives the ones addressed to this node.

use serde::{Deserialize, Serialize};

/// An application message between nodes. `kind` routes it ("run_attempt", "attempt_result",
/// "fetch_blobs", ...); the payload is JSON.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Envelope {
    pub kind: String,
    pub flow_id: String,
    pub payload: serde_json::Value,
}

/// Receives the application messages addressed to this node.
///
/// `on_message` calls for one sender are made one at a time, in the order that sender sent them;
/// `on_request` calls run concurrently, each as its own task.
#[async_trait::async_trait]
pub trait MessageHandler: Send + Sync + 'static {
    /// A one-way message from `from`.
    async fn on_message(&self, from: &str, msg: Envelope);
    /// A request from `from`; the reply goes back to the caller of [`crate::Cluster::request`].
    async fn on_request(&self, from: &str, msg: Envelope) -> Result<Envelope, String>;
}
