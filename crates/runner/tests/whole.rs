//! `infer_all`'s push pass (linear aggregations read the lower level's rows
//! once per destination range) against its pull pass (each destination chunk
//! gathers its sources' rows), which tests/test_infer.py checks against PyG:
//! on skewed graphs with hubs, repeated edges, explicit self-loops and edge
//! weights, directed (with in-lists) and undirected, in input and degree
//! order, with accumulators split into several destination ranges and in one.

use std::path::Path;

use solidgraph_runner::models::{gat, gcn, gin, ngcf, random_weights, sage};
use solidgraph_runner::whole::{WholeOptions, WholeReport, infer_all};
use solidgraph_runner::{Dfg, Model, Registry};
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{DType, EdgeInput, ImportOptions, OpenOptions, Store, TensorData, TensorInput, import};

const N: u64 = 20_000;
const DIM: usize = 24;

/// splitmix64: reproducible without a dependency.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A store of N nodes: a quarter of the edges into or out of 16 hubs, some
/// repeated, some loops (one vertex with two loops of different weights),
/// and nodes without edges at the end.
fn build(path: &Path, directed: bool, order: VertexOrder) -> Store {
    let mut next = rng(7);
    let (mut src, mut dst, mut w) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..120_000u64 {
        let (mut s, mut d) = (next() % (N - 500), next() % (N - 500));
        match i % 8 {
            0 => d = next() % 16,
            1 => s = next() % 16,
            2 if i % 64 == 2 => d = s,
            _ => {}
        }
        src.push(s);
        dst.push(d);
        w.push(0.1 + (next() % 1000) as f32 / 500.0);
    }
    for (s, d, x) in [(5, 5, 0.5f32), (5, 5, 3.0), (7, 9, 1.0), (7, 9, 2.0)] {
        src.push(s);
        dst.push(d);
        w.push(x);
    }
    let x: Vec<u8> = (0..N as usize * DIM).flat_map(|_| ((next() % 2000) as f32 / 1000.0 - 1.0).to_le_bytes()).collect();
    let tensors = [TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: N, dim: DIM as u64, bytes: x } }];
    let o = ImportOptions { undirected: !directed, in_edges: directed, weights: true, num_nodes: Some(N), order, ..Default::default() };
    import(path, &[EdgeInput::Memory { src, dst, weights: Some(w), labels: None }], &tensors, &o, &|_, _, _| {}).unwrap();
    Store::open(path, &OpenOptions::default()).unwrap()
}

fn run(store: &Store, model: &Model, name: &str, push: bool, row_cache_bytes: u64) -> (Vec<f32>, WholeReport) {
    let o = WholeOptions { out: name.into(), chunk_bytes: 1 << 20, row_cache_bytes, push, ..Default::default() };
    let r = infer_all(store, model, &o, &mut |_| {}).unwrap();
    let bytes = std::fs::read(&r.path).unwrap();
    (bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect(), r)
}

fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn models() -> Vec<(&'static str, Dfg)> {
    vec![
        ("gcn", gcn(DIM, &[32, 8], false)),
        ("gcnw", gcn(DIM, &[32, 8], true)),
        ("sage", sage(DIM, &[32, 8])),
        ("gin", gin(DIM, &[32, 8], 0.3)),
        ("ngcf", ngcf(DIM, &[16, 8])),
        ("gat", gat(DIM, &[8, 8], &[2, 1], false)),
    ]
}

fn check(directed: bool, order: VertexOrder) {
    let dir = tempfile::tempdir().unwrap();
    let store = build(&dir.path().join("g"), directed, order);
    for (i, (kind, dfg)) in models().into_iter().enumerate() {
        let weights = random_weights(&dfg, 11 + i as u64, 0.5);
        let model = Model::from_parts(dfg, &weights, &Registry::with_builtin()).unwrap();
        let (pulled, pr) = run(&store, &model, &format!("{kind}-pull"), false, 0);
        let (split, sr) = run(&store, &model, &format!("{kind}-split"), true, 0);
        let (whole, wr) = run(&store, &model, &format!("{kind}-whole"), true, 256 << 20);
        let what = format!("{kind}, directed {directed}, {order:?}");
        assert!(pulled.iter().all(|v| v.is_finite()), "{what}");
        assert!(rel_diff(&split, &pulled) < 1e-5, "{what}: {}", rel_diff(&split, &pulled));
        assert!(rel_diff(&whole, &pulled) < 1e-5, "{what}: {}", rel_diff(&whole, &pulled));
        assert!(pr.levels.iter().all(|l| l.ranges == 0), "{what}: push off pulls every level");
        if kind == "gat" {
            assert!(sr.levels.iter().all(|l| l.ranges == 0), "{what}: attention pulls");
            continue;
        }
        // Both aggregating levels push: in several ranges within 512 KiB, in one within 256 MiB.
        let pushed: Vec<usize> = sr.levels.iter().filter(|l| l.ranges > 0).map(|l| l.level).collect();
        assert_eq!(pushed.len(), 2, "{what}: pushed levels {pushed:?}");
        for &l in &pushed {
            assert!(sr.levels[l].ranges > 1, "{what}: level {l} in {} ranges", sr.levels[l].ranges);
            assert_eq!(wr.levels[l].ranges, 1, "{what}: level {l}");
        }
        // One range reads each lower row file at most once (a page per read run at most twice).
        for l in wr.levels.iter().filter(|l| l.ranges == 1) {
            let pulled_reads = pr.levels[l.level].row_read_bytes;
            assert!(l.row_read_bytes <= pulled_reads, "{what}: level {} read {} B pushed, {} B pulled", l.level, l.row_read_bytes, pulled_reads);
        }
    }
}

#[test]
fn push_equals_pull_directed() {
    check(true, VertexOrder::Input);
}

#[test]
fn push_equals_pull_undirected_degree_order() {
    check(false, VertexOrder::Degree);
}
