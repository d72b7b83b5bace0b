//! Pipelined mini-batch loader: worker threads run the neighbor sampler
//! (sample, then feature gather) ahead of the consumer, which receives the
//! batches of one epoch in order.
//!
//! - Sampling runs `lookahead` batches ahead of the gather: a sampled
//!   batch's nodes are announced to the row cache (`Store::expect_rows`),
//!   which then keeps the rows upcoming batches will ask for and takes them
//!   in on a miss, and the earliest sampled batch is gathered next. Workers
//!   sample a group of `lookahead / 2` batches together (`sample_subgraphs`:
//!   each hop reads the lists the group's batches share once) whenever a
//!   whole group fits within `lookahead`, else gather. With `lookahead` 0 a
//!   worker samples and gathers a batch in one step.
//! - A batch `j` is gathered only while `j < consumed + prefetch`, so at
//!   most `prefetch` batches are being gathered or finished and waiting, and
//!   `lookahead` more sampled: memory is bounded whatever the speed of the
//!   consumer.
//! - Batch `i` is sampled with a seed derived from (seed, i), so the epoch is
//!   the same whatever the number of workers or the timing.
//! - An error in a worker is handed to the consumer at its batch's place,
//!   and ends the epoch (later batches are not produced; those sampled
//!   ahead are dropped, their rows no longer upcoming).
//! - Dropping the prefetcher cancels it: workers stop after the batch they
//!   are on and are joined.
//! - Fork: threads do not survive `fork()`, and the store's I/O state (rings,
//!   locks held by other threads) must not be shared with the parent. The
//!   prefetcher records its pid; when `next` runs in another process, the
//!   parent's threads and store handle are abandoned (leaked, never touched),
//!   the store is reopened through the reopen hook and the workers restart
//!   at the first batch not yet consumed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use solidgraph_io::sync::{CondvarExt, MutexExt};
use solidgraph_store::{Expected, OpenOptions, Store};

use crate::error::{EngineError, Result};
use crate::sampler::{Sample, SampleOptions, Subgraph, check_options, sample_neighbors, sample_subgraph, sample_subgraphs};

/// Opens the store anew (in a forked child).
pub type Reopen = Arc<dyn Fn() -> Result<Arc<Store>> + Send + Sync>;

/// Most batches a loader samples ahead of their gather.
pub const MAX_LOOKAHEAD: usize = 256;

#[derive(Clone)]
pub struct PrefetchOptions {
    /// Sampler threads.
    pub workers: usize,
    /// Batches being gathered or finished but not yet consumed.
    pub prefetch: usize,
    /// Batches sampled ahead of their gather, their rows announced to the
    /// row cache (`Store::expect_rows`) so it keeps and takes in what they
    /// will ask for; 0 samples and gathers each batch in one step.
    pub lookahead: usize,
    /// A cap on the bytes of the batches held: sampled ahead, being
    /// gathered, gathered and waiting, and the last two handed out
    /// (counted as in `loader_memory`, at their real sizes). A draw or a
    /// gather waits while it would pass the cap, but for the one the
    /// consumer needs next; None: only the counts above bound them.
    pub buffer_bytes: Option<u64>,
    /// How a forked child gets its own store; by default the store is
    /// reopened from its path with the cache budget it had.
    pub reopen: Option<Reopen>,
}

impl Default for PrefetchOptions {
    fn default() -> Self {
        PrefetchOptions { workers: 2, prefetch: 4, lookahead: DEFAULT_LOOKAHEAD, buffer_bytes: None, reopen: None }
    }
}

/// Batches sampled ahead by default: far enough that the row cache keeps
/// and takes in most of the rows upcoming batches share (longer lookaheads
/// add little), near enough that the batches held ahead (each its sampled
/// subgraph and its rows' entries in `Upcoming`, a few MB at [25, 10] x
/// 1024) stay a small part of memory. Figures: docs/PERFORMANCE.md, Loader.
pub const DEFAULT_LOOKAHEAD: usize = 32;

/// What one batch of a loader can hold at most, from its options: the
/// bound its memory is a function of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchShape {
    pub batch_size: u64,
    pub fanouts: Vec<i64>,
    /// Bytes of one node's rows, all gathered tensors together.
    pub row_bytes: u64,
    pub num_nodes: u64,
    pub page_size: u64,
    /// The store maps user ids to its own (degree order): two maps of a
    /// u32 per vertex, loaded on first use.
    pub reordered: bool,
    /// The most draws the first hop of one batch makes, from its seeds'
    /// degrees (`with_seeds`); None: `batch_size` times the fanout.
    pub first_draws: Option<u64>,
}

/// Bytes a batch sampled ahead holds per node: its id, the row cache's
/// copy and count of it (`Expected`, `Upcoming`), the id map while its
/// group is drawn; and per edge: row, col and edge ids.
const AHEAD_NODE_BYTES: u64 = 8 + 8 + 24 + 24;
const EDGE_BYTES: u64 = 24;
/// A gathered batch as Python gets it: node ids and rows per node; edge
/// ids and the (2, E) edge index built from row and col per edge.
const GATHERED_NODE_BYTES: u64 = 8;
const GATHERED_EDGE_BYTES: u64 = 8 + 16 + 16;
/// The store's read buffers: 64 registered and up to 64 spare chunks of
/// 256 KiB (`solidgraph_io::VolumeOptions`).
const IO_BUFFER_BYTES: u64 = 128 * 256 * 1024;
/// Batches Python holds: the one it trains on and the next one while it is
/// handed over (`for batch in loader` drops the old one after).
const HANDED_BATCHES: u64 = 2;
/// The smallest page cache a budget leaves: the adjacency of a hop's
/// frontier goes through it.
pub const MIN_PAGE_CACHE: u64 = 8 << 20;

/// Bytes a batch of `nodes` and `edges` holds sampled ahead.
fn ahead_bytes(nodes: u64, edges: u64) -> u64 {
    nodes.saturating_mul(AHEAD_NODE_BYTES).saturating_add(edges.saturating_mul(EDGE_BYTES))
}

/// Bytes a batch of `nodes` and `edges` holds gathered.
fn gathered_bytes(nodes: u64, edges: u64, row_bytes: u64) -> u64 {
    nodes.saturating_mul(GATHERED_NODE_BYTES + row_bytes).saturating_add(edges.saturating_mul(GATHERED_EDGE_BYTES))
}

impl BatchShape {
    pub fn of(store: &Store, batch_size: usize, o: &SampleOptions) -> Result<BatchShape> {
        check_options(store, o)?;
        let mut row_bytes = 0;
        for t in &o.tensors {
            row_bytes += store.tensor_meta(t)?.row_bytes();
        }
        Ok(BatchShape {
            batch_size: batch_size as u64,
            fanouts: o.fanouts.clone(),
            row_bytes,
            num_nodes: store.num_nodes(),
            page_size: store.page_size() as u64,
            reordered: store.superblock().order.words > 0,
            first_draws: None,
        })
    }

    /// The shape of batches of `batch_size` seeds taken from `seeds` (user
    /// ids) in any order: the first hop draws at most the sum of the
    /// `batch_size` largest of its seeds' draws (`first_hop_draws`). It
    /// holds for the graph as it is now; edges added later can pass it.
    pub fn with_seeds(store: &Store, seeds: &[u64], batch_size: usize, o: &SampleOptions) -> Result<BatchShape> {
        let mut shape = BatchShape::of(store, batch_size, o)?;
        let Some(mut draws) = first_hop_draws(store, seeds, o)? else { return Ok(shape) };
        let top = batch_size.min(draws.len());
        if top < draws.len() {
            draws.select_nth_unstable_by(top, |a, b| b.cmp(a));
        }
        shape.first_draws = Some(draws[..top].iter().sum());
        Ok(shape)
    }

    /// The shape of exactly these batches (user ids): the first hop draws
    /// at most the largest sum of one batch's seeds' draws.
    pub fn of_batches(store: &Store, batches: &[Vec<u64>], o: &SampleOptions) -> Result<BatchShape> {
        let longest = batches.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let mut shape = BatchShape::of(store, longest, o)?;
        let all: Vec<u64> = batches.concat();
        let Some(draws) = first_hop_draws(store, &all, o)? else { return Ok(shape) };
        let mut at = 0;
        let mut most = 0;
        for b in batches {
            most = most.max(draws[at..at + b.len()].iter().sum());
            at += b.len();
        }
        shape.first_draws = Some(most);
        Ok(shape)
    }

    /// Most nodes and edges one batch samples: every draw a new node, at
    /// most the graph's nodes new at each hop (a hop draws only from the
    /// nodes new at the one before).
    pub fn most(&self) -> Result<(u64, u64)> {
        if self.batch_size == 0 {
            return Err(EngineError::Invalid("batch_size must be at least 1".into()));
        }
        let all = self.num_nodes.max(1);
        let (mut frontier, mut nodes, mut edges) = (self.batch_size.min(all), self.batch_size.min(all), 0u64);
        for (hop, &k) in self.fanouts.iter().enumerate() {
            if k < 1 {
                return Err(EngineError::Invalid(format!("a loader's memory has no bound with fanout {k} (every neighbour): give each hop a positive fanout")));
            }
            let mut draws = frontier.saturating_mul(k as u64);
            if hop == 0
                && let Some(d) = self.first_draws
            {
                draws = draws.min(d);
            }
            edges = edges.saturating_add(draws);
            frontier = draws.min(all);
            nodes = nodes.saturating_add(frontier);
        }
        Ok((nodes.min(all), edges))
    }
}

/// What each seed (user ids) can draw at the first hop: min(degree,
/// fanout), or the fanout when drawing with replacement from a non-empty
/// list; None without a positive first fanout. Seeds outside the graph
/// count as drawing the fanout (their batch fails when it is sampled).
fn first_hop_draws(store: &Store, seeds: &[u64], o: &SampleOptions) -> Result<Option<Vec<u64>>> {
    let Some(&k) = o.fanouts.first() else { return Ok(None) };
    if k < 1 {
        return Ok(None);
    }
    let k = k as u64;
    let n = store.num_nodes();
    let mut ids: Vec<u64> = seeds.iter().copied().filter(|&v| v < n).collect();
    store.to_internal(&mut ids)?;
    let deg = store.degree(&ids, o.direction)?;
    let mut deg = deg.into_iter();
    Ok(Some(
        seeds
            .iter()
            .map(|&v| match (v < n, o.replace) {
                (false, _) => k,
                (true, false) => deg.next().map_or(k, |d| d.min(k)),
                (true, true) => deg.next().map_or(k, |d| if d > 0 { k } else { 0 }),
            })
            .collect(),
    ))
}

/// A bound on the bytes a loader holds outside the store's caches, by
/// part; each from the most a batch can sample (`BatchShape::most`).
/// Python holding more than the two last batches it got holds more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoaderMemory {
    /// `lookahead` batches sampled ahead: ids only.
    pub ahead: u64,
    /// `prefetch` batches being gathered or gathered and waiting.
    pub gathered: u64,
    /// Two batches handed to Python.
    pub handed: u64,
    /// Pages pinned while a hop part or a gather part is read, per thread.
    pub working: u64,
    /// The store's read buffers and id maps.
    pub store: u64,
    /// `ahead`, `gathered` and `handed` together, within the buffer cap.
    pub buffers: u64,
}

impl LoaderMemory {
    pub fn total(&self) -> u64 {
        self.buffers + self.working + self.store
    }
}

/// The bound on a loader's memory outside the caches for batches of
/// `shape` with `cfg`'s workers, prefetch and lookahead.
pub fn loader_memory(shape: &BatchShape, cfg: &PrefetchOptions) -> Result<LoaderMemory> {
    let (n, e) = shape.most()?;
    let ahead_one = ahead_bytes(n, e);
    let gathered_one = gathered_bytes(n, e, shape.row_bytes);
    // Without lookahead a worker samples and gathers in one step: ids and
    // the id map live beside the rows.
    let in_step = if cfg.lookahead == 0 { ahead_one } else { 0 };
    // Workers gather; hop parts are drawn on the pool's threads.
    let threads = (cfg.workers + rayon::current_num_threads()) as u64;
    // A hop part and the store's gather part both pin up to HOP_PAGES.
    let part_pages = crate::sampler::HOP_PAGES as u64;
    let mut m = LoaderMemory {
        ahead: ahead_one.saturating_mul(cfg.lookahead as u64),
        gathered: (gathered_one + in_step).saturating_mul(cfg.prefetch as u64),
        handed: gathered_one.saturating_mul(HANDED_BATCHES),
        working: threads * part_pages * shape.page_size,
        store: IO_BUFFER_BYTES + if shape.reordered { shape.num_nodes * 8 } else { 0 },
        buffers: 0,
    };
    m.buffers = m.ahead.saturating_add(m.gathered).saturating_add(m.handed);
    // The cap binds the three together, passed by at most the batches
    // handed out, the batch drawn and the batch gathered for the consumer
    // when nothing else is.
    if let Some(cap) = cfg.buffer_bytes {
        m.buffers = m.buffers.min(cap.max(m.handed).saturating_add(ahead_one + gathered_one + in_step));
    }
    Ok(m)
}

/// How a loader spends a memory budget: its caches and buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetPlan {
    pub cache_bytes: u64,
    pub row_cache_bytes: u64,
    /// The loader's `PrefetchOptions::buffer_bytes`.
    pub buffer_bytes: u64,
    pub memory: LoaderMemory,
    /// The smallest budget these batches run in.
    pub minimum: u64,
}

/// Splits `budget` between the loader's buffers and the store's caches.
/// The buffers need at least room for the two batches handed out, one
/// drawn and one gathered (at their most); below that plus the smallest
/// page cache the budget is refused. The cap is that least (no more than
/// `cfg`'s prefetch and lookahead can hold) and the caches get the rest:
/// three quarters to the row cache when rows are gathered (hot rows share
/// pages with cold ones), the rest to pages. The cap counts batches at
/// their real sizes, usually a fraction of their most, and a draw
/// reserves each batch's own most, so the least cap already holds most of
/// the lookahead and prefetch, while every byte of cache saves reads.
pub fn plan_budget(budget: u64, shape: &BatchShape, cfg: &PrefetchOptions) -> Result<BudgetPlan> {
    let full = loader_memory(shape, &PrefetchOptions { buffer_bytes: None, ..cfg.clone() })?;
    let (n, e) = shape.most()?;
    let in_step = if cfg.lookahead == 0 { ahead_bytes(n, e) } else { 0 };
    let pass = ahead_bytes(n, e) + gathered_bytes(n, e, shape.row_bytes) + in_step;
    let least = full.handed + pass;
    let minimum = full.working + full.store + least + MIN_PAGE_CACHE;
    if budget < minimum {
        return Err(EngineError::Invalid(format!(
            "memory_budget {budget} bytes is below this loader's minimum of {minimum} bytes ({} MiB: batches of {} seeds with fanouts {:?} and {} bytes of rows per node, with an {} MiB page cache)",
            minimum.div_ceil(1 << 20),
            shape.batch_size,
            shape.fanouts,
            shape.row_bytes,
            MIN_PAGE_CACHE >> 20
        )));
    }
    // The least buffers less the pass: the two batches handed out.
    let cap = full.handed;
    let memory = loader_memory(shape, &PrefetchOptions { buffer_bytes: Some(cap), ..cfg.clone() })?;
    let caches = budget - memory.total();
    let row_cache_bytes = if shape.row_bytes > 0 { (caches * 3 / 4).min(caches - MIN_PAGE_CACHE) } else { 0 };
    Ok(BudgetPlan { cache_bytes: caches - row_cache_bytes, row_cache_bytes, buffer_bytes: cap, memory, minimum })
}

/// The seed of batch `i` of an epoch sampled with `seed`.
pub fn batch_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Where a loader's pipeline spent its time, since it started: to tell a
/// cap that stalls it from a store that is slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoaderStats {
    /// Groups sampled ahead, and the batches in them.
    pub draws: u64,
    pub drawn: u64,
    /// Waits of a worker that had a draw or a gather to take but for the
    /// buffer cap, and their time.
    pub cap_waits: u64,
    pub cap_wait_ns: u64,
    /// Time the consumer waited for its next batch.
    pub consumer_wait_ns: u64,
    /// Most bytes held under the cap (real sizes, and draws reserved).
    pub peak_held: u64,
}

/// A batch sampled ahead; its rows count as upcoming until `expected` drops.
struct Ahead {
    sub: Subgraph,
    expected: Expected,
    /// `ahead_bytes` of it.
    bytes: u64,
}

/// A loader's byte accounting under a buffer cap (`buffer_bytes`).
struct Budget {
    cap: u64,
    row_bytes: u64,
    /// `ahead_bytes` and `gathered_bytes` of each batch at its most, from
    /// its own seeds' degrees: a draw reserves what its batches can hold,
    /// not what the epoch's largest batch can.
    ahead_most: Vec<u64>,
    gathered_most: Vec<u64>,
}

impl Budget {
    fn new(store: &Store, batches: &[Vec<u64>], o: &SampleOptions, cap: u64) -> Result<Budget> {
        let longest = batches.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let mut shape = BatchShape::of(store, longest, o)?;
        let draws = first_hop_draws(store, &batches.concat(), o)?;
        let (mut ahead_most, mut gathered_most) = (Vec::with_capacity(batches.len()), Vec::with_capacity(batches.len()));
        let mut at = 0;
        for b in batches {
            shape.batch_size = b.len().max(1) as u64;
            shape.first_draws = draws.as_ref().map(|d| d[at..at + b.len()].iter().sum());
            at += b.len();
            let (n, e) = shape.most()?;
            ahead_most.push(ahead_bytes(n, e));
            gathered_most.push(gathered_bytes(n, e, shape.row_bytes));
        }
        Ok(Budget { cap, row_bytes: shape.row_bytes, ahead_most, gathered_most })
    }

    fn gathered(&self, nodes: usize, edges: usize) -> u64 {
        gathered_bytes(nodes as u64, edges as u64, self.row_bytes)
    }

    /// Bytes batches `i..i + n` reserve while they are drawn.
    fn drawing(&self, i: usize, n: usize) -> u64 {
        self.ahead_most[i..i + n].iter().sum()
    }
}

struct State {
    /// Next batch to sample.
    next_draw: usize,
    /// Batches being sampled ahead or sampled and waiting in `ahead`.
    pending: usize,
    ahead: BTreeMap<usize, Ahead>,
    /// Batches handed to the consumer.
    consumed: usize,
    /// Finished batches not yet consumed.
    done: BTreeMap<usize, Result<Sample>>,
    /// A batch failed: nothing after it is sampled or gathered.
    failed_at: Option<usize>,
    /// Under a buffer cap: bytes of the batches ahead, being gathered,
    /// done, and the last `HANDED_BATCHES` handed out (`handed`, oldest
    /// first); the most groups being drawn may hold; batches being
    /// gathered or done.
    held: u64,
    drawing: u64,
    handed: std::collections::VecDeque<u64>,
    gathered_n: usize,
    stats: LoaderStats,
}

impl State {
    fn new(next: usize) -> State {
        State {
            next_draw: next,
            pending: 0,
            ahead: BTreeMap::new(),
            consumed: next,
            done: BTreeMap::new(),
            failed_at: None,
            held: 0,
            drawing: 0,
            handed: Default::default(),
            gathered_n: 0,
            stats: LoaderStats::default(),
        }
    }

    fn fail(&mut self, i: usize) {
        let f = self.failed_at.map_or(i, |f| f.min(i));
        self.failed_at = Some(f);
        let dropped = self.ahead.split_off(&(f + 1));
        self.pending -= dropped.len();
        self.held -= dropped.values().map(|a| a.bytes).sum::<u64>();
    }

    /// Batches of the group `i..i + n` that fit under the cap (each at its
    /// most), at least one when nothing is ahead: the consumer's next
    /// batch must come.
    fn fit_draw(&self, b: Option<&Budget>, i: usize, n: usize) -> usize {
        let Some(b) = b else { return n };
        let mut room = b.cap.saturating_sub(self.held + self.drawing);
        let mut fit = 0;
        for &most in &b.ahead_most[i..i + n] {
            if most > room {
                break;
            }
            room -= most;
            fit += 1;
        }
        if fit == 0 && self.pending == 0 { 1 } else { fit }
    }

    fn note_held(&mut self) {
        self.stats.peak_held = self.stats.peak_held.max(self.held + self.drawing);
    }

    /// Whether gathering `need` more bytes fits under the cap; always when
    /// nothing is gathered (the batch is the consumer's next).
    fn fit_gather(&self, b: Option<&Budget>, need: u64) -> bool {
        b.is_none_or(|b| self.gathered_n == 0 || self.held + self.drawing + need <= b.cap)
    }
}

enum Task {
    /// Sample batch i and gather it (no lookahead).
    Whole(usize),
    /// Sample batches i..i + n ahead, as one group (`sample_subgraphs`).
    Draw(usize, usize),
    /// Gather batch i.
    Gather(usize, Ahead),
}

/// What a Whole task for batch `i` holds before it is sampled: its most.
fn whole_most(b: &Budget, i: usize) -> u64 {
    b.ahead_most[i] + b.gathered_most[i]
}

struct Shared {
    store: Arc<Store>,
    batches: Arc<Vec<Vec<u64>>>,
    opts: Arc<SampleOptions>,
    prefetch: usize,
    lookahead: usize,
    budget: Option<Arc<Budget>>,
    cancel: AtomicBool,
    state: Mutex<State>,
    /// Workers wait here for a task.
    room: Condvar,
    /// The consumer waits here for its next batch.
    ready: Condvar,
}

impl Shared {
    /// The next task, sampling ahead first; `None` when no work is left.
    fn claim(&self) -> Option<Task> {
        let mut st = self.state.locked();
        loop {
            let end = st.failed_at.unwrap_or(self.batches.len());
            if self.cancel.load(Ordering::Acquire) || (st.next_draw >= end && st.pending == 0) {
                return None;
            }
            let i = st.next_draw;
            let b = self.budget.as_deref();
            if self.lookahead == 0 {
                let most = b.filter(|_| i < end).map_or(0, |b| whole_most(b, i));
                if i < end && i < st.consumed + self.prefetch && st.fit_gather(b, most) {
                    st.next_draw += 1;
                    st.gathered_n += 1;
                    st.held += most;
                    st.note_held();
                    return Some(Task::Whole(i));
                }
            } else {
                // A whole group or the epoch's last batches, not a batch as
                // each gather frees a place: groups share their reads.
                let want = self.group().min(end.saturating_sub(i));
                let n = st.fit_draw(b, i, want);
                if n > 0 && st.pending + n <= self.lookahead {
                    st.next_draw += n;
                    st.pending += n;
                    st.drawing += b.map_or(0, |b| b.drawing(i, n));
                    st.stats.draws += 1;
                    st.stats.drawn += n as u64;
                    st.note_held();
                    return Some(Task::Draw(i, n));
                }
                let mut capped = n < want && want > 0 && st.pending + want <= self.lookahead;
                let room = st.consumed + self.prefetch;
                // Gathered, a batch holds its rows and ids instead of its ids.
                let gathered = |a: &Ahead| b.map_or(0, |b| b.gathered(a.sub.nodes().len(), a.sub.edges()));
                if let Some((&j, a)) = st.ahead.first_key_value()
                    && j < room
                {
                    if st.fit_gather(b, gathered(a).saturating_sub(a.bytes)) {
                        let a = st.ahead.remove(&j).expect("first entry above");
                        st.pending -= 1;
                        st.gathered_n += 1;
                        st.held = st.held + gathered(&a) - a.bytes;
                        st.note_held();
                        drop(st);
                        // Room for one more batch ahead.
                        self.room.notify_all();
                        return Some(Task::Gather(j, a));
                    }
                    capped = true;
                }
                if capped {
                    let t = std::time::Instant::now();
                    st = self.room.wait_locked(st);
                    st.stats.cap_waits += 1;
                    st.stats.cap_wait_ns += t.elapsed().as_nanos() as u64;
                    continue;
                }
            }
            st = self.room.wait_locked(st);
        }
    }

    /// Batches sampled together: half the lookahead, so that one group is
    /// sampled while the other is gathered.
    fn group(&self) -> usize {
        (self.lookahead / 2).max(1)
    }

    fn options(&self, i: usize) -> SampleOptions {
        let mut o = (*self.opts).clone();
        o.seed = batch_seed(self.opts.seed, i as u64);
        o
    }

    fn work(&self) {
        while let Some(task) = self.claim() {
            match task {
                Task::Whole(i) => {
                    let r = guarded(|| sample_neighbors(&self.store, &self.batches[i], &self.options(i)));
                    if let (Some(b), Ok(s)) = (&self.budget, &r) {
                        // Held at its most until now; its real size from here.
                        let mut st = self.state.locked();
                        st.held = st.held - whole_most(b, i) + b.gathered(s.node.len(), s.row.len());
                    }
                    self.finish(i, r);
                }
                Task::Draw(i, n) => {
                    let batches: Vec<&[u64]> = self.batches[i..i + n].iter().map(|b| &b[..]).collect();
                    let seeds: Vec<u64> = (i..i + n).map(|j| batch_seed(self.opts.seed, j as u64)).collect();
                    let subs: Vec<Result<Subgraph>> = match guarded(|| sample_subgraphs(&self.store, &batches, &seeds, &self.opts)) {
                        Ok(subs) => subs.into_iter().map(Ok).collect(),
                        // Sample them one by one to hand the error over at
                        // its own batch's place, after the batches before it.
                        Err(_) if n > 1 => (i..i + n).map(|j| guarded(|| sample_subgraph(&self.store, &self.batches[j], &self.options(j)))).collect(),
                        Err(e) => vec![Err(e)],
                    };
                    let mut st = self.state.locked();
                    st.drawing -= self.budget.as_ref().map_or(0, |b| b.drawing(i, n));
                    for (j, r) in (i..).zip(subs) {
                        match r {
                            Ok(sub) if st.failed_at.is_none_or(|f| j < f) => {
                                let expected = self.store.expect_rows(sub.nodes().to_vec());
                                let bytes = if self.budget.is_some() { ahead_bytes(sub.nodes().len() as u64, sub.edges() as u64) } else { 0 };
                                st.held += bytes;
                                st.ahead.insert(j, Ahead { sub, expected, bytes });
                            }
                            Ok(_) => st.pending -= 1,
                            Err(e) => {
                                st.pending -= 1;
                                st.done.insert(j, Err(e));
                                st.fail(j);
                                self.ready.notify_all();
                            }
                        }
                    }
                    drop(st);
                    self.room.notify_all();
                }
                Task::Gather(i, a) => {
                    // Out of the upcoming rows first: a miss only this batch
                    // wants is admitted as any other.
                    drop(a.expected);
                    let r = guarded(|| a.sub.gather(&self.store, &self.opts.tensors));
                    self.finish(i, r);
                }
            }
        }
    }

    fn finish(&self, i: usize, r: Result<Sample>) {
        let mut st = self.state.locked();
        if r.is_err() {
            st.fail(i);
        }
        st.done.insert(i, r);
        drop(st);
        self.ready.notify_all();
        self.room.notify_all();
    }
}

/// Runs `f`; a panic in the sampler is a bug, but it must reach the
/// consumer as an error, not leave it waiting forever.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
        Err(EngineError::Invalid(format!("sampler worker panicked: {}", msg.unwrap_or_else(|| "unknown cause".into()))))
    })
}

struct Running {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Running {
    fn start(shared: Arc<Shared>, workers: usize) -> Running {
        let handles = (0..workers.max(1))
            .map(|k| {
                let s = shared.clone();
                std::thread::Builder::new().name(format!("sg-loader-{k}")).spawn(move || s.work()).expect("spawn a loader thread")
            })
            .collect();
        Running { shared, handles }
    }

    fn stop(mut self) {
        self.shared.cancel.store(true, Ordering::Release);
        // Take the lock so no worker is between its check and its wait.
        drop(self.shared.state.locked());
        self.shared.room.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Samples the batches of one epoch on worker threads, handing them out in
/// order. See the module documentation.
pub struct Prefetcher {
    store: Arc<Store>,
    batches: Arc<Vec<Vec<u64>>>,
    opts: Arc<SampleOptions>,
    cfg: PrefetchOptions,
    budget: Option<Arc<Budget>>,
    cache_bytes: u64,
    pid: u32,
    /// Batches handed out so far.
    next: usize,
    finished: bool,
    run: Option<Running>,
    /// Of the runs that ended (one per process the epoch ran in).
    ended: LoaderStats,
}

impl Prefetcher {
    /// Starts sampling `batches` (seed lists) with `opts`; batch `i` uses the
    /// seed `batch_seed(opts.seed, i)`. Options are checked here, so a bad
    /// fanout or tensor name is an error now rather than at the first batch.
    pub fn new(store: Arc<Store>, batches: Vec<Vec<u64>>, opts: SampleOptions, cfg: PrefetchOptions) -> Result<Prefetcher> {
        if cfg.workers == 0 || cfg.prefetch == 0 {
            return Err(EngineError::Invalid(format!("workers ({}) and prefetch ({}) must be at least 1", cfg.workers, cfg.prefetch)));
        }
        if cfg.lookahead > MAX_LOOKAHEAD {
            return Err(EngineError::Invalid(format!("lookahead {} is over the limit of {MAX_LOOKAHEAD} batches", cfg.lookahead)));
        }
        check_options(&store, &opts)?;
        // Each batch's most from its seeds' degrees; checks the fanouts
        // are bounded.
        let budget = cfg.buffer_bytes.map(|cap| Budget::new(&store, &batches, &opts, cap).map(Arc::new)).transpose()?;
        let cache_bytes = store.stats().cache.budget;
        let mut p = Prefetcher {
            store,
            batches: Arc::new(batches),
            opts: Arc::new(opts),
            cfg,
            budget,
            cache_bytes,
            pid: std::process::id(),
            next: 0,
            finished: false,
            run: None,
            ended: LoaderStats::default(),
        };
        p.start();
        Ok(p)
    }

    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Batches handed out so far.
    pub fn position(&self) -> usize {
        self.next
    }

    /// Where the pipeline waited so far in this process.
    pub fn stats(&self) -> LoaderStats {
        self.run.as_ref().map_or(self.ended, |r| r.shared.state.locked().stats)
    }

    fn start(&mut self) {
        if self.next >= self.batches.len() {
            return;
        }
        let shared = Arc::new(Shared {
            store: self.store.clone(),
            batches: self.batches.clone(),
            opts: self.opts.clone(),
            prefetch: self.cfg.prefetch,
            lookahead: self.cfg.lookahead,
            budget: self.budget.clone(),
            cancel: AtomicBool::new(false),
            state: Mutex::new(State::new(self.next)),
            room: Condvar::new(),
            ready: Condvar::new(),
        });
        let workers = self.cfg.workers.min(self.batches.len() - self.next);
        self.run = Some(Running::start(shared, workers));
    }

    /// In a forked child: abandon the parent's threads and store (their
    /// locks may be held by threads that do not exist here), reopen the
    /// store and restart at the first batch not yet consumed.
    fn restart_after_fork(&mut self) -> Result<()> {
        std::mem::forget(self.run.take());
        let store = match &self.cfg.reopen {
            Some(f) => f()?,
            None => Arc::new(Store::open(self.store.path(), &OpenOptions { cache_bytes: self.cache_bytes, ..Default::default() })?),
        };
        std::mem::forget(std::mem::replace(&mut self.store, store));
        self.pid = std::process::id();
        if !self.finished {
            self.start();
        }
        Ok(())
    }

    /// The next batch in order, `None` after the last (or after an error).
    /// Blocks until the batch is ready.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Sample>> {
        if self.pid != std::process::id()
            && let Err(e) = self.restart_after_fork()
        {
            self.finished = true;
            return Some(Err(e));
        }
        if self.finished || self.next >= self.batches.len() {
            self.finish();
            return None;
        }
        let run = self.run.as_ref().expect("running while batches remain");
        let sh = &run.shared;
        let i = self.next;
        let r = {
            let t = std::time::Instant::now();
            let mut st = sh.state.locked();
            let r = loop {
                if let Some(r) = st.done.remove(&i) {
                    break r;
                }
                st = sh.ready.wait_locked(st);
            };
            st.stats.consumer_wait_ns += t.elapsed().as_nanos() as u64;
            r
        };
        {
            let mut st = sh.state.locked();
            st.consumed = i + 1;
            if let Some(b) = &sh.budget {
                // Python holds it now; the oldest batch it held is gone.
                st.gathered_n -= 1;
                st.handed.push_back(r.as_ref().map_or(0, |s| b.gathered(s.node.len(), s.row.len())));
                if st.handed.len() > HANDED_BATCHES as usize {
                    let old = st.handed.pop_front().unwrap_or(0);
                    st.held -= old;
                }
            }
        }
        sh.room.notify_all();
        self.next += 1;
        if r.is_err() || self.next >= self.batches.len() {
            self.finish();
        }
        Some(r)
    }

    fn finish(&mut self) {
        self.finished = true;
        if let Some(run) = self.run.take() {
            self.ended = run.shared.state.locked().stats;
            run.stop();
        }
    }
}

impl Iterator for Prefetcher {
    type Item = Result<Sample>;
    fn next(&mut self) -> Option<Result<Sample>> {
        Prefetcher::next(self)
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // The threads belong to the parent: never join them here.
            std::mem::forget(self.run.take());
            return;
        }
        if let Some(run) = self.run.take() {
            run.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use solidgraph_store::{DType, Direction, EdgeInput, ImportOptions, TensorData, TensorInput, import};

    use super::*;

    fn store(n: u64, in_edges: bool) -> (tempfile::TempDir, Arc<Store>) {
        store_with_rows(n, in_edges, 0)
    }

    /// With a row cache of `row_cache_bytes` (a few rows: evictions happen).
    fn store_with_rows(n: u64, in_edges: bool, row_cache_bytes: u64) -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let src: Vec<u64> = (0..n * 8).map(|i| (i * 7919) % n).collect();
        let dst: Vec<u64> = (0..n * 8).map(|i| (i * 104_729 + 1) % n).collect();
        let x: Vec<u8> = (0..n * 2).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 2, bytes: x } };
        let o = ImportOptions { in_edges, dedup: true, num_nodes: Some(n), ..Default::default() };
        import(&path, &[EdgeInput::Memory { src, dst, weights: None, labels: None }], &[t], &o, &|_, _, _| {}).unwrap();
        let s = Store::open(&path, &OpenOptions { cache_bytes: 1 << 20, row_cache_bytes, ..Default::default() }).unwrap();
        (dir, Arc::new(s))
    }

    fn opts(seed: u64) -> SampleOptions {
        SampleOptions { fanouts: vec![3, 2], direction: Direction::Out, seed, tensors: vec!["x".into()], ..Default::default() }
    }

    fn batches(n: u64, k: usize) -> Vec<Vec<u64>> {
        (0..k).map(|i| (0..16).map(|j| (i as u64 * 16 + j) % n).collect()).collect()
    }

    fn cfg(workers: usize, prefetch: usize, lookahead: usize) -> PrefetchOptions {
        PrefetchOptions { workers, prefetch, lookahead, buffer_bytes: None, reopen: None }
    }

    /// Under any cap, from none to below one batch, the batches are the
    /// same, and the bytes held stay within the cap but for the batches
    /// handed out, one drawn and one gathered (at their most).
    #[test]
    fn buffer_cap_bounds_bytes_held_and_changes_no_batch() {
        let (_d, s) = store_with_rows(500, false, 2048);
        let b = batches(500, 40);
        let want: Vec<Sample> = Prefetcher::new(s.clone(), b.clone(), opts(5), cfg(2, 4, 8)).unwrap().map(|r| r.unwrap()).collect();
        let shape = BatchShape::of(&s, 16, &opts(5)).unwrap();
        let (n, e) = shape.most().unwrap();
        let pass = ahead_bytes(n, e) + gathered_bytes(n, e, shape.row_bytes);
        for cap in [0, 1 << 10, 16 << 10, 64 << 10, 1 << 30] {
            for lookahead in [0, 8] {
                let c = PrefetchOptions { buffer_bytes: Some(cap), ..cfg(2, 4, lookahead) };
                let mut p = Prefetcher::new(s.clone(), b.clone(), opts(5), c).unwrap();
                let mut got = Vec::new();
                while let Some(r) = p.next() {
                    got.push(r.unwrap());
                    std::thread::sleep(Duration::from_millis(2));
                    if let Some(run) = &p.run {
                        let st = run.shared.state.locked();
                        let handed: u64 = st.handed.iter().sum();
                        let whole = if lookahead == 0 { ahead_bytes(n, e) } else { 0 };
                        assert!(st.held + st.drawing <= cap.max(handed) + pass + whole, "cap {cap}: {} held, {} drawing", st.held, st.drawing);
                        if cap == 0 {
                            assert!(st.ahead.len() <= 1 && st.gathered_n <= 1, "cap 0 ran ahead: {} ahead, {} gathered", st.ahead.len(), st.gathered_n);
                        }
                    }
                }
                assert_eq!(got, want, "cap {cap}, lookahead {lookahead}");
                assert_eq!(s.upcoming_rows(), 0);
            }
        }
    }

    #[test]
    fn memory_bound_grows_with_each_knob_and_refuses_unbounded_fanouts() {
        let (_d, s) = store(1000, false);
        let shape = |b: usize, f: Vec<i64>| BatchShape::of(&s, b, &SampleOptions { fanouts: f, ..opts(0) }).unwrap();
        let total = |sh: &BatchShape, c: PrefetchOptions| loader_memory(sh, &c).unwrap().total();
        let base = total(&shape(8, vec![3, 2]), cfg(2, 4, 8));
        assert!(total(&shape(16, vec![3, 2]), cfg(2, 4, 8)) > base);
        assert!(total(&shape(8, vec![4, 2]), cfg(2, 4, 8)) > base);
        assert!(total(&shape(8, vec![3, 2]), cfg(2, 8, 8)) > base);
        assert!(total(&shape(8, vec![3, 2]), cfg(2, 4, 16)) > base);
        assert!(total(&shape(8, vec![3, 2]), PrefetchOptions { buffer_bytes: Some(0), ..cfg(2, 4, 8) }) < base);
        // No more nodes than the graph has, in all and new at each hop.
        let (n, e) = shape(1000, vec![50, 50]).most().unwrap();
        assert_eq!((n, e), (1000, 1000 * 50 + 1000 * 50));
        let e = loader_memory(&shape(8, vec![3, -1]), &cfg(2, 4, 8)).unwrap_err().to_string();
        assert!(e.contains("fanout -1"), "{e}");
    }

    /// Vertex v has v % 6 out-edges: seeds of low degree draw less than
    /// the fanout.
    fn varied_store(n: u64) -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for v in 0..n {
            for j in 0..v % 6 {
                src.push(v);
                dst.push((v * 31 + j * 17 + 1) % n);
            }
        }
        let x: Vec<u8> = (0..n * 2).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 2, bytes: x } };
        let o = ImportOptions { dedup: true, num_nodes: Some(n), ..Default::default() };
        import(&path, &[EdgeInput::Memory { src, dst, weights: None, labels: None }], &[t], &o, &|_, _, _| {}).unwrap();
        let s = Store::open(&path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
        (dir, Arc::new(s))
    }

    /// Every batch sampled, with and without replacement, holds no more
    /// nodes and edges than the bound from its seeds' degrees; the bound
    /// for batches taken from a seed set in any order covers each batch's
    /// own, and is below batch size times the fanouts for low-degree seeds.
    #[test]
    fn batches_stay_within_the_bound_from_their_seeds_degrees() {
        let n = 3000;
        let (_d, s) = varied_store(n);
        for replace in [false, true] {
            let o = SampleOptions { fanouts: vec![4, 3], direction: Direction::Out, replace, tensors: vec!["x".into()], ..Default::default() };
            let b: Vec<Vec<u64>> = (0..30).map(|i| (0..64).map(|j| (i * 97 + j * 41) % n).collect()).collect();
            let all = BatchShape::with_seeds(&s, &b.concat(), 64, &o).unwrap();
            let plain = BatchShape::of(&s, 64, &o).unwrap();
            for (i, seeds) in b.iter().enumerate() {
                let shape = BatchShape::of_batches(&s, std::slice::from_ref(seeds), &o).unwrap();
                assert!(shape.first_draws <= all.first_draws, "batch {i}: {shape:?} over {all:?}");
                let (nodes, edges) = shape.most().unwrap();
                let got = sample_neighbors(&s, seeds, &SampleOptions { seed: i as u64, ..o.clone() }).unwrap();
                assert!(
                    got.node.len() as u64 <= nodes && got.row.len() as u64 <= edges,
                    "batch {i}, replace {replace}: {} nodes, {} edges over {nodes}, {edges}",
                    got.node.len(),
                    got.row.len()
                );
            }
            let got = Prefetcher::new(s.clone(), b.clone(), o.clone(), PrefetchOptions { buffer_bytes: Some(0), ..cfg(2, 2, 4) }).unwrap().count();
            assert_eq!(got, b.len());
            // Degrees 0 and 1 against a fanout of 4: at most one draw a
            // seed without replacement; with it, a non-empty list draws 4.
            let low: Vec<u64> = (0..n).filter(|v| v % 6 < 2).collect();
            let (most_low, most_plain) = (BatchShape::with_seeds(&s, &low, 64, &o).unwrap().most().unwrap(), plain.most().unwrap());
            assert!(most_low.0 <= most_plain.0 && most_low.1 <= most_plain.1, "{most_low:?} vs {most_plain:?}");
            if !replace {
                assert!(most_low.0 * 3 < most_plain.0 && most_low.1 * 3 < most_plain.1, "{most_low:?} vs {most_plain:?}");
            }
        }
    }

    #[test]
    fn budget_splits_into_caches_and_buffers_and_refuses_below_minimum() {
        let (_d, s) = store(1000, false);
        let shape = BatchShape::of(&s, 64, &SampleOptions { fanouts: vec![10, 5], ..opts(0) }).unwrap();
        let c = cfg(2, 4, 32);
        let min = match plan_budget(0, &shape, &c) {
            Err(EngineError::Invalid(m)) => {
                let min: u64 = m.split("minimum of ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
                assert!(m.contains("fanouts [10, 5]"), "{m}");
                min
            }
            r => panic!("a zero budget was not refused: {r:?}"),
        };
        assert!(plan_budget(min - 1, &shape, &c).is_err());
        let mut last: Option<BudgetPlan> = None;
        for budget in [min, min + (1 << 20), min + (64 << 20), 1 << 32] {
            let p = plan_budget(budget, &shape, &c).unwrap();
            assert_eq!(p.minimum, min);
            assert_eq!(p.cache_bytes + p.row_cache_bytes + p.memory.total(), budget, "{p:?}");
            assert!(p.cache_bytes >= MIN_PAGE_CACHE);
            // Buffers never past what the counts hold.
            assert!(p.memory.buffers <= loader_memory(&shape, &c).unwrap().buffers);
            // Every byte above the minimum goes to the caches.
            if let Some(l) = &last {
                assert_eq!(p.buffer_bytes, l.buffer_bytes, "{l:?} -> {p:?}");
                assert!(p.cache_bytes >= l.cache_bytes && p.row_cache_bytes >= l.row_cache_bytes, "{l:?} -> {p:?}");
            }
            last = Some(p);
        }
    }

    #[test]
    fn in_order_and_same_as_direct_calls_whatever_the_workers() {
        // The row cache holds ~40 of 500 rows: lookahead changes what it
        // keeps, never what a batch gets.
        for row_cache in [0, 2048] {
            let (_d, s) = store_with_rows(500, false, row_cache);
            let b = batches(500, 40);
            let want: Vec<Sample> = b
                .iter()
                .enumerate()
                .map(|(i, seeds)| {
                    let mut o = opts(7);
                    o.seed = batch_seed(7, i as u64);
                    sample_neighbors(&s, seeds, &o).unwrap()
                })
                .collect();
            for (workers, prefetch, lookahead) in [(1, 1, 0), (2, 4, 0), (4, 2, 0), (3, 16, 0), (1, 1, 1), (2, 4, 3), (4, 2, 16), (3, 16, 8), (2, 1, 256)] {
                let p = Prefetcher::new(s.clone(), b.clone(), opts(7), cfg(workers, prefetch, lookahead)).unwrap();
                let got: Vec<Sample> = p.map(|r| r.unwrap()).collect();
                assert_eq!(got, want, "workers {workers}, prefetch {prefetch}, lookahead {lookahead}, row cache {row_cache}");
                assert_eq!(s.upcoming_rows(), 0, "rows still upcoming after the epoch");
            }
        }
    }

    /// A row cache far smaller than the rows sampled ahead is where an
    /// eviction could scan the upcoming rows. From no row cache to more
    /// than the working set, the batches are the same, the eviction hand's
    /// work stays linear (each visit past an eviction's first clears a bit
    /// that a hit or an announced row set; every announced row is gathered
    /// once, so announced <= hits + misses), and a cache that holds every
    /// row misses each row at most once.
    #[test]
    fn row_cache_sweep_same_batches_and_linear_eviction_work() {
        let n = 2000;
        let b = batches(n, 60);
        let rows_asked: std::collections::HashSet<u64> = b.iter().flatten().copied().collect();
        let mut want: Option<Vec<Sample>> = None;
        for row_cache in [0, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 1 << 20] {
            let (_d, s) = store_with_rows(n, false, row_cache);
            s.wait_warm();
            s.reset_stats();
            let p = Prefetcher::new(s.clone(), b.clone(), opts(3), cfg(2, 4, 32)).unwrap();
            let got: Vec<Sample> = p.map(|r| r.unwrap()).collect();
            match &want {
                None => want = Some(got),
                Some(w) => assert_eq!(&got, w, "row cache {row_cache} changed the batches"),
            }
            let Some(rc) = s.stats().rows else { continue };
            assert!(rc.hand_steps <= rc.evictions + 2 * rc.hits + rc.misses, "row cache {row_cache}: the hand scanned: {rc:?}");
            if row_cache == 1 << 20 {
                let touched = got_rows(want.as_ref().unwrap());
                assert!(touched >= rows_asked.len() as u64);
                assert!(rc.misses <= touched, "a cache holding every row missed some twice: {rc:?}, {touched} rows");
                assert_eq!(rc.evictions, 0, "{rc:?}");
            }
        }
    }

    /// Distinct vertices whose rows an epoch gathers.
    fn got_rows(samples: &[Sample]) -> u64 {
        samples.iter().flat_map(|s| s.node.iter().copied()).collect::<std::collections::HashSet<u64>>().len() as u64
    }

    /// A draw reserves each batch's own most: a group of small batches
    /// fits where the epoch's largest would not, and the consumer's next
    /// batch is drawn even when it alone passes the cap.
    #[test]
    fn draws_reserve_each_batchs_own_most() {
        let b = Budget { cap: 10, row_bytes: 0, ahead_most: vec![8, 2, 2, 2, 9, 1], gathered_most: vec![0; 6] };
        let mut st = State::new(0);
        assert_eq!(st.fit_draw(Some(&b), 1, 4), 3, "2 + 2 + 2 + 9 passes 10 at the fourth");
        assert_eq!(st.fit_draw(Some(&b), 1, 3), 3);
        assert_eq!(st.fit_draw(Some(&b), 0, 2), 2);
        st.held = 9;
        assert_eq!(st.fit_draw(Some(&b), 5, 1), 1);
        assert_eq!(st.fit_draw(Some(&b), 4, 2), 1, "nothing ahead: the next batch comes");
        st.pending = 1;
        assert_eq!(st.fit_draw(Some(&b), 4, 2), 0);
        assert_eq!(st.fit_draw(None, 4, 2), 2);
    }

    /// In the varied store, a batch of low-degree seeds reserves less than
    /// one of high-degree seeds, and each at least what it samples.
    #[test]
    fn budget_reserves_per_batch_from_seed_degrees() {
        let n = 3000;
        let (_d, s) = varied_store(n);
        let o = SampleOptions { fanouts: vec![4, 3], direction: Direction::Out, tensors: vec!["x".into()], ..Default::default() };
        let low: Vec<u64> = (0..n).filter(|v| v % 6 < 2).take(64).collect();
        let high: Vec<u64> = (0..n).filter(|v| v % 6 == 5).take(64).collect();
        let b = Budget::new(&s, &[low.clone(), high.clone()], &o, 0).unwrap();
        assert!(b.ahead_most[0] * 3 < b.ahead_most[1] && b.gathered_most[0] * 3 < b.gathered_most[1], "{:?} {:?}", b.ahead_most, b.gathered_most);
        for (i, seeds) in [low, high].iter().enumerate() {
            let got = sample_neighbors(&s, seeds, &o).unwrap();
            assert!(ahead_bytes(got.node.len() as u64, got.row.len() as u64) <= b.ahead_most[i]);
            assert!(b.gathered(got.node.len(), got.row.len()) <= b.gathered_most[i]);
        }
    }

    #[test]
    fn window_bounds_the_work_ahead() {
        for lookahead in [0, 5] {
            let (_d, s) = store(500, false);
            let mut p = Prefetcher::new(s, batches(500, 50), opts(1), cfg(3, 2, lookahead)).unwrap();
            p.next().unwrap().unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let st = p.run.as_ref().unwrap().shared.state.locked();
            assert!(st.next_draw <= 1 + 2 + lookahead, "sampled {} with 1 consumed, prefetch 2, lookahead {lookahead}", st.next_draw);
            assert!(st.done.len() <= 2 && st.pending <= lookahead && st.ahead.len() <= st.pending);
            if lookahead > 0 {
                // Groups of lookahead / 2 are sampled while there is room for one.
                assert!(st.next_draw > 1 + 2 + lookahead - lookahead / 2, "sampling did not run ahead: {}", st.next_draw);
            }
        }
    }

    #[test]
    fn rows_sampled_ahead_are_upcoming_until_gathered_or_dropped() {
        let (_d, s) = store_with_rows(500, false, 4096);
        let mut p = Prefetcher::new(s.clone(), batches(500, 50), opts(1), cfg(2, 1, 6)).unwrap();
        p.next().unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let ahead: usize = {
            let st = p.run.as_ref().unwrap().shared.state.locked();
            assert!(st.ahead.len() > 6 - 6 / 2, "{} sampled ahead", st.ahead.len());
            st.ahead.values().map(|a| a.sub.nodes().len()).sum()
        };
        assert_eq!(s.upcoming_rows(), ahead);
        drop(p);
        assert_eq!(s.upcoming_rows(), 0, "a dropped loader left rows upcoming");
    }

    #[test]
    fn errors_reach_the_consumer_in_place_and_end_the_epoch() {
        let (_d, s) = store_with_rows(100, false, 4096);
        for lookahead in [0, 1, 4, 16] {
            let mut b = batches(100, 10);
            b[3] = vec![5, 100]; // out of range
            let mut p = Prefetcher::new(s.clone(), b, opts(0), cfg(2, 4, lookahead)).unwrap();
            for _ in 0..3 {
                p.next().unwrap().unwrap();
            }
            let e = p.next().unwrap().unwrap_err();
            assert!(e.to_string().contains("seed 100 is not in the graph"), "{e}");
            assert!(p.next().is_none());
            drop(p);
            assert_eq!(s.upcoming_rows(), 0, "batches sampled past the error left rows upcoming");
            // Empty seed lists too.
            let mut p = Prefetcher::new(s.clone(), vec![vec![]], opts(0), cfg(2, 4, lookahead)).unwrap();
            assert!(p.next().unwrap().unwrap_err().to_string().contains("empty seed list"));
        }
    }

    #[test]
    fn bad_options_fail_at_creation() {
        let (_d, s) = store(100, false);
        let mk = |o: SampleOptions| Prefetcher::new(s.clone(), batches(100, 2), o, PrefetchOptions::default()).err().unwrap().to_string();
        assert!(mk(SampleOptions { fanouts: vec![0], ..opts(0) }).contains("fanout 0"));
        assert!(mk(SampleOptions { fanouts: vec![1 << 40], ..opts(0) }).contains("fanout"));
        assert!(mk(SampleOptions { tensors: vec!["nope".into()], ..opts(0) }).contains("no tensor named"));
        assert!(mk(SampleOptions { direction: Direction::In, ..opts(0) }).contains("no in edges"));
        assert!(mk(SampleOptions { weighted: true, ..opts(0) }).contains("edge weights"));
        let e = Prefetcher::new(s.clone(), batches(100, 2), opts(0), PrefetchOptions { workers: 0, ..Default::default() });
        assert!(e.is_err());
        let e = Prefetcher::new(s.clone(), batches(100, 2), opts(0), cfg(2, 4, MAX_LOOKAHEAD + 1)).err().unwrap().to_string();
        assert!(e.contains("lookahead"), "{e}");
    }

    #[test]
    fn drop_stops_the_workers_quickly() {
        let (_d, s) = store(2000, true);
        let b: Vec<Vec<u64>> = (0..10_000).map(|i| vec![i % 2000]).collect();
        let mut p = Prefetcher::new(s.clone(), b, opts(3), cfg(2, 8, 16)).unwrap();
        p.next().unwrap().unwrap();
        let t = Instant::now();
        drop(p);
        assert!(t.elapsed() < Duration::from_secs(1));
        // Workers held the store; after the join only our handle is left.
        assert_eq!(Arc::strong_count(&s), 1);
    }

    #[test]
    fn empty_epoch() {
        let (_d, s) = store(10, false);
        let mut p = Prefetcher::new(s, vec![], opts(0), PrefetchOptions::default()).unwrap();
        assert!(p.is_empty() && p.next().is_none() && p.next().is_none());
    }
}
