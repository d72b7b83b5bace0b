//! Updates against an in-memory reference graph: random interleavings of
//! every operation, merges (on request and by a delta budget), snapshots
//! and reopenings (WAL replay); rejected batches change nothing.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use solidgraph_store::*;

#[derive(Clone, Debug, Default)]
struct Model {
    n: u64,
    deleted: BTreeSet<u64>,
    out: BTreeMap<u64, BTreeMap<u64, f32>>,
    undirected: bool,
    rows: BTreeMap<u64, f32>,
}

impl Model {
    fn add(&mut self, s: u64, d: u64, w: f32) {
        self.out.entry(s).or_default().insert(d, w);
        if self.undirected {
            self.out.entry(d).or_default().insert(s, w);
        }
    }
    fn del(&mut self, s: u64, d: u64) {
        self.out.entry(s).or_default().remove(&d);
        if self.undirected {
            self.out.entry(d).or_default().remove(&s);
        }
    }
    fn delete_vertex(&mut self, v: u64) {
        self.deleted.insert(v);
        self.out.remove(&v);
        for m in self.out.values_mut() {
            m.remove(&v);
        }
    }
    fn edges(&self) -> u64 {
        self.out.values().map(|m| m.len() as u64).sum()
    }
    fn live(&self) -> Vec<u64> {
        (0..self.n).filter(|v| !self.deleted.contains(v)).collect()
    }
}

fn check(s: &Store, m: &Model) {
    assert_eq!(s.num_nodes(), m.n);
    assert_eq!(s.num_edges(), m.edges(), "edge count");
    let ids: Vec<u64> = (0..m.n).collect();
    let csr = s.neighbors(&ids, Direction::Out, true, false).unwrap();
    let w = csr.weights.as_ref().unwrap();
    for &v in &ids {
        let (a, b) = (csr.indptr[v as usize] as usize, csr.indptr[v as usize + 1] as usize);
        let want: Vec<(u64, f32)> = m.out.get(&v).map(|x| x.iter().map(|(&d, &w)| (d, w)).collect()).unwrap_or_default();
        let got: Vec<(u64, f32)> = csr.indices[a..b].iter().copied().zip(w[a..b].iter().copied()).collect();
        assert_eq!(got, want, "out-list of {v}");
    }
    if !m.undirected {
        let inn = s.neighbors(&ids, Direction::In, false, false).unwrap();
        for &v in &ids {
            let (a, b) = (inn.indptr[v as usize] as usize, inn.indptr[v as usize + 1] as usize);
            let want: Vec<u64> = m.out.iter().filter(|(_, l)| l.contains_key(&v)).map(|(&u, _)| u).collect();
            assert_eq!(&inn.indices[a..b], &want[..], "in-list of {v}");
        }
    }
    // Drawn positions read the lists as they are, or decline while updates
    // are pending (they would index the pages' lists).
    let every_reversed = |_: usize, d: u64, out: &mut Vec<usize>| out.extend((0..d as usize).rev());
    if let Some(dr) = s.neighbors_drawn(&ids, Direction::Out, every_reversed).unwrap() {
        let want: Vec<u64> = (0..ids.len()).flat_map(|i| csr.indices[csr.indptr[i] as usize..csr.indptr[i + 1] as usize].iter().rev().copied()).collect();
        assert_eq!(dr.ids, want, "drawn neighbors");
    }
    let deg = s.degree(&ids, Direction::Out).unwrap();
    assert_eq!(deg, ids.iter().map(|v| m.out.get(v).map_or(0, |l| l.len() as u64)).collect::<Vec<_>>());
    let x = s.tensor("x", &ids).unwrap();
    for &v in &ids {
        let got = f32::from_le_bytes(x.data[v as usize * 4..v as usize * 4 + 4].try_into().unwrap());
        assert_eq!(got, m.rows.get(&v).copied().unwrap_or(0.0), "row of {v}");
    }
}

#[derive(Debug, Clone)]
enum Step {
    AddEdges(Vec<(u64, u64, u8)>),
    DeleteSome(u64),
    Reweight(u64, u8),
    DeleteVertex(u64),
    AddVertices(u8),
    SetRow(u64, u8),
    Reopen,
    Merge,
    /// A snapshot keeps reading the graph as it was across a write and a merge.
    Snapshot(u64, u64),
    Bad(u8),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u8>()), 1..20).prop_map(Step::AddEdges),
        2 => any::<u64>().prop_map(Step::DeleteSome),
        2 => (any::<u64>(), any::<u8>()).prop_map(|(a, b)| Step::Reweight(a, b)),
        1 => any::<u64>().prop_map(Step::DeleteVertex),
        1 => (1u8..4).prop_map(Step::AddVertices),
        1 => (any::<u64>(), any::<u8>()).prop_map(|(a, b)| Step::SetRow(a, b)),
        1 => Just(Step::Reopen),
        2 => Just(Step::Merge),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(a, b)| Step::Snapshot(a, b)),
        1 => any::<u8>().prop_map(Step::Bad),
    ];
    proptest::collection::vec(step, 1..25)
}

fn open_w(path: &std::path::Path) -> Store {
    open_b(path, 0)
}

fn open_b(path: &std::path::Path, delta_budget: u64) -> Store {
    Store::open(path, &OpenOptions { writable: true, cache_bytes: 1 << 20, delta_budget, ..Default::default() }).unwrap()
}

fn verified(s: &Store) {
    if let Err(e) = s.verify(&mut |_, _| {}) {
        panic!("verify after merge: {e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn updates_match_the_model(n in 2u64..60, base in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..120), undirected in any::<bool>(), budget in prop_oneof![Just(0u64), Just(1), Just(2000)], plan in steps()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let mut m = Model { n, undirected, ..Default::default() };
        let (mut src, mut dst, mut ws) = (vec![0], vec![1], vec![0.5]);
        for &(a, b) in &base { src.push(a % n); dst.push(b % n); ws.push((a % 7) as f32); }
        // Dedup keeps the smallest weight of repeated edges: model it.
        let mut first: BTreeMap<(u64, u64), f32> = BTreeMap::new();
        for i in 0..src.len() {
            let keys = if undirected { vec![(src[i], dst[i]), (dst[i], src[i])] } else { vec![(src[i], dst[i])] };
            for k in keys { let e = first.entry(k).or_insert(ws[i]); if ws[i] < *e { *e = ws[i]; } }
        }
        for ((s, d), w) in first { m.out.entry(s).or_default().insert(d, w); }
        let o = ImportOptions { undirected, in_edges: !undirected, dedup: true, weights: true, num_nodes: Some(n), ..Default::default() };
        let x = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 1, bytes: vec![0; 4 * n as usize] } };
        import(&path, &[EdgeInput::Memory { src, dst, weights: Some(ws), labels: None }], &[x], &o, &|_, _, _| {}).unwrap();
        let mut s = open_b(&path, budget);
        check(&s, &m);
        for step in plan {
            let live = m.live();
            let pick = |r: u64| live[(r % live.len() as u64) as usize];
            match step {
                Step::AddEdges(es) if !live.is_empty() => {
                    let (a, b, w): (Vec<u64>, Vec<u64>, Vec<f32>) = es.iter().map(|&(x, y, w)| (pick(x), pick(y), w as f32)).fold((vec![], vec![], vec![]), |mut acc, (x, y, w)| { acc.0.push(x); acc.1.push(y); acc.2.push(w); acc });
                    s.add_edges(&a, &b, Some(&w), None, true).unwrap();
                    for i in 0..a.len() { m.add(a[i], b[i], w[i]); }
                }
                Step::DeleteSome(r) => {
                    let all: Vec<(u64, u64)> = m.out.iter().flat_map(|(&s, l)| l.keys().map(move |&d| (s, d))).filter(|(s, d)| !undirected || s <= d).collect();
                    if all.is_empty() { continue; }
                    let (a, b) = all[(r % all.len() as u64) as usize];
                    s.delete_edges(&[a], &[b], true).unwrap();
                    m.del(a, b);
                }
                Step::Reweight(r, w) => {
                    let all: Vec<(u64, u64)> = m.out.iter().flat_map(|(&s, l)| l.keys().map(move |&d| (s, d))).collect();
                    if all.is_empty() { continue; }
                    let (a, b) = all[(r % all.len() as u64) as usize];
                    s.update_edge_weights(&[a], &[b], &[w as f32 + 0.25], true).unwrap();
                    m.add(a, b, w as f32 + 0.25);
                }
                Step::DeleteVertex(r) if !live.is_empty() => {
                    let v = pick(r);
                    s.delete_vertices(&[v], true).unwrap();
                    m.delete_vertex(v);
                }
                Step::AddVertices(k) => {
                    let rows: Vec<u8> = (0..k).flat_map(|i| (100.0 + i as f32).to_le_bytes()).collect();
                    let ids = s.add_vertices(k as u64, &[("x".to_string(), rows)], true).unwrap();
                    prop_assert_eq!(ids.start, m.n);
                    for i in 0..k as u64 { m.rows.insert(m.n + i, 100.0 + i as f32); }
                    m.n += k as u64;
                }
                Step::SetRow(r, val) if !live.is_empty() => {
                    let v = pick(r);
                    s.update_tensor("x", &[v], &(val as f32).to_le_bytes(), true).unwrap();
                    m.rows.insert(v, val as f32);
                }
                Step::Reopen => {
                    drop(s);
                    s = open_b(&path, budget);
                }
                Step::Merge => {
                    s.merge().unwrap();
                    prop_assert_eq!(s.pending_updates(), 0);
                    verified(&s);
                }
                Step::Snapshot(x, y) if !live.is_empty() => {
                    let snap = s.snapshot();
                    let before = m.clone();
                    let (a, b) = (pick(x), pick(y));
                    s.add_edges(&[a], &[b], Some(&[9.0]), None, true).unwrap();
                    m.add(a, b, 9.0);
                    s.merge().unwrap();
                    check(&snap, &before);
                    prop_assert!(matches!(snap.add_edges(&[a], &[b], None, None, true), Err(StoreError::ReadOnly)));
                    drop(snap);
                    verified(&s);
                }
                Step::Bad(k) => {
                    // Each is rejected whole and changes nothing.
                    let missing = m.n + 5;
                    let r = match k % 5 {
                        0 => s.add_edges(&[0, missing], &[1, 0], Some(&[1.0, 1.0]), None, true),
                        1 => s.delete_edges(&[0, 0], &[1, 1], true),
                        2 => s.update_tensor("x", &[0], &[0u8; 3], true),
                        3 => s.add_edges(&[0], &[1], Some(&[f32::NAN]), None, true),
                        _ => s.delete_vertices(&[missing], true),
                    };
                    prop_assert!(r.is_err());
                }
                _ => continue,
            }
            check(&s, &m);
        }
        drop(s);
        check(&Store::open(&path, &OpenOptions::default()).unwrap(), &m);
        let s = open_w(&path);
        s.merge().unwrap();
        verified(&s);
        check(&s, &m);
    }
}

#[test]
fn one_writer_and_read_only_stores() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let o = ImportOptions { weights: true, ..Default::default() };
    import(&path, &[EdgeInput::Memory { src: vec![0, 1], dst: vec![1, 2], weights: Some(vec![1.0, 2.0]), labels: None }], &[], &o, &|_, _, _| {}).unwrap();
    let w = open_w(&path);
    let e = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).err().expect("second writer");
    assert!(matches!(e, StoreError::Locked { .. }), "{e}");
    let r = Store::open(&path, &OpenOptions::default()).unwrap();
    assert!(matches!(r.add_edges(&[0], &[2], None, None, true), Err(StoreError::ReadOnly)));
    w.add_edges(&[0], &[2], None, None, false).unwrap();
    w.flush().unwrap();
    // A reader opened later replays the log.
    let r2 = Store::open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(r2.neighbors(&[0], Direction::Out, true, false).unwrap().indices, vec![1, 2]);
    assert_eq!(r2.edge_weights(&[0], &[2]).unwrap(), vec![1.0]);
}
