//! `infer_hood::full_neighbourhood` against the sampler with every fanout -1:
//! the same nodes, edges and order, each tensor's rows as far out as asked,
//! each edge's own weight (repeated edges differ) as the in-lists hold it.

use proptest::prelude::*;
use solidgraph_engine::infer_hood::{HoodRows, full_neighbourhood};
use solidgraph_engine::sampler::{SampleOptions, sample_neighbors};
use solidgraph_store::order::VertexOrder;
use solidgraph_store::*;

const DIM: u64 = 3;

fn build(n: u64, edges: &[(u64, u64)], order: VertexOrder) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    // Repeated edges are kept, each with a weight of its own.
    let o = ImportOptions { in_edges: true, weights: true, num_nodes: Some(n), order, ..Default::default() };
    let w = (0..edges.len()).map(|i| 1.0 + i as f32).collect();
    let input = EdgeInput::Memory { src: edges.iter().map(|e| e.0).collect(), dst: edges.iter().map(|e| e.1).collect(), weights: Some(w), labels: None };
    let x: Vec<u8> = (0..n * DIM).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: DIM, bytes: x } };
    import(&path, &[input], &[t], &o, &|_, _, _| {}).unwrap();
    let store = Store::open(&path, &OpenOptions::default()).unwrap();
    (dir, store)
}

fn check(store: &Store, seeds: &[u64], hops: usize, rows_hops: usize) {
    let o = SampleOptions { fanouts: vec![-1; hops], tensors: vec!["x".into()], ..SampleOptions::default() };
    let want = sample_neighbors(store, seeds, &o).unwrap();
    let (got, weights) = full_neighbourhood(store, seeds, hops, &[HoodRows { tensor: "x".into(), hops: rows_hops }], true).unwrap();
    // Edge ids are positions in the in-lists of every vertex in store order.
    let all: Vec<u64> = (0..store.num_nodes()).collect();
    let lists = store.neighbors(&all, Direction::In, true, false).unwrap();
    let expect: Vec<f32> = got.edge.iter().map(|&e| lists.weights.as_ref().unwrap()[e as usize]).collect();
    assert_eq!(weights.unwrap(), expect);
    let (unweighted, none) = full_neighbourhood(store, seeds, hops, &[HoodRows { tensor: "x".into(), hops: rows_hops }], false).unwrap();
    assert!(none.is_none());
    assert_eq!(unweighted.row, got.row);
    assert_eq!(got.node, want.node);
    assert_eq!((&got.row, &got.col, &got.edge), (&want.row, &want.col, &want.edge));
    assert_eq!((&got.num_sampled_nodes, &got.num_sampled_edges), (&want.num_sampled_nodes, &want.num_sampled_edges));
    let kept: u64 = got.num_sampled_nodes.iter().take(rows_hops + 1).sum();
    let bytes = (kept * DIM * 4) as usize;
    assert_eq!(got.tensors.len(), 1);
    assert_eq!(got.tensors[0].data, want.tensors[0].data[..bytes]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn equals_the_sampler_with_every_fanout_all(
        n in 2u64..300,
        raw in prop::collection::vec((0u64..300, 0u64..300), 0..900),
        seeds in prop::collection::vec(0u64..300, 1..12),
        hops in 1usize..4,
        rows_hops in 0usize..4,
        degree_order in any::<bool>(),
    ) {
        let edges: Vec<(u64, u64)> = raw.into_iter().map(|(a, b)| (a % n, b % n)).collect();
        let seeds: Vec<u64> = seeds.into_iter().map(|s| s % n).collect();
        let order = if degree_order { VertexOrder::Degree } else { VertexOrder::Input };
        let (_dir, store) = build(n, &edges, order);
        check(&store, &seeds, hops, rows_hops.min(hops));
    }
}

#[test]
fn a_frontier_wider_than_one_part() {
    // A star into node 0 of 40,000 leaves, and a chain out of each leaf: hop 1
    // reads 40,000 lists (several parts), hop 2 finds their sources.
    let n = 80_001;
    let mut edges: Vec<(u64, u64)> = (1..=40_000).map(|v| (v, 0)).collect();
    edges.extend((1..=40_000).map(|v| (v + 40_000, v)));
    let (_dir, store) = build(n, &edges, VertexOrder::Input);
    check(&store, &[0], 2, 1);
    check(&store, &[0, 5, 40_003], 3, 3);
}

#[test]
fn bad_input_is_an_error() {
    let (_dir, store) = build(4, &[(0, 1), (1, 2)], VertexOrder::Input);
    let x = || vec![HoodRows { tensor: "x".into(), hops: 1 }];
    assert!(full_neighbourhood(&store, &[], 1, &x(), false).is_err());
    assert!(full_neighbourhood(&store, &[4], 1, &x(), false).is_err());
    assert!(full_neighbourhood(&store, &[0], 1, &[HoodRows { tensor: "nope".into(), hops: 1 }], false).is_err());
}
