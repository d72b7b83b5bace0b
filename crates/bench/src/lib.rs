//! SolidGraph's benchmarks: measurements that put SolidGraph and a
//! baseline side by side in one run (raw volume I/O, batched neighbor
//! reads, out-of-core analytics, GraphSAGE sampling). The crate holds the
//! baselines (CSR files read through mmap or through SolidGraph's I/O
//! engine, the sampler and the algorithms over that CSR), the Kronecker
//! generator, cold caches, one memory cgroup per contender, the worker
//! processes and the reports.
//!
//! The benchmarks are a binary of their own, `solidgraph-bench`
//! (`src/main.rs`), rather than a `solidgraph bench` subcommand: the
//! baselines need memmap2, serde and rand, which the product does not, and
//! a subcommand would link them and every baseline into each `solidgraph`
//! binary. The subcommands and flags are the ones scripts already pass
//! (`solidgraph-bench sampling --scale 18 ...`); scripts find the binary
//! in `SOLIDGRAPH_BENCH_BIN`, else target/release/solidgraph-bench. A
//! benchmark runs each contender as a worker subcommand of this binary
//! (`sampling-worker`, ...), re-executed from `std::env::current_exe` in
//! its own memory cgroup, so that limits and page-cache charges apply to
//! one contender at a time.
//!
//! The baseline sampler draws with the engine's own
//! `solidgraph_engine::sampler::{rng_for, choose}` so that both sides
//! sample the same neighbors and their batches can be compared.

use clap::Subcommand;
use solidgraph_cli::util::CliResult;

mod analytics;
mod common;
mod gap;
mod io;
mod kron;
mod neighbors;
mod sampling;

/// The subcommands of `solidgraph-bench`.
#[derive(Subcommand)]
pub enum BenchCmd {
    /// Raw volume I/O: IOPS, bandwidth and latency of one submitting thread.
    Io(io::IoArgs),
    /// Batched neighbor reads of random vertices: SolidGraph against the
    /// same graph as CSR files (mmap, and our I/O engine) under one memory
    /// budget, caches cold.
    Neighbors(neighbors::NeighborsArgs),
    /// One contender of `neighbors` in its own process (internal).
    #[command(hide = true)]
    NeighborsWorker(neighbors::WorkerArgs),
    /// Out-of-core BFS, WCC, PageRank and k-core: SolidGraph's engine
    /// against the same algorithms over CSR in mmap under one memory limit,
    /// and against SolidGraph with the whole store cached.
    Analytics(analytics::AnalyticsArgs),
    /// One run of `analytics` in its own process (internal).
    #[command(hide = true)]
    AnalyticsWorker(analytics::AnalyticsWorkerArgs),
    /// GraphSAGE sampling ([25, 10], batch 1024) with feature gather:
    /// SolidGraph against the same sampler over CSR + features in mmap, and
    /// against the whole store cached; feature gather alone; device IOPS.
    Sampling(sampling::SamplingArgs),
    /// One contender of `sampling` in its own process (internal).
    #[command(hide = true)]
    SamplingWorker(sampling::SamplingWorkerArgs),
}

/// Runs one subcommand of `solidgraph-bench`.
pub fn run(cmd: BenchCmd) -> CliResult {
    match cmd {
        BenchCmd::Io(a) => io::run(a),
        BenchCmd::Neighbors(a) => neighbors::run(a),
        BenchCmd::NeighborsWorker(a) => neighbors::worker(a),
        BenchCmd::Analytics(a) => analytics::run(a),
        BenchCmd::AnalyticsWorker(a) => analytics::worker(a),
        BenchCmd::Sampling(a) => sampling::run(a),
        BenchCmd::SamplingWorker(a) => sampling::worker(a),
    }
}
