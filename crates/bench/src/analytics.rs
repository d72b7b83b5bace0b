//! `solidgraph-bench analytics`: BFS, WCC, PageRank and k-core out of core,
//! SolidGraph's engine against the same algorithms over plain CSR in mmap
//! (default advice and MADV_RANDOM) under the same memory limit, and against
//! SolidGraph with the whole store cached (the in-memory speed of our code),
//! and GAP (gapbs, `gap.rs`) in memory without a limit, the reference.
//!
//! Every (contender, algorithm, round) runs in its own worker process with
//! caches dropped before; the out-of-core contenders join a cgroup v1 memory
//! group of the same limit. The limit is the budget (10% of the store by
//! default) unless the algorithm's vertex state alone needs more: then the
//! limit is state + process overhead + a small cache, and the report says so.
//! SolidGraph's page cache is the limit minus state minus overhead.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use solidgraph_store::{OpenOptions, Store};

use super::common::*;
use super::kron::Kronecker;
use solidgraph_cli::util::{CliResult, parse_size};
use solidgraph_store::order::VertexOrder;

/// Smallest page cache SolidGraph gets when state eats the budget.
const MIN_CACHE: u64 = 32 << 20;

#[derive(Args)]
pub struct AnalyticsArgs {
    /// Graph500 scale of the generated graph: 2^SCALE vertices.
    #[arg(long, default_value_t = 24)]
    scale: u32,
    /// Graph500 edge factor: edges per vertex generated.
    #[arg(long, default_value_t = 16)]
    edge_factor: u64,
    /// Seed of the graph generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Work directory (default: $SOLIDGRAPH_BENCH_DIR or /work/bench, then analytics-s{SCALE}).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Rebuild the edge file, store and CSR files even when present.
    #[arg(long)]
    fresh: bool,
    /// The store's vertex order (`import --order`); the CSR baselines keep
    /// the generator's ids either way. Degree order reads fewer bytes per
    /// pass (docs/PERFORMANCE.md, Store format and layout).
    #[arg(long, default_value = "degree", value_parser = solidgraph_cli::util::parse_order)]
    order: VertexOrder,
    /// Import the store with lower lists (`import --lower-lists`: every
    /// edge once more, in half the bytes), which PageRank and WCC read.
    /// `--lower-lists false` for the store without them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    lower_lists: bool,
    /// Algorithms, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "bfs,wcc,pagerank,kcore")]
    algos: Vec<Algo>,
    /// PageRank iterations.
    #[arg(long, default_value_t = 10)]
    iterations: u32,
    /// Memory budget as a share of the store's size.
    #[arg(long, default_value_t = 0.10)]
    budget_fraction: f64,
    /// Memory budget in bytes (overrides --budget-fraction).
    #[arg(long, value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// Rounds over all contenders (order rotated); medians are shown.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Time cap of one SolidGraph run (out of core or cached).
    #[arg(long, default_value_t = 600.0)]
    max_seconds: f64,
    /// Time cap of one mmap baseline run (default advice thrashes with 8 MiB readahead).
    #[arg(long, default_value_t = 60.0)]
    baseline_max_seconds: f64,
    /// Skip contenders, comma-separated (e.g. mmap,cached).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<Contender>,
    /// Seconds of `bench io --pattern read --block 1MiB` for the device's sequential bandwidth (0: skip).
    #[arg(long, default_value_t = 5.0)]
    io_seconds: f64,
    /// I/Os in flight per store member (the store's read queue depth).
    #[arg(long, default_value_t = 64)]
    inflight: usize,
    /// Memory for the import's sort.
    #[arg(long, default_value = "4GiB", value_parser = parse_size)]
    import_memory: u64,
    /// I/O backend: uring (default where io_uring works) or posix.
    #[arg(long)]
    backend: Option<String>,
    /// gapbs's source directory, copied and built with `make` into the
    /// work directory (the `gap` contender; skipped with a note when absent).
    #[arg(long, default_value = super::gap::DEFAULT_SOURCE)]
    gapbs: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    Bfs,
    Wcc,
    Pagerank,
    Kcore,
}

impl Algo {
    fn name(self) -> &'static str {
        match self {
            Algo::Bfs => "bfs",
            Algo::Wcc => "wcc",
            Algo::Pagerank => "pagerank",
            Algo::Kcore => "kcore",
        }
    }

    /// Peak bytes per vertex of the vertex state (engine and baselines
    /// alike): BFS levels i64 + the frontiers (the engine's three bitsets;
    /// the baseline's u32 lists, at most n between two levels); WCC parents
    /// u64; PageRank two f64 arrays + the engine's u32 out-degrees (it pulls
    /// after the first iteration); k-core value and support u32 + three
    /// bitsets (the engine's; the peeling baseline holds three u32 arrays,
    /// 12 B, and gets the same limit). A renumbered store adds its map back
    /// to the user's ids, 4 B, loaded to reindex the result.
    fn state_per_vertex(self, order: VertexOrder) -> u64 {
        let map = if order == VertexOrder::Degree { 4 } else { 0 };
        map + match self {
            Algo::Bfs => 12,
            Algo::Wcc => 8,
            Algo::Pagerank => 20,
            Algo::Kcore => 9,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contender {
    Solidgraph,
    Mmap,
    MmapRandom,
    Cached,
    Gap,
}

const CONTENDERS: [Contender; 5] = [Contender::Solidgraph, Contender::Mmap, Contender::MmapRandom, Contender::Cached, Contender::Gap];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Solidgraph => "solidgraph",
            Contender::Mmap => "mmap",
            Contender::MmapRandom => "mmap-random",
            Contender::Cached => "cached",
            Contender::Gap => "gap",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Contender::Solidgraph => "(S) SolidGraph out of core",
            Contender::Mmap => "(a) CSR mmap",
            Contender::MmapRandom => "(a) CSR mmap MADV_RANDOM",
            Contender::Cached => "(b) SolidGraph all cached",
            Contender::Gap => "(g) GAP in memory, no limit",
        }
    }
}

#[derive(Args)]
pub struct AnalyticsWorkerArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, value_enum)]
    contender: Contender,
    #[arg(long, value_enum)]
    algo: Algo,
    #[arg(long)]
    source: u64,
    #[arg(long)]
    iterations: u32,
    #[arg(long)]
    cache_bytes: u64,
    /// SolidGraph out of core: the memory limit its page cache lives in
    /// (then --cache-bytes is ignored: the cache is the limit less the
    /// measured footprint, `--state-bytes` and headroom).
    #[arg(long, default_value_t = 0)]
    memory_limit: u64,
    /// The algorithm's vertex state, allocated after the probe.
    #[arg(long, default_value_t = 0)]
    state_bytes: u64,
    #[arg(long)]
    inflight: usize,
    /// Where to write the result array (raw little-endian).
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    cgroup: Option<PathBuf>,
    #[arg(long)]
    backend: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct WorkerReport {
    seconds: f64,
    /// Seconds of the warm-up runs (cached contender only), in all and
    /// each.
    warmup_seconds: Option<f64>,
    #[serde(default)]
    warmup_runs: Vec<f64>,
    /// Bytes our volume read (SolidGraph) during the timed run.
    volume_bytes: Option<u64>,
    ios: Option<u64>,
    cache_hits: Option<u64>,
    cache_misses: Option<u64>,
    os_read_bytes: u64,
    major_faults: u64,
    /// BFS levels, PageRank iterations, k-core degree scan + rounds; 1 for WCC.
    passes: u64,
    /// SolidGraph's page cache, and what of the limit was left out of it:
    /// the process's measured footprint and headroom (out of core only).
    #[serde(default)]
    cache_bytes: Option<u64>,
    #[serde(default)]
    footprint_bytes: Option<u64>,
    #[serde(default)]
    headroom_bytes: Option<u64>,
}

impl WorkerReport {
    fn empty() -> WorkerReport {
        WorkerReport { passes: 1, ..Default::default() }
    }
}

struct Run {
    c: Contender,
    algo: Algo,
    /// None when capped.
    w: Option<WorkerReport>,
    peak: Option<u64>,
    result: PathBuf,
}

pub fn run(a: AnalyticsArgs) -> CliResult {
    if a.rounds == 0 || a.algos.is_empty() {
        return Err(BenchError::Invalid("--rounds and --algos must not be empty".into()).into());
    }
    let progress = Progress { hidden: a.json };
    let source = Source::Generated(Kronecker::new(a.scale, a.edge_factor, a.seed).map_err(BenchError::Invalid)?);
    let dir = a.dir.clone().unwrap_or_else(|| bench_root().join(format!("analytics-s{}", a.scale)));
    let spec =
        GraphSpec { source, dir, fresh: a.fresh, import_memory: a.import_memory, backend: a.backend.clone(), order: a.order, lower_lists: a.lower_lists };
    let g = prepare_graph(&spec, &progress, &|_| Ok(Vec::new()))?;
    if g.meta.id_bytes != 4 {
        return Err(BenchError::Invalid("the mmap baselines read u32 column indices (at most 2^32 vertices)".into()).into());
    }
    let files = g.files()?;
    let n = g.meta.nodes;
    let budget = a.memory_budget.unwrap_or((g.store_bytes as f64 * a.budget_fraction) as u64);
    // BFS from a vertex with edges (as Graph500 picks roots).
    let bfs_source = draw_ids(&g.l, g.meta, a.seed, 1, true)?[0];
    let results = g.l.dir.join("results");
    std::fs::create_dir_all(&results).map_err(file_err(&results))?;

    let seq = if a.io_seconds > 0.0 {
        let pb = progress.bar(0, "bench io");
        let r = device_io(&g.l.dir, "read", 1 << 20, 64, a.io_seconds, &a.backend)?;
        pb.finish_and_clear();
        Some(r)
    } else {
        None
    };

    let cgroups = cgroups_usable();
    let mut contenders: Vec<Contender> = CONTENDERS.iter().copied().filter(|c| !a.skip.contains(c)).collect();
    if !contenders.contains(&Contender::Solidgraph) {
        return Err(BenchError::Invalid("solidgraph cannot be skipped".into()).into());
    }
    let mut failures: Vec<String> = Vec::new();
    let gap = if !contenders.contains(&Contender::Gap) {
        None
    } else if !a.gapbs.join("src/bfs.cc").exists() {
        failures.push(format!("gap: no gapbs source at {} (--gapbs)", a.gapbs.display()));
        contenders.retain(|&c| c != Contender::Gap);
        None
    } else {
        let pb = progress.bar(0, "gapbs build");
        let gap = super::gap::Gap::prepare(&a.gapbs, &g.l.dir.join("gap"), &g.l, n, g.meta.edges)?;
        pb.finish_and_clear();
        Some(gap)
    };
    let mut runs: Vec<Run> = Vec::new();
    for round in 0..a.rounds {
        for &algo in &a.algos {
            let state = algo.state_per_vertex(a.order) * n;
            let limit = budget.max(state + PROCESS_OVERHEAD + MIN_CACHE);
            for k in 0..contenders.len() {
                let c = contenders[(round + k) % contenders.len()];
                if c == Contender::Gap {
                    // In memory, no limit; its read time is not timed.
                    let gap = gap.as_ref().expect("prepared above");
                    // Only k-core's reference writes a result.
                    let out = if algo == Algo::Kcore { results.join(format!("gap-kcore-r{round}.bin")) } else { PathBuf::new() };
                    let seconds = gap.run(algo, bfs_source, a.iterations, &out)?;
                    let w = WorkerReport { seconds, ..WorkerReport::empty() };
                    runs.push(Run { c, algo, w: Some(w), peak: None, result: out });
                    continue;
                }
                drop_caches(&files);
                let in_cg = c != Contender::Cached && cgroups;
                let cg = if in_cg { Some(Cgroup::create(&format!("{}-{}", c.name(), algo.name()), limit)?) } else { None };
                let out = results.join(format!("{}-{}-r{round}.bin", c.name(), algo.name()));
                // S sizes its own cache within the limit (see cache_within).
                let (cache_bytes, memory_limit) = match c {
                    Contender::Solidgraph => (0, limit),
                    Contender::Cached => (g.store_bytes + (64 << 20), 0),
                    _ => (0, 0),
                };
                let mut args: Vec<OsString> = ["analytics-worker", "--contender", c.name(), "--algo", algo.name(), "--dir"].map(OsString::from).to_vec();
                args.push(g.l.dir.clone().into());
                args.push("--out".into());
                args.push(out.clone().into());
                for (k, v) in [
                    ("--source", bfs_source.to_string()),
                    ("--iterations", a.iterations.to_string()),
                    ("--cache-bytes", cache_bytes.to_string()),
                    ("--memory-limit", memory_limit.to_string()),
                    ("--state-bytes", state.to_string()),
                    ("--inflight", a.inflight.to_string()),
                ] {
                    args.push(k.into());
                    args.push(v.into());
                }
                if let Some(b) = &a.backend {
                    args.push("--backend".into());
                    args.push(b.into());
                }
                let cap = match c {
                    Contender::Mmap | Contender::MmapRandom => a.baseline_max_seconds,
                    Contender::Cached => 2.0 * a.max_seconds,
                    Contender::Solidgraph | Contender::Gap => a.max_seconds,
                };
                let pb = progress.bar(0, c.name());
                pb.set_style(indicatif::ProgressStyle::with_template("{msg:>12} {prefix} {spinner} {elapsed}").expect("static template"));
                pb.set_prefix(format!("{} round {}/{}", algo.name(), round + 1, a.rounds));
                pb.enable_steady_tick(Duration::from_millis(200));
                let _ = std::fs::remove_file(&out);
                let end = run_worker(&format!("{}-{}", c.name(), algo.name()), &args, cg.as_ref(), Some(Duration::from_secs_f64(cap)));
                pb.finish_and_clear();
                let w = match end {
                    Ok(WorkerEnd::Done(line)) => Some(
                        serde_json::from_str::<WorkerReport>(&line)
                            .map_err(|e| BenchError::Worker { contender: c.name(), reason: format!("bad report {line:?}: {e}") })?,
                    ),
                    Ok(WorkerEnd::Capped) => None,
                    // A run that fails (e.g. killed at the memory limit) is
                    // reported, and the others go on.
                    Err(e) => {
                        eprintln!("warning: {e}");
                        failures.push(format!("{} {}: {e}", algo.name(), c.name()));
                        None
                    }
                };
                let peak = cg.as_ref().and_then(|g| g.read("memory.max_usage_in_bytes"));
                runs.push(Run { c, algo, w, peak, result: out });
            }
        }
    }
    let verified = verify(&runs, &a.algos)?;
    for r in runs.iter().filter(|r| !r.result.as_os_str().is_empty()) {
        let _ = std::fs::remove_file(&r.result);
    }
    let rep = Report { a: &a, g: &g, budget, bfs_source, cgroups, seq, runs, verified, contenders, failures };
    if a.json {
        println!("{}", rep.json());
    } else {
        rep.print();
    }
    Ok(())
}

/// Compares every finished run's result with SolidGraph's: BFS levels, WCC
/// labels (smallest vertex of the component: same partition) and core
/// numbers exactly, PageRank within 1e-6 relative.
fn verify(runs: &[Run], algos: &[Algo]) -> CliResult<Vec<String>> {
    let mut notes = Vec::new();
    for &algo in algos {
        let Some(reference) = runs.iter().find(|r| r.algo == algo && r.c == Contender::Solidgraph && r.w.is_some()) else {
            notes.push(format!("{}: SolidGraph was capped, nothing verified", algo.name()));
            continue;
        };
        let want = std::fs::read(&reference.result).map_err(file_err(&reference.result))?;
        let mut checked = 0;
        // gapbs prints no per-vertex result; the k-core reference does.
        for r in runs.iter().filter(|r| r.algo == algo && r.w.is_some() && !r.result.as_os_str().is_empty() && !std::ptr::eq(*r, reference)) {
            let got = std::fs::read(&r.result).map_err(file_err(&r.result))?;
            let ok = match algo {
                Algo::Pagerank => {
                    got.len() == want.len()
                        && got.chunks_exact(8).zip(want.chunks_exact(8)).all(|(x, y)| {
                            let (x, y) = (f64::from_le_bytes(x.try_into().unwrap()), f64::from_le_bytes(y.try_into().unwrap()));
                            (x - y).abs() <= 1e-6 * x.abs().max(y.abs())
                        })
                }
                _ => got == want,
            };
            if !ok {
                return Err(BenchError::Invalid(format!("{}: {} disagrees with solidgraph", algo.name(), r.c.name())).into());
            }
            checked += 1;
        }
        notes.push(format!("{}: {checked} run(s) agree with SolidGraph", algo.name()));
    }
    Ok(notes)
}

struct Report<'a> {
    a: &'a AnalyticsArgs,
    g: &'a Graph,
    budget: u64,
    bfs_source: u64,
    cgroups: bool,
    seq: Option<solidgraph_io::bench::IoBenchResult>,
    runs: Vec<Run>,
    verified: Vec<String>,
    contenders: Vec<Contender>,
    failures: Vec<String>,
}

struct Cell {
    /// Median seconds of finished rounds; None when every round was capped.
    seconds: Option<f64>,
    capped: usize,
    rounds: usize,
    run: Option<usize>,
}

const BAR_VS_MMAP: f64 = 2.0;
const BAR_VS_CACHED: f64 = 3.0;
const BAR_SEQ_SHARE: f64 = 0.8;

impl Report<'_> {
    fn cell(&self, c: Contender, algo: Algo) -> Cell {
        let idx: Vec<usize> = (0..self.runs.len()).filter(|&i| self.runs[i].c == c && self.runs[i].algo == algo).collect();
        let mut fin: Vec<(f64, usize)> = idx.iter().filter_map(|&i| self.runs[i].w.as_ref().map(|w| (w.seconds, i))).collect();
        fin.sort_by(|x, y| x.0.total_cmp(&y.0));
        let capped = idx.len() - fin.len();
        // A capped round counts as slower than any finished one.
        let mid = (idx.len().max(1) - 1) / 2;
        let (seconds, run) = if mid < fin.len() { (Some(fin[mid].0), Some(fin[mid].1)) } else { (None, None) };
        Cell { seconds, capped, rounds: idx.len(), run }
    }

    fn cap(&self, c: Contender) -> f64 {
        match c {
            Contender::Mmap | Contender::MmapRandom => self.a.baseline_max_seconds,
            Contender::Cached => 2.0 * self.a.max_seconds,
            Contender::Solidgraph | Contender::Gap => self.a.max_seconds,
        }
    }

    /// (S / GAP, cached / GAP): our seconds over gapbs's in-memory ones.
    fn vs_gap(&self, algo: Algo) -> (Option<f64>, Option<f64>) {
        let g = self.cell(Contender::Gap, algo).seconds;
        let over = |c| self.cell(c, algo).seconds.zip(g).map(|(s, g)| s / g.max(1e-9));
        (over(Contender::Solidgraph), over(Contender::Cached))
    }

    /// Seconds of the better mmap baseline (a capped one counts as its cap,
    /// a lower bound) and whether it was capped.
    fn mmap_best(&self, algo: Algo) -> Option<(f64, bool, Contender)> {
        [Contender::Mmap, Contender::MmapRandom]
            .iter()
            .filter(|c| self.contenders.contains(c))
            .map(|&c| {
                let cell = self.cell(c, algo);
                match cell.seconds {
                    Some(s) => (s, false, c),
                    None => (self.cap(c), true, c),
                }
            })
            .min_by(|x, y| x.0.total_cmp(&y.0))
    }

    /// S's (page cache, footprint, headroom) in its median run.
    fn s_budget(&self, algo: Algo) -> Option<(u64, u64, u64)> {
        let w = self.runs[self.cell(Contender::Solidgraph, algo).run?].w.as_ref()?;
        Some((w.cache_bytes?, w.footprint_bytes?, w.headroom_bytes?))
    }

    /// S's read bandwidth over its timed run, MiB/s.
    fn s_mib_s(&self, algo: Algo) -> Option<f64> {
        let cell = self.cell(Contender::Solidgraph, algo);
        let w = self.runs[cell.run?].w.as_ref()?;
        Some(w.volume_bytes? as f64 / (1 << 20) as f64 / w.seconds.max(1e-9))
    }

    fn verdicts(&self, algo: Algo) -> (Option<f64>, Option<bool>, Option<f64>, Option<bool>) {
        let s = self.cell(Contender::Solidgraph, algo).seconds;
        let vs_a = match (s, self.mmap_best(algo)) {
            (Some(s), Some((m, _, _))) => Some(m / s),
            _ => None,
        };
        // A capped baseline only gives a lower bound: met if even that clears the bar.
        let a_met = vs_a.map(|r| r >= BAR_VS_MMAP);
        let vs_b = match (s, self.cell(Contender::Cached, algo).seconds) {
            (Some(s), Some(b)) => Some(s / b),
            _ => None,
        };
        let seq_ok = match (self.s_mib_s(algo), &self.seq) {
            (Some(bw), Some(d)) => bw >= BAR_SEQ_SHARE * d.mib_s,
            _ => false,
        };
        let b_met = vs_b.map(|r| r <= BAR_VS_CACHED || seq_ok);
        (vs_a, a_met, vs_b, b_met)
    }

    fn json(&self) -> serde_json::Value {
        let mut rows = Vec::new();
        for &algo in &self.a.algos {
            let mut cs = serde_json::Map::new();
            for &c in &self.contenders {
                let cell = self.cell(c, algo);
                let w = cell.run.and_then(|i| self.runs[i].w.clone());
                let peak = cell.run.and_then(|i| self.runs[i].peak);
                cs.insert(
                    c.name().into(),
                    serde_json::json!({
                        "seconds": cell.seconds, "capped_rounds": cell.capped, "rounds": cell.rounds, "cap_seconds": self.cap(c),
                        "report": w, "peak_memory_bytes": peak,
                        "rounds_seconds": self.runs.iter().filter(|r| r.c == c && r.algo == algo).map(|r| r.w.as_ref().map(|w| w.seconds)).collect::<Vec<_>>(),
                    }),
                );
            }
            let (vs_a, a_met, vs_b, b_met) = self.verdicts(algo);
            let state = algo.state_per_vertex(self.a.order) * self.g.meta.nodes;
            let limit = self.budget.max(state + PROCESS_OVERHEAD + MIN_CACHE);
            let s = self.s_budget(algo);
            rows.push(serde_json::json!({
                "algo": algo.name(), "contenders": cs, "state_bytes": state, "memory_limit_bytes": limit,
                "solidgraph_cache_bytes": s.map(|s| s.0), "solidgraph_footprint_bytes": s.map(|s| s.1), "solidgraph_headroom_bytes": s.map(|s| s.2),
                "mmap_best": self.mmap_best(algo).map(|m| m.2.name()), "mmap_best_capped": self.mmap_best(algo).map(|m| m.1),
                "speedup_vs_mmap_best": vs_a, "s_over_cached": vs_b, "s_read_mib_s": self.s_mib_s(algo),
                "s_over_gap": self.vs_gap(algo).0, "cached_over_gap": self.vs_gap(algo).1,
                "bars": { "vs_mmap_2x": a_met, "within_3x_of_cached_or_80pct_seq": b_met },
            }));
        }
        serde_json::json!({
            "graph": self.g.params, "nodes": self.g.meta.nodes, "edges": self.g.meta.edges,
            "store_bytes": self.g.store_bytes, "csr_bytes": self.g.csr_bytes(), "budget_bytes": self.budget,
            "memory_enforced": self.cgroups, "bfs_source": self.bfs_source, "pagerank_iterations": self.a.iterations,
            "rounds": self.a.rounds, "device_seq_read_mib_s": self.seq.as_ref().map(|s| s.mib_s),
            "import_seconds": self.g.prep.import_seconds, "verified": self.verified, "failures": self.failures, "algos": rows,
        })
    }

    fn print(&self) {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let g = self.g;
        let n = g.meta.nodes;
        println!("graph: {}: {} vertices, {} directed edges (undirected, deduplicated)", g.params, n, g.meta.edges);
        if let (Some(s), Some(e)) = (g.prep.import_seconds, g.prep.import_input_edges) {
            println!("import: {e} input edges in {s:.1} s = {:.2} M input edges/s", e as f64 / s / 1e6);
        }
        println!(
            "store {:.0} MiB, CSR {:.0} MiB; budget {:.0} MiB ({:.0}% of the store): {}",
            mib(g.store_bytes),
            mib(g.csr_bytes()),
            mib(self.budget),
            100.0 * self.budget as f64 / g.store_bytes as f64,
            if self.cgroups { "cgroup v1 memory limit per out-of-core run (S and a); (b) unlimited" } else { "NOT enforced (not root or no cgroup v1)" }
        );
        if let Some(s) = &self.seq {
            println!(
                "device: bench io --pattern read --block 1MiB --depth 64 on {}: {:.0} MiB/s sequential ({})",
                g.l.dir.parent().unwrap_or(&g.l.dir).join("io.dat").display(),
                s.mib_s,
                s.backend
            );
        }
        println!(
            "BFS from vertex {} (has edges); PageRank {} iterations; caches dropped before every run; {} round(s), medians shown; caps: S {} s, mmap {} s",
            self.bfs_source, self.a.iterations, self.a.rounds, self.a.max_seconds, self.a.baseline_max_seconds
        );
        println!();
        println!("memory: one limit per algorithm for S and a, all each process has; vertex state is held in RAM by both and counted against it");
        println!("  (S) page cache = the limit - its process's footprint (measured: store opened, hub lists read, no cache) - state - headroom");
        println!("  (a) the OS page cache over the CSR files: whatever of the limit its process does not use");
        println!("{:<9} {:>10} {:>10} {:>10} {:>12} {:>12} {:>10}  note", "algo", "state MiB", "limit MiB", "S cache", "S footprint", "S headroom", "B/vertex");
        for &algo in &self.a.algos {
            let state = algo.state_per_vertex(self.a.order) * n;
            let limit = self.budget.max(state + PROCESS_OVERHEAD + MIN_CACHE);
            let note = if limit > self.budget { "state + 64 MiB + 32 MiB exceed the budget: limit raised" } else { "the budget" };
            let sb = self.s_budget(algo);
            let of = |f: fn((u64, u64, u64)) -> u64| sb.map_or("-".into(), |b| format!("{:.0}", mib(f(b))));
            println!(
                "{:<9} {:>10.0} {:>10.0} {:>10} {:>12} {:>12} {:>10}  {note}",
                algo.name(),
                mib(state),
                mib(limit),
                of(|b| b.0),
                of(|b| b.1),
                of(|b| b.2),
                algo.state_per_vertex(self.a.order)
            );
        }
        println!();
        println!(
            "{:<9} {:<28} {:>10} {:>10} {:>8} {:>10} {:>9} {:>8}  rounds (s)",
            "algo", "contender", "seconds", "MiB read", "passes", "MiB/pass", "pass/st", "peak MiB"
        );
        for &algo in &self.a.algos {
            for &c in &self.contenders {
                let cell = self.cell(c, algo);
                let w = cell.run.and_then(|i| self.runs[i].w.as_ref());
                let read = w.map(|w| w.volume_bytes.unwrap_or(w.os_read_bytes));
                let secs = match cell.seconds {
                    Some(s) => format!("{s:.2}"),
                    None => format!(">{:.0} capped", self.cap(c)),
                };
                let all: Vec<String> = self
                    .runs
                    .iter()
                    .filter(|r| r.c == c && r.algo == algo)
                    .map(|r| r.w.as_ref().map_or("capped".into(), |w| format!("{:.2}", w.seconds)))
                    .collect();
                let peak = cell.run.and_then(|i| self.runs[i].peak);
                println!(
                    "{:<9} {:<28} {:>10} {:>10} {:>8} {:>10} {:>9} {:>8}  {}{}",
                    algo.name(),
                    c.label(),
                    secs,
                    read.map_or("-".into(), |b| format!("{:.0}", mib(b))),
                    w.map_or("-".into(), |w| w.passes.to_string()),
                    w.zip(read).map_or("-".into(), |(w, b)| format!("{:.0}", mib(b) / w.passes.max(1) as f64)),
                    w.zip(read).map_or("-".into(), |(w, b)| format!("{:.2}", b as f64 / w.passes.max(1) as f64 / g.store_bytes as f64)),
                    peak.map_or("-".into(), |p| format!("{:.0}", mib(p))),
                    all.join(" "),
                    w.and_then(|w| w.warmup_seconds).map_or(String::new(), |s| format!(" (warm-up {s:.2})")),
                );
            }
        }
        println!();
        let pass = |ok: Option<bool>| match ok {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "n/a",
        };
        for &algo in &self.a.algos {
            let (vs_a, a_met, vs_b, b_met) = self.verdicts(algo);
            let best = self.mmap_best(algo);
            println!(
                "{:<9} S/a(best {}{}): {}  bar >= {BAR_VS_MMAP}x: {}   S/b: {}  S read {} MiB/s{}  bar (<= {BAR_VS_CACHED}x or >= 80% seq): {}",
                algo.name(),
                best.map_or("-", |b| b.2.name()),
                if best.is_some_and(|b| b.1) { ", capped: lower bound" } else { "" },
                vs_a.map_or("-".into(), |r| format!("{}{r:.2}x", if best.is_some_and(|b| b.1) { ">=" } else { "" })),
                pass(a_met),
                vs_b.map_or("-".into(), |r| format!("{r:.2}x")),
                self.s_mib_s(algo).map_or("-".into(), |b| format!("{b:.0}")),
                self.seq.as_ref().zip(self.s_mib_s(algo)).map_or(String::new(), |(d, b)| format!(" = {:.0}% of seq", 100.0 * b / d.mib_s)),
                pass(b_met),
            );
        }
        if self.contenders.contains(&Contender::Gap) {
            println!(
                "GAP (gapbs, in memory, no memory limit: the reference; its results are not compared, it prints none; k-core, which gapbs lacks: Batagelj-Zaversnik peeling on the .sg in RAM, one thread, core numbers compared):"
            );
            for &algo in &self.a.algos {
                let (s, b) = self.vs_gap(algo);
                let x = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}x"));
                println!("{:<9} S/GAP: {} (bar <= 3x)   b/GAP: {} (bar <= 1.5x)", algo.name(), x(s), x(b));
            }
        }
        println!("verified: {}", self.verified.join("; "));
        for f in &self.failures {
            println!("FAILED (counted as capped): {f}");
        }
        println!(
            "MiB read: our volume's bytes (S, b) or /proc/self/io read_bytes (mmap); pass/st: bytes read per pass / store size; passes: BFS levels, PR iterations, k-core degree scan + h-index rounds, WCC 1"
        );
    }
}

/// Entry of the hidden `analytics-worker` subcommand: one algorithm
/// on one contender, timed, result written to `--out`.
pub fn worker(a: AnalyticsWorkerArgs) -> CliResult {
    join_cgroup(&a.cgroup)?;
    let l = Layout { dir: a.dir.clone() };
    let (io0, f0) = (os_read_bytes(), major_faults());
    let mut rep = WorkerReport {
        seconds: 0.0,
        warmup_seconds: None,
        warmup_runs: Vec::new(),
        volume_bytes: None,
        ios: None,
        cache_hits: None,
        cache_misses: None,
        os_read_bytes: 0,
        major_faults: 0,
        passes: 1,
        cache_bytes: None,
        footprint_bytes: None,
        headroom_bytes: None,
    };
    let result: Res = match a.contender {
        Contender::Gap => return Err(BenchError::Invalid("gap runs its own binaries, not a worker".into()).into()),
        Contender::Solidgraph | Contender::Cached => {
            let opts = OpenOptions { cache_bytes: a.cache_bytes, backend: backend_choice(&a.backend)?, inflight_per_member: a.inflight, ..Default::default() };
            let cache_bytes = if a.contender == Contender::Solidgraph && a.memory_limit > 0 {
                let (cache, footprint, headroom) = cache_within(&a, &l, &opts)?;
                (rep.cache_bytes, rep.footprint_bytes, rep.headroom_bytes) = (Some(cache), Some(footprint), Some(headroom));
                cache
            } else {
                a.cache_bytes
            };
            let store = Store::open(&l.store(), &OpenOptions { cache_bytes, ..opts })?;
            if a.contender == Contender::Cached {
                // Until a run misses no page: a page enters
                // the cache from its second read on, the filled share about
                // doubling with each run (`cache::Image`).
                let t = Instant::now();
                for _ in 0..WARMUP_RUNS {
                    store.reset_stats();
                    let r = Instant::now();
                    engine_run(&store, &a)?;
                    rep.warmup_runs.push(r.elapsed().as_secs_f64());
                    // A BFS maps its source through the order table's
                    // pages every run: what counts is that the cache served
                    // the run's pages and missed none (a cache too small
                    // for the store serves nothing: its passes read
                    // straight from the volume).
                    let c = store.stats().cache;
                    if c.misses == 0 && c.hits > 0 {
                        break;
                    }
                }
                rep.warmup_seconds = Some(t.elapsed().as_secs_f64());
            }
            store.reset_stats();
            let (io0, f0) = (os_read_bytes(), major_faults());
            let t = Instant::now();
            let (bytes, passes) = engine_run(&store, &a)?;
            rep.seconds = t.elapsed().as_secs_f64();
            rep.os_read_bytes = os_read_bytes() - io0;
            rep.major_faults = major_faults() - f0;
            let passes = match (&bytes, a.algo) {
                (Res::I64(levels), Algo::Bfs) => bfs_levels(levels),
                _ => passes,
            };
            let s = store.stats();
            rep.volume_bytes = Some(s.bytes_read());
            rep.ios = Some(s.ios());
            rep.cache_hits = Some(s.cache.hits);
            rep.cache_misses = Some(s.cache.misses);
            rep.passes = passes;
            bytes
        }
        Contender::Mmap | Contender::MmapRandom => {
            let csr = MmapCsr::open(&l, a.contender == Contender::MmapRandom)?;
            let t = Instant::now();
            let (bytes, passes) = baseline::run(&csr, a.algo, a.source, a.iterations);
            rep.seconds = t.elapsed().as_secs_f64();
            rep.os_read_bytes = os_read_bytes() - io0;
            rep.major_faults = major_faults() - f0;
            rep.passes = passes;
            bytes
        }
    };
    // Out of the memory limit before writing: the result file's page cache
    // is not the run's memory.
    leave_cgroup(&a.cgroup)?;
    result.write(&a.out)?;
    println!("{}", serde_json::to_string(&rep)?);
    Ok(())
}

/// SolidGraph's page cache within `a.memory_limit`, the memory the mmap
/// contenders' OS page cache shares with their state: the limit less this
/// process's footprint (binary, the store's tables, I/O buffers), measured
/// by opening the store without a cache and reading the lists of vertices
/// spread over its id range with direct I/O (the hubs' lists alone would
/// measure their result, not the process), less
/// the algorithm's vertex state and headroom for the engine's chunk
/// buffers. Returns (cache, footprint, headroom).
fn cache_within(a: &AnalyticsWorkerArgs, l: &Layout, opts: &OpenOptions) -> CliResult<(u64, u64, u64)> {
    {
        let probe = Store::open(&l.store(), &OpenOptions { cache_bytes: 0, ..opts.clone() })?;
        let n = probe.num_nodes();
        let ids: Vec<u64> = (0..PROBE_VERTICES.min(n)).map(|k| k * n / PROBE_VERTICES.min(n).max(1)).collect();
        probe.neighbors(&ids, solidgraph_store::Direction::Out, false, false)?;
    }
    let footprint = a.cgroup.as_deref().and_then(|g| read_u64(&g.join("memory.max_usage_in_bytes"))).unwrap_or_else(peak_rss);
    let headroom = HEADROOM_MIN.max(footprint / 4);
    let cache = a.memory_limit.saturating_sub(footprint + a.state_bytes + headroom).max(PAGE);
    Ok((cache, footprint, headroom))
}

/// Most runs the cached contender makes before its timed one: a pass that
/// reads each page once fills the whole image by its fifth.
const WARMUP_RUNS: usize = 8;

/// Vertices whose lists the footprint probe reads (store ids, evenly spaced).
const PROBE_VERTICES: u64 = 256;
/// At least this much of the limit stays free of SolidGraph's page cache
/// (a quarter of the footprint if more): the engine's frontier chunks and
/// readers' buffers come after the probe, and anonymous memory over a
/// cgroup's limit is not reclaimed but killed.
const HEADROOM_MIN: u64 = 32 << 20;

/// An algorithm's per-vertex result, kept typed until the timed run is
/// over and the worker has left its cgroup (a byte copy would double the
/// state inside the memory limit).
enum Res {
    I64(Vec<i64>),
    U64(Vec<u64>),
    F64(Vec<f64>),
    U32(Vec<u32>),
}

impl Res {
    fn write(&self, path: &Path) -> CliResult {
        let f = File::create(path).map_err(file_err(path))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let res = match self {
            Res::I64(x) => x.iter().try_for_each(|v| w.write_all(&v.to_le_bytes())),
            Res::U64(x) => x.iter().try_for_each(|v| w.write_all(&v.to_le_bytes())),
            Res::F64(x) => x.iter().try_for_each(|v| w.write_all(&v.to_le_bytes())),
            Res::U32(x) => x.iter().try_for_each(|v| w.write_all(&v.to_le_bytes())),
        };
        res.and_then(|()| w.flush()).map_err(file_err(path))?;
        Ok(())
    }
}

/// Runs the algorithm with SolidGraph's engine; the result as raw bytes and
/// the number of passes.
/// A BFS's levels, the source's included.
fn bfs_levels(levels: &[i64]) -> u64 {
    levels.iter().filter(|&&l| l != solidgraph_engine::bfs::UNREACHED).max().copied().unwrap_or(0) as u64 + 1
}

fn engine_run(store: &Store, a: &AnalyticsWorkerArgs) -> CliResult<(Res, u64)> {
    use solidgraph_engine as e;
    let silent: e::Progress = &e::silent;
    Ok(match a.algo {
        // Levels are counted by the caller, after the clock stops (GAP's
        // time does not count its bookkeeping either).
        Algo::Bfs => (Res::I64(e::bfs::bfs(store, a.source, None, false, silent)?.levels), 0),
        Algo::Wcc => (Res::U64(e::wcc::wcc(store, silent)?), 1),
        Algo::Pagerank => {
            let r = e::pagerank::pagerank(store, 0.85, a.iterations, None, silent)?;
            (Res::F64(r.ranks), r.iterations as u64)
        }
        Algo::Kcore => {
            let passes = std::sync::atomic::AtomicU64::new(0);
            let count = |_: &str, _: u64, _: u64| {
                passes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            };
            let core = e::kcore::kcore(store, &count)?;
            (Res::U32(core), passes.into_inner())
        }
    })
}

/// The same algorithms written plainly over CSR slices (mmap'ed files):
/// direction-optimizing BFS, min-root union-find WCC, push PageRank with the
/// Graphalytics dangling rule, Batagelj-Zaversnik k-core. One thread.
pub(crate) mod baseline {
    use super::{Algo, MmapCsr, Res};
    // The engine's state arrays (on huge pages), so both sides pay the
    // same for a random read of vertex state.
    use solidgraph_engine::state;

    struct G<'a> {
        rp: &'a [u64],
        ci: &'a [u32],
    }

    impl G<'_> {
        #[inline]
        fn row(&self, v: usize) -> &[u32] {
            &self.ci[self.rp[v] as usize..self.rp[v + 1] as usize]
        }
    }

    /// Batagelj-Zaversnik (2003): O(m) peeling by bucket sort of the
    /// degrees; the core number of every vertex of the symmetric CSR
    /// (`rp`: n + 1 offsets into `ci`), self-loops ignored.
    pub(crate) fn kcore(rp: &[u64], ci: &[u32]) -> Vec<u32> {
        let g = G { rp, ci };
        let n = rp.len() - 1;
        let mut deg: Vec<u32> = state::from_fn(n, |v| g.row(v).iter().filter(|&&u| u as usize != v).count() as u32);
        let maxd = deg.iter().copied().max().unwrap_or(0) as usize;
        let mut bin = vec![0u32; maxd + 2];
        deg.iter().for_each(|&d| bin[d as usize + 1] += 1);
        for d in 1..bin.len() {
            bin[d] += bin[d - 1];
        }
        let (mut vert, mut pos) = (state::filled(n, 0u32), state::filled(n, 0u32));
        let mut fill = bin.clone();
        for v in 0..n {
            let d = deg[v] as usize;
            pos[v] = fill[d];
            vert[fill[d] as usize] = v as u32;
            fill[d] += 1;
        }
        for i in 0..n {
            let v = vert[i] as usize;
            for &u in g.row(v) {
                let u = u as usize;
                if u != v && deg[u] > deg[v] {
                    let du = deg[u] as usize;
                    let (pu, pw) = (pos[u] as usize, bin[du] as usize);
                    let w = vert[pw] as usize;
                    if u != w {
                        vert.swap(pu, pw);
                        pos[u] = pw as u32;
                        pos[w] = pu as u32;
                    }
                    bin[du] += 1;
                    deg[u] -= 1;
                }
            }
        }
        deg
    }

    pub(super) fn run(csr: &MmapCsr, algo: Algo, source: u64, iterations: u32) -> (Res, u64) {
        let n = csr.meta.nodes as usize;
        // SAFETY: mmaps are page aligned; the files hold n + 1 u64 and
        // `edges` u32 little-endian values (checked at open); x86/ARM LE.
        let g = unsafe {
            G {
                rp: std::slice::from_raw_parts(csr.rowptr.as_ptr() as *const u64, n + 1),
                ci: std::slice::from_raw_parts(csr.colidx.as_ptr() as *const u32, csr.meta.edges as usize),
            }
        };
        match algo {
            Algo::Bfs => {
                // Beamer's switch rule and constants: bottom-up once the
                // frontier's edges exceed 1/14 of the unvisited ones', back
                // to top-down once it holds under 1/24 of the vertices.
                const ALPHA: u64 = 14;
                const BETA: usize = 24;
                // The graph is undirected: a row is its in-list too.
                let deg = |v: u32| g.rp[v as usize + 1] - g.rp[v as usize];
                let mut level = state::filled(n, i64::MAX);
                level[source as usize] = 0;
                let mut in_frontier = vec![0u64; n.div_ceil(64)];
                let mut frontier = vec![source as u32];
                let mut unvisited_edges = g.rp[n] - deg(source as u32);
                let (mut d, mut bottom_up) = (0, false);
                while !frontier.is_empty() {
                    let frontier_edges: u64 = frontier.iter().map(|&v| deg(v)).sum();
                    bottom_up = if bottom_up { frontier.len() >= n / BETA } else { frontier_edges > unvisited_edges / ALPHA };
                    let mut next = Vec::new();
                    if bottom_up {
                        in_frontier.iter_mut().for_each(|w| *w = 0);
                        frontier.iter().for_each(|&v| in_frontier[v as usize / 64] |= 1 << (v % 64));
                        for (v, lv) in level.iter_mut().enumerate() {
                            if *lv == i64::MAX && g.row(v).iter().any(|&u| in_frontier[u as usize / 64] >> (u % 64) & 1 == 1) {
                                *lv = d + 1;
                                next.push(v as u32);
                            }
                        }
                    } else {
                        for &v in &frontier {
                            for &u in g.row(v as usize) {
                                if level[u as usize] == i64::MAX {
                                    level[u as usize] = d + 1;
                                    next.push(u);
                                }
                            }
                        }
                        next.sort_unstable();
                    }
                    unvisited_edges -= next.iter().map(|&v| deg(v)).sum::<u64>();
                    frontier = next;
                    d += 1;
                }
                (Res::I64(level), d as u64)
            }
            Algo::Wcc => {
                let mut p: Vec<u64> = state::from_fn(n, |v| v as u64);
                fn find(p: &mut [u64], mut v: u64) -> u64 {
                    while p[v as usize] != v {
                        let gp = p[p[v as usize] as usize];
                        p[v as usize] = gp;
                        v = gp;
                    }
                    v
                }
                for v in 0..n {
                    for &u in g.row(v) {
                        let (a, b) = (find(&mut p, v as u64), find(&mut p, u as u64));
                        if a < b {
                            p[b as usize] = a;
                        } else if b < a {
                            p[a as usize] = b;
                        }
                    }
                }
                for v in 0..n as u64 {
                    let r = find(&mut p, v);
                    p[v as usize] = r;
                }
                (Res::U64(p), 1)
            }
            Algo::Pagerank => {
                let (damping, nf) = (0.85, n as f64);
                let mut pr = state::filled(n, 1.0 / nf);
                let mut next = state::filled(n, 0.0f64);
                for _ in 0..iterations {
                    next.iter_mut().for_each(|x| *x = 0.0);
                    let mut dangling = 0.0;
                    for (v, &r) in pr.iter().enumerate() {
                        let row = g.row(v);
                        if row.is_empty() {
                            dangling += r;
                            continue;
                        }
                        let share = r / row.len() as f64;
                        for &u in row {
                            next[u as usize] += share;
                        }
                    }
                    let base = (1.0 - damping) / nf + damping * dangling / nf;
                    for (p, x) in pr.iter_mut().zip(&next) {
                        *p = base + damping * x;
                    }
                }
                (Res::F64(pr), iterations as u64)
            }
            Algo::Kcore => (Res::U32(kcore(g.rp, g.ci)), 1),
        }
    }
}
