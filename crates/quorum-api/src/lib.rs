//! The cluster's gRPC API (`proto/quorum.proto`, package `quorum.v1`): the generated messages,
//! a server that puts a bearer-token check in front of any [`ReviewApi`] implementation, and an
//! [`ApiClient`] for `quorum review --cluster`.
//!
//! Architecture invariant: this crate knows nothing about the runtime, the store or the review
//! engine. The node implements [`ReviewApi`]; this crate only moves its answers over the wire and
//! maps [`ApiError`] to status codes, once, at the edge.

mod auth;
mod client;
mod error;
mod keepalive;
mod server;
mod service;
mod tls;

pub use auth::load_token;
pub use client::{ApiClient, ClientEventStream, CONNECT_TIMEOUT};
pub use error::ApiError;
pub use keepalive::Keepalive;
pub use server::{
    serve, serve_with_listener, serve_with_options, serve_with_tls, ServeOptions, MAX_MESSAGE_BYTES,
};
pub use service::{EventStream, ReviewApi, FINISHED_KIND};
pub use tls::{read_ca, ServerTls, TLS_HANDSHAKE_TIMEOUT};

/// Messages, server and client generated from `proto/quorum.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/quorum.v1.rs"));

    /// The encoded `FileDescriptorSet` of `quorum.proto`, served by the reflection service.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/quorum_descriptor.bin"));
}
