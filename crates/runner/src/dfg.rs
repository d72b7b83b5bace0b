//! The model format: a versioned dataflow graph (DFG) of ops over named
//! values, serialised as JSON (`model.json`).
//!
//! ```json
//! {"format": "solidgraph-dfg", "version": 1, "name": "gcn", "blocks": 2,
//!  "inputs": [{"name": "x", "cols": 16}],
//!  "weights": {"conv1.lin.weight": [32, 16], "conv1.bias": [32]},
//!  "ops": [{"op": "gemm", "x": "x", "weight": "conv1.lin.weight", "out": "h"},
//!          {"op": "spmm", "x": "h", "block": 0, "reduce": "sum", "norm": "sym", "self_loops": "add", "edge_weight": true, "out": "a"},
//!          {"op": "add", "a": "a", "b": "conv1.bias", "out": "z"}],
//!  "output": "z"}
//! ```
//!
//! Values are 2-D f32 tensors. Inputs are node tensors of `blocks[0].n_src`
//! rows; weights are named tensors of `weights.safetensors` (flattened to
//! `[product of leading dims, last dim]`; a 1-row weight broadcasts over
//! rows in `add`/`mul`); every op writes one new value `out` (names are
//! single-assignment). Edge-valued tensors (`sddmm`, `edge_softmax`) have
//! one row per edge of `block` seen with `self_loops`, in CSR order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, RunnerError};
use crate::limits::{MAX_BLOCKS, MAX_INPUTS, MAX_OPS, MAX_WEIGHTS};

pub const FORMAT: &str = "solidgraph-dfg";
pub const VERSION: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduce {
    #[default]
    Sum,
    Mean,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    #[default]
    None,
    /// `D^-1/2 A D^-1/2` over the edges seen (GCN's normalisation with `self_loops: add`).
    Sym,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelfLoops {
    /// The block's edges as they are.
    #[default]
    None,
    /// Existing loops replaced by one loop per destination (PyG's `add_remaining_self_loops`).
    Add,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreMode {
    /// `e[edge, h] = src[s, h] + dst[d, h]` (GAT: per-node projections already taken).
    #[default]
    Add,
    /// `e[edge, h] = <src[s, head h], dst[d, head h]>`.
    Dot,
}

fn default_eps_l2() -> f32 {
    1e-12
}

fn default_eps_bn() -> f32 {
    1e-5
}

fn one() -> usize {
    1
}

/// One operation. Field names are the JSON keys; `op` is the tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Aggregation over `block`: `out[d] = reduce_{e=(s->d)} coef[e] * edge_values[e, head] * x[s]`,
    /// head = column / (cols / heads of edge_values). Empty rows give 0 (PyG's scatter).
    Spmm {
        x: String,
        block: usize,
        #[serde(default)]
        reduce: Reduce,
        #[serde(default)]
        norm: Norm,
        #[serde(default)]
        self_loops: SelfLoops,
        #[serde(default)]
        edge_weight: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edge_values: Option<String>,
    },
    /// `x W^T + b`, `W` a weight in PyTorch's Linear layout `[out, in]`.
    Gemm {
        x: String,
        weight: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bias: Option<String>,
    },
    /// `spmm` (sum or mean, no edge values) then `gemm`, in one pass over destination rows.
    SpmmGemm {
        x: String,
        block: usize,
        #[serde(default)]
        reduce: Reduce,
        #[serde(default)]
        norm: Norm,
        #[serde(default)]
        self_loops: SelfLoops,
        #[serde(default)]
        edge_weight: bool,
        weight: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bias: Option<String>,
    },
    Relu {
        x: String,
    },
    LeakyRelu {
        x: String,
        slope: f32,
    },
    Elu {
        x: String,
        alpha: f32,
    },
    Sigmoid {
        x: String,
    },
    Tanh {
        x: String,
    },
    /// Element-wise; `b` may be one row broadcast over `a`'s rows.
    Add {
        a: String,
        b: String,
    },
    Mul {
        a: String,
        b: String,
    },
    Scale {
        x: String,
        factor: f32,
    },
    /// Columns of `xs` side by side.
    Concat {
        xs: Vec<String>,
    },
    /// `x / max(||x||_2, eps)` per row (`F.normalize(x, p=2, dim=-1)`).
    L2Norm {
        x: String,
        #[serde(default = "default_eps_l2")]
        eps: f32,
    },
    /// Eval-mode batch norm: `(x - mean) / sqrt(var + eps) * weight + bias`.
    BatchNorm {
        x: String,
        weight: String,
        bias: String,
        mean: String,
        var: String,
        #[serde(default = "default_eps_bn")]
        eps: f32,
    },
    /// Per-head dot with an attention vector: `out[n, h] = <x[n, head h], att[h]>`, `att` `[heads, cols / heads]`.
    HeadDot {
        x: String,
        att: String,
        heads: usize,
    },
    /// SDDMM: one score row per edge of `block` with `self_loops`.
    Sddmm {
        src: String,
        dst: String,
        block: usize,
        #[serde(default)]
        self_loops: SelfLoops,
        #[serde(default)]
        mode: ScoreMode,
        #[serde(default = "one")]
        heads: usize,
    },
    /// Softmax of each column over each destination's incoming edges.
    EdgeSoftmax {
        x: String,
        block: usize,
        #[serde(default)]
        self_loops: SelfLoops,
    },
    /// Mean over `heads` column groups: `[n, heads * c] -> [n, c]`.
    HeadMean {
        x: String,
        heads: usize,
    },
    /// The first `n_dst` rows of `block` (PyG's `x[:size[1]]`).
    SliceDst {
        x: String,
        block: usize,
    },
}

/// The names of every op, as written in `"op"`.
pub const OP_NAMES: &[&str] = &[
    "spmm",
    "gemm",
    "spmm_gemm",
    "relu",
    "leaky_relu",
    "elu",
    "sigmoid",
    "tanh",
    "add",
    "mul",
    "scale",
    "concat",
    "l2_norm",
    "batch_norm",
    "head_dot",
    "sddmm",
    "edge_softmax",
    "head_mean",
    "slice_dst",
];

impl Op {
    /// The `"op"` tag: the registry's key.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Spmm { .. } => "spmm",
            Op::Gemm { .. } => "gemm",
            Op::SpmmGemm { .. } => "spmm_gemm",
            Op::Relu { .. } => "relu",
            Op::LeakyRelu { .. } => "leaky_relu",
            Op::Elu { .. } => "elu",
            Op::Sigmoid { .. } => "sigmoid",
            Op::Tanh { .. } => "tanh",
            Op::Add { .. } => "add",
            Op::Mul { .. } => "mul",
            Op::Scale { .. } => "scale",
            Op::Concat { .. } => "concat",
            Op::L2Norm { .. } => "l2_norm",
            Op::BatchNorm { .. } => "batch_norm",
            Op::HeadDot { .. } => "head_dot",
            Op::Sddmm { .. } => "sddmm",
            Op::EdgeSoftmax { .. } => "edge_softmax",
            Op::HeadMean { .. } => "head_mean",
            Op::SliceDst { .. } => "slice_dst",
        }
    }

    /// The values the op reads, in the order kernels receive them.
    pub fn operands(&self) -> Vec<&str> {
        match self {
            Op::Spmm { x, edge_values, .. } => std::iter::once(x.as_str()).chain(edge_values.as_deref()).collect(),
            Op::Gemm { x, weight, bias } | Op::SpmmGemm { x, weight, bias, .. } => [x.as_str(), weight].into_iter().chain(bias.as_deref()).collect(),
            Op::Relu { x } | Op::LeakyRelu { x, .. } | Op::Elu { x, .. } | Op::Sigmoid { x } | Op::Tanh { x } | Op::Scale { x, .. } => vec![x],
            Op::L2Norm { x, .. } | Op::HeadMean { x, .. } | Op::SliceDst { x, .. } | Op::EdgeSoftmax { x, .. } => vec![x],
            Op::Add { a, b } | Op::Mul { a, b } => vec![a, b],
            Op::Concat { xs } => xs.iter().map(String::as_str).collect(),
            Op::BatchNorm { x, weight, bias, mean, var, .. } => vec![x, weight, bias, mean, var],
            Op::HeadDot { x, att, .. } => vec![x, att],
            Op::Sddmm { src, dst, .. } => vec![src, dst],
        }
    }

    /// The block the op reads and how it sees its edges, if it reads one.
    pub fn edges(&self) -> Option<(usize, SelfLoops, bool, Norm)> {
        match *self {
            Op::Spmm { block, self_loops, edge_weight, norm, .. } | Op::SpmmGemm { block, self_loops, edge_weight, norm, .. } => {
                Some((block, self_loops, edge_weight, norm))
            }
            Op::Sddmm { block, self_loops, .. } | Op::EdgeSoftmax { block, self_loops, .. } => Some((block, self_loops, false, Norm::None)),
            _ => None,
        }
    }

    /// The block of a `slice_dst`, which needs its size only.
    pub fn block(&self) -> Option<usize> {
        match *self {
            Op::SliceDst { block, .. } => Some(block),
            _ => self.edges().map(|e| e.0),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    pub name: String,
    pub cols: usize,
}

/// One op and the value it writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub op: Op,
    pub out: String,
}

/// A parsed model.json.
#[derive(Debug, Clone, PartialEq)]
pub struct Dfg {
    pub name: String,
    /// How many blocks (layers of graph) `run` is given.
    pub blocks: usize,
    pub inputs: Vec<InputSpec>,
    /// Weight name -> shape as stored in weights.safetensors.
    pub weights: BTreeMap<String, Vec<usize>>,
    pub ops: Vec<Node>,
    pub output: String,
}

/// The file as serde sees it: ops stay JSON until each is checked by name.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DfgFile {
    format: String,
    version: u64,
    #[serde(default)]
    name: String,
    blocks: usize,
    inputs: Vec<InputSpec>,
    #[serde(default)]
    weights: BTreeMap<String, Vec<usize>>,
    ops: Vec<Value>,
    output: String,
}

impl Dfg {
    /// Parses model.json text: format and version first (a newer file is named as such,
    /// not as a list of unknown fields), then each op by name.
    pub fn from_json(text: &str) -> Result<Dfg> {
        let value: Value = serde_json::from_str(text).map_err(|e| RunnerError::Json(e.to_string()))?;
        let format = value.get("format").and_then(Value::as_str).unwrap_or("");
        if format != FORMAT {
            return Err(RunnerError::Format(format.into()));
        }
        let version = value.get("version").and_then(Value::as_u64).ok_or_else(|| RunnerError::Json("\"version\" must be a whole number".into()))?;
        if version > VERSION {
            return Err(RunnerError::Version { found: version, supported: VERSION });
        }
        let file: DfgFile = serde_json::from_value(value).map_err(|e| RunnerError::Json(e.to_string()))?;
        if file.ops.len() > MAX_OPS || file.inputs.len() > MAX_INPUTS || file.weights.len() > MAX_WEIGHTS || file.blocks > MAX_BLOCKS {
            let message = format!(
                "{} ops, {} inputs, {} weights, {} blocks: limits are {MAX_OPS}, {MAX_INPUTS}, {MAX_WEIGHTS}, {MAX_BLOCKS}",
                file.ops.len(),
                file.inputs.len(),
                file.weights.len(),
                file.blocks
            );
            return Err(RunnerError::Invalid(message));
        }
        let ops = file.ops.into_iter().enumerate().map(|(index, v)| parse_node(index, v)).collect::<Result<_>>()?;
        Ok(Dfg { name: file.name, blocks: file.blocks, inputs: file.inputs, weights: file.weights, ops, output: file.output })
    }

    pub fn to_json(&self) -> String {
        let ops = self.ops.iter().map(node_json).collect();
        let file = DfgFile {
            format: FORMAT.into(),
            version: VERSION,
            name: self.name.clone(),
            blocks: self.blocks,
            inputs: self.inputs.clone(),
            weights: self.weights.clone(),
            ops,
            output: self.output.clone(),
        };
        serde_json::to_string_pretty(&file).expect("a DFG always serialises")
    }
}

fn parse_node(index: usize, mut v: Value) -> Result<Node> {
    let bad = |message: String| RunnerError::BadOp { index, op: String::new(), message };
    let obj = v.as_object_mut().ok_or_else(|| bad("an op is a JSON object".into()))?;
    let name = obj.get("op").and_then(Value::as_str).ok_or_else(|| bad("an op names itself in \"op\"".into()))?.to_string();
    if !OP_NAMES.contains(&name.as_str()) {
        return Err(RunnerError::UnknownOp { index, name });
    }
    let out = match obj.remove("out") {
        Some(Value::String(s)) => s,
        _ => {
            return Err(RunnerError::BadOp { index, op: name, message: "\"out\" must name the value the op writes".into() });
        }
    };
    let op: Op = serde_json::from_value(v).map_err(|e| RunnerError::BadOp { index, op: name.clone(), message: e.to_string() })?;
    Ok(Node { op, out })
}

fn node_json(node: &Node) -> Value {
    let mut v = serde_json::to_value(&node.op).expect("an op always serialises");
    v.as_object_mut().expect("an op serialises to an object").insert("out".into(), Value::String(node.out.clone()));
    v
}
