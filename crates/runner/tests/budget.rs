//! `infer_all` reserves its per-vertex state (the degree arrays) against
//! the engine's state budget before allocating it, as the analytics do: a
//! budget below it is refused with `OverBudget` naming `infer_all`, and
//! the same run passes once the budget allows it. A test binary of its
//! own: the budget is process-wide.

mod common;

use common::{Skewed, skewed_store};
use solidgraph_engine::EngineError;
use solidgraph_engine::state::set_budget;
use solidgraph_runner::models::{gcn, random_weights};
use solidgraph_runner::whole::{WholeOptions, infer_all};
use solidgraph_runner::{Model, Registry, RunnerError};
use solidgraph_store::order::VertexOrder;

const GRAPH: Skewed = Skewed { nodes: 2_000, edges: 8_000, idle: 10, hubs: 4, dim: 8, seed: 3 };

#[test]
fn infer_all_refuses_state_past_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let store = skewed_store(&dir.path().join("g"), &GRAPH, false, VertexOrder::Input);
    let dfg = gcn(8, &[8, 4], false);
    let model = Model::from_parts(dfg.clone(), &random_weights(&dfg, 1, 0.5), &Registry::with_builtin()).unwrap();
    let o = WholeOptions { out: "gcn".into(), chunk_bytes: 1 << 20, ..Default::default() };
    // GCN's symmetric norm keeps one f32 degree a vertex at least.
    let budget = store.num_nodes() * 4 - 1;
    set_budget(budget);
    match infer_all(&store, &model, &o, &mut |_| {}) {
        Err(RunnerError::Engine(EngineError::OverBudget { algorithm, needed, budget: b })) => {
            assert_eq!(algorithm, "infer_all");
            assert!(needed > budget && b == budget, "needed {needed}, budget {b}");
        }
        other => panic!("expected OverBudget, got {:?}", other.map(|r| r.rows)),
    }
    set_budget(0);
    let r = infer_all(&store, &model, &o, &mut |_| {}).unwrap();
    assert_eq!(r.rows, store.num_nodes());
    assert_eq!(std::fs::metadata(&r.path).unwrap().len(), store.num_nodes() * 4 * 4);
}
