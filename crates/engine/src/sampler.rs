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
use rustc_hash::FxHashMap;
use solidgraph_store::{Csr, Direction, Rows, Store};

use crate::error::{EngineError, Result};
use crate::walks::WalkOptions;

/// A hop reads its frontier in parts of at most this many vertices and
/// (but for a single huge list) pages: deep enough queues, bounded memory.
const HOP_PART: usize = 4096;
const HOP_PAGES: usize = 4096;

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

/// The generator of one (seed, hop, vertex) draw, `v` the user's id
/// (public so that baselines can reproduce the sampler exactly).
pub fn rng_for(seed: u64, hop: u64, v: u64) -> Xoshiro256PlusPlus {
    let mut z = seed ^ hop.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

/// Picks positions in a list of `d` edges; `w` holds their weights when
/// sampling by weight.
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
            let mut keys: Vec<(f64, usize)> =
                w.iter().enumerate().filter(|(_, x)| **x > 0.0).map(|(i, &x)| (rng.random::<f64>().ln() / x as f64, i)).collect();
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
    sample_subgraph(store, seeds, o)?.gather(store, &o.tensors)
}

/// A batch's sampled subgraph before its rows are gathered: a loader
/// samples batches ahead and tells the row cache which rows they will ask
/// for (`Store::expect_rows`) before gathering the earliest.
pub struct Subgraph {
    /// Node ids are still the store's own; no tensors yet.
    sample: Sample,
}

impl Subgraph {
    /// The sampled nodes, in the store's ids: the rows the gather reads.
    pub fn nodes(&self) -> &[u64] {
        &self.sample.node
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
}

/// `sample_neighbors` without the gather (tensor names are checked here).
pub fn sample_subgraph(store: &Store, seeds: &[u64], o: &SampleOptions) -> Result<Subgraph> {
    check_seeds(store, seeds)?;
    if o.fanouts.is_empty() {
        return Err(EngineError::Invalid("fanouts must name at least one hop".into()));
    }
    if let Some(&bad) = o.fanouts.iter().find(|&&k| (k <= 0 && k != ALL) || k > o.max_fanout) {
        return Err(EngineError::Invalid(format!("fanout {bad} must be -1 (all) or in 1..={}", o.max_fanout)));
    }
    if o.weighted && !store.has_weights() {
        return Err(EngineError::Invalid("weighted sampling needs edge weights; import with weights".into()));
    }
    for t in &o.tensors {
        store.tensor_meta(t)?;
    }
    let mut seeds = seeds.to_vec();
    store.to_internal(&mut seeds)?;
    let seeds = &seeds[..];
    let mut out = Sample::default();
    // Fx, not SipHash: a [25, 10] batch of 1024 seeds probes it ~280K times.
    let mut local: FxHashMap<u64, u64> = FxHashMap::with_capacity_and_hasher(seeds.len() * 8, Default::default());
    for &s in seeds {
        local.entry(s).or_insert_with(|| {
            out.node.push(s);
            out.node.len() as u64 - 1
        });
    }
    out.num_sampled_nodes.push(out.node.len() as u64);
    let (mut start, mut end) = (0usize, out.node.len());
    let mut picks = Vec::new();
    let gtt = store.gtt(o.direction)?;
    for (hop, &k) in o.fanouts.iter().enumerate() {
        let frontier: Vec<u64> = out.node[start..end].to_vec();
        let edges_before = out.row.len();
        // A hop reads its frontier in parts: one read per part keeps the
        // queue deep while the pages held at once stay bounded (hub lists
        // of a power-law graph span many pages; the GTT knows how many).
        // Same result for any part size: nodes are visited in order.
        let mut lo = 0;
        while lo < frontier.len() {
            let mut hi = lo;
            let mut pages = 0;
            while hi < frontier.len() && hi - lo < HOP_PART && (hi == lo || pages < HOP_PAGES) {
                pages += gtt.list_pages(frontier[hi]);
                hi += 1;
            }
            let part = &frontier[lo..hi];
            let mut user = part.to_vec();
            store.to_external(&mut user)?;
            // A hub's extent: draw the positions first (the GTT knows its
            // degree) and read only the pages that hold them, not the whole
            // list. Same positions as a full read would draw.
            let degrees = if o.weighted || k == ALL { vec![None; part.len()] } else { store.extent_degrees(part, o.direction)? };
            let mut drawn: Vec<Option<Vec<usize>>> = vec![None; part.len()];
            for (i, d) in degrees.iter().enumerate() {
                if let Some(d) = *d
                    && (o.replace || (k as u64) < d)
                {
                    let mut rng = rng_for(o.seed, hop as u64, user[i]);
                    let mut p = Vec::new();
                    choose(&mut rng, d as usize, k, o.replace, None, &mut p);
                    drawn[i] = Some(p);
                }
            }
            let req: Vec<(u64, u64, &[usize])> = (0..part.len()).filter_map(|i| Some((part[i], degrees[i]?, drawn[i].as_deref()?))).collect();
            let at = if req.is_empty() { None } else { store.neighbors_at(o.direction, &req)? };
            if at.is_none() {
                drawn.iter_mut().for_each(|d| *d = None);
            }
            // The other lists: positions drawn once each list's degree is
            // read, decoding it only that far; whole lists when every
            // neighbor is taken or weights decide.
            let full: Vec<usize> = (0..part.len()).filter(|&i| drawn[i].is_none()).collect();
            let full_ids: Vec<u64> = full.iter().map(|&i| part[i]).collect();
            let picked = if o.weighted || k == ALL {
                None
            } else {
                store.neighbors_drawn(&full_ids, o.direction, |f, d, out| {
                    choose(&mut rng_for(o.seed, hop as u64, user[full[f]]), d as usize, k, o.replace, None, out);
                })?
            };
            let csr: Csr = if picked.is_some() { Csr::default() } else { store.neighbors(&full_ids, o.direction, o.weighted, false)? };
            let (mut f, mut q, mut r) = (0, 0, 0);
            for i in 0..part.len() {
                let lv = (start + lo + i) as u64;
                let mut emit = |u: u64, e: u64, out: &mut Sample| {
                    let lu = *local.entry(u).or_insert_with(|| {
                        out.node.push(u);
                        out.node.len() as u64 - 1
                    });
                    out.row.push(lu);
                    out.col.push(lv);
                    out.edge.push(e);
                };
                if let (Some(p), Some((ids, edges))) = (&drawn[i], &at) {
                    for _ in p {
                        emit(ids[q], edges[q], &mut out);
                        q += 1;
                    }
                    continue;
                }
                if let Some(p) = &picked {
                    for _ in 0..p.counts[f] {
                        emit(p.ids[r], p.edges[r], &mut out);
                        r += 1;
                    }
                    f += 1;
                    continue;
                }
                let (a, b) = (csr.indptr[f] as usize, csr.indptr[f + 1] as usize);
                let w = csr.weights.as_ref().map(|w| &w[a..b]);
                let mut rng = rng_for(o.seed, hop as u64, user[i]);
                choose(&mut rng, b - a, k, o.replace, w, &mut picks);
                for &p in &picks {
                    emit(csr.indices[a + p], csr.first_edge[f] + p as u64, &mut out);
                }
                f += 1;
            }
            lo = hi;
        }
        out.num_sampled_nodes.push((out.node.len() - end) as u64);
        out.num_sampled_edges.push((out.row.len() - edges_before) as u64);
        (start, end) = (end, out.node.len());
    }
    Ok(Subgraph { sample: out })
}

/// GraphSAINT random-walk subgraph: the nodes that walks of `length` from
/// `roots` visit (sorted by the store's ids), the edges among them (local ids, `row` -> `col`
/// along stored edges of `direction`), and their features.
pub fn saint_subgraph(store: &Store, roots: &[u64], length: usize, seed: u64, direction: Direction, tensors: &[String]) -> Result<Sample> {
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
