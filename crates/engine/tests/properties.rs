//! Analytics on random graphs against plain in-memory references.

use std::collections::{BTreeSet, VecDeque};

use proptest::prelude::*;
use solidgraph_engine::*;
use solidgraph_store::{Direction, EdgeInput, ImportOptions, OpenOptions, Store, import};

struct Case {
    _dir: tempfile::TempDir,
    store: Store,
    /// Undirected adjacency without self-loops (the "both" view).
    und: Vec<BTreeSet<u64>>,
    /// Out-adjacency as stored (deduplicated).
    out: Vec<BTreeSet<u64>>,
}

fn build(n: u64, edges: &[(u64, u64)], directed: bool, cache: u64) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    // Half the undirected graphs get lower lists (PageRank and WCC read them).
    let o = ImportOptions {
        undirected: !directed,
        in_edges: directed,
        lower_lists: !directed && n.is_multiple_of(2),
        dedup: true,
        num_nodes: Some(n),
        ..Default::default()
    };
    let input = EdgeInput::Memory { src: edges.iter().map(|e| e.0).collect(), dst: edges.iter().map(|e| e.1).collect(), weights: None, labels: None };
    import(&path, &[input], &[], &o, &|_, _, _| {}).unwrap();
    let store = Store::open(&path, &OpenOptions { cache_bytes: cache, ..Default::default() }).unwrap();
    let mut und = vec![BTreeSet::new(); n as usize];
    let mut out = vec![BTreeSet::new(); n as usize];
    for &(a, b) in edges {
        out[a as usize].insert(b);
        if !directed {
            out[b as usize].insert(a);
        }
        if a != b {
            und[a as usize].insert(b);
            und[b as usize].insert(a);
        }
    }
    Case { _dir: dir, store, und, out }
}

fn graphs() -> impl Strategy<Value = (u64, Vec<(u64, u64)>, bool, bool)> {
    (1u64..400).prop_flat_map(|n| (Just(n), proptest::collection::vec((0..n, 0..n), 1..1500), any::<bool>(), any::<bool>()))
}

fn ref_bfs(out: &[BTreeSet<u64>], s: u64) -> Vec<i64> {
    let mut lv = vec![bfs::UNREACHED; out.len()];
    lv[s as usize] = 0;
    let mut q = VecDeque::from([s]);
    while let Some(v) = q.pop_front() {
        for &u in &out[v as usize] {
            if lv[u as usize] == bfs::UNREACHED {
                lv[u as usize] = lv[v as usize] + 1;
                q.push_back(u);
            }
        }
    }
    lv
}

fn ref_core(und: &[BTreeSet<u64>]) -> Vec<u32> {
    // Naive peeling: repeatedly remove a vertex of minimum degree.
    let n = und.len();
    let mut deg: Vec<usize> = und.iter().map(|s| s.len()).collect();
    let mut alive = vec![true; n];
    let mut core = vec![0u32; n];
    let mut k = 0;
    for _ in 0..n {
        let v = (0..n).filter(|&v| alive[v]).min_by_key(|&v| deg[v]).unwrap();
        k = k.max(deg[v]);
        core[v] = k as u32;
        alive[v] = false;
        for &u in &und[v] {
            if alive[u as usize] {
                deg[u as usize] -= 1;
            }
        }
    }
    core
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn analytics_match_references((n, edges, directed, tiny_cache) in graphs(), src in any::<u64>(), seed in any::<u64>()) {
        let c = build(n, &edges, directed, if tiny_cache { 4096 } else { 1 << 24 });
        let s = &c.store;
        let source = src % n;

        let want = ref_bfs(&c.out, source);
        let mut got = None;
        for steps in [bfs::Steps::Auto, bfs::Steps::TopDown, bfs::Steps::BottomUp] {
            let r = bfs::bfs_with(s, source, None, true, steps, &silent).unwrap();
            prop_assert_eq!(&r.levels, &want, "{:?}", steps);
            let parents = r.parents.as_ref().unwrap();
            for (v, &lv) in r.levels.iter().enumerate() {
                if lv > 0 && lv != bfs::UNREACHED {
                    let p = parents[v] as usize;
                    prop_assert_eq!(r.levels[p] + 1, lv);
                    prop_assert!(c.out[p].contains(&(v as u64)));
                }
            }
            got = Some(r);
        }
        let got = got.unwrap();
        // Early stop at a target still gives the target's exact level.
        let t = (source + 1) % n;
        let early = bfs::bfs(s, source, Some(t), false, &silent).unwrap();
        prop_assert_eq!(early.levels[t as usize], got.levels[t as usize]);

        // WCC: same component iff connected in the undirected view.
        let comp = wcc::wcc(s, &silent).unwrap();
        for v in 0..n {
            for &u in &c.und[v as usize] {
                prop_assert_eq!(comp[v as usize], comp[u as usize]);
            }
            prop_assert!(comp[v as usize] <= v, "component label is its smallest vertex");
            prop_assert_eq!(comp[comp[v as usize] as usize], comp[v as usize]);
        }

        let pr = pagerank::pagerank(s, 0.85, 30, None, &silent).unwrap().ranks;
        let sum: f64 = pr.iter().sum();
        prop_assert!((sum - 1.0).abs() < 1e-9, "PageRank sums to {}", sum);

        let core = kcore::kcore(s, &silent).unwrap();
        prop_assert_eq!(core, ref_core(&c.und));

        let set = mis::mis(s, seed, &silent).unwrap();
        for v in 0..n as usize {
            if set[v] {
                prop_assert!(c.und[v].iter().all(|&u| !set[u as usize]), "not independent at {}", v);
            } else {
                prop_assert!(c.und[v].iter().any(|&u| set[u as usize]), "not maximal at {}", v);
            }
        }
        prop_assert_eq!(&set, &mis::mis(s, seed, &silent).unwrap(), "MIS is not deterministic for a seed");

        let starts: Vec<u64> = (0..n.min(50)).collect();
        for (p, q) in [(1.0, 1.0), (0.5, 2.0)] {
            let o = walks::WalkOptions { length: 8, p, q, seed, direction: Direction::Out };
            let w = walks::random_walks(s, &starts, &o).unwrap();
            for row in w.chunks(9) {
                for pair in row.windows(2) {
                    let (a, b) = (pair[0], pair[1]);
                    prop_assert!(c.out[a as usize].contains(&b) || (c.out[a as usize].is_empty() && a == b), "walk step {}->{} is no edge", a, b);
                }
            }
            prop_assert_eq!(w, walks::random_walks(s, &starts, &o).unwrap());
        }
    }
}

#[test]
fn bad_arguments_are_clear_errors() {
    let c = build(5, &[(0, 1), (1, 2)], true, 1 << 20);
    let s = &c.store;
    assert!(bfs::bfs(s, 9, None, false, &silent).unwrap_err().to_string().contains("source vertex 9"));
    assert!(pagerank::pagerank(s, 1.5, 10, None, &silent).unwrap_err().to_string().contains("damping"));
    assert!(sssp::sssp(s, 0, &silent).unwrap_err().to_string().contains("weights"));
    let w = walks::WalkOptions { length: 0, p: 1.0, q: 1.0, seed: 0, direction: Direction::Out };
    assert!(walks::random_walks(s, &[0], &w).is_err());

    // Directed store without in-edges: algorithms that need them say how to get them.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let input = EdgeInput::Memory { src: vec![0, 1], dst: vec![1, 2], weights: Some(vec![1.0, -2.0]), labels: None };
    import(&path, &[input], &[], &ImportOptions { weights: true, ..Default::default() }, &|_, _, _| {}).unwrap();
    let s = Store::open(&path, &OpenOptions::default()).unwrap();
    let e = kcore::kcore(&s, &silent).unwrap_err().to_string();
    assert!(e.contains("needs its in-edges; import it again keeping in-edges"), "{e}");
    let e = sssp::sssp(&s, 0, &silent).unwrap_err().to_string();
    assert!(e.contains("non-negative"), "{e}");
}

/// A hook that refuses after `allow` reports stops every operator with
/// `Cancelled`, whichever report it refuses (the first, or one mid-run).
#[test]
fn a_refusing_progress_hook_cancels_every_operator() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let n = 3000u64;
    let edges: Vec<(u64, u64)> = (0..n * 8).map(|i| ((i * 7919) % n, (i * 104_729 + 13) % n)).collect();
    for directed in [true, false] {
        let c = build(n, &edges, directed, 1 << 20);
        let s = &c.store;
        type Run<'a> = Box<dyn Fn(Progress) -> Result<()> + 'a>;
        let runs: Vec<(&str, Run)> = vec![
            ("bfs", Box::new(|p| bfs::bfs(s, 0, None, true, p).map(drop))),
            ("wcc", Box::new(|p| wcc::wcc(s, p).map(drop))),
            ("pagerank", Box::new(|p| pagerank::pagerank(s, 0.85, 30, None, p).map(drop))),
            ("kcore", Box::new(|p| kcore::kcore(s, p).map(drop))),
            ("cdlp", Box::new(|p| cdlp::cdlp(s, 5, p).map(drop))),
            ("lcc", Box::new(|p| lcc::lcc(s, p).map(drop))),
            ("mis", Box::new(|p| mis::mis(s, 1, p).map(drop))),
        ];
        for (name, run) in &runs {
            let reports = AtomicU64::new(0);
            run(&|_, _, _| {
                reports.fetch_add(1, Relaxed);
                Ok(())
            })
            .unwrap();
            let all = reports.into_inner();
            assert!(all > 0, "{name} never reports");
            for allow in [0, all / 2] {
                let seen = AtomicU64::new(0);
                let r = run(&|_, _, _| if seen.fetch_add(1, Relaxed) < allow { Ok(()) } else { Err(Cancelled) });
                assert!(matches!(r, Err(EngineError::Cancelled)), "{name} (directed {directed}) ran on past a refusal at report {allow}: {r:?}");
                // Batches already handed to other threads may still report once each.
                assert!(seen.into_inner() <= allow + 1 + rayon::current_num_threads() as u64, "{name} kept reporting after a refusal");
            }
        }
    }
}
