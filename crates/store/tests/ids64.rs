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
