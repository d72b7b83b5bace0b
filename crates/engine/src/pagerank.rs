//! PageRank as LDBC Graphalytics defines it: fixed iterations (or an L1
//! tolerance), each one sequential pass over the lists; the rank of dangling
//! vertices (no out-edges) is spread over all vertices.
//!
//! The first iteration pushes each vertex's rank over its out-edges and
//! records the out-degrees. Later ones pull: a vertex's new rank is the sum
//! of its in-neighbors' rank/out-degree, read from its in-list (the out-list
//! of an undirected store), so chunks are summed on both cores without
//! sharing a write; a push spreads over the cores by giving each a part of
//! the ranks to write. Each vertex sums its list in a fixed order (an
//! extent page by page) and whole-graph sums add fixed parts (chunks, cut by
//! the store's pages) in order, so ranks do not depend on the thread count.
//! A directed store without in-edges pushes every iteration.
//!
//! An undirected store with lower lists (`Direction::Lower`: each vertex's
//! neighbors up to itself, every edge once) is read through them instead,
//! half the bytes per pass (`lower_pagerank`): a lower list of u adds the
//! shares of its neighbors to u (as a pull) and u's share to each of them
//! (a push). Pushes land anywhere below u, so they are summed in fixed
//! point (`Sums`), where adding in any order gives the same bits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;
use solidgraph_io::sync::MutexExt;
use solidgraph_store::{Direction, Store};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::{AHEAD, Frontier, Lists, prefetch};
use crate::state;

#[derive(Debug, Clone)]
pub struct PageRank {
    pub ranks: Vec<f64>,
    pub iterations: u32,
}

/// Vertices per part of a whole-graph sum.
const PART: usize = 1 << 16;

/// Asks the progress hook whether to go on, between a pass's batches.
type Check<'a> = &'a (dyn Fn() -> Result<()> + Sync);

/// Runs `iterations` iterations, or stops earlier once the L1 change of an
/// iteration falls below `tol`.
pub fn pagerank(store: &Store, damping: f64, iterations: u32, tol: Option<f64>, progress: Progress) -> Result<PageRank> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    if !(damping > 0.0 && damping < 1.0) {
        return Err(EngineError::Invalid(format!("damping {damping} must be in (0, 1)")));
    }
    if tol.is_some_and(|t| t.is_nan() || t <= 0.0) {
        return Err(EngineError::Invalid("tolerance must be positive".into()));
    }
    crate::check_iterations(iterations)?;
    state::reserve("PageRank", store, 28, 0)?;
    if store.has_lower_lists() {
        return lower_pagerank(store, damping, iterations, tol, progress);
    }
    let n = store.num_nodes() as usize;
    let nf = n as f64;
    let out = Lists::new(store, Direction::Out, false)?;
    let pull = if !store.directed() {
        Some(Lists::new(store, Direction::Out, false)?)
    } else if store.gtt(Direction::In).is_ok() {
        Some(Lists::new(store, Direction::In, false)?)
    } else {
        None
    };
    // The push's parts of the ranks, by the edges that land in them.
    let cuts = pull.as_ref().unwrap_or(&out).edge_cuts(rayon::current_num_threads());
    let mut pr = state::filled(n, 1.0 / nf);
    let mut next = state::filled(n, 0.0f64);
    // Out-degrees, recorded by the first (push) iteration when later ones pull.
    let mut deg: Vec<u32> = if pull.is_some() { state::filled(n, 0) } else { Vec::new() };
    // Between pulls `pr` holds shares (rank / out-degree) and this the rank
    // of the dangling vertices.
    let mut dangling = 0.0;
    let mut done = 0;
    while done < iterations {
        let last = done + 1 == iterations;
        let at = done as u64;
        let check = move || Ok(progress("pagerank", at, iterations as u64)?);
        let delta = match &pull {
            Some(lists) if done > 0 => {
                let (delta, d) = pull_iteration(lists, damping, &pr, &deg, dangling, last, &mut next, &check)?;
                dangling = d;
                delta
            }
            _ => push_iteration(&out, &cuts, damping, &pr, &mut deg, &mut next, &check)?,
        };
        std::mem::swap(&mut pr, &mut next);
        done += 1;
        progress("pagerank", done as u64, iterations as u64)?;
        let stop = last || tol.is_some_and(|t| delta < t);
        if pull.is_some() {
            if done == 1 && !stop {
                dangling = to_shares(&mut pr, &deg);
            } else if done > 1 && stop && !last {
                to_ranks(&mut pr, &deg);
            }
        }
        if stop {
            break;
        }
    }
    // Read buffers too: the reindex below holds two rank arrays.
    drop((out, pull, next, deg));
    Ok(PageRank { ranks: state::by_external(store, pr, |x| x)?, iterations: done })
}

/// One iteration pushing `pr` over the out-lists into `next`, in id order;
/// records out-degrees into `deg` unless it is empty. Returns the L1 change.
/// Each core owns a part of `next` (`cuts`: equal shares of the edges, not
/// of the ids, whose first few hold most edges) and applies the batch's
/// edges into it: every rank receives its shares in the same order for any
/// thread count.
fn push_iteration(out: &Lists, cuts: &[u64], damping: f64, pr: &[f64], deg: &mut [u32], next: &mut [f64], check: Check) -> Result<f64> {
    let nf = pr.len() as f64;
    next.iter_mut().for_each(|x| *x = 0.0);
    let mut dangling = 0.0f64;
    let record = !deg.is_empty();
    let mut parts: Vec<(u64, &mut [f64])> = Vec::with_capacity(cuts.len());
    let mut rest = &mut *next;
    for w in cuts.windows(2) {
        let (mine, tail) = rest.split_at_mut((w[1] - w[0]) as usize);
        parts.push((w[0], mine));
        rest = tail;
    }
    out.try_batches(Frontier::All, |b| {
        parts.par_iter_mut().for_each(|(lo, mine)| {
            let lo = *lo;
            for i in 0..b.len() {
                let (v, nbrs, _) = b.get(i);
                if nbrs.is_empty() {
                    continue;
                }
                let share = pr[v as usize] / nbrs.len() as f64;
                for &u in nbrs {
                    if let Some(x) = u.checked_sub(lo).and_then(|o| mine.get_mut(o as usize)) {
                        *x += share;
                    }
                }
            }
        });
        for i in 0..b.len() {
            let (v, nbrs, _) = b.get(i);
            if record {
                deg[v as usize] = nbrs.len() as u32;
            }
            if nbrs.is_empty() {
                dangling += pr[v as usize];
            }
        }
        check()
    })?;
    let base = (1.0 - damping) / nf + damping * dangling / nf;
    next.iter_mut().for_each(|x| *x = base + damping * *x);
    Ok(next.iter().zip(pr).map(|(x, p)| (x - p).abs()).sum())
}

/// One iteration pulling over in-lists into `next`. `share` holds rank /
/// out-degree (the rank itself for dangling vertices, which are in no
/// in-list), `dangling` the dangling vertices' rank. A chunk is summed and
/// its ranks finished on one thread, while they are in cache: their change
/// is added up, and unless this is the `last` iteration they become shares
/// for the next one. Returns the L1 change and the new dangling rank, added
/// up in chunk order.
// One iteration's inputs, each a different array or scalar of the loop.
#[allow(clippy::too_many_arguments)]
fn pull_iteration(lists: &Lists, damping: f64, share: &[f64], deg: &[u32], dangling: f64, last: bool, next: &mut [f64], check: Check) -> Result<(f64, f64)> {
    let nf = share.len() as f64;
    let base = (1.0 - damping) / nf + damping * dangling / nf;
    let next = Ranges::new(next);
    let parts = lists.chunks(|c| {
        check()?;
        let (lo, hi) = c.range();
        let (lo, hi) = (lo as usize, hi as usize);
        // SAFETY: `Lists::chunks` hands out disjoint ranges.
        let next = unsafe { next.get(lo, hi) };
        // An extent's pages add their parts of one list in page order.
        next.fill(0.0);
        c.for_each_list(|v, ids, a, end| next[v as usize - lo] += gather_sum(share, ids, a, end))?;
        let (mut delta, mut dangling) = (0.0, 0.0);
        for ((x, &s), &d) in next.iter_mut().zip(&share[lo..hi]).zip(&deg[lo..hi]) {
            let r = base + damping * *x;
            if d == 0 {
                delta += (r - s).abs();
                dangling += r;
                *x = r;
            } else {
                delta += (r - s * d as f64).abs();
                *x = if last { r } else { r / d as f64 };
            }
        }
        Ok((delta, dangling))
    })?;
    Ok(parts.iter().fold((0.0, 0.0), |(d, g), &(x, y)| (d + x, g + y)))
}

/// A rank array written by tasks, each in its own vertex range.
struct Ranges<'a> {
    ptr: *mut f64,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [f64]>,
}

// SAFETY: tasks touch disjoint ranges (`get`'s contract).
unsafe impl Send for Ranges<'_> {}
unsafe impl Sync for Ranges<'_> {}

impl<'a> Ranges<'a> {
    fn new(x: &'a mut [f64]) -> Self {
        Ranges { ptr: x.as_mut_ptr(), len: x.len(), _borrow: std::marker::PhantomData }
    }

    /// SAFETY: no two slices alive at once may overlap.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self, lo: usize, hi: usize) -> &mut [f64] {
        assert!(lo <= hi && hi <= self.len, "range [{lo}, {hi}) outside {} ranks", self.len);
        // SAFETY: in bounds (asserted), borrowed for 'a, disjoint by contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(lo), hi - lo) }
    }
}

/// Turns ranks into shares (rank / out-degree) for a pull; returns the rank
/// of the dangling vertices, which keep theirs.
fn to_shares(pr: &mut [f64], deg: &[u32]) -> f64 {
    let parts: Vec<f64> = pr
        .par_chunks_mut(PART)
        .zip(deg.par_chunks(PART))
        .map(|(p, d)| {
            let mut dangling = 0.0;
            for (p, &d) in p.iter_mut().zip(d) {
                if d == 0 {
                    dangling += *p;
                } else {
                    *p /= d as f64;
                }
            }
            dangling
        })
        .collect();
    parts.iter().sum()
}

/// Shares back to ranks, when a pull that made shares turned out to be the
/// last one (the tolerance was reached).
fn to_ranks(pr: &mut [f64], deg: &[u32]) {
    pr.par_chunks_mut(PART).zip(deg.par_chunks(PART)).for_each(|(p, d)| {
        p.iter_mut().zip(d).filter(|x| *x.1 > 0).for_each(|(p, &d)| *p *= d as f64);
    });
}

/// Sum of `share[u]` over `ids[a..b]`. The prefetch looks past `b` into the
/// lists that follow (a page's lists lie back to back), and four partial
/// sums keep the adds of a long list from waiting on each other (one
/// accumulator makes every add wait for the one before).
#[inline]
fn gather_sum(share: &[f64], ids: &[u64], a: usize, b: usize) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut k = a;
    while k + 4 <= b {
        for (j, x) in acc.iter_mut().enumerate() {
            prefetch(share, ids, k + j + AHEAD);
            *x += share[ids[k + j] as usize];
        }
        k += 4;
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for k in k..b {
        prefetch(share, ids, k + AHEAD);
        s += share[ids[k] as usize];
    }
    s
}

/// Fixed-point scale of `Sums`: 62 fraction bits. A rank sums its parts to
/// at most 1 (all ranks sum to 1), so 4 is never reached; each part rounds
/// by at most 2^-63, far below a rank's least value (1 - damping) / n.
const SCALE: f64 = (1u64 << 62) as f64;

/// `x` (not negative) in fixed point, rounded (`f64::round` is a libm call).
fn fixed(x: f64) -> u64 {
    (x * SCALE + 0.5) as u64
}

/// Per-vertex sums of a pass over lower lists, added from both cores into
/// any vertex below the list's own. The first `HUBS` vertices (in a
/// degree-ordered store, the hubs most lists point at) get a table per
/// thread holding each one's share next to its sum, so a list entry costs
/// one cache line, and atomic adds do not make the cores fight over the
/// hubs' lines. The rest are added atomically, in integers, so the sums do
/// not depend on which thread adds what, or when.
struct Sums {
    shared: Vec<AtomicU64>,
    /// Per thread: (share, sum) of the first vertices.
    hubs: Vec<Mutex<Vec<(f64, u64)>>>,
}

/// Vertices with per-thread sums: 16 MiB per thread.
const HUBS: usize = 1 << 20;

impl Sums {
    fn new(n: usize) -> Sums {
        let threads = rayon::current_num_threads();
        Sums { shared: state::from_fn(n, |_| AtomicU64::new(0)), hubs: (0..threads).map(|_| Mutex::new(state::filled(n.min(HUBS), (0.0, 0)))).collect() }
    }

    /// One pass over the lower lists: adds u's share (rank / degree) to
    /// every neighbor below u and the neighbors' shares to u, in fixed
    /// point.
    fn pass(&mut self, lists: &Lists, share: &[f64], check: Check) -> Result<()> {
        for h in &mut self.hubs {
            let h = h.get_mut_locked();
            h.par_iter_mut().zip(share.par_iter()).for_each(|(h, &s)| h.0 = s);
        }
        let this = &*self;
        lists.chunks(|c| {
            check()?;
            let t = rayon::current_thread_index().unwrap_or(0) % this.hubs.len();
            let mut hubs = this.hubs[t].locked();
            let hubs = &mut hubs[..];
            let shared = &this.shared[..];
            let list = |u: u64, ids: &[u64], a: usize, end: usize| {
                // Sorted ascending and at most u: self-loops come last (an
                // edge to u is u's own once), and the hubs first.
                let e = a + ids[a..end].partition_point(|&v| v < u);
                let p = a + ids[a..e].partition_point(|&v| (v as usize) < hubs.len());
                let x = fixed(share[u as usize]);
                // Two sums in registers, so adds do not all wait for the
                // one before.
                let (mut g0, mut g1) = (0.0f64, 0.0f64);
                let mut k = a;
                while k + 2 <= p {
                    prefetch(hubs, ids, k + AHEAD);
                    prefetch(hubs, ids, k + 1 + AHEAD);
                    let h = &mut hubs[ids[k] as usize];
                    g0 += h.0;
                    h.1 += x;
                    let h = &mut hubs[ids[k + 1] as usize];
                    g1 += h.0;
                    h.1 += x;
                    k += 2;
                }
                if k < p {
                    let h = &mut hubs[ids[k] as usize];
                    g0 += h.0;
                    h.1 += x;
                }
                for k in p..e {
                    prefetch(share, ids, k + AHEAD);
                    prefetch(shared, ids, k + AHEAD);
                    let v = ids[k] as usize;
                    g1 += share[v];
                    shared[v].fetch_add(x, Relaxed);
                }
                for _ in e..end {
                    g0 += share[u as usize];
                }
                let own = fixed(g0 + g1);
                match hubs.get_mut(u as usize) {
                    Some(h) => h.1 += own,
                    None => {
                        shared[u as usize].fetch_add(own, Relaxed);
                    }
                }
            };
            c.for_each_list(list)
        })?;
        Ok(())
    }

    /// Calls `f(first vertex, sums)` for parts of the vertices in order, on
    /// all cores; `f` takes each sum (leaving 0 for the next pass). Returns
    /// `f`'s results in order.
    fn drain<R: Send>(&mut self, f: impl Fn(usize, &mut [AtomicU64]) -> R + Sync) -> Vec<R> {
        let shared = &mut self.shared;
        for h in &mut self.hubs {
            let h = h.get_mut_locked();
            shared.par_iter_mut().zip(h.par_iter_mut()).for_each(|(s, h)| *s.get_mut() = s.get_mut().wrapping_add(std::mem::take(&mut h.1)));
        }
        shared.par_chunks_mut(PART).enumerate().map(|(k, part)| f(k * PART, part)).collect()
    }
}

/// PageRank over the lower lists of an undirected store: the degrees come
/// from the import's table, then each iteration is one pass adding rank /
/// degree both ways.
fn lower_pagerank(store: &Store, damping: f64, iterations: u32, tol: Option<f64>, progress: Progress) -> Result<PageRank> {
    let n = store.num_nodes() as usize;
    let nf = n as f64;
    let deg = store.lower_degrees()?.ok_or_else(|| EngineError::Invalid("the lower lists went away (a merge)".into()))?;
    let lists = Lists::new(store, Direction::Lower, false)?;
    let mut sums = Sums::new(n);
    // `share` holds rank / degree between passes (the rank itself for
    // vertices without edges, which no list names).
    let mut share = state::filled(n, 1.0 / nf);
    let mut dangling = to_shares(&mut share, &deg);
    let mut done = 0;
    while done < iterations {
        let last = done + 1 == iterations;
        let at = done as u64;
        sums.pass(&lists, &share, &move || Ok(progress("pagerank", at, iterations as u64)?))?;
        let base = (1.0 - damping) / nf + damping * dangling / nf;
        let out = Ranges::new(&mut share);
        let deg = &deg;
        let parts = sums.drain(|lo, s| {
            // SAFETY: `drain` hands out disjoint parts.
            let share = unsafe { out.get(lo, lo + s.len()) };
            let (mut delta, mut dangling) = (0.0, 0.0);
            let deg = &deg[lo..lo + s.len()];
            for ((x, sum), &d) in share.iter_mut().zip(s.iter_mut()).zip(deg) {
                let r = base + damping * (std::mem::take(sum.get_mut()) as f64 / SCALE);
                if d == 0 {
                    delta += (r - *x).abs();
                    dangling += r;
                    *x = r;
                } else {
                    delta += (r - *x * d as f64).abs();
                    *x = if last { r } else { r / d as f64 };
                }
            }
            (delta, dangling)
        });
        let (delta, d) = parts.iter().fold((0.0, 0.0), |(a, b), &(x, y)| (a + x, b + y));
        dangling = d;
        done += 1;
        progress("pagerank", done as u64, iterations as u64)?;
        if last || tol.is_some_and(|t| delta < t) {
            if !last {
                to_ranks(&mut share, deg);
            }
            break;
        }
    }
    drop((lists, sums, deg));
    Ok(PageRank { ranks: state::by_external(store, share, |x| x)?, iterations: done })
}
