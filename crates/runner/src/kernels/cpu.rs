//! The optimised CPU kernels: GEMM from the `gemm` crate (blocked, SIMD,
//! rayon for large products), aggregation parallel over destination rows
//! with a SIMD-friendly axpy per edge, attention per destination's edge
//! range, element-wise ops over row chunks, and aggregate + GEMM fused per
//! chunk of destinations so the aggregated rows stay in cache.

use gemm::Parallelism;
use rayon::prelude::*;

use crate::block::EdgeView;
use crate::dfg::{Op, Reduce, ScoreMode};
use crate::kernels::{Args, Kernel, rows_of};
use crate::tensor::Tensor;

/// Rows per rayon task for row-parallel ops: big enough to amortise a task.
const ROWS_PER_TASK: usize = 64;
/// Destinations per chunk of the fused aggregate + GEMM.
const FUSED_CHUNK: usize = 128;
/// Below this many multiply-adds a GEMM runs on the calling thread.
const GEMM_PARALLEL_FLOPS: usize = 1 << 20;

pub struct Cpu;

impl Kernel for Cpu {
    fn name(&self) -> &str {
        "cpu"
    }

    fn run(&self, op: &Op, a: &Args) -> Result<Tensor, String> {
        let x = a.x;
        Ok(match op {
            Op::Spmm { reduce, .. } => spmm(x[0], a.edges.expect("spmm reads edges"), *reduce, x.get(1).copied()),
            Op::Gemm { .. } => gemm(x[0], x[1], x.get(2).copied()),
            Op::SpmmGemm { reduce, .. } => spmm_gemm(x[0], a.edges.expect("spmm_gemm reads edges"), *reduce, x[1], x.get(2).copied()),
            Op::Relu { .. } => map(x[0], |v| v.max(0.0)),
            Op::LeakyRelu { slope, .. } => map(x[0], |v| if v > 0.0 { v } else { slope * v }),
            Op::Elu { alpha, .. } => map(x[0], |v| if v > 0.0 { v } else { alpha * v.exp_m1() }),
            Op::Sigmoid { .. } => map(x[0], |v| 1.0 / (1.0 + (-v).exp())),
            Op::Tanh { .. } => map(x[0], f32::tanh),
            Op::Scale { factor, .. } => map(x[0], |v| v * factor),
            Op::Add { .. } => zip(x[0], x[1], |p, q| p + q),
            Op::Mul { .. } => zip(x[0], x[1], |p, q| p * q),
            Op::Concat { .. } => rows(x[0].rows, x.iter().map(|t| t.cols).sum(), |i, row| {
                let mut at = 0;
                for t in x {
                    row[at..at + t.cols].copy_from_slice(t.row(i));
                    at += t.cols;
                }
            }),
            Op::L2Norm { eps, .. } => rows(x[0].rows, x[0].cols, |i, row| {
                let src = x[0].row(i);
                let norm = src.iter().map(|v| v * v).sum::<f32>().sqrt().max(*eps);
                row.iter_mut().zip(src).for_each(|(o, v)| *o = v / norm);
            }),
            Op::BatchNorm { eps, .. } => batch_norm(x, *eps),
            Op::HeadDot { heads, .. } => rows(x[0].rows, *heads, |i, row| {
                let c = x[0].cols / heads;
                for (h, o) in row.iter_mut().enumerate() {
                    *o = dot(&x[0].row(i)[h * c..(h + 1) * c], &x[1].data[h * c..(h + 1) * c]);
                }
            }),
            Op::Sddmm { mode, heads, .. } => sddmm(x[0], x[1], a.edges.expect("sddmm reads edges"), *mode, *heads),
            Op::EdgeSoftmax { .. } => edge_softmax(x[0], a.edges.expect("edge_softmax reads edges")),
            Op::HeadMean { heads, .. } => rows(x[0].rows, x[0].cols / heads, |i, row| {
                let c = row.len();
                for (h, part) in x[0].row(i).chunks_exact(c).enumerate() {
                    row.iter_mut().zip(part).for_each(|(o, v)| *o = if h == 0 { *v } else { *o + v });
                }
                row.iter_mut().for_each(|o| *o /= *heads as f32);
            }),
            Op::SliceDst { .. } => x[0].head(a.block.expect("slice_dst reads a block").n_dst()),
        })
    }
}

/// An output of `n` rows of `cols`, each row written by `f(i, row)` in parallel.
fn rows(n: usize, cols: usize, f: impl Fn(usize, &mut [f32]) + Sync) -> Tensor {
    let mut out = Tensor::zeros(n, cols);
    if cols > 0 {
        out.data.par_chunks_mut(cols).with_min_len(ROWS_PER_TASK).enumerate().for_each(|(i, row)| f(i, row));
    }
    out
}

fn map(x: &Tensor, f: impl Fn(f32) -> f32 + Sync) -> Tensor {
    let mut out = x.clone();
    out.data.par_chunks_mut(ROWS_PER_TASK * 64).for_each(|c| c.iter_mut().for_each(|v| *v = f(*v)));
    out
}

fn zip(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32 + Sync) -> Tensor {
    rows(a.rows, a.cols, |i, row| {
        let bi = if b.rows == 1 { b.row(0) } else { b.row(i) };
        row.iter_mut().zip(a.row(i)).zip(bi).for_each(|((o, p), q)| *o = f(*p, *q));
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(p, q)| p * q).sum()
}

fn batch_norm(x: &[&Tensor], eps: f32) -> Tensor {
    let (t, w, b, m, var) = (x[0], x[1], x[2], x[3], x[4]);
    // One scale and shift per column, computed once.
    let scale: Vec<f32> = (0..t.cols).map(|j| w.data[j] / (var.data[j] + eps).sqrt()).collect();
    let shift: Vec<f32> = (0..t.cols).map(|j| b.data[j] - m.data[j] * scale[j]).collect();
    rows(t.rows, t.cols, |i, row| {
        for (j, o) in row.iter_mut().enumerate() {
            *o = t.row(i)[j] * scale[j] + shift[j];
        }
    })
}

/// One destination's aggregate into `row` (zeroed by the caller).
fn aggregate_row(row: &mut [f32], x: &Tensor, v: &EdgeView, es: std::ops::Range<usize>, reduce: Reduce, values: Option<&Tensor>) {
    if es.is_empty() {
        return;
    }
    let c = x.cols;
    let group = values.map_or(c, |ev| c / ev.cols);
    let n = es.len();
    for (k, e) in es.enumerate() {
        let src = x.row(v.indices[e] as usize);
        for (g, (out, xs)) in row.chunks_mut(group).zip(src.chunks(group)).enumerate() {
            let w = v.coef[e] * values.map_or(1.0, |ev| ev.data[e * ev.cols + g]);
            match reduce {
                Reduce::Max if k == 0 => out.iter_mut().zip(xs).for_each(|(o, s)| *o = w * s),
                Reduce::Max => out.iter_mut().zip(xs).for_each(|(o, s)| *o = o.max(w * s)),
                _ => out.iter_mut().zip(xs).for_each(|(o, s)| *o += w * s),
            }
        }
    }
    if reduce == Reduce::Mean {
        let inv = 1.0 / n as f32;
        row.iter_mut().for_each(|o| *o *= inv);
    }
}

pub fn spmm(x: &Tensor, v: &EdgeView, reduce: Reduce, values: Option<&Tensor>) -> Tensor {
    rows(v.n_dst, x.cols, |d, row| aggregate_row(row, x, v, v.indptr[d]..v.indptr[d + 1], reduce, values))
}

/// `x W^T + b` with `gemm` (its `dst := alpha dst + beta lhs rhs`: alpha
/// scales the bias already in `dst`, beta the product, the reverse of BLAS).
pub fn gemm(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Tensor {
    let mut out = Tensor::zeros(x.rows, w.rows);
    let parallel = x.rows * w.rows * x.cols >= GEMM_PARALLEL_FLOPS;
    gemm_into(&mut out.data, x, 0, x.rows, w, bias, parallel);
    out
}

/// Rows `lo..hi` of `x W^T + b` into `dst` (`(hi - lo) * w.rows` values).
fn gemm_into(dst: &mut [f32], x: &Tensor, lo: usize, hi: usize, w: &Tensor, bias: Option<&Tensor>, parallel: bool) {
    let (m, n, k) = (hi - lo, w.rows, x.cols);
    assert_eq!(dst.len(), m * n, "gemm writes m x n values");
    assert_eq!(w.cols, k, "gemm reads x [m, k] and w [n, k]");
    if let Some(b) = bias {
        dst.chunks_exact_mut(n.max(1)).for_each(|row| row.copy_from_slice(&b.data));
    }
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let parallelism = if parallel { Parallelism::Rayon(rayon::current_num_threads()) } else { Parallelism::None };
    let lhs = x.data[lo * k..hi * k].as_ptr();
    // SAFETY: dst is m x n row-major (row stride n), lhs the m x k rows of x
    // (row stride k), rhs is W^T read in place: element (kk, j) is w[j][kk],
    // so row stride 1 and column stride k; all three are in bounds and dst
    // does not alias the inputs.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            bias.is_some(),
            lhs,
            1,
            k as isize,
            w.data.as_ptr(),
            k as isize,
            1,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Aggregation and GEMM per chunk of destinations: the chunk's aggregated rows
/// are computed into a buffer that stays in cache and multiplied at once.
pub fn spmm_gemm(x: &Tensor, v: &EdgeView, reduce: Reduce, w: &Tensor, bias: Option<&Tensor>) -> Tensor {
    assert!(reduce != Reduce::Max, "max does not commute with the GEMM");
    let n = w.rows;
    let mut out = Tensor::zeros(v.n_dst, n);
    if n == 0 {
        return out;
    }
    out.data.par_chunks_mut(FUSED_CHUNK * n).enumerate().for_each(|(chunk, dst)| {
        let lo = chunk * FUSED_CHUNK;
        let hi = lo + dst.len() / n;
        let mut agg = Tensor::zeros(hi - lo, x.cols);
        for d in lo..hi {
            aggregate_row(agg.row_mut(d - lo), x, v, v.indptr[d]..v.indptr[d + 1], reduce, None);
        }
        gemm_into(dst, &agg, 0, hi - lo, w, bias, false);
    });
    out
}

/// Each destination's edge rows as a mutable slice of `data`, to run destinations in parallel.
fn edge_rows<'a>(data: &'a mut [f32], v: &EdgeView, cols: usize) -> Vec<&'a mut [f32]> {
    let mut parts = Vec::with_capacity(v.n_dst);
    let mut rest = data;
    for es in rows_of(v) {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(es.len() * cols);
        parts.push(head);
        rest = tail;
    }
    parts
}

pub fn sddmm(src: &Tensor, dst: &Tensor, v: &EdgeView, mode: ScoreMode, heads: usize) -> Tensor {
    let cols = if mode == ScoreMode::Add { src.cols } else { heads };
    let c = src.cols / heads;
    let mut out = Tensor::zeros(v.num_edges(), cols);
    edge_rows(&mut out.data, v, cols).into_par_iter().with_min_len(ROWS_PER_TASK).enumerate().for_each(|(d, part)| {
        let drow = dst.row(d);
        for (k, o) in part.chunks_exact_mut(cols).enumerate() {
            let srow = src.row(v.indices[v.indptr[d] + k] as usize);
            match mode {
                ScoreMode::Add => o.iter_mut().zip(srow).zip(drow).for_each(|((o, s), t)| *o = s + t),
                ScoreMode::Dot => o.iter_mut().enumerate().for_each(|(h, o)| *o = dot(&srow[h * c..(h + 1) * c], &drow[h * c..(h + 1) * c])),
            }
        }
    });
    out
}

pub fn edge_softmax(x: &Tensor, v: &EdgeView) -> Tensor {
    let cols = x.cols;
    let mut out = x.clone();
    edge_rows(&mut out.data, v, cols).into_par_iter().with_min_len(ROWS_PER_TASK).for_each(|part| {
        for j in 0..cols {
            let max = part.chunks_exact(cols).map(|r| r[j]).fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for r in part.chunks_exact_mut(cols) {
                r[j] = (r[j] - max).exp();
                sum += r[j];
            }
            let inv = 1.0 / (sum + 1e-16);
            part.chunks_exact_mut(cols).for_each(|r| r[j] *= inv);
        }
    });
    out
}
