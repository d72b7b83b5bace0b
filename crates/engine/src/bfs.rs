//! Breadth-first search, level by level and direction-optimizing (Beamer et
//! al., SC 2012), with the choice made on I/O: each level either expands
//! the frontier's out-lists (top-down) or reads the in-lists of the
//! unvisited vertices, each stopping at its first neighbor in the frontier
//! (bottom-up), whichever reads fewer pages by the same dense/sparse cost
//! `Lists` plans with. On a Kronecker graph the big middle levels go
//! bottom-up: about as many pages, a fraction of the work per page. An
//! optional target stops the search early (GraphSSD's BFS queries).
//!
//! A bottom-up level hands each chunk to a pool thread, which decodes its
//! pages one at a time into a buffer that stays in the CPU caches and
//! probes the members there, settling them itself: no chunk-sized CSR is
//! written and read back. Only the members' lists are decoded, `PIECE`
//! ids at a time, up to the first neighbor in the frontier. A top-down
//! level's threads settle the vertices they claim themselves. A bottom-up miss (no in-neighbor in the
//! frontier) is probed again at the next level, so its list is kept in
//! memory, up to the page cache's budget (idle while levels are read as
//! merged ranges) and at most `KEPT_MAX`, so on a power-law graph the
//! vertices left after the big level need no second pass, and the search
//! reads the store about once.
//!
//! State: the levels (4 bytes per vertex while running, widened to the
//! 8-byte output at the end), parents when asked for, and four bitsets:
//! the frontier, the next one, the vertices still to reach, and those of
//! them whose lists are not kept. Kept lists hold u32 ids and are compacted
//! in place between levels, so they stay within their cap. A vertex whose
//! in-list turns out empty is dropped (nothing can reach it), so isolated
//! vertices are read once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;
use solidgraph_io::sync::MutexExt;
use solidgraph_store::{Direction, Need, Store, StoreError};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::{Bitset, Chunk, Frontier, Lists};
use crate::state;

/// Level of an unreachable vertex (the Graphalytics convention).
pub const UNREACHED: i64 = i64::MAX;
/// Unreached while running.
const FAR: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub struct Bfs {
    pub levels: Vec<i64>,
    /// Parent on a shortest path (the source is its own parent; -1 when
    /// unreached), when asked for.
    pub parents: Option<Vec<i64>>,
}

/// How levels are expanded. `Auto` is the engine's choice; the others
/// exist so tests and benchmarks can pin one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steps {
    Auto,
    TopDown,
    BottomUp,
}

pub fn bfs(store: &Store, source: u64, target: Option<u64>, parents: bool, progress: Progress) -> Result<Bfs> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    bfs_with(store, source, target, parents, Steps::Auto, progress)
}

/// Ids a bottom-up probe decodes at a time before it looks for a parent
/// among them.
const PIECE: usize = 16;

/// A bottom-up probe's outcome when the in-list is empty: nothing can
/// reach that vertex.
const NO_IN_EDGES: u64 = u64::MAX;
/// A bottom-up probe's outcome when no in-neighbor is in the frontier.
const MISSED: u64 = u64::MAX - 1;
/// A kept list's vertex that a top-down level reached meanwhile.
const REACHED: u64 = u64::MAX - 2;

/// Bytes the lists of bottom-up misses may take: the page cache's budget
/// (idle while levels are read as merged ranges), less what a cache holding
/// the whole store uses, and no more than all in-lists as u32 ids or
/// `KEPT_MAX`; 0
/// without bottom-up steps or on graphs of 2^32 vertices or more (kept ids
/// are u32).
fn kept_cap(store: &Store, inn: Option<&Lists>) -> usize {
    if inn.is_none() || store.num_nodes() > u64::from(u32::MAX) {
        return 0;
    }
    let budget = store.stats().cache.budget as usize;
    let idle = if budget as u64 >= store.size_bytes() { budget - store.size_bytes() as usize } else { budget };
    let all = store.num_edges() as usize * size_of::<u32>() + store.num_nodes() as usize * kept_bytes(0);
    idle.min(all).min(KEPT_MAX)
}

/// The most bytes of kept lists, whatever the cache's budget: fresh memory
/// costs more to fault in here than reading those lists again (from the
/// cache's image, or in merged reads), so a larger cache must not buy a
/// larger buffer (docs/PERFORMANCE.md, "More cache").
const KEPT_MAX: usize = 128 << 20;

/// In-lists of unvisited vertices held between bottom-up levels, as u32
/// ids (kept only on graphs of fewer than 2^32 vertices).
#[derive(Default)]
struct Kept {
    ids: Vec<u64>,
    ends: Vec<usize>,
    nbrs: Vec<u32>,
    /// The most bytes `ids`, `ends` and `nbrs` may hold.
    cap: usize,
}

/// Bytes a kept list of `len` ids takes.
fn kept_bytes(len: usize) -> usize {
    size_of::<u64>() + size_of::<usize>() + len * size_of::<u32>()
}

impl Kept {
    fn new(cap: usize) -> Kept {
        Kept { cap, ..Kept::default() }
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn bytes(&self) -> usize {
        self.ids.len() * (size_of::<u64>() + size_of::<usize>()) + self.nbrs.len() * size_of::<u32>()
    }

    fn list(&self, i: usize) -> &[u32] {
        &self.nbrs[if i == 0 { 0 } else { self.ends[i - 1] }..self.ends[i]]
    }

    /// Keeps only the lists `keep` names, moving them down in place: the
    /// next level's misses reuse the memory, so the lists never take more
    /// than the cap (a second buffer would double it).
    fn retain(&mut self, keep: &[bool]) {
        debug_assert_eq!(keep.len(), self.len());
        let (mut w, mut start, mut to) = (0, 0, 0);
        for (i, &k) in keep.iter().enumerate() {
            let end = self.ends[i];
            if k {
                self.nbrs.copy_within(start..end, to);
                to += end - start;
                self.ids[w] = self.ids[i];
                self.ends[w] = to;
                w += 1;
            }
            start = end;
        }
        self.ids.truncate(w);
        self.ends.truncate(w);
        self.nbrs.truncate(to);
    }

    /// Keeps a chunk's misses (`Misses`) as far as the cap allows; those
    /// need no read at the next level.
    fn keep(&mut self, m: &Misses, unread: &Bitset) {
        let mut start = 0;
        for (&v, &end) in m.ids.iter().zip(&m.ends) {
            let l = &m.nbrs[start..end];
            start = end;
            if self.bytes() + kept_bytes(l.len()) > self.cap {
                continue;
            }
            if self.nbrs.capacity() == 0 {
                // Exact, so growth never doubles past the cap.
                self.nbrs.reserve_exact(self.cap / size_of::<u32>());
            }
            self.ids.push(v);
            self.nbrs.extend_from_slice(l);
            self.ends.push(self.nbrs.len());
            unread.remove(v);
        }
    }
}

/// One chunk's bottom-up misses: vertices and their lists (u32 ids).
#[derive(Default)]
struct Misses {
    ids: Vec<u64>,
    ends: Vec<usize>,
    nbrs: Vec<u32>,
    /// Vertices this chunk settled.
    added: u64,
    /// The bitset word the chunk is at, and the vertices of it to take
    /// out of `unvisited` and `unread` (`gone`) and to put in `next`
    /// (`reached`). A chunk's vertices come in order, so the bitsets see
    /// one atomic operation per word instead of one per vertex.
    word: u64,
    gone: u64,
    reached: u64,
}

impl Misses {
    /// Moves to the word of `v`, writing out the one before.
    fn at_word_of(&mut self, v: u64, s: &Step<'_>) {
        if v / 64 != self.word {
            self.flush(s);
            self.word = v / 64;
        }
    }

    fn flush(&mut self, s: &Step<'_>) {
        s.unvisited.remove_word(self.word, self.gone);
        s.unread.remove_word(self.word, self.gone);
        s.next.insert_word(self.word, self.reached);
        (self.gone, self.reached) = (0, 0);
    }
}

/// A bottom-up level over the lists not kept, shared by the chunk tasks:
/// each settles the vertices of its chunk (a vertex is in one chunk), so
/// the level and parent writes never meet.
struct Step<'a> {
    cur: &'a Bitset,
    next: &'a Bitset,
    unvisited: &'a Bitset,
    unread: &'a Bitset,
    levels: &'a [AtomicU32],
    parents: Option<&'a [AtomicI64]>,
    /// The level of the vertices this step reaches.
    level: u32,
    added: AtomicU64,
    /// Whether misses' lists are kept at all (a cap above 0).
    keeps: bool,
    kept: Mutex<&'a mut Kept>,
}

/// `levels` seen as atomics, so that chunk tasks settle their vertices
/// in place.
fn atomic_u32(x: &mut [u32]) -> &[AtomicU32] {
    const { assert!(align_of::<AtomicU32>() == align_of::<u32>()) };
    // SAFETY: same size and (asserted) alignment; the exclusive borrow
    // means no non-atomic access while the view lives.
    unsafe { &*(x as *mut [u32] as *const [AtomicU32]) }
}

/// `atomic_u32` for parents.
fn atomic_i64(x: &mut [i64]) -> &[AtomicI64] {
    const { assert!(align_of::<AtomicI64>() == align_of::<i64>()) };
    // SAFETY: as in `atomic_u32`.
    unsafe { &*(x as *mut [i64] as *const [AtomicI64]) }
}

/// The vertex whose list a chunk task is probing (an extent's list comes
/// in parts, one a page).
struct Open {
    v: u64,
    parent: Option<u64>,
    empty: bool,
    /// Where its ids start in `Misses::nbrs`.
    start: usize,
}

impl Step<'_> {
    /// Probes the members of `c` (vertices still in `unread`): a member
    /// with an in-neighbor in the frontier is reached, one with no
    /// in-neighbors is dropped, and the lists of the rest are kept within
    /// the cap.
    fn chunk(&self, c: &Chunk) -> Result<()> {
        let mut m = Misses::default();
        let mut open: Option<Open> = None;
        // Settled vertices' lists are not decoded, and a probe stops
        // decoding at its first neighbor in the frontier: on a
        // degree-ordered store the hubs come first in every list.
        c.for_each_piece(
            PIECE,
            |v| self.unread.contains(v),
            |v, part| {
                if open.as_ref().is_none_or(|o| o.v != v) {
                    if let Some(o) = open.take() {
                        self.close(o, &mut m);
                    }
                    open = Some(Open { v, parent: None, empty: true, start: m.nbrs.len() });
                }
                let o = open.as_mut().expect("opened above");
                o.empty &= part.is_empty();
                if o.parent.is_some() {
                    return false;
                }
                match part.iter().find(|&&u| self.cur.contains(u)) {
                    Some(&u) => {
                        o.parent = Some(u);
                        m.nbrs.truncate(o.start);
                        false
                    }
                    // Ids fit u32: lists are kept only below 2^32 vertices.
                    None if self.keeps => {
                        m.nbrs.extend(part.iter().map(|&u| u as u32));
                        true
                    }
                    None => true,
                }
            },
        )?;
        if let Some(o) = open.take() {
            self.close(o, &mut m);
        }
        m.flush(self);
        self.added.fetch_add(m.added, Relaxed);
        if !m.ids.is_empty() {
            self.kept.locked().keep(&m, self.unread);
        }
        Ok(())
    }

    /// Settles a probed vertex, or records it as a miss. Its bits change
    /// when the chunk moves past its word (`Misses::flush`).
    fn close(&self, o: Open, m: &mut Misses) {
        m.at_word_of(o.v, self);
        let bit = 1u64 << (o.v % 64);
        match o.parent {
            Some(u) => {
                m.gone |= bit;
                m.reached |= bit;
                self.levels[o.v as usize].store(self.level, Relaxed);
                if let Some(p) = self.parents {
                    p[o.v as usize].store(u as i64, Relaxed);
                }
                m.added += 1;
            }
            // Nothing can reach it.
            None if o.empty => m.gone |= bit,
            None if self.keeps => {
                m.ids.push(o.v);
                m.ends.push(m.nbrs.len());
            }
            None => {}
        }
    }
}

pub fn bfs_with(store: &Store, source: u64, target: Option<u64>, parents: bool, steps: Steps, progress: Progress) -> Result<Bfs> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    let n = store.num_nodes();
    for (what, v) in [("source", Some(source)), ("target", target)] {
        if let Some(v) = v.filter(|&v| v >= n) {
            return Err(EngineError::Invalid(format!("{what} vertex {v} is not in the graph ({n} vertices)")));
        }
    }
    // u32 levels, i64 parents and output, four bitsets.
    state::reserve("BFS", store, 13 + if parents { 8 } else { 0 }, 0)?;
    let mut ends = [source, target.unwrap_or(u64::MAX)];
    store.to_internal(&mut ends)?;
    let (source, target) = (ends[0], target.map(|_| ends[1]));
    let out = Lists::new(store, Direction::Out, false)?;
    // Bottom-up reads in-lists: an undirected store's are its out-lists; a
    // directed store without them runs top-down only.
    let has_in = !store.directed() || store.gtt(Direction::In).is_ok();
    let inn = match steps {
        Steps::TopDown => None,
        _ if has_in => Some(Lists::new(store, Direction::In, false)?),
        Steps::BottomUp => {
            return Err(StoreError::Lacks { what: "bottom-up BFS on a directed graph needs its in-edges".into(), need: Need::InEdges }.into());
        }
        Steps::Auto => None,
    };
    // u32 while running (FAR marks unreached): half the bytes of the
    // output, which is made only once the read buffers are gone.
    let mut levels = state::filled(n as usize, FAR);
    let mut par = parents.then(|| state::filled(n as usize, -1i64));
    levels[source as usize] = 0;
    if let Some(p) = par.as_mut() {
        p[source as usize] = source as i64;
    }
    let (mut cur, mut next) = (Bitset::new(n), Bitset::new(n));
    cur.insert(source);
    let unvisited = Bitset::full(n);
    unvisited.remove(source);
    // Unvisited vertices whose in-lists are not held in `kept`.
    let unread = Bitset::full(n);
    unread.remove(source);
    let mut kept = Kept::new(kept_cap(store, inn.as_ref()));
    let (mut size, mut level, mut reached) = (1u64, 0u32, 1u64);
    while size > 0 && target.is_none_or(|t| levels[t as usize] == FAR) {
        if level + 1 == FAR {
            return Err(EngineError::Unsupported("BFS deeper than 2^32 - 2 levels".into()));
        }
        let bottom_up = match (&inn, steps) {
            (Some(_), Steps::BottomUp) => true,
            (Some(inn), Steps::Auto) => inn.cost(Frontier::Set(&unread)) <= out.cost(Frontier::Set(&cur)),
            _ => false,
        };
        let mut added = 0u64;
        let mut settle = |hits: &[(u64, u64)]| {
            for &(v, p) in hits {
                if p == MISSED || p == REACHED {
                    continue;
                }
                // Top-down hits are out already: taking them was the claim.
                unvisited.remove(v);
                unread.remove(v);
                if p == NO_IN_EDGES {
                    continue;
                }
                levels[v as usize] = level + 1;
                if let Some(par) = par.as_mut() {
                    par[v as usize] = p as i64;
                }
                next.insert(v);
                added += 1;
            }
        };
        if let (true, Some(inn)) = (bottom_up, &inn) {
            let probe = |v: u64, nbrs: &[u32]| match nbrs.iter().find(|&&u| cur.contains(u.into())) {
                Some(&u) => (v, u.into()),
                None if nbrs.is_empty() => (v, NO_IN_EDGES),
                None => (v, MISSED),
            };
            // Misses go on to the next level: keep their lists in memory,
            // as far as the cap allows, instead of reading them again.
            // Lists kept by an earlier level; top-down may have reached some.
            let hits: Vec<(u64, u64)> = (0..kept.len())
                .into_par_iter()
                .with_min_len(256)
                .map(|i| match kept.ids[i] {
                    v if !unvisited.contains(v) => (v, REACHED),
                    v => probe(v, kept.list(i)),
                })
                .collect();
            let misses: Vec<bool> = hits.iter().map(|&(_, p)| p == MISSED).collect();
            kept.retain(&misses);
            settle(&hits);
            // The other lists: each chunk probed on a pool thread as its
            // pages are decoded (page by page, into buffers that stay in
            // the CPU caches), settling its own vertices.
            let step = Step {
                cur: &cur,
                next: &next,
                unvisited: &unvisited,
                unread: &unread,
                levels: atomic_u32(&mut levels),
                parents: par.as_mut().map(|p| atomic_i64(p)),
                level: level + 1,
                added: AtomicU64::new(0),
                keeps: kept.cap > 0,
                kept: Mutex::new(&mut kept),
            };
            // Removing members while the reader plans ahead is safe: they
            // belong to chunks it has already handed over.
            inn.chunks_of(Frontier::Set(&unread), |c| {
                step.chunk(c)?;
                Ok(progress("bfs", reached, n)?)
            })?;
            added += step.added.into_inner();
        } else {
            // Each thread settles the vertices it claims: no list of hits
            // collected and settled on one thread.
            let (lv, pa) = (atomic_u32(&mut levels), par.as_mut().map(|p| atomic_i64(p)));
            let (next, unread, unvisited) = (&next, &unread, &unvisited);
            out.try_batches(Frontier::Set(&cur), |b| {
                added += (0..b.len())
                    .into_par_iter()
                    .with_min_len(64)
                    .map(|i| {
                        let (v, nbrs, _) = b.get(i);
                        let mut claimed = 0;
                        for &u in nbrs {
                            // Whoever takes u out of `unvisited` first is its parent.
                            if unvisited.contains(u) && unvisited.take(u) {
                                unread.remove(u);
                                lv[u as usize].store(level + 1, Relaxed);
                                if let Some(p) = pa {
                                    p[u as usize].store(v as i64, Relaxed);
                                }
                                next.insert(u);
                                claimed += 1;
                            }
                        }
                        claimed
                    })
                    .sum::<u64>();
                Ok(progress("bfs", reached, n)?)
            })?;
        }
        reached += added;
        progress("bfs", reached, n)?;
        std::mem::swap(&mut cur, &mut next);
        next.clear();
        size = added;
        level += 1;
    }
    // Read buffers and bitsets go before the result is reindexed.
    drop((out, inn, cur, next, unvisited, unread, kept));
    let levels = state::by_external(store, levels, |l| if l == FAR { UNREACHED } else { i64::from(l) })?;
    let parents = match par {
        Some(mut p) => {
            store.to_external(&mut p)?;
            Some(state::by_external(store, p, |x| x)?)
        }
        None => None,
    };
    Ok(Bfs { levels, parents })
}
