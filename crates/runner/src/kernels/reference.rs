//! The reference kernels: the definition of each op in plain loops. They
//! are the oracle the optimised kernels are tested against, and run on any
//! device that has nothing better.

use crate::block::EdgeView;
use crate::dfg::{Op, Reduce, ScoreMode};
use crate::kernels::{Args, Kernel, rows_of};
use crate::tensor::Tensor;

pub struct Reference;

impl Kernel for Reference {
    fn name(&self) -> &str {
        "reference"
    }

    fn run(&self, op: &Op, a: &Args) -> Result<Tensor, String> {
        let x = a.x;
        Ok(match op {
            Op::Spmm { reduce, .. } => spmm(x[0], a.edges.expect("spmm reads edges"), *reduce, x.get(1).copied()),
            Op::Gemm { .. } => gemm(x[0], x[1], x.get(2).copied()),
            Op::SpmmGemm { reduce, .. } => gemm(&spmm(x[0], a.edges.expect("spmm_gemm reads edges"), *reduce, None), x[1], x.get(2).copied()),
            Op::Relu { .. } => map(x[0], |v| v.max(0.0)),
            Op::LeakyRelu { slope, .. } => map(x[0], |v| if v > 0.0 { v } else { slope * v }),
            Op::Elu { alpha, .. } => map(x[0], |v| if v > 0.0 { v } else { alpha * (v.exp() - 1.0) }),
            Op::Sigmoid { .. } => map(x[0], |v| 1.0 / (1.0 + (-v).exp())),
            Op::Tanh { .. } => map(x[0], f32::tanh),
            Op::Scale { factor, .. } => map(x[0], |v| v * factor),
            Op::Add { .. } => zip(x[0], x[1], |p, q| p + q),
            Op::Mul { .. } => zip(x[0], x[1], |p, q| p * q),
            Op::Concat { .. } => concat(x),
            Op::L2Norm { eps, .. } => l2_norm(x[0], *eps),
            Op::BatchNorm { eps, .. } => batch_norm(x, *eps),
            Op::HeadDot { heads, .. } => head_dot(x[0], x[1], *heads),
            Op::Sddmm { mode, heads, .. } => sddmm(x[0], x[1], a.edges.expect("sddmm reads edges"), *mode, *heads),
            Op::EdgeSoftmax { .. } => edge_softmax(x[0], a.edges.expect("edge_softmax reads edges")),
            Op::HeadMean { heads, .. } => head_mean(x[0], *heads),
            Op::SliceDst { .. } => x[0].head(a.block.expect("slice_dst reads a block").n_dst()),
        })
    }
}

pub fn spmm(x: &Tensor, v: &EdgeView, reduce: Reduce, values: Option<&Tensor>) -> Tensor {
    let c = x.cols;
    let group = values.map_or(c, |ev| c / ev.cols);
    let mut out = Tensor::zeros(v.n_dst, c);
    for (d, es) in rows_of(v).enumerate() {
        if es.is_empty() {
            continue;
        }
        for j in 0..c {
            let mut acc = if reduce == Reduce::Max { f32::NEG_INFINITY } else { 0.0 };
            for e in es.clone() {
                let w = v.coef[e] * values.map_or(1.0, |ev| ev.data[e * ev.cols + j / group]);
                let m = w * x.data[v.indices[e] as usize * c + j];
                acc = if reduce == Reduce::Max { acc.max(m) } else { acc + m };
            }
            if reduce == Reduce::Mean {
                acc /= es.len() as f32;
            }
            out.data[d * c + j] = acc;
        }
    }
    out
}

pub fn gemm(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Tensor {
    assert_eq!(x.cols, w.cols, "gemm reads x [m, k] and w [n, k]");
    let mut out = Tensor::zeros(x.rows, w.rows);
    for i in 0..x.rows {
        for o in 0..w.rows {
            let mut acc = 0.0;
            for k in 0..x.cols {
                acc += x.data[i * x.cols + k] * w.data[o * w.cols + k];
            }
            out.data[i * w.rows + o] = acc + bias.map_or(0.0, |b| b.data[o]);
        }
    }
    out
}

fn map(x: &Tensor, f: impl Fn(f32) -> f32) -> Tensor {
    Tensor::new(x.rows, x.cols, x.data.iter().map(|&v| f(v)).collect())
}

fn zip(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Tensor {
    let mut out = a.clone();
    for i in 0..a.rows {
        let bi = if b.rows == 1 { 0 } else { i };
        for j in 0..a.cols {
            out.data[i * a.cols + j] = f(a.data[i * a.cols + j], b.data[bi * b.cols + j]);
        }
    }
    out
}

fn concat(xs: &[&Tensor]) -> Tensor {
    let rows = xs[0].rows;
    let cols = xs.iter().map(|t| t.cols).sum();
    let mut data = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for t in xs {
            data.extend_from_slice(t.row(i));
        }
    }
    Tensor::new(rows, cols, data)
}

fn l2_norm(x: &Tensor, eps: f32) -> Tensor {
    let mut out = x.clone();
    for i in 0..x.rows {
        let norm = x.row(i).iter().map(|v| v * v).sum::<f32>().sqrt().max(eps);
        out.row_mut(i).iter_mut().for_each(|v| *v /= norm);
    }
    out
}

fn batch_norm(x: &[&Tensor], eps: f32) -> Tensor {
    let (t, w, b, m, var) = (x[0], x[1], x[2], x[3], x[4]);
    let mut out = t.clone();
    for i in 0..t.rows {
        for j in 0..t.cols {
            out.data[i * t.cols + j] = (t.data[i * t.cols + j] - m.data[j]) / (var.data[j] + eps).sqrt() * w.data[j] + b.data[j];
        }
    }
    out
}

fn head_dot(x: &Tensor, att: &Tensor, heads: usize) -> Tensor {
    let c = x.cols / heads;
    let mut out = Tensor::zeros(x.rows, heads);
    for i in 0..x.rows {
        for h in 0..heads {
            out.data[i * heads + h] = (0..c).map(|k| x.data[i * x.cols + h * c + k] * att.data[h * c + k]).sum();
        }
    }
    out
}

pub fn sddmm(src: &Tensor, dst: &Tensor, v: &EdgeView, mode: ScoreMode, heads: usize) -> Tensor {
    let cols = if mode == ScoreMode::Add { src.cols } else { heads };
    let c = src.cols / heads;
    let mut out = Tensor::zeros(v.num_edges(), cols);
    for (d, es) in rows_of(v).enumerate() {
        for e in es {
            let s = v.indices[e] as usize;
            for j in 0..cols {
                out.data[e * cols + j] = match mode {
                    ScoreMode::Add => src.data[s * src.cols + j] + dst.data[d * dst.cols + j],
                    ScoreMode::Dot => (0..c).map(|k| src.data[s * src.cols + j * c + k] * dst.data[d * dst.cols + j * c + k]).sum(),
                };
            }
        }
    }
    out
}

/// PyG's `softmax(src, index)`: `exp(x - max) / (sum + 1e-16)` per destination and column.
pub fn edge_softmax(x: &Tensor, v: &EdgeView) -> Tensor {
    let mut out = x.clone();
    for es in rows_of(v) {
        for j in 0..x.cols {
            let max = es.clone().map(|e| x.data[e * x.cols + j]).fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = es.clone().map(|e| (x.data[e * x.cols + j] - max).exp()).sum();
            for e in es.clone() {
                out.data[e * x.cols + j] = (x.data[e * x.cols + j] - max).exp() / (sum + 1e-16);
            }
        }
    }
    out
}

fn head_mean(x: &Tensor, heads: usize) -> Tensor {
    let c = x.cols / heads;
    let mut out = Tensor::zeros(x.rows, c);
    for i in 0..x.rows {
        for k in 0..c {
            out.data[i * c + k] = (0..heads).map(|h| x.data[i * x.cols + h * c + k]).sum::<f32>() / heads as f32;
        }
    }
    out
}
