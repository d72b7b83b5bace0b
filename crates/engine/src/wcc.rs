//! Weakly connected components: passes over the lists into a union-find
//! whose roots are always the smallest vertex of their set, so
//! every component is labelled by its smallest vertex id. Whole chunks go
//! to the pool's threads (`Lists::chunks`), each decoding its pages into a
//! buffer that stays in the CPU caches; parents only ever point to smaller
//! ids and a root is linked by compare-and-swap, so the labels do not
//! depend on the order the threads run in. An undirected store runs
//! Afforest (`components`): a pass over each list's first ids, then whole
//! lists only for the vertices outside the largest component; a directed
//! one a single pass over its out-lists.
//!
//! A full pass is bound by the random reads of neighbors' parents: below 2^32
//! vertices parents are u32 (half the bytes, so twice the share of them in
//! the last-level cache), and a list's vertex keeps its root in a register
//! across its list instead of finding it again per edge.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use solidgraph_store::{Direction, Store};

use crate::error::{Cancelled, Progress, Result};
use crate::frontier::{AHEAD, Bitset, Frontier, Lists, prefetch};
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

/// Ids per list linked before the largest component is picked (gapbs's
/// `neighbor_rounds`).
const SAMPLE_LINKS: usize = 2;
/// Vertices whose roots pick the largest component.
const SAMPLES: usize = 1024;
/// The share of the samples the largest component must hold for the
/// second pass to read only the other vertices' lists: those are whole
/// lists (both directions), twice the bytes of the lower lists the full
/// pass reads, so with a small largest component the full pass is cheaper.
const MIN_BIG_SHARE: usize = SAMPLES / 2;

/// Each vertex's root (the smallest store id of its component).
///
/// On an undirected store: Afforest (Sutton, Ben-Nun and Barak, 2018, as
/// in gapbs's `cc.cc`). A first pass links each vertex to the first
/// `SAMPLE_LINKS` ids of its list, decoding only those; a sample of roots
/// then names the largest component, and a second pass reads the whole
/// lists of the vertices outside it only. An edge with an end outside is
/// in that end's list, and one with both ends inside joins nothing new,
/// so the result is the full pass's; on a power-law graph the second pass
/// skips most edges. A directed store keeps each edge in one list, so it
/// runs the full pass.
fn components<S: Slot>(store: &Store, progress: Progress) -> Result<Vec<S>> {
    let n = store.num_nodes();
    let parent: Vec<S> = state::from_fn(n as usize, |v| S::new(v as u64));
    // An undirected store holds every edge in both lists: one is enough,
    // and its lower lists (when imported) hold just that one, in half the
    // bytes.
    let first = if store.has_lower_lists() { Direction::Lower } else { Direction::Out };
    let both_ways = !store.directed();
    let seen = AtomicU64::new(0);
    let tick = |vertices: u64| progress("wcc", (seen.fetch_add(vertices, Relaxed) + vertices).min(n), n);
    if both_ways {
        sample(store, first, &parent, &tick)?;
        if let Some(big) = largest(&parent) {
            let outside = Bitset::from_fn(n, |v| find(&parent, v) != big);
            Lists::new(store, Direction::Out, false)?.chunks_of(Frontier::Set(&outside), |c| {
                let mut last = u64::MAX;
                let mut vertices = 0;
                c.for_each_piece(
                    usize::MAX,
                    |v| outside.contains(v),
                    |v, ids| {
                        vertices += u64::from(v != last);
                        last = v;
                        join(&parent, v, ids, false);
                        true
                    },
                )?;
                Ok(tick(vertices)?)
            })?;
            return Ok(finish(parent));
        }
    }
    Lists::new(store, first, false)?.chunks(|c| {
        let (lo, hi) = c.range();
        c.for_each_piece(
            usize::MAX,
            |_| true,
            |v, ids| {
                join(&parent, v, ids, both_ways);
                true
            },
        )?;
        Ok(tick(hi - lo)?)
    })?;
    Ok(finish(parent))
}

/// Afforest's first pass: links each vertex to the first `SAMPLE_LINKS`
/// ids of its list in `dir`, decoding no more of it.
fn sample<S: Slot>(store: &Store, dir: Direction, parent: &[S], tick: &(dyn Fn(u64) -> std::result::Result<(), Cancelled> + Sync)) -> Result<()> {
    Lists::new(store, dir, false)?.chunks(|c| {
        let (lo, hi) = c.range();
        c.for_each_piece(
            SAMPLE_LINKS,
            |_| true,
            |v, ids| {
                join(parent, v, ids, false);
                false
            },
        )?;
        Ok(tick((hi - lo) / 2)?)
    })?;
    Ok(())
}

/// The root most of `SAMPLES` spread-out vertices share, if it is at least
/// `MIN_BIG_SHARE` of them.
fn largest<S: Slot>(parent: &[S]) -> Option<u64> {
    let n = parent.len() as u64;
    if n == 0 {
        return None;
    }
    // splitmix64 from a fixed seed: the same sample every run.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut roots: Vec<u64> = (0..SAMPLES)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            find(parent, (z ^ (z >> 31)) % n)
        })
        .collect();
    roots.sort_unstable();
    let (mut best, mut count) = (0, 0);
    for run in roots.chunk_by(|a, b| a == b) {
        if run.len() > count {
            (best, count) = (run[0], run.len());
        }
    }
    (count >= MIN_BIG_SHARE).then_some(best)
}

/// Points every vertex at its root: parents point to smaller ids, so in
/// id order every parent already holds its root.
fn finish<S: Slot>(parent: Vec<S>) -> Vec<S> {
    for v in 0..parent.len() {
        parent[v].set(parent[parent[v].get() as usize].get());
    }
    parent
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

#[cfg(test)]
mod tests {
    use solidgraph_store::{EdgeInput, ImportOptions, OpenOptions, import};

    use super::*;

    /// On a graph with one component of most vertices (a chain, which each
    /// vertex's first two lower-list ids link whole), the first pass finds
    /// it, so the second reads only the other vertices' lists.
    #[test]
    fn sampling_finds_the_large_component() {
        let n = 10_000u64;
        let mut edges: Vec<(u64, u64)> = (1..9_000).map(|v| (v - 1, v)).collect();
        edges.extend((9_000..n - 1).step_by(2).map(|v| (v, v + 1)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let o = ImportOptions { undirected: true, lower_lists: true, dedup: true, num_nodes: Some(n), ..Default::default() };
        let input = EdgeInput::Memory { src: edges.iter().map(|e| e.0).collect(), dst: edges.iter().map(|e| e.1).collect(), weights: None, labels: None };
        import(&path, &[input], &[], &o, &|_, _, _| {}).unwrap();
        let store = Store::open(&path, &OpenOptions::default()).unwrap();
        let parent: Vec<AtomicU32> = (0..n).map(|v| AtomicU32::new(v as u32)).collect();
        sample(&store, Direction::Lower, &parent, &|_| Ok(())).unwrap();
        assert_eq!(largest(&parent), Some(0));
        let labels = wcc(&store, &crate::error::silent).unwrap();
        assert!(labels[..9_000].iter().all(|&l| l == 0));
        assert!((9_000..n).all(|v| labels[v as usize] == v - v % 2));
    }

    /// Small components only: no root holds half the samples, so the full
    /// pass runs.
    #[test]
    fn no_large_component_without_a_majority() {
        let parent: Vec<AtomicU32> = (0..1000u32).map(|v| AtomicU32::new(v - v % 3)).collect();
        assert_eq!(largest(&parent), None);
        let parent: Vec<AtomicU32> = (0..1000u32).map(|v| AtomicU32::new(if v < 700 { 0 } else { v })).collect();
        assert_eq!(largest(&parent), Some(0));
    }
}
