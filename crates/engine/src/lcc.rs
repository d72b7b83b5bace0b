//! Local clustering coefficient (Graphalytics LCC): for each vertex v with
//! neighbor set N(v) (in and out, without v), the number of edges u -> w with
//! u, w in N(v), over |N(v)| (|N(v)| - 1). Works a chunk of vertices at a
//! time: their neighbor sets, then the out-lists of every neighbor of the
//! chunk in one batch, intersected with sorted merges.

use solidgraph_store::{Direction, Store};

use crate::error::{Progress, Result};
use crate::frontier::Lists;
use crate::state;

const CHUNK: u64 = 4096;

fn intersect(a: &[u64], b: &[u64]) -> u64 {
    let (mut i, mut j, mut c) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                c += 1;
                i += 1;
                j += 1;
            }
        }
    }
    c
}

pub fn lcc(store: &Store, progress: Progress) -> Result<Vec<f64>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    state::reserve("LCC", store, 8, 0)?;
    let n = store.num_nodes();
    let both = Lists::both(store, "LCC")?;
    let mut out = vec![0.0f64; n as usize];
    let mut lo = 0;
    while lo < n {
        let hi = (lo + CHUNK).min(n);
        let ids: Vec<u64> = (lo..hi).collect();
        // N(v): distinct neighbors in either direction, without v.
        let mut sets: Vec<Vec<u64>> = vec![Vec::new(); ids.len()];
        both.visit(&ids, |v, nbrs, _| {
            let s = &mut sets[(v - lo) as usize];
            s.extend(nbrs.iter().copied().filter(|&u| u != v));
            s.sort_unstable();
            s.dedup();
        })?;
        let mut need: Vec<u64> = sets.iter().filter(|s| s.len() > 1).flatten().copied().collect();
        need.sort_unstable();
        need.dedup();
        let adj = store.neighbors(&need, Direction::Out, false, false)?;
        let list = |u: u64| {
            let k = need.binary_search(&u).expect("fetched above");
            &adj.indices[adj.indptr[k] as usize..adj.indptr[k + 1] as usize]
        };
        for (i, s) in sets.iter().enumerate() {
            let d = s.len() as u64;
            if d < 2 {
                continue;
            }
            // A self-loop u -> u is not a link between two neighbors.
            let links: u64 = s.iter().map(|&u| intersect(list(u), s) - list(u).binary_search(&u).is_ok() as u64).sum();
            out[(lo + i as u64) as usize] = links as f64 / (d * (d - 1)) as f64;
        }
        progress("lcc", hi, n)?;
        lo = hi;
    }
    state::by_external(store, out, |x| x)
}
