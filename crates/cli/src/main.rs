//! `solidgraph`: one binary for import, inspection, updates and queries.
//! The command lives in the library (lib.rs) so that the Python package's
//! console script runs the same code. Benchmarks are the separate
//! `solidgraph-bench` binary (crates/bench).

fn main() {
    std::process::exit(solidgraph_cli::run(std::env::args_os()));
}
