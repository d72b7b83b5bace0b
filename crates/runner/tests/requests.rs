//! Full-neighbourhood requests (`infer_nodes` with `fanouts: None`: rows and
//! compute only within the model's reach) against the trim-free run on the
//! same neighbourhood (explicit all-neighbour fanouts, the loader's path)
//! and against whole-graph inference (`infer_all`), for every model, on a
//! weighted skewed graph with loops, directed and undirected, in input and
//! degree order, in one batch and in several.

mod common;

use std::sync::Arc;

use common::{Skewed, model_zoo, rel_diff, skewed_store, splitmix};
use solidgraph_runner::infer::{InferOptions, full_fanouts, infer_nodes};
use solidgraph_runner::models::{gcn, random_weights};
use solidgraph_runner::reach::Reach;
use solidgraph_runner::whole::{WholeOptions, infer_all};
use solidgraph_runner::{Model, Registry};
use solidgraph_store::order::VertexOrder;

const N: u64 = 3_000;
const DIM: usize = 12;
const GRAPH: Skewed = Skewed { nodes: N, edges: 6_000, idle: 100, hubs: 8, dim: DIM, seed: 3 };

fn check(directed: bool, order: VertexOrder) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(skewed_store(&dir.path().join("g"), &GRAPH, directed, order));
    let mut next = splitmix(9);
    // Hubs, nodes without edges, a repeat, the ends of the repeated edges, and random nodes.
    let mut targets: Vec<u64> = vec![0, 3, N - 1, N - 50, 3, 5, 7, 9];
    targets.extend((0..60).map(|_| next() % N));
    for (i, (kind, dfg)) in model_zoo(DIM, 16, 4).into_iter().enumerate() {
        let weights = random_weights(&dfg, 21 + i as u64, 0.5);
        let model = Model::from_parts(dfg, &weights, &Registry::with_builtin()).unwrap();
        let what = format!("{kind}, directed {directed}, {order:?}");
        let whole = infer_all(&store, &model, &WholeOptions { out: kind.into(), ..Default::default() }, &mut |_| {}).unwrap();
        let bytes = std::fs::read(&whole.path).unwrap();
        let all: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        let cols = model.output_cols();
        let expect: Vec<f32> = targets.iter().flat_map(|&t| all[t as usize * cols..(t as usize + 1) * cols].to_vec()).collect();
        for batch_size in [targets.len(), 7] {
            let o = InferOptions { batch_size, ..Default::default() };
            let reached = infer_nodes(store.clone(), &model, &targets, &o, &mut |_| {}).unwrap();
            let trim_free = InferOptions { fanouts: Some(full_fanouts(&model)), ..o.clone() };
            let free = infer_nodes(store.clone(), &model, &targets, &trim_free, &mut |_| {}).unwrap();
            assert!(reached.data.iter().all(|v| v.is_finite()), "{what}");
            assert!(rel_diff(&reached.data, &free.data) < 1e-5, "{what}, batch {batch_size}: {}", rel_diff(&reached.data, &free.data));
            // Repeated edges (7 -> 9, the loops at 5) keep their own weights on both paths.
            assert!(rel_diff(&reached.data, &expect) < 1e-4, "{what}, batch {batch_size}: {}", rel_diff(&reached.data, &expect));
        }
    }
}

#[test]
fn requests_equal_trim_free_and_whole_graph_directed() {
    check(true, VertexOrder::Input);
}

#[test]
fn requests_equal_trim_free_and_whole_graph_undirected_degree_order() {
    check(false, VertexOrder::Degree);
}

#[test]
fn reach_of_the_models() {
    for (kind, dfg) in model_zoo(DIM, 16, 4) {
        let r = Reach::of(&dfg);
        assert_eq!(r, Reach { inputs: vec![Some(2)], total: 2 }, "{kind}");
    }
    // One layer more reaches one hop more; a second aggregation on the same block too.
    assert_eq!(Reach::of(&gcn(DIM, &[8, 8, 4], false)).total, 3);
}
