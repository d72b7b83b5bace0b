//! An open store: superblock, in-memory translation tables, page cache, and
//! the batched reads (neighbors, degree, edge weights, tensor rows).
//!
//! Every read plans the pages of its whole batch first, fetches them through
//! the cache in one call (misses become one volume batch), then decodes.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use solidgraph_io::{BackendChoice, MemberStats, Volume, VolumeOptions};

use crate::adjacency::{Block, SKIP, find_in_packed};
use crate::cache::{CacheStats, PageCache};
use crate::rowcache::{Admit, Expected, RowCache};
use crate::delta::Delta;
use crate::update::Writer;
use crate::error::{Result, StoreError, file_err};
use crate::gtt::{Gtt, Loc};
use crate::page::{self, HEADER, Kind};
use crate::scan::Fetched;
use crate::superblock::{DirMeta, Superblock, TensorMeta};
use crate::tensor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Out,
    In,
    /// An undirected store's lower lists, when imported with them
    /// (`ImportOptions::lower_lists`): each vertex's neighbors up to itself,
    /// so every edge once. Whole-graph passes that see an edge from either
    /// end (PageRank, WCC) read half the bytes. Edge ids number this
    /// adjacency's own order. Not kept up to date by updates: unavailable
    /// while updates are pending, dropped by the next merge.
    Lower,
}

impl std::str::FromStr for Direction {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Direction> {
        match s {
            "out" => Ok(Direction::Out),
            "in" => Ok(Direction::In),
            _ => Err(StoreError::Invalid(format!("direction must be \"out\" or \"in\", not {s:?}"))),
        }
    }
}

#[derive(Clone)]
pub struct OpenOptions {
    /// Page cache budget in bytes (0: no cache).
    pub cache_bytes: u64,
    pub backend: BackendChoice,
    pub inflight_per_member: usize,
    /// Open for updates: takes the store's writer lock (one writer process).
    pub writable: bool,
    /// Memory the pending updates may hold before a write merges them into
    /// pages (0: merge only on request).
    pub delta_budget: u64,
    /// A cache of tensor rows (not pages) with this budget, for read-only
    /// opens: a hot row shares its page with cold ones, so caching rows
    /// holds several times more hot rows per byte. Tensor pages then bypass
    /// the page cache, which keeps adjacency. Open fills it with the rows
    /// of the highest-degree vertices (one read of the budget's bytes). 0:
    /// rows go through the page cache.
    pub row_cache_bytes: u64,
    /// Which rows the row cache takes in.
    pub row_admission: RowAdmission,
}

/// What a row cache admits on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowAdmission {
    /// Rows that missed before (a doorkeeper; see `rowcache::Admit::Seen`),
    /// so rows asked for once do not push out rows asked for again.
    /// Measured best: Kronecker scale 24, 20 batches of [25, 10], 80% of a
    /// 5% budget for rows: 78.1% of rows hit in a trace simulation against
    /// 74.7% for `All` (which the benchmark measured at 74.8%).
    #[default]
    Seen,
    /// Every row (plain SIEVE). 57.8% of rows hit in the benchmark above
    /// when rows had half the budget.
    All,
    /// Only rows of the vertices of highest degree at import (the store's
    /// hot table), as many as the budget holds; every row when the budget
    /// holds more rows than the table ranks, or the store predates the
    /// table (format 3). A simulation favoured it; the same benchmark
    /// measured 52.1%: SIEVE alone already keeps the hubs' rows, and the
    /// ranking (out-degree at import) misses rows that are hot for other
    /// reasons.
    Hot,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { cache_bytes: 256 << 20, backend: BackendChoice::Auto, inflight_per_member: 64, writable: false, delta_budget: 256 << 20, row_cache_bytes: 0, row_admission: RowAdmission::Seen }
    }
}

/// Neighbor lists of a batch in CSR form: the lists of `ids[i]` are
/// `indices[indptr[i]..indptr[i + 1]]`, sorted by neighbor id. The k-th edge
/// of list i has global edge id `first_edge[i] + k` (its position in the
/// direction's CSR order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Csr {
    pub indptr: Vec<u64>,
    pub indices: Vec<u64>,
    pub first_edge: Vec<u64>,
    pub weights: Option<Vec<f32>>,
    pub labels: Option<Vec<u32>>,
}

/// Neighbors drawn from lists (`Store::neighbors_drawn`): list i's are
/// `counts[i]` consecutive entries of `ids` and `edges`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drawn {
    pub ids: Vec<u64>,
    pub edges: Vec<u64>,
    pub counts: Vec<usize>,
}

/// Lists planned (`Store::plan`), their pages fetched, and each one's
/// degree in them.
struct Planned {
    locs: Vec<Loc>,
    pages: Vec<u64>,
    fetched: Fetched,
    degree: Vec<u64>,
}

/// Rows gathered from a tensor, in request order, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub dtype: tensor::DType,
    pub dim: u64,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    pub cache: CacheStats,
    /// The row cache's, when there is one (hits and misses count rows).
    pub rows: Option<CacheStats>,
    pub members: Vec<MemberStats>,
    pub page_size: u64,
}

impl StoreStats {
    /// Every page read from the volume: cache misses, scans and the row
    /// cache's reads, which bypass the page cache.
    pub fn pages_read(&self) -> u64 {
        self.bytes_read() / self.page_size.max(1)
    }
    pub fn ios(&self) -> u64 {
        self.members.iter().map(|m| m.ios).sum()
    }
    pub fn bytes_read(&self) -> u64 {
        self.members.iter().map(|m| m.bytes_read).sum()
    }
}

/// What one superblock names: immutable; a merge builds the next one and
/// swaps it in. Readers hold an `Arc` for the length of a read (or of a
/// snapshot), and the pages it names are not reused while any does.
pub(crate) struct Base {
    pub sb: Superblock,
    pub out: Gtt,
    pub inn: Option<Gtt>,
    pub lower: Option<Gtt>,
    /// Tensor pages moved by merges: (tensor index, page index) -> page.
    pub tensor_map: HashMap<(u32, u64), u64>,
    /// Deleted vertices (never reused).
    pub tombstones: Vec<u64>,
}

impl Base {
    pub fn gtt(&self, dir: Direction) -> Result<&Gtt> {
        match dir {
            Direction::Out => Ok(&self.out),
            // An undirected store keeps each edge both ways in one table.
            Direction::In if !self.sb.directed => Ok(&self.out),
            Direction::In => self.inn.as_ref().ok_or(StoreError::NoDirection("in")),
            Direction::Lower => self.lower.as_ref().ok_or(StoreError::NoDirection("lower")),
        }
    }

    /// Edges stored in `dir`'s adjacency.
    pub fn edges(&self, dir: Direction) -> u64 {
        match (dir, self.sb.lower) {
            (Direction::Lower, Some(l)) => l.edges,
            (Direction::Lower, None) => 0,
            _ => self.sb.num_edges,
        }
    }

    /// Page number of page `k` of tensor `ti`.
    pub fn tensor_page(&self, ti: usize, k: u64) -> Option<u64> {
        let t = &self.sb.tensors[ti];
        self.tensor_map.get(&(ti as u32, k)).copied().or((k < t.pages).then(|| t.start_page + k))
    }

    /// Refuses a page written by a newer merge than this base: another
    /// process merged and may have reused the page this base expected.
    pub fn check_epoch(&self, page_no: u64, page_epoch: u64) -> Result<()> {
        if page_epoch > self.sb.epoch {
            return Err(StoreError::Stale { page: page_no, epoch: self.sb.epoch, found: page_epoch });
        }
        Ok(())
    }
}

/// A translation table borrowed from the base current when it was taken.
pub struct GttRef {
    base: Arc<Base>,
    dir: Direction,
}

impl std::ops::Deref for GttRef {
    type Target = Gtt;
    fn deref(&self) -> &Gtt {
        self.base.gtt(self.dir).expect("checked when taken")
    }
}

/// The rows a gather's pages hold beside the ones it asked for, which
/// upcoming batches (`Store::expect_rows`) will ask for: the page is read
/// already, so they enter the row cache now rather than cost a read of the
/// same page later. In a degree-ordered store a page's rows belong to
/// vertices of about the same degree, so the rows beside a missed one are
/// often wanted soon too: at scale 24, 16 batches ahead, a replay counted
/// 32% fewer row page reads over 20 batches.
struct CoPage<'a> {
    rc: &'a RowCache,
    ids: Vec<u64>,
    bytes: Vec<u8>,
}

impl CoPage<'_> {
    /// `index[k]`: the tensor page number of fetched page `page(k)`, in
    /// order, repeated for consecutive rows on one page; pages were checked
    /// by the caller. Rows straddling a page boundary are left out.
    fn collect<'p>(&mut self, ti: usize, index: &[u64], page: impl Fn(usize) -> &'p [u8], rb: u64, pl: u64, rows: u64) {
        let (mut cand, mut from) = (Vec::new(), Vec::new());
        for (k, &tp) in index.iter().enumerate() {
            if k > 0 && index[k - 1] == tp {
                continue;
            }
            for r in (tp * pl).div_ceil(rb)..((tp + 1) * pl / rb).min(rows) {
                cand.push(r);
                from.push(k);
            }
        }
        for j in self.rc.upcoming_uncached(ti, &cand) {
            let (r, k) = (cand[j], from[j]);
            let off = HEADER + (r * rb - index[k] * pl) as usize;
            self.ids.push(r);
            self.bytes.extend_from_slice(&page(k)[off..off + rb as usize]);
        }
    }
}

/// Parts a store shares with its snapshots.
struct Shared {
    path: PathBuf,
    vol: Volume,
    cache: PageCache,
    /// Tensor rows (`rowcache.rs`). Only in read-only opens: no merge here
    /// can change a row.
    rows: Option<RowCache>,
    warming: Warming,
    order: crate::order::OrderMaps,
}

/// The row cache's warm-up (`Store::warm_rows`), run on a thread of its
/// own once open returns. Row gathers wait for it; adjacency reads do not,
/// so a loader's first draws run while it fills the cache. At open it
/// faults in and fills the whole budget (366 MB at scale 24), 0.5-1.6 s
/// that left the device idle while the kernel zeroed memory.
struct Warming {
    done: Mutex<bool>,
    finished: Condvar,
}

impl Warming {
    fn new(done: bool) -> Warming {
        Warming { done: Mutex::new(done), finished: Condvar::new() }
    }

    fn finish(&self) {
        *self.done.lock().unwrap() = true;
        self.finished.notify_all();
    }

    fn wait(&self) {
        let mut done = self.done.lock().unwrap();
        while !*done {
            done = self.finished.wait(done).unwrap();
        }
    }
}

pub struct Store {
    shared: Arc<Shared>,
    base: RwLock<Arc<Base>>,
    /// Updates since the pages were written (replayed from the WAL at open).
    pub(crate) delta: RwLock<Delta>,
    /// The log and writer lock of a store opened writable.
    pub(crate) writer: Option<Writer>,
}

pub fn member_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("sg.{i}"))
}

/// An empty column, in `col`'s buffer when there is one; None unless `want`.
fn emptied<T>(col: Option<Vec<T>>, want: bool) -> Option<Vec<T>> {
    want.then(|| {
        let mut c = col.unwrap_or_default();
        c.clear();
        c
    })
}

/// Reads both superblock copies from member 0 with plain reads (the page
/// size is not known yet) and returns the valid one with the higher epoch.
fn bootstrap(dir: &Path, backend: &BackendChoice) -> Result<Superblock> {
    let p0 = member_path(dir, 0);
    let head = if let BackendChoice::Sim(disk) = backend {
        disk.peek(0, 0, 2 * 65536)
    } else {
        let mut f = std::fs::File::open(&p0).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                StoreError::NotAStore { path: dir.to_path_buf(), reason: format!("{} is missing", p0.display()) }
            } else {
                StoreError::File { path: p0.clone(), source: e }
            }
        })?;
        let mut head = Vec::new();
        f.by_ref().take(2 * 65536).read_to_end(&mut head).map_err(file_err(&p0))?;
        head
    };
    let mut best: Option<Superblock> = None;
    let mut first_err = None;
    let mut ps = 4096;
    while ps <= 65536 {
        for which in 0..2u64 {
            let at = which as usize * ps;
            if head.len() < at + ps {
                continue;
            }
            match Superblock::decode(which, &head[at..at + ps], dir) {
                Ok(sb) if sb.page_size as usize == ps => {
                    if best.as_ref().is_none_or(|b| sb.epoch > b.epoch) {
                        best = Some(sb);
                    }
                }
                Ok(_) => {}
                Err(e @ (StoreError::NewerFormat { .. } | StoreError::OlderFormat { .. })) => return Err(e),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        ps *= 2;
    }
    best.ok_or_else(|| match first_err {
        Some(StoreError::Corrupt { reason, .. }) => {
            StoreError::NotAStore { path: dir.to_path_buf(), reason: format!("no valid superblock ({reason})") }
        }
        Some(e) => e,
        None => StoreError::NotAStore { path: dir.to_path_buf(), reason: "file too short for a superblock".into() },
    })
}

impl Store {
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Store> {
        let sb = bootstrap(path, &opts.backend)?;
        let paths: Vec<PathBuf> = (0..sb.members as usize).map(|i| member_path(path, i)).collect();
        let vol = Volume::open(
            &paths,
            VolumeOptions {
                page_size: sb.page_size as usize,
                stripe_pages: sb.stripe_pages,
                backend: opts.backend.clone(),
                inflight_per_member: opts.inflight_per_member,
                writable: opts.writable,
                ..Default::default()
            },
        )?;
        if vol.num_pages() < sb.total_pages {
            return Err(StoreError::Corrupt {
                page: vol.num_pages(),
                reason: format!("store is truncated: {} pages on disk, superblock says {}", vol.num_pages(), sb.total_pages),
            });
        }
        let base = load_base(&vol, sb)?;
        // The hubs whose rows the row cache starts with (and may admit only).
        let (rows, hot) = if opts.row_cache_bytes > 0 && !opts.writable {
            let hot = load_table_prefix(&vol, &base.sb.hot, rows_held(&base.sb, opts.row_cache_bytes))?;
            (Some(row_cache(&base.sb, opts.row_cache_bytes, opts.row_admission, &hot)?), hot)
        } else {
            (None, Vec::new())
        };
        let mut s = Store {
            shared: Arc::new(Shared {
                path: path.to_path_buf(),
                vol,
                cache: PageCache::new(opts.cache_bytes as usize, base.sb.page_size as usize),
                warming: Warming::new(rows.is_none()),
                rows,
                order: Default::default(),
            }),
            delta: RwLock::new(Delta::new(&base, base.sb.directed && base.sb.inn.is_none())),
            base: RwLock::new(Arc::new(base)),
            writer: None,
        };
        s.recover(opts)?;
        if s.shared.rows.is_some() {
            // A warm-up that fails leaves rows uncached, never wrong: a
            // gather that needs them reads their pages itself and meets the
            // same error there, in its caller.
            let (warm, hot) = (s.snapshot(), Arc::new(hot));
            let h = hot.clone();
            let spawned = std::thread::Builder::new().name("sg-warm-rows".into()).spawn(move || {
                let _ = warm.warm_rows(&h);
                warm.shared.warming.finish();
            });
            if spawned.is_err() {
                let _ = s.warm_rows(&hot);
                s.shared.warming.finish();
            }
        }
        Ok(s)
    }


    /// Fills the row cache with the rows of `hot`, the vertices of highest
    /// degree (the head of the store's hot table) it holds: a cold
    /// cache otherwise spends its first mini-batches missing exactly the
    /// hubs' rows that most samples contain. In a degree-ordered store the
    /// hubs are the first ids, so this is one sequential pass of merged
    /// reads over the budget's bytes. SIEVE evicts the rows no batch asks
    /// for first.
    fn warm_rows(&self, hot: &[u64]) -> Result<()> {
        // Rows per read: bounds the scratch copy and the pages held.
        const PART: usize = 16 * 1024;
        let Some(rc) = &self.shared.rows else { return Ok(()) };
        let base = self.base();
        // Two threads take parts in turn, so one's reads are in flight
        // while the other copies rows into the cache (one thread left the
        // device idle between parts: 0.7-1.2 s at scale 24 for ~380 MB).
        let next = std::sync::atomic::AtomicUsize::new(0);
        let parts: Vec<(usize, &[u64])> = (0..base.sb.tensors.len()).flat_map(|ti| hot.chunks(PART).map(move |p| (ti, p))).collect();
        let warm = || -> Result<()> {
            let mut scratch = Vec::new();
            while let Some(&(ti, part)) = parts.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                let mut ids = part.to_vec();
                ids.sort_unstable();
                scratch.resize(ids.len() * base.sb.tensors[ti].row_bytes() as usize, 0);
                self.tensor_pages_into(&base, ti, &ids, &mut scratch, false)?;
            }
            Ok(())
        };
        std::thread::scope(|sc| {
            sc.spawn(|| rc.prefault());
            let other = sc.spawn(warm);
            let mine = warm();
            other.join().expect("row warm-up thread panicked").and(mine)
        })?;
        rc.reset_stats();
        Ok(())
    }

    /// A read-only view of the graph as it is now: later updates and merges
    /// do not change what it reads, and the pages it reads are not reused
    /// while it lives. Costs a copy of the pending updates.
    pub fn snapshot(&self) -> Store {
        Store {
            shared: self.shared.clone(),
            base: RwLock::new(self.base()),
            delta: RwLock::new(self.delta.read().unwrap().clone()),
            writer: None,
        }
    }

    /// The current base (see `Base`).
    pub(crate) fn base(&self) -> Arc<Base> {
        self.base.read().unwrap().clone()
    }

    /// Refuses the lower lists while updates are pending: they hold the
    /// pages' edges only, and patching them is not worth it for a region
    /// the next merge drops.
    pub(crate) fn check_lower(&self, dir: Direction) -> Result<()> {
        if dir == Direction::Lower && !self.delta.read().unwrap().is_empty() {
            return Err(StoreError::Invalid("the lower lists do not hold the pending updates: read out-lists, or merge (which drops the lower lists)".into()));
        }
        Ok(())
    }

    /// The store has lower lists (`Direction::Lower`) that hold every edge:
    /// imported with them, and no updates since.
    pub fn has_lower_lists(&self) -> bool {
        self.base().lower.is_some() && self.delta.read().unwrap().is_empty()
    }

    /// Every vertex's out-degree as the lower lists' import counted it
    /// (one sequential read of 4 bytes per vertex): a pass over the lower
    /// lists sees only part of each. None without lower lists (or with
    /// updates pending).
    pub fn lower_degrees(&self) -> Result<Option<Vec<u32>>> {
        let base = self.base();
        let Some(l) = base.sb.lower.filter(|_| self.has_lower_lists()) else { return Ok(None) };
        let n = base.sb.num_nodes as usize;
        if l.degrees.words != n.div_ceil(2) as u64 {
            return Err(StoreError::Corrupt { page: l.degrees.start, reason: format!("degree table of {} words for {n} vertices", l.degrees.words) });
        }
        let words = load_table(self.volume(), &l.degrees)?;
        let mut d: Vec<u32> = Vec::with_capacity(n);
        crate::mem::advise_huge(&d);
        d.extend(words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]).take(n));
        Ok(Some(d))
    }

    pub(crate) fn set_base(&self, b: Arc<Base>) {
        *self.base.write().unwrap() = b;
    }
}

/// Reads the translation tables and tables a superblock names.
pub(crate) fn load_base(vol: &Volume, sb: Superblock) -> Result<Base> {
    let out = load_gtt(vol, &sb.out)?;
    let inn = match sb.inn {
        Some(d) => Some(load_gtt(vol, &d)?),
        None => None,
    };
    let lower = match sb.lower {
        Some(l) => Some(load_gtt(vol, &l.dir)?),
        None => None,
    };
    let words = load_table(vol, &sb.tensor_map)?;
    let mut tensor_map = HashMap::with_capacity(words.len() / 2);
    for pair in words.chunks_exact(2) {
        let (ti, k) = ((pair[0] >> 48) as usize, pair[0] & ((1 << 48) - 1));
        if ti >= sb.tensors.len() || pair[1] >= sb.total_pages {
            return Err(StoreError::Corrupt { page: sb.tensor_map.start, reason: format!("tensor map entry ({ti}, {k}) -> {} out of range", pair[1]) });
        }
        tensor_map.insert((ti as u32, k), pair[1]);
    }
    let tombstones = load_table(vol, &sb.tombstones)?;
    Ok(Base { sb, out, inn, lower, tensor_map, tombstones })
}

/// The row cache for `budget` bytes; see `RowAdmission`. `hot`: the head of
/// the hot table, as many vertices as the budget holds rows for.
fn row_cache(sb: &Superblock, budget: u64, admission: RowAdmission, hot: &[u64]) -> Result<RowCache> {
    let row_bytes: Vec<usize> = sb.tensors.iter().map(|t| t.row_bytes() as usize).collect();
    match admission {
        RowAdmission::Seen => return Ok(RowCache::new(budget as usize, &row_bytes, Admit::Seen)),
        RowAdmission::All => return Ok(RowCache::new(budget as usize, &row_bytes, Admit::All)),
        RowAdmission::Hot if sb.hot.words == 0 || rows_held(sb, budget) >= sb.hot.words => {
            return Ok(RowCache::new(budget as usize, &row_bytes, Admit::All));
        }
        RowAdmission::Hot => {}
    }
    let mut bits = vec![0u64; sb.num_nodes.div_ceil(64) as usize];
    for &v in hot {
        let word = bits.get_mut((v / 64) as usize).ok_or_else(|| StoreError::Corrupt { page: sb.hot.start, reason: format!("hot table names vertex {v} of {}", sb.num_nodes) })?;
        *word |= 1 << (v % 64);
    }
    Ok(RowCache::new(budget as usize, &row_bytes, Admit::Only(Box::new(move |v| bits.get((v / 64) as usize).is_some_and(|w| w >> (v % 64) & 1 == 1)))))
}

/// How many vertices' rows (of every tensor) a row cache of `budget`
/// bytes holds.
fn rows_held(sb: &Superblock, budget: u64) -> u64 {
    let row_bytes: Vec<usize> = sb.tensors.iter().map(|t| t.row_bytes() as usize).collect();
    RowCache::rows_held(budget as usize, &row_bytes) as u64
}

pub(crate) fn load_table(vol: &Volume, t: &crate::superblock::Table) -> Result<Vec<u64>> {
    load_table_prefix(vol, t, t.words)
}

/// The first `want` words of a table (all of it when `want` >= its length).
fn load_table_prefix(vol: &Volume, t: &crate::superblock::Table, want: u64) -> Result<Vec<u64>> {
    load_table_range(vol, t, 0, want)
}

/// Up to `want` words of a table from word `from`.
pub(crate) fn load_table_range(vol: &Volume, t: &crate::superblock::Table, from: u64, want: u64) -> Result<Vec<u64>> {
    let end = from.saturating_add(want).min(t.words);
    let per = ((vol.page_size() - page::HEADER) / 8) as u64;
    let first = from / per;
    let pages: Vec<u64> = (t.start + first..t.start + end.div_ceil(per).min(t.pages)).collect();
    let mut words = Vec::with_capacity(pages.len() * per as usize);
    for (c, chunk) in pages.chunks(1024).enumerate() {
        let got = vol.read(chunk)?;
        for (i, &p) in chunk.iter().enumerate() {
            page::decode_table(p, got.page(i), first + (c * 1024 + i) as u64, &mut words)?;
        }
    }
    // Every page but a table's last is full, and the pages read hold the range.
    let held = first * per + words.len() as u64;
    if held < end || held != t.words.min((first + pages.len() as u64) * per) {
        return Err(StoreError::Corrupt { page: t.start, reason: format!("table holds {held} words, superblock says {}", t.words) });
    }
    let skip = (from.min(end) - first * per) as usize;
    words.truncate(skip + (end - from.min(end)) as usize);
    words.drain(..skip);
    Ok(words)
}

fn load_gtt(vol: &Volume, d: &DirMeta) -> Result<Gtt> {
        let mut g = Gtt::default();
        // The superblock's count, trusted only as far as the pages can hold.
        let room = d.gtt_pages.saturating_mul(Gtt::entries_per_page(vol.page_size()) as u64);
        g.reserve_exact(d.gtt_entries.min(room) as usize);
        let pages: Vec<u64> = (d.gtt_start..d.gtt_start + d.gtt_pages).collect();
        for chunk in pages.chunks(1024) {
            let got = vol.read(chunk)?;
            for (i, &p) in chunk.iter().enumerate() {
                let h = page::open_kind(p, got.page(i), Kind::Gtt)?;
                g.decode_page(p, got.page(i), &h)?;
            }
        }
        let bitmap: Vec<u64> = (d.gtt_start + d.gtt_pages..d.gtt_start + d.gtt_pages + d.bitmap_pages).collect();
        for chunk in bitmap.chunks(1024) {
            let got = vol.read(chunk)?;
            for (i, &p) in chunk.iter().enumerate() {
                let h = page::open_kind(p, got.page(i), Kind::Presence)?;
                g.decode_bitmap_page(p, got.page(i), &h)?;
            }
        }
        if g.len() as u64 != d.gtt_entries {
            return Err(StoreError::Corrupt { page: d.gtt_start, reason: format!("GTT has {} entries, superblock says {}", g.len(), d.gtt_entries) });
        }
        Ok(g)
}

impl Store {
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
    /// The superblock of the pages (updates since the last merge are not in
    /// it; see `num_nodes`, `num_edges`).
    pub fn superblock(&self) -> Superblock {
        self.base().sb.clone()
    }
    /// Vertices, including those added since the pages were written.
    pub fn num_nodes(&self) -> u64 {
        let d = self.delta.read().unwrap();
        d.base_nodes + d.added_nodes
    }
    /// Stored edges, counting updates since the pages were written.
    pub fn num_edges(&self) -> u64 {
        let d = self.delta.read().unwrap();
        d.base_edges.saturating_add_signed(d.edges_added)
    }
    pub fn directed(&self) -> bool {
        self.base().sb.directed
    }
    pub fn has_weights(&self) -> bool {
        self.base().sb.fmt.weights
    }
    pub fn has_labels(&self) -> bool {
        self.base().sb.fmt.labels
    }
    pub fn page_size(&self) -> usize {
        self.shared.vol.page_size()
    }
    /// Whether the import renumbered vertices (`order.rs`); callers that
    /// face users translate ids with `to_internal` / `to_external` and
    /// reindex per-vertex results with `external_ids` either way.
    pub fn reordered(&self) -> bool {
        self.base().sb.order.words > 0
    }

    fn order_map(&self, to_internal: bool) -> Result<Option<Arc<Vec<u32>>>> {
        let sb = &self.base().sb;
        self.shared.order.get(&self.shared.vol, &sb.order, sb.num_nodes, to_internal)
    }

    /// The user's id of each of the store's vertices from the import (None
    /// when ids were kept): for loops that need it per element.
    pub fn external_ids(&self) -> Result<Option<Arc<Vec<u32>>>> {
        self.order_map(false)
    }

    /// User ids to the store's, in place (ids past the import's vertices,
    /// and negative ones, pass unchanged).
    pub fn to_internal<T: Copy + TryInto<usize> + From<u32>>(&self, ids: &mut [T]) -> Result<()> {
        let sb = &self.base().sb;
        self.shared.order.map(&self.shared.vol, &sb.order, sb.num_nodes, true, ids)
    }

    /// The store's ids to the user's, in place (sentinels pass unchanged).
    pub fn to_external<T: Copy + TryInto<usize> + From<u32>>(&self, ids: &mut [T]) -> Result<()> {
        let sb = &self.base().sb;
        self.shared.order.map(&self.shared.vol, &sb.order, sb.num_nodes, false, ids)
    }

    pub fn tensors(&self) -> Vec<TensorMeta> {
        self.base().sb.tensors.clone()
    }
    pub fn volume(&self) -> &Volume {
        &self.shared.vol
    }
    /// Bytes of the store on disk.
    pub fn size_bytes(&self) -> u64 {
        self.base().sb.total_pages * self.page_size() as u64
    }

    pub fn gtt(&self, dir: Direction) -> Result<GttRef> {
        self.check_lower(dir)?;
        let base = self.base();
        base.gtt(dir)?;
        Ok(GttRef { base, dir })
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats { cache: self.shared.cache.stats(), rows: self.shared.rows.as_ref().map(|r| r.stats()), members: self.shared.vol.stats(), page_size: self.page_size() as u64 }
    }

    pub fn reset_stats(&self) {
        self.shared.cache.reset_stats();
        if let Some(r) = &self.shared.rows {
            r.reset_stats();
        }
        self.shared.vol.reset_stats();
    }

    /// Empties the page and row caches (for cold measurements).
    pub fn clear_cache(&self) {
        self.shared.cache.clear();
        if let Some(r) = &self.shared.rows {
            r.clear();
        }
    }

    pub(crate) fn cache(&self) -> &PageCache {
        &self.shared.cache
    }

    /// Fetches pages through the cache; misses are read in one batch and
    /// their checksums verified. An extent page of more than `SKIP` edges is
    /// kept with its checkpoints (`Block::skips`, ~3% of the page), so that
    /// sampling a hub's page, again and again while it is cached, decodes
    /// a few dozen ids per draw instead of the page.
    pub(crate) fn fetch(&self, pages: &[u64]) -> Result<Fetched> {
        let fmt = self.base().sb.fmt;
        let keep = self.shared.cache.budget() > 0;
        let (mut tail, mut scratch) = (Vec::new(), Vec::new());
        self.shared
            .cache
            .get_many(pages, |missing| {
                let got = self.shared.vol.read(missing)?;
                let mut out = Vec::with_capacity(missing.len());
                for (i, &p) in missing.iter().enumerate() {
                    let pg = got.page(i);
                    let h = page::open(p, pg)?;
                    tail.clear();
                    if keep && h.kind == Kind::Extent && h.count as usize > SKIP {
                        // A block that does not parse is reported by its reader.
                        let _ = fmt.extent_block(pg, &h).and_then(|b| b.skips(&mut scratch, &mut tail));
                    }
                    out.push(entry(pg, &tail));
                }
                Ok(out)
            })
            .map(|refs| Fetched::Cached { refs, page_size: self.page_size() })
    }

    pub(crate) fn check_ids(&self, ids: &[u64]) -> Result<()> {
        let n = self.num_nodes();
        match ids.iter().find(|&&v| v >= n) {
            Some(&v) => Err(StoreError::VertexOutOfRange { vertex: v, num_nodes: n }),
            None => Ok(()),
        }
    }

    /// The pages each id's list needs, in one list, plus where each id's
    /// pages start in it.
    pub(crate) fn plan(&self, gtt: &Gtt, ids: &[u64]) -> (Vec<Loc>, Vec<u64>) {
        let mut locs = Vec::with_capacity(ids.len());
        let mut pages = Vec::with_capacity(ids.len());
        for &v in ids {
            let loc = gtt.locate(v);
            match loc {
                Loc::Nowhere => {}
                Loc::Packed(i) => pages.push(gtt.page(i)),
                Loc::Extent { first, len } => pages.extend((first..first + len).map(|i| gtt.page(i))),
            }
            locs.push(loc);
        }
        (locs, pages)
    }

    /// Plans and fetches the pages of `ids`' lists and counts each list's
    /// edges in them (its degree in the pages, before any pending update).
    fn fetch_degrees(&self, base: &Base, gtt: &Gtt, ids: &[u64]) -> Result<Planned> {
        let (locs, pages) = self.plan(gtt, ids);
        let fetched = self.fetch(&pages)?;
        let mut degree = vec![0u64; ids.len()];
        self.walk_lists(base, gtt, ids, &locs, &pages, &fetched, |i, blk, _| {
            degree[i] += blk.d as u64;
            Ok(())
        })?;
        Ok(Planned { locs, pages, fetched, degree })
    }

    /// Calls `f(i, block, first edge id)` for every block of id i's list,
    /// in order; an `Err(reason)` from `f` (a block that does not decode)
    /// comes back as corruption of its page. `pages` come from `plan`,
    /// fetched in the same order.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn walk_lists(&self, base: &Base, gtt: &Gtt, ids: &[u64], locs: &[Loc], pages: &[u64], fetched: &Fetched, mut f: impl FnMut(usize, &Block, u64) -> std::result::Result<(), String>) -> Result<()> {
        let fmt = base.sb.fmt;
        let mut k = 0;
        for (i, (&v, loc)) in ids.iter().zip(locs).enumerate() {
            match *loc {
                Loc::Nowhere => {}
                Loc::Packed(gi) => {
                    let (pg, pno) = (fetched.page(k), pages[k]);
                    k += 1;
                    let h = page::open_kind_trusted(pno, pg, Kind::Packed)?;
                    base.check_epoch(pno, h.epoch)?;
                    if let Some(e) = find_in_packed(pg, &h, v) {
                        let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason: format!("vertex {v}: {reason}") };
                        let blk = fmt.packed_block(pg, &h, &e).map_err(corrupt)?;
                        f(i, &blk, gtt.edges_before(gi) + e.before).map_err(corrupt)?;
                    }
                }
                Loc::Extent { first, len } => {
                    for j in 0..len {
                        let (pg, pno) = (fetched.page(k), pages[k]);
                        k += 1;
                        let blk = extent_page(base, pno, pg, v, j)?;
                        f(i, &blk, gtt.edges_before(first + j)).map_err(|reason| StoreError::Corrupt { page: pno, reason: format!("extent page {j} of vertex {v}: {reason}") })?;
                    }
                }
            }
        }
        Ok(())
    }

    pub fn neighbors(&self, ids: &[u64], dir: Direction, weights: bool, labels: bool) -> Result<Csr> {
        self.neighbors_with(ids, dir, weights, labels, true, Csr::default())
    }

    /// Like `neighbors`, choosing whether pages go through the cache (whole
    /// graph scans bypass it: large merged reads, no cache pollution), and
    /// decoding into `spare`'s buffers: a scan that hands back each batch's
    /// CSR allocates nothing per batch (fresh multi-MiB buffers per batch
    /// fragmented the heap well past the memory budget).
    pub fn neighbors_with(&self, ids: &[u64], dir: Direction, weights: bool, labels: bool, cached: bool, mut spare: Csr) -> Result<Csr> {
        self.check_lower(dir)?;
        self.check_ids(ids)?;
        loop {
            let base = self.base();
            check_columns(&base.sb, weights, labels)?;
            let gtt = base.gtt(dir)?;
            let (locs, pages) = self.plan(gtt, ids);
            let fetched = if cached { self.fetch(&pages)? } else { self.fetch_direct(&pages)? };
            let csr = self.decode_csr(&base, gtt, ids, &locs, &pages, &fetched, weights, labels, spare)?;
            let out_dir = dir == Direction::Out || !base.sb.directed;
            let d = self.delta.read().unwrap();
            // A merge swapped the base during the read: read again.
            if d.epoch == base.sb.epoch {
                return Ok(d.patch(ids, csr, out_dir));
            }
            spare = csr;
        }
    }

    /// The degree of each id whose list is an extent (None otherwise, and
    /// for every id while updates are pending): known from the GTT's edge
    /// counts without a read, so a sampler can draw positions first and
    /// read only the pages that hold them (`neighbors_at`).
    pub fn extent_degrees(&self, ids: &[u64], dir: Direction) -> Result<Vec<Option<u64>>> {
        self.check_lower(dir)?;
        let base = self.base();
        let gtt = base.gtt(dir)?;
        if !self.delta.read().unwrap().is_empty() {
            return Ok(vec![None; ids.len()]);
        }
        let total = base.edges(dir);
        Ok(ids
            .iter()
            .map(|&v| match gtt.locate(v) {
                Loc::Extent { first, len } => Some((first..first + len).map(|i| gtt.entry_edges(i, total)).sum()),
                _ => None,
            })
            .collect())
    }

    /// For each `(v, degree, positions)`: the neighbors at those positions
    /// of v's extent list (sorted as `neighbors` returns it) and their edge
    /// ids, flattened, reading only the pages that hold them. None when a
    /// list is no longer the extent of that degree (a merge or an update
    /// came between): read the whole lists instead.
    pub fn neighbors_at(&self, dir: Direction, req: &[(u64, u64, &[usize])]) -> Result<Option<(Vec<u64>, Vec<u64>)>> {
        let base = self.base();
        let gtt = base.gtt(dir)?;
        let total = base.edges(dir);
        let mut pages = Vec::new();
        let mut at = Vec::new(); // (gtt index, page in extent, offset) per position
        for &(v, degree, positions) in req {
            let Loc::Extent { first, len } = gtt.locate(v) else { return Ok(None) };
            if (first..first + len).map(|i| gtt.entry_edges(i, total)).sum::<u64>() != degree {
                return Ok(None);
            }
            let start = gtt.edges_before(first);
            for &p in positions {
                if p as u64 >= degree {
                    return Err(StoreError::Invalid(format!("position {p} past the {degree} edges of vertex {v}")));
                }
                // Pages hold varying edge counts: the last page starting at
                // or before p holds it.
                let (mut lo, mut hi) = (0, len);
                while hi - lo > 1 {
                    let mid = (lo + hi) / 2;
                    if gtt.edges_before(first + mid) - start <= p as u64 { lo = mid } else { hi = mid }
                }
                pages.push(gtt.page(first + lo));
                at.push((first + lo, lo, (p as u64 - (gtt.edges_before(first + lo) - start)) as usize, v));
            }
        }
        let fetched = self.fetch(&pages)?;
        let (mut ids, mut edges) = (vec![0; at.len()], vec![0; at.len()]);
        // A cached page with checkpoints decodes at most SKIP ids per
        // position; one without decodes once, up to its last position.
        let mut order: Vec<usize> = (0..at.len()).collect();
        order.sort_unstable_by_key(|&k| (pages[k], at[k].2));
        let mut buf = Vec::new();
        for group in order.chunk_by(|&a, &b| pages[a] == pages[b]) {
            let (gi, j, _, v) = at[group[0]];
            let (pg, pno) = (fetched.page(group[0]), pages[group[0]]);
            let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason: format!("extent page {j} of vertex {v}: {reason}") };
            let blk = extent_page(&base, pno, pg, v, j)?;
            let skips = fetched.skips(group[0]);
            if skips.is_empty() {
                let last = at[*group.last().expect("a group")].2;
                buf.clear();
                blk.push_range(&[], 0, (last + 1).min(blk.d), &mut buf).map_err(corrupt)?;
            }
            for &k in group {
                let off = at[k].2;
                ids[k] = if skips.is_empty() {
                    *buf.get(off).ok_or_else(|| corrupt(format!("no position {off}")))?
                } else {
                    buf.clear();
                    blk.push_range(skips, off, off + 1, &mut buf).map_err(corrupt)?;
                    buf[0]
                };
                edges[k] = gtt.edges_before(gi) + off as u64;
            }
        }
        let d = self.delta.read().unwrap();
        if d.epoch != base.sb.epoch || !d.is_empty() {
            return Ok(None);
        }
        Ok(Some((ids, edges)))
    }

    /// Neighbors at drawn positions of whole lists: `draw(i, degree, out)`
    /// fills `out` with positions (each below the degree, in any order,
    /// repeats allowed) in `ids[i]`'s list, sorted as `neighbors` returns
    /// it, and the neighbors there and their edge ids come back flattened
    /// in the order drawn. Each list is decoded into one scratch buffer, up
    /// to its last drawn position, instead of whole into a CSR of the batch
    /// that a sampler then draws 10 entries from: at scale 24 a sampling
    /// run's peak memory fell from ~835 to 796 MiB and its page faults by
    /// 30%. None while updates are pending (positions would index the
    /// pages' lists, not the patched ones): read whole lists then.
    pub fn neighbors_drawn(&self, ids: &[u64], dir: Direction, mut draw: impl FnMut(usize, u64, &mut Vec<usize>)) -> Result<Option<Drawn>> {
        self.check_ids(ids)?;
        let base = self.base();
        let gtt = base.gtt(dir)?;
        if !self.delta.read().unwrap().is_empty() {
            return Ok(None);
        }
        let Planned { locs, pages, fetched, degree } = self.fetch_degrees(&base, gtt, ids)?;
        let mut out = Drawn { ids: Vec::new(), edges: Vec::new(), counts: Vec::with_capacity(ids.len()) };
        // List i's positions are positions[starts[i]..starts[i + 1]].
        let (mut positions, mut starts, mut pos) = (Vec::new(), Vec::with_capacity(ids.len() + 1), Vec::new());
        starts.push(0);
        for (i, &d) in degree.iter().enumerate() {
            pos.clear();
            draw(i, d, &mut pos);
            if let Some(&p) = pos.iter().find(|&&p| p as u64 >= d) {
                return Err(StoreError::Invalid(format!("position {p} past the {d} edges of vertex {}", ids[i])));
            }
            out.counts.push(pos.len());
            positions.extend_from_slice(&pos);
            starts.push(positions.len());
        }
        let drawn = |i: usize| &positions[starts[i]..starts[i + 1]];
        // The decoded prefix of the current list, and where its edges start.
        let (mut prefix, mut at, mut first_edge) = (Vec::new(), usize::MAX, 0);
        let flush = |i: usize, prefix: &[u64], first_edge: u64, out: &mut Drawn| {
            for &p in drawn(i) {
                out.ids.push(prefix[p]);
                out.edges.push(first_edge + p as u64);
            }
        };
        self.walk_lists(&base, gtt, ids, &locs, &pages, &fetched, |i, blk, e| {
            if i != at {
                if at != usize::MAX {
                    flush(at, &prefix, first_edge, &mut out);
                }
                (at, first_edge) = (i, e);
                prefix.clear();
            }
            let need = drawn(i).iter().max().map_or(0, |&p| p + 1);
            let take = need.saturating_sub(prefix.len()).min(blk.d);
            if take > 0 {
                blk.push_range(&[], 0, take, &mut prefix)?;
            }
            Ok(())
        })?;
        if at != usize::MAX {
            flush(at, &prefix, first_edge, &mut out);
        }
        let d = self.delta.read().unwrap();
        if d.epoch != base.sb.epoch || !d.is_empty() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    pub(crate) fn check_columns(&self, weights: bool, labels: bool) -> Result<()> {
        check_columns(&self.base().sb, weights, labels)
    }

    /// Builds the base CSR of `ids` from their planned, fetched pages.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decode_csr(&self, base: &Base, gtt: &Gtt, ids: &[u64], locs: &[Loc], pages: &[u64], fetched: &Fetched, weights: bool, labels: bool, spare: Csr) -> Result<Csr> {
        let mut csr = spare;
        csr.indptr.clear();
        csr.indptr.resize(ids.len() + 1, 0);
        csr.indices.clear();
        csr.first_edge.clear();
        csr.first_edge.resize(ids.len(), 0);
        csr.weights = emptied(csr.weights.take(), weights);
        csr.labels = emptied(csr.labels.take(), labels);
        // Counted first, so the columns are allocated once at their size:
        // grown by doubling they would hold up to twice the memory (and a
        // scan keeps several batches alive).
        self.walk_lists(base, gtt, ids, locs, pages, fetched, |i, blk, e| {
            if csr.indptr[i + 1] == 0 {
                csr.first_edge[i] = e;
            }
            csr.indptr[i + 1] += blk.d as u64;
            Ok(())
        })?;
        for i in 0..ids.len() {
            csr.indptr[i + 1] += csr.indptr[i];
        }
        let m = csr.indptr[ids.len()] as usize;
        csr.indices.reserve_exact(m);
        csr.weights.iter_mut().for_each(|w| w.reserve_exact(m));
        csr.labels.iter_mut().for_each(|l| l.reserve_exact(m));
        self.walk_lists(base, gtt, ids, locs, pages, fetched, |_, blk, _| {
            blk.push_ids(&mut csr.indices)?;
            if let Some(w) = csr.weights.as_mut() {
                blk.push_weights(w);
            }
            if let Some(l) = csr.labels.as_mut() {
                blk.push_labels(l);
            }
            Ok(())
        })?;
        Ok(csr)
    }

    pub fn degree(&self, ids: &[u64], dir: Direction) -> Result<Vec<u64>> {
        self.check_lower(dir)?;
        self.check_ids(ids)?;
        loop {
            let base = self.base();
            {
                let d = self.delta.read().unwrap();
                if d.epoch == base.sb.epoch && !d.is_empty() {
                    drop(d);
                    let csr = self.neighbors(ids, dir, false, false)?;
                    return Ok(csr.indptr.windows(2).map(|w| w[1] - w[0]).collect());
                }
            }
            let gtt = base.gtt(dir)?;
            let deg = self.fetch_degrees(&base, gtt, ids)?.degree;
            let d = self.delta.read().unwrap();
            if d.epoch == base.sb.epoch && d.is_empty() {
                return Ok(deg);
            }
        }
    }

    /// Weight of edge src[i] -> dst[i], NaN where there is no such edge.
    pub fn edge_weights(&self, src: &[u64], dst: &[u64]) -> Result<Vec<f32>> {
        if src.len() != dst.len() {
            return Err(StoreError::Invalid(format!("{} sources but {} destinations", src.len(), dst.len())));
        }
        self.check_columns(true, false)?;
        self.check_ids(src)?;
        self.check_ids(dst)?;
        // Lists come back sorted by neighbor id: binary search each one.
        let csr = self.neighbors(src, Direction::Out, true, false)?;
        let w = csr.weights.as_ref().expect("asked for weights");
        Ok((0..src.len())
            .map(|i| {
                let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
                csr.indices[a..b].binary_search(&dst[i]).map_or(f32::NAN, |k| w[a + k])
            })
            .collect())
    }

    /// Whether each out-edge src[i] -> dst[i] exists now, with its label:
    /// a binary search in each source's pages, no lists decoded (the
    /// validation read of every update batch).
    pub(crate) fn find_edges(&self, src: &[u64], dst: &[u64]) -> Result<Vec<Option<u32>>> {
        // Edges grouped by source: uniq[i]'s edges are order[starts[i]..starts[i + 1]].
        let mut order: Vec<usize> = (0..src.len()).collect();
        order.sort_unstable_by_key(|&e| src[e]);
        let mut uniq: Vec<u64> = Vec::new();
        let mut starts = Vec::new();
        for (k, &e) in order.iter().enumerate() {
            if uniq.last() != Some(&src[e]) {
                uniq.push(src[e]);
                starts.push(k);
            }
        }
        starts.push(order.len());
        loop {
            let base = self.base();
            let gtt = &base.out;
            let fmt = base.sb.fmt;
            let (locs, pages) = self.plan(gtt, &uniq);
            let fetched = self.fetch(&pages)?;
            let mut found: Vec<Option<u32>> = vec![None; src.len()];
            // An extent's list comes in several blocks: search each.
            self.walk_lists(&base, gtt, &uniq, &locs, &pages, &fetched, |i, blk, _| {
                for &e in &order[starts[i]..starts[i + 1]] {
                    if let Some(j) = blk.find(dst[e])? {
                        found[e] = Some(if fmt.labels { blk.label_at(j) } else { 0 });
                    }
                }
                Ok(())
            })?;
            let d = self.delta.read().unwrap();
            if d.epoch != base.sb.epoch {
                continue;
            }
            if !d.is_empty() {
                for (e, f) in found.iter_mut().enumerate() {
                    if let Some(over) = d.edge(src[e], dst[e]) {
                        *f = over;
                    }
                }
            }
            return Ok(found);
        }
    }

    pub fn tensor_meta(&self, name: &str) -> Result<TensorMeta> {
        let base = self.base();
        tensor_index(&base.sb, name).map(|i| base.sb.tensors[i].clone())
    }

    /// Tells the row cache that a batch gathered later will ask for the
    /// rows of vertices `ids` (internal ids): it keeps them and takes them in
    /// on a miss while the result lives (`rowcache::Upcoming`). Without a
    /// row cache this counts nothing.
    pub fn expect_rows(&self, ids: Vec<u64>) -> Expected {
        match &self.shared.rows {
            Some(rc) => rc.expect(ids),
            None => Expected::new(None, Vec::new()),
        }
    }

    /// Rows counted by live `expect_rows` results, duplicates counted.
    pub fn upcoming_rows(&self) -> usize {
        self.shared.rows.as_ref().map_or(0, |rc| rc.upcoming().held())
    }

    /// Blocks until the row cache's warm-up is over (see `Warming`).
    pub fn wait_warm(&self) {
        self.shared.warming.wait();
    }

    /// Gathers rows `ids` of tensor `name`: each page read once for the batch.
    /// Rows are visited in row order, in parts of at most
    /// `TENSOR_PART_PAGES` pages, so a huge gather pins a bounded number of
    /// pages (not one page per row of the whole batch) while each part is
    /// still one sorted, merged volume batch.
    pub fn tensor(&self, name: &str, ids: &[u64]) -> Result<Rows> {
        self.check_ids(ids)?;
        self.shared.warming.wait();
        loop {
            let base = self.base();
            let ti = tensor_index(&base.sb, name)?;
            let t = &base.sb.tensors[ti];
            let mut data = crate::mem::zeroed(ids.len() * t.row_bytes() as usize);
            self.tensor_pages_into(&base, ti, ids, &mut data, true)?;
            let delta = self.delta.read().unwrap();
            if delta.epoch != base.sb.epoch {
                continue;
            }
            let rb = t.row_bytes() as usize;
            if delta.rows.contains_key(name) {
                for (i, &r) in ids.iter().enumerate() {
                    if let Some(row) = delta.row(name, r) {
                        data[i * rb..(i + 1) * rb].copy_from_slice(row);
                    }
                }
            }
            return Ok(Rows { dtype: t.dtype, dim: t.dim, data });
        }
    }

    /// Copies the rows `ids` of tensor `ti` held in pages into `data`
    /// (row-major); rows without a page yet are left as they are. With a
    /// row cache, hits are copied from it and each missing row is read once,
    /// straight into `data` where it is first asked for; only the rows the
    /// cache takes are copied into entries of their own. `co_page`: also
    /// offer the upcoming rows beside them (`CoPage`); the warm-up does not,
    /// so the rows it fills the cache with are the hubs' alone.
    pub(crate) fn tensor_pages_into(&self, base: &Base, ti: usize, ids: &[u64], data: &mut [u8], co_page: bool) -> Result<()> {
        let Some(rc) = &self.shared.rows else { return self.rows_from_pages(base, ti, ids, None, data, true, None) };
        let t = &base.sb.tensors[ti];
        let rb = t.row_bytes() as usize;
        let have: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] < t.rows).collect();
        let rows: Vec<u64> = have.iter().map(|&i| ids[i]).collect();
        let missed = rc.lookup_into(ti, &rows, &have, data);
        // The distinct missing rows, sorted, and where each lands first.
        let mut by_row: Vec<(u64, usize)> = missed.iter().map(|&j| (rows[j], have[j])).collect();
        by_row.sort_unstable();
        let (mut missing, mut first, mut later) = (Vec::new(), Vec::new(), Vec::new());
        for &(r, i) in &by_row {
            if missing.last() == Some(&r) {
                later.push((missing.len() - 1, i));
            } else {
                missing.push(r);
                first.push(i);
            }
        }
        let mut co = CoPage { rc, ids: Vec::new(), bytes: Vec::new() };
        self.rows_from_pages(base, ti, &missing, Some(&first), data, false, co_page.then_some(&mut co))?;
        for (m, i) in later {
            data.copy_within(first[m] * rb..(first[m] + 1) * rb, i * rb);
        }
        rc.insert(ti, &missing, |m| &data[first[m] * rb..(first[m] + 1) * rb]);
        rc.insert(ti, &co.ids, |j| &co.bytes[j * rb..(j + 1) * rb]);
        Ok(())
    }

    /// Copies rows `ids` from the tensor's pages, read through the page
    /// cache or straight from the volume, into row `at[i]` of `data` (row
    /// `i` without `at`). With `co`, also copies out the other rows wholly
    /// on the pages read that upcoming batches ask for and the row cache
    /// lacks.
    #[allow(clippy::too_many_arguments)]
    fn rows_from_pages(&self, base: &Base, ti: usize, ids: &[u64], at: Option<&[usize]>, data: &mut [u8], cached: bool, mut co: Option<&mut CoPage>) -> Result<()> {
        const TENSOR_PART_PAGES: u64 = 4096;
        let t = &base.sb.tensors[ti];
        let ps = self.page_size();
        let rb = t.row_bytes();
        let pl = tensor::payload(ps) as u64;
        let mut order: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] < t.rows).collect();
        order.sort_unstable_by_key(|&i| ids[i]);
        let part = (TENSOR_PART_PAGES / (rb.div_ceil(pl) + 1)).max(1) as usize;
        let mut pages = Vec::new();
        let mut index = Vec::new();
        for rows in order.chunks(part) {
            pages.clear();
            index.clear();
            for &i in rows {
                for k in tensor::row_pages(ids[i], rb, ps) {
                    let p = base.tensor_page(ti, k).ok_or_else(|| StoreError::Corrupt { page: t.start_page, reason: format!("tensor {:?} has no page {k}", t.name) })?;
                    pages.push(p);
                    index.push(k);
                }
            }
            let fetched = if cached { self.fetch(&pages)? } else { self.fetch_direct(&pages)? };
            let mut k = 0;
            for &i in rows {
                let mut off = ids[i] * rb;
                let end = off + rb;
                let mut o = at.map_or(i, |at| at[i]) * rb as usize;
                while off < end {
                    let (pg, pno) = (fetched.page(k), pages[k]);
                    let h = page::open_kind_trusted(pno, pg, Kind::Tensor)?;
                    base.check_epoch(pno, h.epoch)?;
                    if h.aux as u64 != index[k] & u32::MAX as u64 || h.key != ti as u64 {
                        return Err(StoreError::Corrupt { page: pno, reason: "tensor page out of place".into() });
                    }
                    let in_page = (off % pl) as usize;
                    let n = ((pl - off % pl).min(end - off)) as usize;
                    data[o..o + n].copy_from_slice(&pg[HEADER + in_page..HEADER + in_page + n]);
                    o += n;
                    off += n as u64;
                    k += 1;
                }
            }
            if let Some(co) = co.as_deref_mut() {
                co.collect(ti, &index, |k| fetched.page(k), rb, pl, t.rows);
            }
        }
        Ok(())
    }
}

/// A page cache entry: the page, then `tail`, copied once.
fn entry(pg: &[u8], tail: &[u8]) -> Arc<[u8]> {
    let mut e = Arc::<[u8]>::new_uninit_slice(pg.len() + tail.len());
    let dst = Arc::get_mut(&mut e).expect("a new Arc is unique");
    dst[..pg.len()].write_copy_of_slice(pg);
    dst[pg.len()..].write_copy_of_slice(tail);
    // SAFETY: both parts were written just above.
    unsafe { e.assume_init() }
}

/// Page `j` of vertex `v`'s extent, as fetched: its header, epoch and edge
/// count checked.
fn extent_page<'p>(base: &Base, pno: u64, pg: &'p [u8], v: u64, j: usize) -> Result<Block<'p>> {
    let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason: format!("extent page {j} of vertex {v}: {reason}") };
    let h = page::open_kind_trusted(pno, pg, Kind::Extent)?;
    base.check_epoch(pno, h.epoch)?;
    if h.key != v || h.aux as usize != j {
        return Err(corrupt("inconsistent header".into()));
    }
    base.sb.fmt.extent_block(pg, &h).map_err(corrupt)
}

pub(crate) fn check_columns(sb: &Superblock, weights: bool, labels: bool) -> Result<()> {
    if weights && !sb.fmt.weights {
        return Err(StoreError::Invalid("this store has no edge weights (import with weights)".into()));
    }
    if labels && !sb.fmt.labels {
        return Err(StoreError::Invalid("this store has no edge labels (import with labels)".into()));
    }
    Ok(())
}

pub(crate) fn tensor_index(sb: &Superblock, name: &str) -> Result<usize> {
    sb.tensors.iter().position(|t| t.name == name).ok_or_else(|| StoreError::NoSuchTensor {
        name: name.to_string(),
        have: if sb.tensors.is_empty() { "none".into() } else { sb.tensors.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ") },
    })
}
