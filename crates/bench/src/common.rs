//! Pieces shared by the `solidgraph-bench` comparisons (neighbors,
//! analytics, sampling): the Kronecker work directory (params.json, edge
//! file, store, CSR baseline files), cold caches, one cgroup v1 memory
//! limit per contender process, worker re-exec with a time cap, and the
//! CSR-over-mmap baseline.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use solidgraph_io::{BackendChoice, BackendKind};
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{Csr, Direction, EdgeInput, ImportOptions, OpenOptions, Store, StoreError, TensorInput};

use super::kron::Kronecker;
use solidgraph_cli::util::CliResult;

/// Unit of "pages read" for every contender, whatever its own page size.
pub(crate) const PAGE: u64 = 4096;
/// Vertices per `Store::neighbors` call when building the CSR baseline.
pub(crate) const CSR_BUILD_CHUNK: u64 = 1 << 16;
/// Memory for everything but the page cache: binary, heap, I/O buffers.
pub(crate) const PROCESS_OVERHEAD: u64 = 64 << 20;
pub(crate) const CGROUP_ROOT: &str = "/sys/fs/cgroup/memory";

#[derive(Debug)]
pub enum BenchError {
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The work directory holds artifacts of another graph.
    Stale {
        dir: PathBuf,
        have: String,
        want: String,
    },
    Worker {
        contender: &'static str,
        reason: String,
    },
    /// Two contenders returned different neighbor lists for one batch.
    Mismatch {
        batch: usize,
        contender: &'static str,
        got: u64,
        want: u64,
    },
    BadCsr(String),
    Invalid(String),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::File { path, source } => write!(f, "{}: {source}", path.display()),
            BenchError::Stale { dir, have, want } => {
                write!(f, "{} holds artifacts of another graph ({have}; this run wants {want}): pass --fresh or another --dir", dir.display())
            }
            BenchError::Worker { contender, reason } => write!(f, "contender {contender}: {reason}"),
            BenchError::Mismatch { batch, contender, got, want } => {
                write!(f, "batch {batch}: {contender} returned different neighbor lists than solidgraph (checksum {got:016x}, want {want:016x})")
            }
            BenchError::BadCsr(r) => write!(f, "CSR baseline: {r}"),
            BenchError::Invalid(r) => f.write_str(r),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::File { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(crate) fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::File { path: path.to_path_buf(), source }
}

pub(crate) enum Source {
    Generated(Kronecker),
    File(PathBuf),
}

/// What the work directory was built from; a mismatch means stale artifacts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "lowercase")]
pub(crate) enum Params {
    Kronecker { scale: u32, edge_factor: u64, seed: u64 },
    File { path: PathBuf, bytes: u64 },
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Params::Kronecker { scale, edge_factor, seed } => {
                write!(f, "Graph500 Kronecker scale {scale}, edge factor {edge_factor}, seed {seed}")
            }
            Params::File { path, bytes } => write!(f, "{} ({bytes} bytes)", path.display()),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct CsrMeta {
    pub(crate) nodes: u64,
    pub(crate) edges: u64,
    /// Bytes per column index: 4 below 2^32 vertices, else 8.
    pub(crate) id_bytes: u64,
}

pub(crate) struct Layout {
    pub(crate) dir: PathBuf,
}

impl Layout {
    pub(crate) fn params(&self) -> PathBuf {
        self.dir.join("params.json")
    }
    pub(crate) fn edges(&self) -> PathBuf {
        self.dir.join("edges.npy")
    }
    pub(crate) fn store(&self) -> PathBuf {
        self.dir.join("store")
    }
    pub(crate) fn csr(&self) -> PathBuf {
        self.dir.join("csr")
    }
    pub(crate) fn batch_file(&self) -> PathBuf {
        self.dir.join("batches.u64")
    }
    pub(crate) fn csr_meta(&self) -> PathBuf {
        self.csr().join("meta.json")
    }
    pub(crate) fn rowptr(&self) -> PathBuf {
        self.csr().join("rowptr.u64")
    }
    pub(crate) fn colidx(&self, id_bytes: u64) -> PathBuf {
        self.csr().join(if id_bytes == 4 { "colidx.u32" } else { "colidx.u64" })
    }
}

pub(crate) fn bench_root() -> PathBuf {
    std::env::var_os("SOLIDGRAPH_BENCH_DIR").map_or_else(|| PathBuf::from("/work/bench"), PathBuf::from)
}

pub(crate) fn backend_choice(b: &Option<String>) -> CliResult<BackendChoice> {
    Ok(match b {
        Some(s) => BackendChoice::Force(s.parse::<BackendKind>()?),
        None => BackendChoice::Auto,
    })
}

/// Progress on stderr, hidden in `--json` mode and when stderr is no terminal.
pub(crate) struct Progress {
    pub(crate) hidden: bool,
}

impl Progress {
    pub(crate) fn bar(&self, total: u64, what: &str) -> indicatif::ProgressBar {
        let pb = indicatif::ProgressBar::new(total);
        if self.hidden {
            pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        pb.set_style(
            indicatif::ProgressStyle::with_template("{msg:>12} [{bar:40}] {human_pos}/{human_len} {per_sec} eta {eta}")
                .expect("static template")
                .progress_chars("=> "),
        );
        pb.set_message(what.to_string());
        pb
    }
}

/// Everything the run did before measuring, for the report.
#[derive(Default, Serialize)]
pub(crate) struct Prepared {
    pub(crate) generate_seconds: Option<f64>,
    pub(crate) import_seconds: Option<f64>,
    pub(crate) import_input_edges: Option<u64>,
    pub(crate) csr_seconds: Option<f64>,
}

/// Readahead of the device holding `dir`: what the default mmap reads
/// around every page fault.
pub(crate) fn readahead_kb(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    // A partition has no queue of its own; its disk is the parent.
    [base.join("queue/read_ahead_kb"), base.join("../queue/read_ahead_kb")].iter().find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
}

/// Checks the work directory was built from `params` (or empties it).
pub(crate) fn prepare_dir(l: &Layout, params: &Params, fresh: bool) -> CliResult {
    std::fs::create_dir_all(&l.dir).map_err(file_err(&l.dir))?;
    let recorded: Option<Params> = match std::fs::read(l.params()) {
        Ok(b) => serde_json::from_slice(&b).ok(),
        Err(_) => None,
    };
    let has_artifacts = l.edges().exists() || l.store().exists() || l.csr().exists();
    if !fresh && has_artifacts {
        match &recorded {
            Some(r) if r == params => return Ok(()),
            Some(r) => return Err(BenchError::Stale { dir: l.dir.clone(), have: r.to_string(), want: params.to_string() }.into()),
            None => {
                return Err(BenchError::Stale { dir: l.dir.clone(), have: "unknown (no params.json)".into(), want: params.to_string() }.into());
            }
        }
    }
    for p in [l.edges(), l.dir.join("edges.npy.partial")] {
        if p.exists() {
            std::fs::remove_file(&p).map_err(file_err(&p))?;
        }
    }
    for p in [l.store(), l.csr(), l.dir.join("csr.partial")] {
        if p.exists() {
            std::fs::remove_dir_all(&p).map_err(file_err(&p))?;
        }
    }
    let j = serde_json::to_vec_pretty(params)?;
    std::fs::write(l.params(), j).map_err(file_err(&l.params()))?;
    Ok(())
}

pub(crate) fn read_csr_meta(l: &Layout) -> CliResult<Option<CsrMeta>> {
    match std::fs::read(l.csr_meta()) {
        Ok(b) => Ok(Some(serde_json::from_slice(&b).map_err(|e| BenchError::BadCsr(format!("{}: {e}", l.csr_meta().display())))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BenchError::File { path: l.csr_meta(), source: e }.into()),
    }
}

/// Writes the store's lists as CSR files, read back through the store in
/// big batches so both sides hold exactly the same lists. Files are padded
/// to 4 KiB so that our volume can open them.
pub(crate) fn build_csr(store: &Store, l: &Layout, progress: &Progress) -> CliResult<CsrMeta> {
    let n = store.num_nodes();
    let id_bytes = if n <= 1 << 32 { 4 } else { 8 };
    let tmp = l.dir.join("csr.partial");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(file_err(&tmp))?;
    let (rp_path, ci_path) = (tmp.join("rowptr.u64"), tmp.join(l.colidx(id_bytes).file_name().expect("file name")));
    let open = |p: &Path| File::create(p).map(|f| BufWriter::with_capacity(8 << 20, f)).map_err(file_err(p));
    let (mut rp, mut ci) = (open(&rp_path)?, open(&ci_path)?);
    let pb = progress.bar(n, "csr");
    let mut off = 0u64;
    rp.write_all(&off.to_le_bytes()).map_err(file_err(&rp_path))?;
    let mut start = 0;
    while start < n {
        // Rows in the user's ids; each lists its neighbors in the store's
        // order (sorted by the store's ids), so a sampler drawing list
        // positions picks the same neighbors from either.
        let mut ids: Vec<u64> = (start..(start + CSR_BUILD_CHUNK).min(n)).collect();
        store.to_internal(&mut ids)?;
        let mut csr = store.neighbors(&ids, Direction::Out, false, false)?;
        store.to_external(&mut csr.indices)?;
        let mut rbytes = Vec::with_capacity(8 * ids.len());
        for &e in &csr.indptr[1..] {
            rbytes.extend_from_slice(&(off + e).to_le_bytes());
        }
        rp.write_all(&rbytes).map_err(file_err(&rp_path))?;
        let cbytes: Vec<u8> = if id_bytes == 4 {
            csr.indices.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect()
        } else {
            csr.indices.iter().flat_map(|&v| v.to_le_bytes()).collect()
        };
        ci.write_all(&cbytes).map_err(file_err(&ci_path))?;
        off += csr.indices.len() as u64;
        start += ids.len() as u64;
        pb.set_position(start);
    }
    pb.finish_and_clear();
    for (w, p) in [(rp, &rp_path), (ci, &ci_path)] {
        let f = w.into_inner().map_err(|e| BenchError::File { path: p.clone(), source: e.into_error() })?;
        let len = f.metadata().map_err(file_err(p))?.len();
        f.set_len(len.div_ceil(PAGE) * PAGE).map_err(file_err(p))?;
        f.sync_all().map_err(file_err(p))?;
    }
    let meta = CsrMeta { nodes: n, edges: off, id_bytes };
    std::fs::write(tmp.join("meta.json"), serde_json::to_vec_pretty(&meta)?).map_err(file_err(&tmp))?;
    std::fs::rename(&tmp, l.csr()).map_err(file_err(&l.csr()))?;
    Ok(meta)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CacheDrop {
    /// `echo 3 > /proc/sys/vm/drop_caches`: everything, as root.
    DropCaches,
    /// posix_fadvise(DONTNEED) on the benchmark's files only.
    Fadvise,
}

pub(crate) fn drop_caches(files: &[PathBuf]) -> CacheDrop {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    if std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok() {
        return CacheDrop::DropCaches;
    }
    for p in files {
        if let Ok(f) = File::open(p) {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open descriptor; advice only.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
    CacheDrop::Fadvise
}

/// Whether we may create memory cgroups here (root, a v1 memory controller,
/// writable: containers often mount it read-only).
pub(crate) fn cgroups_usable() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new(CGROUP_ROOT).join("cgroup.procs").exists() {
        return false;
    }
    let probe = Path::new(CGROUP_ROOT).join(format!("solidgraph-bench-{}-probe", std::process::id()));
    let ok = std::fs::create_dir(&probe).is_ok() && std::fs::write(probe.join("memory.limit_in_bytes"), (64u64 << 20).to_string()).is_ok();
    let _ = std::fs::remove_dir(&probe);
    ok
}

/// A cgroup v1 memory group for one contender, removed on drop.
pub(crate) struct Cgroup {
    pub(crate) path: PathBuf,
}

impl Cgroup {
    pub(crate) fn create(name: &str, limit: u64) -> CliResult<Cgroup> {
        let path = Path::new(CGROUP_ROOT).join(format!("solidgraph-bench-{}-{name}", std::process::id()));
        if path.exists() {
            let _ = std::fs::remove_dir(&path);
        }
        std::fs::create_dir(&path).map_err(file_err(&path))?;
        let g = Cgroup { path };
        let lim = g.path.join("memory.limit_in_bytes");
        std::fs::write(&lim, limit.to_string()).map_err(file_err(&lim))?;
        Ok(g)
    }

    pub(crate) fn read(&self, file: &str) -> Option<u64> {
        std::fs::read_to_string(self.path.join(file)).ok()?.trim().parse().ok()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The worker has exited, but the kernel may take a moment to let go.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        log::warn!("could not remove cgroup {}", self.path.display());
    }
}

/// A number alone in a file (cgroup counters).
pub(crate) fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// This process's peak resident set (VmHWM of /proc/self/status), 0 if
/// unknown.
pub(crate) fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmHWM:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())))
        .map_or(0, |kb| kb << 10)
}

pub(crate) fn os_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("read_bytes:").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

pub(crate) fn major_faults() -> u64 {
    // SAFETY: getrusage fills the struct we hand it.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru.ru_majflt as u64
    }
}

pub(crate) fn csr_meta(l: &Layout) -> CliResult<CsrMeta> {
    read_csr_meta(l)?.ok_or_else(|| BenchError::BadCsr(format!("{} is missing", l.csr_meta().display())).into())
}

pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub(crate) fn push_ids(block: &[u8], id_bytes: u64, out: &mut Vec<u64>) {
    if id_bytes == 4 {
        out.extend(block.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4")) as u64));
    } else {
        out.extend(block.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8"))));
    }
}

pub(crate) fn bad_range(v: u64, s: u64, e: u64, edges: u64) -> BenchError {
    BenchError::BadCsr(format!("row of vertex {v} is {s}..{e}, outside 0..{edges}"))
}

/// CSR through mmap: what numpy.memmap does, a page fault per cold page.
pub(crate) struct MmapCsr {
    pub(crate) rowptr: memmap2::Mmap,
    pub(crate) colidx: memmap2::Mmap,
    pub(crate) meta: CsrMeta,
}

impl MmapCsr {
    pub(crate) fn open(l: &Layout, random: bool) -> CliResult<MmapCsr> {
        let meta = csr_meta(l)?;
        let map = |p: &Path| -> CliResult<memmap2::Mmap> {
            let f = File::open(p).map_err(file_err(p))?;
            // SAFETY: the benchmark's files are not modified while mapped.
            let m = unsafe { memmap2::Mmap::map(&f) }.map_err(file_err(p))?;
            if random {
                m.advise(memmap2::Advice::Random).map_err(file_err(p))?;
            }
            Ok(m)
        };
        let (rowptr, colidx) = (map(&l.rowptr())?, map(&l.colidx(meta.id_bytes))?);
        if (rowptr.len() as u64) < 8 * (meta.nodes + 1) || (colidx.len() as u64) < meta.edges * meta.id_bytes {
            return Err(BenchError::BadCsr("files are shorter than meta.json says: pass --fresh".into()).into());
        }
        Ok(MmapCsr { rowptr, colidx, meta })
    }

    pub(crate) fn neighbors(&self, ids: &[u64]) -> CliResult<Csr> {
        let w = self.meta.id_bytes;
        let mut csr = Csr { indptr: Vec::with_capacity(ids.len() + 1), ..Default::default() };
        csr.indptr.push(0);
        for &v in ids {
            let (s, e) = (le_u64(&self.rowptr, 8 * v as usize), le_u64(&self.rowptr, 8 * v as usize + 8));
            if s > e || e > self.meta.edges {
                return Err(bad_range(v, s, e, self.meta.edges).into());
            }
            push_ids(&self.colidx[(s * w) as usize..(e * w) as usize], w, &mut csr.indices);
            csr.indptr.push(csr.indices.len() as u64);
        }
        Ok(csr)
    }
}

/// What a benchmark needs built in its work directory.
pub(crate) struct GraphSpec {
    /// Generated Kronecker graph, or an edge file.
    pub(crate) source: Source,
    pub(crate) dir: PathBuf,
    pub(crate) fresh: bool,
    pub(crate) import_memory: u64,
    pub(crate) backend: Option<String>,
    /// How the store numbers vertices (the CSR baselines keep the input's ids).
    pub(crate) order: VertexOrder,
    /// Import with lower lists (`ImportOptions::lower_lists`).
    pub(crate) lower_lists: bool,
}

/// A prepared work directory: store and CSR hold the same lists.
pub(crate) struct Graph {
    pub(crate) l: Layout,
    pub(crate) params: Params,
    pub(crate) meta: CsrMeta,
    pub(crate) prep: Prepared,
    pub(crate) store_bytes: u64,
}

impl Graph {
    /// Bytes of the CSR baseline files (row pointers + column indices).
    pub(crate) fn csr_bytes(&self) -> u64 {
        [self.l.rowptr(), self.l.colidx(self.meta.id_bytes)].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum()
    }

    /// Every file a contender may read (for fadvise when not root).
    pub(crate) fn files(&self) -> CliResult<Vec<PathBuf>> {
        let store = Store::open(&self.l.store(), &OpenOptions { cache_bytes: 0, ..Default::default() })?;
        let mut files: Vec<PathBuf> = store.volume().paths().to_vec();
        files.push(self.l.rowptr());
        files.push(self.l.colidx(self.meta.id_bytes));
        Ok(files)
    }
}

impl GraphSpec {
    pub(crate) fn params(&self) -> CliResult<Params> {
        Ok(match &self.source {
            Source::File(p) => {
                let bytes = std::fs::metadata(p).map_err(file_err(p))?.len();
                Params::File { path: std::path::absolute(p).map_err(file_err(p))?, bytes }
            }
            Source::Generated(k) => Params::Kronecker { scale: k.scale, edge_factor: k.edge_factor, seed: k.seed },
        })
    }
}

/// Builds (or reuses) the edge file, the undirected store and the CSR
/// baseline files in `spec.dir`. `tensors` runs after the directory is
/// checked and before the import, and names the node tensors to import (it
/// may write their files into the directory).
pub(crate) fn prepare_graph(spec: &GraphSpec, progress: &Progress, tensors: &dyn Fn(&Layout) -> CliResult<Vec<TensorInput>>) -> CliResult<Graph> {
    let params = spec.params()?;
    let l = Layout { dir: spec.dir.clone() };
    let mut prep = Prepared::default();
    prepare_dir(&l, &params, spec.fresh)?;

    let edge_file = match &spec.source {
        Source::File(p) => p.clone(),
        Source::Generated(_) if l.edges().exists() => l.edges(),
        Source::Generated(k) => {
            let t = Instant::now();
            let pb = progress.bar(k.num_edges(), "generating");
            let tmp = l.dir.join("edges.npy.partial");
            k.write_npy(&tmp, &|n| pb.inc(n)).map_err(file_err(&tmp))?;
            std::fs::rename(&tmp, l.edges()).map_err(file_err(&l.edges()))?;
            pb.finish_and_clear();
            prep.generate_seconds = Some(t.elapsed().as_secs_f64());
            l.edges()
        }
    };
    let tensor_inputs = tensors(&l)?;

    let open_opts = OpenOptions { cache_bytes: 0, backend: backend_choice(&spec.backend)?, ..Default::default() };
    if l.store().exists() {
        // A store written by an older build of the format, or without the
        // tensors wanted now, is a derived artifact: rebuild it (and the
        // CSR made from it) from the edges.
        let stale = match Store::open(&l.store(), &open_opts) {
            Err(e @ (StoreError::Corrupt { .. } | StoreError::NotAStore { .. } | StoreError::NewerFormat { .. } | StoreError::OlderFormat { .. })) => {
                Some((e.to_string(), false))
            }
            Ok(s) if s.reordered() != (spec.order == VertexOrder::Degree) => Some((format!("vertex order is not {:?}", spec.order), false)),
            // The same lists either way: the CSR stays.
            Ok(s) if s.has_lower_lists() != spec.lower_lists => Some((format!("lower lists {}", if spec.lower_lists { "wanted" } else { "not wanted" }), true)),
            Ok(s) => tensor_inputs.iter().find(|t| s.tensor_meta(&t.name).is_err()).map(|t| (format!("no tensor {:?}", t.name), false)),
            Err(_) => None,
        };
        if let Some((why, keep_csr)) = stale {
            eprintln!("note: rebuilding {} ({why})", l.store().display());
            let csr = l.csr();
            for p in [Some(l.store()), (!keep_csr).then_some(csr)].into_iter().flatten() {
                if p.exists() {
                    std::fs::remove_dir_all(&p).map_err(file_err(&p))?;
                }
            }
        }
    }
    if !l.store().exists() {
        let pb = progress.bar(0, "reading");
        let report = solidgraph_store::import(
            &l.store(),
            &[EdgeInput::File(edge_file.clone())],
            &tensor_inputs,
            &ImportOptions {
                undirected: true,
                dedup: true,
                order: spec.order,
                lower_lists: spec.lower_lists,
                memory_budget: spec.import_memory,
                // A generated graph has 2^scale vertices even when the
                // highest ids happen to have no edges.
                num_nodes: match &spec.source {
                    Source::Generated(k) => Some(k.num_nodes()),
                    Source::File(_) => None,
                },
                ..Default::default()
            },
            &|phase, done, total| {
                if pb.message() != phase {
                    pb.set_message(phase.to_string());
                    pb.reset();
                }
                pb.set_length(total);
                pb.set_position(done);
            },
        )?;
        pb.finish_and_clear();
        prep.import_seconds = Some(report.seconds);
        prep.import_input_edges = Some(report.input_edges);
    }
    let store = Store::open(&l.store(), &open_opts)?;

    let meta = match read_csr_meta(&l)? {
        Some(m) => m,
        None => {
            let t = Instant::now();
            // A renumbered store is read at random in the user's order:
            // cache all of it so each page is read once.
            let m = if store.reordered() {
                let cached = Store::open(&l.store(), &OpenOptions { cache_bytes: store.size_bytes(), ..open_opts.clone() })?;
                build_csr(&cached, &l, progress)?
            } else {
                build_csr(&store, &l, progress)?
            };
            prep.csr_seconds = Some(t.elapsed().as_secs_f64());
            m
        }
    };
    if meta.nodes != store.num_nodes() || meta.edges != store.num_edges() {
        return Err(BenchError::BadCsr(format!(
            "{} has {} vertices and {} edges, the store {} and {}: pass --fresh",
            l.csr().display(),
            meta.nodes,
            meta.edges,
            store.num_nodes(),
            store.num_edges()
        ))
        .into());
    }
    let store_bytes = store.size_bytes();
    Ok(Graph { l, params, meta, prep, store_bytes })
}

/// How a worker process ended.
pub(crate) enum WorkerEnd {
    /// Its last non-empty stdout line.
    Done(String),
    /// Killed at the time cap.
    Capped,
}

/// Re-executes this binary with `args` (a hidden worker subcommand), in
/// cgroup `cg` when given (the worker joins it itself: pass `--cgroup`),
/// killing it after `cap`.
pub(crate) fn run_worker(name: &str, args: &[OsString], cg: Option<&Cgroup>, cap: Option<Duration>) -> CliResult<WorkerEnd> {
    let exe = std::env::current_exe().map_err(|e| BenchError::Invalid(format!("{name}: cannot find own binary: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if let Some(g) = cg {
        cmd.arg("--cgroup").arg(&g.path);
    }
    let out_path = std::env::temp_dir().join(format!("solidgraph-bench-{}-{name}.out", std::process::id()));
    let out_file = File::create(&out_path).map_err(file_err(&out_path))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out_file)
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::Worker { contender: leak(name), reason: format!("cannot start: {e}") })?;
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| BenchError::Invalid(format!("{name}: {e}")))? {
            break s;
        }
        if cap.is_some_and(|c| t.elapsed() >= c) {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&out_path);
            return Ok(WorkerEnd::Capped);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        let reason = match status.signal() {
            Some(libc::SIGKILL) if cg.is_some() => "killed (out of memory in its cgroup? raise --memory-budget)".to_string(),
            Some(s) => format!("killed by signal {s}"),
            None => format!("failed ({status})"),
        };
        return Err(BenchError::Worker { contender: leak(name), reason }.into());
    }
    Ok(WorkerEnd::Done(text.lines().rev().find(|s| !s.trim().is_empty()).unwrap_or("").to_string()))
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// Joins the memory cgroup (first thing a worker does, so all its memory is
/// charged there).
pub(crate) fn join_cgroup(g: &Option<PathBuf>) -> CliResult {
    if let Some(g) = g {
        let procs = g.join("cgroup.procs");
        std::fs::write(&procs, std::process::id().to_string()).map_err(file_err(&procs))?;
    }
    Ok(())
}

/// Moves this process back to the root memory cgroup (after a timed run:
/// what it allocates or writes from now on is not charged to the run).
pub(crate) fn leave_cgroup(g: &Option<PathBuf>) -> CliResult {
    if g.is_some() {
        let procs = Path::new(CGROUP_ROOT).join("cgroup.procs");
        std::fs::write(&procs, std::process::id().to_string()).map_err(file_err(&procs))?;
    }
    Ok(())
}

/// Draws `total` vertex ids uniformly, all or only those with edges.
pub(crate) fn draw_ids(l: &Layout, meta: CsrMeta, seed: u64, total: usize, nonisolated: bool) -> CliResult<Vec<u64>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    if !nonisolated {
        return Ok((0..total).map(|_| rng.random_range(0..meta.nodes)).collect());
    }
    if meta.edges == 0 {
        return Err(BenchError::Invalid("the graph has no edges to sample from".into()).into());
    }
    let f = File::open(l.rowptr()).map_err(file_err(&l.rowptr()))?;
    // SAFETY: the benchmark's files are not modified while mapped.
    let rp = unsafe { memmap2::Mmap::map(&f) }.map_err(file_err(&l.rowptr()))?;
    let degree = |v: u64| le_u64(&rp, 8 * v as usize + 8) - le_u64(&rp, 8 * v as usize);
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        let v = rng.random_range(0..meta.nodes);
        if degree(v) > 0 {
            out.push(v);
        }
    }
    Ok(out)
}

/// `solidgraph-bench io` on a file in the bench directory, in this run:
/// the device's reference numbers (sequential MiB/s, random IOPS).
pub(crate) fn device_io(
    dir: &Path,
    pattern: &str,
    block: usize,
    depth: usize,
    seconds: f64,
    backend: &Option<String>,
) -> CliResult<solidgraph_io::bench::IoBenchResult> {
    use solidgraph_io::bench::{IoBenchConfig, Pattern};
    let path = dir.parent().unwrap_or(dir).join("io.dat");
    let size = std::fs::metadata(&path).map_or(4u64 << 30, |m| m.len().max(1 << 30));
    let cfg = IoBenchConfig {
        paths: vec![path],
        size,
        block,
        depth,
        seconds,
        pattern: pattern.parse::<Pattern>()?,
        backend: backend.as_deref().map(str::parse::<BackendKind>).transpose()?,
        stripe_bytes: block.max(256 << 10),
        seed: 1,
    };
    let vol = solidgraph_io::bench::prepare(&cfg, &mut |_, _| {})?;
    drop_caches(&[]);
    Ok(solidgraph_io::bench::run(&vol, &cfg)?)
}
