//! Whole-graph analytics on skewed graphs large enough to span several read
//! chunks, hub extents and multi-part selective batches (the property tests'
//! graphs fit one chunk), against in-memory algorithms over the same lists.
//! Each runs with the whole store cached and with a 1 MiB cache, which must
//! give identical results.

use solidgraph_engine::*;
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{ChunkLimit, Direction, EdgeInput, ImportOptions, OpenOptions, Store, import};

/// R-MAT edges (a = 0.57, b = c = 0.19): a few hubs with extents, many
/// vertices of small degree, ids scrambled so hubs are not all at the start.
fn rmat(scale: u32, edges: usize, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut x = seed;
    let mut next = move || {
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let n = 1u64 << scale;
    let scramble = |v: u64| (v.wrapping_mul(0x9e37_79b9_7f4a_7c15 | 1)) & (n - 1);
    let (mut src, mut dst) = (Vec::with_capacity(edges), Vec::with_capacity(edges));
    for _ in 0..edges {
        let (mut a, mut b) = (0u64, 0u64);
        for _ in 0..scale {
            let r = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let (i, j) = if r < 0.57 {
                (0, 0)
            } else if r < 0.76 {
                (0, 1)
            } else if r < 0.95 {
                (1, 0)
            } else {
                (1, 1)
            };
            a = a * 2 + i;
            b = b * 2 + j;
        }
        src.push(scramble(a));
        dst.push(scramble(b));
    }
    (src, dst)
}

struct G {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    n: usize,
}

fn build(directed: bool, dedup: bool, lower_lists: bool) -> G {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    // A directed store holds each edge once: twice the edges for as many
    // pages; lower lists hold half the edges of the out-lists, which must
    // still span several chunks.
    let (src, dst) = rmat(
        16,
        if directed {
            6_000_000
        } else if lower_lists {
            4_000_000
        } else {
            2_400_000
        },
        7,
    );
    let o = ImportOptions { undirected: !directed, in_edges: directed, dedup, lower_lists, num_nodes: Some(1 << 16), ..Default::default() };
    import(&path, &[EdgeInput::Memory { src, dst, weights: None, labels: None }], &[], &o, &|_, _, _| {}).unwrap();
    let s = Store::open(&path, &OpenOptions::default()).unwrap();
    assert!(
        s.chunk_ranges(Direction::Out, ChunkLimit { pages: 1024, edges: u64::MAX, vertices: u64::MAX }).unwrap().len() >= 3,
        "the graph must span several chunks"
    );
    G { _dir: dir, path, n: 1 << 16 }
}

/// Every vertex's list as stored.
fn lists(s: &Store, dir: Direction) -> Vec<Vec<u64>> {
    let ids: Vec<u64> = (0..s.num_nodes()).collect();
    let csr = s.neighbors(&ids, dir, false, false).unwrap();
    csr.indptr.windows(2).map(|w| csr.indices[w[0] as usize..w[1] as usize].to_vec()).collect()
}

/// Runs `f` with the whole store cached and with a 1 MiB cache; both must
/// agree. The full cache runs it five times in a row: its pages enter from
/// their second read on, a share more each run (`cache::Image`), so later
/// runs read batches partly and then wholly from memory.
fn both_caches<T: PartialEq + std::fmt::Debug>(g: &G, f: impl Fn(&Store) -> T) -> T {
    let full = Store::open(&g.path, &OpenOptions { cache_bytes: 1 << 30, ..Default::default() }).unwrap();
    let tiny = Store::open(&g.path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    let a = f(&full);
    assert!(a == f(&tiny), "results differ between a full and a 1 MiB cache");
    for run in 2..=5 {
        full.reset_stats();
        assert!(a == f(&full), "run {run} with the whole store cached differs from the first");
    }
    assert!(full.stats().cache.hits > 0, "the fifth run found nothing cached");
    a
}

/// Batagelj-Zaversnik peeling over distinct neighbors other than the vertex.
fn ref_core(und: &[Vec<u64>]) -> Vec<u32> {
    let n = und.len();
    let adj: Vec<Vec<usize>> = und
        .iter()
        .enumerate()
        .map(|(v, l)| {
            let mut a: Vec<usize> = l.iter().map(|&u| u as usize).filter(|&u| u != v).collect();
            a.sort_unstable();
            a.dedup();
            a
        })
        .collect();
    let mut deg: Vec<usize> = adj.iter().map(Vec::len).collect();
    let maxd = deg.iter().copied().max().unwrap_or(0);
    let mut bins = vec![Vec::new(); maxd + 1];
    for v in 0..n {
        bins[deg[v]].push(v);
    }
    let mut core = vec![0u32; n];
    let mut gone = vec![false; n];
    let mut k = 0;
    while k <= maxd {
        let Some(v) = bins[k].pop() else {
            k += 1;
            continue;
        };
        if gone[v] || deg[v] != k {
            continue;
        }
        gone[v] = true;
        core[v] = k as u32;
        for &u in &adj[v] {
            if !gone[u] && deg[u] > k {
                deg[u] -= 1;
                bins[deg[u]].push(u);
            }
        }
    }
    core
}

fn ref_wcc(und: &[Vec<u64>]) -> Vec<u64> {
    let n = und.len();
    let mut label = vec![u64::MAX; n];
    for s in 0..n {
        if label[s] != u64::MAX {
            continue;
        }
        label[s] = s as u64;
        let mut stack = vec![s];
        while let Some(v) = stack.pop() {
            for &u in &und[v] {
                if label[u as usize] == u64::MAX {
                    label[u as usize] = s as u64;
                    stack.push(u as usize);
                }
            }
        }
    }
    label
}

fn ref_pagerank(out: &[Vec<u64>], d: f64, iterations: u32) -> Vec<f64> {
    let n = out.len();
    let mut pr = vec![1.0 / n as f64; n];
    for _ in 0..iterations {
        let mut next = vec![0.0; n];
        let mut dangling = 0.0;
        for (v, l) in out.iter().enumerate() {
            if l.is_empty() {
                dangling += pr[v];
            }
            for &u in l {
                next[u as usize] += pr[v] / l.len() as f64;
            }
        }
        for x in next.iter_mut() {
            *x = (1.0 - d) / n as f64 + d * dangling / n as f64 + d * *x;
        }
        pr = next;
    }
    pr
}

fn check(g: &G, directed: bool) {
    let s = Store::open(&g.path, &OpenOptions::default()).unwrap();
    let out = lists(&s, Direction::Out);
    let und: Vec<Vec<u64>> = if directed {
        let inn = lists(&s, Direction::In);
        out.iter().zip(&inn).map(|(a, b)| a.iter().chain(b).copied().collect()).collect()
    } else {
        out.clone()
    };
    assert_eq!(und.len(), g.n);

    let core = both_caches(g, |s| kcore::kcore(s, &silent).unwrap());
    assert_eq!(core, ref_core(&und));
    assert!(core.iter().copied().max().unwrap() > 10, "the graph should have a deep core");

    let comp = both_caches(g, |s| wcc::wcc(s, &silent).unwrap());
    assert_eq!(comp, ref_wcc(&und));

    let pr = both_caches(g, |s| pagerank::pagerank(s, 0.85, 12, None, &silent).unwrap().ranks);
    for (v, (got, want)) in pr.iter().zip(ref_pagerank(&out, 0.85, 12)).enumerate() {
        assert!((got - want).abs() <= 1e-9 * want, "rank of {v}: {got} vs {want}");
    }
}

#[test]
fn undirected_multigraph_with_self_loops() {
    check(&build(false, false, false), false);
}

#[test]
fn directed_with_in_edges() {
    check(&build(true, true, false), true);
}

/// Lower lists hold each out-list's part up to its vertex, and PageRank and
/// WCC read them (half the bytes) with the results of the out-lists; after
/// an update they are not read, and a merge drops them.
#[test]
fn undirected_lower_lists() {
    let g = build(false, false, true);
    let s = Store::open(&g.path, &OpenOptions::default()).unwrap();
    assert!(s.has_lower_lists());
    s.verify(&mut |_, _| {}).unwrap();
    let out = lists(&s, Direction::Out);
    let lower = lists(&s, Direction::Lower);
    for (v, (o, l)) in out.iter().zip(&lower).enumerate() {
        let want: Vec<u64> = o.iter().copied().filter(|&u| u <= v as u64).collect();
        assert_eq!(l, &want, "lower list of {v}");
    }
    assert!(
        s.chunk_ranges(Direction::Lower, ChunkLimit { pages: 1024, edges: u64::MAX, vertices: u64::MAX }).unwrap().len() >= 2,
        "the lower lists must span several chunks"
    );
    check(&g, false);

    // PageRank with a tolerance stops early and still matches.
    let tol = pagerank::pagerank(&s, 0.85, 100, Some(1e-10), &silent).unwrap();
    assert!(tol.iterations < 100);
    let want = ref_pagerank(&out, 0.85, tol.iterations);
    for (v, (got, want)) in tol.ranks.iter().zip(want).enumerate() {
        assert!((got - want).abs() <= 1e-9 * want, "rank of {v}: {got} vs {want}");
    }

    let w = Store::open(&g.path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    w.add_edges(&[0], &[1], None, None, false).unwrap();
    assert!(!w.has_lower_lists(), "lower lists do not hold pending updates");
    assert!(w.neighbors(&[0], Direction::Lower, false, false).unwrap_err().to_string().contains("pending updates"));
    let comp = wcc::wcc(&w, &silent).unwrap();
    assert_eq!(comp[0], comp[1]);
    w.merge().unwrap();
    assert!(w.superblock().lower.is_none(), "a merge drops the lower lists");
    w.verify(&mut |_, _| {}).unwrap();
    let pr = pagerank::pagerank(&w, 0.85, 5, None, &silent).unwrap().ranks;
    assert!((pr.iter().sum::<f64>() - 1.0).abs() < 1e-9);
}

/// On the only thread of a one-thread pool built on the caller's thread
/// (`use_current_thread`, as the fuzz targets run), passes read and apply
/// each job inline: the same results as the default pool, and no deadlock
/// in `Lists::chunks`, whose chunks spawned into that pool would wait for
/// the thread waiting for them.
#[test]
fn one_thread_pool_runs_passes_inline() {
    let g = build(true, true, false);
    let run = || {
        let s = Store::open(&g.path, &OpenOptions::default()).unwrap();
        let levels = bfs::bfs(&s, 0, None, false, &silent).unwrap().levels;
        let core = kcore::kcore(&s, &silent).unwrap();
        let comp = wcc::wcc(&s, &silent).unwrap();
        let pr = pagerank::pagerank(&s, 0.85, 12, None, &silent).unwrap().ranks;
        (levels, core, comp, pr)
    };
    let want = run();
    let got = std::thread::scope(|sc| {
        sc.spawn(|| {
            let _pool = rayon::ThreadPoolBuilder::new().num_threads(1).use_current_thread().build().unwrap();
            assert_eq!((rayon::current_thread_index(), rayon::current_num_threads()), (Some(0), 1));
            run()
        })
        .join()
        .unwrap()
    });
    assert!(want.0.iter().filter(|&&l| l != bfs::UNREACHED).count() > 1000, "BFS reaches much of the graph");
    assert_eq!((got.0, got.1, got.2), (want.0, want.1, want.2));
    for (v, (a, b)) in got.3.iter().zip(&want.3).enumerate() {
        assert!((a - b).abs() <= 1e-9 * b, "rank of {v}: {a} vs {b}");
    }
}

/// On a degree-ordered store of several times `state::by_external`'s
/// per-thread share of vertices, results scattered back to the user's ids
/// on the pool's threads (i64 levels, u32 cores, u64 labels, f64 ranks,
/// bool MIS flags) are those of the same graph kept in input order.
#[test]
fn results_return_in_user_ids_from_a_degree_ordered_store() {
    let n = 1u64 << 18;
    let (src, dst) = rmat(18, 1_500_000, 11);
    let dir = tempfile::tempdir().unwrap();
    let open = |order| {
        let path = dir.path().join(format!("{order:?}"));
        let o = ImportOptions { undirected: true, dedup: true, order, num_nodes: Some(n), ..Default::default() };
        let edges = EdgeInput::Memory { src: src.clone(), dst: dst.clone(), weights: None, labels: None };
        import(&path, &[edges], &[], &o, &|_, _, _| {}).unwrap();
        Store::open(&path, &OpenOptions::default()).unwrap()
    };
    let (plain, ordered) = (open(VertexOrder::Input), open(VertexOrder::Degree));
    assert!(ordered.external_ids().unwrap().is_some(), "degree order renumbers");
    let source = src[0];
    let run = |s: &Store| {
        let levels = bfs::bfs(s, source, None, false, &silent).unwrap().levels;
        let core = kcore::kcore(s, &silent).unwrap();
        let comp = wcc::wcc(s, &silent).unwrap();
        let pr = pagerank::pagerank(s, 0.85, 10, None, &silent).unwrap().ranks;
        (levels, core, comp, pr)
    };
    let (want, got) = (run(&plain), run(&ordered));
    assert!(want.0.iter().filter(|&&l| l != bfs::UNREACHED).count() as u64 > n / 4, "BFS reaches much of the graph");
    assert_eq!((&got.0, &got.1, &got.2), (&want.0, &want.1, &want.2));
    for (v, (a, b)) in got.3.iter().zip(&want.3).enumerate() {
        assert!((a - b).abs() <= 1e-9 * b, "rank of {v}: {a} vs {b}");
    }
    // MIS depends on the order, so only its independence is checked: no
    // edge of the user's ids inside the set.
    let mis = mis::mis(&ordered, 7, &silent).unwrap();
    let inside = src.iter().zip(&dst).filter(|&(&a, &b)| a != b && mis[a as usize] && mis[b as usize]).count();
    assert_eq!(inside, 0, "an edge inside the independent set");
    assert!(mis.iter().filter(|&&x| x).count() as u64 > n / 100, "a set of some size");
}
