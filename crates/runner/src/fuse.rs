//! Fusion before planning: an aggregation (sum or mean, no edge values)
//! whose result only the next op reads, as the `x` of a GEMM, becomes one
//! `spmm_gemm`, so the aggregated rows never leave the cache (GraphSAGE's
//! `lin_l(mean_j x_j)`). The fused op computes the same values.

use crate::dfg::{Dfg, Node, Op, Reduce};

/// `dfg` with every fusable aggregate + GEMM pair fused.
pub fn fuse(dfg: &Dfg) -> Dfg {
    let mut ops = Vec::with_capacity(dfg.ops.len());
    let mut i = 0;
    while i < dfg.ops.len() {
        match fused(dfg, i) {
            Some(node) => {
                ops.push(node);
                i += 2;
            }
            None => {
                ops.push(dfg.ops[i].clone());
                i += 1;
            }
        }
    }
    Dfg { ops, ..dfg.clone() }
}

fn fused(dfg: &Dfg, i: usize) -> Option<Node> {
    let (a, b) = (&dfg.ops[i], dfg.ops.get(i + 1)?);
    let Op::Spmm { x, block, reduce, norm, self_loops, edge_weight, edge_values: None } = &a.op else { return None };
    let Op::Gemm { x: gx, weight, bias } = &b.op else { return None };
    let read_elsewhere = dfg.ops.iter().enumerate().any(|(j, n)| j != i + 1 && n.op.operands().contains(&a.out.as_str()));
    if *reduce == Reduce::Max || gx != &a.out || read_elsewhere || dfg.output == a.out {
        return None;
    }
    let op = Op::SpmmGemm {
        x: x.clone(),
        block: *block,
        reduce: *reduce,
        norm: *norm,
        self_loops: *self_loops,
        edge_weight: *edge_weight,
        weight: weight.clone(),
        bias: bias.clone(),
    };
    Some(Node { op, out: b.out.clone() })
}
