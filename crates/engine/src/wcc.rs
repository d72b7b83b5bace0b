//! Weakly connected components: one sequential pass over the out-lists (or
//! an undirected store's lower lists) into
//! a union-find whose roots are always the smallest vertex of their set, so
//! every component is labelled by its smallest vertex id. Each batch's lists
//! are joined on both cores: parents only ever point to smaller ids and a
//! root is linked by compare-and-swap, so the labels do not depend on the
//! order the threads run in.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;
use solidgraph_store::{Direction, Store};

use crate::error::{Progress, Result};
use crate::frontier::{AHEAD, Frontier, Lists, prefetch};
use crate::state;

/// The root of v's set, halving the path on the way. Every write stores an
/// ancestor (a non-root's parent is only ever moved up its own path), so
/// racing writers leave a valid, still decreasing path.
fn find(parent: &[AtomicU64], mut v: u64) -> u64 {
    loop {
        let p = parent[v as usize].load(Relaxed);
        if p == v {
            return v;
        }
        let gp = parent[p as usize].load(Relaxed);
        if gp != p {
            parent[v as usize].store(gp, Relaxed);
        }
        v = gp;
    }
}

fn union(parent: &[AtomicU64], mut a: u64, mut b: u64) {
    loop {
        (a, b) = (find(parent, a), find(parent, b));
        if a == b {
            return;
        }
        let (lo, hi) = (a.min(b), a.max(b));
        // Fails only if another thread linked `hi` meanwhile: retry from it.
        if parent[hi as usize].compare_exchange(hi, lo, Relaxed, Relaxed).is_ok() {
            return;
        }
    }
}

pub fn wcc(store: &Store, progress: Progress) -> Result<Vec<u64>> {
    let n = store.num_nodes();
    let parent: Vec<AtomicU64> = state::from_fn(n as usize, |v| AtomicU64::new(v as u64));
    // An undirected store holds every edge in both lists: one is enough,
    // and its lower lists (when imported) hold just that one, in half the
    // bytes.
    let lists = Lists::new(store, if store.has_lower_lists() { Direction::Lower } else { Direction::Out }, false)?;
    let both_ways = !store.directed();
    let mut seen = 0u64;
    lists.try_batches(Frontier::All, |b| {
        (0..b.len()).into_par_iter().with_min_len(1024).for_each(|i| {
            let (v, nbrs, _) = b.get(i);
            for (j, &u) in nbrs.iter().enumerate() {
                prefetch(&parent, nbrs, j + AHEAD);
                if !(both_ways && u > v) {
                    union(&parent, v, u);
                }
            }
        });
        seen += b.len() as u64;
        Ok(progress("wcc", seen, n)?)
    })?;
    // Parents point to smaller ids, so in id order every parent already
    // holds its root.
    let mut label: Vec<u64> = parent.into_iter().map(AtomicU64::into_inner).collect();
    for v in 0..label.len() {
        label[v] = label[label[v] as usize];
    }
    if let Some(ext) = store.external_ids()? {
        min_user_id_labels(&mut label, &ext);
        state::by_external_small(store, &mut label)?;
    }
    Ok(label)
}

/// Relabels components (each labelled by its smallest store id, its root)
/// by their smallest user id, in place: every root's slot first collects its
/// members' minimum, marked by the top bit, then each member copies it.
fn min_user_id_labels(label: &mut [u64], ext: &[u32]) {
    const ROOT: u64 = 1 << 63;
    let user = |v: usize| ext.get(v).map_or(v as u64, |&e| e as u64);
    for v in 0..label.len() {
        let r = label[v] as usize;
        if r == v {
            label[v] = ROOT | user(v);
        } else {
            // Roots come before their members, so r's slot is marked.
            label[r] = label[r].min(ROOT | user(v));
        }
    }
    for v in 0..label.len() {
        let x = label[v];
        label[v] = if x & ROOT != 0 { x & !ROOT } else { label[x as usize] & !ROOT };
    }
}
