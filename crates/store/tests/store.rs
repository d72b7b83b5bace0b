//! The store against an in-memory reference on random graphs.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use solidgraph_store::rowcache::RowCache;
use solidgraph_store::*;

#[derive(Clone, Debug)]
struct Graph {
    src: Vec<u64>,
    dst: Vec<u64>,
    w: Vec<f32>,
    l: Vec<u32>,
}

/// Expected sorted lists per vertex under the import options.
fn reference(g: &Graph, o: &ImportOptions, num_nodes: u64, reverse: bool) -> BTreeMap<u64, Vec<(u64, u32, u32)>> {
    let mut recs = Vec::new();
    for i in 0..g.src.len() {
        let (s, d) = if reverse { (g.dst[i], g.src[i]) } else { (g.src[i], g.dst[i]) };
        let wb = if o.weights { g.w[i].to_bits() } else { 0 };
        let lb = if o.labels { g.l[i] } else { 0 };
        recs.push((s, d, wb, lb));
        if o.undirected && s != d {
            recs.push((d, s, wb, lb));
        }
    }
    recs.sort();
    let mut m: BTreeMap<u64, Vec<(u64, u32, u32)>> = BTreeMap::new();
    for (s, d, wb, lb) in recs {
        let list = m.entry(s).or_default();
        if o.dedup && list.last().is_some_and(|x| x.0 == d) {
            continue;
        }
        list.push((d, wb, lb));
    }
    if o.self_loops {
        for v in 0..num_nodes {
            let list = m.entry(v).or_default();
            if !list.iter().any(|x| x.0 == v) {
                let pos = list.partition_point(|x| x.0 < v);
                list.insert(pos, (v, 1f32.to_bits(), 0));
            }
        }
    }
    m
}

fn mem_input(g: &Graph, o: &ImportOptions) -> EdgeInput {
    EdgeInput::Memory { src: g.src.clone(), dst: g.dst.clone(), weights: o.weights.then(|| g.w.clone()), labels: o.labels.then(|| g.l.clone()) }
}

fn quiet(_: &str, _: u64, _: u64) {}

/// Checks every list (and row `x` when given) by the user's ids; a store
/// renumbered at import must answer exactly as one that kept input ids.
fn check_store(path: &Path, g: &Graph, o: &ImportOptions, num_nodes: u64, x: Option<&[u8]>) {
    let s = Store::open(path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    assert_eq!(s.num_nodes(), num_nodes);
    assert_eq!(s.reordered(), o.order == order::VertexOrder::Degree);
    let dirs: Vec<(Direction, bool)> = if o.undirected {
        vec![(Direction::Out, false), (Direction::In, false)]
    } else if o.in_edges {
        vec![(Direction::Out, false), (Direction::In, true)]
    } else {
        vec![(Direction::Out, false)]
    };
    // All vertices in one batch, and again shuffled with repeats.
    let mut ids: Vec<u64> = (0..num_nodes).collect();
    ids.extend((0..num_nodes).rev().step_by(3));
    let mut iids = ids.clone();
    s.to_internal(&mut iids).unwrap();
    let mut back = iids.clone();
    s.to_external(&mut back).unwrap();
    assert_eq!(back, ids);
    for (dir, rev) in dirs {
        let want = reference(g, o, num_nodes, rev);
        let csr = s.neighbors(&iids, dir, o.weights, o.labels).unwrap();
        let deg = s.degree(&iids, dir).unwrap();
        // Edge ids are positions in the direction's CSR order (by the
        // store's ids).
        let mut by_internal: Vec<usize> = (0..num_nodes as usize).collect();
        by_internal.sort_by_key(|&p| iids[p]);
        let mut before = 0u64;
        for p in by_internal {
            if deg[p] > 0 {
                assert_eq!(csr.first_edge[p], before, "{dir:?} first edge id of {}", ids[p]);
            }
            before += deg[p];
        }
        // Drawn positions (unsorted, repeated) read what the whole lists
        // hold, with their edge ids.
        let draws = |i: usize, d: usize| if d == 0 { vec![] } else { vec![(i * 7) % d, d - 1, 0, (i * 7) % d] };
        let mut degrees = Vec::new();
        let drawn = s
            .neighbors_drawn(&iids, dir, |i, d, out| {
                degrees.push(d);
                out.extend(draws(i, d as usize));
            })
            .unwrap()
            .expect("no updates are pending");
        let mut r = 0;
        for i in 0..iids.len() {
            let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
            assert_eq!(degrees[i], (b - a) as u64, "{dir:?} degree drawn from");
            assert_eq!(drawn.counts[i], draws(i, b - a).len());
            for p in draws(i, b - a) {
                assert_eq!((drawn.ids[r], drawn.edges[r]), (csr.indices[a + p], csr.first_edge[i] + p as u64), "{dir:?} position {p} of {}", ids[i]);
                r += 1;
            }
        }
        assert_eq!(r, drawn.ids.len());
        let past = s.neighbors_drawn(&iids, dir, |_, d, out| out.push(d as usize));
        assert!(matches!(past, Err(StoreError::Invalid(_))) || iids.is_empty(), "a position past the list is refused");
        let mut indices = csr.indices.clone();
        s.to_external(&mut indices).unwrap();
        for (i, &v) in ids.iter().enumerate() {
            let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
            let empty = Vec::new();
            let exp = want.get(&v).unwrap_or(&empty);
            assert_eq!(deg[i], exp.len() as u64, "{dir:?} degree of {v} (internal {})", iids[i]);
            // Lists are sorted by the store's ids; compare as multisets.
            let mut got: Vec<(u64, u32, u32)> =
                (a..b).map(|k| (indices[k], csr.weights.as_ref().map_or(0, |w| w[k].to_bits()), csr.labels.as_ref().map_or(0, |l| l[k]))).collect();
            got.sort_unstable();
            let mut exp: Vec<(u64, u32, u32)> = exp.iter().map(|x| (x.0, if o.weights { x.1 } else { 0 }, if o.labels { x.2 } else { 0 })).collect();
            exp.sort_unstable();
            assert_eq!(got, exp, "{dir:?} neighbors of {v}");
            if !s.reordered() {
                let ids_only: Vec<u64> = want.get(&v).unwrap_or(&empty).iter().map(|x| x.0).collect();
                assert_eq!(indices[a..b].to_vec(), ids_only, "{dir:?} order of {v}'s list");
            }
        }
        // Scans read range by range: ranges tile [0, n) within their
        // vertex cap, and their lists are the store's.
        let all: Vec<u64> = (0..num_nodes).collect();
        let whole = s.neighbors(&all, dir, o.weights, false).unwrap();
        let limit = ChunkLimit { pages: 2, edges: 40, vertices: 7 };
        let ranges = s.chunk_ranges(dir, limit).unwrap();
        assert_eq!(ranges.first().map(|r| r.0), Some(0));
        assert_eq!(ranges.last().map(|r| r.1), Some(num_nodes));
        assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "ranges tile the ids");
        assert!(ranges.iter().all(|r| r.0 < r.1 && r.1 - r.0 <= limit.vertices));
        for &(lo, hi) in &ranges {
            let got = s.read_range(dir, lo, hi, o.weights, true, Default::default()).unwrap();
            let (a, b) = (whole.indptr[lo as usize] as usize, whole.indptr[hi as usize] as usize);
            assert_eq!(got.indices, whole.indices[a..b], "{dir:?} lists of range {lo}..{hi}");
            assert_eq!(got.weights.as_deref(), whole.weights.as_ref().map(|w| &w[a..b]));
        }
    }
    if let Some(x) = x {
        let rows = s.tensor("x", &iids).unwrap();
        for (i, &v) in ids.iter().enumerate() {
            assert_eq!(rows.data[i * 8..(i + 1) * 8], x[v as usize * 8..(v as usize + 1) * 8], "row of {v}");
        }
    }
    if let Some(ext) = s.external_ids().unwrap() {
        let want: Vec<u32> = (0..num_nodes).map(|i| ids[iids[..num_nodes as usize].iter().position(|&x| x == i).unwrap()] as u32).collect();
        assert_eq!(*ext, want, "external_ids names each internal vertex's user id");
    }
    let rep = s.verify(&mut |_, _| {}).unwrap();
    assert_eq!(rep.edges, s.num_edges());
}

/// Power-law-ish random graph: sources drawn with a skew, a few hubs.
fn graph_strategy(max_nodes: u64, max_edges: usize) -> impl Strategy<Value = (u64, Graph)> {
    (2..max_nodes).prop_flat_map(move |n| {
        let e = proptest::collection::vec((0..n, 0..n, 0u32..1000, -3.0f32..3.0, any::<bool>()), 1..max_edges);
        (Just(n), e).prop_map(move |(n, es)| {
            let mut g = Graph { src: vec![], dst: vec![], w: vec![], l: vec![] };
            for (a, b, l, w, skew) in es {
                // Skewed: half the edges start at a vertex of small id.
                let s = if skew { a % (1 + n / 16) } else { a };
                g.src.push(s);
                g.dst.push(b);
                g.w.push(w);
                g.l.push(l);
            }
            (n, g)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_match_reference(
        (n, g) in graph_strategy(3000, 4000),
        undirected in any::<bool>(),
        dedup in any::<bool>(),
        self_loops in any::<bool>(),
        weights in any::<bool>(),
        labels in any::<bool>(),
        ps_shift in 0u32..5,
        fill in 0.5f64..1.0,
        by_degree in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("g");
        let o = ImportOptions {
            undirected, dedup, self_loops, weights, labels,
            in_edges: !undirected,
            page_size: 4096 << ps_shift,
            fill_factor: fill,
            num_nodes: Some(n),
            order: if by_degree { order::VertexOrder::Degree } else { order::VertexOrder::Input },
            ..Default::default()
        };
        // Row v holds v twice (u32), so a row in the wrong place shows.
        let x: Vec<u8> = (0..n as u32).flat_map(|v| [v.to_le_bytes(), v.to_le_bytes()]).flatten().collect();
        let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: tensor::DType::U8, rows: n, dim: 8, bytes: x.clone() } };
        import(&out, &[mem_input(&g, &o)], &[t], &o, &quiet).unwrap();
        check_store(&out, &g, &o, n, Some(&x));
    }
}

#[test]
fn hub_with_millions_of_neighbors_and_exactly_full_pages() {
    let dir = tempfile::tempdir().unwrap();
    // Vertex 7 has 2.5M neighbors (an extent of many pages); vertex 9 has
    // exactly one extent page's worth; 10..40 fill packed pages exactly.
    let fmt = adjacency::EdgeFormat { weights: false, labels: false };
    let n = 3_000_000u64;
    let run: Vec<u64> = (0..n).collect();
    let per = fmt.fitting(&run, fmt.extent_room(4096));
    let max_packed = fmt.fitting(&run[10..], fmt.packed_room(4096));
    let mut g = Graph { src: vec![], dst: vec![], w: vec![], l: vec![] };
    for d in 0..2_500_000u64 {
        g.src.push(7);
        g.dst.push(d * 7 % n);
    }
    for d in 0..per as u64 {
        g.src.push(9);
        g.dst.push(d);
    }
    for v in 10..40u64 {
        for d in 0..max_packed as u64 {
            g.src.push(v);
            g.dst.push(d + v);
        }
    }
    g.w = vec![1.0; g.src.len()];
    g.l = vec![0; g.src.len()];
    let o = ImportOptions { fill_factor: 1.0, num_nodes: Some(n), memory_budget: 16 << 20, ..Default::default() };
    let out = dir.path().join("hub");
    let rep = import(&out, &[mem_input(&g, &o)], &[], &o, &quiet).unwrap();
    assert!(rep.runs > 1, "a 16 MiB budget must spill runs (got {})", rep.runs);
    let s = Store::open(&out, &OpenOptions::default()).unwrap();
    let deg = s.degree(&[7, 9, 10, 39, 40, 0], Direction::Out).unwrap();
    assert_eq!(deg, vec![2_500_000, per as u64, max_packed as u64, max_packed as u64, 0, 0]);
    let csr = s.neighbors(&[7], Direction::Out, false, false).unwrap();
    let mut want: Vec<u64> = (0..2_500_000u64).map(|d| d * 7 % n).collect();
    want.sort();
    assert_eq!(csr.indices, want);
    s.verify(&mut |_, _| {}).unwrap();
}

#[test]
fn ids_beyond_u32_use_wide_ids() {
    let dir = tempfile::tempdir().unwrap();
    let big = (1u64 << 32) + 5;
    let g = Graph { src: vec![0, big, big, 3], dst: vec![big, 0, 3, big + 1], w: vec![1.0; 4], l: vec![0; 4] };
    let o = ImportOptions::default();
    let out = dir.path().join("wide");
    import(&out, &[mem_input(&g, &o)], &[], &o, &quiet).unwrap();
    let s = Store::open(&out, &OpenOptions::default()).unwrap();
    assert_eq!(s.num_nodes(), big + 2);
    let csr = s.neighbors(&[big, 0, big + 1], Direction::Out, false, false).unwrap();
    assert_eq!(csr.indptr, vec![0, 2, 3, 3]);
    assert_eq!(csr.indices, vec![0, 3, big]);
    assert!(matches!(s.neighbors(&[big + 2], Direction::Out, false, false), Err(StoreError::VertexOutOfRange { .. })));
}

fn write_text(path: &Path, s: &str) {
    std::fs::write(path, s).unwrap();
}

#[test]
fn text_csv_npy_inputs_and_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_text(&d.join("e.txt"), "# comment\n0 1 0.5\n1\t2 1.5\n% other comment\n\n2,0,2.5\n");
    write_text(&d.join("e.csv"), "source,target,weight\n0,1,0.5\n1,2,1.5\n2,0,2.5\n");
    let ids: Vec<u8> = [0i64, 1, 2, 1, 2, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    import::npy::write_npy(&d.join("e.npy"), "<i8", &[2, 3], &ids).unwrap();
    let feats: Vec<u8> = (0..3 * 5).flat_map(|i| (i as f32).to_le_bytes()).collect();
    import::npy::write_npy(&d.join("x.npy"), "<f4", &[3, 5], &feats).unwrap();
    let y: Vec<u8> = [4i64, 5, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    import::npy::write_npy(&d.join("y.npy"), "<i8", &[3], &y).unwrap();
    let tensors = vec![
        TensorInput { name: "x".into(), data: TensorData::Npy(d.join("x.npy")) },
        TensorInput { name: "y".into(), data: TensorData::Npy(d.join("y.npy")) },
    ];
    for (name, weights) in [("e.txt", true), ("e.csv", true), ("e.npy", false)] {
        let out = d.join(format!("s-{name}"));
        let o = ImportOptions { weights, in_edges: true, ..Default::default() };
        import(&out, &[EdgeInput::File(d.join(name))], &tensors, &o, &quiet).unwrap();
        let s = Store::open(&out, &OpenOptions::default()).unwrap();
        let c = s.neighbors(&[0, 1, 2], Direction::Out, weights, false).unwrap();
        assert_eq!(c.indices, vec![1, 2, 0], "{name}");
        let c = s.neighbors(&[0, 1, 2], Direction::In, false, false).unwrap();
        assert_eq!(c.indices, vec![2, 0, 1], "{name}");
        if weights {
            assert_eq!(c.weights, None);
            let w = s.edge_weights(&[0, 1, 2, 0], &[1, 2, 0, 2]).unwrap();
            assert_eq!(&w[..3], &[0.5, 1.5, 2.5]);
            assert!(w[3].is_nan());
        }
        let x = s.tensor("x", &[2, 0, 2]).unwrap();
        let got: Vec<f32> = x.data.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, [10., 11., 12., 13., 14., 0., 1., 2., 3., 4., 10., 11., 12., 13., 14.]);
        let y = s.tensor("y", &[1]).unwrap();
        assert_eq!(y.data, 5i64.to_le_bytes());
        assert!(matches!(s.tensor("z", &[0]), Err(StoreError::NoSuchTensor { .. })));
        s.verify(&mut |_, _| {}).unwrap();
    }
}

#[test]
fn big_tensor_rows_straddle_pages() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1000u64;
    let dim = 300u64; // 1200-byte rows: most straddle a page boundary
    let bytes: Vec<u8> = (0..n * dim).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let g = Graph { src: vec![0], dst: vec![1], w: vec![1.0], l: vec![0] };
    let o = ImportOptions::default();
    let out = dir.path().join("t");
    let t = TensorInput { name: "feat".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim, bytes: bytes.clone() } };
    import(&out, &[mem_input(&g, &o)], &[t], &o, &quiet).unwrap();
    let rb = (dim * 4) as usize;
    // Through the page cache, and through a row cache (hits the second time).
    for row_cache_bytes in [0, 64 * rb as u64] {
        let s = Store::open(&out, &OpenOptions { cache_bytes: 0, row_cache_bytes, ..Default::default() }).unwrap();
        let mut ids: Vec<u64> = (0..n).rev().step_by(7).collect();
        ids.extend([3, 3, 999]);
        for _ in 0..2 {
            let rows = s.tensor("feat", &ids).unwrap();
            for (i, &r) in ids.iter().enumerate() {
                assert_eq!(&rows.data[i * rb..(i + 1) * rb], &bytes[r as usize * rb..(r as usize + 1) * rb]);
            }
        }
        if row_cache_bytes > 0 {
            let st = s.stats().rows.unwrap();
            assert!(st.hits > 0 && st.bytes <= row_cache_bytes, "{st:?}");
        }
    }
}

#[test]
fn same_input_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Graph { src: vec![], dst: vec![], w: vec![], l: vec![] };
    for i in 0..200_000u64 {
        g.src.push(i * 2654435761 % 5000);
        g.dst.push(i * 40503 % 5000);
        g.w.push((i % 7) as f32);
        g.l.push((i % 3) as u32);
    }
    let o = ImportOptions { undirected: true, weights: true, memory_budget: 16 << 20, ..Default::default() };
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    import(&a, &[mem_input(&g, &o)], &[], &o, &quiet).unwrap();
    import(&b, &[mem_input(&g, &o)], &[], &o, &quiet).unwrap();
    assert_eq!(std::fs::read(a.join("sg.0")).unwrap(), std::fs::read(b.join("sg.0")).unwrap());
}

#[test]
fn every_byte_flip_is_caught_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let g = Graph { src: (0..3000).map(|i| i % 300).collect(), dst: (0..3000).map(|i| (i * 7) % 300).collect(), w: vec![1.5; 3000], l: vec![0; 3000] };
    let o = ImportOptions { weights: true, in_edges: true, ..Default::default() };
    let out = dir.path().join("c");
    let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::U8, rows: 300, dim: 20, bytes: vec![7; 6000] } };
    import(&out, &[mem_input(&g, &o)], &[t], &o, &quiet).unwrap();
    let file = out.join("sg.0");
    let clean = std::fs::read(&file).unwrap();
    let pages = Store::open(&out, &OpenOptions::default()).unwrap().superblock().total_pages;
    let mut tried = 0;
    for p in 0..pages as usize {
        for off in [0usize, 4, 9, 17, 25, 29, 40, 1000, 2049, 4095] {
            let mut bad = clean.clone();
            bad[p * 4096 + off] ^= 0x04;
            std::fs::write(&file, &bad).unwrap();
            tried += 1;
            // Either open refuses (superblock or GTT page) or verify names the page.
            match Store::open(&out, &OpenOptions { cache_bytes: 0, ..Default::default() }) {
                Err(_) => continue,
                Ok(s) => match s.verify(&mut |_, _| {}) {
                    Err(StoreError::Corrupt { page, .. }) => assert_eq!(page, p as u64, "flip in page {p} at {off} blamed on page {page}"),
                    Err(e) => panic!("flip in page {p} at {off}: unexpected error {e}"),
                    Ok(_) => panic!("flip in page {p} at {off} not caught"),
                },
            }
        }
    }
    std::fs::write(&file, &clean).unwrap();
    assert!(tried > 50);
    Store::open(&out, &OpenOptions::default()).unwrap().verify(&mut |_, _| {}).unwrap();
}

#[test]
fn a_corrupt_row_page_fails_the_gather_not_the_warm_up() {
    // The row cache warms up on its own thread after open; a bad tensor
    // page there must not be hidden: the gather of its rows reads the page
    // itself and reports it.
    let dir = tempfile::tempdir().unwrap();
    let g = Graph { src: (0..3000).map(|i| i % 300).collect(), dst: (0..3000).map(|i| (i * 7) % 300).collect(), w: vec![1.5; 3000], l: vec![0; 3000] };
    let o = ImportOptions::default();
    let out = dir.path().join("c");
    let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::U8, rows: 300, dim: 20, bytes: vec![7; 6000] } };
    import(&out, &[mem_input(&g, &o)], &[t], &o, &quiet).unwrap();
    let page = Store::open(&out, &OpenOptions::default()).unwrap().superblock().tensors[0].start_page;
    let file = out.join("sg.0");
    let mut bad = std::fs::read(&file).unwrap();
    bad[page as usize * 4096 + 100] ^= 0x10;
    std::fs::write(&file, &bad).unwrap();
    let s = Store::open(&out, &OpenOptions { cache_bytes: 0, row_cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    for _ in 0..2 {
        match s.tensor("x", &[0, 299]) {
            Err(StoreError::Corrupt { page: p, .. }) => assert_eq!(p, page),
            r => panic!("a corrupt row page gave {:?}", r.map(|r| r.data.len())),
        }
    }
}

#[test]
fn bad_inputs_are_clear_errors_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |name: &str, body: &str, o: &ImportOptions| -> StoreError {
        let f = d.join(name);
        write_text(&f, body);
        let out = d.join(format!("out-{name}"));
        let e = import(&out, &[EdgeInput::File(f)], &[], o, &quiet).unwrap_err();
        assert!(!out.exists(), "{name}: partial store left behind");
        let leftovers: Vec<_> = std::fs::read_dir(d).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().contains("partial")).collect();
        assert!(leftovers.is_empty(), "{name}: partial build left behind");
        e
    };
    let o = ImportOptions::default();
    let e = run("a.txt", "0 1\n1 2\nx 3\n", &o);
    assert!(matches!(&e, StoreError::Parse { line: 3, .. }), "{e}");
    assert!(e.to_string().contains("a.txt:3"), "{e}");
    let e = run("b.txt", "0 1\n-1 2\n", &o);
    assert!(e.to_string().contains("negative"), "{e}");
    let e = run("c.txt", "0 1\n1 2.5\n", &o);
    assert!(e.to_string().contains("c.txt:2"), "{e}");
    let e = run("d.txt", "0 1\n1 20\n", &ImportOptions { num_nodes: Some(10), ..Default::default() });
    assert!(e.to_string().contains("d.txt:2") && e.to_string().contains("20"), "{e}");
    let e = run("e.txt", "# only a comment\n", &o);
    assert!(e.to_string().contains("empty"), "{e}");
    let e = run("f.txt", "0 1\n", &ImportOptions { weights: true, ..Default::default() });
    assert!(e.to_string().contains("weight"), "{e}");
    let e = run("g.csv", "a,b\n", &o);
    assert!(e.to_string().contains("empty") && e.to_string().contains("g.csv"), "{e}");
    let e = run("h.csv", "src,dst\n0,1\n1,two\n", &o);
    assert!(e.to_string().contains("h.csv:3"), "{e}");
    // A row wider than its header is refused, not read in part.
    let e = run("i.csv", "src,dst\n0,1\n1,2,3,4,5\n", &o);
    assert!(matches!(&e, StoreError::Parse { line: 3, .. }) && e.to_string().contains("i.csv:3: 5 columns, but the header names 2"), "{e}");

    // Truncated .npy, mismatched tensor rows.
    let ids: Vec<u8> = [0i64, 1, 1, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    import::npy::write_npy(&d.join("t.npy"), "<i8", &[2, 2], &ids[..24]).unwrap();
    let e = import(&d.join("o1"), &[EdgeInput::File(d.join("t.npy"))], &[], &o, &quiet).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    import::npy::write_npy(&d.join("ok.npy"), "<i8", &[2, 2], &ids).unwrap();
    import::npy::write_npy(&d.join("x.npy"), "<f4", &[5, 2], &[0u8; 40]).unwrap();
    let t = [TensorInput { name: "x".into(), data: TensorData::Npy(d.join("x.npy")) }];
    let e = import(&d.join("o2"), &[EdgeInput::File(d.join("ok.npy"))], &t, &ImportOptions { num_nodes: Some(3), ..Default::default() }, &quiet).unwrap_err();
    assert!(e.to_string().contains("rows"), "{e}");
    assert!(!d.join("o2").exists());

    // Existing output is refused.
    std::fs::create_dir(d.join("taken")).unwrap();
    let e = import(&d.join("taken"), &[EdgeInput::File(d.join("ok.npy"))], &[], &o, &quiet).unwrap_err();
    assert!(matches!(e, StoreError::Exists { .. }));
}

#[test]
fn newer_format_and_garbage_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v");
    let g = Graph { src: vec![0], dst: vec![1], w: vec![1.0], l: vec![0] };
    import(&out, &[mem_input(&g, &ImportOptions::default())], &[], &ImportOptions::default(), &quiet).unwrap();
    let file = out.join("sg.0");
    let mut b = std::fs::read(&file).unwrap();
    for copy in 0..2 {
        let at = copy * 4096 + page::HEADER + 8;
        b[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
    }
    std::fs::write(&file, &b).unwrap();
    let e = Store::open(&out, &OpenOptions::default()).err().expect("opened a newer format");
    assert!(matches!(e, StoreError::NewerFormat { found: 99, .. }), "{e}");
    std::fs::write(&file, vec![0u8; 8192]).unwrap();
    assert!(matches!(Store::open(&out, &OpenOptions::default()), Err(StoreError::NotAStore { .. })));
    // A directory without a member is not a store; no directory at all is a
    // missing file.
    assert!(matches!(Store::open(dir.path(), &OpenOptions::default()), Err(StoreError::NotAStore { .. })));
    let nothing = dir.path().join("nothing");
    let e = Store::open(&nothing, &OpenOptions::default()).err().expect("opened a missing directory");
    assert!(matches!(&e, StoreError::File { path, source } if *path == nothing && source.kind() == std::io::ErrorKind::NotFound), "{e}");
    assert_eq!(e.to_string(), format!("{}: no such store", nothing.display()));
    // A plain file is not a store, and says so before any member's error.
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "0 1\n").unwrap();
    let e = Store::open(&plain, &OpenOptions::default()).err().expect("opened a plain file");
    assert!(matches!(&e, StoreError::NotAStore { path, .. } if *path == plain), "{e}");
    assert_eq!(e.to_string(), format!("{}: is a file, not a SolidGraph store", plain.display()));
}

#[test]
fn results_identical_with_tiny_and_large_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Graph { src: vec![], dst: vec![], w: vec![], l: vec![] };
    for i in 0..100_000u64 {
        g.src.push((i * i) % 20_000);
        g.dst.push((i * 31) % 20_000);
    }
    g.w = vec![1.0; g.src.len()];
    g.l = vec![0; g.src.len()];
    let o = ImportOptions { undirected: true, ..Default::default() };
    let out = dir.path().join("c");
    import(&out, &[mem_input(&g, &o)], &[], &o, &quiet).unwrap();
    let big = Store::open(&out, &OpenOptions { cache_bytes: 1 << 30, ..Default::default() }).unwrap();
    let small = Store::open(&out, &OpenOptions { cache_bytes: 8192, ..Default::default() }).unwrap();
    for round in 0..3u64 {
        let ids: Vec<u64> = (0..2000).map(|i| (i * 7919 + round * 13) % 20_000).collect();
        assert_eq!(big.neighbors(&ids, Direction::Out, false, false).unwrap(), small.neighbors(&ids, Direction::Out, false, false).unwrap());
    }
    assert!(big.stats().cache.hits > 0);
}

#[test]
fn row_cache_admits_the_highest_degree_vertices_rows() {
    // Vertex v has v % 5 out-edges: ranked by degree, ties by id, the first
    // nine are 4, 9, .., 39 (degree 4) and then 3 (the smallest of degree 3).
    let n = 40u64;
    let mut g = Graph { src: vec![], dst: vec![], w: vec![], l: vec![] };
    for v in 0..n {
        for k in 1..=v % 5 {
            g.src.push(v);
            g.dst.push((v + k) % n);
            g.w.push(1.0);
            g.l.push(0);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hot");
    let o = ImportOptions::default();
    let bytes: Vec<u8> = (0..n * 4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 4, bytes: bytes.clone() } };
    import(&out, &[mem_input(&g, &o)], &[t], &o, &quiet).unwrap();
    let all: Vec<u64> = (0..n).collect();
    let s = Store::open(
        &out,
        &OpenOptions { cache_bytes: 0, row_cache_bytes: RowCache::budget_for(9, &[16]) as u64, row_admission: RowAdmission::Hot, ..Default::default() },
    )
    .unwrap();
    assert_eq!(s.superblock().hot.words, n / 4, "a quarter of the vertices are ranked");
    s.verify(&mut |_, _| {}).unwrap();
    for _ in 0..3 {
        assert_eq!(s.tensor("x", &all).unwrap().data, bytes);
    }
    let hits = |ids: &[u64]| {
        s.reset_stats();
        s.tensor("x", ids).unwrap();
        s.stats().rows.unwrap().hits
    };
    let hot = [4, 9, 14, 19, 24, 29, 34, 39, 3];
    assert_eq!(hits(&hot), 9, "every admitted row stays cached");
    assert_eq!(hits(&[8, 13, 0, 1, 2]), 0, "rows past the budget's share of the ranking are not admitted");
    // Opening fills the cache with the hot rows: they hit before any read.
    let warm = Store::open(&out, &OpenOptions { cache_bytes: 0, row_cache_bytes: RowCache::budget_for(9, &[16]) as u64, ..Default::default() }).unwrap();
    let rows = warm.tensor("x", &hot).unwrap();
    let st = warm.stats().rows.unwrap();
    assert_eq!((st.hits, st.misses), (9, 0), "opening fills the row cache with the hubs' rows");
    for (i, &v) in hot.iter().enumerate() {
        assert_eq!(rows.data[i * 16..(i + 1) * 16], bytes[v as usize * 16..(v as usize + 1) * 16]);
    }
    // Admitting every row, cold rows are cached too.
    let all_rows = Store::open(
        &out,
        &OpenOptions { cache_bytes: 0, row_cache_bytes: RowCache::budget_for(9, &[16]) as u64, row_admission: RowAdmission::All, ..Default::default() },
    )
    .unwrap();
    all_rows.tensor("x", &[8, 13, 0, 1, 2]).unwrap();
    all_rows.reset_stats();
    all_rows.tensor("x", &[8, 13, 0, 1, 2]).unwrap();
    assert_eq!(all_rows.stats().rows.unwrap().hits, 5);
    // Rows an upcoming batch will ask for, on the page a gather reads for
    // another row, enter the (full) cache then; the page's other rows do not.
    let ahead = Store::open(&out, &OpenOptions { cache_bytes: 0, row_cache_bytes: RowCache::budget_for(20, &[16]) as u64, ..Default::default() }).unwrap();
    let expected = ahead.expect_rows(vec![5, 10]);
    assert_eq!(ahead.upcoming_rows(), 2);
    ahead.tensor("x", &[0]).unwrap();
    drop(expected);
    assert_eq!(ahead.upcoming_rows(), 0);
    ahead.reset_stats();
    let rows = ahead.tensor("x", &[5, 10]).unwrap();
    assert_eq!(ahead.stats().rows.unwrap().hits, 2, "upcoming rows beside a read one were not taken in");
    assert_eq!(rows.data, [&bytes[5 * 16..6 * 16], &bytes[10 * 16..11 * 16]].concat());
    ahead.reset_stats();
    ahead.tensor("x", &[15]).unwrap();
    assert_eq!(ahead.stats().rows.unwrap().hits, 0, "a row nobody expects was taken in beside a read one");
}

/// Every file under `dir`, by name, with its bytes.
fn dir_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

/// A `.npy` tensor put in degree order through buckets (several of them at
/// the least memory budget) reads as the input's rows by vertex, is byte
/// for byte the store the same rows given in memory make, and leaves no
/// bucket or build files behind: through files when the region cannot hold
/// them, else in the tensor's region.
#[test]
fn npy_tensor_in_degree_order_through_buckets() {
    for (n, dim, budget, in_region) in [(61u64, 8193u64, 16u64 << 20, false), (40_000, 16, 16 << 20, true), (40_000, 64, 64 << 20, true)] {
        npy_tensor_in_degree_order(n, dim, budget, in_region);
    }
}

fn npy_tensor_in_degree_order(n: u64, dim: u64, budget: u64, in_region: bool) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src: Vec<i64> = (0..n as i64).chain(0..n as i64).collect();
    let dst: Vec<i64> = (0..n as i64).map(|v| v * 7919 % n as i64).chain((0..n as i64).map(|v| v % 97)).collect();
    let ids: Vec<u8> = src.iter().chain(&dst).flat_map(|v| v.to_le_bytes()).collect();
    import::npy::write_npy(&d.join("e.npy"), "<i8", &[2, src.len() as u64], &ids).unwrap();
    let feats: Vec<u8> = (0..n * dim).flat_map(|i| (i as f32).to_le_bytes()).collect();
    import::npy::write_npy(&d.join("x.npy"), "<f4", &[n, dim], &feats).unwrap();
    let o = ImportOptions { undirected: true, dedup: true, order: order::VertexOrder::Degree, num_nodes: Some(n), memory_budget: budget, ..Default::default() };
    let plan = import::permute::plan(n, (dim * 4) as usize, o.memory_budget).unwrap();
    assert!(plan.buckets >= 4, "{plan:?}");
    assert_eq!(import::permute::fits_region(&plan, 4096, tensor::pages_for(n, dim * 4, 4096)), in_region, "{plan:?}");
    let edges = [EdgeInput::File(d.join("e.npy"))];
    let from_npy = [TensorInput { name: "x".into(), data: TensorData::Npy(d.join("x.npy")) }];
    let in_memory = [TensorInput { name: "x".into(), data: TensorData::Memory { dtype: tensor::DType::F32, rows: n, dim, bytes: feats.clone() } }];
    import(&d.join("npy"), &edges, &from_npy, &o, &quiet).unwrap();
    import(&d.join("mem"), &edges, &in_memory, &o, &quiet).unwrap();
    assert_eq!(dir_bytes(&d.join("npy")), dir_bytes(&d.join("mem")));
    let s = Store::open(&d.join("npy"), &OpenOptions::default()).unwrap();
    assert!(s.reordered());
    let want_ids: Vec<u64> = [0u64, 1, 7, 96, 12_345, n - 1].into_iter().filter(|&v| v < n).collect();
    let got = s.tensor("x", &want_ids).unwrap().data;
    let want: Vec<u8> = want_ids.iter().flat_map(|&v| feats[(v * dim * 4) as usize..((v + 1) * dim * 4) as usize].to_vec()).collect();
    assert_eq!(got, want);
    s.verify(&mut |_, _| {}).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["e.npy", "mem", "npy", "x.npy"]);
}

/// A reordered `.npy` tensor shorter than its header says fails with the
/// file's name and leaves nothing on disk.
#[test]
fn short_npy_tensor_in_degree_order_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 5000u64;
    let ids: Vec<u8> = (0..n as i64).chain((0..n as i64).map(|v| (v + 1) % n as i64)).flat_map(|v| v.to_le_bytes()).collect();
    import::npy::write_npy(&d.join("e.npy"), "<i8", &[2, n], &ids).unwrap();
    let feats: Vec<u8> = (0..n * 8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    import::npy::write_npy(&d.join("x.npy"), "<f4", &[n, 8], &feats).unwrap();
    let full = std::fs::metadata(d.join("x.npy")).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(d.join("x.npy")).unwrap().set_len(full - 100).unwrap();
    let o = ImportOptions { undirected: true, order: order::VertexOrder::Degree, memory_budget: 16 << 20, ..Default::default() };
    let t = [TensorInput { name: "x".into(), data: TensorData::Npy(d.join("x.npy")) }];
    let e = import(&d.join("s"), &[EdgeInput::File(d.join("e.npy"))], &t, &o, &quiet).unwrap_err();
    assert!(e.to_string().contains("x.npy"), "{e}");
    let mut left: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["e.npy", "x.npy"]);
}

#[test]
fn tensor_into_writes_every_byte_of_a_used_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let (n, dim) = (300u64, 5u64);
    let bytes: Vec<u8> = (0..n * dim).flat_map(|i| (i as f32 + 1.0).to_le_bytes()).collect();
    let g = Graph { src: vec![0, 1], dst: vec![1, 2], w: vec![1.0, 1.0], l: vec![0, 0] };
    let o = ImportOptions::default();
    let out = dir.path().join("t");
    let t = TensorInput { name: "feat".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim, bytes } };
    import(&out, &[mem_input(&g, &o)], &[t], &o, &quiet).unwrap();
    let rb = (dim * 4) as usize;
    for row_cache_bytes in [0, 64 * rb as u64] {
        let s = Store::open(&out, &OpenOptions { cache_bytes: 1 << 20, row_cache_bytes, writable: true, ..Default::default() }).unwrap();
        // Vertices past the imported rows: one with a row written since, two without (zeros).
        let new = s.add_vertices(3, &[], true).unwrap();
        s.update_tensor("feat", &[new.start + 1, 4], &vec![7u8; 2 * rb], true).unwrap();
        let mut ids: Vec<u64> = new.clone().chain((0..n).rev().step_by(11)).chain([4, 4, new.start]).collect();
        s.to_internal(&mut ids).unwrap();
        for _ in 0..2 {
            let want = s.tensor("feat", &ids).unwrap();
            let mut buf = vec![0xabu8; ids.len() * rb];
            s.tensor_into("feat", &ids, &mut buf).unwrap();
            assert_eq!(buf, want.data);
            assert!(buf[..rb].iter().all(|&b| b == 0) && buf[rb..2 * rb].iter().all(|&b| b == 7));
        }
        let mut short = vec![0u8; ids.len() * rb - 1];
        assert!(matches!(s.tensor_into("feat", &ids, &mut short), Err(StoreError::Invalid(_))));
        assert!(matches!(s.tensor_into("nope", &ids, &mut short), Err(StoreError::NoSuchTensor { .. })));
    }
}
