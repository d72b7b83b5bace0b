//! Every optimised CPU kernel against its reference on random shapes:
//! empty rows, zero-degree destinations, one-node batches, bipartite
//! blocks, self-loops, edge weights, several heads.

use proptest::prelude::*;
use solidgraph_runner::block::Block;
use solidgraph_runner::dfg::{Norm, Op, Reduce, ScoreMode, SelfLoops};
use solidgraph_runner::kernels::{Args, Kernel, cpu::Cpu, reference::Reference};
use solidgraph_runner::{EdgeView, Tensor};

fn t(rows: usize, cols: usize, seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let data = (0..rows * cols)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::new(rows, cols, data)
}

/// Runs `op` with both kernels and compares.
fn same(op: &Op, x: &[&Tensor], block: Option<&Block>, edges: Option<&EdgeView>) {
    let args = Args { x, block, edges };
    let want = Reference.run(op, &args).unwrap();
    let got = Cpu.run(op, &args).unwrap();
    assert_eq!((got.rows, got.cols), (want.rows, want.cols), "{op:?}");
    let d = got.max_rel_diff(&want);
    assert!(d < 1e-4, "{} differs by {d}", op.name());
}

fn s(v: &str) -> String {
    v.to_string()
}

prop_compose! {
    fn block()(n_src in 1usize..24, dst_frac in 0.0f64..=1.0, edges in proptest::collection::vec((0usize..1000, 0usize..1000, -1.0f32..2.0), 0..80), weighted in any::<bool>()) -> Block {
        let n_dst = ((n_src as f64 * dst_frac) as usize).clamp(usize::from(n_src == 1), n_src);
        // Destinations only below n_dst - 1 get edges: the last destination (when any) has none.
        let keep: Vec<_> = edges.into_iter().filter(|_| n_dst > 1).map(|(s, d, w)| ((s % n_src) as u64, (d % (n_dst - 1)) as u64, w)).collect();
        let src: Vec<u64> = keep.iter().map(|e| e.0).collect();
        let dst: Vec<u64> = keep.iter().map(|e| e.1).collect();
        let w: Vec<f32> = keep.iter().map(|e| e.2).collect();
        Block::from_edges(n_dst, n_src, &src, &dst, weighted.then_some(&w[..])).unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn aggregation_kernels_match(b in block(), cols in 1usize..12, heads in 1usize..4, seed in any::<u64>()) {
        let cols = cols * heads;
        let x = t(b.n_src(), cols, seed);
        for loops in [SelfLoops::None, SelfLoops::Add] {
            for (weighted, norm) in [(false, Norm::None), (true, Norm::None), (true, Norm::Sym), (false, Norm::Sym)] {
                let v = b.view(loops, weighted, norm);
                let ev = t(v.num_edges(), heads, seed ^ 1);
                for reduce in [Reduce::Sum, Reduce::Mean, Reduce::Max] {
                    let op = Op::Spmm { x: s("x"), block: 0, reduce, norm, self_loops: loops, edge_weight: weighted, edge_values: None };
                    same(&op, &[&x], Some(&b), Some(&v));
                    let op = Op::Spmm { x: s("x"), block: 0, reduce, norm, self_loops: loops, edge_weight: weighted, edge_values: Some(s("e")) };
                    same(&op, &[&x, &ev], Some(&b), Some(&v));
                }
                let w = t(5, cols, seed ^ 2);
                let bias = t(1, 5, seed ^ 3);
                for reduce in [Reduce::Sum, Reduce::Mean] {
                    let op = Op::SpmmGemm { x: s("x"), block: 0, reduce, norm, self_loops: loops, edge_weight: weighted, weight: s("w"), bias: Some(s("b")) };
                    same(&op, &[&x, &w, &bias], Some(&b), Some(&v));
                }
            }
            // Attention: scores per edge, softmax per destination, both score modes.
            let v = b.view(loops, false, Norm::None);
            let a_src = t(b.n_src(), heads, seed ^ 4);
            let a_dst = t(b.n_src(), heads, seed ^ 5);
            let op = Op::Sddmm { src: s("a"), dst: s("b"), block: 0, self_loops: loops, mode: ScoreMode::Add, heads };
            same(&op, &[&a_src, &a_dst], Some(&b), Some(&v));
            let y = t(b.n_src(), cols, seed ^ 6);
            let op = Op::Sddmm { src: s("a"), dst: s("b"), block: 0, self_loops: loops, mode: ScoreMode::Dot, heads };
            same(&op, &[&x, &y], Some(&b), Some(&v));
            let scores = t(v.num_edges(), heads, seed ^ 7);
            same(&Op::EdgeSoftmax { x: s("e"), block: 0, self_loops: loops }, &[&scores], Some(&b), Some(&v));
        }
        same(&Op::SliceDst { x: s("x"), block: 0 }, &[&x], Some(&b), None);
    }

    #[test]
    fn dense_kernels_match(rows in 0usize..70, k in 1usize..40, n in 1usize..40, heads in 1usize..4, seed in any::<u64>()) {
        let x = t(rows, k, seed);
        let w = t(n, k, seed ^ 1);
        let bias = t(1, n, seed ^ 2);
        same(&Op::Gemm { x: s("x"), weight: s("w"), bias: None }, &[&x, &w], None, None);
        same(&Op::Gemm { x: s("x"), weight: s("w"), bias: Some(s("b")) }, &[&x, &w, &bias], None, None);
        for op in [
            Op::Relu { x: s("x") },
            Op::LeakyRelu { x: s("x"), slope: 0.2 },
            Op::Elu { x: s("x"), alpha: 1.5 },
            Op::Sigmoid { x: s("x") },
            Op::Tanh { x: s("x") },
            Op::Scale { x: s("x"), factor: -3.0 },
            Op::L2Norm { x: s("x"), eps: 1e-12 },
        ] {
            same(&op, &[&x], None, None);
        }
        let y = t(rows, k, seed ^ 3);
        let row = t(1, k, seed ^ 4);
        for other in [&y, &row] {
            same(&Op::Add { a: s("a"), b: s("b") }, &[&x, other], None, None);
            same(&Op::Mul { a: s("a"), b: s("b") }, &[&x, other], None, None);
        }
        same(&Op::Concat { xs: vec![s("a"), s("b"), s("c")] }, &[&x, &y, &t(rows, n, seed ^ 5)], None, None);
        let var = Tensor::new(1, k, t(1, k, seed ^ 6).data.iter().map(|v| v.abs() + 0.1).collect());
        same(&Op::BatchNorm { x: s("x"), weight: s("w"), bias: s("b"), mean: s("m"), var: s("v"), eps: 1e-5 }, &[&x, &row, &t(1, k, seed ^ 7), &t(1, k, seed ^ 8), &var], None, None);
        let hx = t(rows, k * heads, seed ^ 9);
        same(&Op::HeadDot { x: s("x"), att: s("a"), heads }, &[&hx, &t(heads, k, seed ^ 10)], None, None);
        same(&Op::HeadMean { x: s("x"), heads }, &[&hx], None, None);
    }
}

/// The GEMM kernel on shapes large enough for `gemm`'s packing and threads.
#[test]
fn large_gemm_matches() {
    let x = t(300, 257, 1);
    let w = t(129, 257, 2);
    let b = t(1, 129, 3);
    same(&Op::Gemm { x: s("x"), weight: s("w"), bias: Some(s("b")) }, &[&x, &w, &b], None, None);
}

/// `add_remaining_self_loops` and the symmetric normalisation on a hand-worked block.
#[test]
fn views_add_remaining_self_loops_and_normalise() {
    // 0 <- 1 (w 2), 0 <- 0 (loop, w 5), 1 <- 0 (w 3); node 2 has no in-edges.
    let b = Block::from_edges(3, 3, &[1, 0, 0], &[0, 0, 1], Some(&[2.0, 5.0, 3.0])).unwrap();
    let v = b.view(SelfLoops::Add, true, Norm::None);
    assert_eq!(v.indptr, vec![0, 2, 4, 5]);
    assert_eq!(v.indices, vec![1, 0, 0, 1, 2]);
    assert_eq!(v.coef, vec![2.0, 5.0, 3.0, 1.0, 1.0]);
    let n = b.view(SelfLoops::Add, true, Norm::Sym);
    // deg = [7, 4, 1]
    let want = [2.0 / (4.0f32 * 7.0).sqrt(), 5.0 / 7.0, 3.0 / (7.0f32 * 4.0).sqrt(), 1.0 / 4.0, 1.0];
    for (g, w) in n.coef.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
    }
}
