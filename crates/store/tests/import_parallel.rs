//! The import on both cores (batched reads, radix-sorted packed keys,
//! spilled runs) writes the same bytes as on one thread and in memory, and
//! the lists a reference builds from the same edges.

use std::collections::BTreeMap;
use std::path::Path;

use solidgraph_store::*;

fn quiet(_: &str, _: u64, _: u64) {}

fn rnd(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// `m` edges over the first `n - 100` of `n` vertices (the last 100 are
/// isolated), skewed toward low ids like a power law, with repeats and
/// self loops.
fn graph(n: u64, m: usize, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut x = seed | 1;
    let live = n - 100;
    let pick = |x: &mut u64| {
        let r = rnd(x);
        // The smaller of two draws favors low ids (hubs).
        (r % live).min((r >> 32) % live)
    };
    let (mut src, mut dst) = (Vec::with_capacity(m), Vec::with_capacity(m));
    while src.len() < m {
        let (s, d) = (pick(&mut x), pick(&mut x));
        src.push(s);
        dst.push(if rnd(&mut x).is_multiple_of(50) { s } else { d });
        if rnd(&mut x).is_multiple_of(20) {
            // A repeated edge.
            src.push(s);
            dst.push(d);
        }
    }
    (src, dst)
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("sg."))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

/// Imports on a pool of `threads` with `budget` bytes.
fn import_with(out: &Path, edges: &[EdgeInput], o: &ImportOptions, threads: usize, budget: u64) -> ImportReport {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let o = ImportOptions { memory_budget: budget, ..o.clone() };
    pool.install(|| import(out, edges, &[], &o, &quiet).unwrap())
}

/// The sorted lists of each vertex (by input id) under `undirected`, `dedup`
/// and `self_loops` (no other options), and the lower lists.
fn reference(src: &[u64], dst: &[u64], o: &ImportOptions, n: u64) -> (BTreeMap<u64, Vec<u64>>, BTreeMap<u64, Vec<u64>>) {
    let mut recs = Vec::new();
    for (&s, &d) in src.iter().zip(dst) {
        recs.push((s, d));
        if o.undirected && s != d {
            recs.push((d, s));
        }
    }
    recs.sort();
    let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (s, d) in recs {
        let l = out.entry(s).or_default();
        if !(o.dedup && l.last() == Some(&d)) {
            l.push(d);
        }
    }
    if o.self_loops {
        for v in 0..n {
            let l = out.entry(v).or_default();
            if let Err(p) = l.binary_search(&v) {
                l.insert(p, v);
            }
        }
    }
    let lower = out.iter().map(|(&v, l)| (v, l.iter().copied().filter(|&u| u <= v).collect::<Vec<_>>())).filter(|(_, l)| !l.is_empty()).collect();
    (out, lower)
}

fn lists(s: &Store, dir: Direction, n: u64) -> BTreeMap<u64, Vec<u64>> {
    let ids: Vec<u64> = (0..n).collect();
    let mut iids = ids.clone();
    s.to_internal(&mut iids).unwrap();
    let csr = s.neighbors(&iids, dir, false, false).unwrap();
    let mut m = BTreeMap::new();
    for (i, &v) in ids.iter().enumerate() {
        let mut l = csr.indices[csr.indptr[i] as usize..csr.indptr[i + 1] as usize].to_vec();
        if l.is_empty() {
            continue;
        }
        s.to_external(&mut l).unwrap();
        l.sort();
        m.insert(v, l);
    }
    m
}

#[test]
fn parallel_spilled_import_equals_one_thread_and_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let n = 30_000u64;
    let (src, dst) = graph(n, 700_000, 7);
    let edges = [EdgeInput::Memory { src: src.clone(), dst: dst.clone(), weights: None, labels: None }];
    let cases = [
        ImportOptions { undirected: true, dedup: true, lower_lists: true, order: order::VertexOrder::Degree, ..Default::default() },
        ImportOptions { undirected: true, self_loops: true, num_nodes: Some(n), ..Default::default() },
        ImportOptions { in_edges: true, dedup: true, num_nodes: Some(n), ..Default::default() },
    ];
    for (c, o) in cases.iter().enumerate() {
        // One thread in memory; both cores spilling many runs; both cores
        // in memory.
        let one = dir.path().join(format!("one-{c}"));
        let spilled = dir.path().join(format!("spilled-{c}"));
        let whole = dir.path().join(format!("whole-{c}"));
        let r1 = import_with(&one, &edges, o, 1, 1 << 30);
        let r2 = import_with(&spilled, &edges, o, 2, 16 << 20);
        let r3 = import_with(&whole, &edges, o, 2, 1 << 30);
        assert_eq!(r1.runs, 0, "case {c}: 1 GiB holds every record");
        assert_eq!(r3.runs, 0, "case {c}: 1 GiB holds every record on two threads too");
        assert!(r2.runs >= 2, "case {c}: 16 MiB must spill runs (got {})", r2.runs);
        assert_eq!(r1.input_edges, src.len() as u64);
        let bytes = files(&one);
        assert_eq!(files(&spilled), bytes, "case {c}: spilled on two threads");
        assert_eq!(files(&whole), bytes, "case {c}: in memory on two threads");

        let s = Store::open(&one, &OpenOptions::default()).unwrap();
        let nodes = s.num_nodes();
        let seen = src.iter().chain(&dst).max().unwrap() + 1;
        assert_eq!(nodes, o.num_nodes.unwrap_or(seen), "case {c}");
        let (want_out, want_lower) = reference(&src, &dst, o, nodes);
        assert_eq!(lists(&s, Direction::Out, nodes), want_out, "case {c}: out-lists");
        if o.lower_lists {
            // Lower lists hold the neighbors up to a vertex by the store's
            // ids (degree order here), not the input's.
            let rank = |v: u64| {
                let mut x = [v];
                s.to_internal(&mut x).unwrap();
                x[0]
            };
            let want: BTreeMap<u64, Vec<u64>> = want_out
                .iter()
                .map(|(&v, l)| (v, l.iter().copied().filter(|&u| rank(u) <= rank(v)).collect::<Vec<_>>()))
                .filter(|(_, l)| !l.is_empty())
                .collect();
            assert_eq!(lists(&s, Direction::Lower, nodes), want, "case {c}: lower lists");
            assert!(o.order == order::VertexOrder::Degree || want == want_lower);
        }
        if o.in_edges {
            let (want_in, _) = reference(&dst, &src, o, nodes);
            assert_eq!(lists(&s, Direction::In, nodes), want_in, "case {c}: in-lists");
        }
        s.verify(&mut |_, _| {}).unwrap();
    }
}

/// A sorter spills packed runs, then meets an id past 32 bits and goes on
/// with wide records: the merge of both forms is still in order.
#[test]
fn packed_runs_then_wide_ids_merge_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let big = (1u64 << 32) + 3;
    let (src, dst) = graph(20_000, 600_000, 11);
    let small = EdgeInput::Memory { src: src.clone(), dst: dst.clone(), weights: None, labels: None };
    let wide_src = vec![big, 5, big - 1, 0];
    let wide_dst = vec![0, big, 7, big - 1];
    let wide = EdgeInput::Memory { src: wide_src.clone(), dst: wide_dst.clone(), weights: None, labels: None };
    let o = ImportOptions { dedup: true, memory_budget: 16 << 20, ..Default::default() };
    let out = dir.path().join("mixed");
    let r = import(&out, &[small, wide], &[], &o, &quiet).unwrap();
    // Runs spilled while reading: packed ones only (the wide records go
    // last, spilled when the merge starts).
    assert!(r.runs >= 2, "packed runs before the wide ids (got {})", r.runs);
    let s = Store::open(&out, &OpenOptions::default()).unwrap();
    assert_eq!(s.num_nodes(), big + 1);
    let all_src: Vec<u64> = src.iter().chain(&wide_src).copied().collect();
    let all_dst: Vec<u64> = dst.iter().chain(&wide_dst).copied().collect();
    let (want, _) = reference(&all_src, &all_dst, &o, 0);
    let ids: Vec<u64> = want.keys().copied().collect();
    let csr = s.neighbors(&ids, Direction::Out, false, false).unwrap();
    for (i, (v, l)) in want.iter().enumerate() {
        assert_eq!(&csr.indices[csr.indptr[i] as usize..csr.indptr[i + 1] as usize], &l[..], "list of {v}");
    }
    assert_eq!(s.num_edges(), want.values().map(|l| l.len() as u64).sum::<u64>());
    s.verify(&mut |_, _| {}).unwrap();
}

/// Text parsed in blocks on both cores gives the store an .npy of the same
/// edges gives, and an error names the bad line deep in the file.
#[test]
fn text_in_blocks_equals_npy_and_names_the_bad_line() {
    use std::fmt::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (src, dst) = graph(50_000, 1_500_000, 3);
    let mut lines = vec!["# a comment".to_string()];
    for (i, (s, t)) in src.iter().zip(&dst).enumerate() {
        if i % 1000 == 0 {
            lines.push("% another".into());
            lines.push(String::new());
        }
        let mut l = String::new();
        match i % 3 {
            0 => write!(l, "{s} {t}"),
            1 => write!(l, "{s}\t{t}\r"),
            _ => write!(l, "  {s},{t}  "),
        }
        .unwrap();
        lines.push(l);
    }
    let text = lines.join("\n");
    assert!(text.len() > 16 << 20, "more than one block");
    std::fs::write(d.join("e.txt"), &text).unwrap();
    let ids: Vec<u8> = src.iter().chain(&dst).flat_map(|&v| (v as i64).to_le_bytes()).collect();
    import::npy::write_npy(&d.join("e.npy"), "<i8", &[2, src.len() as u64], &ids).unwrap();
    let o = ImportOptions { undirected: true, dedup: true, lower_lists: true, order: order::VertexOrder::Degree, ..Default::default() };
    let r = import(&d.join("t.sg"), &[EdgeInput::File(d.join("e.txt"))], &[], &o, &quiet).unwrap();
    assert_eq!(r.input_edges, src.len() as u64);
    import(&d.join("n.sg"), &[EdgeInput::File(d.join("e.npy"))], &[], &o, &quiet).unwrap();
    assert_eq!(files(&d.join("t.sg")), files(&d.join("n.sg")));

    // A bad line past the first block: its number, and nothing left behind.
    let bad = lines.len() - 1000;
    lines[bad] = "12 x".into();
    std::fs::write(d.join("bad.txt"), lines.join("\n")).unwrap();
    let out = d.join("bad.sg");
    match import(&out, &[EdgeInput::File(d.join("bad.txt"))], &[], &ImportOptions::default(), &quiet) {
        Err(StoreError::Parse { line, reason, .. }) => {
            assert_eq!(line, bad as u64 + 1, "{reason}");
            assert!(reason.contains("\"x\" is not an integer"), "{reason}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert!(!out.exists());
}

/// Words of a table (hot vertices, order), read through the store's file.
fn table(path: &Path, t: &superblock::Table, ps: usize) -> Vec<u64> {
    let bytes = std::fs::read(member_path(path, 0)).unwrap();
    let mut words = Vec::new();
    for k in 0..t.pages {
        let no = t.start + k;
        page::decode_table(no, &bytes[no as usize * ps..(no as usize + 1) * ps], k, &mut words).unwrap();
    }
    words
}

/// One direction's lists as a CSR: indptr, indices, edge ids, weights,
/// labels.
type Lists = (Vec<u64>, Vec<u64>, Vec<u64>, Option<Vec<f32>>, Option<Vec<u32>>);

/// Everything a store's reads give: each direction's lists with weights,
/// labels and global edge ids, the lower lists' degrees, the tables, a
/// tensor's rows.
#[derive(Debug, PartialEq)]
struct Reads {
    lists: Vec<Lists>,
    degrees: Option<Vec<u32>>,
    edges: u64,
    hot: Vec<u64>,
    order: Vec<u64>,
    rows: Vec<u8>,
}

fn reads(path: &Path) -> Reads {
    let s = Store::open(path, &OpenOptions::default()).unwrap();
    s.verify(&mut |_, _| {}).unwrap();
    let ids: Vec<u64> = (0..s.num_nodes()).collect();
    let (w, l) = (s.has_weights(), s.has_labels());
    let mut dirs = vec![Direction::Out];
    if s.directed() {
        dirs.push(Direction::In);
    }
    if s.has_lower_lists() {
        dirs.push(Direction::Lower);
    }
    let lists = dirs
        .into_iter()
        .filter(|&d| s.gtt(d).is_ok())
        .map(|d| {
            let c = s.neighbors(&ids, d, w, l).unwrap();
            (c.indptr, c.indices, c.first_edge, c.weights, c.labels)
        })
        .collect();
    let sb = s.superblock();
    let ps = s.page_size();
    Reads {
        lists,
        degrees: s.lower_degrees().unwrap(),
        edges: s.num_edges(),
        hot: table(path, &sb.hot, ps),
        order: table(path, &sb.order, ps),
        rows: s.tensor("x", &ids).unwrap().data,
    }
}

/// Out-, in- and lower lists laid out in several vertex ranges at once
/// (each range's pages written apart, then moved behind the one before)
/// read the same as one range laid out on one thread: lists with weights,
/// labels and edge ids, degrees, the hot and order tables, a tensor's rows;
/// in memory and spilled, and the same parts give the same bytes.
#[test]
fn layout_in_vertex_ranges_reads_as_one_range() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40_000u64;
    let (src, dst) = graph(n, 600_000, 5);
    let weights: Vec<f32> = (0..src.len()).map(|i| (i % 97) as f32 * 0.5).collect();
    let labels: Vec<u32> = (0..src.len()).map(|i| (i % 13) as u32).collect();
    let plain = EdgeInput::Memory { src: src.clone(), dst: dst.clone(), weights: None, labels: None };
    let rich = EdgeInput::Memory { src: src.clone(), dst: dst.clone(), weights: Some(weights), labels: Some(labels) };
    let x: Vec<u8> = (0..n * 4).map(|i| (i * 7 % 251) as u8).collect();
    let tensors = [TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 1, bytes: x } }];
    let degree = order::VertexOrder::Degree;
    let cases = [
        (&plain, ImportOptions { undirected: true, dedup: true, lower_lists: true, order: degree, num_nodes: Some(n), ..Default::default() }),
        (&plain, ImportOptions { undirected: true, self_loops: true, lower_lists: true, num_nodes: Some(n), ..Default::default() }),
        (&rich, ImportOptions { in_edges: true, dedup: true, weights: true, labels: true, self_loops: true, num_nodes: Some(n), ..Default::default() }),
        (&rich, ImportOptions { undirected: true, weights: true, labels: true, lower_lists: true, order: degree, num_nodes: Some(n), ..Default::default() }),
    ];
    for (c, (edges, o)) in cases.iter().enumerate() {
        let edges = std::slice::from_ref(*edges);
        let path = |name: &str| dir.path().join(format!("{name}-{c}"));
        let one = ImportOptions { layout_parts: 1, ..o.clone() };
        import(&path("one"), edges, &tensors, &one, &quiet).unwrap();
        let want = reads(&path("one"));
        assert!(want.lists[0].1.len() > 500_000, "case {c}: {} edges", want.lists[0].1.len());
        for parts in [2, 3, 7] {
            let p = ImportOptions { layout_parts: parts, ..o.clone() };
            let r = import(&path(&format!("mem{parts}")), edges, &tensors, &p, &quiet).unwrap();
            assert_eq!(r.runs, 0, "case {c}");
            assert_eq!(reads(&path(&format!("mem{parts}"))), want, "case {c}: {parts} ranges in memory");
            let spilled = ImportOptions { memory_budget: 16 << 20, ..p };
            let r = import(&path(&format!("spill{parts}")), edges, &tensors, &spilled, &quiet).unwrap();
            assert!(r.runs >= 2, "case {c}: 16 MiB spills (got {})", r.runs);
            assert_eq!(files(&path(&format!("spill{parts}"))), files(&path(&format!("mem{parts}"))), "case {c}: {parts} ranges spilled");
        }
    }
}
