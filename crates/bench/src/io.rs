//! `solidgraph-bench io`: raw volume I/O of one submitting thread, the
//! benchmark `solidgraph_io::bench` runs, with its arguments and report.

use std::path::PathBuf;

use clap::Args;
use solidgraph_cli::util::{CliResult, parse_size, progress_bar};
use solidgraph_io::BackendKind;
use solidgraph_io::bench::{Dist, IoBenchConfig, Pattern};

#[derive(Args)]
pub struct IoArgs {
    /// Member file or device; comma-separated for several. With --members N
    /// and one path, members are PATH.0 .. PATH.N-1.
    #[arg(long)]
    path: String,
    /// Member files the volume stripes over.
    #[arg(long, default_value_t = 1)]
    members: usize,
    /// Total size over all members (created and filled when missing).
    #[arg(long, default_value = "4GiB", value_parser = parse_size)]
    size: u64,
    /// Bytes per I/O.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    block: u64,
    /// I/Os in flight per member.
    #[arg(long, default_value_t = 64)]
    depth: usize,
    /// Seconds of measurement.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// randread, randwrite or read (sequential).
    #[arg(long, default_value = "randread")]
    pattern: String,
    /// Offsets of random patterns: uniform, or zipf:THETA (THETA > 0, != 1;
    /// as fio's --random_distribution=zipf:THETA).
    #[arg(long, default_value = "uniform")]
    dist: String,
    /// uring or posix (default: SOLIDGRAPH_IO_BACKEND, else io_uring when allowed).
    #[arg(long)]
    backend: Option<String>,
    /// Stripe unit over members.
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    stripe: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

fn member_paths(path: &str, members: usize) -> Vec<PathBuf> {
    if path.contains(',') {
        return path.split(',').map(PathBuf::from).collect();
    }
    if members <= 1 {
        return vec![PathBuf::from(path)];
    }
    (0..members).map(|i| PathBuf::from(format!("{path}.{i}"))).collect()
}

pub(crate) fn run(a: IoArgs) -> CliResult {
    let backend = a.backend.as_deref().map(str::parse::<BackendKind>).transpose()?;
    let dist = a.dist.parse::<Dist>()?;
    let cfg = IoBenchConfig {
        paths: member_paths(&a.path, a.members),
        size: a.size,
        block: a.block as usize,
        depth: a.depth,
        seconds: a.seconds,
        pattern: a.pattern.parse::<Pattern>()?,
        backend,
        stripe_bytes: a.stripe as usize,
        seed: 1,
    };
    let pb = progress_bar(a.size, "filling");
    if a.json {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let vol = solidgraph_io::bench::prepare(&cfg, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    let r = solidgraph_io::bench::run_dist(&vol, &cfg, dist)?;
    if a.json {
        let j = serde_json::json!({
            "iops": r.iops, "mib_s": r.mib_s, "p50_us": r.p50_us, "p99_us": r.p99_us,
            "backend": r.backend, "members": r.members, "ios": r.ios, "seconds": r.seconds,
            "pattern": a.pattern, "block": a.block, "depth": a.depth, "dist": a.dist,
        });
        println!("{j}");
    } else {
        println!(
            "{} {} {} block={} depth={} members={}: {:.0} IOPS, {:.1} MiB/s, p50 {:.1} us, p99 {:.1} us ({} I/Os in {:.1} s)",
            r.backend, a.pattern, a.dist, a.block, a.depth, r.members, r.iops, r.mib_s, r.p50_us, r.p99_us, r.ios, r.seconds
        );
    }
    Ok(())
}
