//! The argument parsers and progress bars of the `solidgraph` binary, a
//! library so that the `solidgraph-bench` binary parses sizes and vertex
//! orders exactly as `solidgraph` does.

pub mod util;
