//! Full k-hop in-neighbourhoods for inference requests: the subgraph
//! [`sample_neighbors`](crate::sampler::sample_neighbors) gives with every
//! fanout -1, with each tensor's rows gathered only as far out as the model
//! reads it.
//!
//! Each hop reads its whole frontier's in-lists (in store order, in parts
//! of bounded pages, each part one batch) while the rows of the same
//! frontier are gathered on a second thread (`Store::tensor`: each page
//! once, page-sorted). So the rows of hop h and the lists that find hop
//! h + 1 are in flight together, and nodes beyond a tensor's `hops` cost no
//! row read: a 2-layer GCN's third hop, which only gives the second hop's
//! exact degrees, reads lists but no rows.
//!
//! Edge weights, when asked, come from the same list reads, aligned with
//! the edges: repeated edges between two nodes keep their own weights.

use rustc_hash::FxHashMap;
use solidgraph_store::{Csr, Direction, Rows, Store};

use crate::error::{EngineError, Result};
use crate::sampler::Sample;

/// A hop's lists are read in parts of at most this many pages (16 MiB of
/// 4 KiB pages) or vertices: memory stays bounded on a huge frontier while
/// each part is still one deep batch.
const PART_PAGES: usize = 4096;
const PART_VERTICES: usize = 16384;

/// A limit on the work of one request: a neighbourhood past this many
/// edges fails with an error rather than exhausting memory.
pub const MAX_HOOD_EDGES: usize = 1 << 31;

/// A tensor to gather for the nodes within `hops` hops of the seeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoodRows {
    pub tensor: String,
    pub hops: usize,
}

/// The full `hops`-hop in-neighbourhood of `seeds` (user ids; repeats kept
/// once, first occurrence): nodes, edges and their order exactly as
/// `sample_neighbors` with `fanouts = [-1; hops]` and `Direction::In`.
/// `tensors[i]` of the result holds `rows[i].tensor`'s rows of the first
/// `num_sampled_nodes[..=rows[i].hops].sum()` nodes only (all of them when
/// `rows[i].hops >= hops`). With `weights`, the second value holds each
/// edge's own weight, aligned with `row`/`col`/`edge`.
pub fn full_neighbourhood(store: &Store, seeds: &[u64], hops: usize, rows: &[HoodRows], weights: bool) -> Result<(Sample, Option<Vec<f32>>)> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    check(store, seeds, rows, weights)?;
    let mut ids = seeds.to_vec();
    store.to_internal(&mut ids)?;
    let mut g = Hood { out: Sample::default(), weights: weights.then(Vec::new), local: FxHashMap::with_capacity_and_hasher(ids.len() * 8, Default::default()) };
    for s in ids {
        g.add(s);
    }
    g.out.num_sampled_nodes.push(g.out.node.len() as u64);
    let mut parts: Vec<Vec<Rows>> = vec![Vec::new(); rows.len()];
    let (mut start, mut end) = (0, g.out.node.len());
    for hop in 0..=hops {
        let frontier = &g.out.node[start..end];
        let wanted: Vec<&str> = rows.iter().filter(|r| r.hops >= hop).map(|r| r.tensor.as_str()).collect();
        let (lists, gathered) = std::thread::scope(|s| {
            let rows = s.spawn(|| wanted.iter().map(|t| store.tensor(t, frontier)).collect::<std::result::Result<Vec<Rows>, _>>());
            let lists = if hop < hops { Some(read_lists(store, frontier, weights)) } else { None };
            (lists, rows.join().expect("a gather thread does not panic"))
        });
        let mut gathered = gathered?.into_iter();
        for (r, p) in rows.iter().zip(parts.iter_mut()) {
            if r.hops >= hop {
                p.push(gathered.next().expect("one gather per wanted tensor"));
            }
        }
        let Some(lists) = lists else { break };
        g.expand(start, end, &lists?)?;
        (start, end) = (end, g.out.node.len());
    }
    g.out.tensors = parts.into_iter().map(concat).collect();
    store.to_external(&mut g.out.node)?;
    debug_assert!(g.weights.as_ref().is_none_or(|w| w.len() == g.out.row.len()), "one weight per edge");
    Ok((g.out, g.weights))
}

fn check(store: &Store, seeds: &[u64], rows: &[HoodRows], weights: bool) -> Result<()> {
    if seeds.is_empty() {
        return Err(EngineError::Invalid("empty seed list".into()));
    }
    let n = store.num_nodes();
    if let Some(v) = seeds.iter().find(|&&v| v >= n) {
        return Err(EngineError::Invalid(format!("seed {v} is not in the graph ({n} vertices)")));
    }
    store.gtt(Direction::In)?;
    if weights && !store.has_weights() {
        return Err(EngineError::Invalid("edge weights asked for, and this store has none (import with weights)".into()));
    }
    for r in rows {
        store.tensor_meta(&r.tensor)?;
    }
    Ok(())
}

/// The in-lists of `frontier` (store ids), in its order, with their weights
/// when asked: read in store order, in parts of bounded pages, then put
/// back in frontier order.
fn read_lists(store: &Store, frontier: &[u64], weights: bool) -> Result<Csr> {
    let gtt = store.gtt(Direction::In)?;
    let mut order: Vec<usize> = (0..frontier.len()).collect();
    order.sort_unstable_by_key(|&i| frontier[i]);
    let mut lists: Vec<(usize, Csr)> = Vec::new();
    let mut lo = 0;
    while lo < order.len() {
        let (mut hi, mut pages) = (lo, 0);
        while hi < order.len() && hi - lo < PART_VERTICES && (hi == lo || pages < PART_PAGES) {
            pages += gtt.list_pages(frontier[order[hi]]);
            hi += 1;
        }
        let ids: Vec<u64> = order[lo..hi].iter().map(|&i| frontier[i]).collect();
        lists.push((lo, store.neighbors(&ids, Direction::In, weights, false)?));
        lo = hi;
    }
    // Frontier position -> (part, index in the part).
    let mut at = vec![(0u32, 0u32); frontier.len()];
    for (p, (first, csr)) in lists.iter().enumerate() {
        for j in 0..csr.first_edge.len() {
            at[order[first + j]] = (p as u32, j as u32);
        }
    }
    let mut out = Csr { indptr: vec![0], weights: weights.then(Vec::new), ..Csr::default() };
    for &(p, j) in &at {
        let csr = &lists[p as usize].1;
        let (a, b) = (csr.indptr[j as usize] as usize, csr.indptr[j as usize + 1] as usize);
        out.indices.extend_from_slice(&csr.indices[a..b]);
        if let Some(w) = out.weights.as_mut() {
            let got = csr.weights.as_ref().ok_or_else(|| EngineError::Invalid("the store returned lists without the weights asked for".into()))?;
            w.extend_from_slice(&got[a..b]);
        }
        out.first_edge.push(csr.first_edge[j as usize]);
        out.indptr.push(out.indices.len() as u64);
    }
    Ok(out)
}

/// The growing neighbourhood: nodes in the order they are first reached.
struct Hood {
    out: Sample,
    /// Each edge's weight, aligned with `out.row`, when asked.
    weights: Option<Vec<f32>>,
    /// Store id -> local id (Fx: probed once per edge).
    local: FxHashMap<u64, u64>,
}

impl Hood {
    fn add(&mut self, u: u64) -> u64 {
        *self.local.entry(u).or_insert_with(|| {
            self.out.node.push(u);
            self.out.node.len() as u64 - 1
        })
    }

    /// Adds every in-edge of frontier nodes `start..end` (their lists, in order) and the nodes it reaches.
    fn expand(&mut self, start: usize, end: usize, lists: &Csr) -> Result<()> {
        let new_edges = lists.indices.len();
        if self.out.row.len() + new_edges > MAX_HOOD_EDGES {
            return Err(EngineError::Invalid(format!(
                "the neighbourhood passes {MAX_HOOD_EDGES} edges at hop {}: ask for fewer targets or sample (fanouts)",
                self.out.num_sampled_edges.len() + 1
            )));
        }
        let before = self.out.row.len();
        if let (Some(w), Some(got)) = (self.weights.as_mut(), lists.weights.as_ref()) {
            w.extend_from_slice(got);
        }
        for (f, lv) in (start..end).enumerate() {
            let (a, b) = (lists.indptr[f] as usize, lists.indptr[f + 1] as usize);
            for (q, &u) in lists.indices[a..b].iter().enumerate() {
                let lu = self.add(u);
                self.out.row.push(lu);
                self.out.col.push(lv as u64);
                self.out.edge.push(lists.first_edge[f] + q as u64);
            }
        }
        self.out.num_sampled_nodes.push((self.out.node.len() - end) as u64);
        self.out.num_sampled_edges.push((self.out.row.len() - before) as u64);
        Ok(())
    }
}

/// One tensor's rows gathered hop by hop, as one block of rows.
fn concat(parts: Vec<Rows>) -> Rows {
    let mut it = parts.into_iter();
    let mut out = it.next().expect("hop 0's rows are always gathered");
    for p in it {
        debug_assert!(p.dtype == out.dtype && p.dim == out.dim, "one tensor's rows share dtype and width");
        out.data.extend_from_slice(&p.data);
    }
    out
}
