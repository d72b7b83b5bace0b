//! Breadth-first search, level by level; each level reads the lists of the
//! whole frontier in one pass (GraphSSD's BFS queries: an optional target
//! stops it early).

use solidgraph_store::{Direction, Store};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::Lists;

/// Level of an unreachable vertex (the Graphalytics convention).
pub const UNREACHED: i64 = i64::MAX;

#[derive(Debug, Clone)]
pub struct Bfs {
    pub levels: Vec<i64>,
    /// Parent on a shortest path (the source is its own parent; -1 when
    /// unreached), when asked for.
    pub parents: Option<Vec<i64>>,
}

pub fn bfs(store: &Store, source: u64, target: Option<u64>, parents: bool, progress: Progress) -> Result<Bfs> {
    let n = store.num_nodes();
    for (what, v) in [("source", Some(source)), ("target", target)] {
        if let Some(v) = v.filter(|&v| v >= n) {
            return Err(EngineError::Invalid(format!("{what} vertex {v} is not in the graph ({n} vertices)")));
        }
    }
    let lists = Lists::new(store, Direction::Out, false)?;
    let mut levels = vec![UNREACHED; n as usize];
    let mut par = parents.then(|| vec![-1i64; n as usize]);
    levels[source as usize] = 0;
    if let Some(p) = par.as_mut() {
        p[source as usize] = source as i64;
    }
    let mut frontier = vec![source];
    let mut level = 0i64;
    let mut reached = 1u64;
    while !frontier.is_empty() && target.is_none_or(|t| levels[t as usize] == UNREACHED) {
        let mut next = Vec::new();
        lists.visit(&frontier, |v, nbrs, _| {
            for &u in nbrs {
                if levels[u as usize] == UNREACHED {
                    levels[u as usize] = level + 1;
                    if let Some(p) = par.as_mut() {
                        p[u as usize] = v as i64;
                    }
                    next.push(u);
                }
            }
        })?;
        next.sort_unstable();
        reached += next.len() as u64;
        progress("bfs", reached, n);
        frontier = next;
        level += 1;
    }
    Ok(Bfs { levels, parents: par })
}
