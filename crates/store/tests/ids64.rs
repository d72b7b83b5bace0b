//! 64-bit vertex ids: sparse ids above 2^32 with no vertex count given
//! import, and read back exactly, in and out, through the batched reads,
//! and take updates there.

use solidgraph_store::*;

#[test]
fn sparse_ids_above_2_pow_32_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.sg");
    let big = [3u64, 1 << 32, (1 << 32) + 1, (1 << 33) + 7, (1 << 40) + 11, (1 << 40) + 12];
    let (mut a, mut b) = (vec![], vec![]);
    for (i, &s) in big.iter().enumerate() {
        for &d in &big[i + 1..] {
            a.push(s);
            b.push(d);
        }
    }
    let o = ImportOptions { in_edges: true, ..Default::default() };
    let r = import(&p, &[EdgeInput::Memory { src: a, dst: b, weights: None, labels: None }], &[], &o, &|_, _, _| {}).unwrap();
    assert_eq!(r.num_nodes, big[5] + 1);
    assert_eq!(r.num_edges, 15);
    let s = Store::open(&p, &OpenOptions { writable: true, cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    s.verify(&mut |_, _| {}).unwrap();
    let out = s.neighbors(&big, Direction::Out, false, false).unwrap();
    let inn = s.neighbors(&big, Direction::In, false, false).unwrap();
    for (i, _) in big.iter().enumerate() {
        let o = &out.indices[out.indptr[i] as usize..out.indptr[i + 1] as usize];
        let n = &inn.indices[inn.indptr[i] as usize..inn.indptr[i + 1] as usize];
        assert_eq!(o, &big[i + 1..], "out-list of {}", big[i]);
        assert_eq!(n, &big[..i], "in-list of {}", big[i]);
    }
    // Ids between the stored ones have no edges; past the end is an error.
    assert_eq!(s.degree(&[(1 << 32) - 1, (1 << 35) + 1], Direction::Out).unwrap(), vec![0, 0]);
    assert!(matches!(s.neighbors(&[big[5] + 1], Direction::Out, false, false), Err(StoreError::VertexOutOfRange { .. })));
    // Updates at such ids, replayed from the log and merged.
    s.add_edges(&[big[4]], &[big[1]], None, None, true).unwrap();
    drop(s);
    let s = Store::open(&p, &OpenOptions { writable: true, cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    assert_eq!(s.neighbors(&[big[4]], Direction::Out, false, false).unwrap().indices, vec![big[1], big[5]]);
    s.merge().unwrap();
    s.verify(&mut |_, _| {}).unwrap();
    assert_eq!(s.neighbors(&[big[1]], Direction::In, false, false).unwrap().indices, vec![big[0], big[4]]);
}

/// Lower lists and a degree order keep a 4-byte table per vertex, so sparse
/// ids past the memory budget's worth of vertices are refused with an error
/// naming the budget (not an allocation of terabytes), and nothing is left
/// on disk; without either, the same edges import.
#[test]
fn sparse_ids_past_the_budget_refuse_per_vertex_tables() {
    let dir = tempfile::tempdir().unwrap();
    let edges = || vec![EdgeInput::Memory { src: vec![0, 5], dst: vec![1, 1 << 31], weights: None, labels: None }];
    let lower = ImportOptions { undirected: true, lower_lists: true, ..Default::default() };
    let degree = ImportOptions { order: order::VertexOrder::Degree, ..Default::default() };
    let declared = ImportOptions { num_nodes: Some(1 << 31), ..lower.clone() };
    for (name, o) in [("lower", &lower), ("degree", &degree), ("declared", &declared)] {
        let p = dir.path().join(format!("{name}.sg"));
        let e = import(&p, &edges(), &[], o, &|_, _, _| {}).expect_err(name);
        assert!(matches!(e, StoreError::Invalid(_)), "{name}: {e}");
        assert!(e.to_string().contains("memory budget"), "{name}: {e}");
        assert!(!p.exists(), "{name}: a refused import leaves no store");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "partial directories left: {leftovers:?}");
    let p = dir.path().join("plain.sg");
    let r = import(&p, &edges(), &[], &ImportOptions { undirected: true, ..Default::default() }, &|_, _, _| {}).unwrap();
    assert_eq!(r.num_nodes, (1 << 31) + 1);
}
