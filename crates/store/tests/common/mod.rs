//! The workload of the crash tests (`crash.rs`, `kill9.rs`): a reference
//! model, a deterministic stream of update batches and merges, and the
//! comparison of a store with the model.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use solidgraph_store::*;

pub const N: u64 = 400;
pub const DIM: usize = 2;

#[derive(Clone, Debug, Default)]
pub struct Model {
    pub n: u64,
    pub out: BTreeMap<u64, BTreeMap<u64, f32>>,
    pub rows: BTreeMap<u64, [f32; DIM]>,
    pub deleted: BTreeSet<u64>,
}

#[derive(Debug)]
pub enum Batch {
    Add(Vec<u64>, Vec<u64>, Vec<f32>),
    Del(Vec<u64>, Vec<u64>),
    Rows(Vec<u64>, Vec<f32>),
    Vertices(u64),
    DeleteVertex(u64),
    Merge,
}

pub fn rnd(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

impl Model {
    pub fn live(&self) -> Vec<u64> {
        (0..self.n).filter(|v| !self.deleted.contains(v)).collect()
    }

    /// The next batch: a function of the model and the rng only, so parent
    /// and child generate the same sequence.
    pub fn next(&self, rng: &mut u64, i: u64) -> Batch {
        let live = self.live();
        let pick = |rng: &mut u64| live[(rnd(rng) % live.len() as u64) as usize];
        if i % 13 == 12 {
            return Batch::Merge;
        }
        match rnd(rng) % 20 {
            0..=9 => {
                let k = 1 + rnd(rng) % 40;
                let mut seen = BTreeSet::new();
                let (mut a, mut b, mut w) = (vec![], vec![], vec![]);
                for _ in 0..k {
                    let (s, d) = (pick(rng), pick(rng));
                    if seen.insert((s, d)) {
                        a.push(s);
                        b.push(d);
                        w.push((rnd(rng) % 100) as f32);
                    }
                }
                Batch::Add(a, b, w)
            }
            10..=13 => {
                let all: Vec<(u64, u64)> = self.out.iter().flat_map(|(&s, l)| l.keys().map(move |&d| (s, d))).collect();
                if all.is_empty() {
                    return Batch::Vertices(1);
                }
                let k = 1 + rnd(rng) % 10;
                let picked: BTreeSet<(u64, u64)> = (0..k).map(|_| all[(rnd(rng) % all.len() as u64) as usize]).collect();
                let (a, b) = picked.into_iter().unzip();
                Batch::Del(a, b)
            }
            14..=16 => {
                let ids: BTreeSet<u64> = (0..1 + rnd(rng) % 20).map(|_| pick(rng)).collect();
                let vals = ids.iter().flat_map(|_| (0..DIM).map(|_| (rnd(rng) % 1000) as f32).collect::<Vec<_>>()).collect();
                Batch::Rows(ids.into_iter().collect(), vals)
            }
            17 | 18 => Batch::Vertices(1 + rnd(rng) % 3),
            _ => Batch::DeleteVertex(pick(rng)),
        }
    }

    pub fn apply(&mut self, b: &Batch) {
        match b {
            Batch::Add(a, d, w) => {
                for i in 0..a.len() {
                    self.out.entry(a[i]).or_default().insert(d[i], w[i]);
                }
            }
            Batch::Del(a, d) => {
                for i in 0..a.len() {
                    self.out.entry(a[i]).or_default().remove(&d[i]);
                }
            }
            Batch::Rows(ids, vals) => {
                for (k, &v) in ids.iter().enumerate() {
                    self.rows.insert(v, vals[k * DIM..(k + 1) * DIM].try_into().unwrap());
                }
            }
            Batch::Vertices(k) => {
                for v in self.n..self.n + k {
                    self.rows.insert(v, [v as f32; DIM]);
                }
                self.n += k;
            }
            Batch::DeleteVertex(v) => {
                self.deleted.insert(*v);
                self.out.remove(v);
                for l in self.out.values_mut() {
                    l.remove(v);
                }
            }
            Batch::Merge => {}
        }
    }
}

pub fn apply_store(s: &Store, b: &Batch) -> Result<()> {
    match b {
        Batch::Add(a, d, w) => s.add_edges(a, d, Some(w), None, true),
        Batch::Del(a, d) => s.delete_edges(a, d, true),
        Batch::Rows(ids, vals) => s.update_tensor("x", ids, &vals.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(), true),
        Batch::Vertices(k) => {
            let rows: Vec<u8> = (s.num_nodes()..s.num_nodes() + k).flat_map(|v| [v as f32; DIM]).flat_map(|x| x.to_le_bytes()).collect();
            s.add_vertices(*k, &[("x".into(), rows)], true).map(|_| ())
        }
        Batch::DeleteVertex(v) => s.delete_vertices(&[*v], true),
        Batch::Merge => s.merge().map(|_| ()),
    }
}

/// Where the store differs from the model, if anywhere.
pub fn diff(s: &Store, m: &Model) -> Option<String> {
    if s.num_nodes() != m.n {
        return Some(format!("{} vertices, expected {}", s.num_nodes(), m.n));
    }
    let ids: Vec<u64> = (0..m.n).collect();
    let out = s.neighbors(&ids, Direction::Out, true, false).ok()?;
    let inn = s.neighbors(&ids, Direction::In, false, false).ok()?;
    let x = s.tensor("x", &ids).ok()?;
    let w = out.weights.as_ref()?;
    let mut ins: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (&a, l) in &m.out {
        for &b in l.keys() {
            ins.entry(b).or_default().push(a);
        }
    }
    for &v in &ids {
        let (a, b) = (out.indptr[v as usize] as usize, out.indptr[v as usize + 1] as usize);
        let got: Vec<(u64, f32)> = out.indices[a..b].iter().copied().zip(w[a..b].iter().copied()).collect();
        let want: Vec<(u64, f32)> = m.out.get(&v).map(|l| l.iter().map(|(&d, &w)| (d, w)).collect()).unwrap_or_default();
        if got != want {
            return Some(format!("out-list of {v}: {got:?}, expected {want:?}"));
        }
        let (a, b) = (inn.indptr[v as usize] as usize, inn.indptr[v as usize + 1] as usize);
        if inn.indices[a..b] != ins.get(&v).cloned().unwrap_or_default()[..] {
            return Some(format!("in-list of {v}"));
        }
        let row: Vec<f32> = x.data[v as usize * 4 * DIM..(v as usize + 1) * 4 * DIM].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        if row[..] != m.rows.get(&v).copied().unwrap_or([0.0; DIM])[..] {
            return Some(format!("row of {v}: {row:?}"));
        }
    }
    None
}

/// Imports the base graph; returns its model.
pub fn import_base(path: &Path, seed: u64) -> Model {
    let mut rng = seed;
    let mut m = Model { n: N, ..Default::default() };
    let (mut a, mut b, mut w) = (vec![], vec![], vec![]);
    for _ in 0..3000 {
        // A few hubs, so extents are in play.
        let s = if rnd(&mut rng).is_multiple_of(8) { rnd(&mut rng) % 4 } else { rnd(&mut rng) % N };
        let d = rnd(&mut rng) % N;
        if m.out.entry(s).or_default().insert(d, 1.0).is_none() {
            a.push(s);
            b.push(d);
            w.push(1.0);
        }
    }
    let rows: Vec<u8> = (0..N).flat_map(|v| [v as f32; DIM]).flat_map(|x| x.to_le_bytes()).collect();
    for v in 0..N {
        m.rows.insert(v, [v as f32; DIM]);
    }
    let o = ImportOptions { in_edges: true, weights: true, num_nodes: Some(N), page_size: 4096, ..Default::default() };
    let x = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: N, dim: DIM as u64, bytes: rows } };
    import(path, &[EdgeInput::Memory { src: a, dst: b, weights: Some(w), labels: None }], &[x], &o, &|_, _, _| {}).unwrap();
    m
}
