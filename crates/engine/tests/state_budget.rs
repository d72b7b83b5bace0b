//! The state budget (`state::reserve`): every whole-graph algorithm sizes
//! its state before allocating it and is refused, naming itself, the bytes
//! and the budget, when the state exceeds the budget; with the default
//! budget the same calls run. One test in its own binary: the budget is
//! process-wide.

use solidgraph_engine::*;
use solidgraph_store::{EdgeInput, ImportOptions, OpenOptions, Store, import};

/// An algorithm by name, run on the test's store.
type Run<'a> = (&'static str, Box<dyn Fn() -> Result<()> + 'a>);

#[test]
fn every_algorithm_is_refused_past_its_state_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let n = 100u64;
    let (src, dst): (Vec<u64>, Vec<u64>) = (0..n).map(|v| (v, (v * 7 + 1) % n)).unzip();
    let w = Some(vec![1.0f32; src.len()]);
    let o = ImportOptions { in_edges: true, weights: true, num_nodes: Some(n), ..Default::default() };
    import(&path, &[EdgeInput::Memory { src, dst, weights: w, labels: None }], &[], &o, &|_, _, _| {}).unwrap();
    let s = Store::open(&path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    let runs: [Run; 8] = [
        ("BFS", Box::new(|| bfs::bfs(&s, 0, None, true, &silent).map(drop))),
        ("SSSP", Box::new(|| sssp::sssp(&s, 0, &silent).map(drop))),
        ("WCC", Box::new(|| wcc::wcc(&s, &silent).map(drop))),
        ("PageRank", Box::new(|| pagerank::pagerank(&s, 0.85, 3, None, &silent).map(drop))),
        ("CDLP", Box::new(|| cdlp::cdlp(&s, 3, &silent).map(drop))),
        ("LCC", Box::new(|| lcc::lcc(&s, &silent).map(drop))),
        ("MIS", Box::new(|| mis::mis(&s, 1, &silent).map(drop))),
        ("k-core", Box::new(|| kcore::kcore(&s, &silent).map(drop))),
    ];
    // Below a byte a vertex: every algorithm needs more.
    state::set_budget(n - 1);
    for (name, run) in &runs {
        match run() {
            Err(EngineError::OverBudget { algorithm, needed, budget }) => {
                assert_eq!((algorithm, budget), (*name, n - 1));
                assert!(needed >= n * 8 && needed.is_multiple_of(n), "{name}: {needed} bytes for {n} vertices");
                let e = EngineError::OverBudget { algorithm, needed, budget }.to_string();
                assert!(e.contains(name) && e.contains(&needed.to_string()) && e.contains(&budget.to_string()), "{e}");
            }
            other => panic!("{name} under a {} byte budget: {other:?}", n - 1),
        }
    }
    state::set_budget(0);
    assert!(state::budget() > n * 64, "the default is the machine's memory");
    for (name, run) in &runs {
        run().unwrap_or_else(|e| panic!("{name} with the default budget: {e}"));
    }
}
