//! `solidgraph`: one binary for import, inspection, queries and benchmarks.

mod bench;
mod util;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "solidgraph", version, about = "A graph engine native to solid-state storage")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Benchmarks that compare SolidGraph with baselines in the same run.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Bench(b) => bench::run(b),
    };
    if let Err(e) = res {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
