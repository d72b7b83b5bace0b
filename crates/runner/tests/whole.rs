//! `infer_all`'s push pass (linear aggregations read the lower level's rows
//! once per destination range) against its pull pass (each destination chunk
//! gathers its sources' rows), which tests/test_infer.py checks against PyG:
//! on skewed graphs with hubs, repeated edges, explicit self-loops and edge
//! weights, directed (with in-lists) and undirected, in input and degree
//! order, with accumulators split into several destination ranges and in one.

mod common;

use common::{Skewed, model_zoo, rel_diff, skewed_store};
use solidgraph_runner::models::random_weights;
use solidgraph_runner::whole::{WholeOptions, WholeReport, infer_all};
use solidgraph_runner::{Model, Registry};
use solidgraph_store::Store;
use solidgraph_store::order::VertexOrder;

const DIM: usize = 24;
/// A quarter of the edges into or out of 16 hubs, some repeated, some loops,
/// and nodes without edges at the end.
const GRAPH: Skewed = Skewed { nodes: 20_000, edges: 120_000, idle: 500, hubs: 16, dim: DIM, seed: 7 };

fn run(store: &Store, model: &Model, name: &str, push: bool, row_cache_bytes: u64) -> (Vec<f32>, WholeReport) {
    let o = WholeOptions { out: name.into(), chunk_bytes: 1 << 20, row_cache_bytes, push, ..Default::default() };
    let r = infer_all(store, model, &o, &mut |_| {}).unwrap();
    let bytes = std::fs::read(&r.path).unwrap();
    (bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect(), r)
}

fn check(directed: bool, order: VertexOrder) {
    let dir = tempfile::tempdir().unwrap();
    let store = skewed_store(&dir.path().join("g"), &GRAPH, directed, order);
    for (i, (kind, dfg)) in model_zoo(DIM, 32, 8).into_iter().enumerate() {
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
