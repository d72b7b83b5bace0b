//! `solidgraph-bench`: the benchmarks, a binary apart from `solidgraph` so
//! that the product carries none of their dependencies (see the crate's
//! documentation in lib.rs).

use clap::Parser;
use solidgraph_bench::BenchCmd;

#[derive(Parser)]
#[command(name = "solidgraph-bench", version, about = "Benchmarks that compare SolidGraph with baselines in the same run")]
struct Cli {
    #[command(subcommand)]
    cmd: BenchCmd,
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    if let Err(e) = solidgraph_bench::run(cli.cmd) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
