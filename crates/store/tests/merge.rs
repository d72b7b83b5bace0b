//! Merges against a fresh import of the same graph: after updates and a
//! merge, every list, weight and tensor row equals what importing the
//! updated edge list gives; a merge writes pages in proportion to what
//! changed; freed pages are reused, so repeated merges do not grow the store.

use std::collections::BTreeSet;

use solidgraph_store::*;

fn lcg(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

fn import_edges(path: &std::path::Path, n: u64, edges: &BTreeSet<(u64, u64)>, rows: &[f32]) {
    let (src, dst): (Vec<u64>, Vec<u64>) = edges.iter().copied().unzip();
    let ws: Vec<f32> = edges.iter().map(|&(s, d)| ((s * 7 + d) % 13) as f32).collect();
    let o = ImportOptions { in_edges: true, weights: true, num_nodes: Some(n), ..Default::default() };
    let x = TensorInput {
        name: "x".into(),
        data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 3, bytes: rows.iter().flat_map(|v| v.to_le_bytes()).collect() },
    };
    import(path, &[EdgeInput::Memory { src, dst, weights: Some(ws), labels: None }], &[x], &o, &|_, _, _| {}).unwrap();
}

fn same_graph(a: &Store, b: &Store) {
    assert_eq!(a.num_nodes(), b.num_nodes());
    assert_eq!(a.num_edges(), b.num_edges());
    let ids: Vec<u64> = (0..a.num_nodes()).collect();
    for dir in [Direction::Out, Direction::In] {
        let (x, y) = (a.neighbors(&ids, dir, dir == Direction::Out, false).unwrap(), b.neighbors(&ids, dir, dir == Direction::Out, false).unwrap());
        assert_eq!(x.indptr, y.indptr, "{dir:?} degrees");
        assert_eq!(x.indices, y.indices, "{dir:?} lists");
        assert_eq!(x.weights, y.weights);
        // Edge ids are positions in CSR order: a merge renumbers them as an
        // import would.
        assert_eq!(x.first_edge, y.first_edge, "{dir:?} edge ids");
    }
    assert_eq!(a.tensor("x", &ids).unwrap(), b.tensor("x", &ids).unwrap());
}

#[test]
fn merge_equals_a_fresh_import_and_reuses_space() {
    let dir = tempfile::tempdir().unwrap();
    let (n, mut seed) = (20_000u64, 7u64);
    let mut edges = BTreeSet::new();
    while edges.len() < 150_000 {
        // Skewed: a few hubs get extents.
        let s = if lcg(&mut seed).is_multiple_of(10) { lcg(&mut seed) % 8 } else { lcg(&mut seed) % n };
        edges.insert((s, lcg(&mut seed) % n));
    }
    let mut rows: Vec<f32> = (0..3 * n).map(|i| i as f32).collect();
    let path = dir.path().join("g");
    import_edges(&path, n, &edges, &rows);
    let s = Store::open(&path, &OpenOptions { writable: true, delta_budget: 0, cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    let first_total = s.superblock().total_pages;
    let mut n_now = n;
    for round in 0..12 {
        // ~0.2% of vertices change: new edges, removed edges, new rows, and a
        // few new vertices.
        let mut add = Vec::new();
        for _ in 0..10 {
            let e = (lcg(&mut seed) % n_now, lcg(&mut seed) % n_now);
            if edges.insert(e) {
                add.push(e);
            }
        }
        let (a, b): (Vec<u64>, Vec<u64>) = add.iter().copied().unzip();
        let ws: Vec<f32> = add.iter().map(|&(s, d)| ((s * 7 + d) % 13) as f32).collect();
        s.add_edges(&a, &b, Some(&ws), None, false).unwrap();
        let gone: Vec<(u64, u64)> = edges.iter().copied().filter(|_| lcg(&mut seed).is_multiple_of(20_000)).collect();
        if !gone.is_empty() {
            let (a, b): (Vec<u64>, Vec<u64>) = gone.iter().copied().unzip();
            s.delete_edges(&a, &b, false).unwrap();
            gone.iter().for_each(|e| {
                edges.remove(e);
            });
        }
        let ids: Vec<u64> = (0..5).map(|_| lcg(&mut seed) % n_now).collect::<BTreeSet<_>>().into_iter().collect();
        let vals: Vec<f32> = ids.iter().flat_map(|&v| [v as f32 + 0.5, round as f32, -1.0]).collect();
        s.update_tensor("x", &ids, &vals.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(), false).unwrap();
        for (k, &v) in ids.iter().enumerate() {
            rows[3 * v as usize..3 * v as usize + 3].copy_from_slice(&vals[3 * k..3 * k + 3]);
        }
        if round % 3 == 0 {
            let new_rows: Vec<f32> = (0..6).map(|i| 1000.0 + i as f32).collect();
            s.add_vertices(2, &[("x".into(), new_rows.iter().flat_map(|v| v.to_le_bytes()).collect())], false).unwrap();
            rows.extend(new_rows);
            n_now += 2;
            // Edges to and from the new vertices, weighted by the formula
            // above, (s * 7 + d) % 13.
            let (u, v) = (n_now - 1, n_now - 2);
            s.add_edges(&[u, 0], &[1, v], Some(&[(u * 7 + 1) as f32 % 13.0, v as f32 % 13.0]), None, false).unwrap();
            edges.insert((u, 1));
            edges.insert((0, v));
        }
        let rep = s.merge().unwrap();
        assert!(rep.updates > 0 && rep.pages_written > 0);
        // ~0.2% of vertices changed: far fewer pages than the store.
        assert!(rep.pages_written * 4 < s.superblock().total_pages, "round {round}: wrote {} of {} pages", rep.pages_written, s.superblock().total_pages);
        s.verify(&mut |_, _| {}).unwrap();
        let fresh = dir.path().join(format!("fresh{round}"));
        import_edges(&fresh, n_now, &edges, &rows);
        same_graph(&s, &Store::open(&fresh, &OpenOptions::default()).unwrap());
    }
    // Retired pages were reused: twelve merges did not double the store.
    let total = s.superblock().total_pages;
    assert!(total < first_total * 3 / 2, "store grew from {first_total} to {total} pages");
    drop(s);
    let r = Store::open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(r.pending_updates(), 0, "the log was checkpointed");
    let fresh = dir.path().join("fresh11");
    same_graph(&r, &Store::open(&fresh, &OpenOptions::default()).unwrap());
}

#[test]
fn deleting_vertices_cleans_lists_on_merge() {
    let dir = tempfile::tempdir().unwrap();
    let n = 500u64;
    let mut seed = 3;
    let mut edges = BTreeSet::new();
    while edges.len() < 5000 {
        edges.insert((lcg(&mut seed) % n, lcg(&mut seed) % n));
    }
    let rows = vec![0.0f32; 3 * n as usize];
    let path = dir.path().join("g");
    import_edges(&path, n, &edges, &rows);
    let s = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    s.delete_vertices(&[3, 77, 401], true).unwrap();
    edges.retain(|&(a, b)| ![3, 77, 401].contains(&a) && ![3, 77, 401].contains(&b));
    s.merge().unwrap();
    s.verify(&mut |_, _| {}).unwrap();
    let fresh = dir.path().join("fresh");
    import_edges(&fresh, n, &edges, &rows);
    same_graph(&s, &Store::open(&fresh, &OpenOptions::default()).unwrap());
    // Still deleted after the merge and a reopen.
    drop(s);
    let s = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    assert!(s.add_edges(&[3], &[4], None, None, true).is_err());
}
