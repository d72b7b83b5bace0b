//! One layer's bipartite graph: `n_dst` destination nodes, `n_src` source
//! nodes, edges in CSR by destination (`indices` hold source local ids),
//! optional edge weights. Destinations are the first `n_dst` sources (PyG's
//! `x_target = x[:size[1]]` convention), so `n_dst <= n_src`.
//!
//! The runner implements PyG's homogeneous "trim-free" convention for
//! sampled batches: every layer runs over the whole sampled node set with
//! every sampled edge (`n_dst == n_src == sample.node.len()`), exactly what
//! `model(batch.x, batch.edge_index)[:batch.batch_size]` computes after
//! PyG's `NeighborLoader`; the caller keeps the first `batch_size` rows.

use std::sync::Arc;

use solidgraph_engine::sampler::Sample;

use crate::dfg::{Norm, SelfLoops};
use crate::error::{Result, RunnerError};
use crate::limits::{MAX_BLOCK_EDGES, MAX_BLOCK_NODES};

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    n_dst: usize,
    n_src: usize,
    /// Shared so that the trim-free convention's identical layers cost one copy.
    indptr: Arc<[usize]>,
    indices: Arc<[u32]>,
    weights: Option<Arc<[f32]>>,
    /// Every source's degree in the whole graph, per (self-loops, weighted) view, for
    /// GCN's normalisation in a block that holds only part of the graph (`infer_all`'s chunks).
    degrees: Option<Arc<SrcDegrees>>,
}

/// Per (self-loops, weighted) view, each source's weighted in-degree in the whole graph (with its loop).
pub type SrcDegrees = Vec<((SelfLoops, bool), Vec<f32>)>;

impl Block {
    /// A block from its CSR by destination, every invariant checked.
    pub fn new(n_dst: usize, n_src: usize, indptr: Vec<usize>, indices: Vec<u32>, weights: Option<Vec<f32>>) -> Result<Block> {
        let bad = |message: String| Err(RunnerError::Block { index: 0, message });
        if n_dst > n_src || n_src > MAX_BLOCK_NODES {
            return bad(format!("{n_dst} destinations and {n_src} sources: destinations are the first sources, at most {MAX_BLOCK_NODES}"));
        }
        if indptr.len() != n_dst + 1 || indptr[0] != 0 || indptr[n_dst] != indices.len() || indices.len() > MAX_BLOCK_EDGES {
            return bad(format!("indptr of {} entries does not frame {} edges over {n_dst} destinations", indptr.len(), indices.len()));
        }
        if indptr.windows(2).any(|w| w[0] > w[1]) {
            return bad("indptr decreases".into());
        }
        if let Some(&s) = indices.iter().find(|&&s| s as usize >= n_src) {
            return bad(format!("source {s} is out of range of {n_src} sources"));
        }
        if let Some(w) = &weights {
            if w.len() != indices.len() {
                return bad(format!("{} edge weights for {} edges", w.len(), indices.len()));
            }
            if let Some(at) = w.iter().position(|x| !x.is_finite()) {
                return bad(format!("edge weight {at} is not finite ({})", w[at]));
            }
        }
        Ok(Block { n_dst, n_src, indptr: indptr.into(), indices: indices.into(), weights: weights.map(Into::into), degrees: None })
    }

    /// A block from edges `src[i] -> dst[i]` in local ids; each destination's
    /// edges keep their given order (a stable counting sort).
    pub fn from_edges(n_dst: usize, n_src: usize, src: &[u64], dst: &[u64], weights: Option<&[f32]>) -> Result<Block> {
        let bad = |message: String| Err(RunnerError::Block { index: 0, message });
        if src.len() != dst.len() || weights.is_some_and(|w| w.len() != src.len()) {
            return bad(format!("{} sources, {} destinations and {:?} weights for the edges", src.len(), dst.len(), weights.map(<[f32]>::len)));
        }
        if n_dst > n_src || n_src > MAX_BLOCK_NODES {
            return bad(format!("{n_dst} destinations and {n_src} sources: destinations are the first sources, at most {MAX_BLOCK_NODES}"));
        }
        if let Some(i) = (0..src.len()).find(|&i| dst[i] as usize >= n_dst || src[i] as usize >= n_src) {
            return bad(format!("edge {i} ({} -> {}) is out of range of {n_src} sources and {n_dst} destinations", src[i], dst[i]));
        }
        let mut indptr = vec![0usize; n_dst + 1];
        for &d in dst {
            indptr[d as usize + 1] += 1;
        }
        for i in 0..n_dst {
            indptr[i + 1] += indptr[i];
        }
        let mut at = indptr.clone();
        let mut indices = vec![0u32; src.len()];
        let mut w = weights.map(|_| vec![0f32; src.len()]);
        for i in 0..src.len() {
            let p = &mut at[dst[i] as usize];
            indices[*p] = src[i] as u32;
            if let (Some(w), Some(given)) = (w.as_mut(), weights) {
                w[*p] = given[i];
            }
            *p += 1;
        }
        Block::new(n_dst, n_src, indptr, indices, w)
    }

    /// The block with each source's whole-graph degrees (one value per source per view),
    /// which GCN's normalisation then uses instead of the degrees seen in the block.
    pub fn with_degrees(mut self, degrees: SrcDegrees) -> Result<Block> {
        if let Some((_, d)) = degrees.iter().find(|(_, d)| d.len() != self.n_src) {
            return Err(RunnerError::Block { index: 0, message: format!("{} source degrees for {} sources", d.len(), self.n_src) });
        }
        self.degrees = Some(Arc::new(degrees));
        Ok(self)
    }

    pub fn n_dst(&self) -> usize {
        self.n_dst
    }

    pub fn n_src(&self) -> usize {
        self.n_src
    }

    pub fn num_edges(&self) -> usize {
        self.indices.len()
    }

    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }

    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    pub fn weights(&self) -> Option<&[f32]> {
        self.weights.as_deref()
    }

    /// The edges an op reads: self-loops per `loops`, coefficients per `weighted` and `norm`.
    pub fn view(&self, loops: SelfLoops, weighted: bool, norm: Norm) -> EdgeView {
        let mut v = match loops {
            SelfLoops::None => EdgeView {
                n_dst: self.n_dst,
                n_src: self.n_src,
                indptr: self.indptr.to_vec(),
                indices: self.indices.to_vec(),
                coef: self.weights.as_deref().filter(|_| weighted).map_or_else(|| vec![1.0; self.indices.len()], <[f32]>::to_vec),
            },
            SelfLoops::Add => self.with_loops(weighted),
        };
        if norm == Norm::Sym {
            match self.degrees.as_deref().and_then(|d| d.iter().find(|(k, _)| *k == (loops, weighted))) {
                Some((_, deg)) => v.normalise_by(deg),
                None => v.normalise_sym(),
            }
        }
        v.check();
        v
    }

    /// PyG's `add_remaining_self_loops`: every existing loop `i -> i` is
    /// dropped and one loop per destination is appended at the end of its
    /// row, weighted as the last dropped loop of that row or 1.
    fn with_loops(&self, weighted: bool) -> EdgeView {
        let weight = |e: usize| {
            if weighted { self.weights.as_deref().map_or(1.0, |w| w[e]) } else { 1.0 }
        };
        let mut indptr = Vec::with_capacity(self.n_dst + 1);
        let mut indices = Vec::with_capacity(self.indices.len() + self.n_dst);
        let mut coef = Vec::with_capacity(self.indices.len() + self.n_dst);
        indptr.push(0);
        for i in 0..self.n_dst {
            let mut loop_weight = 1.0;
            for e in self.indptr[i]..self.indptr[i + 1] {
                if self.indices[e] as usize == i {
                    loop_weight = weight(e);
                } else {
                    indices.push(self.indices[e]);
                    coef.push(weight(e));
                }
            }
            indices.push(i as u32);
            coef.push(loop_weight);
            indptr.push(indices.len());
        }
        EdgeView { n_dst: self.n_dst, n_src: self.n_src, indptr, indices, coef }
    }
}

/// The edges one op reads, in CSR by destination, each with its coefficient
/// (edge weight, 1, and the symmetric normalisation when asked). Edge-valued
/// tensors (attention scores) have one row per edge of a view, in its order.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeView {
    pub n_dst: usize,
    pub n_src: usize,
    pub indptr: Vec<usize>,
    pub indices: Vec<u32>,
    pub coef: Vec<f32>,
}

impl EdgeView {
    pub fn num_edges(&self) -> usize {
        self.indices.len()
    }

    pub fn check(&self) {
        assert_eq!(self.indptr.len(), self.n_dst + 1, "one indptr entry per destination and one more");
        assert_eq!(self.indptr[self.n_dst], self.indices.len(), "indptr frames every edge");
        assert_eq!(self.coef.len(), self.indices.len(), "one coefficient per edge");
    }

    /// GCN's `D^-1/2 A D^-1/2`: each coefficient times deg(src)^-1/2 deg(dst)^-1/2, deg the
    /// weighted in-degree in this view (so with its self-loops), 0 where deg is 0 (PyG masks
    /// the inf). A source that is no destination (only in a trimmed bipartite block) has no
    /// in-edges here and takes its weighted out-degree instead.
    fn normalise_sym(&mut self) {
        let mut deg = vec![0f32; self.n_src];
        for (i, d) in deg.iter_mut().take(self.n_dst).enumerate() {
            *d = self.coef[self.indptr[i]..self.indptr[i + 1]].iter().sum();
        }
        for (e, &s) in self.indices.iter().enumerate() {
            if s as usize >= self.n_dst {
                deg[s as usize] += self.coef[e];
            }
        }
        self.normalise_by(&deg);
    }

    /// `normalise_sym` with given source degrees (destinations are the first sources).
    fn normalise_by(&mut self, deg: &[f32]) {
        assert_eq!(deg.len(), self.n_src, "one degree per source");
        let inv: Vec<f32> = deg.iter().map(|&d| if d > 0.0 { 1.0 / d.sqrt() } else { 0.0 }).collect();
        for i in 0..self.n_dst {
            for e in self.indptr[i]..self.indptr[i + 1] {
                self.coef[e] *= inv[self.indices[e] as usize] * inv[i];
            }
        }
    }
}

/// The per-layer blocks PyG's `NeighborLoader` + a `layers`-layer model
/// consume, trim-free: every layer is the whole sampled subgraph (all
/// `sample.node` as sources and destinations, every sampled edge
/// `row -> col`). `edge_weights`, when given, are aligned with `sample.edge`.
pub fn blocks_from_sample(sample: &Sample, layers: usize, edge_weights: Option<&[f32]>) -> Result<Vec<Block>> {
    let n = sample.node.len();
    let hops: u64 = sample.num_sampled_nodes.iter().sum();
    if hops != n as u64 || sample.row.len() != sample.col.len() {
        let message = format!("sample of {n} nodes counts {hops} per hop and has {} rows for {} cols", sample.row.len(), sample.col.len());
        return Err(RunnerError::Block { index: 0, message });
    }
    let block = Block::from_edges(n, n, &sample.row, &sample.col, edge_weights)?;
    Ok(vec![block; layers])
}

/// The full-graph (non-sampled) path: `layers` blocks over one square CSR by
/// destination of a whole k-hop neighbourhood in local ids (targets first).
pub fn blocks_full(n: usize, indptr: Vec<usize>, indices: Vec<u32>, weights: Option<Vec<f32>>, layers: usize) -> Result<Vec<Block>> {
    let block = Block::new(n, n, indptr, indices, weights)?;
    Ok(vec![block; layers])
}
