//! k-core decomposition (core number of every vertex) by batched peeling,
//! after Batagelj and Zaversnik: vertices sit in an array sorted by current
//! degree; all vertices of the lowest bin are peeled together, their lists
//! read in one pass, and each live neighbor moves down one bin. Every list is
//! read once, when its vertex is peeled. State: three u32 arrays.

use solidgraph_store::Store;

use crate::error::{EngineError, Progress, Result};
use crate::frontier::Lists;

pub fn kcore(store: &Store, progress: Progress) -> Result<Vec<u32>> {
    let n = store.num_nodes();
    if n > u32::MAX as u64 {
        return Err(EngineError::Unsupported(format!("k-core supports up to 2^32 vertices; this graph has {n}")));
    }
    let lists = Lists::both(store, "k-core")?;
    let nn = n as usize;
    // Degree = distinct neighbors other than the vertex itself.
    let mut deg = vec![0u32; nn];
    let mut tmp: Vec<u64> = Vec::new();
    lists.scan(|v, nbrs, _| {
        tmp.clear();
        // Out- and in-lists of a directed store may share a neighbor.
        tmp.extend(nbrs.iter().copied().filter(|&u| u != v));
        tmp.sort_unstable();
        tmp.dedup();
        deg[v as usize] = tmp.len() as u32;
    })?;
    let maxd = deg.iter().copied().max().unwrap_or(0) as usize;
    // bin[d] = first position of degree d in `vert`; pos[v] = v's position.
    let mut bin = vec![0u32; maxd + 2];
    for &d in &deg {
        bin[d as usize + 1] += 1;
    }
    for d in 1..bin.len() {
        bin[d] += bin[d - 1];
    }
    let mut vert = vec![0u32; nn];
    let mut pos = vec![0u32; nn];
    let mut fill = bin.clone();
    for v in 0..nn {
        let d = deg[v] as usize;
        pos[v] = fill[d];
        vert[fill[d] as usize] = v as u32;
        fill[d] += 1;
    }
    let mut i = 0usize;
    let mut batch: Vec<u64> = Vec::new();
    while i < nn {
        // Peel every vertex whose degree equals the lowest current degree.
        let k = deg[vert[i] as usize];
        let mut j = i;
        while j < nn && deg[vert[j] as usize] <= k {
            j += 1;
        }
        // Degree-0 vertices have no live neighbor to update: peel them
        // without reading their lists (most of the first bin of a sparse
        // graph, 45% of a Kronecker graph's ids).
        let start = i;
        i = j;
        if k == 0 {
            progress("k-core", i as u64, n);
            continue;
        }
        batch.clear();
        batch.extend(vert[start..j].iter().map(|&v| v as u64));
        batch.sort_unstable();
        let mut seen: Vec<u64> = Vec::new();
        lists.visit(&batch, |v, nbrs, _| {
            seen.clear();
            seen.extend(nbrs.iter().copied().filter(|&u| u != v));
            seen.sort_unstable();
            seen.dedup();
            for &u in &seen {
                let u = u as usize;
                let du = deg[u];
                // Only live vertices above the peeled level move down a bin.
                if pos[u] as usize >= i && du > k {
                    let first = bin[du as usize] as usize;
                    let w = vert[first] as usize;
                    if w != u {
                        vert.swap(first, pos[u] as usize);
                        pos[w] = pos[u];
                        pos[u] = first as u32;
                    }
                    bin[du as usize] += 1;
                    deg[u] = du - 1;
                }
            }
        })?;
        // Neighbors that fell to k now sit at `i`: the next batch peels them
        // at this same level.
        progress("k-core", i as u64, n);
    }
    Ok(deg)
}
