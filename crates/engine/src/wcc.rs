//! Weakly connected components: one sequential pass over the out-lists (or
//! an undirected store's lower lists) into
//! a union-find whose roots are always the smallest vertex of their set, so
//! every component is labelled by its smallest vertex id. Whole chunks go
//! to the pool's threads (`Lists::chunks`), each decoding its pages into a
//! buffer that stays in the CPU caches; parents only ever point to smaller
//! ids and a root is linked by compare-and-swap, so the labels do not
//! depend on the order the threads run in.
//!
//! The pass is bound by the random reads of neighbors' parents: below 2^32
//! vertices parents are u32 (half the bytes, so twice the share of them in
//! the last-level cache), and a list's vertex keeps its root in a register
//! across its list instead of finding it again per edge.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use solidgraph_store::{Direction, Store};

use crate::error::{Progress, Result};
use crate::frontier::{AHEAD, Lists, prefetch};
use crate::state;

/// A parent array's slot: u32 below 2^32 vertices, else u64.
trait Slot: Sync + Send + Sized {
    fn new(v: u64) -> Self;
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    /// Links root `from` (this slot's vertex) under `to`; false if it is no
    /// longer a root.
    fn link(&self, from: u64, to: u64) -> bool;
}

impl Slot for AtomicU32 {
    fn new(v: u64) -> Self {
        AtomicU32::new(v as u32)
    }
    fn get(&self) -> u64 {
        u64::from(self.load(Relaxed))
    }
    fn set(&self, v: u64) {
        self.store(v as u32, Relaxed)
    }
    fn link(&self, from: u64, to: u64) -> bool {
        self.compare_exchange(from as u32, to as u32, Relaxed, Relaxed).is_ok()
    }
}

impl Slot for AtomicU64 {
    fn new(v: u64) -> Self {
        AtomicU64::new(v)
    }
    fn get(&self) -> u64 {
        self.load(Relaxed)
    }
    fn set(&self, v: u64) {
        self.store(v, Relaxed)
    }
    fn link(&self, from: u64, to: u64) -> bool {
        self.compare_exchange(from, to, Relaxed, Relaxed).is_ok()
    }
}

/// The root of v's set, halving the path on the way. Every write stores an
/// ancestor (a non-root's parent is only ever moved up its own path), so
/// racing writers leave a valid, still decreasing path.
fn find<S: Slot>(parent: &[S], mut v: u64) -> u64 {
    loop {
        let p = parent[v as usize].get();
        if p == v {
            return v;
        }
        let gp = parent[p as usize].get();
        if gp != p {
            parent[v as usize].set(gp);
        }
        v = gp;
    }
}

/// Joins the sets of `a` (whose root was `ra` when last looked at; it may
/// have been linked since) and `b`; returns a vertex of the joined set no
/// larger than its root, for the next edge of `a`'s list. Linking a root
/// under any smaller vertex of the other set (a stale `ra` included) keeps
/// parents pointing to smaller ids, so labels stay each set's smallest.
fn union<S: Slot>(parent: &[S], mut ra: u64, b: u64) -> u64 {
    let mut rb = find(parent, b);
    loop {
        if ra == rb {
            return ra;
        }
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        // Fails only if `hi` is no longer a root: retry from the roots.
        if parent[hi as usize].link(hi, lo) {
            return lo;
        }
        (ra, rb) = (find(parent, ra), find(parent, rb));
    }
}

/// Joins v with each of `nbrs` (only those up to v when `both_ways`: each
/// edge is then in both lists).
fn join<S: Slot>(parent: &[S], v: u64, nbrs: &[u64], both_ways: bool) {
    let mut rv = v;
    for (j, &u) in nbrs.iter().enumerate() {
        prefetch(parent, nbrs, j + AHEAD);
        if !(both_ways && u > v) {
            rv = union(parent, rv, u);
        }
    }
}

pub fn wcc(store: &Store, progress: Progress) -> Result<Vec<u64>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    state::reserve("WCC", store, 16, 0)?;
    let n = store.num_nodes();
    // u32::MAX itself stays free: no id reaches it.
    let mut label = if n < u64::from(u32::MAX) {
        wide(components::<AtomicU32>(store, progress)?)
    } else {
        components::<AtomicU64>(store, progress)?.into_iter().map(AtomicU64::into_inner).collect()
    };
    if let Some(ext) = store.external_ids()? {
        min_user_id_labels(&mut label, &ext);
        state::by_external_small(store, &mut label)?;
    }
    Ok(label)
}

/// Each vertex's root (the smallest store id of its component).
fn components<S: Slot>(store: &Store, progress: Progress) -> Result<Vec<S>> {
    let n = store.num_nodes();
    let parent: Vec<S> = state::from_fn(n as usize, |v| S::new(v as u64));
    // An undirected store holds every edge in both lists: one is enough,
    // and its lower lists (when imported) hold just that one, in half the
    // bytes.
    let lists = Lists::new(store, if store.has_lower_lists() { Direction::Lower } else { Direction::Out }, false)?;
    let both_ways = !store.directed();
    let seen = AtomicUsize::new(0);
    lists.chunks(|c| {
        let (lo, hi) = c.range();
        c.for_each_list(|v, ids, a, end| join(&parent, v, &ids[a..end], both_ways))?;
        let at = seen.fetch_add((hi - lo) as usize, Relaxed) + (hi - lo) as usize;
        Ok(progress("wcc", at as u64, n)?)
    })?;
    drop(lists);
    // Parents point to smaller ids, so in id order every parent already
    // holds its root.
    for v in 0..parent.len() {
        parent[v].set(parent[parent[v].get() as usize].get());
    }
    Ok(parent)
}

/// u32 roots as the u64 labels of the result: 12 bytes a vertex at the
/// peak, before the id map is loaded (the pass itself holds 4).
fn wide(parent: Vec<AtomicU32>) -> Vec<u64> {
    state::from_fn(parent.len(), |v| u64::from(parent[v].load(Relaxed)))
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
