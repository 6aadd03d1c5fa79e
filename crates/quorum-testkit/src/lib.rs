//! quorum-testkit: a scripted model server for tests, speaking both backend APIs.
//!
//! [`ScriptedServer`] is a real HTTP server on 127.0.0.1 that answers Ollama's native API
//! (`/api/chat`, `/api/tags`, `/api/show`, `/api/version`) and the OpenAI-compatible API
//! (`/v1/chat/completions`, `/v1/models`). It answers by [`Rule`]s matched on the *prompt* — which
//! substrings the messages, the system message or the last user/tool message carry, the turn, the
//! API, whether tools were offered — so a test whose prompt lost its most important section gets
//! "no rule matched" instead of a plausible answer. Every chat request is recorded
//! ([`RecordedRequest`]) for deterministic assertions on routing and prompt construction, and
//! replies can inject faults: HTTP errors with `Retry-After`, delays, hangs, truncated bodies,
//! prose or fenced JSON where JSON was asked for, tool calls to tools that do not exist.
//!
//! ```no_run
//! use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
//! # async fn demo() -> std::io::Result<()> {
//! let server = ScriptedServer::start(
//!     Script::new()
//!         .rule(Rule::new("scout").when_system(["classify"]).reply(Reply::json(&serde_json::json!({"domain": "code"}))))
//!         .rule(Rule::new("flaky").when_all(["retry me"]).reply(Reply::rate_limited(1)).then(Reply::text("ok")))
//!         .fallback(Reply::text("nothing to report")),
//! )
//! .await?;
//! let base = server.ollama_url();
//! # let _ = base;
//! # Ok(()) }
//! ```
//!
//! A request asking for `stream: true` is answered as the real servers stream: NDJSON for Ollama,
//! server-sent events for the OpenAI API, tool-call arguments in pieces; `Reply::Truncated`
//! ends such a stream before its last events, and `Reply::Repeat` is a model stuck in a loop.
//!
//! The same server runs as the `quorum-scripted` binary with a YAML script, for tests that drive
//! whole `quorum` processes.

mod api;
mod error;
pub mod modgraph;
mod render;
mod reply_serde;
mod request;
#[cfg(feature = "review")]
pub mod review;
mod script;
mod server;
mod stream;

pub use api::Api;
pub use error::ScriptError;
pub use request::RecordedRequest;
pub use script::{ContextWindow, Match, Reply, Rule, Script, CONTEXT_WINDOW_RULE, DEFAULT_MODEL};
pub use server::ScriptedServer;
