//! Builders of the DFG of each model the runner ships, named after PyG's
//! parameters (`state_dict` keys) so that an exporter fills the same names.
//! Each layer reads block l; dropout is the identity (eval mode).
//!
//! Semantics, per layer (x_i the node's row, N(i) its in-neighbours in the block):
//! - GCN = PyG `GCNConv` (defaults): `lin` (no bias), then
//!   `D^-1/2 (A + I) D^-1/2` with `add_remaining_self_loops` (fill 1, edge
//!   weights when `edge_weight`), then `+ bias`; ReLU between layers.
//! - GraphSAGE = PyG `SAGEConv(aggr="mean", root_weight=True)`:
//!   `lin_l(mean_{j in N(i)} x_j) + lin_r(x_i)` (lin_l has the bias, lin_r none;
//!   no neighbours: mean 0); ReLU between layers.
//! - GIN = PyG `GINConv(nn, eps)` with `nn = Linear, ReLU, Linear` (keys
//!   `nn.0`, `nn.2`): `nn((1 + eps) x_i + sum_{j in N(i)} x_j)`; ReLU between layers.
//! - GAT = PyG `GATConv(heads, concat, negative_slope=0.2, add_self_loops=True,
//!   edge_dim=None, bias=True)`: `h = lin(x)` (no bias), per head
//!   `a_ij = softmax_j(leaky_relu(<h_j, att_src> + <h_i, att_dst>, 0.2))` over
//!   N(i) with existing self-loops removed and one added, `out_i = sum_j a_ij h_j`,
//!   heads concatenated (or averaged when `concat` is false), `+ bias`; ELU between layers.
//! - NGCF (Wang et al. 2019, as NGCF-PyTorch computes it; not in PyG):
//!   `side = D^-1/2 A D^-1/2 e` (no self-loops), `e' = leaky_relu(W_gc side + b_gc)
//!   + leaky_relu(W_bi (e * side) + b_bi)` (slope 0.2), and the output is
//!   `concat(e_0, l2norm(e_1), ..., l2norm(e_L))`; layer l + 1 reads the unnormalised `e_l`.

use std::collections::BTreeMap;

use crate::dfg::{Dfg, InputSpec, Node, Op, Reduce, SelfLoops};
use crate::dfg::{Norm, ScoreMode};
use crate::weights::Weight;

/// The DFG under construction: fresh value names, declared weights.
struct Builder {
    dfg: Dfg,
    next: usize,
}

impl Builder {
    fn new(name: &str, blocks: usize, in_dim: usize) -> Builder {
        let inputs = vec![InputSpec { name: "x".into(), cols: in_dim }];
        Builder { dfg: Dfg { name: name.into(), blocks, inputs, weights: BTreeMap::new(), ops: Vec::new(), output: String::new() }, next: 0 }
    }

    fn weight(&mut self, name: String, shape: &[usize]) -> String {
        self.dfg.weights.insert(name.clone(), shape.to_vec());
        name
    }

    fn op(&mut self, op: Op) -> String {
        let out = format!("v{}", self.next);
        self.next += 1;
        self.dfg.ops.push(Node { op, out: out.clone() });
        out
    }

    fn linear(&mut self, x: String, prefix: &str, dims: (usize, usize), bias: bool) -> String {
        let weight = self.weight(format!("{prefix}.weight"), &[dims.1, dims.0]);
        let bias = bias.then(|| self.weight(format!("{prefix}.bias"), &[dims.1]));
        self.op(Op::Gemm { x, weight, bias })
    }

    fn finish(mut self, output: String) -> Dfg {
        self.dfg.output = output;
        self.dfg
    }
}

fn layer_dims(in_dim: usize, widths: &[usize]) -> Vec<(usize, usize)> {
    assert!(!widths.is_empty() && in_dim > 0, "a model has an input width and at least one layer");
    std::iter::once(in_dim).chain(widths.iter().copied()).zip(widths.iter().copied()).collect()
}

/// A stack of `GCNConv`s of output widths `widths`.
pub fn gcn(in_dim: usize, widths: &[usize], edge_weight: bool) -> Dfg {
    let dims = layer_dims(in_dim, widths);
    let mut b = Builder::new("gcn", dims.len(), in_dim);
    let mut h = "x".to_string();
    for (l, &d) in dims.iter().enumerate() {
        let lin = b.linear(h, &format!("convs.{l}.lin"), d, false);
        let agg = b.op(Op::Spmm { x: lin, block: l, reduce: Reduce::Sum, norm: Norm::Sym, self_loops: SelfLoops::Add, edge_weight, edge_values: None });
        let bias = b.weight(format!("convs.{l}.bias"), &[d.1]);
        h = b.op(Op::Add { a: agg, b: bias });
        if l + 1 < dims.len() {
            h = b.op(Op::Relu { x: h });
        }
    }
    b.finish(h)
}

/// A stack of mean `SAGEConv`s.
pub fn sage(in_dim: usize, widths: &[usize]) -> Dfg {
    let dims = layer_dims(in_dim, widths);
    let mut b = Builder::new("sage", dims.len(), in_dim);
    let mut h = "x".to_string();
    for (l, &d) in dims.iter().enumerate() {
        let agg = b.op(Op::Spmm {
            x: h.clone(),
            block: l,
            reduce: Reduce::Mean,
            norm: Norm::None,
            self_loops: SelfLoops::None,
            edge_weight: false,
            edge_values: None,
        });
        let left = b.linear(agg, &format!("convs.{l}.lin_l"), d, true);
        let root = b.op(Op::SliceDst { x: h, block: l });
        let right = b.linear(root, &format!("convs.{l}.lin_r"), d, false);
        h = b.op(Op::Add { a: left, b: right });
        if l + 1 < dims.len() {
            h = b.op(Op::Relu { x: h });
        }
    }
    b.finish(h)
}

/// A stack of `GINConv`s, each MLP `Linear(in, w), ReLU, Linear(w, w)`.
pub fn gin(in_dim: usize, widths: &[usize], eps: f32) -> Dfg {
    let dims = layer_dims(in_dim, widths);
    let mut b = Builder::new("gin", dims.len(), in_dim);
    let mut h = "x".to_string();
    for (l, &d) in dims.iter().enumerate() {
        let agg = b.op(Op::Spmm {
            x: h.clone(),
            block: l,
            reduce: Reduce::Sum,
            norm: Norm::None,
            self_loops: SelfLoops::None,
            edge_weight: false,
            edge_values: None,
        });
        let root = b.op(Op::SliceDst { x: h, block: l });
        let root = b.op(Op::Scale { x: root, factor: 1.0 + eps });
        let z = b.op(Op::Add { a: agg, b: root });
        let z = b.linear(z, &format!("convs.{l}.nn.0"), d, true);
        let z = b.op(Op::Relu { x: z });
        h = b.linear(z, &format!("convs.{l}.nn.2"), (d.1, d.1), true);
        if l + 1 < dims.len() {
            h = b.op(Op::Relu { x: h });
        }
    }
    b.finish(h)
}

/// A stack of `GATConv`s: layer l has `heads[l]` heads of `widths[l]` channels,
/// concatenated but for the last layer when `concat_last` is false (averaged).
pub fn gat(in_dim: usize, widths: &[usize], heads: &[usize], concat_last: bool) -> Dfg {
    assert_eq!(widths.len(), heads.len(), "one head count per layer");
    let mut b = Builder::new("gat", widths.len(), in_dim);
    let mut h = "x".to_string();
    let mut width = in_dim;
    for (l, (&c, &nh)) in widths.iter().zip(heads).enumerate() {
        let last = l + 1 == widths.len();
        let concat = !last || concat_last;
        let p = format!("convs.{l}");
        let lin = b.linear(h, &format!("{p}.lin"), (width, nh * c), false);
        let att_src = b.weight(format!("{p}.att_src"), &[1, nh, c]);
        let att_dst = b.weight(format!("{p}.att_dst"), &[1, nh, c]);
        let a_src = b.op(Op::HeadDot { x: lin.clone(), att: att_src, heads: nh });
        let a_dst = b.op(Op::HeadDot { x: lin.clone(), att: att_dst, heads: nh });
        let e = b.op(Op::Sddmm { src: a_src, dst: a_dst, block: l, self_loops: SelfLoops::Add, mode: ScoreMode::Add, heads: nh });
        let e = b.op(Op::LeakyRelu { x: e, slope: 0.2 });
        let alpha = b.op(Op::EdgeSoftmax { x: e, block: l, self_loops: SelfLoops::Add });
        let agg = b.op(Op::Spmm {
            x: lin,
            block: l,
            reduce: Reduce::Sum,
            norm: Norm::None,
            self_loops: SelfLoops::Add,
            edge_weight: false,
            edge_values: Some(alpha),
        });
        let (agg, out) = if concat { (agg, nh * c) } else { (b.op(Op::HeadMean { x: agg, heads: nh }), c) };
        let bias = b.weight(format!("{p}.bias"), &[out]);
        h = b.op(Op::Add { a: agg, b: bias });
        width = out;
        if !last {
            h = b.op(Op::Elu { x: h, alpha: 1.0 });
        }
    }
    b.finish(h)
}

/// NGCF with embedding width `in_dim` and layer widths `widths`.
pub fn ngcf(in_dim: usize, widths: &[usize]) -> Dfg {
    let dims = layer_dims(in_dim, widths);
    let mut b = Builder::new("ngcf", dims.len(), in_dim);
    let mut ego = "x".to_string();
    let mut parts = vec![ego.clone()];
    for (l, &d) in dims.iter().enumerate() {
        let p = format!("layers.{l}");
        let side = b.op(Op::Spmm {
            x: ego.clone(),
            block: l,
            reduce: Reduce::Sum,
            norm: Norm::Sym,
            self_loops: SelfLoops::None,
            edge_weight: false,
            edge_values: None,
        });
        let root = b.op(Op::SliceDst { x: ego, block: l });
        let bi = b.op(Op::Mul { a: root, b: side.clone() });
        let sum = b.linear(side, &format!("{p}.W_gc"), d, true);
        let sum = b.op(Op::LeakyRelu { x: sum, slope: 0.2 });
        let bi = b.linear(bi, &format!("{p}.W_bi"), d, true);
        let bi = b.op(Op::LeakyRelu { x: bi, slope: 0.2 });
        ego = b.op(Op::Add { a: sum, b: bi });
        parts.push(b.op(Op::L2Norm { x: ego.clone(), eps: 1e-12 }));
    }
    let out = b.op(Op::Concat { xs: parts });
    b.finish(out)
}

/// Weights for every weight `dfg` declares, uniform in [-scale, scale], from `seed` (tests, benchmarks).
pub fn random_weights(dfg: &Dfg, seed: u64, scale: f32) -> BTreeMap<String, Weight> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        // xorshift64*: reproducible without a dependency.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let bits = (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
        (2.0 * bits - 1.0) * scale
    };
    dfg.weights.iter().map(|(n, shape)| (n.clone(), Weight::new(shape.clone(), (0..shape.iter().product()).map(|_| next()).collect()))).collect()
}
