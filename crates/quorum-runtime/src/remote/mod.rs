//! Attempts on other nodes: the wire form of an attempt and the seam the conductor ships it
//! through ([`attempt`], the low floor), what comes back ([`outcome`]), and the peer side that
//! runs a shipped attempt ([`peer`]). Routing results, renewals and cancels to a conductor in
//! this process is the conductor's (`crate::conductor::routing`).

pub mod attempt;
pub mod outcome;
pub mod peer;

pub use attempt::{
    conductor_name, renew_every, ManifestEntry, RemoteAttempt, RemoteExecutor, RemoteSlot,
    RemoteStage,
};
pub use outcome::RemoteOutcome;
pub use peer::run_attempt;
