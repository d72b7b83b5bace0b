//! How far from a target node a model's output reads: per input, the most
//! hops between an output row and the input rows it depends on, and over
//! the whole DFG, the most hops any output row's computation spans.
//!
//! A value's reach at a node is the radius of the neighbourhood it depends
//! on. Inputs and weights reach 0; a node-wise op reaches as far as its
//! farthest operand; an aggregation reaches one hop past the rows it
//! gathers (`spmm`, `spmm_gemm`); an edge score at `s -> d` reaches one hop
//! past `src`'s and as far as `dst`'s (`sddmm`), and a softmax over a
//! destination's edges as far as its scores. A request on the full
//! neighbourhood then needs the nodes within the total reach of the
//! targets, with each input's rows only within that input's reach: a
//! 2-layer GCN reads `x` within 2 hops though the third hop is expanded
//! for exact degrees.

use std::collections::HashMap;

use crate::dfg::{Dfg, Op};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// Per input of the DFG, in order; `None` when the output does not depend on it.
    pub inputs: Vec<Option<usize>>,
    /// Reach of the output counting every source (inputs and weights).
    pub total: usize,
}

impl Reach {
    /// The reach of `dfg`'s output (the DFG is checked: every operand is defined before it is read).
    pub fn of(dfg: &Dfg) -> Reach {
        let inputs = (0..dfg.inputs.len()).map(|i| reach(dfg, |name| (dfg.inputs[i].name == name).then_some(0))).collect();
        let total = reach(dfg, |name| (dfg.inputs.iter().any(|s| s.name == name) || dfg.weights.contains_key(name)).then_some(0)).unwrap_or(0);
        Reach { inputs, total }
    }
}

/// The output's reach, with `source` giving the reach of every name no op writes.
fn reach(dfg: &Dfg, source: impl Fn(&str) -> Option<usize>) -> Option<usize> {
    let mut at: HashMap<&str, Option<usize>> = HashMap::new();
    for node in &dfg.ops {
        let r = |name: &str| at.get(name).copied().unwrap_or_else(|| source(name));
        let hop = |name: &str| r(name).map(|v| v + 1);
        let value = match &node.op {
            Op::Spmm { x, edge_values, .. } => hop(x).max(edge_values.as_deref().and_then(r)),
            Op::SpmmGemm { x, weight, bias, .. } => hop(x).max(r(weight)).max(bias.as_deref().and_then(r)),
            Op::Sddmm { src, dst, .. } => hop(src).max(r(dst)),
            op => op.operands().into_iter().map(r).max().flatten(),
        };
        at.insert(&node.out, value);
    }
    at.get(dfg.output.as_str()).copied().unwrap_or_else(|| source(&dfg.output))
}
