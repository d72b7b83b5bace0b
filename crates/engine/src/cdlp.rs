//! Community detection by label propagation (Graphalytics CDLP): each
//! iteration every vertex takes the most frequent label among its neighbors
//! (in- and out-neighbors of a directed graph, each counted), the smallest
//! on ties; one sequential pass per iteration, synchronous updates. Labels
//! start as the user's ids (not the store's), so ties break as on the input.

use solidgraph_store::Store;

use crate::error::{Progress, Result};
use crate::frontier::Lists;
use crate::state;

pub fn cdlp(store: &Store, iterations: u32, progress: Progress) -> Result<Vec<u64>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    crate::check_iterations(iterations)?;
    state::reserve("CDLP", store, 16, 0)?;
    let n = store.num_nodes();
    let lists = Lists::both(store, "CDLP")?;
    let mut labels: Vec<u64> = state::from_fn(n as usize, |v| v as u64);
    store.to_external(&mut labels)?;
    let mut next = labels.clone();
    let mut buf: Vec<u64> = Vec::new();
    for it in 0..iterations {
        lists.scan_checked(
            |v, nbrs, _| {
                if nbrs.is_empty() {
                    next[v as usize] = labels[v as usize];
                    return;
                }
                buf.clear();
                buf.extend(nbrs.iter().map(|&u| labels[u as usize]));
                buf.sort_unstable();
                let (mut best, mut best_n) = (buf[0], 0usize);
                let mut i = 0;
                while i < buf.len() {
                    let j = i + buf[i..].partition_point(|&x| x == buf[i]);
                    if j - i > best_n {
                        (best, best_n) = (buf[i], j - i);
                    }
                    i = j;
                }
                next[v as usize] = best;
            },
            |_| Ok(progress("cdlp", it as u64, iterations as u64)?),
        )?;
        std::mem::swap(&mut labels, &mut next);
        progress("cdlp", it as u64 + 1, iterations as u64)?;
    }
    drop(next);
    state::by_external_small(store, &mut labels)?;
    Ok(labels)
}
