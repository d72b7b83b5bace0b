//! Streamed requests (`runner::stream`: a request of more than one batch
//! reads its reach once, projecting rows by the first layer as they arrive)
//! against the same request batch by batch (`stream_bytes: 0`) and against
//! whole-graph inference, for every model, on a weighted skewed graph with
//! loops, directed and undirected, in input and degree order; with a budget
//! small enough that the rows arrive in many chunks, and one too small for
//! the projected reach (the batched path runs instead).

mod common;

use std::sync::Arc;

use common::{Skewed, model_zoo, rel_diff, skewed_store, splitmix};
use solidgraph_runner::cost::Costs;
use solidgraph_runner::infer::{InferOptions, PathChoice, RequestPath, infer_nodes_report};
use solidgraph_runner::models::random_weights;
use solidgraph_runner::stream::Projection;
use solidgraph_runner::whole::{WholeOptions, infer_all};
use solidgraph_runner::{Model, Registry};
use solidgraph_store::order::VertexOrder;

const N: u64 = 3_000;
const DIM: usize = 24;
const GRAPH: Skewed = Skewed { nodes: N, edges: 6_000, idle: 100, hubs: 8, dim: DIM, seed: 5 };

fn check(directed: bool, order: VertexOrder) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(skewed_store(&dir.path().join("g"), &GRAPH, directed, order));
    let mut next = splitmix(11);
    let mut targets: Vec<u64> = vec![0, 3, N - 1, N - 50, 3, 5, 7, 9];
    targets.extend((0..60).map(|_| next() % N));
    for (i, (kind, dfg)) in model_zoo(DIM, 8, 4).into_iter().enumerate() {
        let weights = random_weights(&dfg, 31 + i as u64, 0.5);
        let model = Model::from_parts(dfg, &weights, &Registry::with_builtin()).unwrap();
        let what = format!("{kind}, directed {directed}, {order:?}");
        let streams = Projection::of(&model).unwrap().is_some();
        // GCN (weighted or not), SAGE and GAT (`lin` first) read x linearly; GIN and NGCF do not.
        assert_eq!(streams, matches!(kind, "gcn" | "gcnw" | "sage" | "gat"), "{what}");
        let whole = infer_all(&store, &model, &WholeOptions { out: kind.into(), ..Default::default() }, &mut |_| {}).unwrap();
        let bytes = std::fs::read(&whole.path).unwrap();
        let all: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        let cols = model.output_cols();
        let expect: Vec<f32> = targets.iter().flat_map(|&t| all[t as usize * cols..(t as usize + 1) * cols].to_vec()).collect();
        let batched = InferOptions { batch_size: 7, stream_bytes: 0, ..Default::default() };
        let (base, path) = infer_nodes_report(store.clone(), &model, &targets, &batched, &mut |_| {}).unwrap();
        assert_eq!(path, RequestPath::Batched, "{what}");
        // Default budget: one chunk; 256 KiB: chunks of 341 rows; 1 KiB: the projected reach does not fit.
        for budget in [512 << 20, 256 << 10, 1 << 10] {
            let o = InferOptions { batch_size: 7, stream_bytes: budget, path: PathChoice::Stream, ..Default::default() };
            let mut done = 0;
            let (got, path) = infer_nodes_report(store.clone(), &model, &targets, &o, &mut |d| done = d).unwrap();
            assert_eq!(done, targets.len(), "{what}");
            match path {
                RequestPath::Stream(r) => {
                    assert!(streams && budget > 1 << 10, "{what}, budget {budget}: streamed");
                    assert!(r.nodes > targets.len() && r.projected_bytes <= budget, "{what}: {r:?}");
                }
                RequestPath::Batched => assert!(!streams || budget == 1 << 10, "{what}, budget {budget}: not streamed"),
                RequestPath::Sampled | RequestPath::BatchedCheaper(_) => panic!("{what}: {path:?}: not the forced stream or its fallback"),
            }
            assert!(got.data.iter().all(|v| v.is_finite()), "{what}");
            assert!(rel_diff(&got.data, &base.data) < 1e-4, "{what}, budget {budget}: {}", rel_diff(&got.data, &base.data));
            assert!(rel_diff(&got.data, &expect) < 1e-4, "{what}, budget {budget}: {}", rel_diff(&got.data, &expect));
        }
        // One batch never streams: nothing to share between batches.
        let one = InferOptions { batch_size: targets.len(), ..Default::default() };
        assert_eq!(infer_nodes_report(store.clone(), &model, &targets, &one, &mut |_| {}).unwrap().1, RequestPath::Batched, "{what}");
    }
}

#[test]
fn streamed_requests_equal_batched_and_whole_graph_directed() {
    check(true, VertexOrder::Input);
}

#[test]
fn streamed_requests_equal_batched_and_whole_graph_undirected_degree_order() {
    check(false, VertexOrder::Degree);
}

/// The cost model's choice (`PathChoice::Auto`): with costs where merged
/// reads gain nothing over random ones, a request whose reach is a few
/// percent of rows of 2 KiB runs batch by batch and one whose reach is most
/// of the graph streams; both say why, and answers equal the forced paths'.
/// With the measured costs both stream.
#[test]
fn the_cost_model_batches_a_sparse_reach_and_streams_a_dense_one() {
    const WIDE: usize = 512;
    let graph = Skewed { nodes: N, edges: 3_000, idle: 100, hubs: 100, dim: WIDE, seed: 9 };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(skewed_store(&dir.path().join("g"), &graph, true, VertexOrder::Input));
    let (kind, dfg) = model_zoo(WIDE, 8, 4).into_iter().find(|(k, _)| *k == "sage").unwrap();
    let model = Model::from_parts(dfg.clone(), &random_weights(&dfg, 3, 0.5), &Registry::with_builtin()).unwrap();
    let mut next = splitmix(17);
    let sparse: Vec<u64> = (0..16).map(|_| next() % N).collect();
    let dense: Vec<u64> = (0..1_500).map(|_| next() % N).collect();
    for (targets, want_stream) in [(&sparse, false), (&dense, true)] {
        let what = format!("{kind}, {} targets", targets.len());
        let run = |path| {
            let o = InferOptions { batch_size: 8, path, ..Default::default() };
            infer_nodes_report(store.clone(), &model, targets, &o, &mut |_| {}).unwrap()
        };
        assert!(matches!(run(PathChoice::default()).1, RequestPath::Stream(_)), "{what}: the measured costs stream");
        let (auto, path) = run(PathChoice::Auto(Costs { stream_io_us: 100.0, batched_io_us: 100.0, page_us: 100.0 }));
        let choice = match path {
            RequestPath::Stream(r) => r.choice.expect("the cost model chose"),
            RequestPath::BatchedCheaper(c) => c,
            other => panic!("{what}: {other:?}"),
        };
        assert_eq!(choice.streams(), want_stream, "{what}: {}", choice.reason());
        assert_eq!(matches!(path, RequestPath::Stream(_)), want_stream, "{what}");
        assert!(choice.reason().starts_with(if want_stream { "stream" } else { "batches" }), "{what}: {}", choice.reason());
        for forced in [PathChoice::Stream, PathChoice::Batched] {
            let (got, _) = run(forced);
            assert!(rel_diff(&got.data, &auto.data) < 1e-4, "{what}, {forced:?}: {}", rel_diff(&got.data, &auto.data));
        }
    }
}
