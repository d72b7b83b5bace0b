//! `solidgraph`: one binary for import, inspection, updates and queries.
//! Benchmarks are the separate `solidgraph-bench` binary (crates/bench).

mod apply;
mod graph;
mod infer;
mod run;

use clap::{Parser, Subcommand};
use solidgraph_cli::util;

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
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Import(a) => graph::import_cmd(a),
        Cmd::Info(a) => graph::info_cmd(a),
        Cmd::Verify(a) => graph::verify_cmd(a),
        Cmd::Neighbors(a) => graph::neighbors_cmd(a),
        Cmd::Run(a) => run::run_cmd(a),
        Cmd::Apply(a) => apply::apply_cmd(a),
        Cmd::Merge(a) => apply::merge_cmd(a),
        Cmd::Infer(a) => infer::infer_cmd(a),
    };
    if let Err(e) = res {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
