//! One file per command of the clap tree in `args`: each takes its arguments, does the work
//! through the lower rooms (`setup`, `local`, `client`, `outcome`, `target`, ...) and returns
//! the exit code, or an error whose one-line message says what failed and what to do. No
//! command imports from `main`, and nothing below imports a command.

pub mod bench;
pub mod build;
pub mod cluster;
pub mod fix;
pub mod flows;
pub mod improve;
pub mod mcp;
pub mod models;
pub mod node;
pub mod pack;
pub mod personas;
pub mod resume;
pub mod review;
pub mod trace;
