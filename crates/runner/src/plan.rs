//! A DFG checked and resolved for running: every name bound to a slot, every
//! op's columns inferred from the inputs and weights (so a model that does
//! not fit its input width fails at load), each intermediate freed after its
//! last use. Row counts depend on the blocks and are checked per run.

use std::collections::HashMap;

use crate::block::{Block, EdgeView};
use crate::dfg::{Dfg, Op, Reduce, ScoreMode, SelfLoops};
use crate::error::{Result, RunnerError};
use crate::limits::{MAX_COLS, MAX_HEADS, MAX_NAME};
use crate::tensor::Tensor;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Node rows (as many as the block's sources or destinations).
    Node,
    /// One row per edge of `block` seen with `loops`.
    Edge { block: usize, loops: SelfLoops },
    /// A weight of a fixed number of rows.
    Weight { rows: usize },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Info {
    pub kind: Kind,
    pub cols: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slot {
    Input(usize),
    Weight(usize),
    Value(usize),
}

#[derive(Debug, Clone)]
pub struct Step {
    /// The op's index in model.json (named in errors).
    pub index: usize,
    pub op: Op,
    pub args: Vec<Slot>,
    pub out: usize,
    pub info: Info,
    /// Values no later step reads: dropped after this one.
    pub free: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub values: usize,
    pub output: Slot,
    /// Weight slot -> name.
    pub weight_names: Vec<String>,
}

/// Checks `dfg` against the declared weight shapes and binds every name.
pub fn compile(dfg: &Dfg) -> Result<Plan> {
    let mut table: HashMap<String, (Slot, Info)> = HashMap::new();
    let mut bind = |name: &str, slot: Slot, info: Info| -> Result<()> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(RunnerError::Invalid(format!("name {name:?} must be 1 to {MAX_NAME} bytes")));
        }
        if table.insert(name.to_string(), (slot, info)).is_some() {
            return Err(RunnerError::Invalid(format!("{name:?} is defined twice (values are single-assignment)")));
        }
        Ok(())
    };
    let mut input_infos = Vec::new();
    for (i, input) in dfg.inputs.iter().enumerate() {
        if input.cols == 0 || input.cols > MAX_COLS {
            return Err(RunnerError::Invalid(format!("input {:?} declares {} columns: 1 to {MAX_COLS}", input.name, input.cols)));
        }
        input_infos.push(Info { kind: Kind::Node, cols: input.cols });
        bind(&input.name, Slot::Input(i), input_infos[i])?;
    }
    let mut weight_names = Vec::new();
    for (w, (name, shape)) in dfg.weights.iter().enumerate() {
        crate::weights::check_declared(name, shape)?;
        let cols = shape[shape.len() - 1];
        let rows = shape.iter().product::<usize>() / cols;
        bind(name, Slot::Weight(w), Info { kind: Kind::Weight { rows }, cols })?;
        weight_names.push(name.clone());
    }
    let mut steps = Vec::with_capacity(dfg.ops.len());
    for (index, node) in dfg.ops.iter().enumerate() {
        let shape = |message: String| RunnerError::Shape { index, op: node.op.name().into(), message };
        if let Some(b) = node.op.block().filter(|&b| b >= dfg.blocks) {
            return Err(RunnerError::BadOp { index, op: node.op.name().into(), message: format!("block {b} is not one of the model's {} blocks", dfg.blocks) });
        }
        let mut args = Vec::new();
        let mut infos = Vec::new();
        for name in node.op.operands() {
            let &(slot, info) = table.get(name).ok_or_else(|| shape(format!("reads {name:?}, which no input, weight or earlier op defines")))?;
            args.push(slot);
            infos.push(info);
        }
        let info = infer(&node.op, &infos).map_err(shape)?;
        if info.cols == 0 || info.cols > MAX_COLS {
            return Err(shape(format!("would write {} columns: 1 to {MAX_COLS}", info.cols)));
        }
        if node.out.is_empty() || node.out.len() > MAX_NAME || table.contains_key(&node.out) {
            return Err(RunnerError::BadOp {
                index,
                op: node.op.name().into(),
                message: format!("out {:?} must be a new name of 1 to {MAX_NAME} bytes", node.out),
            });
        }
        table.insert(node.out.clone(), (Slot::Value(index), info));
        steps.push(Step { index, op: node.op.clone(), args, out: index, info, free: Vec::new() });
    }
    let &(output, out_info) = table.get(&dfg.output).ok_or_else(|| RunnerError::Invalid(format!("output {:?} is not defined", dfg.output)))?;
    if out_info.kind != Kind::Node {
        return Err(RunnerError::Invalid(format!("output {:?} must be a node value", dfg.output)));
    }
    free_after_last_use(&mut steps, output);
    Ok(Plan { values: steps.len(), steps, output, weight_names })
}

fn free_after_last_use(steps: &mut [Step], output: Slot) {
    let mut last = vec![None; steps.len()];
    for (s, step) in steps.iter().enumerate() {
        for a in &step.args {
            if let Slot::Value(v) = *a {
                last[v] = Some(s);
            }
        }
    }
    for (v, l) in last.iter().enumerate() {
        if Slot::Value(v) != output {
            steps[l.unwrap_or(v)].free.push(v);
        }
    }
}

fn want(cond: bool, message: impl FnOnce() -> String) -> std::result::Result<(), String> {
    if cond { Ok(()) } else { Err(message()) }
}

fn node(i: &Info, what: &str) -> std::result::Result<(), String> {
    want(i.kind == Kind::Node, || format!("{what} must be a node value, not {:?}", i.kind))
}

fn vector(i: &Info, cols: usize, what: &str) -> std::result::Result<(), String> {
    want(matches!(i.kind, Kind::Weight { rows: 1 }) && i.cols == cols, || format!("{what} must be a weight of {cols} values, not {:?} x {}", i.kind, i.cols))
}

fn heads_of(heads: usize, cols: usize) -> std::result::Result<(), String> {
    want((1..=MAX_HEADS).contains(&heads) && cols.is_multiple_of(heads), || format!("{heads} heads must be 1 to {MAX_HEADS} and divide {cols} columns"))
}

/// The columns (and kind) an op writes, from what it reads.
fn infer(op: &Op, a: &[Info]) -> std::result::Result<Info, String> {
    let same = |i: &Info| Info { kind: i.kind, cols: i.cols };
    match op {
        Op::Spmm { block, self_loops, edge_values, .. } => {
            node(&a[0], "x")?;
            if edge_values.is_some() {
                want(a[1].kind == Kind::Edge { block: *block, loops: *self_loops }, || {
                    format!("edge_values must score block {block}'s edges with self_loops {self_loops:?}")
                })?;
                heads_of(a[1].cols, a[0].cols)?;
            }
            Ok(Info { kind: Kind::Node, cols: a[0].cols })
        }
        Op::Gemm { .. } | Op::SpmmGemm { .. } => {
            node(&a[0], "x")?;
            if let Op::SpmmGemm { reduce, .. } = op {
                want(*reduce != Reduce::Max, || "fused aggregation is sum or mean (max does not commute with the GEMM)".into())?;
            }
            let Kind::Weight { rows: out } = a[1].kind else {
                return Err("weight must be a weight [out, in]".into());
            };
            want(a[1].cols == a[0].cols, || format!("weight is [{out}, {}] but x has {} columns", a[1].cols, a[0].cols))?;
            if a.len() > 2 {
                vector(&a[2], out, "bias")?;
            }
            Ok(Info { kind: Kind::Node, cols: out })
        }
        Op::Relu { .. } | Op::LeakyRelu { .. } | Op::Elu { .. } | Op::Sigmoid { .. } | Op::Tanh { .. } | Op::Scale { .. } => {
            want(!matches!(a[0].kind, Kind::Weight { .. }), || "x must be a node or edge value".into())?;
            Ok(same(&a[0]))
        }
        Op::Add { .. } | Op::Mul { .. } => {
            want(!matches!(a[0].kind, Kind::Weight { .. }), || "a must be a node or edge value".into())?;
            want(a[1].cols == a[0].cols, || format!("a has {} columns, b {}", a[0].cols, a[1].cols))?;
            want(a[1].kind == a[0].kind || a[1].kind == Kind::Weight { rows: 1 }, || {
                format!("b ({:?}) must be like a ({:?}) or a one-row weight", a[1].kind, a[0].kind)
            })?;
            Ok(same(&a[0]))
        }
        Op::Concat { xs } => {
            want(!xs.is_empty(), || "concat needs at least one value".into())?;
            a.iter().try_for_each(|i| node(i, "every concatenated value"))?;
            Ok(Info { kind: Kind::Node, cols: a.iter().map(|i| i.cols).sum() })
        }
        Op::L2Norm { eps, .. } | Op::BatchNorm { eps, .. } => {
            node(&a[0], "x")?;
            want(eps.is_finite() && *eps >= 0.0, || format!("eps {eps} must be finite and not negative"))?;
            a[1..].iter().zip(["weight", "bias", "mean", "var"]).try_for_each(|(i, what)| vector(i, a[0].cols, what))?;
            Ok(same(&a[0]))
        }
        Op::HeadDot { heads, .. } => {
            node(&a[0], "x")?;
            heads_of(*heads, a[0].cols)?;
            let c = a[0].cols / heads;
            want(a[1].kind == Kind::Weight { rows: *heads } && a[1].cols == c, || format!("att must be a weight [{heads}, {c}] (or [1, {heads}, {c}])"))?;
            Ok(Info { kind: Kind::Node, cols: *heads })
        }
        Op::Sddmm { block, self_loops, mode, heads, .. } => {
            node(&a[0], "src")?;
            node(&a[1], "dst")?;
            want(a[0].cols == a[1].cols, || format!("src has {} columns, dst {}", a[0].cols, a[1].cols))?;
            heads_of(*heads, a[0].cols)?;
            let cols = if *mode == ScoreMode::Add { a[0].cols } else { *heads };
            Ok(Info { kind: Kind::Edge { block: *block, loops: *self_loops }, cols })
        }
        Op::EdgeSoftmax { block, self_loops, .. } => {
            want(a[0].kind == Kind::Edge { block: *block, loops: *self_loops }, || {
                format!("x must score block {block}'s edges with self_loops {self_loops:?}")
            })?;
            Ok(same(&a[0]))
        }
        Op::HeadMean { heads, .. } => {
            node(&a[0], "x")?;
            heads_of(*heads, a[0].cols)?;
            Ok(Info { kind: Kind::Node, cols: a[0].cols / heads })
        }
        Op::SliceDst { .. } => {
            node(&a[0], "x")?;
            Ok(same(&a[0]))
        }
    }
}

/// The row counts an op needs of its operands, checked before its kernel runs
/// so that kernels may assert them.
pub fn check_rows(op: &Op, x: &[&Tensor], block: Option<&Block>, edges: Option<&EdgeView>) -> std::result::Result<(), String> {
    let src = |t: &Tensor, v: &EdgeView, what: &str| want(t.rows == v.n_src, || format!("{what} has {} rows for a block of {} sources", t.rows, v.n_src));
    match op {
        Op::Spmm { edge_values, .. } => {
            let v = edges.expect("spmm reads edges");
            src(x[0], v, "x")?;
            if edge_values.is_some() {
                want(x[1].rows == v.num_edges(), || format!("edge_values has {} rows for {} edges", x[1].rows, v.num_edges()))?;
            }
            Ok(())
        }
        Op::SpmmGemm { .. } => src(x[0], edges.expect("spmm_gemm reads edges"), "x"),
        Op::Add { .. } | Op::Mul { .. } => want(x[1].rows == x[0].rows || x[1].rows == 1, || format!("a has {} rows, b {}", x[0].rows, x[1].rows)),
        Op::Concat { .. } => want(x.iter().all(|t| t.rows == x[0].rows), || format!("rows differ: {:?}", x.iter().map(|t| t.rows).collect::<Vec<_>>())),
        Op::Sddmm { .. } => {
            let v = edges.expect("sddmm reads edges");
            src(x[0], v, "src")?;
            want(x[1].rows >= v.n_dst, || format!("dst has {} rows for {} destinations", x[1].rows, v.n_dst))
        }
        Op::EdgeSoftmax { .. } => {
            let v = edges.expect("edge_softmax reads edges");
            want(x[0].rows == v.num_edges(), || format!("x has {} rows for {} edges", x[0].rows, v.num_edges()))
        }
        Op::SliceDst { .. } => {
            let b = block.expect("slice_dst reads a block");
            want(x[0].rows >= b.n_dst(), || format!("x has {} rows, fewer than the block's {} destinations", x[0].rows, b.n_dst()))
        }
        _ => Ok(()),
    }
}
