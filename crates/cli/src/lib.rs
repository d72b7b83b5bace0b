//! The `solidgraph` command line as a library: `run` is the whole command,
//! called by the `solidgraph` binary (main.rs) and by the Python package's
//! console script (`solidgraph._native.cli_main`), so `cargo build` and
//! `pip install` give the same command. `util` holds the argument parsers
//! and progress bars, shared with `solidgraph-bench` so that it parses sizes
//! and vertex orders exactly as `solidgraph` does.

mod apply;
mod bench;
mod graph;
mod infer;
mod partition;
mod rdf;
mod run;
mod serve;
pub mod util;

use std::ffi::OsString;
use std::io::Write;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "solidgraph", version, about = "A graph engine native to solid-state storage")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Builds a store from edge files (larger than memory is fine) and node tensors.
    Import(graph::ImportArgs),
    /// Prints what a store holds.
    Info(graph::InfoArgs),
    /// Reads every page and checks every checksum and invariant; names the first bad page.
    Verify(graph::VerifyArgs),
    /// Prints the neighbor lists of some vertices.
    Neighbors(graph::NeighborsArgs),
    /// Applies a file of updates (+e/-e/w/+v/-v lines) durably through the write-ahead log.
    Apply(apply::ApplyArgs),
    /// Folds pending updates into pages (copy-on-write, only changed pages) and checkpoints the log.
    Merge(apply::MergeArgs),
    /// Runs an analytics algorithm; prints `vertex value` lines (LDBC Graphalytics format).
    Run(run::RunArgs),
    /// Runs a GNN model (a directory from solidgraph.infer.export) on nodes next to the store; writes a float32 .npy.
    Infer(infer::InferArgs),
    /// RDF store: load files, SPARQL query and update.
    Rdf(rdf::RdfArgs),
    /// Serves stores over gRPC (Graph and Updates services, health, reflection) until SIGTERM.
    Serve(serve::ServeArgs),
    /// Splits a store into K shard stores and a partition book, for one server per shard.
    Partition(partition::PartitionArgs),
    /// Runs the benchmarks against their baselines (the `solidgraph-bench` binary; `solidgraph bench --help`).
    Bench(bench::BenchArgs),
}

/// Runs the `solidgraph` command on `args` (the program name first, as
/// `std::env::args_os` gives them) and returns its exit code: 0 on success
/// (and for `--help`, `--version`), 1 when the command fails (the error on
/// stderr), 2 for bad usage (clap's message). It never exits the process:
/// a host such as the Python interpreter gets control back and exits itself.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // try_init: a second `run` in one process (a Python caller) keeps the first logger.
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).try_init();
    let code = match Cli::try_parse_from(args) {
        Err(e) => {
            // Help and version go to stdout with code 0; usage errors to stderr with 2.
            let _ = e.print();
            e.exit_code()
        }
        Ok(cli) => {
            let res = match cli.cmd {
                // Its own exit code passes through (a usage error stays 2).
                Cmd::Bench(a) => bench::bench_cmd(a),
                Cmd::Import(a) => graph::import_cmd(a).map(|()| 0),
                Cmd::Info(a) => graph::info_cmd(a).map(|()| 0),
                Cmd::Verify(a) => graph::verify_cmd(a).map(|()| 0),
                Cmd::Neighbors(a) => graph::neighbors_cmd(a).map(|()| 0),
                Cmd::Run(a) => run::run_cmd(a).map(|()| 0),
                Cmd::Apply(a) => apply::apply_cmd(a).map(|()| 0),
                Cmd::Merge(a) => apply::merge_cmd(a).map(|()| 0),
                Cmd::Infer(a) => infer::infer_cmd(a).map(|()| 0),
                Cmd::Rdf(a) => rdf::rdf_cmd(a).map(|()| 0),
                Cmd::Serve(a) => serve::serve_cmd(a).map(|()| 0),
                Cmd::Partition(a) => partition::partition_cmd(a).map(|()| 0),
            };
            match res {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("error: {e}");
                    1
                }
            }
        }
    };
    // Inside a host process nothing flushes Rust's stdout at exit, so a
    // last line without a newline would be lost.
    let _ = std::io::stdout().flush();
    code
}
