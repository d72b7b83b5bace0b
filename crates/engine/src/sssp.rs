//! Single-source shortest paths on edge weights: frontier Bellman-Ford, each
//! round relaxing the out-lists of every vertex whose distance improved, read
//! in one pass. Weights must be non-negative (checked as they are read).

use solidgraph_store::{Direction, Store};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::Lists;
use crate::state;

pub fn sssp(store: &Store, source: u64, progress: Progress) -> Result<Vec<f64>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    let n = store.num_nodes();
    if source >= n {
        return Err(EngineError::Invalid(format!("source vertex {source} is not in the graph ({n} vertices)")));
    }
    state::reserve("SSSP", store, 17, 0)?;
    let source = {
        let mut s = [source];
        store.to_internal(&mut s)?;
        s[0]
    };
    let lists = Lists::new(store, Direction::Out, true)?;
    let mut dist = state::filled(n as usize, f64::INFINITY);
    dist[source as usize] = 0.0;
    let mut frontier = vec![source];
    let mut in_next = vec![false; n as usize];
    let mut round = 0u64;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        let mut negative = None;
        lists.visit_checked(
            &frontier,
            |v, nbrs, ws| {
                let dv = dist[v as usize];
                for (&u, &w) in nbrs.iter().zip(ws) {
                    if w < 0.0 {
                        negative.get_or_insert((v, u, w));
                        continue;
                    }
                    let cand = dv + w as f64;
                    if cand < dist[u as usize] {
                        dist[u as usize] = cand;
                        if !in_next[u as usize] {
                            in_next[u as usize] = true;
                            next.push(u);
                        }
                    }
                }
            },
            |_| Ok(progress("sssp", round, round + 1)?),
        )?;
        if let Some((v, u, w)) = negative {
            return Err(EngineError::Invalid(format!("SSSP needs non-negative weights; edge {v} -> {u} has weight {w}")));
        }
        next.sort_unstable();
        next.iter().for_each(|&u| in_next[u as usize] = false);
        round += 1;
        progress("sssp", round, round + 1)?;
        frontier = next;
    }
    state::by_external(store, dist, |x| x)
}
