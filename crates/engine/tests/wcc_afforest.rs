//! WCC's two passes (Afforest on undirected stores, the full pass
//! otherwise) against a plain union-find over the edge list: exact labels
//! (each component's smallest id), on graphs with one large component and
//! many small ones, and on graphs of small components only (the largest
//! below the share that skips its lists). The large lists (extents, several
//! pages) and the tiny cache make the second pass read some chunks whole
//! and batch others.

use proptest::prelude::*;
use solidgraph_engine::*;
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{EdgeInput, ImportOptions, OpenOptions, Store, import};

/// Each vertex's label: the smallest vertex of its component.
fn reference(n: u64, edges: &[(u64, u64)]) -> Vec<u64> {
    fn find(p: &mut [u64], mut v: u64) -> u64 {
        while p[v as usize] != v {
            p[v as usize] = p[p[v as usize] as usize];
            v = p[v as usize];
        }
        v
    }
    let mut p: Vec<u64> = (0..n).collect();
    for &(a, b) in edges {
        let (ra, rb) = (find(&mut p, a), find(&mut p, b));
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        p[hi as usize] = lo;
    }
    (0..n).map(|v| find(&mut p, v)).collect()
}

/// A component over `big` of the n vertices (a random tree plus a hub that
/// many link to), the rest paired into small components, then shuffled ids.
fn graph(n: u64, big: u64, extra: &[(u64, u64)], seed: u64) -> Vec<(u64, u64)> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ids: Vec<u64> = (0..n).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut edges = Vec::new();
    for i in 1..big {
        edges.push((ids[i as usize], ids[(next() % i) as usize]));
        // A hub with a list of several pages.
        if i % 3 == 0 {
            edges.push((ids[i as usize], ids[0]));
        }
    }
    for i in (big..n).step_by(3) {
        if i + 1 < n && next() % 4 != 0 {
            edges.push((ids[i as usize], ids[i as usize + 1]));
        }
    }
    edges.extend(extra.iter().map(|&(a, b)| (a % n, b % n)).filter(|&(a, b)| a != b));
    edges
}

fn check(n: u64, edges: &[(u64, u64)], directed: bool, lower: bool, degree: bool, cache: u64) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let o = ImportOptions {
        undirected: !directed,
        in_edges: directed,
        lower_lists: !directed && lower,
        dedup: true,
        num_nodes: Some(n),
        order: if degree { VertexOrder::Degree } else { VertexOrder::Input },
        ..Default::default()
    };
    let input = EdgeInput::Memory { src: edges.iter().map(|e| e.0).collect(), dst: edges.iter().map(|e| e.1).collect(), weights: None, labels: None };
    import(&path, &[input], &[], &o, &|_, _, _| {}).unwrap();
    let store = Store::open(&path, &OpenOptions { cache_bytes: cache, ..Default::default() }).unwrap();
    let got = wcc::wcc(&store, &silent).unwrap();
    prop_assert_eq!(got, reference(n, edges), "directed {} lower {} degree {}", directed, lower, degree);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn labels_match_union_find(
        n in 2u64..6000,
        big_share in 0.0f64..1.0,
        extra in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..40),
        seed in any::<u64>(),
        directed in any::<bool>(),
        lower in any::<bool>(),
        degree in any::<bool>(),
        tiny_cache in any::<bool>(),
    ) {
        let edges = graph(n, (n as f64 * big_share) as u64, &extra, seed);
        check(n, &edges, directed, lower, degree, if tiny_cache { 4096 } else { 1 << 24 })?;
    }
}

/// A giant component of 90% of the vertices takes the sampled path's skip
/// (most lists never read whole); a graph of pairs only takes the full pass.
#[test]
fn both_passes_on_fixed_graphs() {
    for &(n, share) in &[(20_000u64, 0.9f64), (20_000, 0.0), (20_000, 0.55)] {
        let edges = graph(n, (n as f64 * share) as u64, &[], 7);
        for (lower, degree) in [(false, false), (true, false), (true, true)] {
            check(n, &edges, false, lower, degree, 1 << 24).unwrap();
        }
        check(n, &edges, true, false, false, 4096).unwrap();
    }
}
