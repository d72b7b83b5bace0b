//! `solidgraph run ALGO PATH`: analytics with output in the LDBC
//! Graphalytics format (`vertex value` lines), so results can be validated
//! against reference outputs.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use solidgraph_engine as eng;
use solidgraph_store::{BackendKind, Direction, OpenOptions, Store};

use crate::util::{CliResult, backend_choice, for_cli, parse_backend, parse_size, parse_vertex};

/// PageRank's iterations unless --iterations says otherwise, as in Python's
/// `Graph.pagerank`: the error shrinks by the damping factor per iteration,
/// to 0.85^20 = 4% of the start after 20 (20% after 10).
const PAGERANK_ITERATIONS: u32 = 20;
/// CDLP's rounds unless --iterations says otherwise, as `Graph.cdlp`.
const CDLP_ITERATIONS: u32 = 10;

#[derive(Clone, Copy, ValueEnum)]
pub enum Algo {
    Bfs,
    Wcc,
    Pagerank,
    Sssp,
    Cdlp,
    Lcc,
    Mis,
    Kcore,
    Walks,
}

#[derive(Args)]
pub struct RunArgs {
    pub algo: Algo,
    pub path: PathBuf,
    /// Source vertex (bfs, sssp) or start of every walk (walks; default: all vertices).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_vertex)]
    pub source: Option<u64>,
    /// Stop BFS once this vertex is reached.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_vertex)]
    pub target: Option<u64>,
    /// Iterations: pagerank 20 (as Python's Graph.pagerank), cdlp 10.
    #[arg(long)]
    pub iterations: Option<u32>,
    /// PageRank damping factor, in (0, 1).
    #[arg(long, default_value_t = 0.85)]
    pub damping: f64,
    /// PageRank: stop once an iteration changes ranks by less than this (L1).
    #[arg(long)]
    pub tol: Option<f64>,
    /// Seed (mis, walks).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Walk length.
    #[arg(long, default_value_t = 16)]
    pub length: usize,
    /// Page cache for the run.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub cache: u64,
    /// Most memory the algorithm's per-vertex state may take; a larger
    /// need is refused before anything is allocated (default: the machine's memory).
    #[arg(long, value_parser = parse_size)]
    pub state_budget: Option<u64>,
    /// Write `vertex value` lines here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print a JSON summary (runtime, bytes read) instead of the values.
    #[arg(long)]
    pub json: bool,
    /// I/O backend: uring or posix (default: SOLIDGRAPH_IO_BACKEND, else io_uring when the kernel allows it).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
}

fn progress_bar() -> impl Fn(&str, u64, u64) -> Result<(), eng::Cancelled> + Sync {
    let pb = indicatif::ProgressBar::new(0);
    pb.set_style(indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {elapsed}").expect("static template").progress_chars("=> "));
    move |phase: &str, done: u64, total: u64| {
        pb.set_message(phase.to_string());
        pb.set_length(total);
        pb.set_position(done);
        Ok(())
    }
}

fn algo_name(a: Algo) -> String {
    a.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
}

fn fmt_f64(x: f64) -> String {
    if x.is_infinite() { "Infinity".into() } else { format!("{x:.15e}") }
}

pub fn run_cmd(a: RunArgs) -> CliResult {
    run(a).map_err(for_cli)
}

fn run(a: RunArgs) -> CliResult {
    eng::state::set_budget(a.state_budget.unwrap_or(0));
    let store = Store::open(&a.path, &OpenOptions { cache_bytes: a.cache, backend: backend_choice(a.backend), ..Default::default() })?;
    let n = store.num_nodes();
    let need_source = || a.source.ok_or("--source is required for this algorithm");
    let pb = progress_bar();
    let progress: eng::Progress = if a.json || a.out.is_none() { &eng::silent } else { &pb };
    let t0 = std::time::Instant::now();
    // Values as text, one per vertex (walks: one line per walk).
    let lines: Box<dyn Fn(u64) -> String> = match a.algo {
        Algo::Bfs => {
            let r = eng::bfs::bfs(&store, need_source()?, a.target, false, progress)?;
            Box::new(move |v| r.levels[v as usize].to_string())
        }
        Algo::Wcc => {
            let r = eng::wcc::wcc(&store, progress)?;
            Box::new(move |v| r[v as usize].to_string())
        }
        Algo::Pagerank => {
            let r = eng::pagerank::pagerank(&store, a.damping, a.iterations.unwrap_or(PAGERANK_ITERATIONS), a.tol, progress)?;
            Box::new(move |v| fmt_f64(r.ranks[v as usize]))
        }
        Algo::Sssp => {
            let r = eng::sssp::sssp(&store, need_source()?, progress)?;
            Box::new(move |v| fmt_f64(r[v as usize]))
        }
        Algo::Cdlp => {
            let r = eng::cdlp::cdlp(&store, a.iterations.unwrap_or(CDLP_ITERATIONS), progress)?;
            Box::new(move |v| r[v as usize].to_string())
        }
        Algo::Lcc => {
            let r = eng::lcc::lcc(&store, progress)?;
            Box::new(move |v| fmt_f64(r[v as usize]))
        }
        Algo::Mis => {
            let r = eng::mis::mis(&store, a.seed, progress)?;
            Box::new(move |v| (r[v as usize] as u8).to_string())
        }
        Algo::Kcore => {
            let r = eng::kcore::kcore(&store, progress)?;
            Box::new(move |v| r[v as usize].to_string())
        }
        Algo::Walks => {
            let starts: Vec<u64> = match a.source {
                Some(s) => vec![s],
                None => (0..n).collect(),
            };
            let o = eng::walks::WalkOptions { length: a.length, p: 1.0, q: 1.0, seed: a.seed, direction: Direction::Out };
            let r = eng::walks::random_walks(&store, &starts, &o)?;
            let row = a.length + 1;
            let k = starts.len() as u64;
            Box::new(move |i| {
                if i < k { r[i as usize * row..(i as usize + 1) * row].iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ") } else { String::new() }
            })
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    if a.json {
        let st = store.stats();
        println!(
            "{}",
            serde_json::json!({
                "algorithm": algo_name(a.algo), "seconds": secs, "vertices": n,
                "bytes_read": st.bytes_read(), "ios": st.ios(), "store_bytes": store.size_bytes(),
            })
        );
        return Ok(());
    }
    let mut w: Box<dyn Write> = match &a.out {
        Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let count = if matches!(a.algo, Algo::Walks) { a.source.map_or(n, |_| 1) } else { n };
    for v in 0..count {
        if matches!(a.algo, Algo::Walks) {
            writeln!(w, "{}", lines(v))?;
        } else {
            writeln!(w, "{v} {}", lines(v))?;
        }
    }
    w.flush()?;
    if let Some(p) = &a.out {
        eprintln!("{}: {count} lines written to {} in {secs:.2} s", algo_name(a.algo), p.display());
    }
    Ok(())
}
