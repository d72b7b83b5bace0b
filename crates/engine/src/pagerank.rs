//! PageRank as LDBC Graphalytics defines it: fixed iterations (or an L1
//! tolerance), each one sequential pass over the lists; the rank of dangling
//! vertices (no out-edges) is spread over all vertices.
//!
//! The first iteration pushes each vertex's rank over its out-edges and
//! records the out-degrees. Later ones pull: a vertex's new rank is the sum
//! of its in-neighbors' rank/out-degree, read from its in-list (the out-list
//! of an undirected store), so a batch's vertices are summed on both cores
//! without sharing a write; a push spreads over the cores by giving each a
//! part of the ranks to write. Each vertex sums its list in a fixed order (an
//! extent page by page) and whole-graph sums add fixed-size parts in order,
//! so ranks do not depend on the thread count. A directed store without
//! in-edges pushes every iteration.

use rayon::prelude::*;
use solidgraph_store::{Direction, Store};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::{AHEAD, Chunk, Frontier, Lists, prefetch};
use crate::state;

#[derive(Debug, Clone)]
pub struct PageRank {
    pub ranks: Vec<f64>,
    pub iterations: u32,
}

/// Vertices per part of a whole-graph sum.
const PART: usize = 1 << 16;

/// Runs `iterations` iterations, or stops earlier once the L1 change of an
/// iteration falls below `tol`.
pub fn pagerank(store: &Store, damping: f64, iterations: u32, tol: Option<f64>, progress: Progress) -> Result<PageRank> {
    if !(damping > 0.0 && damping < 1.0) {
        return Err(EngineError::Invalid(format!("damping {damping} must be in (0, 1)")));
    }
    if tol.is_some_and(|t| !(t > 0.0)) {
        return Err(EngineError::Invalid("tolerance must be positive".into()));
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
    let mut pr = state::filled(n, 1.0 / nf);
    let mut next = state::filled(n, 0.0f64);
    // Out-degrees, recorded by the first (push) iteration when later ones pull.
    let mut deg: Vec<u32> = if pull.is_some() { state::filled(n, 0) } else { Vec::new() };
    let mut done = 0;
    while done < iterations {
        let delta = match &pull {
            Some(lists) if done > 0 => pull_iteration(lists, damping, &pr, &deg, &mut next)?,
            _ => push_iteration(&out, damping, &pr, &mut deg, &mut next)?,
        };
        std::mem::swap(&mut pr, &mut next);
        done += 1;
        progress("pagerank", done as u64, iterations as u64);
        if tol.is_some_and(|t| delta < t) {
            break;
        }
        if pull.is_some() && done < iterations {
            // Ranks to rank / out-degree for the next pull.
            pr.par_chunks_mut(PART).zip(deg.par_chunks(PART)).for_each(|(p, d)| {
                p.iter_mut().zip(d).filter(|x| *x.1 > 0).for_each(|(p, &d)| *p /= d as f64);
            });
        }
    }
    // Read buffers too: the reindex below holds two rank arrays.
    drop((out, pull, next, deg));
    Ok(PageRank { ranks: state::by_external(store, pr, |x| x)?, iterations: done })
}

/// One iteration pushing `pr` over the out-lists into `next`, in id order;
/// records out-degrees into `deg` unless it is empty. Returns the L1 change.
/// Each core owns a part of `next` and applies the batch's edges into it:
/// every rank receives its shares in the same order for any thread count.
fn push_iteration(out: &Lists, damping: f64, pr: &[f64], deg: &mut [u32], next: &mut [f64]) -> Result<f64> {
    let nf = pr.len() as f64;
    next.iter_mut().for_each(|x| *x = 0.0);
    let mut dangling = 0.0f64;
    let record = !deg.is_empty();
    let part = pr.len().div_ceil(rayon::current_num_threads()).max(1);
    out.batches(Frontier::All, |b| {
        next.par_chunks_mut(part).enumerate().for_each(|(p, mine)| {
            let lo = (p * part) as u64;
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
    })?;
    let base = (1.0 - damping) / nf + damping * dangling / nf;
    next.iter_mut().for_each(|x| *x = base + damping * *x);
    Ok(next.iter().zip(pr).map(|(x, p)| (x - p).abs()).sum())
}

/// One iteration pulling over in-lists into `next`; `share` holds rank /
/// out-degree (the rank itself for dangling vertices, which are in no
/// in-list). Returns the L1 change.
fn pull_iteration(lists: &Lists, damping: f64, share: &[f64], deg: &[u32], next: &mut [f64]) -> Result<f64> {
    let n = share.len();
    let nf = n as f64;
    let dangling = sum_parts(n, |r| deg[r.clone()].iter().zip(&share[r]).filter(|x| *x.0 == 0).map(|x| x.1).sum());
    let base = (1.0 - damping) / nf + damping * dangling / nf;
    lists.chunks(|c| {
        match c {
            Chunk::Pages(rp) => {
                // Per page, each list's sum (an extent's pages: parts of
                // one vertex's, added in page order below).
                let parts: Vec<Result<Vec<(u64, f64)>>> = (0..rp.num_pages())
                    .into_par_iter()
                    .with_min_len(16)
                    .map_init(
                        || (Vec::new(), Vec::new()),
                        |(ids, rows), page| {
                            rp.page_lists(page, ids, rows)?;
                            let mut a = 0;
                            Ok(rows
                                .iter()
                                .map(|&(v, end)| {
                                    let s = gather_sum(share, ids, a, end);
                                    a = end;
                                    (v, s)
                                })
                                .collect::<Vec<_>>())
                        },
                    )
                    .collect();
                let (lo, hi) = rp.range();
                let next = &mut next[lo as usize..hi as usize];
                next.fill(0.0);
                for part in parts {
                    for (v, s) in part? {
                        next[(v - lo) as usize] += s;
                    }
                }
                next.iter_mut().for_each(|x| *x = base + damping * *x);
            }
            Chunk::Lists(b) => {
                let ranks: Vec<f64> = (0..b.len())
                    .into_par_iter()
                    .with_min_len(1024)
                    .map(|i| {
                        let l = b.get(i).1;
                        base + damping * gather_sum(share, l, 0, l.len())
                    })
                    .collect();
                for (i, r) in ranks.into_iter().enumerate() {
                    next[b.get(i).0 as usize] = r;
                }
            }
        }
        Ok(())
    })?;
    let next = &*next;
    Ok(sum_parts(n, |r| {
        next[r.clone()].iter().zip(&share[r.clone()]).zip(&deg[r]).map(|((&x, &s), &d)| (x - if d == 0 { s } else { s * d as f64 }).abs()).sum()
    }))
}

/// Sum of `share[u]` over `ids[a..b]`. The prefetch looks past `b` into the
/// lists that follow (a page's lists lie back to back), and four partial
/// sums keep the adds of a long list from waiting on each other (one
/// accumulator made every add wait for the one before).
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

/// Sum of `f` over [0, n) in parts of `PART` vertices, computed on all cores
/// and added in order (the same result for any thread count).
fn sum_parts(n: usize, f: impl Fn(std::ops::Range<usize>) -> f64 + Sync) -> f64 {
    let parts: Vec<f64> = (0..n.div_ceil(PART)).into_par_iter().map(|k| f(k * PART..((k + 1) * PART).min(n))).collect();
    parts.iter().sum()
}
