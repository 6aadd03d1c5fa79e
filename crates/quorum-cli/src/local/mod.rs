//! A review run in this process, shared by `quorum review`, `resume`, `bench` and `mcp`: the
//! parameters stored with it, everything done before it runs, and driving it to its reports.

pub mod drive;
pub mod params;
pub mod prepare;
