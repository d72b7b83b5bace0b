//! LDBC Graphalytics validation graphs against their reference outputs, with
//! the Graphalytics rules: BFS and CDLP exact, WCC equal up to relabelling,
//! PR, LCC and SSSP within relative 1e-4. Each runs with the cache at 100%
//! and at 1% of the store, which must give identical results.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use solidgraph_engine::*;
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{EdgeInput, ImportOptions, OpenOptions, Store, import};

fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets/ldbc-validation");
    p.exists().then_some(p)
}

/// A validation graph with its original ids mapped densely, in sorted order
/// (so "smallest label" means the same before and after mapping).
struct G {
    ids: Vec<u64>,
    edges: Vec<(u64, u64, f32)>,
}

impl G {
    fn dense(&self, v: u64) -> u64 {
        self.ids.binary_search(&v).expect("known vertex") as u64
    }

    /// Adjacency form: `v n1 n2 ...` per line.
    fn from_adjacency(path: &Path) -> G {
        let text = std::fs::read_to_string(path).unwrap();
        let mut ids = Vec::new();
        let mut raw = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let nums: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            ids.push(nums[0]);
            for &u in &nums[1..] {
                ids.push(u);
                raw.push((nums[0], u, 1.0));
            }
        }
        ids.sort_unstable();
        ids.dedup();
        G { ids, edges: raw }
    }

    /// `.v` / `.e` form, `.e` lines `src dst [weight]`.
    fn from_ve(v: &Path, e: &Path) -> G {
        let mut ids: Vec<u64> = std::fs::read_to_string(v).unwrap().lines().filter(|l| !l.is_empty()).map(|l| l.trim().parse().unwrap()).collect();
        ids.sort_unstable();
        let edges = std::fs::read_to_string(e)
            .unwrap()
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[0].parse().unwrap(), f[1].parse().unwrap(), f.get(2).map_or(1.0, |w| w.parse().unwrap()))
            })
            .collect();
        G { ids, edges }
    }

    /// The store in either vertex order: a renumbered store must give the
    /// reference outputs in the input's ids just the same.
    fn store(&self, dir: &Path, directed: bool, order: VertexOrder) -> PathBuf {
        let out = dir.join(format!("store-{order:?}"));
        let o = ImportOptions {
            undirected: !directed,
            dedup: true,
            weights: true,
            in_edges: directed,
            // Undirected, renumbered stores (the bench's kind) also get
            // lower lists, which PageRank and WCC then read.
            lower_lists: !directed && order == VertexOrder::Degree,
            num_nodes: Some(self.ids.len() as u64),
            order,
            ..Default::default()
        };
        let input = EdgeInput::Memory {
            src: self.edges.iter().map(|e| self.dense(e.0)).collect(),
            dst: self.edges.iter().map(|e| self.dense(e.1)).collect(),
            weights: Some(self.edges.iter().map(|e| e.2).collect()),
            labels: None,
        };
        import(&out, &[input], &[], &o, &|_, _, _| {}).unwrap();
        out
    }

    fn expected(&self, path: &Path) -> BTreeMap<u64, String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (a, b) = l.split_once(' ').unwrap();
                (self.dense(a.parse().unwrap()), b.trim().to_string())
            })
            .collect()
    }
}

fn close(got: f64, want: &str) -> bool {
    let w: f64 = if want == "Infinity" { f64::INFINITY } else { want.parse().unwrap() };
    if w.is_infinite() || got.is_infinite() {
        return w == got;
    }
    (got - w).abs() <= 1e-4 * w.abs().max(1e-12)
}

/// Runs `f` on the store with a full and a 1% cache and checks they agree.
fn both_caches<T: PartialEq + std::fmt::Debug>(store: &Path, f: impl Fn(&Store) -> T) -> T {
    let full = Store::open(store, &OpenOptions { cache_bytes: 1 << 30, ..Default::default() }).unwrap();
    let tiny = Store::open(store, &OpenOptions { cache_bytes: (full.size_bytes() / 100).max(1), ..Default::default() }).unwrap();
    let a = f(&full);
    assert_eq!(a, f(&tiny), "results differ between a full and a 1% cache");
    a
}

fn check(alg: &str, g: &G, store: &Path, want: &BTreeMap<u64, String>, params: &HashMap<&str, String>) {
    let source = || g.dense(params["source"].parse().unwrap());
    match alg {
        "bfs" => {
            let got = both_caches(store, |s| bfs::bfs(s, source(), None, false, &silent).unwrap().levels);
            for (&v, w) in want {
                assert_eq!(got[v as usize].to_string(), *w, "BFS level of {}", g.ids[v as usize]);
            }
        }
        "wcc" => {
            let got = both_caches(store, |s| wcc::wcc(s, &silent).unwrap());
            let mut map: HashMap<u64, &String> = HashMap::new();
            let mut back: HashMap<&String, u64> = HashMap::new();
            for (&v, w) in want {
                let c = got[v as usize];
                assert_eq!(*map.entry(c).or_insert(w), w, "WCC: vertex {} joins the wrong component", g.ids[v as usize]);
                assert_eq!(*back.entry(w).or_insert(c), c, "WCC: component {w} split");
            }
        }
        "pr" => {
            let d: f64 = params["damping"].parse().unwrap();
            let it: u32 = params["iterations"].parse().unwrap();
            let got = both_caches(store, |s| pagerank::pagerank(s, d, it, None, &silent).unwrap().ranks);
            for (&v, w) in want {
                assert!(close(got[v as usize], w), "PR of {}: {} vs {w}", g.ids[v as usize], got[v as usize]);
            }
        }
        "cdlp" => {
            let it: u32 = params["iterations"].parse().unwrap();
            let got = both_caches(store, |s| cdlp::cdlp(s, it, &silent).unwrap());
            for (&v, w) in want {
                assert_eq!(g.ids[got[v as usize] as usize].to_string(), *w, "CDLP label of {}", g.ids[v as usize]);
            }
        }
        "lcc" => {
            let got = both_caches(store, |s| lcc::lcc(s, &silent).unwrap());
            for (&v, w) in want {
                assert!(close(got[v as usize], w), "LCC of {}: {} vs {w}", g.ids[v as usize], got[v as usize]);
            }
        }
        "sssp" => {
            let got = both_caches(store, |s| sssp::sssp(s, source(), &silent).unwrap());
            for (&v, w) in want {
                assert!(close(got[v as usize], w), "SSSP of {}: {} vs {w}", g.ids[v as usize], got[v as usize]);
            }
        }
        _ => unreachable!(),
    }
}

fn properties(path: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(path).unwrap().lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect()
}

#[test]
fn example_graphs_match_reference_outputs() {
    let Some(root) = shared() else {
        eprintln!("skipped: ../shared/datasets/ldbc-validation not found");
        return;
    };
    for (name, directed) in [("example-directed", true), ("example-undirected", false)] {
        let ex = root.join("example");
        let g = G::from_ve(&ex.join(format!("{name}.v")), &ex.join(format!("{name}.e")));
        let dir = tempfile::tempdir().unwrap();
        for order in [VertexOrder::Input, VertexOrder::Degree] {
            let store = g.store(dir.path(), directed, order);
            let props = properties(&ex.join(format!("{name}.properties")));
            let p = |k: &str| props[&format!("graph.{name}.{k}")].clone();
            let params: HashMap<&str, String> =
                [("source", p("bfs.source-vertex")), ("damping", p("pr.damping-factor")), ("iterations", p("pr.num-iterations"))].into_iter().collect();
            for alg in ["bfs", "wcc", "pr", "lcc", "sssp"] {
                let want = g.expected(&ex.join(format!("{name}-{}", alg.to_uppercase())));
                check(alg, &g, &store, &want, &params);
            }
            let cd: HashMap<&str, String> = [("iterations", p("cdlp.max-iterations"))].into_iter().collect();
            check("cdlp", &g, &store, &g.expected(&ex.join(format!("{name}-CDLP"))), &cd);
        }
    }
}

#[test]
fn per_algorithm_validation_graphs() {
    let Some(root) = shared() else {
        eprintln!("skipped: ../shared/datasets/ldbc-validation not found");
        return;
    };
    // Parameters of the Graphalytics validation suite for these graphs.
    let params: HashMap<&str, String> = [("source", "1".to_string()), ("damping", "0.85".to_string()), ("iterations", "26".to_string())].into_iter().collect();
    let cd: HashMap<&str, String> = [("iterations", "5".to_string())].into_iter().collect();
    for alg in ["bfs", "wcc", "pr", "cdlp", "lcc", "sssp"] {
        for (kind, directed) in [("dir", true), ("undir", false)] {
            let d = root.join(alg);
            let g = if alg == "sssp" {
                G::from_ve(&d.join(format!("{kind}-input.v")), &d.join(format!("{kind}-input.e")))
            } else {
                G::from_adjacency(&d.join(format!("{kind}-input")))
            };
            let dir = tempfile::tempdir().unwrap();
            let want = g.expected(&d.join(format!("{kind}-output")));
            for order in [VertexOrder::Input, VertexOrder::Degree] {
                let store = g.store(dir.path(), directed, order);
                check(alg, &g, &store, &want, if alg == "cdlp" { &cd } else { &params });
            }
        }
    }
}
