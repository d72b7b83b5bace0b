//! `solidgraph-bench neighbors`: batched neighbor reads of random vertices,
//! SolidGraph against the same graph as plain CSR files, in one run, under
//! one memory budget, with cold caches.
//!
//! Contenders (each in its own child process, see [`worker`]), each under
//! the same memory limit:
//! - `solidgraph`: `Store::neighbors` per batch; its page cache is the limit
//!   less the process's own footprint, measured in the worker (see
//!   [`cache_within`]), so it has the memory the mmap contenders' OS page
//!   cache has.
//! - `mmap`, `mmap-random`: CSR through mmap, as numpy.memmap would read it
//!   (page faults through the OS page cache), default and MADV_RANDOM.
//! - `csr-io`: CSR read with our own I/O engine, two dependent batched reads
//!   per batch (row pointers, then columns).
//!
//! The budget is enforced with a cgroup v1 memory controller when we are
//! root: the OS page cache the mmap contenders live on is charged to the
//! cgroup, so it cannot grow past the budget either. Artifacts (edge file,
//! store, CSR) stay in the work directory and are reused by later runs.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use solidgraph_io::{BackendChoice, Volume, VolumeOptions};
use solidgraph_store::{Csr, Direction, OpenOptions, Store};

use super::common::*;
use super::kron::Kronecker;
use solidgraph_cli::util::{CliResult, parse_size};
use solidgraph_store::order::VertexOrder;

#[derive(Args)]
pub struct NeighborsArgs {
    /// Graph500 scale of the generated graph: 2^SCALE vertices.
    #[arg(long, default_value_t = 23)]
    scale: u32,
    /// Generated edges per vertex (before the reverse edges are added).
    #[arg(long, default_value_t = 16)]
    edge_factor: u64,
    /// Seed of the generator and of the random vertex batches.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Use this (2, E) or (E, 2) integer .npy edge list instead of a
    /// generated graph.
    #[arg(long)]
    edges: Option<PathBuf>,
    /// Work directory for the edge file, store and CSR files (default:
    /// $SOLIDGRAPH_BENCH_DIR or /work/bench, then neighbors-s{SCALE} or
    /// neighbors-{edge file stem}).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Rebuild the edge file, store and CSR files even when present.
    #[arg(long)]
    fresh: bool,
    /// Batches measured per contender.
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Random vertices per batch.
    #[arg(long, default_value_t = 1024)]
    batch_size: usize,
    /// Which vertices the batches draw from: all (uniform over every id), or
    /// nonisolated (only ids with edges, as Graph500 picks BFS roots).
    #[arg(long, value_enum, default_value_t = Sample::All)]
    sample: Sample,
    /// Rounds over all contenders (order rotated each round); the table
    /// shows each contender's median round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Stop a contender's run after this much measured time (the default
    /// mmap contender can take hours with large readahead).
    #[arg(long, default_value_t = 30.0)]
    max_seconds: f64,
    /// I/Os in flight per file for SolidGraph and csr-io.
    #[arg(long, default_value_t = 64)]
    inflight: usize,
    /// Sets the default memory limit: this share of the store's size, plus
    /// 64 MiB for each process's own memory.
    #[arg(long, default_value_t = 0.05)]
    cache_fraction: f64,
    /// Memory limit of each contender's process, the same for all (default:
    /// --cache-fraction of the store + 64 MiB). The mmap contenders' OS
    /// page cache lives inside it; SolidGraph's page cache is the limit less
    /// its process's measured footprint.
    #[arg(long, value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// Sort memory for the import.
    #[arg(long, default_value = "4GiB", value_parser = parse_size)]
    import_memory: u64,
    /// I/O backend for SolidGraph and csr-io: uring or posix.
    #[arg(long)]
    backend: Option<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sample {
    All,
    Nonisolated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contender {
    Solidgraph,
    Mmap,
    MmapRandom,
    CsrIo,
}

const CONTENDERS: [Contender; 4] = [Contender::Solidgraph, Contender::Mmap, Contender::MmapRandom, Contender::CsrIo];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Solidgraph => "solidgraph",
            Contender::Mmap => "mmap",
            Contender::MmapRandom => "mmap-random",
            Contender::CsrIo => "csr-io",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Contender::Solidgraph => "(S) SolidGraph store",
            Contender::Mmap => "(a) CSR mmap",
            Contender::MmapRandom => "(a) CSR mmap MADV_RANDOM",
            Contender::CsrIo => "(b) CSR + io engine",
        }
    }
}

/// Arguments of the hidden `neighbors-worker`: one contender, one
/// process, one JSON line on stdout.
#[derive(Args)]
pub struct WorkerArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, value_enum)]
    contender: Contender,
    /// The vertex batches, back to back as u64 little-endian.
    #[arg(long)]
    batch_file: PathBuf,
    #[arg(long)]
    batch_size: usize,
    /// The memory limit every contender gets; SolidGraph sizes its page
    /// cache to fill it.
    #[arg(long)]
    memory_limit: u64,
    #[arg(long)]
    max_seconds: f64,
    #[arg(long)]
    inflight: usize,
    /// Memory cgroup to join before doing anything else.
    #[arg(long)]
    cgroup: Option<PathBuf>,
    #[arg(long)]
    backend: Option<String>,
}

pub fn run(a: NeighborsArgs) -> CliResult {
    if a.batches == 0 || a.batch_size == 0 || a.rounds == 0 {
        return Err(BenchError::Invalid("--batches, --batch-size and --rounds must be at least 1".into()).into());
    }
    if a.max_seconds.is_nan() || a.max_seconds <= 0.0 {
        return Err(BenchError::Invalid(format!("--max-seconds {} must be positive", a.max_seconds)).into());
    }
    if !(a.cache_fraction > 0.0 && a.cache_fraction <= 1.0) {
        return Err(BenchError::Invalid(format!("--cache-fraction {} must be in (0, 1]", a.cache_fraction)).into());
    }
    let progress = Progress { hidden: a.json };
    let source = match &a.edges {
        Some(p) => Source::File(p.clone()),
        None => Source::Generated(Kronecker::new(a.scale, a.edge_factor, a.seed).map_err(BenchError::Invalid)?),
    };
    let dir = a.dir.clone().unwrap_or_else(|| {
        bench_root().join(match &a.edges {
            Some(p) => format!("neighbors-{}", p.file_stem().map_or("edges".into(), |s| s.to_string_lossy())),
            None => format!("neighbors-s{}", a.scale),
        })
    });
    let spec =
        GraphSpec { source, dir, fresh: a.fresh, import_memory: a.import_memory, backend: a.backend.clone(), order: VertexOrder::Input, lower_lists: false };
    let g = prepare_graph(&spec, &progress, &|_| Ok(Vec::new()))?;
    let files = g.files()?;
    let csr_bytes = g.csr_bytes();
    let Graph { l, params, meta, prep, store_bytes } = g;
    let limit = a.memory_budget.unwrap_or(((store_bytes as f64 * a.cache_fraction) as u64).max(PAGE) + PROCESS_OVERHEAD);
    let (nodes, edges) = (meta.nodes, meta.edges);
    write_batches(&a, &l, meta)?;

    let cgroups = cgroups_usable();
    let mut runs: Vec<Measured> = Vec::new();
    for round in 0..a.rounds {
        // Rotating the order spreads slow phases of a noisy machine evenly.
        for k in 0..CONTENDERS.len() {
            let c = CONTENDERS[(round + k) % CONTENDERS.len()];
            let caches = drop_caches(&files);
            let cg = if cgroups { Some(Cgroup::create(c.name(), limit)?) } else { None };
            let pb = progress.bar(0, c.name());
            pb.set_style(indicatif::ProgressStyle::with_template("{msg:>12} round {prefix} {spinner} {elapsed}").expect("static template"));
            pb.set_prefix(format!("{}/{}", round + 1, a.rounds));
            pb.enable_steady_tick(Duration::from_millis(200));
            let w = spawn_worker(&a, &l, c, limit, cg.as_ref())?;
            pb.finish_and_clear();
            let (peak, failcnt) = cg.as_ref().map_or((None, None), |g| (g.read("memory.max_usage_in_bytes"), g.read("memory.failcnt")));
            runs.push(Measured { c, w, peak, failcnt, caches });
        }
    }
    let verified = verify(&runs)?;

    let rep = Report {
        params: &params,
        nodes,
        edges,
        store_bytes,
        csr_bytes,
        limit,
        cgroups,
        batches: a.batches,
        batch_size: a.batch_size,
        seed: a.seed,
        sample: a.sample,
        rounds: a.rounds,
        max_seconds: a.max_seconds,
        inflight: a.inflight,
        readahead_kb: readahead_kb(&l.dir),
        prep,
        verified,
        runs,
    };
    if a.json {
        println!("{}", rep.json());
    } else {
        rep.print();
    }
    Ok(())
}

/// Draws every batch once, so that all contenders read the very same ids.
fn write_batches(a: &NeighborsArgs, l: &Layout, meta: CsrMeta) -> CliResult {
    let ids = draw_ids(l, meta, a.seed, a.batches * a.batch_size, a.sample == Sample::Nonisolated)?;
    let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(l.batch_file(), bytes).map_err(file_err(&l.batch_file()))?;
    Ok(())
}

/// Every run must return the same lists as SolidGraph's first run, batch by
/// batch, over the batches both finished. Returns the batches compared.
fn verify(runs: &[Measured]) -> CliResult<usize> {
    let reference = runs.iter().find(|m| m.c == Contender::Solidgraph).expect("solidgraph ran");
    let want = &reference.w.checksums;
    for m in runs {
        let n = want.len().min(m.w.checksums.len());
        if let Some(b) = (0..n).find(|&i| m.w.checksums[i] != want[i]) {
            return Err(BenchError::Mismatch { batch: b, contender: m.c.name(), got: m.w.checksums[b], want: want[b] }.into());
        }
    }
    Ok(runs.iter().map(|m| m.w.checksums.len()).max().unwrap_or(0))
}

/// One contender's numbers, as the worker prints them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WorkerReport {
    contender: Contender,
    /// I/O backend, or "page faults" for mmap.
    backend: String,
    in_cgroup: bool,
    vertices: u64,
    /// Neighbor ids returned in all.
    neighbors: u64,
    /// Time inside the neighbor calls only.
    seconds: f64,
    batch_p50_ms: f64,
    batch_p99_ms: f64,
    /// The contender's own count of 4 KiB pages read: store cache misses,
    /// volume bytes, or (mmap) the OS's read bytes.
    pages_read: u64,
    /// `read_bytes` of /proc/self/io: what the process made the disk read.
    os_read_bytes: u64,
    major_faults: u64,
    ios: Option<u64>,
    /// Per-I/O latency of our volume(s), the slowest file's.
    io_p50_us: Option<f64>,
    io_p99_us: Option<f64>,
    cache_hits: Option<u64>,
    /// SolidGraph's page cache budget: the limit less `footprint_bytes` and
    /// `headroom_bytes`.
    cache_bytes: Option<u64>,
    /// SolidGraph's process memory besides its page cache, measured.
    footprint_bytes: Option<u64>,
    /// Room left for batches larger than the measured one.
    headroom_bytes: Option<u64>,
    checksums: Vec<u64>,
}

struct Measured {
    c: Contender,
    w: WorkerReport,
    peak: Option<u64>,
    failcnt: Option<u64>,
    caches: CacheDrop,
}

impl Measured {
    fn vertices_per_s(&self) -> f64 {
        self.w.vertices as f64 / self.w.seconds.max(1e-9)
    }
    fn pages_per_vertex(&self) -> f64 {
        self.w.pages_read as f64 / self.w.vertices.max(1) as f64
    }
    fn os_pages_per_vertex(&self) -> f64 {
        self.w.os_read_bytes as f64 / PAGE as f64 / self.w.vertices.max(1) as f64
    }
}

fn spawn_worker(a: &NeighborsArgs, l: &Layout, c: Contender, limit: u64, cg: Option<&Cgroup>) -> CliResult<WorkerReport> {
    let mut args: Vec<OsString> = ["neighbors-worker", "--contender", c.name(), "--dir"].map(OsString::from).to_vec();
    args.push(l.dir.clone().into());
    args.push("--batch-file".into());
    args.push(l.batch_file().into());
    for (k, v) in [
        ("--batch-size", a.batch_size.to_string()),
        ("--memory-limit", limit.to_string()),
        ("--max-seconds", a.max_seconds.to_string()),
        ("--inflight", a.inflight.to_string()),
    ] {
        args.push(k.into());
        args.push(v.into());
    }
    if let Some(b) = &a.backend {
        args.push("--backend".into());
        args.push(b.into());
    }
    match run_worker(c.name(), &args, cg, None)? {
        WorkerEnd::Done(line) => {
            serde_json::from_str(&line).map_err(|e| BenchError::Worker { contender: c.name(), reason: format!("bad report {line:?}: {e}") }.into())
        }
        WorkerEnd::Capped => unreachable!("no cap"),
    }
}

/// Entry of the hidden `neighbors-worker` subcommand.
pub fn worker(a: WorkerArgs) -> CliResult {
    // Join before opening anything, so all our memory is charged there.
    join_cgroup(&a.cgroup)?;
    let raw = std::fs::read(&a.batch_file).map_err(file_err(&a.batch_file))?;
    let ids: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    if a.batch_size == 0 || ids.is_empty() || !ids.len().is_multiple_of(a.batch_size) {
        return Err(BenchError::Invalid(format!("{} does not hold whole batches of {}", a.batch_file.display(), a.batch_size)).into());
    }
    let l = Layout { dir: a.dir.clone() };
    let backend = backend_choice(&a.backend)?;
    let mut r = match a.contender {
        Contender::Solidgraph => {
            let opts = OpenOptions { cache_bytes: 0, backend, inflight_per_member: a.inflight, ..Default::default() };
            let (cache_bytes, footprint, headroom) = cache_within(&a, &l, &opts, &ids)?;
            let store = Store::open(&l.store(), &OpenOptions { cache_bytes, ..opts })?;
            let scale = store.page_size() as u64 / PAGE;
            let mut r = measure(&a, &ids, |ids| Ok(store.neighbors(ids, Direction::Out, false, false)?))?;
            let s = store.stats();
            r.backend = store.volume().backend().name().to_string();
            r.pages_read = s.pages_read() * scale;
            r.ios = Some(s.ios());
            r.io_p50_us = s.members.iter().map(|m| m.p50_us).reduce(f64::max);
            r.io_p99_us = s.members.iter().map(|m| m.p99_us).reduce(f64::max);
            r.cache_hits = Some(s.cache.hits);
            (r.cache_bytes, r.footprint_bytes, r.headroom_bytes) = (Some(cache_bytes), Some(footprint), Some(headroom));
            r
        }
        Contender::Mmap | Contender::MmapRandom => {
            let csr = MmapCsr::open(&l, a.contender == Contender::MmapRandom)?;
            let mut r = measure(&a, &ids, |ids| csr.neighbors(ids))?;
            r.backend = "page faults".into();
            r.pages_read = r.os_read_bytes / PAGE;
            r
        }
        Contender::CsrIo => {
            let csr = IoCsr::open(&l, backend, a.inflight)?;
            let mut r = measure(&a, &ids, |ids| csr.neighbors(ids))?;
            let st: Vec<_> = csr.rowptr.stats().into_iter().chain(csr.colidx.stats()).collect();
            r.backend = csr.rowptr.backend().name().to_string();
            r.pages_read = st.iter().map(|m| m.bytes_read).sum::<u64>() / PAGE;
            r.ios = Some(st.iter().map(|m| m.ios).sum());
            r.io_p50_us = st.iter().map(|m| m.p50_us).reduce(f64::max);
            r.io_p99_us = st.iter().map(|m| m.p99_us).reduce(f64::max);
            r
        }
    };
    r.contender = a.contender;
    r.in_cgroup = a.cgroup.is_some();
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// SolidGraph's page cache within `a.memory_limit`, the memory the mmap
/// contenders' OS page cache gets: the limit less this process's footprint
/// (binary, tables, I/O buffers, the batch ids, one batch's result),
/// measured by opening the store without a cache and reading the first
/// batch (direct I/O: nothing of it stays cached), less headroom for larger
/// batches. The footprint is what the limit counts: the cgroup's peak usage
/// when in one, else the peak resident set. Returns (cache, footprint,
/// headroom).
fn cache_within(a: &WorkerArgs, l: &Layout, opts: &OpenOptions, ids: &[u64]) -> CliResult<(u64, u64, u64)> {
    {
        let probe = Store::open(&l.store(), opts)?;
        probe.neighbors(&ids[..a.batch_size], Direction::Out, false, false)?;
    }
    let footprint = a.cgroup.as_deref().and_then(|g| read_u64(&g.join("memory.max_usage_in_bytes"))).unwrap_or_else(peak_rss);
    let headroom = HEADROOM_MIN.max(footprint / 4);
    let cache = a.memory_limit.saturating_sub(footprint + headroom).max(PAGE);
    Ok((cache, footprint, headroom))
}

/// At least this much of the limit stays free of SolidGraph's page cache,
/// and a quarter of the measured footprint if more: a batch with more hub
/// lists than the probe's needs a larger result and more I/O buffers, and
/// anonymous memory over a cgroup's limit is not reclaimed but killed.
const HEADROOM_MIN: u64 = 4 << 20;

/// Runs the batches (the same ones in every worker: one generator, one
/// seed) and times the neighbor calls only.
fn measure(a: &WorkerArgs, all_ids: &[u64], mut fetch: impl FnMut(&[u64]) -> CliResult<Csr>) -> CliResult<WorkerReport> {
    let mut lat = Vec::new();
    let mut checksums = Vec::new();
    let mut neighbors = 0u64;
    let (io0, f0) = (os_read_bytes(), major_faults());
    let cap = Duration::from_secs_f64(a.max_seconds);
    let mut spent = Duration::ZERO;
    for ids in all_ids.chunks_exact(a.batch_size) {
        if spent >= cap {
            break;
        }
        let t = Instant::now();
        let csr = fetch(ids)?;
        let dt = t.elapsed();
        spent += dt;
        lat.push(dt);
        neighbors += csr.indices.len() as u64;
        checksums.push(checksum(&csr));
    }
    let (io1, f1) = (os_read_bytes(), major_faults());
    let seconds = lat.iter().sum::<Duration>().as_secs_f64();
    lat.sort_unstable();
    let q = |x: f64| lat[((lat.len() - 1) as f64 * x).round() as usize].as_secs_f64() * 1e3;
    Ok(WorkerReport {
        contender: Contender::Solidgraph,
        backend: String::new(),
        in_cgroup: false,
        vertices: (lat.len() * a.batch_size) as u64,
        neighbors,
        seconds,
        batch_p50_ms: q(0.5),
        batch_p99_ms: q(0.99),
        pages_read: 0,
        os_read_bytes: io1.saturating_sub(io0),
        major_faults: f1.saturating_sub(f0),
        ios: None,
        io_p50_us: None,
        io_p99_us: None,
        cache_hits: None,
        cache_bytes: None,
        footprint_bytes: None,
        headroom_bytes: None,
        checksums,
    })
}

/// FNV-1a over every list's length and ids, in request order.
fn checksum(csr: &Csr) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |x: u64| h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
    for w in csr.indptr.windows(2) {
        mix(w[1] - w[0]);
    }
    csr.indices.iter().for_each(|&v| mix(v));
    h
}

/// CSR read with our volume: the row pointers of the whole batch in one
/// read, then all their columns in a second, dependent one.
struct IoCsr {
    rowptr: Volume,
    colidx: Volume,
    meta: CsrMeta,
}

impl IoCsr {
    fn open(l: &Layout, backend: BackendChoice, inflight: usize) -> CliResult<IoCsr> {
        let meta = csr_meta(l)?;
        let opts = VolumeOptions { page_size: PAGE as usize, stripe_pages: 1, backend, inflight_per_member: inflight, ..Default::default() };
        let rowptr = Volume::open(&[l.rowptr()], opts.clone())?;
        let colidx = Volume::open(&[l.colidx(meta.id_bytes)], opts)?;
        if rowptr.num_pages() * PAGE < 8 * (meta.nodes + 1) || colidx.num_pages() * PAGE < meta.edges * meta.id_bytes {
            return Err(BenchError::BadCsr("files are shorter than meta.json says: pass --fresh".into()).into());
        }
        Ok(IoCsr { rowptr, colidx, meta })
    }

    fn neighbors(&self, ids: &[u64]) -> CliResult<Csr> {
        let w = self.meta.id_bytes;
        // Entries are 8-byte aligned, so each lies within one page.
        let rp_pages: Vec<u64> = ids.iter().flat_map(|&v| [8 * v / PAGE, (8 * v + 8) / PAGE]).collect();
        let rp = self.rowptr.read(&rp_pages)?;
        let entry = |k: usize, byte: u64| le_u64(rp.page(k), (byte % PAGE) as usize);
        let mut rows = Vec::with_capacity(ids.len());
        let mut col_pages = Vec::new();
        for (i, &v) in ids.iter().enumerate() {
            let (s, e) = (entry(2 * i, 8 * v), entry(2 * i + 1, 8 * v + 8));
            if s > e || e > self.meta.edges {
                return Err(bad_range(v, s, e, self.meta.edges).into());
            }
            if e > s {
                col_pages.extend(s * w / PAGE..=(e * w - 1) / PAGE);
            }
            rows.push((s * w, e * w));
        }
        let cols = self.colidx.read(&col_pages)?;
        let mut csr = Csr { indptr: Vec::with_capacity(ids.len() + 1), ..Default::default() };
        csr.indptr.push(0);
        let mut k = 0;
        for &(b0, b1) in &rows {
            let mut p = b0 / PAGE;
            while b0 < b1 && p * PAGE < b1 {
                let lo = b0.max(p * PAGE) - p * PAGE;
                let hi = b1.min((p + 1) * PAGE) - p * PAGE;
                push_ids(&cols.page(k)[lo as usize..hi as usize], w, &mut csr.indices);
                k += 1;
                p += 1;
            }
            csr.indptr.push(csr.indices.len() as u64);
        }
        Ok(csr)
    }
}

struct Report<'a> {
    params: &'a Params,
    nodes: u64,
    edges: u64,
    store_bytes: u64,
    csr_bytes: u64,
    limit: u64,
    cgroups: bool,
    batches: usize,
    batch_size: usize,
    seed: u64,
    sample: Sample,
    rounds: usize,
    max_seconds: f64,
    inflight: usize,
    readahead_kb: Option<u64>,
    prep: Prepared,
    verified: usize,
    runs: Vec<Measured>,
}

/// The throughput ratios SolidGraph aims for against the best mmap
/// contender and against CSR on our I/O engine (reported, not asserted).
const BAR_VS_MMAP: f64 = 5.0;
const BAR_VS_CSR_IO: f64 = 1.5;

impl Report<'_> {
    fn runs_of(&self, c: Contender) -> Vec<&Measured> {
        let mut r: Vec<&Measured> = self.runs.iter().filter(|m| m.c == c).collect();
        r.sort_by(|a, b| a.vertices_per_s().total_cmp(&b.vertices_per_s()));
        r
    }

    /// The contender's median round by throughput (the lower middle one
    /// for an even count).
    fn median(&self, c: Contender) -> &Measured {
        let r = self.runs_of(c);
        r[(r.len() - 1) / 2]
    }

    fn mmap_best(&self) -> &Measured {
        let (a, b) = (self.median(Contender::Mmap), self.median(Contender::MmapRandom));
        if a.vertices_per_s() >= b.vertices_per_s() { a } else { b }
    }

    fn ratios(&self) -> (f64, f64, bool) {
        let s = self.median(Contender::Solidgraph);
        let fewer = CONTENDERS[1..].iter().all(|&c| s.pages_per_vertex() < self.median(c).pages_per_vertex());
        (s.vertices_per_s() / self.mmap_best().vertices_per_s(), s.vertices_per_s() / self.median(Contender::CsrIo).vertices_per_s(), fewer)
    }

    fn enforcement(&self) -> &'static str {
        if self.cgroups { "cgroup v1 memory limit per contender" } else { "NOT enforced (not root or no cgroup v1 memory controller)" }
    }

    fn caches(&self) -> &'static str {
        match self.runs[0].caches {
            CacheDrop::DropCaches => "dropped (drop_caches) before every run",
            CacheDrop::Fadvise => "fadvise(DONTNEED) on the benchmark files before every run (not root)",
        }
    }

    fn json(&self) -> serde_json::Value {
        let (vs_mmap, vs_io, fewer) = self.ratios();
        let run_json = |m: &Measured| {
            serde_json::json!({
                "backend": m.w.backend,
                "vertices_per_s": m.vertices_per_s(), "pages_per_vertex": m.pages_per_vertex(),
                "os_pages_per_vertex": m.os_pages_per_vertex(), "pages_read": m.w.pages_read,
                "os_read_bytes": m.w.os_read_bytes, "major_faults": m.w.major_faults, "ios": m.w.ios,
                "cache_hits": m.w.cache_hits, "seconds": m.w.seconds, "vertices": m.w.vertices,
                "io_p50_us": m.w.io_p50_us, "io_p99_us": m.w.io_p99_us,
                "batches": m.w.checksums.len(), "neighbors": m.w.neighbors,
                "batch_p50_ms": m.w.batch_p50_ms, "batch_p99_ms": m.w.batch_p99_ms,
                "peak_memory_bytes": m.peak, "memory_limit_hits": m.failcnt, "in_cgroup": m.w.in_cgroup,
            })
        };
        let contenders: Vec<_> = CONTENDERS
            .iter()
            .map(|&c| {
                let mut j = run_json(self.median(c));
                j["name"] = c.name().into();
                j["rounds_vertices_per_s"] = self.runs.iter().filter(|m| m.c == c).map(|m| m.vertices_per_s()).collect::<Vec<_>>().into();
                j
            })
            .collect();
        serde_json::json!({
            "graph": self.params, "nodes": self.nodes, "edges": self.edges,
            "store_bytes": self.store_bytes, "csr_bytes": self.csr_bytes,
            "generate_seconds": self.prep.generate_seconds,
            "import": self.prep.import_seconds.map(|s| serde_json::json!({
                "seconds": s, "input_edges": self.prep.import_input_edges,
                "input_edges_per_s": self.prep.import_input_edges.map(|e| e as f64 / s),
            })),
            "csr_build_seconds": self.prep.csr_seconds,
            "cache_bytes": self.median(Contender::Solidgraph).w.cache_bytes, "memory_limit_bytes": self.limit,
            "solidgraph_footprint_bytes": self.median(Contender::Solidgraph).w.footprint_bytes,
            "solidgraph_headroom_bytes": self.median(Contender::Solidgraph).w.headroom_bytes,
            "memory_enforced": self.cgroups, "caches": self.runs[0].caches,
            "batches": self.batches, "batch_size": self.batch_size, "seed": self.seed, "sample": self.sample,
            "rounds": self.rounds, "max_seconds": self.max_seconds, "inflight": self.inflight,
            "readahead_kb": self.readahead_kb, "verified_batches": self.verified,
            "contenders": contenders,
            "mmap_best": self.mmap_best().c.name(),
            "speedup_vs_mmap_best": vs_mmap, "speedup_vs_csr_io": vs_io,
            "bars": {
                "vs_mmap_5x": vs_mmap >= BAR_VS_MMAP, "vs_csr_io_1_5x": vs_io >= BAR_VS_CSR_IO,
                "fewer_pages_per_vertex": fewer,
            },
        })
    }

    fn print(&self) {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!("graph: {}: {} vertices, {} directed edges (undirected, deduplicated)", self.params, self.nodes, self.edges);
        if let Some(s) = self.prep.generate_seconds {
            println!("generated the edge list in {s:.1} s");
        }
        if let (Some(s), Some(e)) = (self.prep.import_seconds, self.prep.import_input_edges) {
            println!("import: {e} input edges in {s:.1} s = {:.2} M input edges/s", e as f64 / s / 1e6);
        }
        if let Some(s) = self.prep.csr_seconds {
            println!("built the CSR baseline in {s:.1} s");
        }
        println!("store {:.0} MiB, CSR {:.0} MiB", mib(self.store_bytes), mib(self.csr_bytes));
        // The budget each contender had: one limit, used as each one can.
        let s = &self.median(Contender::Solidgraph).w;
        let of = |b: Option<u64>| mib(b.unwrap_or(0));
        println!("memory: {:.1} MiB for each contender, all it has ({})", mib(self.limit), self.enforcement());
        println!(
            "  (S) page cache {:.1} MiB = the limit - its process's own {:.1} MiB (measured) - {:.1} MiB headroom",
            of(s.cache_bytes),
            of(s.footprint_bytes),
            of(s.headroom_bytes)
        );
        if self.cgroups {
            println!("  (a) the OS page cache over the CSR files: whatever of the limit its process does not use");
        } else {
            println!("  (a) the OS page cache over the CSR files: as much as the machine has (the limit is not enforced)");
        }
        println!("  (b) no cache: every batch reads its pages (it measures the CSR layout on our I/O engine)");
        println!(
            "{} batches x {} random vertices ({}, seed {}), at most {} s per run; {} round(s), each contender's median round shown",
            self.batches,
            self.batch_size,
            match self.sample {
                Sample::All => "uniform over all ids",
                Sample::Nonisolated => "uniform over ids with edges",
            },
            self.seed,
            self.max_seconds,
            self.rounds
        );
        println!(
            "caches {}; {} I/Os in flight per file (S, b); device readahead {}",
            self.caches(),
            self.inflight,
            self.readahead_kb.map_or("unknown".into(), |k| format!("{k} KiB"))
        );
        println!();
        println!(
            "{:<26} {:>10} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>15} {:>8}  rounds (vertices/s)",
            "contender", "vertices/s", "pages/v", "OS pg/v", "MiB read", "I/Os", "batches", "seconds", "batch p50/p99", "peak MiB"
        );
        for c in CONTENDERS {
            let m = self.median(c);
            let all: Vec<String> = self.runs.iter().filter(|r| r.c == c).map(|r| format!("{:.0}", r.vertices_per_s())).collect();
            println!(
                "{:<26} {:>10.0} {:>8.2} {:>8.2} {:>9.1} {:>8} {:>8} {:>8.2} {:>15} {:>8}  {}",
                c.label(),
                m.vertices_per_s(),
                m.pages_per_vertex(),
                m.os_pages_per_vertex(),
                mib(m.w.pages_read * PAGE),
                m.w.ios.map_or("-".into(), |n| n.to_string()),
                m.w.checksums.len(),
                m.w.seconds,
                format!("{:.1}/{:.1} ms", m.w.batch_p50_ms, m.w.batch_p99_ms),
                m.peak.map_or("-".into(), |p| format!("{:.0}", mib(p))),
                all.join(" "),
            );
        }
        let (vs_mmap, vs_io, fewer) = self.ratios();
        let pass = |ok: bool| if ok { "met" } else { "NOT met" };
        println!();
        println!("S / a (best: {}): {vs_mmap:.2}x   bar >= {BAR_VS_MMAP}x: {}", self.mmap_best().c.name(), pass(vs_mmap >= BAR_VS_MMAP));
        println!("S / b:             {vs_io:.2}x   bar >= {BAR_VS_CSR_IO}x: {}", pass(vs_io >= BAR_VS_CSR_IO));
        println!("S reads fewer pages per vertex than every baseline: {}", pass(fewer));
        println!("results verified: every run's neighbor lists equal SolidGraph's, batch by batch ({} batches)", self.verified);
        println!("pages/v: the contender's own count (store cache misses, volume bytes, OS read bytes for mmap); OS pg/v: /proc/self/io read_bytes");
    }
}
