//! Shared test helpers: random graphs and a dense reference for every model,
//! written from the models' definitions (PyG's formulas), independent of the
//! runner's kernels.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng, rngs::StdRng};
use solidgraph_runner::{Tensor, Weight};

pub type Mat = Vec<Vec<f32>>;

/// A random graph of `n` nodes: unique edges (src, dst), no self-loops, some nodes with no in-edges.
pub fn random_edges(n: usize, m: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut set = BTreeSet::new();
    for _ in 0..m {
        let (s, d) = (rng.random_range(0..n), rng.random_range(0..n));
        // Node n - 1 keeps no in-edges: a zero-degree destination in every graph.
        if s != d && d != n - 1 {
            set.insert((s, d));
        }
    }
    set.into_iter().collect()
}

pub fn random_tensor(rows: usize, cols: usize, seed: u64) -> Tensor {
    let mut rng = StdRng::seed_from_u64(seed);
    Tensor::new(rows, cols, (0..rows * cols).map(|_| rng.random_range(-1.0..1.0)).collect())
}

pub fn to_mat(t: &Tensor) -> Mat {
    (0..t.rows).map(|i| t.row(i).to_vec()).collect()
}

pub fn from_mat(m: &Mat) -> Tensor {
    let cols = m.first().map_or(0, Vec::len);
    Tensor::new(m.len(), cols, m.iter().flatten().copied().collect())
}

/// x W^T + b, W as PyTorch's `[out, in]`.
pub fn linear(x: &Mat, w: &Weight, b: Option<&Weight>) -> Mat {
    let (out, inn) = (w.shape[0], w.shape[1]);
    x.iter().map(|r| (0..out).map(|o| (0..inn).map(|k| r[k] * w.data[o * inn + k]).sum::<f32>() + b.map_or(0.0, |b| b.data[o])).collect()).collect()
}

pub fn map(x: &Mat, f: impl Fn(f32) -> f32) -> Mat {
    x.iter().map(|r| r.iter().map(|&v| f(v)).collect()).collect()
}

pub fn add(a: &Mat, b: &Mat) -> Mat {
    a.iter().zip(b).map(|(p, q)| p.iter().zip(q).map(|(x, y)| x + y).collect()).collect()
}

/// In-neighbours of each node.
pub fn in_lists(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut lists = vec![Vec::new(); n];
    for &(s, d) in edges {
        lists[d].push(s);
    }
    lists
}

pub fn gcn(x: &Mat, edges: &[(usize, usize)], w: &BTreeMap<String, Weight>, layers: usize) -> Mat {
    let n = x.len();
    let lists = in_lists(n, edges);
    let deg: Vec<f32> = lists.iter().map(|l| l.len() as f32 + 1.0).collect();
    let mut h = x.clone();
    for l in 0..layers {
        let z = linear(&h, &w[&format!("convs.{l}.lin.weight")], None);
        let b = &w[&format!("convs.{l}.bias")];
        h = (0..n)
            .map(|i| {
                let mut row: Vec<f32> = z[i].iter().map(|v| v / deg[i]).collect();
                for &j in &lists[i] {
                    row.iter_mut().zip(&z[j]).for_each(|(o, v)| *o += v / (deg[i] * deg[j]).sqrt());
                }
                row.iter().zip(&b.data).map(|(v, b)| v + b).collect()
            })
            .collect();
        if l + 1 < layers {
            h = map(&h, |v| v.max(0.0));
        }
    }
    h
}

pub fn sage(x: &Mat, edges: &[(usize, usize)], w: &BTreeMap<String, Weight>, layers: usize) -> Mat {
    let lists = in_lists(x.len(), edges);
    let mut h = x.clone();
    for l in 0..layers {
        let mean: Mat = lists
            .iter()
            .map(|js| {
                let mut row = vec![0.0; h[0].len()];
                for &j in js {
                    row.iter_mut().zip(&h[j]).for_each(|(o, v)| *o += v / js.len() as f32);
                }
                row
            })
            .collect();
        let p = format!("convs.{l}");
        h = add(&linear(&mean, &w[&format!("{p}.lin_l.weight")], Some(&w[&format!("{p}.lin_l.bias")])), &linear(&h, &w[&format!("{p}.lin_r.weight")], None));
        if l + 1 < layers {
            h = map(&h, |v| v.max(0.0));
        }
    }
    h
}

pub fn gin(x: &Mat, edges: &[(usize, usize)], w: &BTreeMap<String, Weight>, layers: usize, eps: f32) -> Mat {
    let lists = in_lists(x.len(), edges);
    let mut h = x.clone();
    for l in 0..layers {
        let z: Mat = lists
            .iter()
            .enumerate()
            .map(|(i, js)| {
                let mut row: Vec<f32> = h[i].iter().map(|v| (1.0 + eps) * v).collect();
                for &j in js {
                    row.iter_mut().zip(&h[j]).for_each(|(o, v)| *o += v);
                }
                row
            })
            .collect();
        let p = format!("convs.{l}.nn");
        let z = map(&linear(&z, &w[&format!("{p}.0.weight")], Some(&w[&format!("{p}.0.bias")])), |v| v.max(0.0));
        h = linear(&z, &w[&format!("{p}.2.weight")], Some(&w[&format!("{p}.2.bias")]));
        if l + 1 < layers {
            h = map(&h, |v| v.max(0.0));
        }
    }
    h
}

pub fn gat(x: &Mat, edges: &[(usize, usize)], w: &BTreeMap<String, Weight>, widths: &[usize], heads: &[usize], concat_last: bool) -> Mat {
    let n = x.len();
    let mut lists = in_lists(n, edges);
    for (i, l) in lists.iter_mut().enumerate() {
        l.push(i);
    }
    let mut h = x.clone();
    for (l, (&c, &nh)) in widths.iter().zip(heads).enumerate() {
        let last = l + 1 == widths.len();
        let p = format!("convs.{l}");
        let z = linear(&h, &w[&format!("{p}.lin.weight")], None);
        let (att_s, att_d) = (&w[&format!("{p}.att_src")].data, &w[&format!("{p}.att_dst")].data);
        let score = |i: usize, hh: usize, att: &[f32]| (0..c).map(|k| z[i][hh * c + k] * att[hh * c + k]).sum::<f32>();
        let mut out = vec![vec![0.0; nh * c]; n];
        for i in 0..n {
            for hh in 0..nh {
                let e: Vec<f32> = lists[i].iter().map(|&j| score(j, hh, att_s) + score(i, hh, att_d)).map(|v| if v > 0.0 { v } else { 0.2 * v }).collect();
                let max = e.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum: f32 = e.iter().map(|v| (v - max).exp()).sum();
                for (k, &j) in lists[i].iter().enumerate() {
                    let a = (e[k] - max).exp() / sum;
                    for q in 0..c {
                        out[i][hh * c + q] += a * z[j][hh * c + q];
                    }
                }
            }
        }
        if last && !concat_last {
            out = out.iter().map(|r| (0..c).map(|q| (0..nh).map(|hh| r[hh * c + q]).sum::<f32>() / nh as f32).collect()).collect();
        }
        let b = &w[&format!("{p}.bias")].data;
        h = out.iter().map(|r| r.iter().zip(b).map(|(v, b)| v + b).collect()).collect();
        if !last {
            h = map(&h, |v| if v > 0.0 { v } else { v.exp() - 1.0 });
        }
    }
    h
}

pub fn ngcf(x: &Mat, edges: &[(usize, usize)], w: &BTreeMap<String, Weight>, layers: usize) -> Mat {
    let lists = in_lists(x.len(), edges);
    let deg: Vec<f32> = lists.iter().map(|l| l.len() as f32).collect();
    let mut ego = x.clone();
    let mut parts = vec![x.clone()];
    for l in 0..layers {
        let side: Mat = lists
            .iter()
            .enumerate()
            .map(|(i, js)| {
                let mut row = vec![0.0; ego[0].len()];
                for &j in js {
                    row.iter_mut().zip(&ego[j]).for_each(|(o, v)| *o += v / (deg[i] * deg[j]).sqrt());
                }
                row
            })
            .collect();
        let p = format!("layers.{l}");
        let leaky = |v: f32| if v > 0.0 { v } else { 0.2 * v };
        let sum = map(&linear(&side, &w[&format!("{p}.W_gc.weight")], Some(&w[&format!("{p}.W_gc.bias")])), leaky);
        let prod: Mat = ego.iter().zip(&side).map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).collect()).collect();
        let bi = map(&linear(&prod, &w[&format!("{p}.W_bi.weight")], Some(&w[&format!("{p}.W_bi.bias")])), leaky);
        ego = add(&sum, &bi);
        parts.push(
            ego.iter()
                .map(|r| {
                    let norm = r.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                    r.iter().map(|v| v / norm).collect()
                })
                .collect(),
        );
    }
    (0..x.len()).map(|i| parts.iter().flat_map(|p| p[i].clone()).collect()).collect()
}

/// splitmix64: reproducible without a dependency.
pub fn splitmix(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The skewed weighted graph of the request and whole-graph tests.
pub struct Skewed {
    pub nodes: u64,
    pub edges: u64,
    /// The last `idle` nodes have no edges.
    pub idle: u64,
    /// A quarter of the edges go into or out of nodes `0..hubs`.
    pub hubs: u64,
    pub dim: usize,
    pub seed: u64,
}

/// Edges drawn per `s` (weights in 0.1..2.1), some loops, then a loop
/// repeated at node 5 (weights 0.5 and 3) and an edge 7 -> 9 repeated
/// (weights 1 and 2): repeated edges each keep their own weight. Features
/// `x` uniform in -1..1.
pub fn skewed_store(path: &std::path::Path, s: &Skewed, directed: bool, order: solidgraph_store::order::VertexOrder) -> solidgraph_store::Store {
    use solidgraph_store::{DType, EdgeInput, ImportOptions, OpenOptions, Store, TensorData, TensorInput, import};
    let mut next = splitmix(s.seed);
    let span = s.nodes - s.idle;
    let (mut src, mut dst, mut w) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..s.edges {
        let (mut a, mut b) = (next() % span, next() % span);
        match i % 8 {
            0 => b = next() % s.hubs,
            1 => a = next() % s.hubs,
            2 if i % 64 == 2 => b = a,
            _ => {}
        }
        src.push(a);
        dst.push(b);
        w.push(0.1 + (next() % 1000) as f32 / 500.0);
    }
    for (a, b, x) in [(5, 5, 0.5f32), (5, 5, 3.0), (7, 9, 1.0), (7, 9, 2.0)] {
        src.push(a);
        dst.push(b);
        w.push(x);
    }
    let x: Vec<u8> = (0..s.nodes as usize * s.dim).flat_map(|_| ((next() % 2000) as f32 / 1000.0 - 1.0).to_le_bytes()).collect();
    let tensors = [TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: s.nodes, dim: s.dim as u64, bytes: x } }];
    let o = ImportOptions { undirected: !directed, in_edges: directed, weights: true, num_nodes: Some(s.nodes), order, ..Default::default() };
    import(path, &[EdgeInput::Memory { src, dst, weights: Some(w), labels: None }], &tensors, &o, &|_, _, _| {}).unwrap();
    Store::open(path, &OpenOptions::default()).unwrap()
}

/// Every built-in model, `dim` -> `hidden` -> `out` (NGCF at half the hidden width, GAT 8 wide).
pub fn model_zoo(dim: usize, hidden: usize, out: usize) -> Vec<(&'static str, solidgraph_runner::Dfg)> {
    use solidgraph_runner::models;
    vec![
        ("gcn", models::gcn(dim, &[hidden, out], false)),
        ("gcnw", models::gcn(dim, &[hidden, out], true)),
        ("sage", models::sage(dim, &[hidden, out])),
        ("gin", models::gin(dim, &[hidden, out], 0.3)),
        ("ngcf", models::ngcf(dim, &[hidden / 2, out])),
        ("gat", models::gat(dim, &[8, out], &[2, 1], false)),
    ]
}

/// max |a - b| / max |b|.
pub fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}
