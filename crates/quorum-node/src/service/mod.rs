//! The `ReviewApi` implementation: submitted packs become reviews run on this node. One room
//! per seam: `setup` (what the node runs reviews with, and its memory across them), `state`
//! (the service and its plain queries), `flows` (what it keeps in memory of each review,
//! bounded), `submit` (a submission checked and turned into a review), `run` (a review run and
//! its events kept for watchers), `resume` (interrupted and taken-over reviews), `results` (the
//! result cache of incremental reviews, fed from the cluster), `replica` (a
//! review conducted elsewhere, followed through the replicated facts) and `api` (the gRPC
//! calls). The rooms share the service's fields among themselves; only the crate root
//! re-exports what is public.

pub mod api;
pub mod flows;
pub mod replica;
pub mod results;
pub mod resume;
pub mod run;
pub mod setup;
pub mod state;
pub mod submit;
