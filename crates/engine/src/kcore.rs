//! k-core decomposition (core number of every vertex) by iterated h-indices,
//! as SemiCore* (Wen et al., "I/O efficient core graph decomposition at web
//! scale", ICDE 2016) runs it with the graph on disk and O(n) memory: every
//! vertex starts at its degree and is repeatedly set to the h-index of its
//! neighbors' values (the largest h such that h of them are >= h). Values
//! only fall, never below the core number, and settle exactly on it.
//!
//! Peeling instead needs one pass per bin, each touching chunks all over the
//! store, and reads the store many times over. Here
//! `support[v]` counts v's neighbors whose value is >= v's own; a vertex is
//! read again only once that falls below its value, i.e. only when it will
//! fall. After the degree scan and one full round, rounds are bitset
//! frontiers: the high-degree vertices of the dense core fall slowly, so
//! the next few rounds still read most of the store, then the rounds turn
//! into small selective reads, and the store is read far fewer times than
//! peeling reads it. A batch's values are computed on all cores from the
//! values at its start and applied together, then its falls update
//! neighbors' support on all cores; a vertex woken that the reader has not yet passed is
//! computed in the same round. State: two u32 per vertex and three bitsets.
//!
//! With the whole store in the page cache a read costs no I/O, and the
//! rounds' cost is the CPU of decoding lists and recomputing h-indices
//! (hubs' in every round): then `peel` reads every list exactly once.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use rayon::prelude::*;
use solidgraph_store::Store;

use crate::error::{EngineError, Progress, Result};
use crate::frontier::{AHEAD, Batch, Bitset, Frontier, Lists, prefetch};
use crate::state;

pub fn kcore(store: &Store, progress: Progress) -> Result<Vec<u32>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    state::reserve("k-core", store, 9, 0)?;
    let n = store.num_nodes();
    if n > u32::MAX as u64 {
        return Err(EngineError::Unsupported(format!("k-core supports up to 2^32 vertices; this graph has {n}")));
    }
    let lists = Lists::both(store, "k-core")?;
    // Degree = distinct neighbors other than the vertex itself.
    let mut core = state::filled(n as usize, 0u32);
    lists.try_batches(Frontier::All, |b| {
        let deg = per_vertex(b, |_, v, list, tmp| (distinct(v, sorted(list, tmp)).count() as u32, 0));
        for (i, (d, _)) in deg.into_iter().enumerate() {
            core[b.get(i).0 as usize] = d;
        }
        Ok(progress("k-core", 0, n)?)
    })?;
    if lists.cached() && n < u64::from(REMOVED) {
        let core = peel(&lists, core, progress)?;
        drop(lists);
        return state::by_external(store, core, |x| x);
    }
    // Every vertex with neighbors is computed once; vertices without are 0
    // already and never change. Until computed, support is an upper bound
    // (the degree), so it cannot underflow while neighbors fall.
    let support: Vec<AtomicU32> = state::from_fn(core.len(), |v| AtomicU32::new(core[v]));
    let mut active = Bitset::new(n);
    for (v, &d) in core.iter().enumerate() {
        if d > 0 {
            active.insert(v as u64);
        }
    }
    let mut done = Bitset::new(n);
    let mut next = Bitset::new(n);
    progress("k-core", n - active.len(), n)?;
    while !active.is_empty() {
        // A vertex whose support fell below its value is computed again:
        // in this round if it is still due or not yet planned (the round
        // then sees the fall at once), else in the next.
        let wake = |u: u64| {
            if done.contains(u) {
                next.insert(u);
            } else if !active.contains(u) {
                active.insert(u);
                if u < lists.planned() {
                    next.insert(u);
                }
            }
        };
        lists.try_batches(Frontier::Set(&active), |b| {
            let new = per_vertex(b, |cnt, v, list, tmp| {
                let s = sorted(list, tmp);
                h_index(
                    core[v as usize],
                    distinct(v, s).map(|(i, u)| {
                        prefetch(&core, s, i + AHEAD);
                        core[u as usize]
                    }),
                    cnt,
                )
            });
            // All of the batch's values change first: a vertex's support
            // counted its batch neighbors at their values before the batch,
            // so their falls are checked against its new value below.
            let mut fell: Vec<(usize, u32)> = Vec::new();
            for (i, (h, s)) in new.into_iter().enumerate() {
                let v = b.get(i).0;
                done.insert(v);
                support[v as usize].store(s, Relaxed);
                if h < core[v as usize] {
                    fell.push((i, core[v as usize]));
                    core[v as usize] = h;
                }
            }
            let core = &core;
            fell.par_iter().with_min_len(64).for_each_init(Vec::new, |tmp, &(i, old)| {
                let (v, list, _) = b.get(i);
                let h = core[v as usize];
                // v no longer supports neighbors at values in (h, old].
                let s = sorted(list, tmp);
                for (i, u) in distinct(v, s) {
                    prefetch(core, s, i + AHEAD);
                    let c = core[u as usize];
                    if h < c && c <= old && support[u as usize].fetch_sub(1, Relaxed) - 1 < c {
                        wake(u);
                    }
                }
            });
            Ok(progress("k-core", n - active.len(), n)?)
        })?;
        std::mem::swap(&mut active, &mut next);
        next.clear();
        done.clear();
        progress("k-core", n - active.len(), n)?;
    }
    // Read buffers too: the reindex below holds two result arrays.
    drop((lists, active, next, done, support));
    state::by_external(store, core, |x| x)
}

/// Marks a vertex's value as final in `peel`: above every degree there.
const REMOVED: u32 = 1 << 31;

/// Batagelj-Zaversnik's peeling by levels, each level's vertices in rounds
/// (as ParK and PKC run it in parallel): at level k every remaining vertex
/// of degree <= k gets core k and its list is read once to lower its
/// remaining neighbors' degrees; a neighbor that falls from k + 1 to k
/// joins the next round of the same level. Every list is read exactly once
/// (SemiCore* reads the store about five times and recomputes hubs' h-indices
/// in every round), in selective batches: the store must be cached, which
/// is when this runs. `deg` holds each vertex's distinct neighbors other
/// than itself. State: a u32 per vertex for the degree (with `REMOVED` and
/// then the core number), a u32 per vertex for the remaining ids, two
/// bitsets.
fn peel(lists: &Lists, deg: Vec<u32>, progress: Progress) -> Result<Vec<u32>> {
    let n = deg.len() as u64;
    // In place: the same allocation, as atomics.
    let deg: Vec<AtomicU32> = deg.into_iter().map(AtomicU32::new).collect();
    let mut remaining: Vec<u32> = (0..n as u32).into_par_iter().filter(|&v| deg[v as usize].load(Relaxed) > 0).collect();
    let zero = n - remaining.len() as u64;
    deg.par_iter().filter(|d| d.load(Relaxed) == 0).for_each(|d| d.store(REMOVED, Relaxed));
    let (mut front, mut next) = (Bitset::new(n), Bitset::new(n));
    let mut done = zero;
    let mut k = 0u32;
    while let Some(min) = remaining.par_iter().map(|&v| deg[v as usize].load(Relaxed)).min() {
        k = k.max(min);
        debug_assert!(k < REMOVED, "degrees stay below 2^31");
        remaining.par_iter().filter(|&&v| deg[v as usize].load(Relaxed) <= k).for_each(|&v| front.insert(u64::from(v)));
        while !front.is_empty() {
            lists.try_batches(Frontier::Set(&front), |b| {
                for i in 0..b.len() {
                    deg[b.get(i).0 as usize].store(k | REMOVED, Relaxed);
                }
                let next = &next;
                (0..b.len()).into_par_iter().with_min_len(64).for_each_init(Vec::new, |tmp, i| {
                    let (v, list, _) = b.get(i);
                    let s = sorted(list, tmp);
                    for (i, u) in distinct(v, s) {
                        prefetch(&deg, s, i + AHEAD);
                        let d = &deg[u as usize];
                        // Exactly one decrement passes k + 1: it wakes u.
                        if d.load(Relaxed) & REMOVED == 0 && d.fetch_sub(1, Relaxed) == k + 1 {
                            next.insert(u);
                        }
                    }
                });
                done += b.len() as u64;
                Ok(progress("k-core", done, n)?)
            })?;
            std::mem::swap(&mut front, &mut next);
            next.clear();
        }
        // In place: a second array would hold up to 4 B a vertex more.
        remaining.retain(|&v| deg[v as usize].load(Relaxed) & REMOVED == 0);
    }
    assert_eq!(done, n, "peeling settles every vertex once");
    Ok(deg.into_iter().map(|d| d.into_inner() & !REMOVED).collect())
}

/// `f(scratch, v, list, tmp)` for every vertex of a batch on all cores, in
/// the batch's order.
fn per_vertex(b: &Batch, f: impl Fn(&mut Vec<u32>, u64, &[u64], &mut Vec<u64>) -> (u32, u32) + Sync) -> Vec<(u32, u32)> {
    (0..b.len())
        .into_par_iter()
        .with_min_len(256)
        .map_init(
            || (Vec::new(), Vec::new()),
            |(cnt, tmp), i| {
                let (v, list, _) = b.get(i);
                f(cnt, v, list, tmp)
            },
        )
        .collect()
}

/// v's list sorted: lists come sorted from the store; the out-then-in view
/// of a directed store, or lists patched by updates, are sorted into `tmp`.
fn sorted<'t>(list: &'t [u64], tmp: &'t mut Vec<u64>) -> &'t [u64] {
    if list.is_sorted() {
        return list;
    }
    tmp.clear();
    tmp.extend_from_slice(list);
    tmp.sort_unstable();
    tmp
}

/// The distinct neighbors of v other than v in a sorted list, with their
/// positions.
fn distinct(v: u64, s: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    s.iter().enumerate().filter(move |&(i, &u)| u != v && (i == 0 || s[i - 1] != u)).map(|(i, &u)| (i, u))
}

/// The largest h <= cap such that at least h values are >= h, and how many
/// values are >= h.
fn h_index(cap: u32, values: impl Iterator<Item = u32>, cnt: &mut Vec<u32>) -> (u32, u32) {
    cnt.clear();
    cnt.resize(cap as usize + 1, 0);
    for x in values {
        cnt[x.min(cap) as usize] += 1;
    }
    let mut at_least = 0;
    for h in (1..=cap).rev() {
        at_least += cnt[h as usize];
        if at_least >= h {
            return (h, at_least);
        }
    }
    (0, at_least + cnt[0])
}
