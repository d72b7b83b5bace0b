//! `solidgraph-bench sampling`: GraphSAGE mini-batches (fanouts [25, 10],
//! batch 1024 seeds, features gathered) from SolidGraph out of core against
//! the very same sampler (same generators, same draws) over CSR + a feature
//! `.npy` in mmap, default and MADV_RANDOM, under one memory limit, and
//! against SolidGraph with the whole store cached (the DRAM oracle). Also
//! feature gather alone (store.tensor against mmap fancy indexing) and the
//! device's random-read rates at depth 64 (4 and 16 KiB) measured in the same run.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use solidgraph_engine::loader::{DEFAULT_LOOKAHEAD, PrefetchOptions, Prefetcher, batch_seed};
use solidgraph_engine::sampler::{SampleOptions, choose, rng_for};
use solidgraph_io::bench::IoBenchResult;
use solidgraph_io::sync::MutexExt;
use solidgraph_store::{Direction, OpenOptions, RowAdmission, Store, TensorData, TensorInput};

use super::common::*;
use super::kron::Kronecker;
use solidgraph_cli::util::{CliResult, parse_size};
use solidgraph_store::order::VertexOrder;

#[derive(Args)]
pub struct SamplingArgs {
    /// Graph500 scale of the generated graph: 2^SCALE vertices.
    #[arg(long, default_value_t = 24)]
    scale: u32,
    /// Graph500 edge factor: edges per vertex generated.
    #[arg(long, default_value_t = 16)]
    edge_factor: u64,
    /// Seed of the graph generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Feature dimension of the random f32 node tensor "x".
    #[arg(long, default_value_t = 128)]
    dim: u64,
    /// Work directory (default: $SOLIDGRAPH_BENCH_DIR or /work/bench, then sampling-s{SCALE}).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Rebuild the edge file, store and CSR files even when present.
    #[arg(long)]
    fresh: bool,
    /// The store's vertex order (`import --order`). The mmap baselines keep
    /// the generator's ids and features; their CSR rows list neighbors in
    /// the store's order, so they draw the same samples.
    #[arg(long, default_value = "degree", value_parser = solidgraph_cli::util::parse_order)]
    order: VertexOrder,
    /// Mini-batches measured per contender.
    #[arg(long, default_value_t = 20)]
    batches: usize,
    /// Seeds per mini-batch.
    #[arg(long, default_value_t = 1024)]
    batch_size: usize,
    /// Neighbors drawn per hop, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "25,10")]
    fanouts: Vec<i64>,
    /// Page cache as a share of the store (adjacency + features).
    #[arg(long, default_value_t = 0.05)]
    cache_fraction: f64,
    /// Memory limit per contender (default: cache + 64 MiB + twice one batch's output).
    #[arg(long, value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// Times every contender is run; medians are reported.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Stop a contender after this much measured time.
    #[arg(long, default_value_t = 30.0)]
    max_seconds: f64,
    /// Kill a worker after this long (the default mmap contender thrashes).
    #[arg(long, default_value_t = 120.0)]
    kill_seconds: f64,
    /// Threads each contender samples with, batches handed out in order
    /// (a training loader's workers; the same for every contender).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Share of SolidGraph's cache budget given to a cache of feature rows
    /// (the rest caches pages): the caching policy compared. 0.8 took the
    /// fewest I/Os per batch in the sampling setting (docs/PERFORMANCE.md,
    /// Row cache).
    #[arg(long, default_value_t = 0.8)]
    row_cache_share: f64,
    /// Rows the row cache admits once full: seen (missed before), all, or
    /// hot (of the highest-degree vertices). Adjacency pages always pass
    /// a doorkeeper once their cache is full.
    #[arg(long, value_enum, default_value_t = Admission::Seen)]
    row_admission: Admission,
    /// Batches SolidGraph's loader samples ahead of their feature gather,
    /// telling the row cache which rows they will ask for (0: none).
    #[arg(long, default_value_t = DEFAULT_LOOKAHEAD)]
    lookahead: usize,
    /// Rows per batch of the feature-gather-alone comparison (~1024 x 250).
    #[arg(long, default_value_t = 256_000)]
    gather_rows: usize,
    /// Batches of the feature-gather-alone comparison.
    #[arg(long, default_value_t = 4)]
    gather_batches: usize,
    /// Batches of the all-cached oracle (b): it first runs them once to
    /// fill the cache (cold, uncapped), then times them.
    #[arg(long, default_value_t = 5)]
    oracle_batches: usize,
    /// Skip contenders, comma-separated.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<Contender>,
    /// Seconds of `bench io` random 4 KiB reads at depth 64 (0: skip).
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
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Only build the work directory (edge file, store with "x", CSR files,
    /// features.npy) and print its paths and sizes: `make demo` trains from
    /// it in Python.
    #[arg(long)]
    prepare_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Admission {
    Seen,
    Hot,
    All,
}

impl From<Admission> for RowAdmission {
    fn from(a: Admission) -> RowAdmission {
        match a {
            Admission::Seen => RowAdmission::Seen,
            Admission::Hot => RowAdmission::Hot,
            Admission::All => RowAdmission::All,
        }
    }
}

impl Admission {
    fn name(self) -> &'static str {
        match self {
            Admission::Seen => "seen",
            Admission::Hot => "hot",
            Admission::All => "all",
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
    GatherSolidgraph,
    GatherMmap,
    GatherMmapRandom,
}

const CONTENDERS: [Contender; 7] = [
    Contender::Solidgraph,
    Contender::Mmap,
    Contender::MmapRandom,
    Contender::Cached,
    Contender::GatherSolidgraph,
    Contender::GatherMmap,
    Contender::GatherMmapRandom,
];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Solidgraph => "solidgraph",
            Contender::Mmap => "mmap",
            Contender::MmapRandom => "mmap-random",
            Contender::Cached => "cached",
            Contender::GatherSolidgraph => "gather-solidgraph",
            Contender::GatherMmap => "gather-mmap",
            Contender::GatherMmapRandom => "gather-mmap-random",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Contender::Solidgraph => "(S) SolidGraph store",
            Contender::Mmap => "(a) CSR+npy mmap",
            Contender::MmapRandom => "(a) CSR+npy mmap RANDOM",
            Contender::Cached => "(b) SolidGraph all cached",
            Contender::GatherSolidgraph => "gather: SolidGraph tensor",
            Contender::GatherMmap => "gather: npy mmap",
            Contender::GatherMmapRandom => "gather: npy mmap RANDOM",
        }
    }
    fn gather(self) -> bool {
        matches!(self, Contender::GatherSolidgraph | Contender::GatherMmap | Contender::GatherMmapRandom)
    }
    fn mmap(self) -> bool {
        matches!(self, Contender::Mmap | Contender::MmapRandom | Contender::GatherMmap | Contender::GatherMmapRandom)
    }
}

#[derive(Args, Clone)]
pub struct SamplingWorkerArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, value_enum)]
    contender: Contender,
    /// Seeds (or gather rows), back to back as u64 little-endian.
    #[arg(long)]
    batch_file: PathBuf,
    #[arg(long)]
    batch_size: usize,
    #[arg(long, value_delimiter = ',')]
    fanouts: Vec<i64>,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    cache_bytes: u64,
    #[arg(long)]
    max_seconds: f64,
    #[arg(long)]
    inflight: usize,
    /// Run only the first N batches.
    #[arg(long, default_value_t = usize::MAX)]
    limit_batches: usize,
    #[arg(long, default_value_t = 1)]
    workers: usize,
    #[arg(long, default_value_t = 0)]
    row_cache_bytes: u64,
    /// SolidGraph out of core: the memory limit its caches live in (then
    /// --cache-bytes and --row-cache-bytes are ignored: the caches are the
    /// limit less the measured footprint and headroom, split by
    /// --row-cache-share).
    #[arg(long, default_value_t = 0)]
    memory_limit: u64,
    #[arg(long, default_value_t = 0.8)]
    row_cache_share: f64,
    #[arg(long, value_enum, default_value_t = Admission::Seen)]
    row_admission: Admission,
    #[arg(long, default_value_t = DEFAULT_LOOKAHEAD)]
    lookahead: usize,
    /// Whether checksums cover edge ids: a renumbered store numbers edges
    /// in its own CSR order, which the baselines' CSR does not share.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
    edge_ids: bool,
    #[arg(long)]
    cgroup: Option<PathBuf>,
    #[arg(long)]
    backend: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct WorkerReport {
    batches: usize,
    /// Seeds (or gathered rows) in the timed batches.
    items: u64,
    /// Sampled nodes (feature rows gathered) in all.
    nodes: u64,
    seconds: f64,
    batch_p50_ms: f64,
    batch_p99_ms: f64,
    os_read_bytes: u64,
    major_faults: u64,
    volume_bytes: Option<u64>,
    ios: Option<u64>,
    pages_read: Option<u64>,
    cache_hits: Option<u64>,
    cache_misses: Option<u64>,
    /// Row cache (hits, misses), when SolidGraph had one.
    #[serde(default)]
    row_hits: Option<(u64, u64)>,
    /// Seconds SolidGraph took to open the store; counted in `seconds`
    /// (not for the oracle).
    #[serde(default)]
    open_seconds: Option<f64>,
    /// (seconds, I/Os, pages) from the end of the row cache's warm-up to
    /// the end of the run: the sampler's own I/O-bound stretch. The warm-up
    /// runs beside the first draws, its big reads paced by the kernel's
    /// zeroing of the cache's fresh memory.
    #[serde(default)]
    after_warm: Option<(f64, u64, u64)>,
    /// SolidGraph out of core: (page cache, row cache, measured footprint,
    /// headroom), the four parts of its memory limit.
    #[serde(default)]
    budget: Option<(u64, u64, u64, u64)>,
    checksums: Vec<u64>,
}

impl WorkerReport {
    /// A run's report from its batch times `lat`, before the store's
    /// counters are added; `since`: the OS read bytes and major faults at
    /// its start.
    fn timed(a: &SamplingWorkerArgs, mut lat: Vec<Duration>, nodes: u64, seconds: f64, since: (u64, u64), checksums: Vec<u64>) -> WorkerReport {
        lat.sort_unstable();
        let q = |x: f64| lat.get(((lat.len().max(1) - 1) as f64 * x).round() as usize).map_or(0.0, |d| d.as_secs_f64() * 1e3);
        WorkerReport {
            batches: lat.len(),
            items: (lat.len() * a.batch_size) as u64,
            nodes,
            seconds,
            batch_p50_ms: q(0.5),
            batch_p99_ms: q(0.99),
            os_read_bytes: os_read_bytes().saturating_sub(since.0),
            major_faults: major_faults().saturating_sub(since.1),
            volume_bytes: None,
            ios: None,
            pages_read: None,
            cache_hits: None,
            cache_misses: None,
            row_hits: None,
            open_seconds: None,
            after_warm: None,
            budget: None,
            checksums,
        }
    }

    /// (seconds, I/Os, pages) the device-use figures cover: after the
    /// warm-up when there was one, else all the batches.
    fn io_window(&self) -> Option<(f64, f64, f64)> {
        match self.after_warm {
            Some((t, ios, pages)) => Some((t.max(1e-9), ios as f64, pages as f64)),
            None => Some(((self.seconds - self.open_seconds.unwrap_or(0.0)).max(1e-9), self.ios? as f64, self.pages_read? as f64)),
        }
    }
}

struct Measured {
    c: Contender,
    /// None when killed at --kill-seconds.
    w: Option<WorkerReport>,
    peak: Option<u64>,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.w.as_ref().map_or(0.0, |w| w.items as f64 / w.seconds.max(1e-9))
    }
}

fn features_path(l: &Layout) -> PathBuf {
    l.dir.join("features.npy")
}
fn seeds_file(l: &Layout) -> PathBuf {
    l.dir.join("seeds.u64")
}
fn gather_file(l: &Layout) -> PathBuf {
    l.dir.join("gather.u64")
}

/// Random f32 features in [0, 1) as an (n, dim) `.npy` (kept when its shape fits).
fn write_features(path: &std::path::Path, n: u64, dim: u64, seed: u64, progress: &Progress) -> CliResult {
    if let Ok(h) = solidgraph_store::import::npy::read_header(path)
        && h.shape == [n, dim]
        && h.descr == "<f4"
    {
        return Ok(());
    }
    let tmp = path.with_extension("npy.partial");
    let f = File::create(&tmp).map_err(file_err(&tmp))?;
    let mut w = BufWriter::with_capacity(8 << 20, f);
    solidgraph_store::import::npy::write_header(&mut w, "<f4", &[n, dim]).map_err(file_err(&tmp))?;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6665_6174);
    let pb = progress.bar(n, "features");
    let mut row = Vec::with_capacity(4 * dim as usize);
    for v in 0..n {
        row.clear();
        row.extend((0..dim).flat_map(|_| rng.random::<f32>().to_le_bytes()));
        w.write_all(&row).map_err(file_err(&tmp))?;
        if v % 65536 == 0 {
            pb.set_position(v);
        }
    }
    pb.finish_and_clear();
    w.into_inner().map_err(|e| BenchError::File { path: tmp.clone(), source: e.into_error() })?.sync_all().map_err(file_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(file_err(path))?;
    Ok(())
}

pub fn run(a: SamplingArgs) -> CliResult {
    if a.batches == 0 || a.batch_size == 0 || a.rounds == 0 || a.fanouts.is_empty() {
        return Err(BenchError::Invalid("--batches, --batch-size, --rounds and --fanouts must be non-zero".into()).into());
    }
    let progress = Progress { hidden: a.json };
    let k = Kronecker::new(a.scale, a.edge_factor, a.seed).map_err(BenchError::Invalid)?;
    let n = k.num_nodes();
    let dir = a.dir.clone().unwrap_or_else(|| bench_root().join(format!("sampling-s{}", a.scale)));
    let spec = GraphSpec {
        source: Source::Generated(k),
        dir,
        fresh: a.fresh,
        import_memory: a.import_memory,
        backend: a.backend.clone(),
        order: a.order,
        lower_lists: false,
    };
    let t = Instant::now();
    let g = prepare_graph(&spec, &progress, &|l| {
        write_features(&features_path(l), n, a.dim, a.seed, &progress)?;
        Ok(vec![TensorInput { name: "x".into(), data: TensorData::Npy(features_path(l)) }])
    })?;
    let prep_seconds = t.elapsed().as_secs_f64();
    if a.prepare_only {
        let j = serde_json::json!({
            "dir": g.l.dir, "store": g.l.store(), "features": features_path(&g.l), "rowptr": g.l.rowptr(), "colidx": g.l.colidx(g.meta.id_bytes),
            "nodes": g.meta.nodes, "edges": g.meta.edges, "store_bytes": g.store_bytes, "csr_bytes": g.csr_bytes(), "prep_seconds": prep_seconds,
        });
        println!("{j}");
        return Ok(());
    }
    let mut files = g.files()?;
    files.push(features_path(&g.l));
    let cache_bytes = ((g.store_bytes as f64 * a.cache_fraction) as u64).max(PAGE);
    // One batch's output: every sampled node's feature row, held once by the
    // sampler and once as pages read for it; each worker thread has a batch
    // in hand.
    let fan: u64 = a
        .fanouts
        .iter()
        .scan(1u64, |acc, &f| {
            *acc *= f.max(1) as u64;
            Some(*acc)
        })
        .sum::<u64>()
        + 1;
    let batch_bytes = 2 * a.workers.max(1) as u64 * a.batch_size as u64 * fan * 4 * a.dim;
    // A renumbered store holds its map back to the user's ids (4 B per
    // vertex): the sampler answers in user ids.
    let map_bytes = if a.order == VertexOrder::Degree { 4 * n } else { 0 };
    let limit = a.memory_budget.unwrap_or(cache_bytes + PROCESS_OVERHEAD + batch_bytes + map_bytes);

    let seeds = draw_ids(&g.l, g.meta, a.seed, a.batches * a.batch_size, true)?;
    std::fs::write(seeds_file(&g.l), seeds.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).map_err(file_err(&seeds_file(&g.l)))?;
    let rows = draw_ids(&g.l, g.meta, a.seed ^ 0x6761_7468, a.gather_batches * a.gather_rows, false)?;
    std::fs::write(gather_file(&g.l), rows.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).map_err(file_err(&gather_file(&g.l)))?;

    // The device's random-read rates at 4 and 16 KiB, before and after the
    // contenders: on a shared device one reading can be far off, and the
    // bar is held against the higher of each.
    let device = |iops: &mut Vec<IoBenchResult>, iops16: &mut Vec<IoBenchResult>| -> CliResult {
        if a.io_seconds <= 0.0 {
            return Ok(());
        }
        let pb = progress.bar(0, "bench io");
        iops.push(device_io(&g.l.dir, "randread", 4096, 64, a.io_seconds, &a.backend)?);
        iops16.push(device_io(&g.l.dir, "randread", 16384, 64, a.io_seconds, &a.backend)?);
        pb.finish_and_clear();
        Ok(())
    };
    let (mut iops, mut iops16) = (Vec::new(), Vec::new());
    device(&mut iops, &mut iops16)?;

    let cgroups = cgroups_usable();
    let contenders: Vec<Contender> = CONTENDERS.iter().copied().filter(|c| !a.skip.contains(c)).collect();
    let mut runs: Vec<Measured> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for round in 0..a.rounds {
        for k in 0..contenders.len() {
            let c = contenders[(round + k) % contenders.len()];
            drop_caches(&files);
            let in_cg = cgroups && c != Contender::Cached;
            let cg = if in_cg { Some(Cgroup::create(&format!("sampling-{}", c.name()), limit)?) } else { None };
            let (bf, bs) = if c.gather() { (gather_file(&g.l), a.gather_rows) } else { (seeds_file(&g.l), a.batch_size) };
            let limit_batches = if c == Contender::Cached { a.oracle_batches.max(1) } else { usize::MAX };
            let rows = if c.mmap() || c == Contender::Cached { 0 } else { (a.row_cache_share.clamp(0.0, 1.0) * cache_bytes as f64) as u64 };
            let cb = match c {
                Contender::Cached => g.store_bytes + (64 << 20),
                _ => cache_bytes - rows,
            };
            let mut args: Vec<OsString> = ["sampling-worker", "--contender", c.name(), "--dir"].map(OsString::from).to_vec();
            args.push(g.l.dir.clone().into());
            args.push("--batch-file".into());
            args.push(bf.into());
            let fo: Vec<String> = a.fanouts.iter().map(|f| f.to_string()).collect();
            for (k, v) in [
                ("--batch-size", bs.to_string()),
                ("--fanouts", fo.join(",")),
                ("--seed", a.seed.to_string()),
                ("--cache-bytes", cb.to_string()),
                ("--max-seconds", a.max_seconds.to_string()),
                ("--inflight", a.inflight.to_string()),
                ("--limit-batches", limit_batches.to_string()),
                ("--workers", a.workers.to_string()),
                ("--row-cache-bytes", rows.to_string()),
                // S sizes its caches within the limit itself (caches_within).
                ("--memory-limit", if c == Contender::Solidgraph && in_cg { limit } else { 0 }.to_string()),
                ("--row-cache-share", a.row_cache_share.to_string()),
                ("--row-admission", a.row_admission.name().to_string()),
                ("--lookahead", a.lookahead.to_string()),
                ("--edge-ids", (a.order == VertexOrder::Input).to_string()),
            ] {
                args.push(k.into());
                args.push(v.into());
            }
            if let Some(b) = &a.backend {
                args.push("--backend".into());
                args.push(b.into());
            }
            let pb = progress.bar(0, c.name());
            pb.set_style(indicatif::ProgressStyle::with_template("{msg:>18} round {prefix} {spinner} {elapsed}").expect("static template"));
            pb.set_prefix(format!("{}/{}", round + 1, a.rounds));
            pb.enable_steady_tick(Duration::from_millis(200));
            let cap = if c == Contender::Cached { 2.0 * a.kill_seconds } else { a.kill_seconds };
            let end = run_worker(&format!("sampling-{}", c.name()), &args, cg.as_ref(), Some(Duration::from_secs_f64(cap)));
            pb.finish_and_clear();
            let w = match end {
                Ok(WorkerEnd::Done(line)) => Some(
                    serde_json::from_str::<WorkerReport>(&line)
                        .map_err(|e| BenchError::Worker { contender: c.name(), reason: format!("bad report {line:?}: {e}") })?,
                ),
                Ok(WorkerEnd::Capped) => None,
                // A failed run (e.g. killed at the memory limit) is
                // reported; the others go on.
                Err(e) => {
                    eprintln!("warning: {e}");
                    failures.push(format!("{}: {e}", c.name()));
                    None
                }
            };
            let peak = cg.as_ref().and_then(|g| g.read("memory.max_usage_in_bytes"));
            runs.push(Measured { c, w, peak });
        }
    }
    device(&mut iops, &mut iops16)?;
    let verified = verify(&runs)?;
    let rep = Report { a: &a, g: &g, cache_bytes, limit, cgroups, iops, iops16, runs, verified, contenders, prep_seconds, failures };
    if a.json {
        println!("{}", rep.json());
    } else {
        rep.print();
    }
    Ok(())
}

/// Sampling contenders must return SolidGraph's batches exactly (nodes,
/// edges and feature bytes); gather contenders SolidGraph's gathered rows.
fn verify(runs: &[Measured]) -> CliResult<usize> {
    let mut compared = 0;
    for (refc, gather) in [(Contender::Solidgraph, false), (Contender::GatherSolidgraph, true)] {
        let Some(want) = runs.iter().find(|m| m.c == refc).and_then(|m| m.w.as_ref()) else { continue };
        for m in runs.iter().filter(|m| m.c.gather() == gather) {
            let Some(w) = &m.w else { continue };
            let k = want.checksums.len().min(w.checksums.len());
            if let Some(b) = (0..k).find(|&i| w.checksums[i] != want.checksums[i]) {
                return Err(BenchError::Invalid(format!("batch {b}: {} differs from {}", m.c.name(), refc.name())).into());
            }
            compared = compared.max(k);
        }
    }
    Ok(compared)
}

struct Report<'a> {
    a: &'a SamplingArgs,
    g: &'a Graph,
    cache_bytes: u64,
    limit: u64,
    cgroups: bool,
    /// `bench io` before and after the contenders, 4 KiB and 16 KiB reads.
    iops: Vec<IoBenchResult>,
    iops16: Vec<IoBenchResult>,
    runs: Vec<Measured>,
    verified: usize,
    contenders: Vec<Contender>,
    prep_seconds: f64,
    failures: Vec<String>,
}

/// The higher of some `bench io` readings.
fn best_iops(v: &[IoBenchResult]) -> Option<f64> {
    v.iter().map(|r| r.iops).max_by(f64::total_cmp)
}

const BAR_VS_MMAP: f64 = 10.0;
const BAR_GATHER: f64 = 3.0;
const BAR_IOPS: f64 = 0.8;

impl Report<'_> {
    fn median(&self, c: Contender) -> Option<&Measured> {
        let mut r: Vec<&Measured> = self.runs.iter().filter(|m| m.c == c).collect();
        if r.is_empty() {
            return None;
        }
        r.sort_by(|x, y| x.rate().total_cmp(&y.rate()));
        Some(r[(r.len() - 1) / 2])
    }
    fn rate(&self, c: Contender) -> Option<f64> {
        self.median(c).map(Measured::rate)
    }
    fn best_of(&self, cs: [Contender; 2]) -> Option<(f64, Contender)> {
        cs.iter().filter_map(|&c| self.rate(c).map(|r| (r, c))).max_by(|x, y| x.0.total_cmp(&y.0))
    }
    /// The higher 4 KiB `bench io` reading.
    fn device_iops(&self) -> Option<f64> {
        best_iops(&self.iops)
    }
    /// Device seconds per I/O and per 4 KiB page, from the higher `bench
    /// io` readings at 4 and 16 KiB: t(k pages) = per_io + k * per_page.
    fn device_costs(&self) -> Option<(f64, f64)> {
        let (t4, t16) = (1.0 / best_iops(&self.iops)?, 1.0 / best_iops(&self.iops16)?);
        let per_page = ((t16 - t4) / 3.0).max(0.0);
        Some((t4 - per_page, per_page))
    }
    /// Share of the time SolidGraph kept the device busy, costing its I/Os
    /// and pages at `device_costs`. Its reads bridge gaps (one I/O of
    /// several pages instead of several I/Os), so its I/O count alone
    /// understates how busy the device is.
    fn device_busy(&self) -> Option<f64> {
        let ((ios, pages, _), (per_io, per_page)) = self.s_io().zip(self.device_costs())?;
        Some(ios * per_io + pages * per_page)
    }
    /// SolidGraph's I/Os per second and pages per second over its timed batches.
    fn s_io(&self) -> Option<(f64, f64, f64)> {
        let w = self.median(Contender::Solidgraph)?.w.as_ref()?;
        let hit = w.cache_hits? as f64 / (w.cache_hits? + w.cache_misses?).max(1) as f64;
        let (t, ios, pages) = w.io_window()?;
        Some((ios / t, pages / t, hit))
    }

    fn bars(&self) -> serde_json::Value {
        let s = self.rate(Contender::Solidgraph);
        let a = self.best_of([Contender::Mmap, Contender::MmapRandom]);
        let gs = self.rate(Contender::GatherSolidgraph);
        let ga = self.best_of([Contender::GatherMmap, Contender::GatherMmapRandom]);
        let vs_a = s.zip(a).map(|(s, a)| s / a.0.max(1e-9));
        let vs_b = s.zip(self.rate(Contender::Cached)).map(|(s, b)| s / b.max(1e-9));
        let gather = gs.zip(ga).map(|(s, a)| s / a.0.max(1e-9));
        let iops_share = self.s_io().zip(self.device_iops()).map(|(s, d)| s.0 / d);
        let busy = self.device_busy();
        serde_json::json!({
            "speedup_vs_mmap_best": vs_a, "mmap_best": a.map(|x| x.1.name()), "vs_mmap_10x": vs_a.map(|r| r >= BAR_VS_MMAP),
            "s_over_cached": vs_b,
            "gather_speedup_vs_mmap_best": gather, "gather_mmap_best": ga.map(|x| x.1.name()), "gather_3x": gather.map(|r| r >= BAR_GATHER),
            "iops_share_of_bench_io": iops_share, "device_busy": busy, "device_busy_80pct": busy.map(|r| r >= BAR_IOPS),
        })
    }

    fn json(&self) -> serde_json::Value {
        let cs: Vec<_> = self
            .contenders
            .iter()
            .map(|&c| {
                let m = self.median(c);
                serde_json::json!({
                    "name": c.name(), "per_s": self.rate(c), "report": m.and_then(|m| m.w.clone()).map(|mut w| { w.checksums.clear(); w }),
                    "killed": m.is_some_and(|m| m.w.is_none()), "peak_memory_bytes": m.and_then(|m| m.peak),
                    "rounds_per_s": self.runs.iter().filter(|r| r.c == c).map(Measured::rate).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({
            "graph": self.g.params, "nodes": self.g.meta.nodes, "edges": self.g.meta.edges, "dim": self.a.dim,
            "store_bytes": self.g.store_bytes, "cache_bytes": self.cache_bytes, "memory_limit_bytes": self.limit,
            "memory_enforced": self.cgroups, "fanouts": self.a.fanouts, "batch_size": self.a.batch_size, "batches": self.a.batches,
            "gather_rows": self.a.gather_rows, "gather_batches": self.a.gather_batches, "rounds": self.a.rounds,
            "row_cache_share": self.a.row_cache_share, "order": format!("{:?}", self.a.order).to_lowercase(), "row_admission": self.a.row_admission.name(),
            "bench_io_randread_4k_qd64_iops": self.device_iops(), "bench_io_readings_iops": self.iops.iter().map(|r| r.iops).collect::<Vec<_>>(),
            "bench_io_readings_16k_iops": self.iops16.iter().map(|r| r.iops).collect::<Vec<_>>(),
            "device_seconds_per_io_and_page": self.device_costs().map(|c| [c.0, c.1]),
            "solidgraph_ios_per_s": self.s_io().map(|s| s.0), "solidgraph_pages_per_s": self.s_io().map(|s| s.1),
            "cache_hit_rate": self.s_io().map(|s| s.2), "verified_batches": self.verified,
            "contenders": cs, "bars": self.bars(), "failures": self.failures,
        })
    }

    fn print(&self) {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let g = self.g;
        println!(
            "graph: {}: {} vertices, {} directed edges (undirected, deduplicated); features x: {} x {} f32",
            g.params, g.meta.nodes, g.meta.edges, g.meta.nodes, self.a.dim
        );
        if let (Some(s), Some(e)) = (g.prep.import_seconds, g.prep.import_input_edges) {
            println!("import (edges + features): {e} input edges in {s:.1} s; preparation {:.1} s in all", self.prep_seconds);
        }
        println!(
            "store {:.0} MiB (adjacency + features, vertex order {:?}); cache budget {:.0} MiB ({:.0}%); memory limit {:.0} MiB (cache + 64 MiB + 2 x one batch's features per worker, {} worker(s){}): {}",
            mib(g.store_bytes),
            self.a.order,
            mib(self.cache_bytes),
            100.0 * self.a.cache_fraction,
            mib(self.limit),
            self.a.workers.max(1),
            if self.a.order == VertexOrder::Degree { " + the order map, 4 B per vertex" } else { "" },
            if self.cgroups { "cgroup v1 per contender ((b) unlimited)" } else { "NOT enforced" }
        );
        // What each contender had of the same limit.
        match self.median(Contender::Solidgraph).and_then(|m| m.w.as_ref()?.budget) {
            Some((pages, rows, footprint, headroom)) => println!(
                "  (S) page cache {:.0} MiB + row cache {:.0} MiB = the limit - its process's {:.0} MiB (measured: the loader's threads over lookahead + {PROBE_BATCHES} batches, no cache) - {:.0} MiB headroom",
                mib(pages),
                mib(rows),
                mib(footprint),
                mib(headroom)
            ),
            None => println!("  (S) page cache + row cache: the {:.0} MiB above (the limit is not enforced)", mib(self.cache_bytes)),
        }
        println!("  (a) the OS page cache over the CSR and features files: whatever of the limit its process does not use");
        println!("  gather (S): the {:.0} MiB above, {:.0}% for rows", mib(self.cache_bytes), 100.0 * self.a.row_cache_share);
        println!(
            "{} batches x {} seeds (ids with edges; (b) the first {} after a warm-up pass over them), fanouts {:?}, without replacement, features gathered; gather alone: {} batches x {} uniform rows; caches dropped before every run; at most {} s measured per run, killed after {} s; {} round(s), medians",
            self.a.batches,
            self.a.batch_size,
            self.a.oracle_batches,
            self.a.fanouts,
            self.a.gather_batches,
            self.a.gather_rows,
            self.a.max_seconds,
            self.a.kill_seconds,
            self.a.rounds
        );
        if let Some(d) = self.device_iops() {
            let each = |v: &[IoBenchResult]| v.iter().map(|r| format!("{:.0} ({}, p50 {:.0} us)", r.iops, r.backend, r.p50_us)).collect::<Vec<_>>().join(", ");
            println!(
                "device: bench io randread depth 64, before and after: 4 KiB {}; 16 KiB {}; the bar uses {d:.0} IOPS",
                each(&self.iops),
                each(&self.iops16)
            );
            if let Some((io, pg)) = self.device_costs() {
                println!("device costs (from the higher readings): {:.1} us per I/O + {:.1} us per 4 KiB page", 1e6 * io, 1e6 * pg);
            }
        }
        println!();
        println!(
            "{:<27} {:>10} {:>9} {:>8} {:>10} {:>9} {:>9} {:>6} {:>15} {:>8}  rounds",
            "contender", "per s", "nodes/b", "batches", "MiB read", "I/Os/s", "pages/s", "hit%", "batch p50/p99", "peak MiB"
        );
        for &c in &self.contenders {
            let Some(m) = self.median(c) else { continue };
            let all: Vec<String> =
                self.runs.iter().filter(|r| r.c == c).map(|r| if r.w.is_some() { format!("{:.0}", r.rate()) } else { "killed".into() }).collect();
            match &m.w {
                None => println!("{:<27} {:>10}", c.label(), format!("killed (>{:.0} s or failed)", self.a.kill_seconds)),
                Some(w) => println!(
                    "{:<27} {:>10.0} {:>9.0} {:>8} {:>10.1} {:>9} {:>9} {:>6} {:>15} {:>8}  {}",
                    c.label(),
                    m.rate(),
                    w.nodes as f64 / w.batches.max(1) as f64,
                    w.batches,
                    mib(w.volume_bytes.unwrap_or(w.os_read_bytes)),
                    w.io_window().map_or("-".into(), |(t, i, _)| format!("{:.0}", i / t)),
                    w.io_window().map_or("-".into(), |(t, _, p)| format!("{:.0}", p / t)),
                    w.cache_hits.zip(w.cache_misses).map_or("-".into(), |(h, mi)| format!("{:.1}", 100.0 * h as f64 / (h + mi).max(1) as f64)),
                    format!("{:.0}/{:.0} ms", w.batch_p50_ms, w.batch_p99_ms),
                    m.peak.map_or("-".into(), |p| format!("{:.0}", mib(p))),
                    all.join(" "),
                ),
            }
        }
        println!("per s: seeds/s for sampling, rows/s for gather alone (open included); I/Os/s and pages/s: over the batches once the row cache is warm");
        println!();
        let b = self.bars();
        let f = |k: &str| b[k].as_f64().map_or("-".into(), |x| format!("{x:.2}x"));
        let pass = |k: &str| match b[k].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "n/a",
        };
        println!("S / a (best: {}): {}   bar >= {BAR_VS_MMAP}x: {}", b["mmap_best"].as_str().unwrap_or("-"), f("speedup_vs_mmap_best"), pass("vs_mmap_10x"));
        println!("S / b (DRAM oracle, reported): {}", f("s_over_cached"));
        if let Some((ios, pages, hit)) = self.s_io() {
            let pct = |k: &str| b[k].as_f64().map_or("-".into(), |x| format!("{:.0}%", 100.0 * x));
            println!(
                "S device use over its batches once the row cache is warm: {ios:.0} I/Os/s ({pages:.0} pages/s) = {} of bench io's 4 KiB IOPS at depth 64; device busy {} of the time at the costs above   bar >= 80% (busy: reads bridge gaps, so I/Os are fewer and larger): {}; cache hit rate {:.1}%",
                pct("iops_share_of_bench_io"),
                pct("device_busy"),
                pass("device_busy_80pct"),
                100.0 * hit
            );
        }
        if let Some((h, mi)) = self.median(Contender::Solidgraph).and_then(|m| m.w.as_ref()?.row_hits) {
            println!(
                "S caches: {:.0}% of the budget caches feature rows, admitting {} rows (row hit rate {:.1}%), the rest pages",
                100.0 * self.a.row_cache_share,
                match self.a.row_admission {
                    Admission::Seen => "missed-before",
                    Admission::Hot => "the highest-degree vertices'",
                    Admission::All => "all",
                },
                100.0 * h as f64 / (h + mi).max(1) as f64
            );
        }
        if let Some(o) = self.median(Contender::Solidgraph).and_then(|m| m.w.as_ref()?.open_seconds) {
            println!(
                "S time includes opening the store: {o:.2} s (then the row cache fills with the highest-degree vertices' rows while the first batches are sampled)"
            );
        }
        println!(
            "gather alone S / mmap (best: {}): {}   bar >= {BAR_GATHER}x: {}",
            b["gather_mmap_best"].as_str().unwrap_or("-"),
            f("gather_speedup_vs_mmap_best"),
            pass("gather_3x")
        );
        println!(
            "verified: every finished run equals SolidGraph's batches (nodes, edges, {}feature bytes) over {} batches",
            if self.a.order == VertexOrder::Input { "edge ids, " } else { "" },
            self.verified
        );
        for f in &self.failures {
            println!("FAILED (shown as killed): {f}");
        }
    }
}

/// FNV-1a over u64 words.
struct Fnv(u64);
impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x0000_0100_0000_01b3);
    }
    /// Four independent lanes folded at the end: one multiply chain over a
    /// batch's features would be a visible share of the timed batch's CPU.
    fn bytes(&mut self, b: &[u8]) {
        let mut lanes = [self.0, self.0 ^ 1, self.0 ^ 2, self.0 ^ 3];
        let mut words = b.chunks_exact(32);
        for w in &mut words {
            for (j, l) in lanes.iter_mut().enumerate() {
                *l = (*l ^ u64::from_le_bytes(w[8 * j..8 * j + 8].try_into().expect("8 bytes"))).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        lanes.iter().for_each(|&l| self.add(l));
        words.remainder().chunks(8).for_each(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        });
    }
}

/// What one batch produced: sampled nodes and its checksum.
struct Out {
    nodes: u64,
    sum: u64,
}

fn sample_sum(node: &[u64], row: &[u64], col: &[u64], edge: Option<&[u64]>, feats: &[u8]) -> u64 {
    let mut h = Fnv::new();
    for xs in [node, row, col, edge.unwrap_or_default()] {
        h.add(xs.len() as u64);
        xs.iter().for_each(|&x| h.add(x));
    }
    h.bytes(feats);
    h.0
}

/// CSR + feature matrix in mmap: the same sampler as the engine's (same
/// per-(seed, hop, vertex) generators and draws), features by fancy indexing.
struct MmapSampler {
    csr: MmapCsr,
    feats: memmap2::Mmap,
    data_offset: usize,
    row_bytes: usize,
}

impl MmapSampler {
    fn open(l: &Layout, random: bool) -> CliResult<MmapSampler> {
        let csr = MmapCsr::open(l, random)?;
        let p = features_path(l);
        let h = solidgraph_store::import::npy::read_header(&p)?;
        let f = File::open(&p).map_err(file_err(&p))?;
        // SAFETY: the benchmark's files are not modified while mapped.
        let feats = unsafe { memmap2::Mmap::map(&f) }.map_err(file_err(&p))?;
        if random {
            feats.advise(memmap2::Advice::Random).map_err(file_err(&p))?;
        }
        Ok(MmapSampler { csr, feats, data_offset: h.data_offset as usize, row_bytes: 4 * h.shape[1] as usize })
    }

    fn gather(&self, ids: &[u64]) -> Vec<u8> {
        let mut out = vec![0u8; ids.len() * self.row_bytes];
        for (i, &v) in ids.iter().enumerate() {
            let at = self.data_offset + v as usize * self.row_bytes;
            out[i * self.row_bytes..(i + 1) * self.row_bytes].copy_from_slice(&self.feats[at..at + self.row_bytes]);
        }
        out
    }

    fn sample(&self, seeds: &[u64], fanouts: &[i64], seed: u64, edge_ids: bool) -> Out {
        let (mut node, mut row, mut col, mut edge) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut local: HashMap<u64, u64> = HashMap::with_capacity(seeds.len() * 8);
        for &s in seeds {
            local.entry(s).or_insert_with(|| {
                node.push(s);
                node.len() as u64 - 1
            });
        }
        let (mut start, mut end) = (0usize, node.len());
        let mut picks = Vec::new();
        for (hop, &k) in fanouts.iter().enumerate() {
            for i in start..end {
                let v = node[i];
                let (s, e) = (le_u64(&self.csr.rowptr, 8 * v as usize), le_u64(&self.csr.rowptr, 8 * v as usize + 8));
                let mut rng = rng_for(seed, hop as u64, v);
                choose(&mut rng, (e - s) as usize, k, false, None, &mut picks);
                for &p in &picks {
                    let at = 4 * (s as usize + p);
                    let u = u32::from_le_bytes(self.csr.colidx[at..at + 4].try_into().expect("4 bytes")) as u64;
                    let lu = *local.entry(u).or_insert_with(|| {
                        node.push(u);
                        node.len() as u64 - 1
                    });
                    row.push(lu);
                    col.push(i as u64);
                    edge.push(s + p as u64);
                }
            }
            (start, end) = (end, node.len());
        }
        let feats = self.gather(&node);
        Out { nodes: node.len() as u64, sum: sample_sum(&node, &row, &col, edge_ids.then_some(&edge[..]), &feats) }
    }
}

/// Entry of the hidden `sampling-worker` subcommand.
pub fn worker(a: SamplingWorkerArgs) -> CliResult {
    join_cgroup(&a.cgroup)?;
    let raw = std::fs::read(&a.batch_file).map_err(file_err(&a.batch_file))?;
    let mut ids: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    if a.batch_size == 0 || ids.is_empty() || !ids.len().is_multiple_of(a.batch_size) {
        return Err(BenchError::Invalid(format!("{} does not hold whole batches of {}", a.batch_file.display(), a.batch_size)).into());
    }
    ids.truncate(a.batch_size.saturating_mul(a.limit_batches));
    let l = Layout { dir: a.dir.clone() };
    let c = a.contender;
    let mut rep = if c.mmap() {
        let s = MmapSampler::open(&l, matches!(c, Contender::MmapRandom | Contender::GatherMmapRandom))?;
        measure(&a, &ids, |i, b| {
            Ok(if c.gather() {
                let f = s.gather(b);
                let mut h = Fnv::new();
                h.bytes(&f);
                Out { nodes: b.len() as u64, sum: h.0 }
            } else {
                // Batch i's seed as SolidGraph's loader derives it.
                s.sample(b, &a.fanouts, batch_seed(a.seed, i as u64), a.edge_ids)
            })
        })?
    } else {
        let opts = OpenOptions {
            cache_bytes: a.cache_bytes,
            row_cache_bytes: a.row_cache_bytes,
            row_admission: a.row_admission.into(),
            backend: backend_choice(&a.backend)?,
            inflight_per_member: a.inflight,
            ..Default::default()
        };
        let budget = if a.memory_limit > 0 { Some(caches_within(&a, &l, &opts, &ids)?) } else { None };
        let opts = match budget {
            Some((pages, rows, _, _)) => OpenOptions { cache_bytes: pages, row_cache_bytes: rows, ..opts },
            None => opts,
        };
        let opened = Instant::now();
        let store = Arc::new(Store::open(&l.store(), &opts)?);
        let open_seconds = opened.elapsed().as_secs_f64();
        let mut r = if c.gather() {
            measure(&a, &ids, |_, b: &[u64]| {
                // Rows are asked for by user id, as the Python API does.
                let mut ids = b.to_vec();
                store.to_internal(&mut ids)?;
                let r = store.tensor("x", &ids)?;
                let mut h = Fnv::new();
                h.bytes(&r.data);
                Ok(Out { nodes: b.len() as u64, sum: h.0 })
            })?
        } else {
            if c == Contender::Cached {
                // Warm: one pass over the same batches fills the cache (the
                // batches are cut to --oracle-batches by the caller).
                measure_loader(&a, &store, &ids)?;
            }
            store.reset_stats();
            // When the warm-up ends: the start of the device-use window.
            let warm_end = std::sync::Mutex::new(None);
            let r = std::thread::scope(|sc| {
                sc.spawn(|| {
                    store.wait_warm();
                    let st = store.stats();
                    *warm_end.locked() = Some((Instant::now(), st.ios(), st.pages_read()));
                });
                measure_loader(&a, &store, &ids)
            });
            let mut r = r?;
            if let Some((t, ios, pages)) = warm_end.into_inner_locked() {
                let st = store.stats();
                let scale = store.page_size() as u64 / PAGE;
                r.after_warm = Some((t.elapsed().as_secs_f64(), st.ios() - ios, (st.pages_read() - pages) * scale));
            }
            r
        };
        let s = store.stats();
        r.volume_bytes = Some(s.bytes_read());
        r.ios = Some(s.ios());
        r.pages_read = Some(s.pages_read() * (store.page_size() as u64 / PAGE));
        r.cache_hits = Some(s.cache.hits);
        r.cache_misses = Some(s.cache.misses);
        r.row_hits = s.rows.map(|x| (x.hits, x.misses));
        if c != Contender::Cached {
            r.seconds += open_seconds;
            r.open_seconds = Some(open_seconds);
        }
        r.budget = budget;
        r
    };
    rep.checksums.shrink_to_fit();
    println!("{}", serde_json::to_string(&rep)?);
    Ok(())
}

/// SolidGraph's caches within `a.memory_limit`, the memory the mmap
/// contenders' OS page cache gets: the limit less this process's footprint
/// (binary, tables, the batch ids, the loader's threads with their
/// lookahead and prefetched batches), measured by running the loader over
/// the first batches with no cache (direct I/O: nothing of it stays
/// cached), less headroom for larger batches; split into pages and feature
/// rows by --row-cache-share. The footprint is what the limit counts: the
/// cgroup's peak usage when in one, else the peak resident set. Returns
/// (page cache, row cache, footprint, headroom).
fn caches_within(a: &SamplingWorkerArgs, l: &Layout, opts: &OpenOptions, ids: &[u64]) -> CliResult<(u64, u64, u64, u64)> {
    {
        let probe = Arc::new(Store::open(&l.store(), &OpenOptions { cache_bytes: 0, row_cache_bytes: 0, ..opts.clone() })?);
        let probe_ids = &ids[..ids.len().min((a.lookahead + PROBE_BATCHES) * a.batch_size)];
        let probe_args = SamplingWorkerArgs { max_seconds: PROBE_MAX_SECONDS, ..a.clone() };
        measure_loader(&probe_args, &probe, probe_ids)?;
    }
    let footprint = a.cgroup.as_deref().and_then(|g| read_u64(&g.join("memory.max_usage_in_bytes"))).unwrap_or_else(peak_rss);
    let headroom = HEADROOM_MIN.max(footprint / 4);
    let cache = a.memory_limit.saturating_sub(footprint + headroom).max(2 * PAGE);
    let rows = (a.row_cache_share.clamp(0.0, 1.0) * cache as f64) as u64;
    Ok((cache - rows, rows, footprint, headroom))
}

/// Batches the footprint probe samples beyond the lookahead: the loader's
/// steady state holds the lookahead's sampled batches and the workers'
/// and prefetched ones, so its memory is all there.
const PROBE_BATCHES: usize = 8;
/// The probe's time cap: it runs its batches to the end.
const PROBE_MAX_SECONDS: f64 = 3600.0;
/// At least this much of the limit stays free of SolidGraph's caches (a
/// quarter of the footprint if more): a batch with more hubs than the
/// probe's needs more, and anonymous memory over a cgroup's limit is not
/// reclaimed but killed.
const HEADROOM_MIN: u64 = 16 << 20;

/// SolidGraph's sampling as a training loader runs it: `Prefetcher` with
/// --workers threads and --lookahead batches sampled ahead of the gather,
/// batches consumed in order until --max-seconds of wall clock. A batch's
/// time is the consumer's wait for it.
fn measure_loader(a: &SamplingWorkerArgs, store: &Arc<Store>, ids: &[u64]) -> CliResult<WorkerReport> {
    let (io0, f0) = (os_read_bytes(), major_faults());
    let cap = Duration::from_secs_f64(a.max_seconds);
    let o = SampleOptions { fanouts: a.fanouts.clone(), direction: Direction::In, seed: a.seed, tensors: vec!["x".into()], ..Default::default() };
    let batches: Vec<Vec<u64>> = ids.chunks_exact(a.batch_size).map(|b| b.to_vec()).collect();
    let cfg = PrefetchOptions { workers: a.workers.max(1), lookahead: a.lookahead, ..Default::default() };
    let t0 = Instant::now();
    let mut p = Prefetcher::new(store.clone(), batches, o, cfg)?;
    let (mut lat, mut nodes, mut sums) = (Vec::new(), 0, Vec::new());
    let mut t = Instant::now();
    while t0.elapsed() < cap {
        let Some(s) = p.next() else { break };
        let s = s?;
        lat.push(t.elapsed());
        t = Instant::now();
        nodes += s.node.len() as u64;
        sums.push(sample_sum(&s.node, &s.row, &s.col, a.edge_ids.then_some(&s.edge[..]), &s.tensors[0].data));
    }
    drop(p);
    Ok(WorkerReport::timed(a, lat, nodes, t0.elapsed().as_secs_f64(), (io0, f0), sums))
}

/// Runs the batches until --max-seconds: one thread takes them in order
/// (time = the sum of batch times), or --workers threads take the next
/// batch as they free up (time = wall clock; checksums of the batches done
/// in order from the first, so they compare with the other contenders).
fn measure(a: &SamplingWorkerArgs, ids: &[u64], f: impl Fn(usize, &[u64]) -> CliResult<Out> + Sync) -> CliResult<WorkerReport> {
    let (io0, f0) = (os_read_bytes(), major_faults());
    let cap = Duration::from_secs_f64(a.max_seconds);
    let batches: Vec<&[u64]> = ids.chunks_exact(a.batch_size).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<(usize, Duration, Out)>> = std::sync::Mutex::new(Vec::new());
    let spent = std::sync::Mutex::new(Duration::ZERO);
    let t0 = Instant::now();
    let work = || -> CliResult<()> {
        loop {
            let over = if a.workers <= 1 { *spent.locked() >= cap } else { t0.elapsed() >= cap };
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if over || i >= batches.len() {
                return Ok(());
            }
            let t = Instant::now();
            let out = f(i, batches[i])?;
            let dt = t.elapsed();
            *spent.locked() += dt;
            done.locked().push((i, dt, out));
        }
    };
    std::thread::scope(|sc| -> CliResult<()> {
        let hs: Vec<_> = (1..a.workers.max(1)).map(|_| sc.spawn(work)).collect();
        work()?;
        for h in hs {
            h.join().map_err(|_| BenchError::Invalid("sampling thread panicked".into()))??;
        }
        Ok(())
    })?;
    let wall = t0.elapsed();
    let mut done = done.into_inner_locked();
    done.sort_by_key(|d| d.0);
    let lat: Vec<Duration> = done.iter().map(|d| d.1).collect();
    let nodes = done.iter().map(|d| d.2.nodes).sum();
    let sums: Vec<u64> = done.iter().enumerate().take_while(|(k, d)| d.0 == *k).map(|(_, d)| d.2.sum).collect();
    let seconds = if a.workers <= 1 { lat.iter().sum::<Duration>().as_secs_f64() } else { wall.as_secs_f64() };
    Ok(WorkerReport::timed(a, lat, nodes, seconds, (io0, f0), sums))
}
