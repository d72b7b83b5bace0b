//! GraphSAGE neighbor sampling at the store (SmartSAGE): one call per
//! mini-batch. Each hop reads the lists of its whole frontier in one batch,
//! samples, relabels, and the features of every sampled node are gathered in
//! the same call (one batch of tensor pages). Output follows PyG's
//! `SamplerOutput`: `node` (seeds first), local `row`/`col` per edge with
//! messages flowing from `row` (the sampled neighbor) to `col` (the node it
//! was sampled for), global `edge` ids, nodes and edges per hop.
//!
//! Every draw comes from a generator seeded by (seed, hop, user id of the
//! vertex), so the result depends on the seed alone, not on batching or
//! threads; positions index the list in the store's order (by store id).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use solidgraph_store::{Csr, Direction, Need, Rows, Store, StoreError};

use crate::error::{EngineError, Result};
use crate::walks::WalkOptions;

/// A hop reads its frontier in parts of at most this many vertices and
/// (but for a single huge list) pages: deep enough queues, bounded memory.
const HOP_PART: usize = 4096;
pub(crate) const HOP_PAGES: usize = 4096;

/// Fanout meaning "every neighbor" (PyG's convention).
pub const ALL: i64 = -1;

#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// Neighbors per node at each hop; -1 takes all of them.
    pub fanouts: Vec<i64>,
    pub replace: bool,
    /// Draw neighbors with probability proportional to edge weight.
    pub weighted: bool,
    /// In: sample the nodes that point at each node (PyG's default).
    pub direction: Direction,
    pub seed: u64,
    /// Largest fanout accepted (a limit on the work of one call).
    pub max_fanout: i64,
    /// Tensors gathered for the sampled nodes.
    pub tensors: Vec<String>,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions { fanouts: vec![10, 10], replace: false, weighted: false, direction: Direction::In, seed: 0, max_fanout: 10_000, tensors: Vec::new() }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub node: Vec<u64>,
    pub row: Vec<u64>,
    pub col: Vec<u64>,
    pub edge: Vec<u64>,
    pub num_sampled_nodes: Vec<u64>,
    pub num_sampled_edges: Vec<u64>,
    /// One entry per requested tensor, rows in `node` order.
    pub tensors: Vec<Rows>,
}

/// The generator of one (seed, hop, vertex) draw, `v` the user's id.
///
/// With [`choose`], this is the draw a sample makes, public so that peers
/// can reproduce it: picking `choose(&mut rng_for(seed, hop, v), ...)`
/// positions in `v`'s list, in the store's order, selects the neighbors
/// [`sample_neighbors`] selects for `v` at that hop. solidgraph-bench's
/// sampler over CSR draws this way and checks its batches against ours.
pub fn rng_for(seed: u64, hop: u64, v: u64) -> Xoshiro256PlusPlus {
    let mut z = seed ^ hop.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

/// Picks `k` positions ([`ALL`]: every one) in a list of `d` edges; `w`
/// holds their weights when sampling by weight. The other half of the draw
/// a sample makes (see [`rng_for`]).
pub fn choose(rng: &mut Xoshiro256PlusPlus, d: usize, k: i64, replace: bool, w: Option<&[f32]>, out: &mut Vec<usize>) {
    out.clear();
    if d == 0 {
        return;
    }
    if k == ALL || (!replace && k as usize >= d && w.is_none_or(|w| w.iter().all(|&x| x > 0.0))) {
        out.extend(0..d);
        return;
    }
    let k = k as usize;
    match (w, replace) {
        (None, true) => out.extend((0..k).map(|_| rng.random_range(0..d))),
        (None, false) => {
            // Floyd's algorithm: k distinct positions in O(k).
            for j in d - k..d {
                let t = rng.random_range(0..=j);
                out.push(if out.contains(&t) { j } else { t });
            }
            out.sort_unstable();
        }
        (Some(w), true) => {
            let mut acc = Vec::with_capacity(d);
            let mut total = 0.0f64;
            for &x in w {
                total += x.max(0.0) as f64;
                acc.push(total);
            }
            if total <= 0.0 {
                return;
            }
            for _ in 0..k {
                let r = rng.random::<f64>() * total;
                out.push(acc.partition_point(|&a| a <= r).min(d - 1));
            }
        }
        (Some(w), false) => {
            // Efraimidis-Spirakis: the k largest ln(u) / w are a weighted
            // sample without replacement; zero weights are never drawn.
            let mut keys: Vec<(f64, usize)> = w.iter().enumerate().filter(|(_, x)| **x > 0.0).map(|(i, &x)| (rng.random::<f64>().ln() / x as f64, i)).collect();
            if keys.len() > k {
                keys.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
                keys.truncate(k);
            }
            out.extend(keys.iter().map(|&(_, i)| i));
            out.sort_unstable();
        }
    }
}

fn check_seeds(store: &Store, seeds: &[u64]) -> Result<()> {
    if seeds.is_empty() {
        return Err(EngineError::Invalid("empty seed list".into()));
    }
    let n = store.num_nodes();
    match seeds.iter().find(|&&v| v >= n) {
        Some(v) => Err(EngineError::Invalid(format!("seed {v} is not in the graph ({n} vertices)"))),
        None => Ok(()),
    }
}

/// Multi-hop neighbor sampling for one mini-batch. Repeated seeds are kept
/// once (first occurrence).
pub fn sample_neighbors(store: &Store, seeds: &[u64], o: &SampleOptions) -> Result<Sample> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    sample_subgraph(store, seeds, o)?.gather(store, &o.tensors)
}

/// A batch's sampled subgraph before its rows are gathered: a loader
/// samples batches ahead and tells the row cache which rows they will ask
/// for (`Store::expect_rows`) before gathering the earliest.
#[derive(Debug)]
pub struct Subgraph {
    /// Node ids are still the store's own; no tensors yet.
    sample: Sample,
}

impl Subgraph {
    /// The sampled nodes, in the store's ids: the rows the gather reads.
    pub fn nodes(&self) -> &[u64] {
        &self.sample.node
    }

    /// Sampled edges.
    pub fn edges(&self) -> usize {
        self.sample.row.len()
    }

    /// Gathers `tensors` for the nodes and gives the sample in user ids.
    pub fn gather(self, store: &Store, tensors: &[String]) -> Result<Sample> {
        let mut out = self.sample;
        for t in tensors {
            out.tensors.push(store.tensor(t, &out.node)?);
        }
        store.to_external(&mut out.node)?;
        Ok(out)
    }

    /// `gather` into the caller's buffers: `tensors[i]`'s rows go to
    /// `bufs[i]` (`nodes().len()` rows of its `row_bytes()` each), not to
    /// the sample, whose `tensors` stay empty. For a caller that owns where
    /// the rows must end up (a server's reply in shared memory).
    pub fn gather_into(self, store: &Store, tensors: &[String], bufs: &mut [&mut [u8]]) -> Result<Sample> {
        if tensors.len() != bufs.len() {
            return Err(EngineError::Invalid(format!("{} buffers for {} tensors", bufs.len(), tensors.len())));
        }
        let mut out = self.sample;
        for (t, buf) in tensors.iter().zip(bufs.iter_mut()) {
            store.tensor_into(t, &out.node, buf)?;
        }
        store.to_external(&mut out.node)?;
        Ok(out)
    }
}

/// `sample_neighbors` without the gather (tensor names are checked here).
pub fn sample_subgraph(store: &Store, seeds: &[u64], o: &SampleOptions) -> Result<Subgraph> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    let mut one = sample_subgraphs(store, &[seeds], &[o.seed], o)?;
    Ok(one.pop().expect("one subgraph per batch"))
}

/// The checks sampling makes that do not depend on the seeds, before any read.
pub(crate) fn check_options(store: &Store, o: &SampleOptions) -> Result<()> {
    if o.fanouts.is_empty() {
        return Err(EngineError::Invalid("fanouts must name at least one hop".into()));
    }
    if let Some(&bad) = o.fanouts.iter().find(|&&k| (k <= 0 && k != ALL) || k > o.max_fanout) {
        return Err(EngineError::Invalid(format!("fanout {bad} must be -1 (all) or in 1..={}", o.max_fanout)));
    }
    if o.weighted && !store.has_weights() {
        return Err(StoreError::Lacks { what: "weighted sampling needs edge weights, and this store has none".into(), need: Need::Weights }.into());
    }
    store.gtt(o.direction)?;
    for t in &o.tensors {
        store.tensor_meta(t)?;
    }
    Ok(())
}

/// One batch's growing sample.
struct Growing {
    out: Sample,
    /// Store id -> local id. Fx, not SipHash: a batch probes it once per
    /// sampled edge.
    local: FxHashMap<u64, u64>,
    /// The current hop's frontier: `out.node[start..end]`.
    start: usize,
    end: usize,
}

impl Growing {
    fn add(&mut self, u: u64) -> u64 {
        *self.local.entry(u).or_insert_with(|| {
            self.out.node.push(u);
            self.out.node.len() as u64 - 1
        })
    }
}

/// `sample_subgraph` for a group of batches, batch `j` drawn with seed
/// `seeds[j]`: the same subgraphs as sampling each alone. Each hop reads
/// the union of the group's frontiers once, in the store's order, so a
/// list (or page of lists) that several batches' frontiers hold is read
/// once for all of them, not once per batch or again after the page cache
/// let it go: hop-2 frontiers of a power-law graph share their high-degree
/// vertices, so a group misses far fewer pages than its batches alone.
pub fn sample_subgraphs(store: &Store, batches: &[&[u64]], seeds: &[u64], o: &SampleOptions) -> Result<Vec<Subgraph>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    if batches.len() != seeds.len() || batches.is_empty() {
        return Err(EngineError::Invalid(format!("{} batches need as many seeds, not {}, and at least one", batches.len(), seeds.len())));
    }
    check_options(store, o)?;
    let mut group = Vec::with_capacity(batches.len());
    for b in batches {
        check_seeds(store, b)?;
        let mut ids = b.to_vec();
        store.to_internal(&mut ids)?;
        let mut g = Growing { out: Sample::default(), local: FxHashMap::with_capacity_and_hasher(ids.len() * 8, Default::default()), start: 0, end: 0 };
        for s in ids {
            g.add(s);
        }
        g.end = g.out.node.len();
        g.out.num_sampled_nodes.push(g.end as u64);
        group.push(g);
    }
    let gtt = store.gtt(o.direction)?;
    for (hop, &k) in o.fanouts.iter().enumerate() {
        // Every (vertex, batch, place in that batch's frontier), in the
        // store's order: a vertex's lists and neighbours' lists sit on the
        // same or nearby pages.
        let mut pairs: Vec<(u64, u32, u32)> = Vec::new();
        let mut first = Vec::with_capacity(group.len());
        for (b, g) in group.iter().enumerate() {
            first.push(pairs.len());
            pairs.extend(g.out.node[g.start..g.end].iter().enumerate().map(|(i, &v)| (v, b as u32, i as u32)));
        }
        pairs.sort_unstable();
        let mut parts = Vec::new();
        let mut lo = 0;
        while lo < pairs.len() {
            // A part: whole vertices, at most HOP_PART of them and (but for
            // a single huge list) HOP_PAGES of their pages, so the queue is
            // deep while the pages held at once stay bounded (hub lists of a
            // power-law graph span many pages; the GTT knows how many).
            let (mut hi, mut vertices, mut pages) = (lo, 0, 0);
            while hi < pairs.len() && vertices < HOP_PART && (hi == lo || pages < HOP_PAGES) {
                let v = pairs[hi].0;
                pages += gtt.list_pages(v);
                vertices += 1;
                while hi < pairs.len() && pairs[hi].0 == v {
                    hi += 1;
                }
            }
            parts.push(lo..hi);
            lo = hi;
        }
        // Parts are drawn on the pool's threads: a part waits on its reads
        // most of the time, so two at once keep the device busy where one
        // leaves it idle while the other decodes. This matters most for a
        // loader's first group, sampled with nothing to gather beside it.
        let drawn: Vec<PartDraws> = parts.par_iter().map(|r| draw_part(store, hop, k, seeds, o, &pairs[r.clone()])).collect::<Result<_>>()?;
        // Pair p's neighbours: drawn[part].ids[a..z] for span[p] = (part, a, z).
        let mut span = Vec::with_capacity(pairs.len());
        for (d, part) in drawn.iter().enumerate() {
            span.extend(part.span.iter().map(|&(a, z)| (d, a, z)));
        }
        let mut at = vec![0; pairs.len()];
        for (p, &(_, b, i)) in pairs.iter().enumerate() {
            at[first[b as usize] + i as usize] = p;
        }
        for (b, g) in group.iter_mut().enumerate() {
            let edges_before = g.out.row.len();
            for i in 0..g.end - g.start {
                let lv = (g.start + i) as u64;
                let (d, a, z) = span[at[first[b] + i]];
                for q in a..z {
                    let lu = g.add(drawn[d].ids[q]);
                    g.out.row.push(lu);
                    g.out.col.push(lv);
                    g.out.edge.push(drawn[d].edges[q]);
                }
            }
            g.out.num_sampled_nodes.push((g.out.node.len() - g.end) as u64);
            g.out.num_sampled_edges.push((g.out.row.len() - edges_before) as u64);
            (g.start, g.end) = (g.end, g.out.node.len());
        }
    }
    Ok(group
        .into_iter()
        .map(|g| {
            // Held ahead for many batches: no growth slack (up to half).
            let mut sample = g.out;
            for v in [&mut sample.node, &mut sample.row, &mut sample.col, &mut sample.edge] {
                v.shrink_to_fit();
            }
            Subgraph { sample }
        })
        .collect())
}

/// A part's draws: pair j's neighbours and their edge ids are
/// `ids[span[j].0..span[j].1]` and the same range of `edges`.
struct PartDraws {
    ids: Vec<u64>,
    edges: Vec<u64>,
    span: Vec<(usize, usize)>,
}

/// Draws hop `hop`'s neighbours for `part` (pairs of one or more whole
/// vertices, as `sample_subgraphs` orders them), reading the part's pages
/// in one batch per kind of list.
fn draw_part(store: &Store, hop: usize, k: i64, seeds: &[u64], o: &SampleOptions, part: &[(u64, u32, u32)]) -> Result<PartDraws> {
    let vs: Vec<u64> = part.iter().map(|p| p.0).collect();
    let mut user = vs.clone();
    store.to_external(&mut user)?;
    let rng = |j: usize| rng_for(seeds[part[j].1 as usize], hop as u64, user[j]);
    // A hub's extent: draw the positions first (the GTT knows its degree)
    // and read only the pages that hold them, not the whole list. Same
    // positions as a full read would draw.
    let degrees = if o.weighted || k == ALL { vec![None; part.len()] } else { store.extent_degrees(&vs, o.direction)? };
    let mut drawn: Vec<Option<Vec<usize>>> = vec![None; part.len()];
    for (j, d) in degrees.iter().enumerate() {
        if let Some(d) = *d
            && (o.replace || (k as u64) < d)
        {
            let mut p = Vec::new();
            choose(&mut rng(j), d as usize, k, o.replace, None, &mut p);
            drawn[j] = Some(p);
        }
    }
    let req: Vec<(u64, u64, &[usize])> = (0..part.len()).filter_map(|j| Some((vs[j], degrees[j]?, drawn[j].as_deref()?))).collect();
    let at = if req.is_empty() { None } else { store.neighbors_at(o.direction, &req)? };
    if at.is_none() {
        drawn.iter_mut().for_each(|d| *d = None);
    }
    // The other lists: positions drawn once each list's degree is read,
    // decoding it only that far; whole lists when every neighbour is taken
    // or weights decide.
    let full: Vec<usize> = (0..part.len()).filter(|&j| drawn[j].is_none()).collect();
    let full_ids: Vec<u64> = full.iter().map(|&j| vs[j]).collect();
    let picked = if o.weighted || k == ALL {
        None
    } else {
        store.neighbors_drawn(&full_ids, o.direction, |f, d, out| choose(&mut rng(full[f]), d as usize, k, o.replace, None, out))?
    };
    let csr: Csr = if picked.is_some() { Csr::default() } else { store.neighbors(&full_ids, o.direction, o.weighted, false)? };
    let (mut f, mut q, mut r) = (0, 0, 0);
    let mut picks = Vec::new();
    let (mut ids, mut edges, mut span) = (Vec::new(), Vec::new(), Vec::with_capacity(part.len()));
    for (j, dj) in drawn.iter().enumerate() {
        let a = ids.len();
        if let (Some(p), Some((at_ids, at_edges))) = (dj, &at) {
            ids.extend_from_slice(&at_ids[q..q + p.len()]);
            edges.extend_from_slice(&at_edges[q..q + p.len()]);
            q += p.len();
        } else if let Some(p) = &picked {
            let n = p.counts[f];
            ids.extend_from_slice(&p.ids[r..r + n]);
            edges.extend_from_slice(&p.edges[r..r + n]);
            r += n;
            f += 1;
        } else {
            let (a, b) = (csr.indptr[f] as usize, csr.indptr[f + 1] as usize);
            let w = csr.weights.as_ref().map(|w| &w[a..b]);
            choose(&mut rng(j), b - a, k, o.replace, w, &mut picks);
            ids.extend(picks.iter().map(|&p| csr.indices[a + p]));
            edges.extend(picks.iter().map(|&p| csr.first_edge[f] + p as u64));
            f += 1;
        }
        span.push((a, ids.len()));
    }
    Ok(PartDraws { ids, edges, span })
}

/// GraphSAINT random-walk subgraph: the nodes that walks of `length` from
/// `roots` visit (sorted by the store's ids), the edges among them (local ids, `row` -> `col`
/// along stored edges of `direction`), and their features.
pub fn saint_subgraph(store: &Store, roots: &[u64], length: usize, seed: u64, direction: Direction, tensors: &[String]) -> Result<Sample> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    check_seeds(store, roots)?;
    let mut roots = roots.to_vec();
    store.to_internal(&mut roots)?;
    let walks = crate::walks::walk(store, &roots, &WalkOptions { length, p: 1.0, q: 1.0, seed, direction })?;
    let mut node = walks;
    node.sort_unstable();
    node.dedup();
    let csr = store.neighbors(&node, direction, false, false)?;
    let mut out = Sample { num_sampled_nodes: vec![node.len() as u64], ..Default::default() };
    for (i, _) in node.iter().enumerate() {
        let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
        for (p, &u) in csr.indices[a..b].iter().enumerate() {
            if let Ok(lu) = node.binary_search(&u) {
                out.row.push(i as u64);
                out.col.push(lu as u64);
                out.edge.push(csr.first_edge[i] + p as u64);
            }
        }
    }
    out.num_sampled_edges.push(out.row.len() as u64);
    for t in tensors {
        out.tensors.push(store.tensor(t, &node)?);
    }
    out.node = node;
    store.to_external(&mut out.node)?;
    Ok(out)
}
