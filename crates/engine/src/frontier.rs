//! How algorithms read neighbor lists: a whole frontier at a time.
//!
//! The vertex range is cut into chunks of at most `CHUNK` (pages read, ids
//! decoded, vertices spanned). For each chunk the frontier's members there
//! are either read with the chunk (one sequential run of merged large I/Os)
//! when they would touch a large share of its pages, or batched with other
//! chunks' members into selective page reads through the cache (Graphene
//! and Blaze make the same choice). A planner thread cuts the frontier into jobs, two reader
//! threads run their I/O and decoding ahead of the thread that applies the
//! algorithm (which may spread a batch's vertices over both cores), and the
//! batches reach it in the plan's order.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::mpsc::sync_channel;
use std::sync::{Condvar, Mutex};

use rayon::prelude::*;
use solidgraph_io::sync::{CondvarExt, MutexExt};
use solidgraph_store::{ChunkLimit, Csr, Direction, GttRef, Need, RangePages, Store, StoreError};

use crate::error::Result;

/// Whether this thread is the only one of its rayon pool (the fuzz targets
/// run on such a pool, built on their own thread by `use_current_thread`):
/// passes then read and apply each job on it in turn. A chunk spawned into
/// the pool would wait for this thread while it waits for a free slot, and
/// reader threads spawned per pass would cost more than the small stores
/// such a pool is for.
fn alone() -> bool {
    rayon::current_thread_index().is_some() && rayon::current_num_threads() == 1
}

/// One sequential chunk: up to 4 MiB of 4 KiB pages, 12 MiB of decoded
/// ids and 4 MiB of row offsets. Up to READERS + 1 are alive at once
/// (READERS + threads in `Lists::chunks`, whose chunks are mostly pages),
/// all inside the budget's fixed overhead. The id cap binds on a degree-ordered
/// store, whose hub pages hold many more ids (1-byte gaps).
const CHUNK: ChunkLimit = ChunkLimit { pages: 1024, edges: 1_500_000, vertices: 1 << 18 };
/// Threads reading batches ahead of the algorithm.
const READERS: usize = 2;
/// Vertices per selective read batch.
const SPARSE_BATCH: usize = 16 * 1024;
/// Pages per selective read batch, as many as a chunk: a batch of hubs
/// would otherwise hold their whole extents (and their decoded lists, twice
/// the size) at once, with up to READERS + 1 batches alive.
const SPARSE_PAGES: usize = CHUNK.pages;
/// Decoded ids per selective read batch (bounded by its pages' edges), as
/// many as a chunk: a degree-ordered store's hub pages hold ~4 ids a
/// 4 KiB page's worth of bytes, so a batch within `SPARSE_PAGES` alone
/// could decode to 32 MiB.
const SPARSE_EDGES: u64 = CHUNK.edges;
/// A random page read costs about this many sequential ones on the disks
/// measured (docs/PERFORMANCE.md, I/O).
const RANDOM_COST: f64 = 2.7;

/// The vertices a pass visits.
#[derive(Clone, Copy)]
pub enum Frontier<'f> {
    /// Every vertex: a full scan, in id order.
    All,
    /// Sorted, distinct ids.
    Ids(&'f [u64]),
    /// Members of a set (no id list: a large frontier costs n/8 bytes). The
    /// set may grow during the pass: members added at or above
    /// `Lists::planned()` are visited in it.
    Set(&'f Bitset),
}

impl Frontier<'_> {
    fn count(&self, lo: u64, hi: u64) -> u64 {
        match self {
            Frontier::All => hi - lo,
            Frontier::Ids(ids) => (ids.partition_point(|&x| x < hi) - ids.partition_point(|&x| x < lo)) as u64,
            Frontier::Set(s) => s.count_range(lo, hi),
        }
    }

    /// Calls `f` for every member in [lo, hi), in order.
    fn each(&self, lo: u64, hi: u64, mut f: impl FnMut(u64)) {
        match self {
            Frontier::All => (lo..hi).for_each(f),
            Frontier::Ids(ids) => ids[ids.partition_point(|&x| x < lo)..ids.partition_point(|&x| x < hi)].iter().for_each(|&v| f(v)),
            Frontier::Set(s) => s.each_range(lo, hi, f),
        }
    }
}

/// A set of vertex ids, one bit each, that one thread can grow while
/// another reads it.
pub struct Bitset {
    words: Vec<AtomicU64>,
}

impl Bitset {
    pub fn new(n: u64) -> Bitset {
        Bitset { words: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Sequentially consistent, so that a reader planning a pass sees the
    /// member or `Lists::planned()` says it has passed it.
    pub fn insert(&self, v: u64) {
        self.words[(v / 64) as usize].fetch_or(1 << (v % 64), SeqCst);
    }

    /// Every id below n.
    pub fn full(n: u64) -> Bitset {
        let s = Bitset { words: (0..n.div_ceil(64)).map(|_| AtomicU64::new(!0)).collect() };
        if !n.is_multiple_of(64) {
            s.words[(n / 64) as usize].store(!(!0u64 << (n % 64)), SeqCst);
        }
        s
    }

    /// The ids below n for which `f` holds, decided on the pool's threads
    /// (`f` runs once per id).
    pub fn from_fn(n: u64, f: impl Fn(u64) -> bool + Sync) -> Bitset {
        let words = (0..n.div_ceil(64) as usize)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let lo = i as u64 * 64;
                AtomicU64::new((lo..(lo + 64).min(n)).filter(|&v| f(v)).fold(0, |w, v| w | 1 << (v % 64)))
            })
            .collect();
        Bitset { words }
    }

    pub fn remove(&self, v: u64) {
        self.words[(v / 64) as usize].fetch_and(!(1 << (v % 64)), SeqCst);
    }

    /// Removes the ids of `mask` from the word of id `64 * word` on: one
    /// atomic operation for a word's worth of `remove`s.
    pub fn remove_word(&self, word: u64, mask: u64) {
        if mask != 0 {
            self.words[word as usize].fetch_and(!mask, SeqCst);
        }
    }

    /// `insert` for the ids of `mask` in word `word` (see `remove_word`).
    pub fn insert_word(&self, word: u64, mask: u64) {
        if mask != 0 {
            self.words[word as usize].fetch_or(mask, SeqCst);
        }
    }

    /// Removes v; true if this call did (one winner among racing threads).
    pub fn take(&self, v: u64) -> bool {
        let bit = 1 << (v % 64);
        self.words[(v / 64) as usize].fetch_and(!bit, SeqCst) & bit != 0
    }

    pub fn contains(&self, v: u64) -> bool {
        self.words[(v / 64) as usize].load(SeqCst) >> (v % 64) & 1 == 1
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w.get_mut() = 0);
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| w.load(SeqCst) == 0)
    }

    pub fn len(&self) -> u64 {
        self.words.iter().map(|w| w.load(SeqCst).count_ones() as u64).sum()
    }

    /// The bits of word `i` that fall in [lo, hi).
    fn word_in(&self, i: u64, lo: u64, hi: u64) -> u64 {
        let mut w = self.words[i as usize].load(SeqCst);
        if i == lo / 64 {
            w &= !0u64 << (lo % 64);
        }
        if i == (hi - 1) / 64 && !hi.is_multiple_of(64) {
            w &= !(!0u64 << (hi % 64));
        }
        w
    }

    fn count_range(&self, lo: u64, hi: u64) -> u64 {
        if lo >= hi {
            return 0;
        }
        (lo / 64..=(hi - 1) / 64).map(|i| self.word_in(i, lo, hi).count_ones() as u64).sum()
    }

    fn each_range(&self, lo: u64, hi: u64, mut f: impl FnMut(u64)) {
        if lo >= hi {
            return;
        }
        for i in lo / 64..=(hi - 1) / 64 {
            let mut w = self.word_in(i, lo, hi);
            while w != 0 {
                f(i * 64 + w.trailing_zeros() as u64);
                w &= w - 1;
            }
        }
    }
}

/// A chunk task's hold on one of `Lists::chunks`' slots.
struct Slot<'a>(&'a (Mutex<usize>, Condvar));

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.0.locked() -= 1;
        self.0.1.notify_one();
    }
}

/// One chunk of a whole pass (`Lists::chunks`).
pub enum Chunk {
    Pages(RangePages),
    Lists(Batch),
}

impl Chunk {
    /// Calls `f(v, ids, a, end)` for each list of the chunk in vertex
    /// order: `ids[a..end]` is `v`'s list (an extent's part of it on one
    /// page); `ids` runs on to the page's later lists, which a caller may
    /// prefetch from.
    pub fn for_each_list(&self, mut f: impl FnMut(u64, &[u64], usize, usize)) -> Result<()> {
        match self {
            Chunk::Pages(rp) => {
                let (mut ids, mut rows) = (Vec::new(), Vec::new());
                for page in 0..rp.num_pages() {
                    rp.page_lists(page, &mut ids, &mut rows)?;
                    let mut a = 0;
                    for &(v, end) in &rows {
                        f(v, &ids, a, end);
                        a = end;
                    }
                }
            }
            Chunk::Lists(b) => {
                for i in 0..b.len() {
                    let (v, l, _) = b.get(i);
                    f(v, l, 0, l.len());
                }
            }
        }
        Ok(())
    }

    /// Calls `f(v, piece)` for the lists of the chunk whose vertex passes
    /// `want`, in vertex order, each in pieces of at most `piece` ids; `f`
    /// returns false to stop v's list there (the rest is not decoded from
    /// pages). A vertex may come in several calls (its pieces, an extent's
    /// pages); an empty list of a decoded batch comes as one empty piece.
    pub fn for_each_piece(&self, piece: usize, want: impl Fn(u64) -> bool, mut f: impl FnMut(u64, &[u64]) -> bool) -> Result<()> {
        match self {
            Chunk::Pages(rp) => {
                let mut ids = Vec::new();
                for page in 0..rp.num_pages() {
                    rp.page_pieces(page, piece, &want, &mut ids, &mut f)?;
                }
            }
            Chunk::Lists(b) => {
                for i in 0..b.len() {
                    let (v, l, _) = b.get(i);
                    if !want(v) {
                        continue;
                    }
                    if l.is_empty() {
                        f(v, l);
                    }
                    for p in l.chunks(piece.max(1)) {
                        if !f(v, p) {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The vertices [lo, hi) whose lists the chunk holds.
    pub fn range(&self) -> (u64, u64) {
        match self {
            Chunk::Pages(rp) => rp.range(),
            Chunk::Lists(Batch { rows: Rows::Range { first, members: None }, csr }) => (*first, first + (csr.indptr.len() - 1) as u64),
            Chunk::Lists(_) => unreachable!("a whole pass reads whole ranges"),
        }
    }
}

/// Lists read in one batch, and which of them the pass visits.
pub struct Batch {
    rows: Rows,
    csr: Csr,
}

enum Rows {
    /// The CSR holds every vertex of [first, first + rows); `members` are
    /// the ones to visit (None: all).
    Range { first: u64, members: Option<Vec<u64>> },
    /// The CSR holds these vertices' lists, all visited.
    Ids(Vec<u64>),
}

impl Batch {
    /// Number of visited vertices.
    pub fn len(&self) -> usize {
        match &self.rows {
            Rows::Range { members: Some(m), .. } => m.len(),
            Rows::Range { members: None, .. } => self.csr.indptr.len() - 1,
            Rows::Ids(ids) => ids.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The i-th visited vertex, its list and (when requested) its weights.
    pub fn get(&self, i: usize) -> (u64, &[u64], &[f32]) {
        let (v, row) = match &self.rows {
            Rows::Range { first, members: Some(m) } => (m[i], (m[i] - first) as usize),
            Rows::Range { first, members: None } => (first + i as u64, i),
            Rows::Ids(ids) => (ids[i], i),
        };
        let (a, b) = (self.csr.indptr[row] as usize, self.csr.indptr[row + 1] as usize);
        let w = self.csr.weights.as_deref().map_or(&[][..], |w| &w[a..b]);
        (v, &self.csr.indices[a..b], w)
    }
}

/// Neighbor lists of one direction, optionally with weights.
pub struct Lists<'a> {
    store: &'a Store,
    /// Out, or out then in: the undirected view of a directed store.
    dirs: Vec<Direction>,
    /// Their translation tables (of the base the chunks were cut from),
    /// for the pages of a list.
    gtts: Vec<GttRef>,
    weights: bool,
    ranges: Vec<(u64, u64)>,
    /// Adjacency pages per range, for the dense/sparse choice.
    range_pages: Vec<u64>,
    /// Reads go through the page cache only when it can hold the whole
    /// store. Else a scan would just evict everything, and a pass visits a
    /// vertex once, so selective reads hit no more than the cache's share
    /// of the store while each miss costs an insert and an eviction, and
    /// cached pages take more than their budget in heap.
    cached: bool,
    /// Vertices below this have been planned in the current pass.
    planned: AtomicU64,
    /// CSRs of batches `f` is done with, decoded into again: batches are
    /// several MiB, and fresh ones per batch fragment the heap far past the
    /// memory budget.
    spare: Mutex<Vec<Csr>>,
}

enum Job {
    Range(u64, u64, Option<Members>),
    Ids(Vec<u64>),
}

/// A dense range's members as the plan saw them: the frontier's bits for
/// [lo, hi), a bit a vertex. A range read as pages (`Chunk::Pages`) needs
/// none of them; only a decoded batch lists its members as ids, so the
/// plan builds no 8-byte id per member (2 MiB for a chunk of 2^18) for a
/// chunk that comes as pages.
struct Members {
    lo: u64,
    hi: u64,
    /// Word k holds ids `64 * (lo / 64 + k)` on, masked to [lo, hi).
    words: Vec<u64>,
}

impl Members {
    fn of(frontier: Frontier, lo: u64, hi: u64) -> Members {
        debug_assert!(lo < hi);
        let first = lo / 64;
        let mut words = vec![0u64; ((hi - 1) / 64 - first + 1) as usize];
        match frontier {
            Frontier::Set(s) => (first..=(hi - 1) / 64).for_each(|i| words[(i - first) as usize] = s.word_in(i, lo, hi)),
            f => f.each(lo, hi, |v| words[(v / 64 - first) as usize] |= 1 << (v % 64)),
        }
        Members { lo, hi, words }
    }

    /// The members as sorted ids.
    fn ids(&self) -> Vec<u64> {
        let first = self.lo / 64;
        let mut ids = Vec::with_capacity(self.words.iter().map(|w| w.count_ones() as usize).sum());
        for (k, &w) in self.words.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                ids.push((first + k as u64) * 64 + w.trailing_zeros() as u64);
                w &= w - 1;
            }
        }
        debug_assert!(ids.iter().all(|&v| self.lo <= v && v < self.hi));
        ids
    }
}

impl<'a> Lists<'a> {
    /// Lists of the undirected view: out-lists of an undirected store; out-
    /// then in-list (concatenated, not deduplicated) of a directed one.
    pub fn both(store: &'a Store, what: &str) -> Result<Lists<'a>> {
        if !store.directed() {
            return Lists::new(store, Direction::Out, false);
        }
        if store.gtt(Direction::In).is_err() {
            return Err(StoreError::Lacks { what: format!("{what} on a directed graph needs its in-edges"), need: Need::InEdges }.into());
        }
        let mut l = Lists::new(store, Direction::Out, false)?;
        l.dirs.push(Direction::In);
        l.gtts.push(store.gtt(Direction::In)?);
        Ok(l)
    }

    pub fn new(store: &'a Store, dir: Direction, weights: bool) -> Result<Lists<'a>> {
        if weights && !store.has_weights() {
            return Err(StoreError::Lacks { what: "this algorithm needs edge weights, and this store has none".into(), need: Need::Weights }.into());
        }
        let ranges = store.chunk_ranges(dir, CHUNK)?;
        let gtt = store.gtt(dir)?;
        let range_pages = ranges
            .iter()
            .map(|&(lo, _)| lo)
            .chain(std::iter::once(u64::MAX))
            .map(|v| gtt.lower_bound(v) as u64)
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| (w[1] - w[0]).max(1))
            .collect();
        let cached = store.stats().cache.budget >= store.size_bytes();
        Ok(Lists { store, dirs: vec![dir], gtts: vec![gtt], weights, ranges, range_pages, cached, planned: AtomicU64::new(0), spare: Mutex::new(Vec::new()) })
    }

    pub fn store(&self) -> &Store {
        self.store
    }

    /// Whether reads go through the page cache (it holds the whole store).
    pub fn cached(&self) -> bool {
        self.cached
    }

    /// What reading the frontier's lists costs, in sequential page reads,
    /// by the per-chunk dense/sparse choice `plan` makes.
    pub fn cost(&self, frontier: Frontier) -> f64 {
        let chunk = |(&(lo, hi), &pages): (&(u64, u64), &u64)| match frontier.count(lo, hi) {
            0 => 0.0,
            m => (m as f64 * RANDOM_COST).min(pages as f64),
        };
        self.ranges.iter().zip(&self.range_pages).map(chunk).sum()
    }

    /// Cuts [0, n) into `parts` vertex ranges holding about equal shares of
    /// the first direction's edges (by its GTT, at page bounds): in a
    /// degree-ordered store the first ids hold most edges, so equal id
    /// ranges would give one part nearly all the work. Returns the
    /// `parts + 1` bounds, ascending.
    pub fn edge_cuts(&self, parts: usize) -> Vec<u64> {
        let (g, n) = (&self.gtts[0], self.store.num_nodes());
        let total = if g.is_empty() { 0 } else { g.edges_before(g.len() - 1) };
        let mut cuts = vec![0];
        for p in 1..parts.max(1) {
            let want = total / parts as u64 * p as u64;
            let (mut i, mut j) = (0, g.len());
            while i < j {
                let m = (i + j) / 2;
                if g.edges_before(m) < want { i = m + 1 } else { j = m }
            }
            let cut = if i < g.len() { g.first_vertex(i).min(n) } else { n };
            cuts.push(cut.max(*cuts.last().unwrap()));
        }
        cuts.push(n);
        cuts
    }

    /// During a pass over `Frontier::Set`: a member added below this will
    /// not be visited in the pass (its part of the set was already read).
    pub fn planned(&self) -> u64 {
        self.planned.load(SeqCst)
    }

    /// Calls `f(v, neighbors, weights)` for every vertex, in id order
    /// (vertices without edges get empty lists). Weights are empty unless
    /// requested.
    pub fn scan(&self, f: impl FnMut(u64, &[u64], &[f32])) -> Result<()> {
        self.scan_checked(f, |_| Ok(()))
    }

    /// `scan`, calling `check(vertices handed so far)` after each batch; an
    /// error from it (a cancelled run) ends the pass.
    pub fn scan_checked(&self, f: impl FnMut(u64, &[u64], &[f32]), check: impl FnMut(u64) -> Result<()>) -> Result<()> {
        self.each_checked(Frontier::All, f, check)
    }

    fn each_checked(&self, frontier: Frontier, mut f: impl FnMut(u64, &[u64], &[f32]), mut check: impl FnMut(u64) -> Result<()>) -> Result<()> {
        let mut seen = 0u64;
        self.try_batches(frontier, |b| {
            (0..b.len()).for_each(|i| {
                let (v, l, w) = b.get(i);
                f(v, l, w)
            });
            seen += b.len() as u64;
            check(seen)
        })
    }

    /// Calls `f` for every vertex of `frontier` (sorted, distinct), in no
    /// particular order.
    pub fn visit(&self, frontier: &[u64], f: impl FnMut(u64, &[u64], &[f32])) -> Result<()> {
        self.visit_checked(frontier, f, |_| Ok(()))
    }

    /// `visit`, calling `check(vertices handed so far)` after each batch.
    pub fn visit_checked(&self, frontier: &[u64], f: impl FnMut(u64, &[u64], &[f32]), check: impl FnMut(u64) -> Result<()>) -> Result<()> {
        debug_assert!(frontier.windows(2).all(|w| w[0] < w[1]), "frontier must be sorted and distinct");
        self.each_checked(Frontier::Ids(frontier), f, check)
    }

    /// Hands `f` the frontier's lists one read batch at a time: for `All`,
    /// whole chunks in id order; otherwise in no particular order. Reads
    /// run on `READERS` threads ahead of `f`, so one batch's I/O is in
    /// flight while another is decoded.
    pub fn batches(&self, frontier: Frontier, mut f: impl FnMut(&Batch)) -> Result<()> {
        self.try_batches(frontier, |b| {
            f(b);
            Ok(())
        })
    }

    /// `batches` where `f` may end the pass early with an error (a
    /// cancelled run): the readers stop at their next batch.
    pub fn try_batches(&self, frontier: Frontier, mut f: impl FnMut(&Batch) -> Result<()>) -> Result<()> {
        self.pipeline(
            frontier,
            |job| self.read(job),
            |b| {
                let r = f(&b);
                self.recycle([b.csr]);
                r
            },
        )
    }

    /// A whole pass in id order, each chunk handed whole to `f` on one of
    /// the pool's threads, as many chunks at once as it has threads;
    /// returns `f`'s results in chunk order. A chunk's pages come undecoded
    /// (`RangePages`: `f` decodes them into buffers that stay in the CPU
    /// caches); a chunk read while updates are pending, or of the
    /// two-direction view, comes decoded instead. Chunks are the unit of
    /// parallel work, not their pages: a stalled thread (a vCPU the host
    /// takes away) then holds up only its own chunk, where splitting every
    /// chunk over all threads would leave the others idle at each chunk's
    /// end. Chunks cover disjoint vertex ranges,
    /// in ascending order (asserted), so `f` may write its chunk's range of
    /// a shared array.
    pub fn chunks<R: Send>(&self, f: impl Fn(&Chunk) -> Result<R> + Sync) -> Result<Vec<R>> {
        self.chunks_of(Frontier::All, f)
    }

    /// `chunks` over a frontier: a chunk the plan reads whole comes as its
    /// pages (`Chunk::Pages`, every list of the range: `f` skips the
    /// non-members), the members of sparse chunks as decoded batches
    /// (`Chunk::Lists`, members only). Only `Frontier::All`'s chunks are
    /// disjoint ascending ranges; the others come in plan order, a vertex
    /// in at most one chunk.
    pub fn chunks_of<R: Send>(&self, frontier: Frontier, f: impl Fn(&Chunk) -> Result<R> + Sync) -> Result<Vec<R>> {
        let whole = matches!(frontier, Frontier::All);
        let read = |job: Job| {
            if let ([dir], Job::Range(lo, hi, _)) = (self.dirs.as_slice(), &job)
                && let Some(rp) = self.store.range_pages(*dir, *lo, *hi, self.cached)?
            {
                return Ok(Chunk::Pages(rp));
            }
            // A decoded range keeps only its members.
            self.read(job).map(Chunk::Lists)
        };
        if alone() {
            let mut out = Vec::new();
            let mut covered = 0;
            self.pipeline(frontier, read, |c| {
                if whole {
                    let (lo, hi) = c.range();
                    assert!(covered <= lo && lo <= hi, "chunk [{lo}, {hi}) overlaps the one before (up to {covered})");
                    covered = hi;
                }
                let r = f(&c);
                if let Chunk::Lists(b) = c {
                    self.recycle([b.csr]);
                }
                out.push(r?);
                Ok(())
            })?;
            return Ok(out);
        }
        let threads = rayon::current_num_threads();
        // Chunks handed out and not yet done, and what they returned.
        let busy = (Mutex::new(0usize), Condvar::new());
        let done: Mutex<Vec<(usize, Result<R>)>> = Mutex::new(Vec::new());
        let (f, busy, done) = (&f, &busy, &done);
        let (mut k, mut covered) = (0, 0);
        rayon::in_place_scope(|s| {
            self.pipeline(frontier, read, |c| {
                if whole {
                    let (lo, hi) = c.range();
                    assert!(covered <= lo && lo <= hi, "chunk [{lo}, {hi}) overlaps the one before (up to {covered})");
                    covered = hi;
                }
                *busy.0.locked() += 1;
                let at = k;
                k += 1;
                s.spawn(move |_| {
                    // Gives the slot back even if `f` panics: the wait
                    // below would otherwise never end, and the scope
                    // could not pass the panic on.
                    let _slot = Slot(busy);
                    let r = f(&c);
                    if let Chunk::Lists(b) = c {
                        self.recycle([b.csr]);
                    }
                    done.locked().push((at, r));
                });
                // Waiting here, before the next chunk is taken, keeps the
                // chunks alive to the readers' plus the threads'.
                let mut n = busy.0.locked();
                while *n >= threads {
                    n = busy.1.wait_locked(n);
                }
                drop(n);
                let mut done = done.locked();
                match done.iter().position(|(_, r)| r.is_err()) {
                    Some(i) => done.swap_remove(i).1.map(|_| ()),
                    None => Ok(()),
                }
            })
        })?;
        let mut done = std::mem::take(&mut *done.locked());
        done.sort_unstable_by_key(|&(at, _)| at);
        done.into_iter().map(|(_, r)| r).collect()
    }

    /// Runs `read` for the frontier's jobs on `READERS` threads and `f` on
    /// their results, in the plan's order, on this one (both on this one,
    /// job by job, when it is `alone`).
    fn pipeline<T: Send>(&self, frontier: Frontier, read: impl Fn(Job) -> Result<T> + Sync, mut f: impl FnMut(T) -> Result<()>) -> Result<()> {
        self.planned.store(0, SeqCst);
        if alone() {
            let mut out = Ok(());
            self.plan(frontier, |job| {
                out = read(job).and_then(&mut f);
                out.is_ok()
            });
            return out;
        }
        let read = &read;
        std::thread::scope(|s| {
            // Job k goes to reader k % READERS and its batch comes back on
            // that reader's channel, so `f` sees the plan's order. Both
            // channels are rendezvous: a reader holds at most the batch it
            // finished while `f` works on another.
            let (mut jobs, mut done) = (Vec::new(), Vec::new());
            for _ in 0..READERS {
                let (job_tx, job_rx) = sync_channel::<Job>(0);
                let (tx, rx) = sync_channel::<Result<T>>(0);
                s.spawn(move || {
                    for job in job_rx {
                        let got = read(job);
                        let stop = got.is_err();
                        // A closed channel means the consumer stopped.
                        if tx.send(got).is_err() || stop {
                            return;
                        }
                    }
                });
                jobs.push(job_tx);
                done.push(rx);
            }
            s.spawn(move || {
                let mut k = 0;
                self.plan(frontier, |job| {
                    let sent = jobs[k % READERS].send(job).is_ok();
                    k += 1;
                    sent
                });
            });
            // A reader's channel closes once the plan is done and it has
            // handed over every batch.
            for k in 0.. {
                match done[k % READERS].recv() {
                    Ok(got) => f(got?)?,
                    Err(_) => break,
                }
            }
            Ok(())
        })
    }

    /// Cuts the frontier into read jobs and hands each to `send` as soon as
    /// it is planned, until `send` says stop.
    fn plan(&self, frontier: Frontier, mut send: impl FnMut(Job) -> bool) {
        let mut sparse: Vec<u64> = Vec::new();
        let (mut sparse_pages, mut sparse_edges) = (0usize, 0u64);
        // The last packed page counted per direction: members sharing a
        // page read it once.
        let mut last = vec![usize::MAX; self.gtts.len()];
        let page_size = self.store.page_size() as u64;
        for (r, &(lo, hi)) in self.ranges.iter().enumerate() {
            // Before reading the chunk's members: see `Bitset::insert`.
            self.planned.store(hi, SeqCst);
            let members = frontier.count(lo, hi);
            if members == 0 {
                continue;
            }
            if matches!(frontier, Frontier::All) {
                if !send(Job::Range(lo, hi, None)) {
                    return;
                }
            } else if members as f64 * RANDOM_COST >= self.range_pages[r] as f64 {
                if !send(Job::Range(lo, hi, Some(Members::of(frontier, lo, hi)))) {
                    return;
                }
            } else {
                let mut stop = false;
                frontier.each(lo, hi, |v| {
                    if stop {
                        return;
                    }
                    sparse.push(v);
                    sparse_pages += self.gtts.iter().map(|g| g.list_pages(v)).sum::<usize>();
                    sparse_edges += self.gtts.iter().zip(&mut last).map(|(g, last)| list_edges(g, v, page_size, last)).sum::<u64>();
                    if sparse.len() >= SPARSE_BATCH || sparse_pages >= SPARSE_PAGES || sparse_edges >= SPARSE_EDGES {
                        (sparse_pages, sparse_edges) = (0, 0);
                        last.fill(usize::MAX);
                        stop = !send(Job::Ids(std::mem::take(&mut sparse)));
                    }
                });
                if stop {
                    return;
                }
            }
        }
        if !sparse.is_empty() {
            send(Job::Ids(sparse));
        }
    }

    /// Hands CSRs back for later batches to decode into, keeping at most
    /// as many as can be alive at once (three per batch in the two-
    /// direction view, one batch per reader plus the algorithm's).
    fn recycle<const N: usize>(&self, csrs: [Csr; N]) {
        let mut spare = self.spare.locked();
        for c in csrs {
            if spare.len() < 3 * (READERS + 1) {
                spare.push(c);
            }
        }
    }

    fn read(&self, job: Job) -> Result<Batch> {
        let (store, weights) = (self.store, self.weights);
        let spare = || self.spare.locked().pop().unwrap_or_default();
        let read_dir = |dir| match &job {
            Job::Range(lo, hi, _) => store.read_range(dir, *lo, *hi, weights, self.cached, spare()),
            Job::Ids(ids) => store.neighbors_with(ids, dir, weights, false, self.cached, spare()),
        };
        let csr = match self.dirs.as_slice() {
            [d] => read_dir(*d)?,
            [a, b] => {
                let (a, b) = (read_dir(*a)?, read_dir(*b)?);
                let both = concat(&a, &b, spare());
                self.recycle([a, b]);
                both
            }
            _ => unreachable!("one or two directions"),
        };
        let rows = match job {
            Job::Range(first, _, members) => Rows::Range { first, members: members.map(|m| m.ids()) },
            Job::Ids(ids) => Rows::Ids(ids),
        };
        Ok(Batch { rows, csr })
    }
}

/// At most how many ids reading `v`'s list decodes: the edges of its pages,
/// a packed page counted only if it is not `last` (the packed page counted
/// before, which becomes this one). The table's last page has no count
/// after it; its ids are bounded by its bytes.
fn list_edges(g: &GttRef, v: u64, page_size: u64, last: &mut usize) -> u64 {
    let hi = g.upper_bound(v);
    if hi == 0 || !g.is_present(v) {
        return 0;
    }
    let lo = if !g.is_extent(hi - 1) {
        if *last == hi - 1 {
            return 0;
        }
        *last = hi - 1;
        hi - 1
    } else if g.first_vertex(hi - 1) == v {
        g.lower_bound(v)
    } else {
        return 0;
    };
    let end = if hi < g.len() { g.edges_before(hi) } else { g.edges_before(hi - 1) + page_size };
    end - g.edges_before(lo)
}

/// How far ahead in a list neighbor state is prefetched.
pub(crate) const AHEAD: usize = 16;

/// Asks the CPU for `values[list[at]]`: algorithms read the state of a
/// list's neighbors, random reads over arrays far larger than the CPU
/// caches, and without a hint those loops are bound by their latency.
#[inline]
pub(crate) fn prefetch<T>(values: &[T], list: &[u64], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = list.get(at).and_then(|&u| values.get(u as usize)) {
        // SAFETY: a prefetch is a hint that never faults; the address is
        // an element of `values` anyway.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((x as *const T).cast()) };
    }
}

/// Per-vertex concatenation of two CSRs over the same ids, into `out`'s
/// buffers.
fn concat(a: &Csr, b: &Csr, mut out: Csr) -> Csr {
    let n = a.indptr.len() - 1;
    // Edge ids span two directions here, so none are kept.
    out.indptr.clear();
    out.indices.clear();
    out.first_edge.clear();
    (out.weights, out.labels) = (None, None);
    out.indices.reserve_exact(a.indices.len() + b.indices.len());
    out.indptr.push(0);
    for i in 0..n {
        out.indices.extend_from_slice(&a.indices[a.indptr[i] as usize..a.indptr[i + 1] as usize]);
        out.indices.extend_from_slice(&b.indices[b.indptr[i] as usize..b.indptr[i + 1] as usize]);
        out.indptr.push(out.indices.len() as u64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range's members, snapshot as bits and listed back as ids, are the
    /// frontier's members in [lo, hi), for ranges that start and end
    /// inside words, from a set and from an id list.
    #[test]
    fn members_list_the_range_of_the_frontier() {
        let ids: Vec<u64> = (0..1000u64).filter(|v| v % 7 == 0 || v % 64 == 63 || v % 64 == 0).collect();
        let set = Bitset::new(1000);
        ids.iter().for_each(|&v| set.insert(v));
        for (lo, hi) in [(0, 1000), (1, 64), (63, 65), (100, 101), (128, 192), (130, 999)] {
            let want: Vec<u64> = ids.iter().copied().filter(|&v| lo <= v && v < hi).collect();
            for f in [Frontier::Set(&set), Frontier::Ids(&ids), Frontier::All] {
                let got = Members::of(f, lo, hi).ids();
                match f {
                    Frontier::All => assert_eq!(got, (lo..hi).collect::<Vec<_>>(), "all of [{lo}, {hi})"),
                    _ => assert_eq!(got, want, "[{lo}, {hi})"),
                }
            }
        }
    }
}
