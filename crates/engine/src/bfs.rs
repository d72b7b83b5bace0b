//! Breadth-first search, level by level and direction-optimizing (Beamer et
//! al., SC 2012), with the choice made on I/O: each level either expands
//! the frontier's out-lists (top-down) or reads the in-lists of the
//! unvisited vertices, each stopping at its first neighbor in the frontier
//! (bottom-up), whichever reads fewer pages by the same dense/sparse cost
//! `Lists` plans with. On a Kronecker graph the big middle levels go
//! bottom-up: about as many pages, a fraction of the work per page. An
//! optional target stops the search early (GraphSSD's BFS queries).
//!
//! State: the levels (8 bytes per vertex, the output), parents when asked
//! for, and three bitsets: the frontier, the next one, and the vertices
//! still to reach. A vertex whose in-list turns out empty is dropped from
//! the last (nothing can reach it), so isolated vertices are read once.

use rayon::prelude::*;
use solidgraph_store::{Direction, Store};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::{Bitset, Frontier, Lists};

/// Level of an unreachable vertex (the Graphalytics convention).
pub const UNREACHED: i64 = i64::MAX;

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
    bfs_with(store, source, target, parents, Steps::Auto, progress)
}

/// A bottom-up hit whose in-list is empty: nothing can reach that vertex.
const NO_IN_EDGES: u64 = u64::MAX;

pub fn bfs_with(store: &Store, source: u64, target: Option<u64>, parents: bool, steps: Steps, progress: Progress) -> Result<Bfs> {
    let n = store.num_nodes();
    for (what, v) in [("source", Some(source)), ("target", target)] {
        if let Some(v) = v.filter(|&v| v >= n) {
            return Err(EngineError::Invalid(format!("{what} vertex {v} is not in the graph ({n} vertices)")));
        }
    }
    let out = Lists::new(store, Direction::Out, false)?;
    // Bottom-up reads in-lists: an undirected store's are its out-lists; a
    // directed store without them runs top-down only.
    let has_in = !store.directed() || store.gtt(Direction::In).is_ok();
    let inn = match steps {
        Steps::TopDown => None,
        _ if has_in => Some(Lists::new(store, Direction::In, false)?),
        Steps::BottomUp => {
            return Err(EngineError::Unsupported("bottom-up BFS on a directed graph needs its in-edges; re-import with --in-edges (in_edges=True)".into()));
        }
        Steps::Auto => None,
    };
    let mut levels = vec![UNREACHED; n as usize];
    let mut par = parents.then(|| vec![-1i64; n as usize]);
    levels[source as usize] = 0;
    if let Some(p) = par.as_mut() {
        p[source as usize] = source as i64;
    }
    let (mut cur, mut next) = (Bitset::new(n), Bitset::new(n));
    cur.insert(source);
    let unvisited = Bitset::full(n);
    unvisited.remove(source);
    let (mut size, mut level, mut reached) = (1u64, 0i64, 1u64);
    while size > 0 && target.is_none_or(|t| levels[t as usize] == UNREACHED) {
        let bottom_up = match (&inn, steps) {
            (Some(_), Steps::BottomUp) => true,
            (Some(inn), Steps::Auto) => inn.cost(Frontier::Set(&unvisited)) <= out.cost(Frontier::Set(&cur)),
            _ => false,
        };
        let mut added = 0u64;
        let mut settle = |hits: Vec<(u64, u64)>| {
            for (v, p) in hits {
                // Top-down hits are out already: taking them was the claim.
                unvisited.remove(v);
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
            // Removing visited members while the reader plans ahead is
            // safe: they belong to batches it has already handed over.
            inn.batches(Frontier::Set(&unvisited), |b| {
                let hits = (0..b.len())
                    .into_par_iter()
                    .with_min_len(256)
                    .filter_map(|i| {
                        let (v, nbrs, _) = b.get(i);
                        if nbrs.is_empty() {
                            return Some((v, NO_IN_EDGES));
                        }
                        nbrs.iter().find(|&&u| cur.contains(u)).map(|&u| (v, u))
                    })
                    .collect();
                settle(hits);
            })?;
        } else {
            out.batches(Frontier::Set(&cur), |b| {
                let hits = (0..b.len())
                    .into_par_iter()
                    .with_min_len(64)
                    .flat_map_iter(|i| {
                        let (v, nbrs, _) = b.get(i);
                        // Whoever takes u out of `unvisited` first is its parent.
                        nbrs.iter().filter(|&&u| unvisited.contains(u) && unvisited.take(u)).map(move |&u| (u, v))
                    })
                    .collect();
                settle(hits);
            })?;
        }
        reached += added;
        progress("bfs", reached, n);
        std::mem::swap(&mut cur, &mut next);
        next.clear();
        size = added;
        level += 1;
    }
    Ok(Bfs { levels, parents: par })
}
