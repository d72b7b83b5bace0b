//! Each model builder end to end on small random graphs against a dense
//! reference computed here: full-graph, sampled (trim-free, seeds' rows),
//! and through a model directory on disk.

mod common;

use std::collections::HashMap;

use common::*;
use solidgraph_engine::sampler::Sample;
use solidgraph_runner::models::{self, random_weights};
use solidgraph_runner::{Block, Dfg, Model, Registry, Tensor, blocks_full, save_model};

const TOL: f32 = 1e-4;

/// A dense reference of a model, given its weights.
type DenseModel<'a> = dyn Fn(&std::collections::BTreeMap<String, solidgraph_runner::Weight>) -> Mat + 'a;

fn full_blocks(n: usize, edges: &[(usize, usize)], layers: usize) -> Vec<Block> {
    let src: Vec<u64> = edges.iter().map(|e| e.0 as u64).collect();
    let dst: Vec<u64> = edges.iter().map(|e| e.1 as u64).collect();
    let b = Block::from_edges(n, n, &src, &dst, None).unwrap();
    blocks_full(n, b.indptr().to_vec(), b.indices().to_vec(), None, layers).unwrap()
}

fn run(dfg: &Dfg, seed: u64, n: usize, edges: &[(usize, usize)], x: &Tensor) -> (Tensor, std::collections::BTreeMap<String, solidgraph_runner::Weight>) {
    let w = random_weights(dfg, seed, 0.5);
    let model = Model::from_parts(dfg.clone(), &w, &Registry::with_builtin()).unwrap();
    let out = model.run(&full_blocks(n, edges, dfg.blocks), &HashMap::from([("x".to_string(), x.clone())])).unwrap();
    // The reference kernels alone give the same answer as the optimised ones.
    let mut reference = Registry::empty();
    for op in solidgraph_runner::dfg::OP_NAMES {
        reference.register(op, solidgraph_runner::Device::cpu(), 0, std::sync::Arc::new(solidgraph_runner::kernels::reference::Reference)).unwrap();
    }
    let oracle = Model::from_parts(dfg.clone(), &w, &reference)
        .unwrap()
        .run(&full_blocks(n, edges, dfg.blocks), &HashMap::from([("x".to_string(), x.clone())]))
        .unwrap();
    assert!(out.max_rel_diff(&oracle) < TOL, "optimised vs reference kernels: {}", out.max_rel_diff(&oracle));
    (out, w)
}

fn check(got: &Tensor, want: &Mat) {
    let want = from_mat(want);
    let d = got.max_rel_diff(&want);
    assert!(d < TOL, "max relative difference {d}");
}

#[test]
fn gcn_matches_dense() {
    for (seed, n) in [(1u64, 1usize), (2, 7), (3, 40)] {
        let edges = random_edges(n, n * 3, seed);
        let x = random_tensor(n, 6, seed);
        let dfg = models::gcn(6, &[8, 3], false);
        let (out, w) = run(&dfg, seed, n, &edges, &x);
        check(&out, &gcn(&to_mat(&x), &edges, &w, 2));
    }
}

#[test]
fn sage_matches_dense() {
    for (seed, n) in [(4u64, 1usize), (5, 9), (6, 50)] {
        let edges = random_edges(n, n * 4, seed);
        let x = random_tensor(n, 5, seed);
        let dfg = models::sage(5, &[16, 4]);
        let (out, w) = run(&dfg, seed, n, &edges, &x);
        check(&out, &sage(&to_mat(&x), &edges, &w, 2));
    }
}

#[test]
fn gin_matches_dense() {
    for (seed, n) in [(7u64, 1usize), (8, 30)] {
        let edges = random_edges(n, n * 3, seed);
        let x = random_tensor(n, 4, seed);
        let dfg = models::gin(4, &[8, 8], 0.1);
        let (out, w) = run(&dfg, seed, n, &edges, &x);
        check(&out, &gin(&to_mat(&x), &edges, &w, 2, 0.1));
    }
}

#[test]
fn gat_matches_dense() {
    for (seed, n, concat) in [(9u64, 1usize, false), (10, 25, false), (11, 25, true)] {
        let edges = random_edges(n, n * 3, seed);
        let x = random_tensor(n, 6, seed);
        let dfg = models::gat(6, &[4, 3], &[3, 2], concat);
        let (out, w) = run(&dfg, seed, n, &edges, &x);
        check(&out, &gat(&to_mat(&x), &edges, &w, &[4, 3], &[3, 2], concat));
    }
}

#[test]
fn ngcf_matches_dense() {
    for (seed, n) in [(12u64, 2usize), (13, 30)] {
        // NGCF runs on an undirected user-item graph: both directions of every edge.
        let one_way = random_edges(n, n * 2, seed);
        let mut edges: Vec<(usize, usize)> = one_way.iter().flat_map(|&(s, d)| [(s, d), (d, s)]).collect();
        edges.sort();
        edges.dedup();
        let x = random_tensor(n, 8, seed);
        let dfg = models::ngcf(8, &[8, 8]);
        let (out, w) = run(&dfg, seed, n, &edges, &x);
        check(&out, &ngcf(&to_mat(&x), &edges, &w, 2));
    }
}

/// A two-hop sample shaped as the engine gives it: seeds first, then each
/// hop's new nodes; row -> col edges in local ids, grouped by hop.
fn two_hop_sample(n: usize, edges: &[(usize, usize)], seeds: &[usize], dim: usize, x: &Tensor) -> (Sample, Vec<(usize, usize)>) {
    let lists = in_lists(n, edges);
    let mut node: Vec<usize> = seeds.to_vec();
    let mut local: HashMap<usize, usize> = seeds.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let mut s = Sample { num_sampled_nodes: vec![seeds.len() as u64], ..Default::default() };
    let (mut start, mut end) = (0, node.len());
    for _hop in 0..2 {
        let before = s.row.len();
        for v in start..end {
            // Take up to 3 in-neighbours (a deterministic "fanout").
            for &u in lists[node[v]].iter().take(3) {
                let lu = *local.entry(u).or_insert_with(|| {
                    node.push(u);
                    node.len() - 1
                });
                s.row.push(lu as u64);
                s.col.push(v as u64);
                s.edge.push(0);
            }
        }
        s.num_sampled_nodes.push((node.len() - end) as u64);
        s.num_sampled_edges.push((s.row.len() - before) as u64);
        (start, end) = (end, node.len());
    }
    s.node = node.iter().map(|&v| v as u64).collect();
    let bytes: Vec<u8> = node.iter().flat_map(|&v| x.row(v).iter().flat_map(|f| f.to_le_bytes())).collect();
    s.tensors.push(solidgraph_store::Rows { dtype: solidgraph_store::DType::F32, dim: dim as u64, data: bytes });
    let local_edges = s.row.iter().zip(&s.col).map(|(&r, &c)| (r as usize, c as usize)).collect();
    (s, local_edges)
}

/// PyG's `model(batch.x, batch.edge_index)[:batch_size]`: the dense model on the
/// sampled subgraph (local ids), the seeds' rows.
#[test]
fn sampled_batches_match_the_dense_model_on_the_subgraph() {
    let n = 60;
    let edges = random_edges(n, 300, 21);
    let x = random_tensor(n, 6, 21);
    let seeds = [3usize, 17, 42, 5];
    let (sample, local) = two_hop_sample(n, &edges, &seeds, 6, &x);
    let m = sample.node.len();
    let xs: Mat = sample.node.iter().map(|&v| x.row(v as usize).to_vec()).collect();
    let cases: Vec<(Dfg, Box<DenseModel>)> = vec![
        (models::gcn(6, &[8, 3], false), Box::new(|w| gcn(&xs, &local, w, 2))),
        (models::sage(6, &[8, 3]), Box::new(|w| sage(&xs, &local, w, 2))),
        (models::gin(6, &[8, 3], 0.0), Box::new(|w| gin(&xs, &local, w, 2, 0.0))),
        (models::gat(6, &[4, 3], &[2, 1], false), Box::new(|w| gat(&xs, &local, w, &[4, 3], &[2, 1], false))),
    ];
    for (dfg, dense) in cases {
        let w = random_weights(&dfg, 5, 0.5);
        let model = Model::from_parts(dfg.clone(), &w, &Registry::with_builtin()).unwrap();
        let got = model.run_sample(&sample, None).unwrap();
        let want: Mat = dense(&w).into_iter().take(seeds.len()).collect();
        assert_eq!((got.rows, m > seeds.len()), (seeds.len(), true));
        check(&got, &want);
    }
}

#[test]
fn a_model_directory_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let dfg = models::gat(5, &[4, 2], &[2, 1], false);
    let w = random_weights(&dfg, 3, 0.5);
    save_model(dir.path(), &dfg, &w).unwrap();
    let loaded = Model::load(dir.path()).unwrap();
    assert_eq!(loaded.dfg(), &dfg);
    let n = 20;
    let edges = random_edges(n, 60, 3);
    let x = random_tensor(n, 5, 3);
    let inputs = HashMap::from([("x".to_string(), x.clone())]);
    let a = loaded.run(&full_blocks(n, &edges, 2), &inputs).unwrap();
    let b = Model::from_parts(dfg, &w, &Registry::with_builtin()).unwrap().run(&full_blocks(n, &edges, 2), &inputs).unwrap();
    assert_eq!(a, b);
    assert_eq!(loaded.output_cols(), 2);
}
