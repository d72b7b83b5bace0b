//! `solidgraph bench ...`: the benchmarks live in their own binary,
//! `solidgraph-bench` (crates/bench: the benchmarks depend on the engine and
//! its baselines, the command does not), and this subcommand hands its
//! arguments to it, as `git` and `cargo` run `git-x` and `cargo-x`. The
//! binary is looked up next to this one first (a `cargo build` puts both in
//! `target/<profile>/`), then on PATH.

use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use crate::util::CliResult;

#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct BenchArgs {
    /// The `solidgraph-bench` command and its options (`solidgraph bench --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

const BIN: &str = "solidgraph-bench";

/// Where `solidgraph-bench` is: beside this executable, else on PATH.
fn locate() -> Option<PathBuf> {
    let beside = std::env::current_exe().ok()?.with_file_name(BIN);
    if beside.is_file() {
        return Some(beside);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(BIN)).find(|p| p.is_file())
}

/// Runs `solidgraph-bench` with the arguments; its exit code is the
/// command's (a usage error stays 2), and a signal that killed it is 1.
pub fn bench_cmd(a: BenchArgs) -> CliResult<i32> {
    let Some(bin) = locate() else {
        return Err(format!(
            "`solidgraph bench` runs the `{BIN}` binary, which is neither next to this command nor on PATH; \
             build it with `cargo build --release -p solidgraph-bench` (it lands in target/release/)"
        )
        .into());
    };
    let status = Command::new(&bin).args(&a.args).status().map_err(|e| format!("{}: {e}", bin.display()))?;
    Ok(status.code().unwrap_or(1))
}
